//! What a core/v1 sink chain counts: the correlator's decisions and the end of every write.

use std::sync::atomic::{AtomicU64, Ordering};

use kevents_core::WriteKind;

use super::counter::{Counter, DropLog};
use super::names;
use super::not_stored::{NotStored, WriteRefusal};
use crate::stats::SinkSnapshot;

/// The correlator's decisions over one batch, published at once.
#[derive(Debug, Default)]
pub(crate) struct Decisions {
    pub(crate) correlated: u64,
    pub(crate) aggregated: u64,
    pub(crate) spam_filtered: u64,
    pub(crate) abandoned: u64,
}

/// How one write ended (a typed instrumentation event: counts, and logs what must be seen).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteEnd {
    /// The server stored it with this request.
    Stored(WriteKind),
    /// The server refused it and the error is not retried.
    Rejected,
    /// The retry budget ran out; `log` says whether to log it (rate-limited).
    RetryExhausted {
        /// Log it as a drop.
        log: bool,
    },
    /// A newer write of the same event replaced it before it started.
    Superseded,
}

/// Counters of one sink chain (its correlator and its sink actor).
#[derive(Debug)]
pub(crate) struct SinkCounters {
    name: String,
    correlated: Counter,
    aggregated: Counter,
    spam_filtered: Counter,
    /// Occurrences the spam filter skipped whose state was kept to be written later.
    deferred_total: Counter,
    /// Deferred states held now (one per event).
    deferred: AtomicU64,
    created: Counter,
    patched: Counter,
    recreated: Counter,
    rejected: Counter,
    retry_exhausted: Counter,
    abandoned: Counter,
    superseded: Counter,
    attempts: Counter,
    retries: Counter,
    restarts: Counter,
    queued: AtomicU64,
    in_flight: AtomicU64,
    depth: metrics::Gauge,
    retry_log: DropLog,
    not_stored: NotStored,
}

impl SinkCounters {
    pub(crate) fn new(name: &str) -> Self {
        let n = name.to_owned();
        let ev = |o: &'static str| {
            Counter::new(metrics::counter!(names::SINK_EVENTS, "sink" => n.clone(), "outcome" => o))
        };
        let wr = |o: &'static str| {
            Counter::new(metrics::counter!(names::SINK_WRITES, "sink" => n.clone(), "outcome" => o))
        };
        SinkCounters {
            name: n.clone(),
            correlated: ev("correlated"),
            aggregated: ev("aggregated"),
            spam_filtered: ev("spam_filtered"),
            deferred_total: ev("deferred"),
            deferred: AtomicU64::new(0),
            created: wr("created"),
            patched: wr("patched"),
            recreated: wr("recreated"),
            rejected: wr("rejected"),
            retry_exhausted: wr("retry_exhausted"),
            abandoned: wr("abandoned"),
            superseded: wr("superseded"),
            attempts: Counter::new(metrics::counter!(names::SINK_ATTEMPTS, "sink" => n.clone())),
            retries: Counter::new(metrics::counter!(names::SINK_RETRIES, "sink" => n.clone())),
            restarts: Counter::new(metrics::counter!(names::SINK_RESTARTS, "sink" => n.clone())),
            queued: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            depth: metrics::gauge!(names::QUEUE_DEPTH, "queue" => format!("sink:{n}")),
            retry_log: DropLog::new(format!("sink {name} retry budget exhausted")),
            not_stored: NotStored::new(name),
        }
    }

    /// The chain's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The correlator's decisions over one batch.
    pub(crate) fn decided(&self, d: &Decisions) {
        self.correlated.add(d.correlated);
        self.aggregated.add(d.aggregated);
        self.spam_filtered.add(d.spam_filtered);
        self.abandoned.add(d.abandoned);
    }

    /// A skipped occurrence's state was kept to be written later; `replaced`: it replaced
    /// an older kept state of the same event (whose occurrences it counts: superseded).
    pub(crate) fn tail_kept(&self, replaced: bool) {
        self.deferred_total.add(1);
        if replaced {
            self.superseded.add(1);
        } else {
            self.deferred.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A kept state was replaced by a newer write of the same event (superseded).
    pub(crate) fn tail_superseded(&self) {
        self.deferred.fetch_sub(1, Ordering::Relaxed);
        self.superseded.add(1);
    }

    /// `n` kept states became writes (counted as queued by the sink actor).
    pub(crate) fn tails_released(&self, n: u64) {
        self.deferred.fetch_sub(n, Ordering::Relaxed);
    }

    /// `n` writes entered the sink actor's queues.
    pub(crate) fn queued(&self, n: u64) {
        self.queued.fetch_add(n, Ordering::Relaxed);
    }

    /// One request is being made: the `attempt`-th of its write (1: the first; later ones
    /// are retries).
    pub(crate) fn attempt(&self, attempt: u32) {
        self.attempts.add(1);
        if attempt > 1 {
            self.retries.add(1);
        }
    }

    /// One write ended.
    pub(crate) fn write_ended(&self, end: WriteEnd) {
        self.queued.fetch_sub(1, Ordering::Relaxed);
        match end {
            WriteEnd::Stored(WriteKind::Create) => self.created.add(1),
            WriteEnd::Stored(WriteKind::Patch) => self.patched.add(1),
            WriteEnd::Stored(WriteKind::Recreate) => self.recreated.add(1),
            WriteEnd::Rejected => self.rejected.add(1),
            WriteEnd::Superseded => self.superseded.add(1),
            WriteEnd::RetryExhausted { log } => {
                self.retry_exhausted.add(1);
                if log {
                    self.retry_log.record(1);
                }
            }
        }
    }

    /// `n` occurrences will never be stored: the server refused a write of them for good.
    pub(crate) fn not_stored(&self, refusal: &WriteRefusal, n: u64) {
        self.not_stored.add(refusal, n);
    }

    /// `n` queued writes were dropped at shutdown.
    pub(crate) fn abandoned_queued(&self, n: u64) {
        self.queued.fetch_sub(n, Ordering::Relaxed);
        self.abandoned.add(n);
    }

    /// `n` writes arrived after the sink abandoned its work (never queued).
    pub(crate) fn abandoned_late(&self, n: u64) {
        self.abandoned.add(n);
    }

    /// The sink actor is restarting.
    pub(crate) fn restarted(&self) {
        self.restarts.add(1);
    }

    /// Publishes the in-flight count and the queue depth gauge.
    pub(crate) fn gauges(&self, in_flight: usize) {
        self.in_flight.store(in_flight as u64, Ordering::Relaxed);
        self.depth.set(self.queued.load(Ordering::Relaxed) as f64);
    }

    pub(crate) fn snapshot(&self) -> SinkSnapshot {
        SinkSnapshot {
            name: self.name.clone(),
            correlated: self.correlated.get(),
            aggregated: self.aggregated.get(),
            spam_filtered: self.spam_filtered.get(),
            deferred: self.deferred.load(Ordering::Relaxed),
            deferred_total: self.deferred_total.get(),
            created: self.created.get(),
            patched: self.patched.get(),
            recreated: self.recreated.get(),
            rejected: self.rejected.get(),
            retry_exhausted: self.retry_exhausted.get(),
            abandoned: self.abandoned.get(),
            superseded: self.superseded.get(),
            attempts: self.attempts.get(),
            retries: self.retries.get(),
            restarts: self.restarts.get(),
            queued: self.queued.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            not_stored: self.not_stored.total(),
            not_stored_by_cause: self.not_stored.by_cause(),
        }
    }
}
