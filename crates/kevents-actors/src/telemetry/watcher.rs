//! What one watcher's queue counts: every distributed event is accepted or dropped for it.

use super::counter::{Counter, DropLog};
use super::names;

/// Counters of one watcher (its queue and its slots are in [`crate::queue`]).
#[derive(Debug)]
pub(crate) struct WatcherCounters {
    accepted: Counter,
    dropped_full: Counter,
    dropped_closed: Counter,
    full_log: DropLog,
    depth: metrics::Gauge,
    coalesced: Counter,
    overflow: metrics::Gauge,
}

impl WatcherCounters {
    pub(crate) fn new(name: &str) -> Self {
        let n = name.to_owned();
        WatcherCounters {
            accepted: Counter::new(
                metrics::counter!(names::WATCHER_ACCEPTED, "watcher" => n.clone()),
            ),
            dropped_full: Counter::new(
                metrics::counter!(names::WATCHER_DROPPED, "watcher" => n.clone(), "reason" => "full"),
            ),
            dropped_closed: Counter::new(
                metrics::counter!(names::WATCHER_DROPPED, "watcher" => n.clone(), "reason" => "closed"),
            ),
            full_log: DropLog::new(format!("watcher {name} full")),
            depth: metrics::gauge!(names::QUEUE_DEPTH, "queue" => format!("watcher:{n}")),
            coalesced: Counter::new(
                metrics::counter!(names::COALESCED, "queue" => format!("watcher:{n}")),
            ),
            overflow: metrics::gauge!(names::OVERFLOW, "queue" => format!("watcher:{n}")),
        }
    }

    /// `n` events were queued for the watcher.
    pub(crate) fn accepted(&self, n: u64) {
        self.accepted.add(n);
    }

    /// `n` events were dropped because the watcher's queue was full (logged, rate-limited).
    pub(crate) fn dropped_full(&self, n: u64) {
        if n > 0 {
            self.dropped_full.add(n);
            self.full_log.record(n);
        }
    }

    /// `n` events were dropped because the watcher's actor had stopped.
    pub(crate) fn dropped_closed(&self, n: u64) {
        self.dropped_closed.add(n);
    }

    /// `n` occurrences were merged into an entry of the overflow table.
    pub(crate) fn coalesced(&self, n: u64) {
        self.coalesced.add(n);
    }

    /// Occurrences merged into overflow entries so far.
    pub(crate) fn coalesced_total(&self) -> u64 {
        self.coalesced.get()
    }

    /// Publishes the overflow table's occurrences.
    pub(crate) fn overflow(&self, held: u64) {
        self.overflow.set(held as f64);
    }

    /// Publishes the queue's depth gauge.
    pub(crate) fn depth(&self, depth: u64) {
        self.depth.set(depth as f64);
    }

    /// (accepted, dropped full, dropped closed).
    pub(crate) fn values(&self) -> [u64; 3] {
        [
            self.accepted.get(),
            self.dropped_full.get(),
            self.dropped_closed.get(),
        ]
    }
}
