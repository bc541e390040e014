//! Every metric name the pipeline exports through the `metrics` facade, in one place (the
//! table in [`crate::stats`] documents their labels and meaning).

/// Counter: occurrences accepted into the intake.
pub(crate) const RECORDED: &str = "kevents_recorded_total";
/// Counter, label `reason` (`invalid`, `intake_full`, `after_shutdown`): refused at the recorder.
pub(crate) const DROPPED: &str = "kevents_dropped_total";
/// Counter: events the broadcaster distributed.
pub(crate) const BROADCAST: &str = "kevents_broadcast_total";
/// Counter, label `watcher`: events queued for a watcher.
pub(crate) const WATCHER_ACCEPTED: &str = "kevents_watcher_accepted_total";
/// Counter, labels `watcher`, `reason` (`full`, `closed`): events a watcher did not get.
pub(crate) const WATCHER_DROPPED: &str = "kevents_watcher_dropped_total";
/// Counter, labels `sink`, `outcome` (`correlated`, `aggregated`, `spam_filtered`,
/// `deferred`).
pub(crate) const SINK_EVENTS: &str = "kevents_sink_events_total";
/// Counter, labels `sink`, `outcome` (`created`, `patched`, `recreated`, `rejected`,
/// `retry_exhausted`, `abandoned`, `superseded`).
pub(crate) const SINK_WRITES: &str = "kevents_sink_writes_total";
/// Counter, labels `sink`, `status` (the HTTP code), `verb` (`create`, `patch`), `api`
/// (`core/v1`, `events.k8s.io/v1`): occurrences the server does not have because it refused
/// a write for good (a 4xx that retrying cannot fix), in both chains.
pub(crate) const NOT_STORED: &str = "kevents_occurrences_not_stored_total";
/// Counter, label `sink`: requests made, retries included.
pub(crate) const SINK_ATTEMPTS: &str = "kevents_sink_attempts_total";
/// Counter, label `sink`: requests that re-sent a write after a failed attempt.
pub(crate) const SINK_RETRIES: &str = "kevents_sink_retries_total";
/// Counter, label `sink`: supervisor restarts of a sink actor.
pub(crate) const SINK_RESTARTS: &str = "kevents_sink_restarts_total";
/// Gauge, label `queue` (`intake`, `watcher:<name>`, `sink:<name>`): items waiting.
pub(crate) const QUEUE_DEPTH: &str = "kevents_queue_depth";
/// Counter, label `queue` (`intake`, `watcher:<name>`): occurrences merged into an entry
/// of a coalesce-if-full overflow table.
pub(crate) const COALESCED: &str = "kevents_coalesced_total";
/// Gauge, label `queue`: occurrences held in an overflow table now.
pub(crate) const OVERFLOW: &str = "kevents_overflow_occurrences";
/// Counter, labels `sink`, `kind` (`singleton`, `series`): series cache evictions.
pub(crate) const SERIES_EVICTED: &str = "kevents_series_evicted_total";
/// Counter, labels `sink`, `reason` (`heartbeat`, `finish`, `flush`, `refresh`): timer, flush
/// and live-count writes.
pub(crate) const SERIES_WRITES: &str = "kevents_series_writes_total";
/// Counter, label `sink`: repeats counted in memory without a write.
pub(crate) const SERIES_COUNTED: &str = "kevents_series_counted_in_memory_total";
/// Counter, labels `sink`, `outcome` (`delivered`, `failed`, `superseded`): finished
/// events.k8s.io/v1 writes.
pub(crate) const SERIES_REQUESTS: &str = "kevents_series_requests_total";
/// Gauge, label `sink`: open series now.
pub(crate) const SERIES_OPEN: &str = "kevents_series_open";
/// Counter, label `sink`: supervisor restarts of a series actor.
pub(crate) const SERIES_RESTARTS: &str = "kevents_series_restarts_total";
/// Gauge, label `sink`: tracked events now.
pub(crate) const SERIES_ENTRIES: &str = "kevents_series_entries";

/// Counter, labels `budget`, `reason` (`rate`, `retry_after`, `circuit`, `in_flight`): writes that waited
/// before their request.
pub(crate) const BUDGET_DEFERRED: &str = "kevents_budget_deferred_total";
/// Counter, label `budget`: 429 answers that started or extended a pause.
pub(crate) const BUDGET_PAUSES: &str = "kevents_budget_pauses_total";
/// Counter, labels `budget`, `limit` (`everything`, `namespace`, `source_and_object`): 429
/// answers, by the limit they name.
pub(crate) const BUDGET_THROTTLED: &str = "kevents_budget_throttled_total";
/// Gauge, label `budget`: the rate the budget sends at now (writes per second; -1: none).
pub(crate) const BUDGET_RATE: &str = "kevents_budget_rate";
/// Gauge, label `budget`: writes in flight at most now (-1: no limit).
pub(crate) const BUDGET_IN_FLIGHT_LIMIT: &str = "kevents_budget_in_flight_limit";
/// Counter, labels `budget`, `how` (`proposed`, `adopted`): laws of a fleet sharing its law
/// this budget decided after a 429, or followed from another member.
pub(crate) const BUDGET_FLEET_LAWS: &str = "kevents_budget_fleet_laws_total";
/// Counter, label `budget`: times the circuit opened.
pub(crate) const CIRCUIT_OPENS: &str = "kevents_circuit_opens_total";
/// Counter, label `budget`: probe writes sent while the circuit was open.
pub(crate) const CIRCUIT_PROBES: &str = "kevents_circuit_probes_total";
/// Gauge, label `budget`: 1 while the circuit is open.
pub(crate) const CIRCUIT_OPEN: &str = "kevents_circuit_open";

/// Whether a metric is a counter or a gauge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
}

/// Every metric with its kind and the help text exporters print (`# HELP`).
pub(crate) const ALL: [(&str, Kind, &str); 30] = [
    (
        RECORDED,
        Kind::Counter,
        "Occurrences accepted into the intake.",
    ),
    (
        DROPPED,
        Kind::Counter,
        "Occurrences refused at the recorder, by reason (invalid, intake_full, after_shutdown).",
    ),
    (
        BROADCAST,
        Kind::Counter,
        "Events the broadcaster distributed.",
    ),
    (
        WATCHER_ACCEPTED,
        Kind::Counter,
        "Events queued for a watcher (sink chains are watchers sink:<name> and series:<name>).",
    ),
    (
        WATCHER_DROPPED,
        Kind::Counter,
        "Events a watcher did not get, by reason (full, closed).",
    ),
    (
        SINK_EVENTS,
        Kind::Counter,
        "Correlator decisions of a core/v1 sink chain (correlated, aggregated, spam_filtered, deferred).",
    ),
    (
        SINK_WRITES,
        Kind::Counter,
        "Finished core/v1 writes by outcome (created, patched, recreated, rejected, retry_exhausted, abandoned, superseded).",
    ),
    (
        NOT_STORED,
        Kind::Counter,
        "Occurrences the apiserver does not have because it refused a write for good (a 4xx such as 403 or 422), by status, verb and API.",
    ),
    (
        SINK_ATTEMPTS,
        Kind::Counter,
        "Requests a core/v1 sink made, retries included.",
    ),
    (
        SINK_RETRIES,
        Kind::Counter,
        "Requests a core/v1 sink made to re-send a write after a failed attempt of it.",
    ),
    (
        SINK_RESTARTS,
        Kind::Counter,
        "Supervisor restarts of a core/v1 sink actor (panics, fatal errors).",
    ),
    (
        QUEUE_DEPTH,
        Kind::Gauge,
        "Items waiting in a queue (intake, watcher:<name>, sink:<name>).",
    ),
    (
        COALESCED,
        Kind::Counter,
        "Occurrences merged into an entry of a coalesce-if-full overflow table (queue intake or watcher:<name>).",
    ),
    (
        OVERFLOW,
        Kind::Gauge,
        "Occurrences held in a coalesce-if-full overflow table now.",
    ),
    (
        SERIES_EVICTED,
        Kind::Counter,
        "Series cache entries evicted because the cache was full, by kind (singleton, series).",
    ),
    (
        SERIES_WRITES,
        Kind::Counter,
        "Series writes produced by the timers, the shutdown flush and live counts, by reason (heartbeat, finish, flush, refresh).",
    ),
    (
        SERIES_COUNTED,
        Kind::Counter,
        "Repeats of an events.k8s.io/v1 event counted in memory without a write.",
    ),
    (
        SERIES_REQUESTS,
        Kind::Counter,
        "Finished events.k8s.io/v1 writes by outcome (delivered, failed, superseded).",
    ),
    (SERIES_OPEN, Kind::Gauge, "Open events.k8s.io/v1 series."),
    (
        SERIES_RESTARTS,
        Kind::Counter,
        "Supervisor restarts of an events.k8s.io/v1 series actor (a panicking sink).",
    ),
    (
        SERIES_ENTRIES,
        Kind::Gauge,
        "Events tracked by the events.k8s.io/v1 series cache.",
    ),
    (
        BUDGET_DEFERRED,
        Kind::Counter,
        "Writes that waited before their request, by reason (rate, retry_after, circuit, in_flight).",
    ),
    (
        BUDGET_PAUSES,
        Kind::Counter,
        "429 answers that started or extended a pause of writes.",
    ),
    (
        BUDGET_THROTTLED,
        Kind::Counter,
        "429 answers, by the limit they name (everything, namespace, source_and_object).",
    ),
    (
        BUDGET_RATE,
        Kind::Gauge,
        "The rate a write budget sends at now, in writes per second (-1: no rate limit).",
    ),
    (
        BUDGET_IN_FLIGHT_LIMIT,
        Kind::Gauge,
        "Writes in flight at most now under a write budget (-1: no limit).",
    ),
    (
        BUDGET_FLEET_LAWS,
        Kind::Counter,
        "Laws of a fleet sharing its write law, by how (proposed after a 429, adopted from another member).",
    ),
    (
        CIRCUIT_OPENS,
        Kind::Counter,
        "Times the circuit breaker of a write budget opened.",
    ),
    (
        CIRCUIT_PROBES,
        Kind::Counter,
        "Probe writes sent while the circuit was open.",
    ),
    (
        CIRCUIT_OPEN,
        Kind::Gauge,
        "1 while the circuit breaker of a write budget is open.",
    ),
];

/// Describes every kevents metric (counter or gauge, and a one-line help text) to the
/// installed `metrics` recorder, so that exporters print `# HELP` and `# TYPE` lines for them.
/// Call it once, after installing the recorder.
///
/// ```
/// // With no recorder installed this does nothing; with one it registers the descriptions.
/// kevents_actors::describe_metrics();
/// ```
pub fn describe_metrics() {
    for (name, kind, help) in ALL {
        match kind {
            Kind::Counter => metrics::describe_counter!(name, help),
            Kind::Gauge => metrics::describe_gauge!(name, help),
        }
    }
}
