//! What the recorder and the broadcaster count: every call ends in exactly one of
//! `recorded` or a refusal, and every recorded occurrence is later taken from the intake and
//! distributed (or, in theory, found invalid when built).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::counter::{Counter, DropLog};
use super::names;

/// Why a call was refused at the recorder (a typed instrumentation event: it counts and,
/// for a full intake, logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The occurrence failed a client-side check.
    Invalid,
    /// The intake held its capacity.
    IntakeFull,
    /// The pipeline was shut down.
    AfterShutdown,
}

/// Counters of the recorder and the broadcaster.
#[derive(Debug)]
pub(crate) struct IntakeCounters {
    recorded: Counter,
    invalid: Counter,
    intake_full: Counter,
    after_shutdown: Counter,
    received: AtomicU64,
    built_invalid: AtomicU64,
    broadcast: Counter,
    full_log: DropLog,
    depth: metrics::Gauge,
    coalesced: Counter,
    /// Occurrences held in the overflow table. Signed: a caller counts its occurrence just
    /// after the table's lock, so the recorder actor may count it out first, for a moment.
    overflow: AtomicI64,
    overflow_gauge: metrics::Gauge,
}

impl IntakeCounters {
    pub(crate) fn new() -> Self {
        let dropped = |reason: &'static str| {
            Counter::new(metrics::counter!(names::DROPPED, "reason" => reason))
        };
        IntakeCounters {
            recorded: Counter::new(metrics::counter!(names::RECORDED)),
            invalid: dropped("invalid"),
            intake_full: dropped("intake_full"),
            after_shutdown: dropped("after_shutdown"),
            received: AtomicU64::new(0),
            built_invalid: AtomicU64::new(0),
            broadcast: Counter::new(metrics::counter!(names::BROADCAST)),
            full_log: DropLog::new("intake full"),
            depth: metrics::gauge!(names::QUEUE_DEPTH, "queue" => "intake"),
            coalesced: Counter::new(metrics::counter!(names::COALESCED, "queue" => "intake")),
            overflow: AtomicI64::new(0),
            overflow_gauge: metrics::gauge!(names::OVERFLOW, "queue" => "intake"),
        }
    }

    /// One occurrence entered the intake.
    pub(crate) fn recorded(&self) {
        self.recorded.add(1);
    }

    /// One occurrence went into the overflow table (a new entry, or `merged` into one).
    pub(crate) fn overflowed(&self, merged: bool) {
        self.recorded.add(1);
        if merged {
            self.coalesced.add(1);
        }
        let held = self.overflow.fetch_add(1, Ordering::Relaxed) + 1;
        self.overflow_gauge.set(held.max(0) as f64);
    }

    /// The recorder actor took entries standing for `n` occurrences from the overflow table.
    pub(crate) fn taken_from_overflow(&self, n: u64) {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let held = self.overflow.fetch_sub(n, Ordering::Relaxed) - n;
        self.overflow_gauge.set(held.max(0) as f64);
        self.taken(n as u64);
    }

    /// (occurrences merged into an overflow entry so far, occurrences held there now).
    pub(crate) fn overflow_values(&self) -> [u64; 2] {
        let held = self.overflow.load(Ordering::Relaxed).max(0) as u64;
        [self.coalesced.get(), held]
    }

    /// One call was refused.
    pub(crate) fn refused(&self, why: Refusal) {
        match why {
            Refusal::Invalid => self.invalid.add(1),
            Refusal::AfterShutdown => self.after_shutdown.add(1),
            Refusal::IntakeFull => {
                self.intake_full.add(1);
                self.full_log.record(1);
            }
        }
    }

    /// The recorder actor took `n` occurrences from the intake.
    pub(crate) fn taken(&self, n: u64) {
        self.received.fetch_add(n, Ordering::Relaxed);
        self.depth.set(self.depth() as f64);
    }

    /// An accepted occurrence could not be built into an event (counted as invalid).
    pub(crate) fn built_invalid(&self) {
        self.invalid.add(1);
        self.built_invalid.fetch_add(1, Ordering::Relaxed);
    }

    /// The broadcaster distributed `n` events.
    pub(crate) fn distributed(&self, n: u64) {
        self.broadcast.add(n);
    }

    /// Occurrences accepted so far.
    pub(crate) fn recorded_total(&self) -> u64 {
        self.recorded.get()
    }

    /// Occurrences the recorder actor has taken from the intake so far.
    pub(crate) fn taken_total(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Occurrences accepted and not yet taken by the recorder actor.
    pub(crate) fn depth(&self) -> u64 {
        self.recorded.get().saturating_sub(self.taken_total())
    }

    /// Occurrences accepted and neither distributed nor found invalid.
    pub(crate) fn undistributed(&self) -> u64 {
        self.recorded
            .get()
            .saturating_sub(self.broadcast.get())
            .saturating_sub(self.built_invalid.load(Ordering::Relaxed))
    }

    /// (recorded, invalid, intake full, after shutdown, broadcast, depth).
    pub(crate) fn values(&self) -> [u64; 6] {
        [
            self.recorded.get(),
            self.invalid.get(),
            self.intake_full.get(),
            self.after_shutdown.get(),
            self.broadcast.get(),
            self.depth(),
        ]
    }
}
