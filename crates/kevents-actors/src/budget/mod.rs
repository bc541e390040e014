//! The write budget of one apiserver ([`WriteBudget`]): the rate every sink writing to that
//! apiserver draws from, adapted to the 429s it answers (`throttle.rs`); the pauses a 429
//! imposes, scoped to what its limit covers (`limit.rs`); the writes in flight at once; and
//! a circuit breaker that stops sending after consecutive transport errors or 5xx answers
//! and probes until the server answers again.
//!
//! The budget only decides *when* a request may be made; the keyed writer engine
//! (`writer/`) asks it before every attempt and waits on a timer (never blocking the actor)
//! while it says no. Writes waiting for it have not started, so newer results for their
//! events keep replacing them (coalescing): a throttled pipeline sends fewer, fresher writes.

mod circuit;
mod fleet;
#[cfg(test)]
mod fleet_model;
mod limit;
mod options;
mod permit;
mod throttle;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use kevents_core::fleet::FleetLaw;
use tokio::time::Instant;

use crate::stats::BudgetSnapshot;
use crate::telemetry::{BudgetCounters, Deferral};
use circuit::{AfterFailure, Breaker, Gate};
pub use fleet::BudgetMember;
pub(crate) use limit::{Limit, Scoped, WriteScope, object_hash};
pub use options::{BreakerOptions, BudgetOptions, DEFAULT_BUDGET_BURST, DEFAULT_BUDGET_QPS};
pub(crate) use permit::{Admit, Health, Permit};
use throttle::Throttle;

/// Namespaces with a bucket of their own (after a `Namespace` 429) and objects paused by a
/// `SourceAndObject` 429, at most: a budget's memory stays bounded whatever the server says.
const MAX_SCOPES: usize = 4096;
/// A storm of 429s with `Retry-After` (APF under load) pauses the budget hundreds of times
/// a minute: one info line at the first, then at most one per this long, saying how many
/// pauses it stands for (each pause is also counted: `kevents_budget_pauses_total`).
const PAUSE_LOG_EVERY: Duration = Duration::from_secs(10);

/// When the last info line about a pause was written, and the pauses since.
#[derive(Debug, Default)]
struct PauseLog {
    last: Option<Instant>,
    since: u64,
}

impl PauseLog {
    /// A pause: `Some(pauses not logged since the last line)` if this one is to be logged.
    fn pause(&mut self, now: Instant) -> Option<u64> {
        if self
            .last
            .is_some_and(|t| now.saturating_duration_since(t) < PAUSE_LOG_EVERY)
        {
            self.since += 1;
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.since))
    }
}

#[derive(Debug)]
struct State {
    /// Every write's bucket.
    all: Throttle,
    /// Buckets of namespaces a `Namespace` 429 was scoped to.
    namespaces: HashMap<Box<str>, Throttle>,
    /// Objects a `SourceAndObject` 429 paused, until when.
    objects: HashMap<u64, Instant>,
    /// When the last of `objects`' pauses ends: past it the map is cleared, so a write
    /// hashes its object only while some object is paused.
    objects_until: Option<Instant>,
    /// Writes in flight at most (adaptive): one at the start, one more per answer until the
    /// first decrease (doubling every round trip: a fleet starting together does not send
    /// each member's whole window into a server that refuses it), then one more per round
    /// of answers; infinite past 4096.
    in_flight_limit: f64,
    /// At most one info line per [`PAUSE_LOG_EVERY`] about 429 pauses.
    pause_log: PauseLog,
    breaker: Breaker,
    /// The fleet it shares its law with, once it joined one.
    fleet: Option<fleet::Joined>,
}

impl State {
    /// Holds `object`'s writes until at least `until` (a pause, or the next write of a
    /// resuming object); `insert`: also an object not held yet.
    fn hold_object(&mut self, object: u64, until: Instant, insert: bool) {
        let held = if insert {
            Some(self.objects.entry(object).or_insert(until))
        } else {
            self.objects.get_mut(&object)
        };
        if let Some(e) = held {
            *e = (*e).max(until);
            self.objects_until = Some(self.objects_until.map_or(until, |u| u.max(until)));
        }
    }
}

struct Inner {
    enabled: bool,
    options: BudgetOptions,
    state: Mutex<State>,
    /// Admitted requests not yet reported (their [`Permit`]s alive).
    in_flight: AtomicU32,
    counters: BudgetCounters,
}

/// The write budget of one apiserver, shared by every sink (core/v1 and events.k8s.io/v1
/// chains, of one pipeline or several) that writes to it: clone the handle and give it to
/// each ([`SinkOptions::budget`](crate::SinkOptions::budget),
/// [`events_v1::SinkOptions::budget`](crate::events_v1::SinkOptions::budget),
/// [`PipelineBuilder::write_budget`](crate::PipelineBuilder::write_budget)). Without one, each
/// pipeline builder makes one with [`BudgetOptions::default`], named `default`, shared by
/// its chains. Several processes writing to one apiserver each adapt on their own and
/// share its limit, or send at one rate when their budgets share their law
/// ([`WriteBudget::join_fleet`]: fair by construction, and few 429s at small shares).
///
/// * **Rate**: a token bucket of `qps` requests per second and `burst` at once (one token per
///   attempt, retries included). A write that finds no token waits (counted
///   `deferred_rate`) and keeps absorbing newer results for its event.
/// * **Adaptive** (the default): the first 429 takes the rate to one write a second, which
///   doubles every 250 ms until the next 429 (slow start), which sets it to the rate slow
///   start's writes were accepted at; from then on a 429 multiplies the rate by 0.8 (once
///   per round trip) and halves the writes in flight; every accepted write adds 0.05
///   writes/s to the rate
///   and the writes in flight grow by one per round, up to `qps` (AIMD, so budgets of
///   several processes sharing a limit converge to equal shares; the constants and why
///   are in `budget/throttle.rs` and `docs/semantics.md`). The writes in flight start at
///   one and double every round trip until the first 429. [`BudgetSnapshot::rate`] is
///   the current rate (metric `kevents_budget_rate`).
/// * **429, scoped**: the `EventRateLimit` plugin names the limit that refused a write. A
///   `Namespace` limit's 429 lowers and pauses only that namespace's writes (a bucket of its
///   own, adaptive); a `SourceAndObject` one pauses that source and object's writes for
///   `default_retry_after`, then lets them go one per `default_retry_after` until none came
///   for that long; `User`, `Server` and 429s naming no limit (API Priority and
///   Fairness, max-in-flight) apply to every write. A `Retry-After` is honoured (within
///   `max_retry_after`) as a pause of what the 429 covers; a pinned budget pauses for
///   `default_retry_after` without one.
/// * **Circuit breaker**: after `breaker.failures` consecutive transport errors, timeouts or
///   5xx answers the circuit opens (logged at warn): no request is made, except one probe
///   after `probe_interval` (doubled after each failed probe, at most `max_probe_interval`);
///   the first answer closes it (logged at info).
///
/// ```
/// use kevents_actors::{BudgetOptions, Pipeline, SinkOptions, WriteBudget};
/// use kevents_core::EventSource;
/// use kevents_sim::MemoryApiServer;
///
/// # #[actix::main] async fn main() {
/// let api = MemoryApiServer::new();
/// let budget = WriteBudget::new("apiserver", BudgetOptions { qps: 50, burst: 100, ..Default::default() });
/// // Two pipelines writing to the same apiserver share one budget.
/// let a = Pipeline::builder(EventSource::new("a", "node")).write_budget(budget.clone())
///     .sink("api", api.clone(), SinkOptions::default()).start();
/// let b = Pipeline::builder(EventSource::new("b", "node"))
///     .sink("api", api.clone(), SinkOptions { budget: Some(budget.clone()), ..Default::default() })
///     .start();
/// assert_eq!(budget.snapshot().circuit_opens, 0);
/// assert_eq!(budget.snapshot().rate, 50.0);
/// # let _ = (a.shutdown(std::time::Duration::from_secs(1)).await, b.shutdown(std::time::Duration::from_secs(1)).await);
/// # }
/// ```
#[derive(Clone)]
pub struct WriteBudget(Arc<Inner>);

impl fmt::Debug for WriteBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteBudget")
            .field("name", &self.name())
            .field("enabled", &self.0.enabled)
            .field("options", &self.0.options)
            .finish()
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl WriteBudget {
    /// A budget named `name` (the `budget` label of its metrics).
    pub fn new(name: &str, options: BudgetOptions) -> Self {
        Self::assemble(BudgetCounters::new(name), true, options)
    }

    /// No budget: no rate limit, no pause after 429, no circuit breaker (each write follows
    /// its own retry policy only, as before budgets existed).
    pub fn off() -> Self {
        Self::assemble(
            BudgetCounters::detached("off"),
            false,
            BudgetOptions {
                qps: 0,
                adaptive: false,
                ..BudgetOptions::default()
            },
        )
    }

    fn assemble(counters: BudgetCounters, enabled: bool, options: BudgetOptions) -> Self {
        let now = Instant::now();
        let all = Throttle::new(options.qps, options.burst, options.adaptive, now);
        // A pinned budget keeps its rate and sends as many at once as the writers do.
        let in_flight_limit = if options.adaptive { 1.0 } else { f64::INFINITY };
        counters.rate(all.rate(), in_flight_limit);
        WriteBudget(Arc::new(Inner {
            enabled,
            state: Mutex::new(State {
                all,
                namespaces: HashMap::new(),
                objects: HashMap::new(),
                objects_until: None,
                in_flight_limit,
                pause_log: PauseLog::default(),
                breaker: Breaker::new(),
                fleet: None,
            }),
            options,
            in_flight: AtomicU32::new(0),
            counters,
        }))
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.0.counters.name()
    }

    /// Whether it limits anything ([`WriteBudget::off`] does not).
    pub fn is_enabled(&self) -> bool {
        self.0.enabled
    }

    /// Its counters now.
    pub fn snapshot(&self) -> BudgetSnapshot {
        self.0.counters.snapshot()
    }

    /// Whether `other` is the same budget (a clone of this handle).
    pub fn same(&self, other: &WriteBudget) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub(crate) fn counters(&self) -> &BudgetCounters {
        &self.0.counters
    }

    /// Makes this budget a member of a fleet that shares its write law (processes, or
    /// pipelines, writing to one apiserver under one limit): from now on, past the first
    /// 429, it sends at the rate the fleet's law gives, a function of time that every
    /// member computes alike; a 429 that meets it in the current epoch makes it decide the
    /// next epoch's law (a decrease, or the end of slow start), which the returned member
    /// hands to the fleet's link to write for the others; the others' laws, read by the
    /// link, it follows. Its rate stays within its `qps`. Only the `User`, `Server` and
    /// unnamed (API Priority and Fairness) limits' 429s are shared: a `Namespace` or
    /// `SourceAndObject` one stays this budget's own. A pinned budget (not `adaptive`)
    /// keeps its rate and decides nothing. Joining again gives a new member; the earlier
    /// one sees no more proposals.
    ///
    /// ```
    /// use kevents_actors::{BudgetOptions, WriteBudget};
    /// use kevents_core::fleet::{FleetLaw, FleetMember, FleetPhase};
    ///
    /// let budget = WriteBudget::new("apiserver", BudgetOptions::default());
    /// let member = budget.join_fleet();
    /// // Another member decided an adapted law of 20 writes a second, just now.
    /// let now = std::time::SystemTime::now();
    /// member.adopt(&FleetLaw {
    ///     epoch: 3,
    ///     phase: FleetPhase::Adapted,
    ///     from: 20.0,
    ///     since_micros: FleetLaw::micros_of(now),
    /// });
    /// assert!((budget.snapshot().rate - 20.0).abs() < 0.1);
    /// assert_eq!(budget.snapshot().fleet_laws_adopted, 1);
    /// ```
    pub fn join_fleet(&self) -> BudgetMember {
        let (tx, rx) = tokio::sync::watch::channel(None);
        let mut st = lock(&self.0.state);
        if self.0.options.adaptive && self.0.enabled {
            // Each member its own random phase (a process-wide counter, mixed).
            static SEEDS: AtomicU64 = AtomicU64::new(0);
            let mut seed = SEEDS.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
            seed ^= u64::from(std::process::id());
            seed = (seed ^ (seed >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            seed = (seed ^ (seed >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            st.all = st.all.clone().in_fleet(Instant::now(), seed ^ (seed >> 31));
        }
        st.fleet = Some(fleet::Joined {
            proposals: tx,
            law: None,
        });
        drop(st);
        BudgetMember::new(self, rx)
    }

    /// Follows `law` (a fleet's, from its link) if it is newer than the one followed.
    fn adopt(&self, law: &FleetLaw) {
        if !self.0.enabled || !self.0.options.adaptive {
            return;
        }
        let (now, wall) = (Instant::now(), SystemTime::now());
        let mut st = lock(&self.0.state);
        let st = &mut *st;
        let Some(joined) = st.fleet.as_mut() else {
            return;
        };
        let epoch = st.all.epoch();
        let newer = law.epoch > epoch || (law.epoch == epoch && joined.law != Some(*law));
        if !newer {
            return;
        }
        st.all.adopt(&fleet::to_local_law(law, now, wall), now);
        joined.law = Some(*law);
        self.0.counters.fleet_law(false);
        self.0.counters.rate(st.all.rate(), st.in_flight_limit);
        tracing::debug!(budget = %self.name(), epoch = law.epoch, rate = st.all.rate(),
            "following the fleet's write law");
    }

    fn permit(&self, probe: bool, epoch: u64, namespace_epoch: Option<u64>) -> Permit {
        self.0.in_flight.fetch_add(1, Ordering::Relaxed);
        Permit {
            probe,
            epoch,
            namespace_epoch,
            inner: Some(Arc::clone(&self.0)),
        }
    }

    /// May a request of a write to `scope` start now? A `Go` uses one token of each bucket
    /// that applies (or is the circuit's probe).
    pub(crate) fn admit(&self, scope: WriteScope<'_>) -> Admit {
        if !self.0.enabled {
            return Admit::Go(Permit {
                probe: false,
                epoch: 0,
                namespace_epoch: None,
                inner: None,
            });
        }
        let now = Instant::now();
        let max_probe = self.0.options.breaker.max_probe_interval;
        let mut st = lock(&self.0.state);
        match st.breaker.gate(now, max_probe) {
            Gate::Closed => {}
            Gate::Wait(d) => return Admit::Wait(d, Deferral::Circuit),
            Gate::Probe => {
                self.0.counters.probe();
                tracing::debug!(budget = %self.name(), "circuit open: sending a probe write");
                let epoch = st.all.epoch();
                drop(st);
                return Admit::Go(self.permit(true, epoch, None));
            }
        }
        let resume = self.0.options.default_retry_after;
        // Every pause, and every hold of a resuming object, over for `resume`: the
        // objects' writes have all come back (a held write wakes when its pause ends).
        if st.objects_until.is_some_and(|until| now >= until + resume) {
            st.objects.clear();
            st.objects_until = None;
        }
        if !st.objects.is_empty() {
            let object = scope.object();
            if let Some(&until) = st.objects.get(&object) {
                if now < until {
                    return Admit::Hold(until - now, Deferral::RetryAfter);
                }
                // The pause is over: this write goes alone and the object's others wait
                // (its bucket has refilled a token or so: all of them at once met 429s
                // again). An accepted write holds them one more `resume` (`report`): a
                // throttled object is written once per `resume` while its writes keep
                // coming (they coalesce meanwhile); another 429 pauses it again.
                st.hold_object(object, now + resume, true);
            }
        }
        if let Some((wait, why)) = st.all.wait(now) {
            return Admit::Wait(wait, why);
        }
        if let Some((wait, why)) = st
            .namespaces
            .get_mut(scope.namespace)
            .and_then(|ns| ns.wait(now))
        {
            return Admit::Hold(wait, why);
        }
        if f64::from(self.0.in_flight.load(Ordering::Relaxed)) >= st.in_flight_limit {
            return Admit::Wait(Duration::from_millis(10), Deferral::InFlight);
        }
        let namespace_epoch = st.namespaces.get_mut(scope.namespace).map(|ns| {
            ns.take();
            ns.epoch()
        });
        st.all.take();
        let epoch = st.all.epoch();
        drop(st);
        Admit::Go(self.permit(false, epoch, namespace_epoch))
    }

    /// Learns from the answer to a request admitted with `permit` for a write to `scope`.
    pub(crate) fn report(&self, permit: Permit, health: Health, scope: WriteScope<'_>) {
        if !self.0.enabled {
            return;
        }
        let now = Instant::now();
        let o = &self.0.options;
        let mut st = lock(&self.0.state);
        let answered = match health {
            Health::Answered => {
                st.all.answered(now, permit.epoch);
                if !st.objects.is_empty() {
                    st.hold_object(scope.object(), now + o.default_retry_after, false);
                }
                if let (Some(e), Some(ns)) = (
                    permit.namespace_epoch,
                    st.namespaces.get_mut(scope.namespace),
                ) {
                    ns.answered(now, e);
                }
                if st.in_flight_limit.is_finite() {
                    // No decrease yet (epoch 0): slow start.
                    st.in_flight_limit += if st.all.epoch() == 0 {
                        1.0
                    } else {
                        1.0 / st.in_flight_limit
                    };
                    if st.in_flight_limit > 4096.0 {
                        st.in_flight_limit = f64::INFINITY;
                    }
                }
                self.0.counters.rate(st.all.rate(), st.in_flight_limit);
                true
            }
            Health::Throttled(retry_after, limit) => {
                self.throttled(&mut st, now, &permit, retry_after, limit, scope);
                true
            }
            Health::Failed => false,
        };
        if answered {
            if st.breaker.answered() {
                self.0.counters.circuit(false);
                tracing::info!(budget = %self.name(), "apiserver answers again: circuit closed, writes resume");
            }
            return;
        }
        match st.breaker.failed(permit.probe, now, &o.breaker) {
            AfterFailure::Unchanged => {}
            AfterFailure::Reopened(interval) => {
                tracing::debug!(budget = %self.name(), next_probe = ?interval,
                    "probe write failed: circuit stays open");
            }
            AfterFailure::Opened(interval) => {
                self.0.counters.circuit(true);
                tracing::warn!(budget = %self.name(), failures = st.breaker.failures(), probe_in = ?interval,
                    "apiserver failing: circuit open, writes wait (events keep coalescing) until a probe succeeds");
            }
        }
    }

    /// Hands the law this budget just decided to its fleet, if it joined one.
    fn propose(&self, st: &mut State, now: Instant) {
        let (Some(joined), Some(law)) = (st.fleet.as_mut(), st.all.law()) else {
            return;
        };
        let law = fleet::to_shared_law(&law, now, SystemTime::now());
        joined.law = Some(law);
        joined.proposals.send_replace(Some(law));
        self.0.counters.fleet_law(true);
    }

    /// A 429: lowers and pauses what its limit covers.
    fn throttled(
        &self,
        st: &mut State,
        now: Instant,
        permit: &Permit,
        retry_after: Option<Duration>,
        limit: Limit,
        scope: WriteScope<'_>,
    ) {
        let o = &self.0.options;
        self.0.counters.throttled(limit);
        let scoped = match limit {
            Limit::Object => {
                if st.objects.len() >= MAX_SCOPES {
                    st.objects.retain(|_, until| *until > now);
                }
                (st.objects.len() < MAX_SCOPES).then(|| {
                    let d = retry_after
                        .unwrap_or(o.default_retry_after)
                        .min(o.max_retry_after);
                    st.hold_object(scope.object(), now + d, true);
                    Some(d)
                })
            }
            Limit::Namespace => {
                if !st.namespaces.contains_key(scope.namespace) && st.namespaces.len() >= MAX_SCOPES
                {
                    st.namespaces.retain(|_, t| !t.is_settled(now));
                }
                if st.namespaces.len() < MAX_SCOPES || st.namespaces.contains_key(scope.namespace) {
                    let all = &st.all;
                    let (ns, epoch) = match st.namespaces.get_mut(scope.namespace) {
                        Some(ns) => (ns, permit.namespace_epoch.unwrap_or(u64::MAX)),
                        None => {
                            let fresh = Throttle::scoped(all, now);
                            let e = fresh.epoch();
                            (
                                st.namespaces.entry(scope.namespace.into()).or_insert(fresh),
                                e,
                            )
                        }
                    };
                    Some(ns.throttled(
                        now,
                        epoch,
                        retry_after,
                        o.default_retry_after,
                        o.max_retry_after,
                    ))
                } else {
                    None
                }
            }
            Limit::Everything => None,
        };
        let pause = match scoped {
            Some(pause) => pause,
            // Everything, or a scope beyond the bound: the whole budget.
            None => {
                let before = st.all.epoch();
                let pause = st.all.throttled(
                    now,
                    permit.epoch,
                    retry_after,
                    o.default_retry_after,
                    o.max_retry_after,
                );
                if st.all.epoch() != before {
                    // Half the writes in flight now (this one's included), at least one.
                    let in_flight = f64::from(self.0.in_flight.load(Ordering::Relaxed));
                    st.in_flight_limit = (in_flight * 0.5).max(1.0);
                    self.propose(st, now);
                }
                pause
            }
        };
        self.0.counters.rate(st.all.rate(), st.in_flight_limit);
        if let Some(d) = pause {
            self.0.counters.paused();
            match st.pause_log.pause(now) {
                Some(0) => {
                    tracing::info!(budget = %self.name(), retry_after = ?d, limit = limit.as_str(),
                        "apiserver answered 429: pausing the writes its limit covers");
                }
                Some(more) => {
                    tracing::info!(budget = %self.name(), retry_after = ?d, limit = limit.as_str(),
                        since_last = more,
                        "apiserver answered 429: pausing the writes its limit covers ({more} more pauses since the last line)");
                }
                None => {
                    tracing::debug!(budget = %self.name(), retry_after = ?d, limit = limit.as_str(),
                        "apiserver answered 429: pausing the writes its limit covers");
                }
            }
        } else {
            tracing::debug!(budget = %self.name(), limit = limit.as_str(),
                rate = st.all.rate(), "apiserver answered 429: write rate lowered");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevents_core::SinkError;
    use kevents_core::Status;

    fn status(code: u16, retry_after: Option<u64>) -> SinkError {
        let mut s = Status::failure(code, "X", "x");
        s.retry_after = retry_after.map(Duration::from_secs);
        SinkError::Status(Box::new(s))
    }

    /// A write whose object hashes to its number.
    struct Obj(u64);

    impl Scoped for Obj {
        fn object_hash(&self) -> u64 {
            self.0
        }
    }

    const NS: WriteScope<'static> = WriteScope {
        namespace: "ns",
        write: &Obj(1),
    };
    /// An object's events (a `SourceAndObject` 429's scope).
    const OBJ: WriteScope<'static> = WriteScope {
        namespace: "objs",
        write: &Obj(7),
    };

    fn go(b: &WriteBudget, scope: WriteScope<'_>) -> Permit {
        match b.admit(scope) {
            Admit::Go(p) => p,
            w => panic!("expected a go, got {w:?}"),
        }
    }

    fn waits(b: &WriteBudget, scope: WriteScope<'_>) -> (Duration, Deferral) {
        match b.admit(scope) {
            Admit::Wait(d, why) => (d, why),
            w => panic!("expected a wait, got {w:?}"),
        }
    }

    /// A wait scoped to the write's namespace or object (others may go meanwhile).
    fn holds(b: &WriteBudget, scope: WriteScope<'_>) -> (Duration, Deferral) {
        match b.admit(scope) {
            Admit::Hold(d, why) => (d, why),
            w => panic!("expected a scoped wait, got {w:?}"),
        }
    }

    fn limited(limit: &str) -> Health {
        let message = format!("Too many requests: limit reached on type {limit} for key k");
        let mut s = Status::failure(429, "TooManyRequests", &message);
        s.retry_after = None;
        Health::of::<()>(&Err(SinkError::Status(Box::new(s))))
    }

    #[test]
    fn health_of_answers() {
        assert_eq!(Health::of::<()>(&Ok(())), Health::Answered);
        assert_eq!(
            Health::of::<()>(&Err(status(429, Some(3)))),
            Health::Throttled(Some(Duration::from_secs(3)), Limit::Everything)
        );
        assert_eq!(
            limited("Namespace"),
            Health::Throttled(None, Limit::Namespace)
        );
        assert_eq!(Health::of::<()>(&Err(status(503, None))), Health::Failed);
        assert_eq!(Health::of::<()>(&Err(status(422, None))), Health::Answered);
        assert_eq!(
            Health::of::<()>(&Err(SinkError::Transport("reset".into()))),
            Health::Failed
        );
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_follows_tokio_time() {
        let b = WriteBudget::new(
            "t",
            BudgetOptions {
                qps: 10,
                burst: 2,
                ..Default::default()
            },
        );
        drop(go(&b, NS));
        drop(go(&b, NS));
        let (d, why) = waits(&b, NS);
        assert_eq!(why, Deferral::Rate);
        assert!(d <= Duration::from_millis(100), "{d:?}");
        tokio::time::advance(d).await;
        drop(go(&b, NS));
    }

    #[tokio::test(start_paused = true)]
    async fn breaker_opens_probes_and_closes() {
        let b = WriteBudget::new(
            "t",
            BudgetOptions {
                qps: 0,
                ..Default::default()
            },
        );
        for _ in 0..5 {
            let p = go(&b, NS);
            assert!(!p.probe);
            b.report(p, Health::Failed, NS);
        }
        assert!(b.snapshot().circuit_open);
        assert_eq!(waits(&b, NS).1, Deferral::Circuit);
        tokio::time::advance(Duration::from_secs(1)).await;
        let probe = go(&b, NS);
        assert!(probe.probe);
        // One probe at a time.
        assert_eq!(waits(&b, NS).1, Deferral::Circuit);
        b.report(probe, Health::Failed, NS);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(waits(&b, NS).1, Deferral::Circuit);
        tokio::time::advance(Duration::from_secs(1)).await;
        let probe = go(&b, NS);
        assert!(probe.probe);
        b.report(probe, Health::Answered, NS);
        assert!(!go(&b, NS).probe);
        let s = b.snapshot();
        assert_eq!((s.circuit_opens, s.probes, s.circuit_open), (1, 2, false));
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_pauses_everything_it_covers() {
        let b = WriteBudget::new("t", BudgetOptions::default());
        let p = go(&b, NS);
        b.report(
            p,
            Health::Throttled(Some(Duration::from_secs(3)), Limit::Everything),
            NS,
        );
        assert_eq!(
            waits(&b, NS),
            (Duration::from_secs(3), Deferral::RetryAfter)
        );
        tokio::time::advance(Duration::from_secs(3)).await;
        drop(go(&b, NS));
        assert_eq!(b.snapshot().pauses, 1);
        assert!(matches!(WriteBudget::off().admit(NS), Admit::Go(_)));
    }

    /// Writes what is logged into a shared buffer.
    #[derive(Clone, Default)]
    struct Log(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Log {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// A storm of 429s with `Retry-After` writes one info line, then at most one per 10 s
    /// saying how many pauses it stands for (it wrote one per 429: 384 lines in 20 s).
    #[tokio::test(start_paused = true)]
    async fn a_storm_of_429s_is_summarised_in_the_log() {
        let log = Log::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let b = WriteBudget::new("t", BudgetOptions::default());
        let storm = |b: &WriteBudget, n: u32| {
            for i in 0..n {
                let p = b.permit(false, 0, None);
                let ra = Duration::from_millis(100 + u64::from(i));
                b.report(p, Health::Throttled(Some(ra), Limit::Everything), NS);
            }
        };
        // 400 pauses in 10 s, then one more.
        for _ in 0..20 {
            storm(&b, 20);
            tokio::time::advance(Duration::from_millis(500)).await;
        }
        storm(&b, 1);
        let bytes = log.0.lock().map(|b| b.clone()).unwrap_or_default();
        let text = String::from_utf8(bytes).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("429")).collect();
        assert_eq!(b.snapshot().pauses, 401);
        // At 0 s and 10 s: two lines; the second stands for the 399 in between.
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[1].contains("399 more pauses since the last line"),
            "{text}"
        );
    }

    /// A pinned budget keeps its rate and pauses `default_retry_after` after a 429 without
    /// `Retry-After` (the budget before adaptation).
    #[tokio::test(start_paused = true)]
    async fn a_pinned_budget_keeps_its_rate() {
        let b = WriteBudget::new(
            "t",
            BudgetOptions {
                adaptive: false,
                ..BudgetOptions::default()
            },
        );
        let p = go(&b, NS);
        b.report(p, limited("User"), NS);
        assert_eq!(
            waits(&b, NS),
            (Duration::from_secs(1), Deferral::RetryAfter)
        );
        assert_eq!(b.snapshot().rate, 200.0);
    }

    /// A 429 lowers the rate once per round trip and halves the writes in flight; accepted
    /// writes raise them again.
    #[tokio::test(start_paused = true)]
    async fn a_429_lowers_the_rate_and_the_writes_in_flight() {
        let b = WriteBudget::new("t", BudgetOptions::default());
        // Slow start: one write in flight, one more per answer.
        assert_eq!(b.snapshot().in_flight_limit, Some(1));
        let first = go(&b, NS);
        assert_eq!(waits(&b, NS).1, Deferral::InFlight);
        b.report(first, Health::Answered, NS);
        let two: Vec<Permit> = (0..2).map(|_| go(&b, NS)).collect();
        for p in two {
            b.report(p, Health::Answered, NS);
        }
        for _ in 0..5 {
            let p = go(&b, NS);
            b.report(p, Health::Answered, NS);
        }
        assert_eq!(b.snapshot().in_flight_limit, Some(9));
        let permits: Vec<Permit> = (0..8).map(|_| go(&b, NS)).collect();
        let mut permits = permits.into_iter();
        b.report(permits.next().unwrap(), limited("Server"), NS);
        let s = b.snapshot();
        assert_eq!(
            s.rate, 1.0,
            "the first 429: one write a second, then slow start"
        );
        assert_eq!(s.in_flight_limit, Some(4), "8 in flight: half");
        assert_eq!(s.throttled, 1);
        // The other 429s of that round do not lower it again.
        b.report(permits.next().unwrap(), limited("Server"), NS);
        assert_eq!(b.snapshot().rate, 1.0);
        // 6 still in flight, limit 4: the next write waits for one to end (once slow start
        // has a token).
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(waits(&b, NS).1, Deferral::InFlight);
        for p in permits.by_ref().take(3) {
            b.report(p, Health::Answered, NS);
        }
        drop(go(&b, NS));
        tokio::time::advance(Duration::from_secs(2)).await;
        for p in permits {
            b.report(p, Health::Answered, NS);
        }
        assert!(b.snapshot().rate > 1.0, "slow start");
    }

    /// A `Namespace` 429 pauses and lowers that namespace only; a `SourceAndObject` one
    /// that object only; other namespaces and objects go on at the budget's rate.
    #[tokio::test(start_paused = true)]
    async fn scoped_limits_pause_only_what_they_cover() {
        let b = WriteBudget::new("t", BudgetOptions::default());
        let other_ns = WriteScope {
            namespace: "other",
            write: &Obj(2),
        };
        let p = go(&b, NS);
        b.report(p, limited("Namespace"), NS);
        // The namespace's own bucket is empty: its next write waits; the other goes.
        assert_eq!(holds(&b, NS).1, Deferral::Rate);
        drop(go(&b, other_ns));
        assert_eq!(b.snapshot().rate, 200.0, "the budget's rate is unchanged");

        let obj = OBJ;
        let same_ns_other_object = WriteScope {
            namespace: "objs",
            write: &Obj(8),
        };
        let p = go(&b, obj);
        b.report(p, limited("SourceAndObject"), obj);
        assert_eq!(
            holds(&b, obj),
            (Duration::from_secs(1), Deferral::RetryAfter)
        );
        drop(go(&b, same_ns_other_object));
        tokio::time::advance(Duration::from_secs(1)).await;
        drop(go(&b, obj));
        assert_eq!(b.snapshot().throttled, 2);
    }

    /// When a `SourceAndObject` pause ends, one write of the object goes and the object's
    /// others wait: refused, the object pauses again; accepted, the next goes a second
    /// later, one a second while they keep coming, and the object is free once none came
    /// for a second. (All of them at once met the refilled bucket's one token and 429s
    /// again: under `SourceAndObject` 1/5 two of every object's writes were refused.)
    #[tokio::test(start_paused = true)]
    async fn a_paused_object_resumes_one_write_at_a_time() {
        let b = WriteBudget::new("t", BudgetOptions::default());
        let obj = OBJ;
        let p = go(&b, obj);
        b.report(p, limited("SourceAndObject"), obj);
        tokio::time::advance(Duration::from_secs(1)).await;
        let first = go(&b, obj);
        assert_eq!(holds(&b, obj).1, Deferral::RetryAfter, "the others wait");
        b.report(first, limited("SourceAndObject"), obj);
        assert_eq!(
            holds(&b, obj),
            (Duration::from_secs(1), Deferral::RetryAfter),
            "refused: paused again"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let second = go(&b, obj);
        assert_eq!(holds(&b, obj).1, Deferral::RetryAfter);
        tokio::time::advance(Duration::from_millis(10)).await;
        b.report(second, Health::Answered, obj);
        assert_eq!(
            holds(&b, obj),
            (Duration::from_secs(1), Deferral::RetryAfter),
            "accepted: the next a second later"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let third = go(&b, obj);
        b.report(third, Health::Answered, obj);
        // None for a second after the hold: the object is free.
        tokio::time::advance(Duration::from_secs(2)).await;
        drop(go(&b, obj));
        drop(go(&b, obj));
    }

    /// A budget in a fleet: a 429 of the whole budget hands the law it moves to to the
    /// member (the latest only), a `Namespace` one does not; the member's `adopt` makes it
    /// follow another's newer law and ignores an older one; the counters say both.
    #[tokio::test(start_paused = true)]
    async fn a_budget_in_a_fleet_proposes_and_adopts_laws() {
        use kevents_core::fleet::{FleetLaw, FleetMember, FleetPhase};
        let b = WriteBudget::new("t", BudgetOptions::default());
        let mut member = b.join_fleet();
        let p = go(&b, NS);
        b.report(p, Health::Throttled(None, Limit::Everything), NS);
        let law = tokio::time::timeout(Duration::from_secs(1), member.proposal())
            .await
            .expect("a proposal")
            .expect("the budget lives");
        // Joined, it was in slow start from one write a second; the 429 came within its
        // first doubling with nothing accepted: slow start again from 0.36 of it.
        assert_eq!((law.epoch, law.phase), (1, FleetPhase::SlowStart));
        assert!((law.from - 0.36).abs() < 0.01, "{law:?}");
        tokio::time::sleep(Duration::from_secs(1)).await;
        let p = go(&b, OBJ);
        b.report(p, Health::Throttled(None, Limit::Namespace), OBJ);
        assert!(
            tokio::time::timeout(Duration::from_millis(10), member.proposal())
                .await
                .is_err(),
            "a namespace's 429 stays the budget's own"
        );
        let since = FleetLaw::micros_of(SystemTime::now());
        let newer = FleetLaw {
            epoch: 5,
            phase: FleetPhase::Adapted,
            from: 30.0,
            since_micros: since,
        };
        member.adopt(&newer);
        assert!(
            (b.snapshot().rate - 30.0).abs() < 0.01,
            "{}",
            b.snapshot().rate
        );
        member.adopt(&FleetLaw {
            epoch: 4,
            from: 3.0,
            ..newer
        });
        member.adopt(&newer);
        assert!(
            (b.snapshot().rate - 30.0).abs() < 0.01,
            "older and same ignored"
        );
        let s = b.snapshot();
        assert_eq!((s.fleet_laws_proposed, s.fleet_laws_adopted), (1, 1));
        drop(b);
        assert_eq!(member.proposal().await, None, "the budget is gone");
    }
}
