//! The core/v1 sink chain (client-go `tools/record`'s `StartRecordingToSink`): a
//! [`CorrelatorActor`](correlator) registered as a watcher, feeding a supervised
//! [`SinkActor`](sink) that writes through an [`EventSink`].
//!
//! ```text
//!  Broadcaster ─EventBatch─▶ CorrelatorActor ─WriteBatch─▶ SinkActor (Supervisor, keyed writer) ─▶ EventSink
//!                                  ▲                            │
//!                                  └──────WriteDoneBatch────────┘  (server state learnt back)
//! ```

mod correlator;
mod sink;

use std::sync::Arc;

use actix::prelude::*;
use kevents_core::{Correlator, CorrelatorOptions, EventSink};

use crate::budget::WriteBudget;
use crate::chain::{ChainEnv, ChainSpec, Spawned};
use crate::policy::{RetryPolicy, WatcherPolicy};
use crate::telemetry::SinkCounters;
pub use correlator::TAIL_CHECK;
use correlator::Tails;
pub(crate) use correlator::{CorrelatorActor, ReleaseTails, StopCorrelator};
use sink::SinkActor;
pub use sink::SinkFactory;

/// Options of one sink chain (correlator actor + sink actor).
///
/// ```
/// use kevents_actors::{SinkOptions, WatcherPolicy};
/// let o = SinkOptions::default();
/// assert_eq!(o.delivery, WatcherPolicy::sink_default()); // coalesce-if-full, 1000 slots
/// assert_eq!(o.max_in_flight, 16);
/// assert!(o.coalesce && o.budget.is_none()); // coalescing, the pipeline's budget
/// assert!(o.defer_spam_tails); // every occurrence ends in a stored count
/// ```
#[derive(Clone)]
pub struct SinkOptions {
    /// The chain's correlator (each chain has its own, as client-go's
    /// `StartRecordingToSink`).
    pub correlator: CorrelatorOptions,
    /// Retries.
    pub retry: RetryPolicy,
    /// Writes in flight at once, across different events; writes of the same event
    /// (same namespace/name) are always one after the other, in order.
    pub max_in_flight: usize,
    /// How events reach the chain ([`WatcherPolicy::sink_default`]: coalesce-if-full, so
    /// a burst ends in exact counts). The slot of an event is held until its write is
    /// finished, so the capacity bounds everything the chain holds.
    /// `WatcherPolicy::DropIfFull { capacity: 1000 }` is client-go's behaviour.
    pub delivery: WatcherPolicy,
    /// Rebuilds the [`EventSink`] when the sink actor restarts.
    pub rebuild: Option<SinkFactory>,
    /// Coalescing (on by default): per event at most one write in flight and one waiting; a
    /// newer result replaces the waiting write (a waiting CREATE becomes a CREATE of the
    /// newest state), so the apiserver ends in the state of every result written in order
    /// with fewer requests. Off: every correlator result is one write, client-go's request
    /// sequence.
    pub coalesce: bool,
    /// The write budget (rate, 429 pause, circuit breaker) of the apiserver this chain
    /// writes to; `None`: the pipeline's ([`PipelineBuilder::write_budget`], by default one
    /// per builder). [`WriteBudget::off`] disables it.
    ///
    /// [`PipelineBuilder::write_budget`]: crate::PipelineBuilder::write_budget
    pub budget: Option<WriteBudget>,
    /// Deferred spam tails (on by default; `false` is client-go's behaviour, which skips them
    /// for good and leaves the stored count of an event whose repeats stop while its
    /// object is throttled stale for ever). An occurrence the
    /// spam filter skips keeps its event's newest state (count, lastTimestamp, message);
    /// that state is written once the object's bucket has a token again (checked every
    /// [`TAIL_CHECK`], at most), or on [`Pipeline::shutdown`](crate::Pipeline::shutdown)
    /// within its deadline, so an event whose repeats stop while its object is throttled
    /// still ends with its final count. A newer state of the same event (kept or written)
    /// replaces the held one (`superseded`). At most one held state per event, at most as
    /// many events as the correlator's LRU size (4 096 by default); beyond that a skipped
    /// occurrence is dropped as `spam_filtered`, as without the option.
    pub defer_spam_tails: bool,
}

impl Default for SinkOptions {
    fn default() -> Self {
        SinkOptions {
            correlator: CorrelatorOptions::default(),
            retry: RetryPolicy::default(),
            max_in_flight: 16,
            delivery: WatcherPolicy::sink_default(),
            rebuild: None,
            coalesce: true,
            budget: None,
            defer_spam_tails: true,
        }
    }
}

impl std::fmt::Debug for SinkOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkOptions")
            .field("correlator", &self.correlator)
            .field("retry", &self.retry)
            .field("max_in_flight", &self.max_in_flight)
            .field("delivery", &self.delivery)
            .field("rebuild", &self.rebuild.as_ref().map(|_| "factory"))
            .field("coalesce", &self.coalesce)
            .field("budget", &self.budget)
            .field("defer_spam_tails", &self.defer_spam_tails)
            .finish()
    }
}

/// What the builder records for one chain.
pub(crate) struct SinkSpec {
    pub(crate) name: String,
    pub(crate) sink: Arc<dyn EventSink>,
    pub(crate) options: SinkOptions,
}

impl ChainSpec for SinkSpec {
    type Chain = SinkChain;

    /// The correlator and its supervised sink actor where `env.placement` says, writing with
    /// the spec's budget or else `env.budget`, giving written events back to `env.pool`; its
    /// queue is `sink:<name>`, and it takes batches.
    fn spawn(self, env: &ChainEnv) -> Spawned<SinkChain> {
        let spec = self;
        let arbiter = env.placement.correlator.as_ref();
        let counters = Arc::new(SinkCounters::new(&spec.name));
        env.registry.add_sink(Arc::clone(&counters));
        let budget = env.budget_for(spec.options.budget.as_ref());
        let queue = env.queue("sink", &spec.name, spec.options.delivery);
        let registry = Arc::clone(&env.registry);
        let pool = Arc::clone(&env.pool);
        // With a sink arbiter, the correlator runs there and the sink actor on the writer
        // arbiter, or else stays on this arbiter: the two halves of a chain (correlating,
        // writing) then share the work of a burst between threads. Without either, both run
        // here.
        let home = match (&env.placement.writer, arbiter) {
            (Some(w), _) => Some(w.clone()),
            (None, Some(_)) => Some(Arbiter::current()),
            (None, None) => None,
        };
        // Runs on the thread of the arbiter the correlator starts on.
        let build = move |ctx: &mut Context<CorrelatorActor>| {
            let options = spec.options;
            let reply = ctx.address().recipient().downgrade();
            let actor = SinkActor::new(
                spec.sink,
                options.rebuild.clone(),
                options.retry.clone(),
                options.max_in_flight,
                options.coalesce,
                budget,
                Some(reply),
                Arc::clone(&counters),
                Arc::clone(&pool),
                Arc::clone(&registry),
            );
            let sink = match &home {
                Some(home) => Supervisor::start_in_arbiter(home, move |_| actor),
                None => Supervisor::start(move |_| actor),
            };
            let tails = options
                .defer_spam_tails
                .then(|| Tails::new(&options.correlator));
            CorrelatorActor::new(
                Correlator::new(options.correlator),
                sink,
                tails,
                counters,
                pool,
                registry,
            )
        };
        let correlator = match arbiter {
            Some(a) => CorrelatorActor::start_in_arbiter(a, build),
            None => CorrelatorActor::create(build),
        };
        Spawned {
            recipient: correlator.clone().recipient(),
            batch: Some(correlator.clone().recipient()),
            chain: SinkChain { correlator },
            queue,
        }
    }
}

/// A running chain as the pipeline keeps it.
pub(crate) struct SinkChain {
    pub(crate) correlator: Addr<CorrelatorActor>,
}
