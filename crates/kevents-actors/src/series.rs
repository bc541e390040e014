//! The `events.k8s.io/v1` side of the pipeline: how v1 calls are routed at the recorder
//! ([`EventsV1Config`]), and the **series sink chain**: an actor that owns a
//! [`SeriesCache`] (client-go 1.27+ event series, bounded), runs its heartbeat/finish timers
//! on the actix clock, writes through an [`EventsV1Sink`] with retries, and writes the latest
//! count of every open series on graceful shutdown.
//!
//! ```text
//!  Recorder::event_v1 ── EventFactoryV1::make (validated at the call) ──▶ intake ──▶ Recorder actor
//!        │ (v1 not served: to_core_occurrence ─▶ core/v1 path, correlator)          │ Recorded::EventsV1
//!                                                                                    ▼
//!                                         Broadcaster ──▶ SeriesActor (watcher `series:<name>`)
//!                                                          observe / tick / flush ─▶ per event FIFO
//!                                                          ─▶ write_once(EventsV1Sink) ─▶ on_write_result
//! ```
//!
//! See `docs/semantics.md` ("Series") for what is written when.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::{self, Write as _};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use futures_util::FutureExt;
use kevents_core::events_v1::{
    ApiBridge, CoreFallback, Event, EventFactoryV1, EventsV1Sink, InvalidEventV1, OccurrenceV1,
    Reporter, Route, SeriesCache, SeriesOptions, SeriesStats, Step, V1WriteOutcome, Write,
    WriteReason, write_once,
};
use kevents_core::{Clock, SharedClock, SinkError, Time};
use tokio::sync::oneshot;

use crate::broadcaster::WatcherPolicy;
use crate::logging::LogStyle;
use crate::message::{DeliverySlot, EventMessage, Recorded};
use crate::sink::RetryPolicy;
use crate::stats::PipelineStats;

/// What core/v1 style calls (`event`, `eventf!`, `emit`, ...) record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CoreCalls {
    /// core/v1 events through the correlator chains, as client-go `tools/record`. The default.
    #[default]
    CoreV1,
    /// `events.k8s.io/v1` events through the series chains
    /// ([`from_core_occurrence`](kevents_core::events_v1::from_core_occurrence)): the object
    /// becomes `regarding`, the message the `note`; `action` is this value, or the reason
    /// when `None`. Only while events.k8s.io/v1 is served ([`EventsV1Config::served`]).
    EventsV1 {
        /// The action of every such event (`None`: the reason).
        action: Option<String>,
    },
}

/// How the recorder handles `events.k8s.io/v1` calls ([`Recorder::event_v1`],
/// [`eventf_v1!`](crate::eventf_v1)), and core/v1 calls when they should go to the new API.
///
/// ```
/// use kevents_actors::{CoreCalls, EventsV1Config};
/// use kevents_core::events_v1::{CoreFallback, Reporter};
///
/// // Discovery said events.k8s.io/v1 is missing (e.g. `HttpSink::events_v1_served()` was
/// // false): v1 calls become core/v1 events, keeping action/related in annotations.
/// let old = EventsV1Config::new(Reporter::with_instance("example.com/ctl", "ctl-0"))
///     .served(false)
///     .fallback(CoreFallback::KeepInAnnotations);
/// assert!(!old.served);
/// // Everything into the new API, including `recorder.event(..)` calls.
/// let all_v1 = EventsV1Config::new(Reporter::new("example.com/ctl"))
///     .core_calls(CoreCalls::EventsV1 { action: None });
/// assert!(all_v1.served);
/// ```
///
/// [`Recorder::event_v1`]: crate::Recorder::event_v1
#[derive(Debug, Clone)]
pub struct EventsV1Config {
    /// Builds and validates the events (reporter, naming, cluster-scoped namespace, note
    /// policy).
    pub factory: EventFactoryV1,
    /// Whether the server serves `events.k8s.io/v1` (discovery). `true` by default; when
    /// `false`, v1 calls fall back to core/v1 through the correlator path.
    pub served: bool,
    /// What the core/v1 fallback does with `action` and `related`.
    pub fallback: CoreFallback,
    /// What core/v1 style calls record.
    pub core_calls: CoreCalls,
}

impl EventsV1Config {
    /// Events reported by `reporter` (`Reporter::new(controller)` gives
    /// `<controller>-<hostname>` as the instance), served, dropping action/related on a
    /// fallback, core calls kept on core/v1.
    pub fn new(reporter: Reporter) -> Self {
        EventsV1Config {
            factory: EventFactoryV1::new(reporter),
            served: true,
            fallback: CoreFallback::Drop,
            core_calls: CoreCalls::CoreV1,
        }
    }

    /// Replaces the factory (naming, cluster-scoped namespace, note policy).
    pub fn factory(mut self, factory: EventFactoryV1) -> Self {
        self.factory = factory;
        self
    }

    /// Sets whether events.k8s.io/v1 is served.
    pub fn served(mut self, served: bool) -> Self {
        self.served = served;
        self
    }

    /// Sets the core/v1 fallback of action and related.
    pub fn fallback(mut self, fallback: CoreFallback) -> Self {
        self.fallback = fallback;
        self
    }

    /// Sets what core/v1 style calls record.
    pub fn core_calls(mut self, core_calls: CoreCalls) -> Self {
        self.core_calls = core_calls;
        self
    }
}

/// The recorder side of [`EventsV1Config`], shared by every handle.
#[derive(Debug, Clone)]
pub(crate) struct V1Intake(Arc<EventsV1Config>);

impl Default for V1Intake {
    fn default() -> Self {
        V1Intake(Arc::new(EventsV1Config::new(Reporter::with_instance(
            "kevents", "kevents",
        ))))
    }
}

impl V1Intake {
    pub(crate) fn new(config: EventsV1Config) -> Self {
        V1Intake(Arc::new(config))
    }

    /// Routes one v1 call made at `now`.
    pub(crate) fn route(&self, now: Time, occ: OccurrenceV1) -> Result<Route, InvalidEventV1> {
        let bridge = ApiBridge {
            events_v1_served: self.0.served,
            fallback: self.0.fallback,
        };
        bridge.route(&self.0.factory, now, occ)
    }

    /// `Some(action)` when core/v1 calls are to be recorded into events.k8s.io/v1.
    pub(crate) fn core_calls_action(&self) -> Option<Option<String>> {
        match &self.0.core_calls {
            CoreCalls::EventsV1 { action } if self.0.served => Some(action.clone()),
            _ => None,
        }
    }
}

/// A [`Clock`] that reads tokio's clock, so that events, series and the actix timers all
/// follow `tokio::time::pause`/`advance` in tests (with real time it is the system clock's
/// pace from `base`).
///
/// ```
/// use kevents_actors::TokioClock;
/// use kevents_core::{Clock, Time};
/// # actix::System::new().block_on(async {
/// let clock = TokioClock::new(Time::from_unix_secs(1_609_459_200));
/// assert!(clock.now() >= Time::from_unix_secs(1_609_459_200));
/// # });
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base: Time,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// A clock reading `base` now. Must be called inside a tokio runtime when time is
    /// paused (the start instant is tokio's `Instant::now()`).
    pub fn new(base: Time) -> Self {
        TokioClock {
            base,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Time {
        self.base
            .saturating_add(tokio::time::Instant::now().duration_since(self.start))
    }
}

/// Options of a series sink chain ([`PipelineBuilder::series_sink`]).
///
/// ```
/// use kevents_actors::SeriesSinkOptions;
/// let o = SeriesSinkOptions::default();
/// assert_eq!(o.series.max_entries, 16_384);
/// assert!(o.flush_on_shutdown);
/// ```
///
/// [`PipelineBuilder::series_sink`]: crate::PipelineBuilder::series_sink
#[derive(Clone)]
pub struct SeriesSinkOptions {
    /// The cache: cap on tracked events (eviction rule in `docs/semantics.md`), heartbeat
    /// (30 min), finish (6 min idle), note in the identity (off).
    pub series: SeriesOptions,
    /// Retries of CREATEs, series starts, evictions and flushes (heartbeats and finishes are
    /// tried once, as client-go: the cache reschedules them). Attempts, sleeps and
    /// `Retry-After` are honoured; which errors are retried is
    /// [`kevents_core::events_v1::classify`] (kevents' classification, 429/5xx included).
    pub retry: RetryPolicy,
    /// Writes in flight at once across different events; writes of one event are always one
    /// after the other (a series PATCH after its CREATE).
    pub max_in_flight: usize,
    /// How events reach the chain. The slot of an event is held until the write it caused
    /// (if any) is finished.
    pub delivery: WatcherPolicy,
    /// The clock of the timers (default: the pipeline's clock, the one events are stamped
    /// with). Use the same clock as the pipeline.
    pub clock: Option<SharedClock>,
    /// Longest sleep between two timer checks (the timer normally wakes at the cache's next
    /// deadline; this bound keeps it correct when the clock jumps). Default 60 s.
    pub max_tick: Duration,
    /// Write the latest count of every open series on [`Pipeline::shutdown`] (on by
    /// default; client-go loses them).
    ///
    /// [`Pipeline::shutdown`]: crate::Pipeline::shutdown
    pub flush_on_shutdown: bool,
}

impl Default for SeriesSinkOptions {
    fn default() -> Self {
        SeriesSinkOptions {
            series: SeriesOptions::default(),
            retry: RetryPolicy::default(),
            max_in_flight: 16,
            delivery: WatcherPolicy::default(),
            clock: None,
            max_tick: Duration::from_secs(60),
            flush_on_shutdown: true,
        }
    }
}

impl fmt::Debug for SeriesSinkOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeriesSinkOptions")
            .field("series", &self.series)
            .field("retry", &self.retry)
            .field("max_in_flight", &self.max_in_flight)
            .field("delivery", &self.delivery)
            .field("clock", &self.clock)
            .field("max_tick", &self.max_tick)
            .field("flush_on_shutdown", &self.flush_on_shutdown)
            .finish()
    }
}

/// A point-in-time copy of the counters of one series sink chain (in
/// [`StatsSnapshot::series`](crate::StatsSnapshot::series)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SeriesSnapshot {
    /// The chain's name.
    pub name: String,
    /// The cache's own counters: observed, creates, series started, counted in memory,
    /// heartbeats, finished, singletons forgotten, **evicted singletons and series** (the
    /// cap), flushed, rescheduled, entries and open series now.
    pub cache: SeriesStats,
    /// Writes that ended in a successful CREATE.
    pub created: u64,
    /// Writes that ended in a successful PATCH.
    pub patched: u64,
    /// PATCHes that found nothing (404) and were re-created with their series.
    pub recreated: u64,
    /// Flush writes (graceful shutdown) the server stored.
    pub flush_written: u64,
    /// Writes given up: the error is not retryable (422, 403, ...).
    pub rejected: u64,
    /// Writes given up after the retry budget.
    pub retry_exhausted: u64,
    /// Heartbeats and finishes that failed once (client-go tries them once; the cache writes
    /// a failed finish again at the next tick).
    pub rescheduled: u64,
    /// Writes still queued or in flight when the pipeline stopped.
    pub abandoned: u64,
    /// Requests attempted (a PATCH answered 404 and its CREATE count as one attempt).
    pub attempts: u64,
    /// Writes queued or in flight now.
    pub queued: u64,
}

impl SeriesSnapshot {
    /// Writes the server stored.
    pub fn delivered(&self) -> u64 {
        self.created + self.patched + self.recreated
    }

    /// Writes given up.
    pub fn failed(&self) -> u64 {
        self.rejected + self.retry_exhausted + self.abandoned
    }
}

/// The counters one chain shares with [`Pipeline::stats`](crate::Pipeline::stats).
#[derive(Debug)]
pub(crate) struct SeriesShared {
    snapshot: Mutex<SeriesSnapshot>,
}

impl SeriesShared {
    pub(crate) fn snapshot(&self) -> SeriesSnapshot {
        self.snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// `metrics` handles of one chain.
struct SeriesMetrics {
    evicted_singletons: metrics::Counter,
    evicted_series: metrics::Counter,
    heartbeats: metrics::Counter,
    finished: metrics::Counter,
    flushed: metrics::Counter,
    counted: metrics::Counter,
    delivered: metrics::Counter,
    failed: metrics::Counter,
    open: metrics::Gauge,
    entries: metrics::Gauge,
}

impl SeriesMetrics {
    fn new(name: &str) -> Self {
        let n = name.to_owned();
        SeriesMetrics {
            evicted_singletons: metrics::counter!("kevents_series_evicted_total", "sink" => n.clone(), "kind" => "singleton"),
            evicted_series: metrics::counter!("kevents_series_evicted_total", "sink" => n.clone(), "kind" => "series"),
            heartbeats: metrics::counter!("kevents_series_writes_total", "sink" => n.clone(), "reason" => "heartbeat"),
            finished: metrics::counter!("kevents_series_writes_total", "sink" => n.clone(), "reason" => "finish"),
            flushed: metrics::counter!("kevents_series_writes_total", "sink" => n.clone(), "reason" => "flush"),
            counted: metrics::counter!("kevents_series_counted_in_memory_total", "sink" => n.clone()),
            delivered: metrics::counter!("kevents_series_requests_total", "sink" => n.clone(), "outcome" => "delivered"),
            failed: metrics::counter!("kevents_series_requests_total", "sink" => n.clone(), "outcome" => "failed"),
            open: metrics::gauge!("kevents_series_open", "sink" => n.clone()),
            entries: metrics::gauge!("kevents_series_entries", "sink" => n),
        }
    }
}

/// Logs one `events.k8s.io/v1` event for the [`LoggingWatcher`](crate::LoggingWatcher).
pub(crate) fn log_v1(style: LogStyle, e: &Event) {
    let r = &e.regarding;
    if matches!(style, LogStyle::Structured | LogStyle::Both) {
        let related = e
            .related
            .as_ref()
            .map(|o| format!("{}/{}/{}", o.kind, o.namespace, o.name))
            .unwrap_or_default();
        tracing::info!(
            target: "kevents::events",
            api = "events.k8s.io/v1",
            regarding = ?format!("{}/{}", r.namespace, r.name),
            kind = ?r.kind,
            related = ?related,
            r#type = ?e.type_,
            reason = ?e.reason,
            action = ?e.action,
            reportingController = ?e.reporting_controller,
            reportingInstance = ?e.reporting_instance,
            note = ?e.note,
            "Event occurred"
        );
    }
    if matches!(style, LogStyle::ClientGo | LogStyle::Both) {
        let mut s = String::with_capacity(128 + e.note.len());
        let _ = write!(
            s,
            "Event({}/{} {}/{}): type: '{}' reason: '{}' action: '{}' {}",
            r.api_version, r.kind, r.namespace, r.name, e.type_, e.reason, e.action, e.note
        );
        tracing::info!(target: "kevents::events", "{s}");
    }
}

/// Shortest sleep of the timer.
const MIN_TICK: Duration = Duration::from_millis(100);

/// Write the latest count of every open series, reply when every write has ended.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct FlushSeries;

/// Stop the chain; replies with the number of writes abandoned.
#[derive(Message)]
#[rtype(result = "u64")]
pub(crate) struct StopSeries;

struct Job {
    write: Write,
    attempt: u32,
    _slot: Option<DeliverySlot>,
}

/// The series sink actor: owns the cache, its timers and the writes.
pub(crate) struct SeriesActor {
    cache: SeriesCache,
    sink: Arc<dyn EventsV1Sink>,
    retry: RetryPolicy,
    max_in_flight: usize,
    clock: SharedClock,
    max_tick: Duration,
    queues: HashMap<String, VecDeque<Job>>,
    ready: VecDeque<String>,
    active: HashSet<String>,
    /// Writes queued or in flight (kept as a count: summing the queues is O(events)).
    pending: u64,
    timer: Option<(Time, SpawnHandle)>,
    waiters: Vec<oneshot::Sender<()>>,
    counters: SeriesSnapshot,
    shared: Arc<SeriesShared>,
    metrics: SeriesMetrics,
    pstats: Arc<PipelineStats>,
}

impl SeriesActor {
    pub(crate) fn new(
        name: &str,
        sink: Arc<dyn EventsV1Sink>,
        options: SeriesSinkOptions,
        clock: SharedClock,
        pstats: Arc<PipelineStats>,
    ) -> (Self, Arc<SeriesShared>) {
        let counters = SeriesSnapshot {
            name: name.to_owned(),
            ..Default::default()
        };
        let shared = Arc::new(SeriesShared {
            snapshot: Mutex::new(counters.clone()),
        });
        let actor = SeriesActor {
            cache: SeriesCache::new(options.series),
            sink,
            retry: options.retry,
            max_in_flight: options.max_in_flight.max(1),
            clock: options.clock.unwrap_or(clock),
            max_tick: options.max_tick.max(Duration::from_millis(1)),
            queues: HashMap::new(),
            ready: VecDeque::new(),
            active: HashSet::new(),
            pending: 0,
            timer: None,
            waiters: Vec::new(),
            counters,
            shared: Arc::clone(&shared),
            metrics: SeriesMetrics::new(name),
            pstats,
        };
        (actor, shared)
    }

    fn enqueue(&mut self, write: Write, slot: Option<DeliverySlot>) {
        let e = write.event();
        let mut key = String::with_capacity(e.metadata.namespace.len() + 1 + e.metadata.name.len());
        key.push_str(&e.metadata.namespace);
        key.push('/');
        key.push_str(&e.metadata.name);
        let job = Job {
            write,
            attempt: 1,
            _slot: slot,
        };
        self.pending += 1;
        let q = self.queues.entry(key.clone()).or_default();
        let was_empty = q.is_empty();
        q.push_back(job);
        if was_empty && !self.active.contains(&key) {
            self.ready.push_back(key);
        }
    }

    fn pump(&mut self, ctx: &mut Context<Self>) {
        while self.active.len() < self.max_in_flight {
            let Some(key) = self.ready.pop_front() else {
                break;
            };
            let Some(job) = self.queues.get_mut(&key).and_then(VecDeque::pop_front) else {
                self.queues.remove(&key);
                continue;
            };
            self.active.insert(key.clone());
            self.attempt(key, job, ctx);
        }
    }

    fn attempt(&mut self, key: String, job: Job, ctx: &mut Context<Self>) {
        self.counters.attempts += 1;
        let sink = Arc::clone(&self.sink);
        let Job {
            write,
            attempt,
            _slot,
        } = job;
        let copy = write.clone();
        let fut = async move {
            match AssertUnwindSafe(write_once(&*sink, write))
                .catch_unwind()
                .await
            {
                Ok(out) => out,
                Err(_) => V1WriteOutcome {
                    sent: copy,
                    result: Err(SinkError::Transport(
                        "the events.k8s.io/v1 sink panicked".into(),
                    )),
                    recreated: false,
                    step: Step::Retry,
                },
            }
        };
        ctx.spawn(fut.into_actor(self).map(move |out, act, ctx| {
            act.settle(key, attempt, _slot, out, ctx);
        }));
    }

    fn settle(
        &mut self,
        key: String,
        attempt: u32,
        slot: Option<DeliverySlot>,
        out: V1WriteOutcome,
        ctx: &mut Context<Self>,
    ) {
        let step = self.cache.on_write_result(&out.sent, &out.result);
        let reason = out.sent.reason();
        match step {
            Step::Stored => {
                if out.recreated {
                    self.counters.recreated += 1;
                } else if out.sent.is_create() {
                    self.counters.created += 1;
                } else {
                    self.counters.patched += 1;
                }
                if reason == WriteReason::Flush {
                    self.counters.flush_written += 1;
                }
            }
            Step::Retry if attempt < self.retry.max_attempts.max(1) => {
                let delay = match &out.result {
                    Err(e) => retry_delay(&self.retry, attempt + 1, e),
                    Ok(_) => self.retry.sleep,
                };
                tracing::debug!(
                    event = %key, attempt, ?delay, reason = reason.as_str(),
                    error = ?out.result.as_ref().err(),
                    "events.k8s.io/v1 write failed; retrying"
                );
                let job = Job {
                    write: out.sent.retry(),
                    attempt: attempt + 1,
                    _slot: slot,
                };
                ctx.run_later(delay, move |act, ctx| act.attempt(key, job, ctx));
                self.export();
                return;
            }
            Step::Retry => {
                self.counters.retry_exhausted += 1;
                tracing::warn!(
                    event = %key, attempts = attempt, reason = reason.as_str(),
                    error = ?out.result.as_ref().err(),
                    "events.k8s.io/v1 write given up after the retry budget"
                );
            }
            Step::Rescheduled => self.counters.rescheduled += 1,
            Step::Recreate | Step::Dropped { .. } => {
                self.counters.rejected += 1;
                if step != (Step::Dropped { quiet: true }) {
                    tracing::warn!(
                        event = %key, reason = reason.as_str(),
                        error = ?out.result.as_ref().err(),
                        "events.k8s.io/v1 write rejected"
                    );
                }
            }
        }
        drop(slot);
        self.pending = self.pending.saturating_sub(1);
        self.active.remove(&key);
        if self.queues.get(&key).is_some_and(|q| !q.is_empty()) {
            self.ready.push_back(key);
        } else {
            self.queues.remove(&key);
        }
        self.pump(ctx);
        self.arm(ctx);
        self.export();
        if self.is_idle() {
            for w in self.waiters.drain(..) {
                let _ = w.send(());
            }
        }
    }

    fn is_idle(&self) -> bool {
        self.active.is_empty() && self.ready.is_empty()
    }

    /// Makes sure the timer wakes up no later than the cache's next deadline (and at most
    /// `max_tick` from now).
    fn arm(&mut self, ctx: &mut Context<Self>) {
        let Some(deadline) = self.cache.next_deadline() else {
            if let Some((_, h)) = self.timer.take() {
                ctx.cancel_future(h);
            }
            return;
        };
        let now = self.clock.now();
        // At least MIN_TICK: progress even if a deadline in the past has nothing to do.
        let wait = u64::try_from(deadline.nanos_since(now))
            .map(Duration::from_nanos)
            .unwrap_or(Duration::ZERO)
            .clamp(MIN_TICK, self.max_tick.max(MIN_TICK));
        let fire_at = now.saturating_add(wait);
        if let Some((at, h)) = &self.timer {
            if *at <= fire_at {
                return;
            }
            ctx.cancel_future(*h);
        }
        let h = ctx.run_later(wait, |act, ctx| {
            act.timer = None;
            act.on_tick(ctx);
        });
        self.timer = Some((fire_at, h));
    }

    fn on_tick(&mut self, ctx: &mut Context<Self>) {
        let writes = self.cache.tick(self.clock.now());
        for w in writes {
            self.enqueue(w, None);
        }
        self.pump(ctx);
        self.arm(ctx);
        self.export();
    }

    fn export(&mut self) {
        let c = self.cache.stats();
        self.counters.cache = c;
        self.counters.queued = self.pending;
        let m = &self.metrics;
        m.evicted_singletons.absolute(c.evicted_singletons);
        m.evicted_series.absolute(c.evicted_series);
        m.heartbeats.absolute(c.heartbeats);
        m.finished.absolute(c.finished);
        m.flushed.absolute(c.flushed);
        m.counted.absolute(c.counted_in_memory);
        m.delivered.absolute(self.counters.delivered());
        m.failed.absolute(self.counters.failed());
        m.open.set(c.open_series as f64);
        m.entries.set(c.entries as f64);
        let mut s = self
            .shared
            .snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        s.clone_from(&self.counters);
    }
}

/// The sleep before attempt `next` (2 for the first retry), as the core sink's.
fn retry_delay(p: &RetryPolicy, next: u32, err: &SinkError) -> Duration {
    if p.honour_retry_after
        && let Some(d) = err.retry_after()
    {
        return d.min(p.max_retry_after);
    }
    if next == 2 && p.randomize_first {
        p.sleep.mul_f64(fastrand::f64())
    } else {
        p.sleep
    }
}

impl Actor for SeriesActor {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Context<Self>) {
        self.pstats.actor_started();
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.pstats.actor_stopped();
    }
}

impl Handler<EventMessage> for SeriesActor {
    type Result = ();

    fn handle(&mut self, msg: EventMessage, ctx: &mut Context<Self>) {
        let (record, slot) = msg.into_parts();
        let event = match Arc::try_unwrap(record) {
            Ok(Recorded::EventsV1(e)) => e,
            Ok(_) => return,
            Err(shared) => match shared.events_v1() {
                Some(e) => e.clone(),
                None => return,
            },
        };
        let now = event.event_time.unwrap_or_else(|| self.clock.now());
        let mut slot = Some(slot);
        for w in self.cache.observe(event, now) {
            self.enqueue(w, slot.take());
        }
        drop(slot);
        self.pump(ctx);
        self.arm(ctx);
        self.export();
    }
}

impl Handler<FlushSeries> for SeriesActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: FlushSeries, ctx: &mut Context<Self>) -> Self::Result {
        for w in self.cache.flush() {
            self.enqueue(w, None);
        }
        self.pump(ctx);
        self.arm(ctx);
        self.export();
        if self.is_idle() {
            return Box::pin(async {});
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.push(tx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

impl Handler<StopSeries> for SeriesActor {
    type Result = u64;

    fn handle(&mut self, _: StopSeries, ctx: &mut Context<Self>) -> u64 {
        let abandoned = self.pending;
        self.pending = 0;
        self.counters.abandoned += abandoned;
        self.queues.clear();
        self.ready.clear();
        self.active.clear();
        self.export();
        ctx.stop();
        abandoned
    }
}

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
    clock: &SharedClock,
    stats: &Arc<PipelineStats>,
    arbiter: Option<&ArbiterHandle>,
) -> (SeriesChain, Recipient<EventMessage>, WatcherPolicy) {
    let delivery = spec.options.delivery;
    let flush_on_shutdown = spec.options.flush_on_shutdown;
    let (actor, shared) = SeriesActor::new(
        &spec.name,
        spec.sink,
        spec.options,
        Arc::clone(clock),
        Arc::clone(stats),
    );
    stats.add_series(shared);
    let addr = match arbiter {
        Some(a) => SeriesActor::start_in_arbiter(a, move |_| actor),
        None => actor.start(),
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
