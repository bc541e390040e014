//! What an events.k8s.io/v1 series chain counts, in the same style as a core/v1 chain
//! (`sink.rs`): typed instrumentation events (a method per thing that happens: an attempt,
//! the end of a write, a live-count write, a restart), each counted in-process and mirrored
//! to the `metrics` facade when it happens. The series cache's own counters (kevents-core's
//! `SeriesStats`: heartbeats, finishes, evictions, ...) are the cache's, read from it after
//! each turn of the actor and mirrored by how much they grew.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use kevents_core::WriteKind;
use kevents_core::events_v1::SeriesStats;

use super::counter::Counter;
use super::names;
use super::not_stored::{NotStored, WriteRefusal};

/// How one series write ended (a typed instrumentation event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SeriesWriteEnd {
    /// The server stored it with this request; `flush`: a write of the shutdown flush.
    Stored {
        /// CREATE, PATCH, or the CREATE of a PATCH answered 404.
        kind: WriteKind,
        /// It was a flush write.
        flush: bool,
    },
    /// The server refused it and the error is not retried.
    Rejected,
    /// The retry budget ran out.
    RetryExhausted,
    /// A heartbeat or finish that failed once (client-go tries them once).
    Rescheduled,
    /// A newer write of the same event replaced it before it started.
    Superseded,
}

/// Counters of one series chain.
#[derive(Debug)]
pub(crate) struct SeriesCounters {
    name: String,
    created: Counter,
    patched: Counter,
    recreated: Counter,
    flush_written: Counter,
    rejected: Counter,
    retry_exhausted: Counter,
    rescheduled: Counter,
    abandoned: Counter,
    superseded: Counter,
    attempts: Counter,
    refreshed: Counter,
    restarts: Counter,
    queued: AtomicU64,
    unwritten: AtomicU64,
    /// The series cache's own counters, as last read.
    cache: Mutex<SeriesStats>,
    evicted_singletons: metrics::Counter,
    evicted_series: metrics::Counter,
    heartbeats: metrics::Counter,
    finished: metrics::Counter,
    flushed: metrics::Counter,
    counted: metrics::Counter,
    open: metrics::Gauge,
    entries: metrics::Gauge,
    not_stored: NotStored,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl SeriesCounters {
    pub(crate) fn new(name: &str) -> Self {
        let n = name.to_owned();
        let requests = |o: &'static str| metrics::counter!(names::SERIES_REQUESTS, "sink" => n.clone(), "outcome" => o);
        let writes = |r: &'static str| metrics::counter!(names::SERIES_WRITES, "sink" => n.clone(), "reason" => r);
        let (delivered, failed) = (requests("delivered"), requests("failed"));
        // Counted in-process only (the snapshot), as before: no metric of their own.
        let local = || Counter::new(metrics::Counter::noop());
        SeriesCounters {
            name: n.clone(),
            created: Counter::new(delivered.clone()),
            patched: Counter::new(delivered.clone()),
            recreated: Counter::new(delivered),
            flush_written: local(),
            rejected: Counter::new(failed.clone()),
            retry_exhausted: Counter::new(failed.clone()),
            rescheduled: local(),
            abandoned: Counter::new(failed),
            superseded: Counter::new(requests("superseded")),
            attempts: local(),
            refreshed: Counter::new(writes("refresh")),
            restarts: Counter::new(metrics::counter!(names::SERIES_RESTARTS, "sink" => n.clone())),
            queued: AtomicU64::new(0),
            unwritten: AtomicU64::new(0),
            cache: Mutex::new(SeriesStats::default()),
            evicted_singletons: metrics::counter!(names::SERIES_EVICTED, "sink" => n.clone(), "kind" => "singleton"),
            evicted_series: metrics::counter!(names::SERIES_EVICTED, "sink" => n.clone(), "kind" => "series"),
            heartbeats: writes("heartbeat"),
            finished: writes("finish"),
            flushed: writes("flush"),
            counted: metrics::counter!(names::SERIES_COUNTED, "sink" => n.clone()),
            not_stored: NotStored::new(name),
            open: metrics::gauge!(names::SERIES_OPEN, "sink" => n.clone()),
            entries: metrics::gauge!(names::SERIES_ENTRIES, "sink" => n),
        }
    }

    /// The chain's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// One request is being made.
    pub(crate) fn attempt(&self) {
        self.attempts.add(1);
    }

    /// One write ended.
    pub(crate) fn write_ended(&self, end: SeriesWriteEnd) {
        match end {
            SeriesWriteEnd::Stored { kind, flush } => {
                match kind {
                    WriteKind::Create => self.created.add(1),
                    WriteKind::Patch => self.patched.add(1),
                    WriteKind::Recreate => self.recreated.add(1),
                }
                if flush {
                    self.flush_written.add(1);
                }
            }
            SeriesWriteEnd::Rejected => self.rejected.add(1),
            SeriesWriteEnd::RetryExhausted => self.retry_exhausted.add(1),
            SeriesWriteEnd::Rescheduled => self.rescheduled.add(1),
            SeriesWriteEnd::Superseded => self.superseded.add(1),
        }
    }

    /// `n` live-count writes were produced (open series whose count grew).
    pub(crate) fn refreshed(&self, n: u64) {
        self.refreshed.add(n);
    }

    /// `n` occurrences will never be stored: the server refused a write of them for good.
    pub(crate) fn not_stored(&self, refusal: &WriteRefusal, n: u64) {
        self.not_stored.add(refusal, n);
    }

    /// `n` queued writes were dropped at shutdown.
    pub(crate) fn abandoned(&self, n: u64) {
        self.abandoned.add(n);
    }

    /// The series actor is restarting (its sink panicked).
    pub(crate) fn restarted(&self) {
        self.restarts.add(1);
    }

    /// The series cache's own counters now: kept for snapshots, their growth mirrored.
    pub(crate) fn cache(&self, now: &SeriesStats) {
        let mut last = lock(&self.cache);
        let grew = |m: &metrics::Counter, new: u64, old: u64| {
            if new > old {
                m.increment(new - old);
            }
        };
        grew(
            &self.evicted_singletons,
            now.evicted_singletons,
            last.evicted_singletons,
        );
        grew(
            &self.evicted_series,
            now.evicted_series,
            last.evicted_series,
        );
        grew(&self.heartbeats, now.heartbeats, last.heartbeats);
        grew(&self.finished, now.finished, last.finished);
        grew(&self.flushed, now.flushed, last.flushed);
        grew(&self.counted, now.counted_in_memory, last.counted_in_memory);
        self.open.set(now.open_series as f64);
        self.entries.set(now.entries as f64);
        *last = *now;
    }

    /// The writes queued or in flight now, and the occurrences of open series the server
    /// is not known to have.
    pub(crate) fn gauges(&self, queued: usize, unwritten: u64) {
        self.queued.store(queued as u64, Ordering::Relaxed);
        self.unwritten.store(unwritten, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> crate::stats::events_v1::SinkSnapshot {
        crate::stats::events_v1::SinkSnapshot {
            name: self.name.clone(),
            cache: *lock(&self.cache),
            created: self.created.get(),
            patched: self.patched.get(),
            recreated: self.recreated.get(),
            flush_written: self.flush_written.get(),
            rejected: self.rejected.get(),
            retry_exhausted: self.retry_exhausted.get(),
            rescheduled: self.rescheduled.get(),
            abandoned: self.abandoned.get(),
            superseded: self.superseded.get(),
            attempts: self.attempts.get(),
            queued: self.queued.load(Ordering::Relaxed),
            refreshed: self.refreshed.get(),
            unwritten: self.unwritten.load(Ordering::Relaxed),
            restarts: self.restarts.get(),
            not_stored: self.not_stored.total(),
            not_stored_by_cause: self.not_stored.by_cause(),
        }
    }
}
