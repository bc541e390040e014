//! The Broadcaster actor: fans every event out to every registered watcher, in intake order,
//! honouring each watcher's delivery policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix::prelude::*;
use tokio::sync::OwnedSemaphorePermit;

use crate::message::{DeliverySlot, EventMessage, Recorded};
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
            stats,
            closed: AtomicBool::new(false),
        }
    }

    fn send(&self, seq: u64, record: &Arc<Recorded>, permit: OwnedSemaphorePermit) {
        self.recipient.do_send(EventMessage::with_slot(
            seq,
            Arc::clone(record),
            DeliverySlot::new(permit),
        ));
        self.stats.accepted.add(1);
    }

    /// Offers one event. `false` means "blocked": a backpressure watcher without a free slot.
    fn offer(&self, seq: u64, record: &Arc<Recorded>) -> bool {
        if self.closed.load(Ordering::Relaxed) || !self.recipient.connected() {
            self.closed.store(true, Ordering::Relaxed);
            self.stats.dropped_closed.add(1);
            return true;
        }
        match Arc::clone(&self.stats.slots).try_acquire_owned() {
            Ok(permit) => {
                self.send(seq, record, permit);
                true
            }
            Err(_) => match self.stats.policy {
                WatcherPolicy::DropIfFull { .. } => {
                    self.stats.dropped_full.add(1);
                    self.stats.full_log.record(1);
                    true
                }
                WatcherPolicy::Backpressure { .. } => false,
            },
        }
    }
}

/// Distribution of one batch, resumable after waiting for a backpressure watcher.
struct Distribution {
    watchers: Vec<Arc<WatcherEntry>>,
    items: std::vec::IntoIter<Arc<Recorded>>,
    current: Option<(u64, Arc<Recorded>, usize)>,
    next_seq: u64,
    distributed: u64,
}

impl Distribution {
    /// Runs until the batch is done (`None`) or a backpressure watcher has no free slot
    /// (`Some(index)`; `current` then points at it).
    fn run(&mut self) -> Option<usize> {
        loop {
            let (seq, record, start) = match self.current.take() {
                Some(c) => c,
                None => {
                    let record = self.items.next()?;
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    self.distributed += 1;
                    (seq, record, 0)
                }
            };
            for i in start..self.watchers.len() {
                if !self.watchers[i].offer(seq, &record) {
                    self.current = Some((seq, record, i));
                    return Some(i);
                }
            }
        }
    }

    /// Delivers the current event to the watcher it was blocked on, with the slot obtained.
    fn resume(&mut self, permit: OwnedSemaphorePermit) {
        if let Some((seq, record, i)) = self.current.take() {
            self.watchers[i].send(seq, &record, permit);
            self.current = Some((seq, record, i + 1));
        }
    }
}

/// Distribute these events (from the recorder actor).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Publish(pub(crate) Vec<Arc<Recorded>>);

/// Register a watcher; handled in order with `Publish`, so the watcher sees every event
/// published after this message.
#[derive(Message)]
#[rtype(result = "WatcherId")]
pub(crate) struct Register {
    pub(crate) recipient: Recipient<EventMessage>,
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
        let id = WatcherId(self.next_id);
        self.next_id += 1;
        self.stats.add_watcher(Arc::clone(&stats));
        self.watchers
            .push(Arc::new(WatcherEntry::new(id, recipient, stats)));
        id
    }

    fn finish(&mut self, d: &Distribution) {
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
        let mut d = Distribution {
            watchers: self.watchers.clone(),
            items: msg.0.into_iter(),
            current: None,
            next_seq: self.next_seq,
            distributed: 0,
        };
        if d.run().is_none() {
            self.finish(&d);
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
            wait.into_actor(self).map(|d, act, _| act.finish(&d)),
        ))
    }
}

impl Handler<Register> for Broadcaster {
    type Result = MessageResult<Register>;

    fn handle(&mut self, msg: Register, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.add(msg.recipient, msg.stats))
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
