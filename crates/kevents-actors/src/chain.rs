//! The one contract by which the pipeline spawns a sink chain, the same for both APIs: the
//! builder (at start) and [`Pipeline::add_sink`] / [`Pipeline::add_sink_events_v1`] (later)
//! hand a chain's spec the pipeline's [`ChainEnv`] and get back a [`Spawned`] chain, with its
//! counters registered and its watcher queue built, to register with the broadcaster.
//!
//! ```text
//!  SinkSpec (core/v1) ───┐                      ┌─▶ Spawned<SinkChain>   { recipient, batch, queue }
//!                        ├─ ChainSpec::spawn(env) ┤
//!  SeriesSpec (v1) ──────┘                      └─▶ Spawned<SeriesChain> { recipient, queue }
//! ```
//!
//! [`Pipeline::add_sink`]: crate::Pipeline::add_sink
//! [`Pipeline::add_sink_events_v1`]: crate::Pipeline::add_sink_events_v1

use std::sync::Arc;

use actix::prelude::*;
use kevents_core::SharedClock;

use crate::budget::WriteBudget;
use crate::event_pool::EventPool;
use crate::message::{EventBatch, EventMessage};
use crate::policy::WatcherPolicy;
use crate::queue::WatcherQueue;
use crate::registry::Registry;

/// Where the chains' actors run (`None`: the arbiter that starts the chain).
#[derive(Clone, Default)]
pub(crate) struct Placement {
    /// The correlators' (and series actors') arbiter (`PipelineBuilder::sink_arbiter`).
    pub(crate) correlator: Option<ArbiterHandle>,
    /// The sink actors' arbiter (`PipelineBuilder::writer_arbiter`).
    pub(crate) writer: Option<ArbiterHandle>,
}

/// What the pipeline gives every chain it spawns, at start or later.
#[derive(Clone)]
pub(crate) struct ChainEnv {
    /// The write budget of chains without their own.
    pub(crate) budget: WriteBudget,
    /// The clock of chains without their own (series timers).
    pub(crate) clock: SharedClock,
    /// Written core/v1 events: the core/v1 chains give them back, the broadcaster builds
    /// into them.
    pub(crate) pool: Arc<EventPool>,
    /// Where a chain registers its counters and its budget.
    pub(crate) registry: Arc<Registry>,
    /// The byte bound of a chain's watcher queue.
    pub(crate) queue_max_bytes: usize,
    /// Where a chain's actors run.
    pub(crate) placement: Placement,
}

impl ChainEnv {
    /// The budget a chain writes with: its own (`options.budget`) or else the pipeline's,
    /// registered so that its snapshot is in the pipeline's stats.
    pub(crate) fn budget_for(&self, own: Option<&WriteBudget>) -> WriteBudget {
        let budget = own.cloned().unwrap_or_else(|| self.budget.clone());
        self.registry.add_budget(&budget);
        budget
    }

    /// A chain's watcher queue, named `<kind>:<name>` (`sink:api`, `series:v1`).
    pub(crate) fn queue(
        &self,
        kind: &str,
        name: &str,
        delivery: WatcherPolicy,
    ) -> Arc<WatcherQueue> {
        Arc::new(WatcherQueue::new(
            &format!("{kind}:{name}"),
            delivery,
            self.queue_max_bytes,
        ))
    }
}

/// A chain started: what the pipeline keeps of it, and what the broadcaster registers.
pub(crate) struct Spawned<C> {
    /// The running chain as the pipeline keeps it (flush, shutdown).
    pub(crate) chain: C,
    /// The chain's watcher.
    pub(crate) recipient: Recipient<EventMessage>,
    /// Its batched form, when the chain takes batches ([`EventBatch`]).
    pub(crate) batch: Option<Recipient<EventBatch>>,
    /// Its watcher queue (`sink:<name>`, `series:<name>`), built by the chain.
    pub(crate) queue: Arc<WatcherQueue>,
}

/// A sink chain as the builder records it: spawned the same way for either API.
pub(crate) trait ChainSpec {
    /// What the pipeline keeps of the running chain.
    type Chain;

    /// Starts the chain's actors where `env.placement` says (a panicking sink restarts its
    /// supervised actor, keeping its queue), writing with the spec's budget or else
    /// `env.budget`; registers its counters and budget and builds its watcher queue.
    fn spawn(self, env: &ChainEnv) -> Spawned<Self::Chain>;
}
