//! The distribution of one batch of intake items to every watcher, in order: each event is
//! offered to each watcher's queue, built the first time one takes it, and delivered
//! (batched for the pipeline's own sink chains). Resumable after waiting for a full
//! backpressure queue.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix::Recipient;
use tokio::sync::OwnedSemaphorePermit;

use crate::event_pool::EventPool;
use crate::intake_item::{Factories, Item, build};
use crate::message::{DeliverySlot, EventBatch, EventMessage, Recorded};
use crate::overflow::{Repeats, stands_for as times};
use crate::queue::{Pending, Spill, WatcherQueue};
use crate::registry::Registry;

/// Identifies a registered watcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WatcherId(pub(crate) u64);

/// A registered watcher.
pub(crate) struct WatcherEntry {
    pub(crate) id: WatcherId,
    pub(crate) recipient: Recipient<EventMessage>,
    /// The pipeline's own watchers (sink chains) also take whole batches: same events, same
    /// order, same slots, one mailbox hand-off per batch instead of one per event.
    pub(crate) batch: Option<Recipient<EventBatch>>,
    pub(crate) queue: Arc<WatcherQueue>,
    pub(crate) closed: AtomicBool,
}

impl WatcherEntry {
    pub(crate) fn new(
        id: WatcherId,
        recipient: Recipient<EventMessage>,
        batch: Option<Recipient<EventBatch>>,
        queue: Arc<WatcherQueue>,
    ) -> Self {
        WatcherEntry {
            id,
            recipient,
            batch,
            queue,
            closed: AtomicBool::new(false),
        }
    }

    pub(crate) fn connected(&self) -> bool {
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
    /// Bytes taken ahead the same way.
    held_bytes: Option<OwnedSemaphorePermit>,
    /// Messages for a batch-capable watcher, sent together.
    pending: Vec<EventMessage>,
    accepted: u64,
    dropped_full: u64,
    dropped_closed: u64,
    coalesced: u64,
}

/// Bytes taken ahead of need for the next events of a batch: one semaphore operation per
/// this many bytes of events instead of one per event.
const BYTES_AHEAD: u32 = 64 << 10;

/// A slot and the bytes of one event.
pub(crate) type Permits = (OwnedSemaphorePermit, OwnedSemaphorePermit);

impl Lane {
    /// A slot and `size` bytes for the current event (`remaining` events of the batch
    /// included), if both are free.
    fn take(&mut self, w: &WatcherEntry, remaining: usize, size: usize) -> Option<Permits> {
        let bytes = self.take_bytes(w, w.queue.byte_cost(size))?;
        match self.take_slot(w, remaining) {
            Some(slot) => Some((slot, bytes)),
            None => {
                // Kept for the next event of this batch (given back with the batch).
                match &mut self.held_bytes {
                    Some(h) => h.merge(bytes),
                    None => self.held_bytes = Some(bytes),
                }
                None
            }
        }
    }

    /// `n` bytes, from those taken ahead or from the queue (with some ahead), if free.
    fn take_bytes(&mut self, w: &WatcherEntry, n: u32) -> Option<OwnedSemaphorePermit> {
        let held = self.held_bytes.as_ref().map_or(0, |h| h.num_permits());
        if held < n as usize {
            let need = n - held as u32;
            let got = w.queue.try_bytes(need, BYTES_AHEAD)?;
            match &mut self.held_bytes {
                Some(h) => h.merge(got),
                None => self.held_bytes = Some(got),
            }
        }
        let h = self.held_bytes.as_mut()?;
        if h.num_permits() == n as usize {
            return self.held_bytes.take();
        }
        h.split(n as usize)
    }

    /// One slot for the current event, `remaining` events of the batch included, if free.
    fn take_slot(&mut self, w: &WatcherEntry, remaining: usize) -> Option<OwnedSemaphorePermit> {
        if let Some(held) = &mut self.held {
            if held.num_permits() > 1 {
                return held.split(1);
            }
            return self.held.take();
        }
        if let Some(mut many) = w.queue.try_slots(remaining) {
            let one = many.split(1);
            self.held = Some(many);
            return one;
        }
        w.queue.try_slot()
    }

    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        w: &WatcherEntry,
        seq: u64,
        record: &Arc<Recorded>,
        repeats: Option<Repeats>,
        (slot, bytes): Permits,
        remaining: usize,
    ) {
        let slot = DeliverySlot::new(slot, bytes);
        let msg = EventMessage::with_slot(seq, Arc::clone(record), slot, repeats);
        if w.batch.is_some() {
            if self.pending.capacity() == 0 {
                self.pending.reserve(remaining);
            }
            self.pending.push(msg);
        } else {
            w.recipient.do_send(msg);
        }
        self.accepted += times(repeats);
    }

    /// Merges the event into the watcher's overflow table (coalesce-if-full).
    fn spill(
        &mut self,
        w: &WatcherEntry,
        seq: u64,
        record: &Arc<Recorded>,
        repeats: Option<Repeats>,
        size: usize,
    ) {
        let pending = Pending {
            seq,
            record: Arc::clone(record),
            size,
        };
        match w.queue.spill(pending, repeats) {
            Spill::Added => {}
            Spill::Coalesced => self.coalesced += times(repeats),
            Spill::Full => self.dropped_full += times(repeats),
        }
    }

    /// Gives back the slots and bytes taken ahead and not used.
    fn release_held(&mut self) {
        self.held = None;
        self.held_bytes = None;
    }

    /// Sends what is pending and publishes the counters.
    fn flush(&mut self, w: &WatcherEntry) {
        if !self.pending.is_empty()
            && let Some(b) = &w.batch
        {
            b.do_send(EventBatch(std::mem::take(&mut self.pending)));
        }
        let c = &w.queue.counters;
        c.accepted(std::mem::take(&mut self.accepted));
        c.dropped_full(std::mem::take(&mut self.dropped_full));
        c.dropped_closed(std::mem::take(&mut self.dropped_closed));
        c.coalesced(std::mem::take(&mut self.coalesced));
    }
}

/// Delivers what fits of a coalescing watcher's overflow table, oldest first, as long as a
/// slot and the entry's bytes are free. Returns whether entries are left.
pub(crate) fn drain_overflow(w: &WatcherEntry) -> bool {
    let mut lane = Lane::default();
    if w.closed.load(Ordering::Relaxed) || !w.connected() {
        // Nobody to deliver to: what the table holds is dropped as `closed`.
        while let Some(d) = w.queue.pop_overflow() {
            lane.dropped_closed += d.times();
        }
        lane.flush(w);
        return false;
    }
    while let Some(size) = w.queue.overflow_head_size() {
        let Some(permits) = lane.take(w, 1, size) else {
            break;
        };
        let Some(d) = w.queue.pop_overflow() else {
            break;
        };
        let p = d.value;
        lane.deliver(w, p.seq, &p.record, d.repeats, permits, 1);
    }
    lane.release_held();
    lane.flush(w);
    w.queue.publish_depth();
    w.queue.overflow_active()
}

/// An event waiting for a backpressure watcher's slot.
pub(crate) struct Current {
    seq: u64,
    record: Arc<Recorded>,
    /// The index of the watcher it waits for.
    pub(crate) watcher: usize,
    /// The event's size.
    pub(crate) size: usize,
    repeats: Option<Repeats>,
}

/// Distribution of one batch, resumable after waiting for a backpressure watcher.
pub(crate) struct Distribution {
    pub(crate) watchers: Vec<Arc<WatcherEntry>>,
    lanes: Vec<Lane>,
    items: std::vec::IntoIter<Item>,
    factory: Arc<Factories>,
    /// Written core/v1 events to build into.
    pool: Arc<EventPool>,
    registry: Arc<Registry>,
    /// The event waiting for a backpressure watcher.
    pub(crate) current: Option<Current>,
    pub(crate) next_seq: u64,
    pub(crate) distributed: u64,
}

impl Distribution {
    pub(crate) fn new(
        watchers: Vec<Arc<WatcherEntry>>,
        items: Vec<Item>,
        factory: Arc<Factories>,
        pool: Arc<EventPool>,
        registry: Arc<Registry>,
        next_seq: u64,
    ) -> Self {
        let lanes = watchers.iter().map(|_| Lane::default()).collect();
        Distribution {
            watchers,
            lanes,
            items: items.into_iter(),
            factory,
            pool,
            registry,
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
    pub(crate) fn run(&mut self) -> Option<usize> {
        loop {
            let (seq, mut record, start, mut item, size, repeats) = match self.current.take() {
                Some(Current {
                    seq,
                    record,
                    watcher,
                    size,
                    repeats,
                }) => (seq, Some(record), watcher, None, size, repeats),
                None => {
                    let Some(item) = self.items.next() else {
                        self.flush();
                        return None;
                    };
                    let (item, repeats) = item.split_repeats();
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    self.distributed += times(repeats);
                    let size = item.approx_bytes();
                    (seq, None, 0, Some(item), size, repeats)
                }
            };
            let n = times(repeats);
            // This event and the ones still to come in this batch.
            let remaining = self.items.len() + 1;
            for i in start..self.watchers.len() {
                let w = &self.watchers[i];
                let lane = &mut self.lanes[i];
                if w.closed.load(Ordering::Relaxed) || !w.connected() {
                    w.closed.store(true, Ordering::Relaxed);
                    lane.dropped_closed += n;
                    continue;
                }
                // Behind a non-empty overflow table: merged, so that the watcher sees
                // events in order.
                let permit = if w.queue.overflow_active() {
                    None
                } else {
                    lane.take(w, remaining, size)
                };
                if permit.is_none() && w.queue.drops_when_full() {
                    lane.dropped_full += n;
                    continue;
                }
                if record.is_none() {
                    record = item
                        .take()
                        .and_then(|it| build(&self.factory, it, &self.pool, &self.registry.intake));
                    if record.is_none() {
                        // Unreachable in practice (checked at the call); counted as invalid,
                        // not as distributed.
                        self.distributed -= n;
                        break;
                    }
                }
                let Some(r) = record.as_ref() else { break };
                match permit {
                    Some(p) => lane.deliver(w, seq, r, repeats, p, remaining),
                    None if w.queue.coalesces() => lane.spill(w, seq, r, repeats, size),
                    None => {
                        if let Some(record) = record.take() {
                            self.current = Some(Current {
                                seq,
                                record,
                                watcher: i,
                                size,
                                repeats,
                            });
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
    pub(crate) fn resume(&mut self, permits: Permits) {
        if let Some(mut c) = self.current.take() {
            let remaining = self.items.len() + 1;
            let i = c.watcher;
            self.lanes[i].deliver(
                &self.watchers[i],
                c.seq,
                &c.record,
                c.repeats,
                permits,
                remaining,
            );
            c.watcher += 1;
            self.current = Some(c);
        }
    }

    /// Gives up on the watcher the current event waits for (its queue was closed).
    pub(crate) fn skip_current(&mut self) {
        if let Some(c) = &mut self.current {
            c.watcher += 1;
        }
    }

    /// Gives back the slots taken ahead and not used (none unless a watcher closed).
    pub(crate) fn release_held(&mut self) {
        for lane in &mut self.lanes {
            lane.release_held();
        }
    }
}
