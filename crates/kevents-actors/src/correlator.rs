//! The Correlator actor: a watcher that runs client-go's correlator on every event, sends the
//! writes to its sink actor, and learns the server's state back from the sink's replies.

use std::collections::HashMap;
use std::sync::Arc;

use actix::prelude::*;
use kevents_core::{Correlator, Event};

use crate::message::{EventMessage, Recorded};
use crate::sink::{Abandon, SinkActor, Write, WriteDone};
use crate::stats::{PipelineStats, SinkStats};

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
    in_flight: HashMap<String, u32>,
    stats: Arc<SinkStats>,
    pstats: Arc<PipelineStats>,
}

impl CorrelatorActor {
    pub(crate) fn new(
        correlator: Correlator,
        sink: Addr<SinkActor>,
        stats: Arc<SinkStats>,
        pstats: Arc<PipelineStats>,
    ) -> Self {
        CorrelatorActor {
            correlator,
            sink: Some(sink),
            in_flight: HashMap::new(),
            stats,
            pstats,
        }
    }
}

impl Actor for CorrelatorActor {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Context<Self>) {
        self.pstats.actor_started();
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.pstats.actor_stopped();
    }
}

impl Handler<EventMessage> for CorrelatorActor {
    type Result = ();

    fn handle(&mut self, msg: EventMessage, _: &mut Context<Self>) {
        let (record, slot) = msg.into_parts();
        // The only holder (a single watcher) takes the event without copying it.
        let event: Event = match Arc::try_unwrap(record) {
            Ok(Recorded::Core(e)) => e,
            Err(shared) => match shared.core() {
                Some(e) => e.clone(),
                None => return,
            },
        };
        let Some(sink) = &self.sink else {
            self.stats.abandoned.add(1);
            return;
        };
        self.stats.correlated.add(1);
        let c = self.correlator.correlate(event);
        if c.aggregated {
            self.stats.aggregated.add(1);
        }
        if c.skip {
            self.stats.spam_filtered.add(1);
            return;
        }
        let mut key = String::with_capacity(
            c.event.metadata.namespace.len() + 1 + c.event.metadata.name.len(),
        );
        key.push_str(&c.event.metadata.namespace);
        key.push('/');
        key.push_str(&c.event.metadata.name);
        match self.in_flight.get_mut(&key) {
            Some(n) => *n += 1,
            None => {
                self.in_flight.insert(key.clone(), 1);
            }
        }
        sink.do_send(Write {
            key,
            event: c.event,
            patch: c.patch,
            slot,
        });
    }
}

impl Handler<WriteDone> for CorrelatorActor {
    type Result = ();

    fn handle(&mut self, done: WriteDone, _: &mut Context<Self>) {
        let Some(n) = self.in_flight.get_mut(&done.key) else {
            return;
        };
        *n -= 1;
        if *n == 0 {
            self.in_flight.remove(&done.key);
            if let Some(stored) = done.stored {
                self.correlator.update_state(&stored);
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
