//! The Correlator actor of a core/v1 chain: a watcher that runs client-go's correlator on
//! every event, sends the writes to its sink actor, and learns the server's state back from
//! the sink's replies.

use std::sync::Arc;

use actix::prelude::*;
use kevents_core::{Correlator, Event};

use super::sink::{Abandon, CorrelatedWrite, SinkActor, WriteBatch, WriteDoneBatch};
use crate::fast_map::FastMap;
use crate::message::{DeliverySlot, EventBatch, EventMessage, Recorded, core_repeat};
use crate::registry::Registry;
use crate::telemetry::{Decisions, SinkCounters};

/// Stop the correlator (after telling its sink to abandon what it still holds).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct StopCorrelator;

/// The Correlator actor.
pub(crate) struct CorrelatorActor {
    correlator: Correlator,
    sink: Option<Addr<SinkActor>>,
    /// Writes sent and not yet answered, per event (`namespace/name`). The server's state is
    /// learnt only from the answer to the latest write of an event: an older answer would
    /// roll the cached count back.
    in_flight: FastMap<Arc<str>, u32>,
    /// Reused to build keys.
    key_buf: String,
    counters: Arc<SinkCounters>,
    registry: Arc<Registry>,
}

impl CorrelatorActor {
    pub(crate) fn new(
        correlator: Correlator,
        sink: Addr<SinkActor>,
        counters: Arc<SinkCounters>,
        registry: Arc<Registry>,
    ) -> Self {
        CorrelatorActor {
            correlator,
            sink: Some(sink),
            in_flight: FastMap::default(),
            key_buf: String::new(),
            counters,
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
        let Some(repeats) = repeats else {
            // The only holder (a single watcher) takes the event without copying it.
            let event: Event = match Arc::try_unwrap(record) {
                Ok(Recorded::Core(e)) => e,
                // events.k8s.io/v1 events belong to series sink chains (the fallback to
                // core/v1 happens at the recorder, which then emits `Recorded::Core`).
                Ok(_) => return,
                Err(shared) => match shared.core() {
                    Some(e) => e.clone(),
                    None => return,
                },
            };
            self.correlate_one(event, slot, writes, t);
            return;
        };
        let Some(first) = record.core() else { return };
        let before = writes.len();
        self.correlate_one(first.clone(), DeliverySlot::detached(), writes, t);
        let repeat = core_repeat(first, repeats.last);
        for _ in 0..repeats.more {
            self.correlate_one(repeat.clone(), DeliverySlot::detached(), writes, t);
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
        event: Event,
        slot: DeliverySlot,
        writes: &mut Vec<CorrelatedWrite>,
        t: &mut Decisions,
    ) {
        if self.sink.is_none() {
            t.abandoned += 1;
            return;
        }
        t.correlated += 1;
        let c = self.correlator.correlate(event);
        if c.aggregated {
            t.aggregated += 1;
        }
        if c.skip {
            t.spam_filtered += 1;
            return;
        }
        let buf = &mut self.key_buf;
        buf.clear();
        buf.push_str(&c.event.metadata.namespace);
        buf.push('/');
        buf.push_str(&c.event.metadata.name);
        let key = match self.in_flight.get_key_value(buf.as_str()) {
            Some((k, _)) => {
                let k = Arc::clone(k);
                if let Some(n) = self.in_flight.get_mut(&k) {
                    *n += 1;
                }
                k
            }
            None => {
                let k: Arc<str> = Arc::from(buf.as_str());
                self.in_flight.insert(Arc::clone(&k), 1);
                k
            }
        };
        writes.push(CorrelatedWrite {
            key,
            event: c.event,
            patch: c.patch,
            slot,
        });
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

    fn started(&mut self, _: &mut Context<Self>) {
        self.registry.actor_started();
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
            let Some(n) = self.in_flight.get_mut(&*done.key) else {
                continue;
            };
            *n -= 1;
            if *n == 0 {
                self.in_flight.remove(&*done.key);
                if let Some(stored) = done.stored {
                    self.correlator.update_state(&stored);
                }
            }
        }
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
