//! The events.k8s.io/v1 sink chain (client-go 1.27+ `tools/events` event series): a
//! [`SeriesActor`](actor) registered as a watcher that owns a bounded
//! [`SeriesCache`](kevents_core::events_v1::SeriesCache), runs its heartbeat/finish timers on
//! the actix clock, writes through an [`EventsV1Sink`] with the keyed writer engine, and
//! writes the latest count of every open series on graceful shutdown.
//!
//! ```text
//!  Broadcaster ─EventMessage(Recorded::EventsV1)─▶ SeriesActor: observe / tick / flush
//!      ─▶ keyed writer ─▶ write_once(EventsV1Sink) ─▶ SeriesCache::on_write_result
//! ```
//!
//! See `docs/semantics.md` ("Series") for what is written when.

mod actor;
mod options;

use std::sync::Arc;

use actix::prelude::*;
use kevents_core::SharedClock;
use kevents_core::events_v1::EventsV1Sink;

use crate::budget::WriteBudget;
use crate::message::EventMessage;
use crate::policy::WatcherPolicy;
use crate::registry::Registry;
use crate::telemetry::SeriesCounters;
pub(crate) use actor::{FlushSeries, RefreshSeries, SeriesActor, StopSeries};
pub use options::{DEFAULT_FRESHNESS, SeriesSinkOptions};

/// A series chain as the pipeline keeps it.
pub(crate) struct SeriesChain {
    pub(crate) addr: Addr<SeriesActor>,
    pub(crate) flush_on_shutdown: bool,
}

/// What the builder records for one series chain.
pub(crate) struct SeriesSpec {
    pub(crate) name: String,
    pub(crate) sink: Arc<dyn EventsV1Sink>,
    pub(crate) options: SeriesSinkOptions,
}

/// Starts one series chain; returns it, its watcher recipient and its watcher policy.
pub(crate) fn spawn_series(
    spec: SeriesSpec,
    budget: &WriteBudget,
    clock: &SharedClock,
    registry: &Arc<Registry>,
    arbiter: Option<&ArbiterHandle>,
) -> (SeriesChain, Recipient<EventMessage>, WatcherPolicy) {
    let delivery = spec.options.delivery;
    let flush_on_shutdown = spec.options.flush_on_shutdown;
    let counters = Arc::new(SeriesCounters::new(&spec.name));
    registry.add_series(Arc::clone(&counters));
    let budget = spec
        .options
        .budget
        .clone()
        .unwrap_or_else(|| budget.clone());
    registry.add_budget(&budget);
    let actor = SeriesActor::new(
        spec.sink,
        spec.options,
        budget,
        Arc::clone(clock),
        counters,
        Arc::clone(registry),
    );
    // Supervised, as a core/v1 sink actor: a panicking sink restarts the actor, which keeps
    // its series cache and its queue.
    let addr = match arbiter {
        Some(a) => Supervisor::start_in_arbiter(a, move |_| actor),
        None => Supervisor::start(move |_| actor),
    };
    let recipient = addr.clone().recipient();
    (
        SeriesChain {
            addr,
            flush_on_shutdown,
        },
        recipient,
        delivery,
    )
}
