//! What a write budget counts: writes deferred (by reason), 429s by the limit they name,
//! pauses, circuit openings and probes, whether the circuit is open now, and the adaptive
//! rate and writes-in-flight limit.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
    /// As many writes are in flight as the adaptive limit allows.
    InFlight,
}

/// The part of a budget's writes a 429 applies to (`budget/limit.rs` reads it from the
/// answer's message).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Limit {
    /// The events of the write's source and object (`SourceAndObject`).
    Object,
    /// The writes to the write's namespace (`Namespace`).
    Namespace,
    /// Every write of the budget (`User`, `Server`, or a 429 naming no limit).
    Everything,
}

impl Limit {
    /// Its name in metrics and logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Limit::Object => "source_and_object",
            Limit::Namespace => "namespace",
            Limit::Everything => "everything",
        }
    }
}

/// Counters of one write budget (shared by every sink that uses it).
#[derive(Debug)]
pub(crate) struct BudgetCounters {
    name: String,
    deferred_rate: Counter,
    deferred_retry_after: Counter,
    deferred_circuit: Counter,
    deferred_in_flight: Counter,
    throttled: [Counter; 3],
    pauses: Counter,
    opens: Counter,
    probes: Counter,
    fleet_proposed: Counter,
    fleet_adopted: Counter,
    open: AtomicBool,
    open_gauge: metrics::Gauge,
    /// The current rate and writes-in-flight limit, as f64 bits (infinite: none).
    rate: AtomicU64,
    in_flight_limit: AtomicU64,
    rate_gauge: metrics::Gauge,
    in_flight_gauge: metrics::Gauge,
}

impl BudgetCounters {
    /// Counters mirrored to the `metrics` facade with label `budget` = `name`.
    pub(crate) fn new(name: &str) -> Self {
        let n = name.to_owned();
        let deferred = |r: &'static str| metrics::counter!(names::BUDGET_DEFERRED, "budget" => n.clone(), "reason" => r);
        let throttled = |l: &'static str| metrics::counter!(names::BUDGET_THROTTLED, "budget" => n.clone(), "limit" => l);
        let open_gauge = metrics::gauge!(names::CIRCUIT_OPEN, "budget" => n.clone());
        open_gauge.set(0.0);
        Self::with(
            name,
            [
                deferred("rate"),
                deferred("retry_after"),
                deferred("circuit"),
                deferred("in_flight"),
                throttled(Limit::Object.as_str()),
                throttled(Limit::Namespace.as_str()),
                throttled(Limit::Everything.as_str()),
                metrics::counter!(names::BUDGET_PAUSES, "budget" => n.clone()),
                metrics::counter!(names::CIRCUIT_OPENS, "budget" => n.clone()),
                metrics::counter!(names::CIRCUIT_PROBES, "budget" => n.clone()),
                metrics::counter!(names::BUDGET_FLEET_LAWS, "budget" => n.clone(), "how" => "proposed"),
                metrics::counter!(names::BUDGET_FLEET_LAWS, "budget" => n.clone(), "how" => "adopted"),
            ],
            [
                open_gauge,
                metrics::gauge!(names::BUDGET_RATE, "budget" => n.clone()),
                metrics::gauge!(names::BUDGET_IN_FLIGHT_LIMIT, "budget" => n.clone()),
            ],
        )
    }

    /// Counters kept in-process only (a budget that is off exports nothing).
    pub(crate) fn detached(name: &str) -> Self {
        Self::with(
            name,
            std::array::from_fn(|_| metrics::Counter::noop()),
            std::array::from_fn(|_| metrics::Gauge::noop()),
        )
    }

    fn with(name: &str, c: [metrics::Counter; 12], g: [metrics::Gauge; 3]) -> Self {
        let [
            rate,
            retry_after,
            circuit,
            in_flight,
            t_obj,
            t_ns,
            t_all,
            pauses,
            opens,
            probes,
            fleet_proposed,
            fleet_adopted,
        ] = c;
        let [open_gauge, rate_gauge, in_flight_gauge] = g;
        BudgetCounters {
            name: name.to_owned(),
            deferred_rate: Counter::new(rate),
            deferred_retry_after: Counter::new(retry_after),
            deferred_circuit: Counter::new(circuit),
            deferred_in_flight: Counter::new(in_flight),
            throttled: [Counter::new(t_obj), Counter::new(t_ns), Counter::new(t_all)],
            pauses: Counter::new(pauses),
            opens: Counter::new(opens),
            probes: Counter::new(probes),
            fleet_proposed: Counter::new(fleet_proposed),
            fleet_adopted: Counter::new(fleet_adopted),
            open: AtomicBool::new(false),
            open_gauge,
            rate: AtomicU64::new(f64::INFINITY.to_bits()),
            in_flight_limit: AtomicU64::new(f64::INFINITY.to_bits()),
            rate_gauge,
            in_flight_gauge,
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
            Deferral::InFlight => self.deferred_in_flight.add(1),
        }
    }

    /// A 429 naming `limit` was answered.
    pub(crate) fn throttled(&self, limit: Limit) {
        self.throttled[limit as usize].add(1);
    }

    /// A 429 paused writes (all, a namespace's or an object's).
    pub(crate) fn paused(&self) {
        self.pauses.add(1);
    }

    /// The adaptive rate and writes-in-flight limit now (infinite: none; a gauge shows
    /// -1 then).
    pub(crate) fn rate(&self, rate: f64, in_flight_limit: f64) {
        self.rate.store(rate.to_bits(), Ordering::Relaxed);
        self.in_flight_limit
            .store(in_flight_limit.to_bits(), Ordering::Relaxed);
        let shown = |v: f64| if v.is_finite() { v } else { -1.0 };
        self.rate_gauge.set(shown(rate));
        self.in_flight_gauge.set(shown(in_flight_limit));
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

    /// A law for the fleet decided after a 429 (`true`) or followed from another member.
    pub(crate) fn fleet_law(&self, proposed: bool) {
        if proposed {
            self.fleet_proposed.add(1);
        } else {
            self.fleet_adopted.add(1);
        }
    }

    pub(crate) fn snapshot(&self) -> BudgetSnapshot {
        BudgetSnapshot {
            name: self.name.clone(),
            deferred_rate: self.deferred_rate.get(),
            deferred_retry_after: self.deferred_retry_after.get(),
            deferred_circuit: self.deferred_circuit.get(),
            deferred_in_flight: self.deferred_in_flight.get(),
            throttled: self.throttled.iter().map(Counter::get).sum(),
            throttled_scoped: self.throttled[Limit::Object as usize].get()
                + self.throttled[Limit::Namespace as usize].get(),
            rate: f64::from_bits(self.rate.load(Ordering::Relaxed)),
            in_flight_limit: {
                let l = f64::from_bits(self.in_flight_limit.load(Ordering::Relaxed));
                l.is_finite().then_some(l as u32)
            },
            pauses: self.pauses.get(),
            circuit_opens: self.opens.get(),
            probes: self.probes.get(),
            circuit_open: self.open.load(Ordering::Relaxed),
            fleet_laws_proposed: self.fleet_proposed.get(),
            fleet_laws_adopted: self.fleet_adopted.get(),
        }
    }
}
