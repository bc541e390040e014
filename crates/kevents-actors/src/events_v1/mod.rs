//! The events.k8s.io/v1 side of the pipeline (client-go 1.27+ `tools/events`): the twins of
//! the core/v1 items at the crate's root, named alike ([`SinkOptions`], [`SinkSnapshot`]; docs/architecture.md, "Names of the two APIs").
//!
//! Inside, the events.k8s.io/v1 sink chain: a series actor registered as a watcher that owns
//! a bounded [`SeriesCache`](kevents_core::events_v1::SeriesCache), runs its heartbeat/finish
//! timers on the actix clock, writes through an
//! [`events_v1::EventSink`](kevents_core::events_v1::EventSink) with the keyed writer engine,
//! and writes the latest count of every open series on graceful shutdown.
//!
//! ```text
//!  Broadcaster ─EventMessage(Recorded::EventsV1)─▶ SeriesActor: observe / tick / flush
//!      ─▶ keyed writer ─▶ write_once(events_v1::EventSink) ─▶ SeriesCache::on_write_result
//! ```
//!
//! See `docs/semantics.md` ("Series") for what is written when.

mod actor;
mod options;

use std::sync::Arc;

use actix::prelude::*;

use crate::chain::{ChainEnv, ChainSpec, Spawned};
pub use crate::stats::events_v1::SinkSnapshot;
use crate::telemetry::SeriesCounters;
pub(crate) use actor::{FlushSeries, RefreshSeries, SeriesActor, StopSeries};
pub use options::{DEFAULT_FRESHNESS, SinkOptions};

/// A series chain as the pipeline keeps it.
pub(crate) struct SeriesChain {
    pub(crate) addr: Addr<SeriesActor>,
    pub(crate) flush_on_shutdown: bool,
}

/// What the builder records for one series chain.
pub(crate) struct SeriesSpec {
    pub(crate) name: String,
    pub(crate) sink: Arc<dyn kevents_core::events_v1::EventSink>,
    pub(crate) options: crate::events_v1::SinkOptions,
}

impl ChainSpec for SeriesSpec {
    type Chain = SeriesChain;

    /// The series actor, supervised, on `env.placement`'s correlator arbiter (or here),
    /// writing with the spec's budget or else `env.budget`, its timers on the spec's clock or
    /// else `env.clock`; its queue is `series:<name>`.
    fn spawn(self, env: &ChainEnv) -> Spawned<SeriesChain> {
        let spec = self;
        let flush_on_shutdown = spec.options.flush_on_shutdown;
        let counters = Arc::new(SeriesCounters::new(&spec.name));
        env.registry.add_series(Arc::clone(&counters));
        let budget = env.budget_for(spec.options.budget.as_ref());
        let queue = env.queue("series", &spec.name, spec.options.delivery);
        let actor = SeriesActor::new(
            spec.sink,
            spec.options,
            budget,
            Arc::clone(&env.clock),
            counters,
            Arc::clone(&env.registry),
        );
        // Supervised, as a core/v1 sink actor: a panicking sink restarts the actor, which
        // keeps its series cache and its queue.
        let addr = match env.placement.correlator.as_ref() {
            Some(a) => Supervisor::start_in_arbiter(a, move |_| actor),
            None => Supervisor::start(move |_| actor),
        };
        Spawned {
            recipient: addr.clone().recipient(),
            batch: None,
            chain: SeriesChain {
                addr,
                flush_on_shutdown,
            },
            queue,
        }
    }
}
