//! Counters and gauges of the pipeline: kept in-process (atomics, read with
//! [`Pipeline::stats`](crate::Pipeline::stats)) and mirrored to the `metrics` facade, whose
//! recorder (Prometheus exporter or other) the application installs.
//!
//! Metric names (all counters end in `_total`):
//!
//! | name | labels | meaning |
//! |---|---|---|
//! | `kevents_recorded_total` | | occurrences accepted into the intake |
//! | `kevents_dropped_total` | `reason` = `invalid`, `intake_full`, `after_shutdown` | refused at the recorder |
//! | `kevents_broadcast_total` | | events the broadcaster distributed |
//! | `kevents_watcher_accepted_total` | `watcher` | events queued for a watcher |
//! | `kevents_watcher_dropped_total` | `watcher`, `reason` = `full`, `closed` | events a watcher did not get |
//! | `kevents_sink_events_total` | `sink`, `outcome` = `correlated`, `aggregated`, `spam_filtered` | correlator decisions |
//! | `kevents_sink_writes_total` | `sink`, `outcome` = `created`, `patched`, `recreated`, `rejected`, `retry_exhausted`, `abandoned` | finished writes |
//! | `kevents_sink_attempts_total` | `sink` | requests made (including retries) |
//! | `kevents_sink_restarts_total` | `sink` | supervisor restarts (panics, fatal errors) |
//! | `kevents_queue_depth` (gauge) | `queue` = `intake` or `watcher:<name>` or `sink:<name>` | items waiting |
//! | `kevents_series_evicted_total` | `sink`, `kind` = `singleton`, `series` | entries evicted because the series cache was full |
//! | `kevents_series_writes_total` | `sink`, `reason` = `heartbeat`, `finish`, `flush` | series writes produced by the timers and the shutdown flush |
//! | `kevents_series_counted_in_memory_total` | `sink` | repeats counted without a write |
//! | `kevents_series_requests_total` | `sink`, `outcome` = `delivered`, `failed` | finished events.k8s.io/v1 writes |
//! | `kevents_series_open`, `kevents_series_entries` (gauges) | `sink` | open series / tracked events now |

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::broadcaster::WatcherPolicy;

/// A counter kept in-process and mirrored to the `metrics` facade.
#[derive(Debug)]
pub(crate) struct Counter {
    value: AtomicU64,
    handle: metrics::Counter,
}

impl Counter {
    fn new(handle: metrics::Counter) -> Self {
        Counter {
            value: AtomicU64::new(0),
            handle,
        }
    }

    pub(crate) fn add(&self, n: u64) {
        self.value.fetch_add(n, Ordering::Relaxed);
        self.handle.increment(n);
    }

    pub(crate) fn get(&self) -> u64 {
        self.value.load(Ordering::Relaxed)
    }
}

/// Logs drops without flooding: the first drop of a kind is logged at once, later ones as a
/// summary at most once per interval.
#[derive(Debug)]
pub(crate) struct DropLog {
    what: String,
    first_logged: AtomicBool,
    unlogged: AtomicU64,
    last_ms: AtomicU64,
}

/// Minimum time between two summary lines of one kind of drop.
pub(crate) const DROP_LOG_INTERVAL: Duration = Duration::from_secs(10);

fn process_millis() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl DropLog {
    pub(crate) fn new(what: impl Into<String>) -> Self {
        DropLog {
            what: what.into(),
            first_logged: AtomicBool::new(false),
            unlogged: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
        }
    }

    pub(crate) fn record(&self, n: u64) {
        if !self.first_logged.swap(true, Ordering::Relaxed) {
            self.last_ms.store(process_millis(), Ordering::Relaxed);
            tracing::warn!(
                target: "kevents::drops",
                what = %self.what,
                dropped = n,
                "kevents dropped events (further drops of this kind are summarised at most every {}s)",
                DROP_LOG_INTERVAL.as_secs()
            );
            return;
        }
        self.unlogged.fetch_add(n, Ordering::Relaxed);
        let now = process_millis();
        let last = self.last_ms.load(Ordering::Relaxed);
        let interval = u64::try_from(DROP_LOG_INTERVAL.as_millis()).unwrap_or(u64::MAX);
        if now.saturating_sub(last) >= interval
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let dropped = self.unlogged.swap(0, Ordering::Relaxed);
            tracing::warn!(
                target: "kevents::drops",
                what = %self.what,
                dropped,
                since_secs = now.saturating_sub(last) / 1000,
                "kevents dropped events"
            );
        }
    }
}

/// Counters of the recorder and the broadcaster.
#[derive(Debug)]
pub(crate) struct IntakeStats {
    pub(crate) recorded: Counter,
    pub(crate) invalid: Counter,
    pub(crate) intake_full: Counter,
    pub(crate) after_shutdown: Counter,
    pub(crate) received: AtomicU64,
    pub(crate) made_invalid: AtomicU64,
    pub(crate) broadcast: Counter,
    pub(crate) intake_full_log: DropLog,
    pub(crate) intake_depth: metrics::Gauge,
}

impl IntakeStats {
    fn new() -> Self {
        IntakeStats {
            recorded: Counter::new(metrics::counter!("kevents_recorded_total")),
            invalid: Counter::new(
                metrics::counter!("kevents_dropped_total", "reason" => "invalid"),
            ),
            intake_full: Counter::new(
                metrics::counter!("kevents_dropped_total", "reason" => "intake_full"),
            ),
            after_shutdown: Counter::new(
                metrics::counter!("kevents_dropped_total", "reason" => "after_shutdown"),
            ),
            received: AtomicU64::new(0),
            made_invalid: AtomicU64::new(0),
            broadcast: Counter::new(metrics::counter!("kevents_broadcast_total")),
            intake_full_log: DropLog::new("intake full"),
            intake_depth: metrics::gauge!("kevents_queue_depth", "queue" => "intake"),
        }
    }

    /// Occurrences accepted and not yet taken by the recorder actor.
    pub(crate) fn intake_depth(&self) -> u64 {
        self.recorded
            .get()
            .saturating_sub(self.received.load(Ordering::Relaxed))
    }
}

/// Counters of one watcher.
#[derive(Debug)]
pub(crate) struct WatcherStats {
    pub(crate) name: String,
    pub(crate) policy: WatcherPolicy,
    pub(crate) accepted: Counter,
    pub(crate) dropped_full: Counter,
    pub(crate) dropped_closed: Counter,
    pub(crate) full_log: DropLog,
    pub(crate) depth_gauge: metrics::Gauge,
    pub(crate) slots: Arc<Semaphore>,
}

impl WatcherStats {
    pub(crate) fn new(name: &str, policy: WatcherPolicy) -> Self {
        let n = name.to_owned();
        WatcherStats {
            name: name.to_owned(),
            policy,
            accepted: Counter::new(
                metrics::counter!("kevents_watcher_accepted_total", "watcher" => n.clone()),
            ),
            dropped_full: Counter::new(
                metrics::counter!("kevents_watcher_dropped_total", "watcher" => n.clone(), "reason" => "full"),
            ),
            dropped_closed: Counter::new(
                metrics::counter!("kevents_watcher_dropped_total", "watcher" => n.clone(), "reason" => "closed"),
            ),
            full_log: DropLog::new(format!("watcher {name} full")),
            depth_gauge: metrics::gauge!("kevents_queue_depth", "queue" => format!("watcher:{n}")),
            slots: Arc::new(Semaphore::new(policy.capacity())),
        }
    }

    pub(crate) fn depth(&self) -> u64 {
        (self.policy.capacity() - self.slots.available_permits().min(self.policy.capacity())) as u64
    }

    fn snapshot(&self) -> WatcherSnapshot {
        WatcherSnapshot {
            name: self.name.clone(),
            policy: self.policy,
            accepted: self.accepted.get(),
            dropped_full: self.dropped_full.get(),
            dropped_closed: self.dropped_closed.get(),
            depth: self.depth(),
        }
    }
}

/// Counters of one sink chain (its correlator and its sink actor).
#[derive(Debug)]
pub(crate) struct SinkStats {
    pub(crate) name: String,
    pub(crate) correlated: Counter,
    pub(crate) aggregated: Counter,
    pub(crate) spam_filtered: Counter,
    pub(crate) created: Counter,
    pub(crate) patched: Counter,
    pub(crate) recreated: Counter,
    pub(crate) rejected: Counter,
    pub(crate) retry_exhausted: Counter,
    pub(crate) abandoned: Counter,
    pub(crate) attempts: Counter,
    pub(crate) restarts: Counter,
    pub(crate) queued: AtomicU64,
    pub(crate) in_flight: AtomicU64,
    pub(crate) depth_gauge: metrics::Gauge,
    pub(crate) retry_log: DropLog,
}

impl SinkStats {
    pub(crate) fn new(name: &str) -> Self {
        let n = name.to_owned();
        let ev = |o: &'static str| {
            Counter::new(
                metrics::counter!("kevents_sink_events_total", "sink" => n.clone(), "outcome" => o),
            )
        };
        let wr = |o: &'static str| {
            Counter::new(
                metrics::counter!("kevents_sink_writes_total", "sink" => n.clone(), "outcome" => o),
            )
        };
        SinkStats {
            name: n.clone(),
            correlated: ev("correlated"),
            aggregated: ev("aggregated"),
            spam_filtered: ev("spam_filtered"),
            created: wr("created"),
            patched: wr("patched"),
            recreated: wr("recreated"),
            rejected: wr("rejected"),
            retry_exhausted: wr("retry_exhausted"),
            abandoned: wr("abandoned"),
            attempts: Counter::new(
                metrics::counter!("kevents_sink_attempts_total", "sink" => n.clone()),
            ),
            restarts: Counter::new(
                metrics::counter!("kevents_sink_restarts_total", "sink" => n.clone()),
            ),
            queued: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            depth_gauge: metrics::gauge!("kevents_queue_depth", "queue" => format!("sink:{n}")),
            retry_log: DropLog::new(format!("sink {name} retry budget exhausted")),
        }
    }

    fn snapshot(&self) -> SinkSnapshot {
        SinkSnapshot {
            name: self.name.clone(),
            correlated: self.correlated.get(),
            aggregated: self.aggregated.get(),
            spam_filtered: self.spam_filtered.get(),
            created: self.created.get(),
            patched: self.patched.get(),
            recreated: self.recreated.get(),
            rejected: self.rejected.get(),
            retry_exhausted: self.retry_exhausted.get(),
            abandoned: self.abandoned.get(),
            attempts: self.attempts.get(),
            restarts: self.restarts.get(),
            queued: self.queued.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
        }
    }
}

/// Everything the pipeline counts, shared by its actors.
#[derive(Debug)]
pub(crate) struct PipelineStats {
    pub(crate) intake: IntakeStats,
    pub(crate) watchers: Mutex<Vec<Arc<WatcherStats>>>,
    pub(crate) sinks: Mutex<Vec<Arc<SinkStats>>>,
    pub(crate) live_actors: AtomicU64,
    /// Series sink chains (events.k8s.io/v1).
    pub(crate) series: Mutex<Vec<Arc<crate::series::SeriesShared>>>,
}

impl PipelineStats {
    pub(crate) fn new() -> Self {
        PipelineStats {
            intake: IntakeStats::new(),
            watchers: Mutex::new(Vec::new()),
            sinks: Mutex::new(Vec::new()),
            live_actors: AtomicU64::new(0),
            series: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn add_series(&self, s: Arc<crate::series::SeriesShared>) {
        self.series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(s);
    }

    pub(crate) fn add_watcher(&self, w: Arc<WatcherStats>) {
        self.watchers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(w);
    }

    pub(crate) fn add_sink(&self, s: Arc<SinkStats>) {
        self.sinks.lock().unwrap_or_else(|p| p.into_inner()).push(s);
    }

    pub(crate) fn actor_started(&self) {
        self.live_actors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn actor_stopped(&self) {
        self.live_actors.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let i = &self.intake;
        let watchers: Vec<WatcherSnapshot> = self
            .watchers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|w| w.snapshot())
            .collect();
        let sinks: Vec<SinkSnapshot> = self
            .sinks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|s| s.snapshot())
            .collect();
        StatsSnapshot {
            recorded: i.recorded.get(),
            dropped_invalid: i.invalid.get(),
            dropped_intake_full: i.intake_full.get(),
            dropped_after_shutdown: i.after_shutdown.get(),
            broadcast: i.broadcast.get(),
            intake_depth: i.intake_depth(),
            watchers,
            sinks,
            series: self
                .series
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .map(|s| s.snapshot())
                .collect(),
        }
    }
}

/// A point-in-time copy of every counter of one watcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherSnapshot {
    /// The name the watcher was registered with.
    pub name: String,
    /// Its delivery policy.
    pub policy: WatcherPolicy,
    /// Events queued for it.
    pub accepted: u64,
    /// Events it did not get because its queue was full (drop-if-full only).
    pub dropped_full: u64,
    /// Events it did not get because its actor had stopped.
    pub dropped_closed: u64,
    /// Events queued for it and not yet finished (messages not yet dropped).
    pub depth: u64,
}

/// A point-in-time copy of every counter of one sink chain (correlator + sink actor).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SinkSnapshot {
    /// The sink's name.
    pub name: String,
    /// Events the correlator processed.
    pub correlated: u64,
    /// Events folded into an aggregate event.
    pub aggregated: u64,
    /// Events the spam filter skipped (not written: a counted drop).
    pub spam_filtered: u64,
    /// Writes that ended in a successful CREATE.
    pub created: u64,
    /// Writes that ended in a successful PATCH.
    pub patched: u64,
    /// Writes whose PATCH found nothing (404) and that were re-created.
    pub recreated: u64,
    /// Writes given up because the error is not retryable (e.g. 403, 422, AlreadyExists).
    pub rejected: u64,
    /// Writes given up after the retry budget was used up.
    pub retry_exhausted: u64,
    /// Writes still queued when shutdown hit its deadline.
    pub abandoned: u64,
    /// Requests attempted, retries included.
    pub attempts: u64,
    /// Supervisor restarts of the sink actor.
    pub restarts: u64,
    /// Writes queued in the sink actor (including the ones in flight).
    pub queued: u64,
    /// Writes in flight (including those sleeping before a retry).
    pub in_flight: u64,
}

impl SinkSnapshot {
    /// Writes that reached the server: created + patched + recreated.
    pub fn delivered(&self) -> u64 {
        self.created + self.patched + self.recreated
    }

    /// Writes given up: rejected + retry exhausted + abandoned.
    pub fn failed(&self) -> u64 {
        self.rejected + self.retry_exhausted + self.abandoned
    }
}

/// A point-in-time copy of every counter of a pipeline.
///
/// For every emitted occurrence exactly one of these holds: it was refused
/// (`dropped_invalid`, `dropped_intake_full`, `dropped_after_shutdown`), or it was
/// `recorded`. A recorded occurrence is still in the intake (`intake_depth`) or was
/// `broadcast`; for each watcher a broadcast event was `accepted` or dropped
/// (`dropped_full`, `dropped_closed`); for a sink chain an accepted event is
/// `spam_filtered`, queued/in flight, or ends in exactly one write outcome.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    /// Occurrences accepted into the intake.
    pub recorded: u64,
    /// Occurrences refused as invalid.
    pub dropped_invalid: u64,
    /// Occurrences refused because the intake was full.
    pub dropped_intake_full: u64,
    /// Occurrences refused because the pipeline was shut down.
    pub dropped_after_shutdown: u64,
    /// Events the broadcaster distributed.
    pub broadcast: u64,
    /// Occurrences accepted but not yet taken from the intake.
    pub intake_depth: u64,
    /// Per watcher (sink chains included, named `sink:<name>`), in registration order.
    pub watchers: Vec<WatcherSnapshot>,
    /// Per sink chain.
    pub sinks: Vec<SinkSnapshot>,
    /// Per series sink chain (events.k8s.io/v1): writes, evictions, flushes.
    pub series: Vec<crate::series::SeriesSnapshot>,
}

impl StatsSnapshot {
    /// The watcher registered under `name`.
    pub fn watcher(&self, name: &str) -> Option<&WatcherSnapshot> {
        self.watchers.iter().find(|w| w.name == name)
    }

    /// The series sink chain named `name`.
    pub fn series_sink(&self, name: &str) -> Option<&crate::series::SeriesSnapshot> {
        self.series.iter().find(|s| s.name == name)
    }

    /// The sink named `name`.
    pub fn sink(&self, name: &str) -> Option<&SinkSnapshot> {
        self.sinks.iter().find(|s| s.name == name)
    }

    /// Drops at every stage, summed: refused at the recorder, dropped for a watcher,
    /// spam-filtered, rejected, retry budget exhausted, abandoned at shutdown.
    pub fn dropped_total(&self) -> u64 {
        self.dropped_invalid
            + self.dropped_intake_full
            + self.dropped_after_shutdown
            + self
                .watchers
                .iter()
                .map(|w| w.dropped_full + w.dropped_closed)
                .sum::<u64>()
            + self
                .sinks
                .iter()
                .map(|s| s.spam_filtered + s.failed())
                .sum::<u64>()
    }
}
