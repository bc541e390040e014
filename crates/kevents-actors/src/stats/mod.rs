//! What the pipeline counts, as point-in-time snapshots ([`Pipeline::stats`](crate::Pipeline::stats),
//! [`ShutdownReport::stats`](crate::ShutdownReport::stats)). The same counters are mirrored to
//! the `metrics` facade, whose recorder (Prometheus exporter or other) the application
//! installs.
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
//! | `kevents_sink_events_total` | `sink`, `outcome` = `correlated`, `aggregated`, `spam_filtered`, `deferred` | correlator decisions |
//! | `kevents_sink_writes_total` | `sink`, `outcome` = `created`, `patched`, `recreated`, `rejected`, `retry_exhausted`, `abandoned`, `superseded` | finished writes (`superseded`: replaced by a newer write of the same event before it started) |
//! | `kevents_occurrences_not_stored_total` | `sink`, `status`, `verb` = `create`, `patch`, `api` = `core/v1`, `events.k8s.io/v1` | occurrences the server lacks because it refused a write for good (a 4xx such as 403, 422) |
//! | `kevents_sink_attempts_total` | `sink` | requests made (including retries) |
//! | `kevents_sink_retries_total` | `sink` | requests that re-sent a write after a failed attempt |
//! | `kevents_sink_restarts_total` | `sink` | supervisor restarts (panics, fatal errors) |
//! | `kevents_queue_depth` (gauge) | `queue` = `intake` or `watcher:<name>` or `sink:<name>` | items waiting |
//! | `kevents_coalesced_total` | `queue` = `intake` or `watcher:<name>` | occurrences merged into an entry of a coalesce-if-full overflow table |
//! | `kevents_overflow_occurrences` (gauge) | `queue` | occurrences held in an overflow table now |
//! | `kevents_series_evicted_total` | `sink`, `kind` = `singleton`, `series` | entries evicted because the series cache was full |
//! | `kevents_series_writes_total` | `sink`, `reason` = `heartbeat`, `finish`, `flush`, `refresh` | series writes produced by the timers, the shutdown flush and live counts |
//! | `kevents_series_counted_in_memory_total` | `sink` | repeats counted without a write |
//! | `kevents_series_requests_total` | `sink`, `outcome` = `delivered`, `failed`, `superseded` | finished events.k8s.io/v1 writes |
//! | `kevents_series_open`, `kevents_series_entries` (gauges) | `sink` | open series / tracked events now |
//! | `kevents_budget_deferred_total` | `budget`, `reason` = `rate`, `retry_after`, `circuit` | writes that waited before their request |
//! | `kevents_budget_pauses_total` | `budget` | 429 answers that paused every write of the budget |
//! | `kevents_circuit_opens_total`, `kevents_circuit_probes_total` | `budget` | circuit breaker openings, probe writes |
//! | `kevents_circuit_open` (gauge) | `budget` | 1 while the circuit is open |
//!
//! The handles are registered with the recorder installed when a pipeline (or a chain) is
//! built: install the recorder first. `docs/metrics.md` describes every metric and how to
//! serve them to Prometheus.

use crate::policy::WatcherPolicy;

pub(crate) mod events_v1;
/// At most this many distinct causes are kept per chain; occurrences of any further cause
/// are summed under [`OTHER_CAUSES`], so a server answering with ever new reasons (or a
/// writer to ever new namespaces) cannot grow the tally without bound.
pub const MAX_NOT_STORED_CAUSES: usize = 64;

/// The cause under which occurrences of causes beyond the first [`MAX_NOT_STORED_CAUSES`]
/// are summed.
pub const OTHER_CAUSES: &str = "other causes";

/// A point-in-time copy of every counter of one watcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherSnapshot {
    /// The name the watcher was registered with.
    pub name: String,
    /// Its delivery policy.
    pub policy: WatcherPolicy,
    /// Occurrences queued for it (an event delivered with merged repeats counts as the
    /// occurrences it stands for, [`EventMessage::occurrences`](crate::EventMessage::occurrences)).
    pub accepted: u64,
    /// Occurrences it did not get because its queue was full (drop-if-full; coalesce-if-full
    /// when the overflow table was full too).
    pub dropped_full: u64,
    /// Events it did not get because its actor had stopped.
    pub dropped_closed: u64,
    /// Events queued for it and not yet finished (messages not yet dropped).
    pub depth: u64,
    /// Estimated bytes of those events (bounded by the pipeline's queue byte bound).
    pub bytes: u64,
    /// Occurrences merged into an entry of its overflow table (coalesce-if-full) so far:
    /// not dropped, delivered later as repeats of that entry's event.
    pub coalesced: u64,
    /// Occurrences held in its overflow table now (included in neither `accepted` nor
    /// `depth` until they are delivered).
    pub overflow: u64,
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
    /// Skipped events whose state is held now, to be written once their object's spam
    /// bucket refills or at shutdown (`SinkOptions::defer_spam_tails`; one per event, the
    /// newest). After a shutdown, what did not fit in its deadline.
    pub deferred: u64,
    /// Skipped occurrences whose state was kept so far (the newest of an event replaces the
    /// one it held: counted as `superseded`).
    pub deferred_total: u64,
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
    /// Writes replaced by a newer write of the same event before they started (coalescing):
    /// their occurrences are in the newer write's count, nothing is lost.
    pub superseded: u64,
    /// Requests attempted, retries included.
    pub attempts: u64,
    /// Requests that re-sent a write after a failed attempt of it (its second attempt and
    /// later ones): a write abandoned during its first attempt made no retry.
    pub retries: u64,
    /// Supervisor restarts of the sink actor.
    pub restarts: u64,
    /// Writes queued in the sink actor (including the ones in flight).
    pub queued: u64,
    /// Writes in flight (including those sleeping before a retry).
    pub in_flight: u64,
    /// Occurrences the server does not have because it refused a write for good (a 4xx
    /// that retrying cannot fix: 403, 422, 400, ...; not AlreadyExists). Counts are
    /// absolute, so this is what the event had observed minus what the server is known to
    /// have stored, each occurrence counted once. A refused CREATE drops the writes of the
    /// event queued behind it (counted as `rejected`) and the correlator forgets it, so its
    /// next occurrence is a CREATE again.
    pub not_stored: u64,
    /// `not_stored` by cause, a short stable text such as `403 Forbidden: create core/v1
    /// events in namespace "default"` (status, reason, verb, API, namespace), most
    /// occurrences first. At most [`MAX_NOT_STORED_CAUSES`] causes are kept; the rest are
    /// summed under [`OTHER_CAUSES`] (last).
    pub not_stored_by_cause: Vec<(String, u64)>,
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
/// `broadcast`; for each watcher a broadcast event was `accepted`, is held in its overflow
/// table (coalesce-if-full), or was dropped (`dropped_full`, `dropped_closed`); for a sink
/// chain an accepted event is `spam_filtered`, `deferred` (its state held to be written
/// later), queued/in flight, or ends in exactly one write outcome: stored
/// ([`SinkSnapshot::delivered`]), given up ([`SinkSnapshot::failed`]) or
/// [`superseded`](SinkSnapshot::superseded) by a newer write of the same event, which carries
/// its count ([`StatsSnapshot::check_sinks`]).
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
    /// Estimated bytes of those occurrences (a drop-if-full intake's byte bound applies).
    pub intake_bytes: u64,
    /// Occurrences merged into an entry of the intake's overflow table (coalesce-if-full) so
    /// far: recorded, not dropped, distributed later as repeats of that entry.
    pub intake_coalesced: u64,
    /// Occurrences held in the intake's overflow table now (part of `intake_depth`).
    pub intake_overflow: u64,
    /// Per watcher (sink chains included, named `sink:<name>`), in registration order.
    pub watchers: Vec<WatcherSnapshot>,
    /// Per sink chain.
    pub sinks: Vec<SinkSnapshot>,
    /// Per series sink chain (events.k8s.io/v1): writes, evictions, flushes.
    pub sinks_events_v1: Vec<events_v1::SinkSnapshot>,
    /// Per write budget the pipeline's chains use (shared budgets appear in every pipeline
    /// that uses them).
    pub budgets: Vec<BudgetSnapshot>,
}

impl StatsSnapshot {
    /// The watcher registered under `name`.
    pub fn watcher(&self, name: &str) -> Option<&WatcherSnapshot> {
        self.watchers.iter().find(|w| w.name == name)
    }

    /// The events.k8s.io/v1 sink chain (series chain) named `name`.
    pub fn sink_events_v1(&self, name: &str) -> Option<&events_v1::SinkSnapshot> {
        self.sinks_events_v1.iter().find(|s| s.name == name)
    }

    /// The sink named `name`.
    pub fn sink(&self, name: &str) -> Option<&SinkSnapshot> {
        self.sinks.iter().find(|s| s.name == name)
    }

    /// Checks, for every core/v1 sink chain, that each event its watcher accepted is
    /// accounted for exactly once: `accepted = spam_filtered + deferred + queued + delivered +
    /// failed + superseded` (occurrences; `superseded`: counted in a newer write of the same
    /// event). Returns the first chain for which it does not hold.
    ///
    /// ```
    /// let s = kevents_actors::StatsSnapshot::default();
    /// assert!(s.check_sinks().is_ok());
    /// ```
    pub fn check_sinks(&self) -> Result<(), String> {
        for k in &self.sinks {
            let accepted = self
                .watcher(&format!("sink:{}", k.name))
                .map_or(0, |w| w.accepted);
            let accounted =
                k.spam_filtered + k.deferred + k.queued + k.delivered() + k.failed() + k.superseded;
            if accepted != accounted {
                return Err(format!(
                    "sink {}: accepted {accepted} != spam_filtered + deferred + queued + delivered + failed + superseded = {accounted} ({k:?})",
                    k.name
                ));
            }
        }
        Ok(())
    }

    /// Occurrences the server is not known to have stored yet, as last counted: still in
    /// the intake or a watcher's queue, held as a deferred spam tail, in a queued write, or
    /// counted in an events.k8s.io/v1 series' memory ([`events_v1::SinkSnapshot::unwritten`], summed
    /// at most every 20 ms while counts change). What a crash would lose now; 0 after a
    /// completed shutdown.
    ///
    /// ```
    /// let s = kevents_actors::StatsSnapshot::default();
    /// assert_eq!(s.unwritten(), 0);
    /// ```
    pub fn unwritten(&self) -> u64 {
        // Occurrences only, each once: an event being written still holds its slot in its
        // watcher's queue (`depth`), so the sinks' queued writes (a unit of their own) are
        // not added again; a series counts in memory only what no queued write carries.
        self.intake_depth
            + self
                .watchers
                .iter()
                .map(|w| w.depth + w.overflow)
                .sum::<u64>()
            + self.sinks.iter().map(|k| k.deferred).sum::<u64>()
            + self
                .sinks_events_v1
                .iter()
                .map(|k| k.unwritten)
                .sum::<u64>()
    }

    /// The write budget named `name`.
    pub fn budget(&self, name: &str) -> Option<&BudgetSnapshot> {
        self.budgets.iter().find(|b| b.name == name)
    }

    /// Losses at every stage, summed over both chains: occurrences refused at the recorder,
    /// dropped for a watcher or spam-filtered; writes given up (rejected, retry budget
    /// exhausted, abandoned at shutdown) of core/v1 chains and of events.k8s.io/v1 series
    /// chains; and occurrences the server refused to store ([`not_stored`](Self::not_stored)).
    /// 0 means nothing was lost (a refused write is both a rejected write and occurrences
    /// not stored: it counts as both, so the sum is an alarm, not an exact count).
    ///
    /// ```
    /// use kevents_actors::StatsSnapshot;
    /// use kevents_actors::events_v1::SinkSnapshot;
    /// let s = StatsSnapshot {
    ///     sinks_events_v1: vec![SinkSnapshot { rejected: 1, not_stored: 25, ..Default::default() }],
    ///     ..Default::default()
    /// };
    /// assert_eq!(s.dropped_total(), 26);
    /// ```
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
            + self
                .sinks_events_v1
                .iter()
                .map(events_v1::SinkSnapshot::failed)
                .sum::<u64>()
            + self.not_stored()
    }

    /// Occurrences the server does not have because it refused a write for good (403,
    /// 422, ...), over every chain of both APIs ([`SinkSnapshot::not_stored`],
    /// [`events_v1::SinkSnapshot::not_stored`]).
    ///
    /// ```
    /// let s = kevents_actors::StatsSnapshot::default();
    /// assert_eq!(s.not_stored(), 0);
    /// ```
    pub fn not_stored(&self) -> u64 {
        self.sinks.iter().map(|k| k.not_stored).sum::<u64>()
            + self
                .sinks_events_v1
                .iter()
                .map(|k| k.not_stored)
                .sum::<u64>()
    }

    /// [`not_stored`](Self::not_stored) by cause, over every chain (causes named alike are
    /// summed), most occurrences first, [`OTHER_CAUSES`] last.
    ///
    /// ```
    /// use kevents_actors::{SinkSnapshot, StatsSnapshot};
    /// let cause = "403 Forbidden: create core/v1 events in namespace \"default\"";
    /// let k = SinkSnapshot { not_stored: 2, not_stored_by_cause: vec![(cause.into(), 2)], ..Default::default() };
    /// let s = StatsSnapshot { sinks: vec![k.clone(), k], ..Default::default() };
    /// assert_eq!(s.not_stored_by_cause(), [(cause.to_owned(), 4)]);
    /// ```
    pub fn not_stored_by_cause(&self) -> Vec<(String, u64)> {
        let mut all = std::collections::BTreeMap::<String, u64>::new();
        let chains = self
            .sinks
            .iter()
            .map(|k| &k.not_stored_by_cause)
            .chain(self.sinks_events_v1.iter().map(|k| &k.not_stored_by_cause));
        for causes in chains {
            for (cause, n) in causes {
                *all.entry(cause.clone()).or_default() += n;
            }
        }
        sorted(all)
    }
}

/// A point-in-time copy of the counters of one [`WriteBudget`](crate::WriteBudget) (in
/// [`StatsSnapshot::budgets`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BudgetSnapshot {
    /// The budget's name.
    pub name: String,
    /// Writes that waited for a token of the bucket.
    pub deferred_rate: u64,
    /// Writes that waited because a 429 paused the budget.
    pub deferred_retry_after: u64,
    /// Writes that waited because the circuit was open.
    pub deferred_circuit: u64,
    /// Writes that waited because as many were in flight as the adaptive limit allows.
    pub deferred_in_flight: u64,
    /// 429 answers.
    pub throttled: u64,
    /// 429 answers whose limit covers one namespace or one source and object only
    /// (EventRateLimit `Namespace`, `SourceAndObject`), so only those writes waited.
    pub throttled_scoped: u64,
    /// The rate the budget sends at now, in writes per second (adaptive: lowered by 429s,
    /// at most its `qps`; infinite without a rate limit).
    pub rate: f64,
    /// Writes in flight at most now (adaptive, after a 429); `None`: no limit.
    pub in_flight_limit: Option<u32>,
    /// 429 answers that started or extended a pause (`Retry-After`; without one: of a
    /// source and object, or of the whole budget when pinned).
    pub pauses: u64,
    /// Times the circuit opened.
    pub circuit_opens: u64,
    /// Probe writes sent while it was open.
    pub probes: u64,
    /// Whether the circuit is open now.
    pub circuit_open: bool,
    /// Laws of its fleet this budget decided after a 429 and handed to the fleet's link
    /// ([`WriteBudget::join_fleet`](crate::WriteBudget::join_fleet)).
    pub fleet_laws_proposed: u64,
    /// Laws of its fleet decided by another member that this budget followed.
    pub fleet_laws_adopted: u64,
}

// The rate is finite or infinite, never NaN: equality is an equivalence.
impl Eq for BudgetSnapshot {}

impl BudgetSnapshot {
    /// Writes that waited, for any reason.
    pub fn deferred(&self) -> u64 {
        self.deferred_rate
            + self.deferred_retry_after
            + self.deferred_circuit
            + self.deferred_in_flight
    }
}

/// Causes sorted for display: most occurrences first, then by cause, [`OTHER_CAUSES`] last.
pub(crate) fn sorted(causes: impl IntoIterator<Item = (String, u64)>) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = causes.into_iter().collect();
    v.sort_by(|a, b| {
        (a.0 == OTHER_CAUSES)
            .cmp(&(b.0 == OTHER_CAUSES))
            .then(b.1.cmp(&a.1))
            .then(a.0.cmp(&b.0))
    });
    v
}
