//! What a write budget counts: writes deferred (by reason), Retry-After pauses, circuit
//! openings and probes, and whether the circuit is open now.

use std::sync::atomic::{AtomicBool, Ordering};

use super::counter::Counter;
use super::names;
use crate::stats::BudgetSnapshot;

/// Why a write had to wait before its request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deferral {
    /// No token in the bucket.
    Rate,
    /// The apiserver answered 429 with a Retry-After (all writes paused).
    RetryAfter,
    /// The circuit is open.
    Circuit,
}

/// Counters of one write budget (shared by every sink that uses it).
#[derive(Debug)]
pub(crate) struct BudgetCounters {
    name: String,
    deferred_rate: Counter,
    deferred_retry_after: Counter,
    deferred_circuit: Counter,
    pauses: Counter,
    opens: Counter,
    probes: Counter,
    open: AtomicBool,
    open_gauge: metrics::Gauge,
}

impl BudgetCounters {
    /// Counters mirrored to the `metrics` facade with label `budget` = `name`.
    pub(crate) fn new(name: &str) -> Self {
        let n = name.to_owned();
        let deferred = |r: &'static str| metrics::counter!(names::BUDGET_DEFERRED, "budget" => n.clone(), "reason" => r);
        let open_gauge = metrics::gauge!(names::CIRCUIT_OPEN, "budget" => n.clone());
        open_gauge.set(0.0);
        Self::with(
            name,
            [
                deferred("rate"),
                deferred("retry_after"),
                deferred("circuit"),
                metrics::counter!(names::BUDGET_PAUSES, "budget" => n.clone()),
                metrics::counter!(names::CIRCUIT_OPENS, "budget" => n.clone()),
                metrics::counter!(names::CIRCUIT_PROBES, "budget" => n.clone()),
            ],
            open_gauge,
        )
    }

    /// Counters kept in-process only (a budget that is off exports nothing).
    pub(crate) fn detached(name: &str) -> Self {
        Self::with(
            name,
            std::array::from_fn(|_| metrics::Counter::noop()),
            metrics::Gauge::noop(),
        )
    }

    fn with(name: &str, c: [metrics::Counter; 6], open_gauge: metrics::Gauge) -> Self {
        let [rate, retry_after, circuit, pauses, opens, probes] = c;
        BudgetCounters {
            name: name.to_owned(),
            deferred_rate: Counter::new(rate),
            deferred_retry_after: Counter::new(retry_after),
            deferred_circuit: Counter::new(circuit),
            pauses: Counter::new(pauses),
            opens: Counter::new(opens),
            probes: Counter::new(probes),
            open: AtomicBool::new(false),
            open_gauge,
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// A write started waiting.
    pub(crate) fn deferred(&self, why: Deferral) {
        match why {
            Deferral::Rate => self.deferred_rate.add(1),
            Deferral::RetryAfter => self.deferred_retry_after.add(1),
            Deferral::Circuit => self.deferred_circuit.add(1),
        }
    }

    /// A 429 paused every write of the budget.
    pub(crate) fn paused(&self) {
        self.pauses.add(1);
    }

    /// The circuit opened (`true`) or closed.
    pub(crate) fn circuit(&self, open: bool) {
        if open {
            self.opens.add(1);
        }
        self.open.store(open, Ordering::Relaxed);
        self.open_gauge.set(if open { 1.0 } else { 0.0 });
    }

    /// A probe write is being sent.
    pub(crate) fn probe(&self) {
        self.probes.add(1);
    }

    pub(crate) fn snapshot(&self) -> BudgetSnapshot {
        BudgetSnapshot {
            name: self.name.clone(),
            deferred_rate: self.deferred_rate.get(),
            deferred_retry_after: self.deferred_retry_after.get(),
            deferred_circuit: self.deferred_circuit.get(),
            pauses: self.pauses.get(),
            circuit_opens: self.opens.get(),
            probes: self.probes.get(),
            circuit_open: self.open.load(Ordering::Relaxed),
        }
    }
}
