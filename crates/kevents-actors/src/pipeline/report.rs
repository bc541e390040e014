//! What a shutdown reports.

use crate::stats::StatsSnapshot;

/// What [`Pipeline::shutdown`](crate::Pipeline::shutdown) achieved.
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
