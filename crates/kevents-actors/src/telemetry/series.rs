//! What an events.k8s.io/v1 series chain counts: the series cache's own counters and the
//! end of every write, kept by the actor and published as one snapshot.

use std::sync::Mutex;

use super::names;
use crate::stats::SeriesSnapshot;

/// Counters of one series chain: the latest snapshot (read by [`crate::Pipeline::stats`])
/// and the `metrics` handles it is mirrored to.
#[derive(Debug)]
pub(crate) struct SeriesCounters {
    snapshot: Mutex<SeriesSnapshot>,
    evicted_singletons: metrics::Counter,
    evicted_series: metrics::Counter,
    heartbeats: metrics::Counter,
    finished: metrics::Counter,
    flushed: metrics::Counter,
    refreshed: metrics::Counter,
    counted: metrics::Counter,
    delivered: metrics::Counter,
    failed: metrics::Counter,
    superseded: metrics::Counter,
    open: metrics::Gauge,
    entries: metrics::Gauge,
}

impl SeriesCounters {
    pub(crate) fn new(name: &str) -> Self {
        let n = name.to_owned();
        SeriesCounters {
            snapshot: Mutex::new(SeriesSnapshot {
                name: n.clone(),
                ..Default::default()
            }),
            evicted_singletons: metrics::counter!(names::SERIES_EVICTED, "sink" => n.clone(), "kind" => "singleton"),
            evicted_series: metrics::counter!(names::SERIES_EVICTED, "sink" => n.clone(), "kind" => "series"),
            heartbeats: metrics::counter!(names::SERIES_WRITES, "sink" => n.clone(), "reason" => "heartbeat"),
            finished: metrics::counter!(names::SERIES_WRITES, "sink" => n.clone(), "reason" => "finish"),
            flushed: metrics::counter!(names::SERIES_WRITES, "sink" => n.clone(), "reason" => "flush"),
            refreshed: metrics::counter!(names::SERIES_WRITES, "sink" => n.clone(), "reason" => "refresh"),
            counted: metrics::counter!(names::SERIES_COUNTED, "sink" => n.clone()),
            delivered: metrics::counter!(names::SERIES_REQUESTS, "sink" => n.clone(), "outcome" => "delivered"),
            failed: metrics::counter!(names::SERIES_REQUESTS, "sink" => n.clone(), "outcome" => "failed"),
            superseded: metrics::counter!(names::SERIES_REQUESTS, "sink" => n.clone(), "outcome" => "superseded"),
            open: metrics::gauge!(names::SERIES_OPEN, "sink" => n.clone()),
            entries: metrics::gauge!(names::SERIES_ENTRIES, "sink" => n),
        }
    }

    /// Publishes the chain's counters (the actor keeps them; they only grow).
    pub(crate) fn publish(&self, s: &SeriesSnapshot) {
        let c = &s.cache;
        self.evicted_singletons.absolute(c.evicted_singletons);
        self.evicted_series.absolute(c.evicted_series);
        self.heartbeats.absolute(c.heartbeats);
        self.finished.absolute(c.finished);
        self.flushed.absolute(c.flushed);
        self.refreshed.absolute(s.refreshed);
        self.counted.absolute(c.counted_in_memory);
        self.delivered.absolute(s.delivered());
        self.failed.absolute(s.failed());
        self.superseded.absolute(s.superseded);
        self.open.set(c.open_series as f64);
        self.entries.set(c.entries as f64);
        self.snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone_from(s);
    }

    pub(crate) fn snapshot(&self) -> SeriesSnapshot {
        self.snapshot
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}
