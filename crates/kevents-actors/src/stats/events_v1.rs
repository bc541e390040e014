//! The counters of one events.k8s.io/v1 sink chain: [`SinkSnapshot`], the twin of the
//! core/v1 [`crate::SinkSnapshot`], re-exported as `kevents_actors::events_v1::SinkSnapshot`.

use kevents_core::events_v1::SeriesStats;

/// A point-in-time copy of the counters of one series sink chain (in
/// [`StatsSnapshot::sinks_events_v1`](crate::StatsSnapshot::sinks_events_v1)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SinkSnapshot {
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
    /// Writes replaced by a newer write of the same event before they started (coalescing).
    pub superseded: u64,
    /// Requests attempted (a PATCH answered 404 and its CREATE count as one attempt).
    pub attempts: u64,
    /// Writes queued or in flight now.
    pub queued: u64,
    /// Live-count PATCHes produced so far: an open series whose count grew, written again
    /// once its last write was `crate::events_v1::SinkOptions::freshness` old (kevents, not client-go).
    pub refreshed: u64,
    /// Occurrences of open series the server is not known to have yet (counted in memory
    /// since each series' last successful write): what a crash would lose now.
    pub unwritten: u64,
    /// Supervisor restarts of the series actor (its sink panicked; the series cache and the
    /// queued writes are kept, as a core/v1 sink actor's).
    pub restarts: u64,
    /// Occurrences the server does not have because it refused a write for good (a 4xx
    /// that retrying cannot fix: 403, 422, 400, ...; not AlreadyExists): what the series had
    /// observed minus what the server is known to have stored, each occurrence counted once.
    /// A refused CREATE drops the writes of its event queued behind it (counted as
    /// `rejected`) and the cache forgets the series: nothing is PATCHed, and the next
    /// occurrence starts again with a CREATE.
    pub not_stored: u64,
    /// `not_stored` by cause, a short stable text such as `403 Forbidden: create
    /// events.k8s.io/v1 events in namespace "default"`, most occurrences first. At most
    /// [`MAX_NOT_STORED_CAUSES`](crate::MAX_NOT_STORED_CAUSES) causes are kept; the rest are summed under
    /// [`OTHER_CAUSES`](crate::OTHER_CAUSES) (last).
    pub not_stored_by_cause: Vec<(String, u64)>,
}

impl SinkSnapshot {
    /// Writes the server stored.
    pub fn delivered(&self) -> u64 {
        self.created + self.patched + self.recreated
    }

    /// Writes given up.
    pub fn failed(&self) -> u64 {
        self.rejected + self.retry_exhausted + self.abandoned
    }
}
