//! The Broadcaster actor: fans every event out to every registered watcher, in intake order,
//! honouring each watcher's delivery policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix::prelude::*;
use tokio::sync::OwnedSemaphorePermit;

use kevents_core::EventFactory;

use crate::message::{DeliverySlot, EventBatch, EventMessage, Recorded};
use crate::recorder::{Item, build};
use crate::stats::{PipelineStats, WatcherStats};

/// How events reach one watcher. Both policies put a bounded queue in front of the watcher;
/// the bound is exact (a semaphore of `capacity` slots, each held by one message until the
/// watcher drops it), independent of actix's mailbox capacity.
///
/// ```
/// use kevents_actors::WatcherPolicy;
/// let p = WatcherPolicy::DropIfFull { capacity: 1000 };
/// assert_eq!(p.capacity(), 1000);
/// assert_eq!(WatcherPolicy::Backpressure { capacity: 0 }.capacity(), 1); // at least one slot
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatcherPolicy {
    /// At most once: when the watcher has `capacity` events queued, further events are
    /// dropped for this watcher only and counted. The broadcaster never waits, so a slow
    /// watcher never slows the others (client-go's only policy, but counted here).
    DropIfFull {
        /// Slots in the watcher's queue.
        capacity: usize,
    },
    /// Exactly once: when the queue is full the broadcaster waits for a free slot. That
    /// holds every other watcher back too and makes the intake fill up, whose own policy
    /// then decides.
    Backpressure {
        /// Slots in the watcher's queue.
        capacity: usize,
    },
}

impl Default for WatcherPolicy {
    /// Drop-if-full with 1000 slots, client-go's watcher queue size.
    fn default() -> Self {
        WatcherPolicy::DropIfFull { capacity: 1000 }
    }
}

impl WatcherPolicy {
    /// The number of slots (at least 1).
    pub fn capacity(&self) -> usize {
        let c = match *self {
            WatcherPolicy::DropIfFull { capacity } | WatcherPolicy::Backpressure { capacity } => {
                capacity
            }
        };
        c.clamp(
            1,
            (u32::MAX as usize).min(tokio::sync::Semaphore::MAX_PERMITS),
        )
    }

    /// `drop_if_full` or `backpressure`.
    pub fn as_str(&self) -> &'static str {
        match self {
            WatcherPolicy::DropIfFull { .. } => "drop_if_full",
            WatcherPolicy::Backpressure { .. } => "backpressure",
        }
    }
}

/// Identifies a registered watcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WatcherId(pub(crate) u64);

pub(crate) struct WatcherEntry {
    pub(crate) id: WatcherId,
    pub(crate) recipient: Recipient<EventMessage>,
    /// The pipeline's own watchers (sink chains) also take whole batches: same events, same
    /// order, same slots, one mailbox hand-off per batch instead of one per event.
    batch: Option<Recipient<EventBatch>>,
    pub(crate) stats: Arc<WatcherStats>,
    closed: AtomicBool,
}

impl WatcherEntry {
    pub(crate) fn new(
        id: WatcherId,
        recipient: Recipient<EventMessage>,
        stats: Arc<WatcherStats>,
    ) -> Self {
        WatcherEntry {
            id,
            recipient,
            batch: None,
            stats,
            closed: AtomicBool::new(false),
        }
    }

    fn connected(&self) -> bool {
        match &self.batch {
            Some(b) => b.connected(),
            None => self.recipient.connected(),
        }
    }
}

/// One watcher's state during the distribution of one batch.
#[derive(Default)]
struct Lane {
    /// Slots taken ahead for the next events of this batch (one `try_acquire_many` instead
    /// of one acquisition per event); given back when the batch is done.
    held: Option<OwnedSemaphorePermit>,
    /// Messages for a batch-capable watcher, sent together.
    pending: Vec<EventMessage>,
    accepted: u64,
    dropped_full: u64,
    dropped_closed: u64,
}

impl Lane {
    /// One slot for the current event, `remaining` events of the batch included, if free.
    fn take_slot(&mut self, w: &WatcherEntry, remaining: usize) -> Option<OwnedSemaphorePermit> {
        if let Some(held) = &mut self.held {
            if held.num_permits() > 1 {
                return held.split(1);
            }
            return self.held.take();
        }
        let slots = &w.stats.slots;
        let free = slots.available_permits().min(remaining);
        if free > 1
            && let Ok(free) = u32::try_from(free)
            && let Ok(mut many) = Arc::clone(slots).try_acquire_many_owned(free)
        {
            let one = many.split(1);
            self.held = Some(many);
            return one;
        }
        Arc::clone(slots).try_acquire_owned().ok()
    }

    fn deliver(
        &mut self,
        w: &WatcherEntry,
        seq: u64,
        record: &Arc<Recorded>,
        permit: OwnedSemaphorePermit,
        remaining: usize,
    ) {
        let msg = EventMessage::with_slot(seq, Arc::clone(record), DeliverySlot::new(permit));
        if w.batch.is_some() {
            if self.pending.capacity() == 0 {
                self.pending.reserve(remaining);
            }
            self.pending.push(msg);
        } else {
            w.recipient.do_send(msg);
        }
        self.accepted += 1;
    }

    /// Sends what is pending and publishes the counters.
    fn flush(&mut self, w: &WatcherEntry) {
        if !self.pending.is_empty()
            && let Some(b) = &w.batch
        {
            b.do_send(EventBatch(std::mem::take(&mut self.pending)));
        }
        if self.accepted > 0 {
            w.stats.accepted.add(std::mem::take(&mut self.accepted));
        }
        if self.dropped_full > 0 {
            let n = std::mem::take(&mut self.dropped_full);
            w.stats.dropped_full.add(n);
            w.stats.full_log.record(n);
        }
        if self.dropped_closed > 0 {
            w.stats
                .dropped_closed
                .add(std::mem::take(&mut self.dropped_closed));
        }
    }
}

/// Distribution of one batch, resumable after waiting for a backpressure watcher.
struct Distribution {
    watchers: Vec<Arc<WatcherEntry>>,
    lanes: Vec<Lane>,
    items: std::vec::IntoIter<Item>,
    factory: Arc<EventFactory>,
    stats: Arc<PipelineStats>,
    current: Option<(u64, Arc<Recorded>, usize)>,
    next_seq: u64,
    distributed: u64,
}

impl Distribution {
    fn new(
        watchers: Vec<Arc<WatcherEntry>>,
        items: Vec<Item>,
        factory: Arc<EventFactory>,
        stats: Arc<PipelineStats>,
        next_seq: u64,
    ) -> Self {
        let lanes = watchers.iter().map(|_| Lane::default()).collect();
        Distribution {
            watchers,
            lanes,
            items: items.into_iter(),
            factory,
            stats,
            current: None,
            next_seq,
            distributed: 0,
        }
    }

    /// Runs until the batch is done (`None`) or a backpressure watcher has no free slot
    /// (`Some(index)`; `current` then points at it, and everything accepted so far has been
    /// sent so that the watchers can make progress).
    ///
    /// Each event is offered to every watcher in registration order and built the first
    /// time one takes it (or waits for it): an event that every watcher drops is counted
    /// per watcher and never built.
    fn run(&mut self) -> Option<usize> {
        loop {
            let (seq, mut record, start, mut item) = match self.current.take() {
                Some((seq, record, i)) => (seq, Some(record), i, None),
                None => {
                    let Some(item) = self.items.next() else {
                        self.flush();
                        return None;
                    };
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    self.distributed += 1;
                    (seq, None, 0, Some(item))
                }
            };
            // This event and the ones still to come in this batch.
            let remaining = self.items.len() + 1;
            for i in start..self.watchers.len() {
                let w = &self.watchers[i];
                let lane = &mut self.lanes[i];
                if w.closed.load(Ordering::Relaxed) || !w.connected() {
                    w.closed.store(true, Ordering::Relaxed);
                    lane.dropped_closed += 1;
                    continue;
                }
                let permit = lane.take_slot(w, remaining);
                if permit.is_none() && matches!(w.stats.policy, WatcherPolicy::DropIfFull { .. }) {
                    lane.dropped_full += 1;
                    continue;
                }
                if record.is_none() {
                    record = item
                        .take()
                        .and_then(|it| build(&self.factory, it, &self.stats));
                    if record.is_none() {
                        // Unreachable in practice (checked at the call); counted as invalid,
                        // not as distributed.
                        self.distributed -= 1;
                        break;
                    }
                }
                let Some(r) = record.as_ref() else { break };
                match permit {
                    Some(p) => lane.deliver(w, seq, r, p, remaining),
                    None => {
                        if let Some(r) = record.take() {
                            self.current = Some((seq, r, i));
                        }
                        self.flush();
                        return Some(i);
                    }
                }
            }
        }
    }

    fn flush(&mut self) {
        for (w, lane) in self.watchers.iter().zip(&mut self.lanes) {
            lane.flush(w);
        }
    }

    /// Delivers the current event to the watcher it was blocked on, with the slot obtained.
    fn resume(&mut self, permit: OwnedSemaphorePermit) {
        if let Some((seq, record, i)) = self.current.take() {
            let remaining = self.items.len() + 1;
            self.lanes[i].deliver(&self.watchers[i], seq, &record, permit, remaining);
            self.current = Some((seq, record, i + 1));
        }
    }

    /// Gives back the slots taken ahead and not used (none unless a watcher closed).
    fn release_held(&mut self) {
        for lane in &mut self.lanes {
            lane.held = None;
        }
    }
}

/// Distribute these events (from the recorder actor).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Publish(pub(crate) Vec<Item>, pub(crate) Arc<EventFactory>);

/// Register a watcher; handled in order with `Publish`, so the watcher sees every event
/// published after this message.
#[derive(Message)]
#[rtype(result = "WatcherId")]
pub(crate) struct Register {
    pub(crate) recipient: Recipient<EventMessage>,
    /// The batched form of `recipient` (the pipeline's own sink chains).
    pub(crate) batch: Option<Recipient<EventBatch>>,
    pub(crate) stats: Arc<WatcherStats>,
}

/// Remove a watcher; returns whether it was registered.
#[derive(Message)]
#[rtype(result = "bool")]
pub(crate) struct Unregister(pub(crate) WatcherId);

/// Replies once everything published before it has been distributed, with the current
/// watchers' counters.
#[derive(Message)]
#[rtype(result = "Vec<Arc<WatcherStats>>")]
pub(crate) struct Drained;

/// Drop every watcher and stop.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct StopBroadcaster;

/// The Broadcaster actor.
pub(crate) struct Broadcaster {
    watchers: Vec<Arc<WatcherEntry>>,
    next_seq: u64,
    next_id: u64,
    stats: Arc<PipelineStats>,
}

impl Broadcaster {
    pub(crate) fn new(stats: Arc<PipelineStats>) -> Self {
        Broadcaster {
            watchers: Vec::new(),
            next_seq: 0,
            next_id: 0,
            stats,
        }
    }

    pub(crate) fn add(
        &mut self,
        recipient: Recipient<EventMessage>,
        stats: Arc<WatcherStats>,
    ) -> WatcherId {
        self.add_batched(recipient, None, stats)
    }

    /// Registers a watcher that also takes batches (see [`EventBatch`]).
    pub(crate) fn add_batched(
        &mut self,
        recipient: Recipient<EventMessage>,
        batch: Option<Recipient<EventBatch>>,
        stats: Arc<WatcherStats>,
    ) -> WatcherId {
        let id = WatcherId(self.next_id);
        self.next_id += 1;
        self.stats.add_watcher(Arc::clone(&stats));
        let mut entry = WatcherEntry::new(id, recipient, stats);
        entry.batch = batch;
        self.watchers.push(Arc::new(entry));
        id
    }

    fn finish(&mut self, d: &mut Distribution) {
        d.release_held();
        self.next_seq = d.next_seq;
        self.stats.intake.broadcast.add(d.distributed);
        for w in &d.watchers {
            w.stats.depth_gauge.set(w.stats.depth() as f64);
        }
        self.watchers.retain(|w| !w.closed.load(Ordering::Relaxed));
    }
}

impl Actor for Broadcaster {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Context<Self>) {
        self.stats.actor_started();
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.stats.actor_stopped();
    }
}

impl Handler<Publish> for Broadcaster {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, msg: Publish, _: &mut Context<Self>) -> Self::Result {
        let mut d = Distribution::new(
            self.watchers.clone(),
            msg.0,
            msg.1,
            Arc::clone(&self.stats),
            self.next_seq,
        );
        if d.run().is_none() {
            self.finish(&mut d);
            return AtomicResponse::new(Box::pin(actix::fut::ready(())));
        }
        // A backpressure watcher is full: wait for its slots, holding everything else back
        // (the actor handles no other message meanwhile, so the order is kept).
        let wait = async move {
            while let Some(i) = d.current.as_ref().map(|c| c.2) {
                let slots = Arc::clone(&d.watchers[i].stats.slots);
                match slots.acquire_owned().await {
                    Ok(permit) => d.resume(permit),
                    // The semaphore is never closed; treat it as a closed watcher.
                    Err(_) => {
                        d.current = d.current.take().map(|(s, r, i)| (s, r, i + 1));
                    }
                }
                if d.run().is_none() {
                    break;
                }
            }
            d
        };
        AtomicResponse::new(Box::pin(
            wait.into_actor(self)
                .map(|mut d, act, _| act.finish(&mut d)),
        ))
    }
}

impl Handler<Register> for Broadcaster {
    type Result = MessageResult<Register>;

    fn handle(&mut self, msg: Register, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.add_batched(msg.recipient, msg.batch, msg.stats))
    }
}

impl Handler<Unregister> for Broadcaster {
    type Result = bool;

    fn handle(&mut self, msg: Unregister, _: &mut Context<Self>) -> bool {
        let before = self.watchers.len();
        self.watchers.retain(|w| w.id != msg.0);
        before != self.watchers.len()
    }
}

impl Handler<Drained> for Broadcaster {
    type Result = MessageResult<Drained>;

    fn handle(&mut self, _: Drained, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.watchers.iter().map(|w| Arc::clone(&w.stats)).collect())
    }
}

impl Handler<StopBroadcaster> for Broadcaster {
    type Result = ();

    fn handle(&mut self, _: StopBroadcaster, ctx: &mut Context<Self>) {
        self.watchers.clear();
        ctx.stop();
    }
}
