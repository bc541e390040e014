//! The counters of several pipelines taken together, as the demo and the benchmarks print
//! them, and the check that every occurrence is accounted for exactly once
//! ([`Totals::check`]). [`Totals`] keeps the pipelines' snapshots and sums what is asked of
//! them instead of copying their counters field by field: a counter is named once, in
//! `kevents_actors::stats`, and is here as soon as it is there.

use kevents_actors::{SinkSnapshot, StatsSnapshot, WatcherSnapshot};

/// Counters of several pipelines (one sink chain each), summed when asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    snapshots: Vec<StatsSnapshot>,
}

impl Totals {
    /// The counters of `snapshots` (every watcher named `sink:*`, every sink).
    pub fn of<'a>(snapshots: impl IntoIterator<Item = &'a StatsSnapshot>) -> Totals {
        Totals {
            snapshots: snapshots.into_iter().cloned().collect(),
        }
    }

    /// A pipeline counter summed over the pipelines: `t.pipelines(|s| s.dropped_invalid)`.
    pub fn pipelines(&self, counter: impl Fn(&StatsSnapshot) -> u64) -> u64 {
        self.snapshots.iter().map(counter).sum()
    }

    /// A counter of the sink chains' queues (the watchers named `sink:*`) summed over them:
    /// `t.sink_queues(|w| w.dropped_full)`.
    pub fn sink_queues(&self, counter: impl Fn(&WatcherSnapshot) -> u64) -> u64 {
        self.snapshots
            .iter()
            .flat_map(|s| &s.watchers)
            .filter(|w| w.name.starts_with("sink:"))
            .map(counter)
            .sum()
    }

    /// A sink counter summed over every sink: `t.sinks(|k| k.created)`.
    pub fn sinks(&self, counter: impl Fn(&SinkSnapshot) -> u64) -> u64 {
        self.snapshots
            .iter()
            .flat_map(|s| &s.sinks)
            .map(counter)
            .sum()
    }

    /// Occurrences accepted into the intakes.
    pub fn queued(&self) -> u64 {
        self.pipelines(|s| s.recorded)
    }

    /// Occurrences the recorders refused: invalid, intake full, after shutdown.
    pub fn refused(&self) -> u64 {
        self.pipelines(|s| s.dropped_invalid + s.dropped_intake_full + s.dropped_after_shutdown)
    }

    /// Writes that reached the server.
    pub fn delivered(&self) -> u64 {
        self.sinks(SinkSnapshot::delivered)
    }

    /// Writes given up.
    pub fn failed(&self) -> u64 {
        self.sinks(SinkSnapshot::failed)
    }

    /// HTTP requests made (a re-create is a PATCH and a CREATE).
    pub fn requests(&self) -> u64 {
        self.sinks(|k| k.attempts + k.recreated)
    }

    /// Requests that re-sent a write after a failed attempt (counted by the sink actors: a
    /// write abandoned in its first attempt made none).
    pub fn retries(&self) -> u64 {
        self.sinks(|k| k.retries)
    }

    /// Checks that every occurrence is accounted for exactly once, given how many calls were
    /// made (`emitted`) and how many of them the recorder refused before counting (none: the
    /// pipeline counts refusals itself). Returns the first identity that does not hold.
    pub fn check(&self, emitted: u64) -> Result<(), String> {
        let queued = self.queued();
        let broadcast = self.pipelines(|s| s.broadcast);
        let accepted = self.sink_queues(|w| w.accepted);
        let checks = [
            (
                "emitted = queued + refused",
                emitted,
                queued + self.refused(),
            ),
            ("queued = broadcast", queued, broadcast),
            (
                "broadcast = accepted + overflow + dropped by a sink queue",
                broadcast,
                self.sink_queues(|w| w.accepted + w.overflow + w.dropped_full + w.dropped_closed),
            ),
            (
                "accepted = spam-filtered + deferred + delivered + failed + superseded",
                accepted,
                self.sinks(|k| k.spam_filtered + k.deferred + k.superseded)
                    + self.delivered()
                    + self.failed(),
            ),
        ];
        for (what, left, right) in checks {
            if left != right {
                return Err(format!("{what} does not hold: {left} != {right}"));
            }
        }
        Ok(())
    }
}
