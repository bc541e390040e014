//! The Correlator actor of a core/v1 chain: a watcher that runs client-go's correlator on
//! every event, sends the writes to its sink actor, and learns the server's state back from
//! the sink's replies.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use std::cell::Cell;

use kevents_core::__private::{self, StateHint};
use kevents_core::{Correlator, CorrelatorOptions};

use super::sink::{
    Abandon, CorrelatedWrite, Learned, SinkActor, WhenIdle, WriteBatch, WriteDoneBatch,
};
use crate::event_pool::EventPool;
use crate::fast_map::FastMap;
use crate::message::{DeliverySlot, EventBatch, EventMessage, SharedCore, core_repeat};
use crate::registry::Registry;
use crate::telemetry::{Decisions, SinkCounters};

/// Stop the correlator (after telling its sink to abandon what it still holds).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct StopCorrelator;

/// Write every deferred spam tail now (shutdown); replies once the sink has finished every
/// write it holds.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct ReleaseTails;

/// How often a chain with deferred spam tails (`SinkOptions::defer_spam_tails`) asks the
/// spam filter whether a held state may be written; more often when the filter refills
/// faster (a quarter of its refill period, at least every 100 ms).
pub const TAIL_CHECK: Duration = Duration::from_secs(30);

/// The newest skipped state of an event, waiting for its object's spam bucket.
struct Tail {
    event: SharedCore,
    patch: Option<Vec<u8>>,
}

/// Deferred spam tails: one held state per event (`namespace/name`), bounded.
pub(crate) struct Tails {
    held: FastMap<Arc<str>, Tail>,
    cap: usize,
    check: Duration,
}

impl Tails {
    /// Tails for a correlator with `o`'s options: as many events as its LRU holds (4 096 by
    /// default), checked every [`TAIL_CHECK`] or a quarter of the refill period.
    pub(crate) fn new(o: &CorrelatorOptions) -> Self {
        let cap = usize::try_from(o.lru_cache_size)
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or(4096);
        let refill = if o.qps > 0.0 && o.qps.is_finite() {
            Duration::from_secs_f64(f64::from(1.0 / o.qps)).min(TAIL_CHECK * 4)
        } else {
            TAIL_CHECK * 4
        };
        Tails {
            held: FastMap::default(),
            cap,
            check: (refill / 4).clamp(Duration::from_millis(100), TAIL_CHECK),
        }
    }
}

/// An event's writes sent and not yet answered. Cells, so a write is counted with one
/// lookup (`get_key_value` hands out the shared key and a shared reference).
struct InFlight {
    writes: Cell<u32>,
    /// Where the correlator keeps the event's state (its latest correlation's hint).
    hint: Cell<Option<StateHint>>,
}

/// The Correlator actor.
pub(crate) struct CorrelatorActor {
    correlator: Correlator,
    sink: Option<Addr<SinkActor>>,
    /// Deferred spam tails, when the chain keeps them.
    tails: Option<Tails>,
    /// Writes sent and not yet answered, per event (`namespace/name`). The server's state is
    /// learnt only from the answer to the latest write of an event: an older answer would
    /// roll the cached count back.
    in_flight: FastMap<Arc<str>, InFlight>,
    /// Reused to build keys.
    key_buf: String,
    counters: Arc<SinkCounters>,
    /// Where events learnt from as sent go back to, to be built into again.
    pool: Arc<EventPool>,
    registry: Arc<Registry>,
}

impl CorrelatorActor {
    pub(crate) fn new(
        correlator: Correlator,
        sink: Addr<SinkActor>,
        tails: Option<Tails>,
        counters: Arc<SinkCounters>,
        pool: Arc<EventPool>,
        registry: Arc<Registry>,
    ) -> Self {
        CorrelatorActor {
            correlator,
            sink: Some(sink),
            tails,
            in_flight: FastMap::default(),
            key_buf: String::new(),
            counters,
            pool,
            registry,
        }
    }

    /// Correlates one message: its event, then each repeat merged into it by a coalescing
    /// queue (as the recorder would have built it, at the newest repeat's instant), so the
    /// correlator counts every occurrence. The writes to make are appended to `writes`; the
    /// slot travels with the last of them (a spam-filtered or foreign event gives its slot
    /// back here).
    fn correlate(
        &mut self,
        msg: EventMessage,
        writes: &mut Vec<CorrelatedWrite>,
        t: &mut Decisions,
    ) {
        let repeats = msg.repeats();
        let (record, slot) = msg.into_parts();
        // The (first) occurrence is the broadcaster's record itself: correlated in place,
        // copied only when another watcher holds it too. events.k8s.io/v1 events belong to
        // series sink chains (the fallback to core/v1 happens at the recorder, which then
        // emits `Recorded::CoreV1`).
        let Some(first) = SharedCore::from_recorded(record) else {
            return;
        };
        let Some(repeats) = repeats else {
            self.correlate_one(first, slot, writes, t);
            return;
        };
        let repeat = core_repeat(&first, repeats.last);
        let before = writes.len();
        self.correlate_one(first, DeliverySlot::detached(), writes, t);
        for _ in 0..repeats.more {
            self.correlate_one(
                SharedCore::new(repeat.clone()),
                DeliverySlot::detached(),
                writes,
                t,
            );
        }
        // The slot is held until the last write this message caused is finished.
        if writes.len() > before
            && let Some(w) = writes.last_mut()
        {
            w.slot = slot;
        }
    }

    /// Correlates one event.
    fn correlate_one(
        &mut self,
        mut event: SharedCore,
        slot: DeliverySlot,
        writes: &mut Vec<CorrelatedWrite>,
        t: &mut Decisions,
    ) {
        if self.sink.is_none() {
            t.abandoned += 1;
            return;
        }
        t.correlated += 1;
        // In place: the event is not moved into and out of the correlator.
        let c = __private::correlate_in_place(&mut self.correlator, event.make_mut());
        if c.aggregated {
            t.aggregated += 1;
        }
        if c.skip && self.tails.is_none() {
            t.spam_filtered += 1;
            return;
        }
        let buf = &mut self.key_buf;
        buf.clear();
        buf.push_str(&event.metadata.namespace);
        buf.push('/');
        buf.push_str(&event.metadata.name);
        if c.skip {
            if let Some(tails) = &mut self.tails {
                if let Some(held) = tails.held.get_mut(buf.as_str()) {
                    // The newer state counts the older one's occurrences.
                    *held = Tail {
                        event,
                        patch: c.patch,
                    };
                    self.counters.tail_kept(true);
                    return;
                }
                if tails.held.len() < tails.cap {
                    let key: Arc<str> = Arc::from(buf.as_str());
                    tails.held.insert(
                        key,
                        Tail {
                            event,
                            patch: c.patch,
                        },
                    );
                    self.counters.tail_kept(false);
                    return;
                }
            }
            t.spam_filtered += 1;
            return;
        }
        if let Some(tails) = &mut self.tails
            && tails.held.remove(buf.as_str()).is_some()
        {
            // This write carries a newer state than the one held.
            self.counters.tail_superseded();
        }
        self.push_write(event, c.patch, c.hint, slot, writes);
    }

    /// Queues the write of `event` (a CREATE, or the PATCH `patch`), counting it in flight
    /// for its event (`self.key_buf` holds its `namespace/name`).
    fn push_write(
        &mut self,
        event: SharedCore,
        patch: Option<Vec<u8>>,
        hint: Option<StateHint>,
        slot: DeliverySlot,
        writes: &mut Vec<CorrelatedWrite>,
    ) {
        let buf = &self.key_buf;
        let key = match self.in_flight.get_key_value(buf.as_str()) {
            Some((k, f)) => {
                f.writes.set(f.writes.get() + 1);
                f.hint.set(hint);
                Arc::clone(k)
            }
            None => {
                let k: Arc<str> = Arc::from(buf.as_str());
                let f = InFlight {
                    writes: Cell::new(1),
                    hint: Cell::new(hint),
                };
                self.in_flight.insert(Arc::clone(&k), f);
                k
            }
        };
        writes.push(CorrelatedWrite {
            key,
            event,
            patch,
            slot,
        });
    }

    /// Writes the held tails whose object's spam bucket has a token again (every one when
    /// `all`, at shutdown).
    fn release_tails(&mut self, all: bool) {
        let Some(tails) = &mut self.tails else { return };
        if tails.held.is_empty() || self.sink.is_none() {
            return;
        }
        let correlator = &mut self.correlator;
        let ready: Vec<Arc<str>> = tails
            .held
            .iter()
            .filter(|(_, tail)| all || correlator.spam_allows(&tail.event))
            .map(|(k, _)| Arc::clone(k))
            .collect();
        let mut writes = Vec::with_capacity(ready.len());
        for k in ready {
            let Some(tail) = self.tails.as_mut().and_then(|t| t.held.remove(&k)) else {
                continue;
            };
            self.key_buf.clear();
            self.key_buf.push_str(&k);
            // No hint: other correlations have happened since (update_state finds it).
            self.push_write(
                tail.event,
                tail.patch,
                None,
                DeliverySlot::detached(),
                &mut writes,
            );
        }
        self.counters.tails_released(writes.len() as u64);
        if !writes.is_empty()
            && let Some(sink) = &self.sink
        {
            sink.do_send(WriteBatch(writes));
        }
    }

    /// Correlates the events in order and hands their writes to the sink in one message.
    fn correlate_all(&mut self, msgs: impl IntoIterator<Item = EventMessage>, hint: usize) {
        let mut writes = Vec::with_capacity(hint);
        let mut t = Decisions::default();
        for msg in msgs {
            self.correlate(msg, &mut writes, &mut t);
        }
        self.counters.decided(&t);
        if !writes.is_empty()
            && let Some(sink) = &self.sink
        {
            sink.do_send(WriteBatch(writes));
        }
    }
}

impl Actor for CorrelatorActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.registry.actor_started();
        if let Some(t) = &self.tails {
            ctx.run_interval(t.check, |act, _| act.release_tails(false));
        }
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.registry.actor_stopped();
    }
}

impl Handler<EventMessage> for CorrelatorActor {
    type Result = ();

    fn handle(&mut self, msg: EventMessage, _: &mut Context<Self>) {
        self.correlate_all([msg], 1);
    }
}

impl Handler<EventBatch> for CorrelatorActor {
    type Result = ();

    fn handle(&mut self, batch: EventBatch, _: &mut Context<Self>) {
        let n = batch.0.len();
        self.correlate_all(batch.0, n);
    }
}

impl Handler<WriteDoneBatch> for CorrelatorActor {
    type Result = ();

    fn handle(&mut self, batch: WriteDoneBatch, _: &mut Context<Self>) {
        for done in batch.0 {
            let Some(f) = self.in_flight.get(&*done.key) else {
                continue;
            };
            let left = f.writes.get() - 1;
            f.writes.set(left);
            if let Some(refused) = &done.refused {
                // Its CREATE was refused for good: the next occurrence is a CREATE again.
                self.correlator.forget_refused(refused);
            }
            if left == 0 {
                let hint = f.hint.get();
                self.in_flight.remove(&*done.key);
                if let Some(stored) = &done.stored {
                    __private::update_state_with(&mut self.correlator, hint, stored);
                }
            }
            // An event learnt from as sent is usually held by nobody else now: built again
            // in place by the broadcaster rather than freed here and allocated there.
            if let Some(Learned::Sent(sent)) = done.stored {
                self.pool.give(sent.into_record());
            }
        }
    }
}

impl Handler<ReleaseTails> for CorrelatorActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: ReleaseTails, _: &mut Context<Self>) -> Self::Result {
        if self.tails.is_none() {
            return Box::pin(async {});
        }
        self.release_tails(true);
        let sink = self.sink.clone();
        Box::pin(async move {
            if let Some(sink) = sink {
                let _ = sink.send(WhenIdle).await;
            }
        })
    }
}

impl Handler<StopCorrelator> for CorrelatorActor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, _: StopCorrelator, _: &mut Context<Self>) -> Self::Result {
        let sink = self.sink.take();
        Box::pin(
            async move {
                if let Some(sink) = sink {
                    let _ = sink.send(Abandon).await;
                }
            }
            .into_actor(self)
            .map(|_, _, ctx| ctx.stop()),
        )
    }
}
