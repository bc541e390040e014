//! Wiring: the [`PipelineBuilder`], the running [`Pipeline`], and shutdown.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use actix::prelude::*;
use kevents_core::{
    Correlator, CorrelatorOptions, EventFactory, EventSink, EventSource, SharedClock, SystemClock,
};
use thiserror::Error;

use crate::broadcaster::{
    Broadcaster, Drained, Register, StopBroadcaster, Unregister, WatcherId, WatcherPolicy,
};
use crate::correlator::{CorrelatorActor, StopCorrelator};
use crate::logging::{LogStyle, LoggingWatcher};
use crate::message::EventMessage;
use crate::recorder::{
    CloseIntake, IntakePolicy, IntakeShared, Recorder, RecorderActor, StopRecorder, intake_channel,
};
use crate::sink::{RetryPolicy, SinkActor, SinkFactory};
use crate::stats::{PipelineStats, SinkStats, StatsSnapshot, WatcherStats};

/// Options of one sink chain (correlator actor + sink actor).
///
/// ```
/// use kevents_actors::{SinkOptions, WatcherPolicy};
/// let o = SinkOptions::default();
/// assert_eq!(o.delivery, WatcherPolicy::DropIfFull { capacity: 1000 });
/// assert_eq!(o.max_in_flight, 16);
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
    /// How events reach the chain. The slot of an event is held until its write is
    /// finished, so the capacity bounds everything the chain holds.
    pub delivery: WatcherPolicy,
    /// Rebuilds the [`EventSink`] when the sink actor restarts.
    pub rebuild: Option<SinkFactory>,
}

impl Default for SinkOptions {
    fn default() -> Self {
        SinkOptions {
            correlator: CorrelatorOptions::default(),
            retry: RetryPolicy::default(),
            max_in_flight: 16,
            delivery: WatcherPolicy::default(),
            rebuild: None,
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
            .finish()
    }
}

struct SinkSpec {
    name: String,
    sink: Arc<dyn EventSink>,
    options: SinkOptions,
}

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
    logging: Option<(LoggingWatcher, WatcherPolicy)>,
    sinks: Vec<SinkSpec>,
    watchers: Vec<(String, Recipient<EventMessage>, WatcherPolicy)>,
    sink_arbiter: Option<ArbiterHandle>,
    series: Vec<crate::series::SeriesSpec>,
    events_v1: Option<crate::series::EventsV1Config>,
}

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
            events_v1: Some(crate::series::EventsV1Config::new(reporter)),
            factory: EventFactory::new(source),
            clock: Arc::new(SystemClock),
            intake: IntakePolicy::default(),
            logging: None,
            sinks: Vec::new(),
            watchers: Vec::new(),
            sink_arbiter: None,
        }
    }

    /// Runs the correlators of the sink chains on another arbiter (thread), so correlation
    /// proceeds in parallel with intake, fan-out and writing (the supervised sink actors stay
    /// on the arbiter that calls [`start`](PipelineBuilder::start), or
    /// [`Pipeline::add_sink`]). By default everything runs on the arbiter that calls
    /// [`start`](PipelineBuilder::start).
    pub fn sink_arbiter(mut self, arbiter: ArbiterHandle) -> Self {
        self.sink_arbiter = Some(arbiter);
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

    /// The intake's bound (default: drop-if-full, 1000).
    pub fn intake(mut self, policy: IntakePolicy) -> Self {
        self.intake = policy;
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
    /// kevents_actors::eventf_v1!(pipeline.recorder(), &pod, None, EventType::Normal,
    ///     "Scheduled", "Binding", "bound to {}", "n1").unwrap();
    /// pipeline.shutdown(Duration::from_secs(5)).await;
    /// assert_eq!(api.list()[0].message, "bound to n1"); // a core/v1 event
    /// # });
    /// ```
    pub fn events_v1(mut self, config: crate::series::EventsV1Config) -> Self {
        self.events_v1 = Some(config);
        self
    }

    /// Adds a series sink chain for `events.k8s.io/v1` events: an actor registered as watcher
    /// `series:<name>` that owns a bounded series cache, runs its heartbeat (30 min) and
    /// finish (6 min idle) timers, writes through `sink` with retries, and on
    /// [`Pipeline::shutdown`] writes the latest count of every open series. Its counters are
    /// in [`StatsSnapshot::series`].
    pub fn series_sink(
        mut self,
        name: impl Into<String>,
        sink: impl kevents_core::events_v1::EventsV1Sink,
        options: crate::series::SeriesSinkOptions,
    ) -> Self {
        self.series.push(crate::series::SeriesSpec {
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

    /// Starts the actors. Must be called inside a running actix `System`.
    pub fn start(self) -> Pipeline {
        let stats = Arc::new(PipelineStats::new());
        let mut broadcaster = Broadcaster::new(Arc::clone(&stats));

        if let Some((watcher, policy)) = self.logging {
            let addr = watcher.start();
            let ws = Arc::new(WatcherStats::new("logging", policy));
            broadcaster.add(addr.recipient(), ws);
        }

        let mut sinks = Vec::new();
        for spec in self.sinks {
            let (chain, recipient, ws) = spawn_chain(spec, &stats, self.sink_arbiter.as_ref());
            broadcaster.add_batched(recipient, Some(chain.correlator.clone().recipient()), ws);
            sinks.push(chain);
        }

        let mut series = Vec::new();
        for spec in self.series {
            let name = format!("series:{}", spec.name);
            let (chain, recipient, policy) =
                crate::series::spawn_series(spec, &self.clock, &stats, self.sink_arbiter.as_ref());
            broadcaster.add(recipient, Arc::new(WatcherStats::new(&name, policy)));
            series.push(chain);
        }

        for (name, recipient, policy) in self.watchers {
            let ws = Arc::new(WatcherStats::new(&name, policy));
            broadcaster.add(recipient, ws);
        }

        let broadcaster = broadcaster.start();
        let (tx, rx) = intake_channel(self.intake);
        let recorder_addr =
            RecorderActor::new(self.factory, broadcaster.clone(), rx, Arc::clone(&stats)).start();
        let v1 = self
            .events_v1
            .map(crate::series::V1Intake::new)
            .unwrap_or_default();
        let shared = Arc::new(IntakeShared::new(tx, self.clock, Arc::clone(&stats)).with_v1(v1));
        Pipeline {
            recorder: Recorder::pipeline(Arc::clone(&shared)),
            shared,
            recorder_addr,
            broadcaster,
            sinks,
            series,
            sink_arbiter: self.sink_arbiter,
            stats,
        }
    }
}

fn spawn_chain(
    spec: SinkSpec,
    stats: &Arc<PipelineStats>,
    arbiter: Option<&ArbiterHandle>,
) -> (SinkChain, Recipient<EventMessage>, Arc<WatcherStats>) {
    let sstats = Arc::new(SinkStats::new(&spec.name));
    stats.add_sink(Arc::clone(&sstats));
    let ws = Arc::new(WatcherStats::new(
        &format!("sink:{}", spec.name),
        spec.options.delivery,
    ));
    let pstats = Arc::clone(stats);
    // With a sink arbiter, the correlator runs there and the sink actor stays on this
    // arbiter: the two halves of a chain (correlating, writing) then share the work of a
    // burst between two threads. Without one, both run here.
    let home = arbiter.map(|_| Arbiter::current());
    // Runs on the thread of the arbiter the correlator starts on.
    let build = move |ctx: &mut Context<CorrelatorActor>| {
        let options = spec.options;
        let reply = ctx.address().recipient().downgrade();
        let actor = SinkActor::new(
            spec.sink,
            options.rebuild.clone(),
            options.retry.clone(),
            options.max_in_flight,
            Some(reply),
            Arc::clone(&sstats),
            Arc::clone(&pstats),
        );
        let sink = match &home {
            Some(home) => Supervisor::start_in_arbiter(home, move |_| actor),
            None => Supervisor::start(move |_| actor),
        };
        CorrelatorActor::new(Correlator::new(options.correlator), sink, sstats, pstats)
    };
    let correlator = match arbiter {
        Some(a) => CorrelatorActor::start_in_arbiter(a, build),
        None => CorrelatorActor::create(build),
    };
    let recipient = correlator.clone().recipient();
    (SinkChain { correlator }, recipient, ws)
}

struct SinkChain {
    correlator: Addr<CorrelatorActor>,
}

/// A running pipeline: Recorder actor -> Broadcaster -> watchers (logging, sink chains:
/// Correlator -> supervised Sink, your own actors).
///
/// Dropping it without [`shutdown`](Pipeline::shutdown) leaves the actors running until the
/// actix `System` stops (which drops, not drains, what is queued).
pub struct Pipeline {
    recorder: Recorder,
    shared: Arc<IntakeShared>,
    recorder_addr: Addr<RecorderActor>,
    broadcaster: Addr<Broadcaster>,
    sinks: Vec<SinkChain>,
    series: Vec<crate::series::SeriesChain>,
    sink_arbiter: Option<ArbiterHandle>,
    stats: Arc<PipelineStats>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// Why a pipeline operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PipelineError {
    /// The pipeline's actors have stopped (it was shut down).
    #[error("the event pipeline is shut down")]
    Shutdown,
}

/// A registered watcher: its id and a view of its counters.
#[derive(Debug, Clone)]
pub struct WatcherHandle {
    id: WatcherId,
    name: String,
}

impl WatcherHandle {
    /// The watcher's id.
    pub fn id(&self) -> WatcherId {
        self.id
    }

    /// The name it was registered with (the key in [`StatsSnapshot::watchers`]).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What [`Pipeline::shutdown`] achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Everything drained before the deadline.
    pub completed: bool,
    /// Occurrences still in the intake or the broadcaster when the deadline hit.
    pub pending_intake: u64,
    /// Per watcher, events still queued or being processed when the deadline hit (for a
    /// sink chain: events not yet written; these are counted as abandoned).
    pub pending_watchers: Vec<(String, u64)>,
    /// Actors of the pipeline still alive after the teardown (0 unless the System is
    /// stopping under us).
    pub live_actors: u64,
    /// All counters after the teardown.
    pub stats: StatsSnapshot,
}

impl ShutdownReport {
    /// Writes delivered by all sinks.
    pub fn delivered(&self) -> u64 {
        self.stats.sinks.iter().map(|s| s.delivered()).sum()
    }

    /// Everything still pending when the deadline hit.
    pub fn pending(&self) -> u64 {
        self.pending_intake + self.pending_watchers.iter().map(|p| p.1).sum::<u64>()
    }
}

impl Pipeline {
    /// A builder for events from `source`.
    pub fn builder(source: EventSource) -> PipelineBuilder {
        PipelineBuilder::new(source)
    }

    /// A handle to record events with (cheap to clone, usable from any thread).
    pub fn recorder(&self) -> Recorder {
        self.recorder.clone()
    }

    /// Every counter, now.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Registers a watcher actor. It sees every event the broadcaster distributes after the
    /// registration (in intake order).
    pub async fn add_watcher(
        &self,
        name: impl Into<String>,
        recipient: Recipient<EventMessage>,
        policy: WatcherPolicy,
    ) -> Result<WatcherHandle, PipelineError> {
        let name = name.into();
        let stats = Arc::new(WatcherStats::new(&name, policy));
        let id = self
            .broadcaster
            .send(Register {
                recipient,
                batch: None,
                stats,
            })
            .await
            .map_err(|_| PipelineError::Shutdown)?;
        Ok(WatcherHandle { id, name })
    }

    /// Adds a sink chain (its own correlator, as client-go's second `StartRecordingToSink`)
    /// registered as watcher `sink:<name>`; it sees every event distributed after this call.
    pub async fn add_sink(
        &mut self,
        name: impl Into<String>,
        sink: impl EventSink,
        options: SinkOptions,
    ) -> Result<WatcherHandle, PipelineError> {
        let spec = SinkSpec {
            name: name.into(),
            sink: Arc::new(sink),
            options,
        };
        let (chain, recipient, stats) = spawn_chain(spec, &self.stats, self.sink_arbiter.as_ref());
        let name = stats.name.clone();
        let batch = Some(chain.correlator.clone().recipient());
        self.sinks.push(chain);
        let id = self
            .broadcaster
            .send(Register {
                recipient,
                batch,
                stats,
            })
            .await
            .map_err(|_| PipelineError::Shutdown)?;
        Ok(WatcherHandle { id, name })
    }

    /// Unregisters a watcher; events already queued for it are still delivered. Returns
    /// whether it was registered.
    pub async fn remove_watcher(&self, watcher: &WatcherHandle) -> Result<bool, PipelineError> {
        self.broadcaster
            .send(Unregister(watcher.id))
            .await
            .map_err(|_| PipelineError::Shutdown)
    }

    /// Waits until everything recorded so far has been distributed and every watcher has
    /// finished it (sink chains: written or given up). Recording goes on meanwhile.
    pub async fn flush(&self) -> Result<(), PipelineError> {
        let target = self.stats.intake.recorded.get();
        // Everything recorded before this call must have left the intake first.
        while self.stats.intake.received.load(Ordering::Relaxed) < target {
            actix_rt::time::sleep(Duration::from_millis(1)).await;
        }
        let watchers = self
            .broadcaster
            .send(Drained)
            .await
            .map_err(|_| PipelineError::Shutdown)?;
        wait_idle(&watchers).await;
        Ok(())
    }

    /// Shuts the pipeline down: refuses new occurrences, drains the intake, the
    /// broadcaster, every watcher and every sink (writes and their retries) until `deadline`,
    /// then stops every actor and reports what was delivered, dropped and still pending.
    /// Never panics.
    pub async fn shutdown(self, deadline: Duration) -> ShutdownReport {
        self.shared.closed.store(true, Ordering::Release);
        let recorder_addr = self.recorder_addr.clone();
        let broadcaster = self.broadcaster.clone();
        let flush: Vec<_> = self
            .series
            .iter()
            .filter(|c| c.flush_on_shutdown)
            .map(|c| c.addr.clone())
            .collect();
        let drain = async move {
            recorder_addr.send(CloseIntake).await.ok()?;
            let watchers = broadcaster.send(Drained).await.ok()?;
            wait_idle(&watchers).await;
            // Every event is observed: write the latest count of every open series.
            for s in flush {
                s.send(crate::series::FlushSeries).await.ok()?;
            }
            Some(())
        };
        let completed = matches!(actix_rt::time::timeout(deadline, drain).await, Ok(Some(())));

        let pending_intake = self
            .stats
            .intake
            .recorded
            .get()
            .saturating_sub(self.stats.intake.broadcast.get())
            .saturating_sub(self.stats.intake.made_invalid.load(Ordering::Relaxed));
        let pending_watchers = self
            .stats
            .watchers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|w| (w.name.clone(), w.depth()))
            .filter(|p| p.1 > 0)
            .collect();

        // Teardown: recorder, broadcaster (drops every watcher's address), sink chains.
        self.recorder_addr.do_send(StopRecorder);
        let _ = self.broadcaster.send(StopBroadcaster).await;
        for chain in &self.sinks {
            let _ = chain.correlator.send(StopCorrelator).await;
        }
        for chain in &self.series {
            let _ = chain.addr.send(crate::series::StopSeries).await;
        }
        let Pipeline {
            stats,
            recorder_addr,
            broadcaster,
            sinks,
            series,
            ..
        } = self;
        drop((recorder_addr, broadcaster, sinks, series));
        // Let the stopped actors (possibly on another arbiter) run their last poll.
        for round in 0..1_000 {
            if stats.live_actors.load(Ordering::Relaxed) == 0 {
                break;
            }
            if round < 64 {
                actix_rt::task::yield_now().await;
            } else {
                actix_rt::time::sleep(Duration::from_millis(1)).await;
            }
        }
        ShutdownReport {
            completed,
            pending_intake,
            pending_watchers,
            live_actors: stats.live_actors.load(Ordering::Relaxed),
            stats: stats.snapshot(),
        }
    }
}

/// Waits until every slot of every watcher is free again.
async fn wait_idle(watchers: &[Arc<WatcherStats>]) {
    for w in watchers {
        let cap = w.policy.capacity();
        let n = u32::try_from(cap).unwrap_or(u32::MAX);
        if let Ok(permits) = w.slots.acquire_many(n).await {
            drop(permits);
        }
    }
}
