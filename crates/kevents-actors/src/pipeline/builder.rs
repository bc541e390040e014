//! The [`PipelineBuilder`]: what to spawn, and the wiring of the actors.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use kevents_core::{EventFactory, EventSink, EventSource, SharedClock, SystemClock};

use super::error::StartError;
use super::local::Local;
use super::running::{Mode, Pipeline};
use super::thread::spawn_pipeline_thread;
use crate::broadcaster::Broadcaster;
use crate::budget::{BudgetOptions, WriteBudget};
use crate::chain::{ChainEnv, ChainSpec, Placement, Spawned};
use crate::core_v1::{SinkOptions, SinkSpec};
use crate::event_pool::EventPool;
use crate::events_v1::SeriesSpec;
use crate::intake_item::{EventsV1Config, Factories, V1Intake};
use crate::logging::{LogStyle, LoggingWatcher};
use crate::message::EventMessage;
use crate::policy::{IntakePolicy, WatcherPolicy};
use crate::queue::{DEFAULT_INTAKE_MAX_BYTES, DEFAULT_QUEUE_MAX_BYTES, WatcherQueue};
use crate::recorder::{Backend, Intake, Recorder, RecorderActor};
use crate::registry::Registry;

/// Builds a [`Pipeline`].
///
/// ```
/// use kevents_actors::{Pipeline, SinkOptions, WatcherPolicy};
/// use kevents_core::{EventSource, EventType, ObjectReference};
/// use kevents_sim::MemoryApiServer;
/// use std::time::Duration;
///
/// # actix::System::new().block_on(async {
/// let api = MemoryApiServer::new();
/// let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
///     .logging(WatcherPolicy::default())
///     .sink("apiserver", api.clone(), SinkOptions::default())
///     .start();
/// let recorder = pipeline.recorder();
/// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
/// recorder.event(&pod, EventType::Normal, "Started", "started container").unwrap();
/// let report = pipeline.shutdown(Duration::from_secs(5)).await;
/// assert!(report.completed);
/// assert_eq!(api.list().len(), 1);
/// # });
/// ```
pub struct PipelineBuilder {
    factory: EventFactory,
    clock: SharedClock,
    intake: IntakePolicy,
    intake_max_bytes: usize,
    queue_max_bytes: usize,
    logging: Option<(LoggingWatcher, WatcherPolicy)>,
    sinks: Vec<SinkSpec>,
    watchers: Vec<(String, Recipient<EventMessage>, WatcherPolicy)>,
    placement: Placement,
    series: Vec<SeriesSpec>,
    events_v1: Option<EventsV1Config>,
    budget: Option<WriteBudget>,
    drop_deadline: Duration,
}

/// How long a pipeline on its own thread drains when its handle is dropped without
/// [`Pipeline::shutdown`] ([`PipelineBuilder::drop_deadline`]).
pub const DEFAULT_DROP_DEADLINE: Duration = Duration::from_secs(5);

impl std::fmt::Debug for PipelineBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipelineBuilder")
            .field("factory", &self.factory)
            .field("intake", &self.intake)
            .field("sinks", &self.sinks.len())
            .field("watchers", &self.watchers.len())
            .finish_non_exhaustive()
    }
}

impl PipelineBuilder {
    /// A builder for events from `source`, with client-go's defaults.
    pub fn new(source: EventSource) -> Self {
        let reporter = kevents_core::events_v1::Reporter::new(source.component.clone());
        PipelineBuilder {
            series: Vec::new(),
            events_v1: Some(EventsV1Config::new(reporter)),
            factory: EventFactory::new(source),
            clock: Arc::new(SystemClock),
            intake: IntakePolicy::default(),
            intake_max_bytes: DEFAULT_INTAKE_MAX_BYTES,
            queue_max_bytes: DEFAULT_QUEUE_MAX_BYTES,
            logging: None,
            sinks: Vec::new(),
            watchers: Vec::new(),
            placement: Placement::default(),
            budget: None,
            drop_deadline: DEFAULT_DROP_DEADLINE,
        }
    }

    /// The write budget of the chains that have none of their own
    /// ([`SinkOptions::budget`], [`events_v1::SinkOptions::budget`](crate::events_v1::SinkOptions::budget)). By default each builder makes
    /// one, named `default`, with [`BudgetOptions::default`] (200 writes/s, burst 1000, 429
    /// pauses, circuit breaker after 5 consecutive failures), shared by its chains. Give the
    /// same [`WriteBudget`] to every pipeline that writes to one apiserver to share it.
    pub fn write_budget(mut self, budget: WriteBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Runs the correlators of the sink chains (and the series chains' actors) on another
    /// arbiter (thread), so correlation proceeds in parallel with intake, fan-out and writing
    /// (the supervised sink actors stay on the arbiter that calls
    /// [`start`](PipelineBuilder::start), or [`Pipeline::add_sink`], unless
    /// [`writer_arbiter`](PipelineBuilder::writer_arbiter) places them). By default
    /// everything runs on the arbiter that calls [`start`](PipelineBuilder::start).
    pub fn sink_arbiter(mut self, arbiter: ArbiterHandle) -> Self {
        self.placement.correlator = Some(arbiter);
        self
    }

    /// Runs the supervised sink actors (the writers) of the core/v1 sink chains on this
    /// arbiter (thread), so that writing proceeds in parallel with intake, fan-out and
    /// correlation. A sink restarted by its supervisor stays on this arbiter.
    ///
    /// Which threads pay off depends on the cores (`kevents bench pipeline`, 2 cores,
    /// docs/benchmarks.md): with the correlators on the arbiter of `start` and the writers
    /// here (two threads), a backpressure burst ran 8-10% faster than with three threads
    /// ([`sink_arbiter`](PipelineBuilder::sink_arbiter) as well), and that was itself about
    /// 20% faster on `hot` than one thread; with the coalescing defaults the two placements
    /// were within 5% of each other.
    ///
    /// ```no_run
    /// # use kevents_actors::Pipeline;
    /// # use kevents_core::EventSource;
    /// # actix::System::new().block_on(async {
    /// let write = actix::Arbiter::new();
    /// let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
    ///     .writer_arbiter(write.handle())
    ///     .start();
    /// # });
    /// ```
    pub fn writer_arbiter(mut self, arbiter: ArbiterHandle) -> Self {
        self.placement.writer = Some(arbiter);
        self
    }

    /// Replaces the event factory (naming rule, reporting fields).
    pub fn factory(mut self, factory: EventFactory) -> Self {
        self.factory = factory;
        self
    }

    /// The clock events are stamped with (default: the system clock). The correlators use
    /// their own options' clock.
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The intake's bound (default: coalesce-if-full, 1000 slots and
    /// [`DEFAULT_OVERFLOW_ENTRIES`](crate::DEFAULT_OVERFLOW_ENTRIES) overflow entries;
    /// `IntakePolicy::DropIfFull { capacity: 1000 }` is client-go's).
    pub fn intake(mut self, policy: IntakePolicy) -> Self {
        self.intake = policy;
        self
    }

    /// The byte bound of a bounded intake (default [`DEFAULT_INTAKE_MAX_BYTES`], 64 MiB):
    /// the intake is full when it holds `capacity` occurrences or this many bytes of them
    /// (an estimate: their strings plus fixed struct sizes). A coalesce-if-full intake's
    /// overflow table has a byte bound of its own, this same figure. An unbounded intake has
    /// no byte bound either.
    pub fn intake_max_bytes(mut self, bytes: usize) -> Self {
        self.intake_max_bytes = bytes;
        self
    }

    /// The byte bound of every watcher queue, sink chains included (default
    /// [`DEFAULT_QUEUE_MAX_BYTES`], 64 MiB): a queue is full when it holds its policy's
    /// `capacity` events or this many bytes of them, whichever comes first; a drop-if-full
    /// watcher then drops (counted as `dropped_full`), a backpressure watcher makes the
    /// broadcaster wait, a coalesce-if-full watcher merges it into its overflow table, which
    /// is bounded by this many bytes too. An event larger than the bound is delivered alone.
    pub fn queue_max_bytes(mut self, bytes: usize) -> Self {
        self.queue_max_bytes = bytes;
        self
    }

    /// Adds the structured logging watcher (registered as `logging`).
    pub fn logging(self, policy: WatcherPolicy) -> Self {
        self.logging_with(LoggingWatcher::new(LogStyle::Structured), policy)
    }

    /// Adds a configured logging watcher (registered as `logging`).
    pub fn logging_with(mut self, watcher: LoggingWatcher, policy: WatcherPolicy) -> Self {
        self.logging = Some((watcher, policy));
        self
    }

    /// Adds a sink chain: a correlator actor registered as watcher `sink:<name>` and a
    /// supervised sink actor writing to `sink`.
    pub fn sink(
        mut self,
        name: impl Into<String>,
        sink: impl EventSink,
        options: SinkOptions,
    ) -> Self {
        self.sinks.push(SinkSpec {
            name: name.into(),
            sink: Arc::new(sink),
            options,
        });
        self
    }

    /// How `events.k8s.io/v1` calls are built and routed: reporter (default
    /// `Reporter::new(<source component>)`, i.e. instance `<component>-<hostname>`),
    /// whether the API is served (discovery; when not, v1 calls fall back to core/v1 through
    /// the correlator path), the fallback of action/related, and whether core/v1 style calls
    /// go to the new API.
    ///
    /// ```
    /// use kevents_actors::{EventsV1Config, Pipeline, SinkOptions};
    /// use kevents_core::events_v1::Reporter;
    /// use kevents_core::{EventSource, EventType, ObjectReference};
    /// use kevents_sim::MemoryApiServer;
    /// use std::time::Duration;
    ///
    /// # actix::System::new().block_on(async {
    /// let api = MemoryApiServer::new();
    /// let served = false; // e.g. `http_sink.events_v1_served().await?`
    /// let pipeline = Pipeline::builder(EventSource::new("example.com/ctl", "node-1"))
    ///     .events_v1(EventsV1Config::new(Reporter::new("example.com/ctl")).served(served))
    ///     .sink("apiserver", api.clone(), SinkOptions::default())
    ///     .start();
    /// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
    /// kevents_actors::eventf_events_v1!(pipeline.recorder(), &pod, None, EventType::Normal,
    ///     "Scheduled", "Binding", "bound to {}", "n1").unwrap();
    /// pipeline.shutdown(Duration::from_secs(5)).await;
    /// assert_eq!(api.list()[0].message, "bound to n1"); // a core/v1 event
    /// # });
    /// ```
    pub fn events_v1(mut self, config: EventsV1Config) -> Self {
        self.events_v1 = Some(config);
        self
    }

    /// Adds a series sink chain for `events.k8s.io/v1` events: an actor registered as watcher
    /// `series:<name>` that owns a bounded series cache, runs its heartbeat (30 min) and
    /// finish (6 min idle) timers, writes through `sink` with retries, and on
    /// [`Pipeline::shutdown`] writes the latest count of every open series. Its counters are
    /// in [`StatsSnapshot::sinks_events_v1`](crate::StatsSnapshot::sinks_events_v1).
    pub fn sink_events_v1(
        mut self,
        name: impl Into<String>,
        sink: impl kevents_core::events_v1::EventSink,
        options: crate::events_v1::SinkOptions,
    ) -> Self {
        self.series.push(SeriesSpec {
            name: name.into(),
            sink: Arc::new(sink),
            options,
        });
        self
    }

    /// Registers a watcher of your own from the start.
    pub fn watcher(
        mut self,
        name: impl Into<String>,
        recipient: Recipient<EventMessage>,
        policy: WatcherPolicy,
    ) -> Self {
        self.watchers.push((name.into(), recipient, policy));
        self
    }

    /// How long a pipeline on its own thread drains (writes what is queued, the counts of
    /// open series, deferred tails) when its [`Pipeline`] is dropped without
    /// [`Pipeline::shutdown`] (default [`DEFAULT_DROP_DEADLINE`], 5 s). The drop waits for
    /// that drain, at most this long (plus a second for the thread's runtime to go), so a
    /// process that returns from `main` right after the drop has its counts stored; what
    /// is not written by then is said on stderr. On a multi-thread tokio runtime the wait
    /// hands the worker's tasks over (`block_in_place`); on a current-thread runtime it
    /// blocks that runtime, so a sink whose requests run on it (a `kube::Client` made
    /// there) cannot progress: call [`Pipeline::shutdown`] there (kevents-kube's recorder
    /// does not wait on such a runtime, and says so).
    pub fn drop_deadline(mut self, deadline: Duration) -> Self {
        self.drop_deadline = deadline;
        self
    }

    /// Starts the pipeline, wherever it is called:
    ///
    /// * inside a running actix `System` (`#[actix::main]`, `actix_web::main`,
    ///   `System::new().block_on(..)`, an arbiter), its actors run on the caller's arbiter;
    /// * anywhere else (`#[tokio::main]`, another runtime, plain synchronous code) on a
    ///   thread of their own running an actix `System`, as kevents-kube's drop-in recorder
    ///   does ([`start_thread`](PipelineBuilder::start_thread)).
    ///
    /// The [`Pipeline`] and its [`Recorder`] handles are the same either way.
    ///
    /// Panics when the pipeline's thread cannot be spawned or a queue's bound is invalid (a
    /// zero capacity or overflow table); [`try_start`](PipelineBuilder::try_start) returns
    /// those as [`StartError`].
    ///
    /// Panics only if the operating system cannot start that thread (as
    /// `std::thread::spawn`); [`try_start`](PipelineBuilder::try_start) returns that as an
    /// error.
    ///
    /// ```
    /// use kevents_actors::{Pipeline, SinkOptions};
    /// use kevents_core::{EventSource, EventType, ObjectReference};
    /// use kevents_sim::MemoryApiServer;
    /// use std::time::Duration;
    ///
    /// #[tokio::main(flavor = "current_thread")]
    /// async fn main() {
    ///     let api = MemoryApiServer::new();
    ///     let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
    ///         .sink("apiserver", api.clone(), SinkOptions::default())
    ///         .start(); // no actix System here: on a thread of its own
    ///     assert!(pipeline.runs_on_own_thread());
    ///     let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
    ///     pipeline.recorder().event(&pod, EventType::Normal, "Started", "started").unwrap();
    ///     let report = pipeline.shutdown(Duration::from_secs(5)).await;
    ///     assert_eq!(report.delivered(), 1);
    /// }
    /// ```
    pub fn start(self) -> Pipeline {
        match self.try_start() {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    /// Every queue's bound, checked before anything starts ([`WatcherPolicy::check`],
    /// [`IntakePolicy::check`]): a zero capacity is [`StartError::Policy`], not one slot that
    /// drops almost every event.
    fn check_policies(&self) -> Result<(), StartError> {
        let bad = |queue: String| move |source| StartError::Policy { queue, source };
        self.intake.check().map_err(bad("intake".into()))?;
        if let Some((_, policy)) = &self.logging {
            policy.check().map_err(bad("logging".into()))?;
        }
        for s in &self.sinks {
            s.options
                .delivery
                .check()
                .map_err(bad(format!("sink:{}", s.name)))?;
        }
        for s in &self.series {
            s.options
                .delivery
                .check()
                .map_err(bad(format!("series:{}", s.name)))?;
        }
        for (name, _, policy) in &self.watchers {
            policy.check().map_err(bad(name.clone()))?;
        }
        Ok(())
    }

    /// [`start`](PipelineBuilder::start), returning an error instead of panicking when the
    /// pipeline's own thread cannot be started or a queue's bound is invalid
    /// ([`StartError::Policy`]: a zero capacity).
    ///
    /// ```
    /// use kevents_actors::{IntakePolicy, Pipeline, StartError};
    /// use kevents_core::EventSource;
    /// let refused = Pipeline::builder(EventSource::new("my-controller", "node-1"))
    ///     .intake(IntakePolicy::DropIfFull { capacity: 0 })
    ///     .try_start();
    /// assert!(matches!(refused, Err(StartError::Policy { queue, .. }) if queue == "intake"));
    /// ```
    pub fn try_start(self) -> Result<Pipeline, StartError> {
        self.check_policies()?;
        // A running System on this thread and its runtime entered: the actors can be spawned
        // here. Elsewhere actix's spawn would panic (`spawn_local` outside a `LocalSet`).
        let in_system =
            actix::System::try_current().is_some() && tokio::runtime::Handle::try_current().is_ok();
        if in_system {
            let (recorder, local) = self.start_here();
            Ok(Pipeline {
                recorder,
                registry: Arc::clone(&local.env.registry),
                mode: Mode::Local(Box::new(local)),
            })
        } else {
            self.start_thread()
        }
    }

    /// Starts the pipeline in an actix `System` on a thread of its own (named
    /// `kevents-pipeline`), even when called inside one. Returns once the pipeline runs.
    ///
    /// ```
    /// use kevents_actors::Pipeline;
    /// use kevents_core::EventSource;
    /// # actix::System::new().block_on(async {
    /// let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
    ///     .start_thread()?;
    /// assert!(pipeline.runs_on_own_thread());
    /// pipeline.shutdown(std::time::Duration::from_secs(5)).await;
    /// # Ok::<(), kevents_actors::StartError>(()) }).unwrap();
    /// ```
    pub fn start_thread(self) -> Result<Pipeline, StartError> {
        self.check_policies()?;
        let drop_deadline = self.drop_deadline;
        let started = spawn_pipeline_thread(move || self.start_here(), drop_deadline)?;
        Ok(Pipeline {
            recorder: started.recorder,
            registry: started.registry,
            mode: Mode::Thread(started.link),
        })
    }

    /// Spawns the actors on the current arbiter (inside a running actix `System`).
    fn start_here(self) -> (Recorder, Local) {
        // The first reading of the system clock calibrates its counter (about 0.6 ms): here,
        // not in a caller's first record call.
        let _ = self.clock.now();
        let registry = Arc::new(Registry::new());
        // Written core/v1 events: the core/v1 chains give them back, the broadcaster builds
        // the next events into them.
        let pool = Arc::new(EventPool::default());
        let mut broadcaster = Broadcaster::new(Arc::clone(&registry), Arc::clone(&pool));

        if let Some((watcher, policy)) = self.logging {
            let addr = watcher.start();
            let queue = Arc::new(WatcherQueue::new("logging", policy, self.queue_max_bytes));
            broadcaster.add(addr.recipient(), None, queue);
        }

        let budget = self
            .budget
            .unwrap_or_else(|| WriteBudget::new("default", BudgetOptions::default()));
        // Both kinds of chain are spawned the same way (`ChainSpec`), and registered alike.
        let env = ChainEnv {
            budget,
            clock: Arc::clone(&self.clock),
            pool,
            registry: Arc::clone(&registry),
            queue_max_bytes: self.queue_max_bytes,
            placement: self.placement,
        };
        let sinks: Vec<_> = self
            .sinks
            .into_iter()
            .map(|s| register(&mut broadcaster, s.spawn(&env)))
            .collect();
        let series: Vec<_> = self
            .series
            .into_iter()
            .map(|s| register(&mut broadcaster, s.spawn(&env)))
            .collect();

        for (name, recipient, policy) in self.watchers {
            let queue = Arc::new(WatcherQueue::new(&name, policy, self.queue_max_bytes));
            broadcaster.add(recipient, None, queue);
        }

        let broadcaster = broadcaster.start();
        let v1 = self.events_v1.map(V1Intake::new).unwrap_or_default();
        let (intake, rx, shared) = Intake::channel(
            self.intake,
            self.intake_max_bytes,
            Arc::clone(&self.clock),
            Arc::clone(&registry),
            v1.clone(),
        );
        let intake = Arc::new(intake);
        if let Some(b) = &shared.bytes {
            registry.set_intake_bytes(Arc::clone(b));
        }
        let recorder_addr = RecorderActor::new(
            Factories {
                core: self.factory,
                v1,
            },
            broadcaster.clone(),
            rx,
            shared,
            Arc::clone(&registry),
        )
        .start();
        let recorder = Recorder::from_backend(Backend::Intake(Arc::clone(&intake)));
        let local = Local {
            intake,
            recorder_addr,
            broadcaster,
            sinks,
            series,
            env,
        };
        (recorder, local)
    }
}

/// Registers a spawned chain's watcher with the broadcaster (before it starts); returns the
/// chain.
fn register<C>(broadcaster: &mut Broadcaster, spawned: Spawned<C>) -> C {
    broadcaster.add(spawned.recipient, spawned.batch, spawned.queue);
    spawned.chain
}

impl Pipeline {
    /// A builder for events from `source`.
    pub fn builder(source: EventSource) -> PipelineBuilder {
        PipelineBuilder::new(source)
    }
}
