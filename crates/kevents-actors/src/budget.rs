//! The write budget of one apiserver ([`WriteBudget`]): a token bucket (governor) every sink
//! writing to that apiserver draws from, the pause a `429 Too Many Requests` with
//! `Retry-After` imposes on all of them, and a circuit breaker that stops sending after
//! consecutive transport errors or 5xx answers and probes until the server answers again.
//!
//! The budget only decides *when* a request may be made; the keyed writer engine
//! (`writer/`) asks it before every attempt and waits on a timer (never blocking the actor)
//! while it says no. Writes waiting for it have not started, so newer results for their
//! events keep replacing them (coalescing): a throttled pipeline sends fewer, fresher writes.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use kevents_core::SinkError;
use tokio::time::Instant;

use crate::stats::BudgetSnapshot;
use crate::telemetry::{BudgetCounters, Deferral};

/// Writes per second of the default budget.
pub const DEFAULT_BUDGET_QPS: u32 = 200;
/// Burst of the default budget.
pub const DEFAULT_BUDGET_BURST: u32 = 1000;

/// The circuit breaker of a [`WriteBudget`].
///
/// ```
/// use kevents_actors::BreakerOptions;
/// use std::time::Duration;
/// let b = BreakerOptions::default();
/// assert_eq!((b.failures, b.probe_interval, b.max_probe_interval),
///            (5, Duration::from_secs(1), Duration::from_secs(30)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerOptions {
    /// Consecutive failed requests (transport errors, timeouts, 5xx) that open the circuit;
    /// 0 disables the breaker.
    pub failures: u32,
    /// Wait before the first probe once the circuit is open; doubled after each failed probe.
    pub probe_interval: Duration,
    /// Upper bound of the wait between probes.
    pub max_probe_interval: Duration,
}

impl Default for BreakerOptions {
    fn default() -> Self {
        BreakerOptions {
            failures: 5,
            probe_interval: Duration::from_secs(1),
            max_probe_interval: Duration::from_secs(30),
        }
    }
}

/// Options of a [`WriteBudget`].
///
/// ```
/// use kevents_actors::{BudgetOptions, DEFAULT_BUDGET_BURST, DEFAULT_BUDGET_QPS};
/// let o = BudgetOptions::default();
/// assert_eq!((o.qps, o.burst), (DEFAULT_BUDGET_QPS, DEFAULT_BUDGET_BURST));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetOptions {
    /// Sustained requests per second (0: no rate limit).
    pub qps: u32,
    /// Requests that may be made at once above the rate (at least 1).
    pub burst: u32,
    /// Pause of every write after a 429 without `Retry-After`.
    pub default_retry_after: Duration,
    /// Longest pause a `Retry-After` imposes.
    pub max_retry_after: Duration,
    /// The circuit breaker.
    pub breaker: BreakerOptions,
}

impl Default for BudgetOptions {
    fn default() -> Self {
        BudgetOptions {
            qps: DEFAULT_BUDGET_QPS,
            burst: DEFAULT_BUDGET_BURST,
            default_retry_after: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(60),
            breaker: BreakerOptions::default(),
        }
    }
}

/// governor's clock over tokio's (so `tokio::time::pause()` drives the bucket too): the time
/// since the budget was made.
#[derive(Debug, Clone)]
struct TokioTime {
    base: Instant,
}

impl Clock for TokioTime {
    type Instant = Duration;

    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.base)
    }
}

type Bucket = RateLimiter<NotKeyed, InMemoryState, TokioTime, NoOpMiddleware<Duration>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Circuit {
    Closed,
    /// No request until `next_probe`.
    Open {
        next_probe: Instant,
        interval: Duration,
    },
    /// One probe in flight since `since`.
    Probing {
        since: Instant,
        interval: Duration,
    },
}

#[derive(Debug)]
struct State {
    paused_until: Option<Instant>,
    failures: u32,
    circuit: Circuit,
}

struct Inner {
    enabled: bool,
    options: BudgetOptions,
    bucket: Option<(Bucket, TokioTime)>,
    state: Mutex<State>,
    counters: BudgetCounters,
}

/// Whether an attempt may start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Make the request; `probe` when it is the circuit's probe.
    Go { probe: bool },
    /// Ask again after this long.
    Wait(Duration, Deferral),
}

/// What a request's answer says about the apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Health {
    /// It answered (success, or an error that is about the request: 4xx other than 429).
    Answered,
    /// It did not answer, or answered 5xx.
    Failed,
    /// 429, with its `Retry-After`.
    Throttled(Option<Duration>),
}

impl Health {
    /// Classifies one request's result.
    pub(crate) fn of<T>(result: &Result<T, SinkError>) -> Health {
        match result {
            Ok(_) => Health::Answered,
            Err(e @ SinkError::Status(s)) if s.code == 429 => Health::Throttled(e.retry_after()),
            Err(SinkError::Status(s)) if s.code >= 500 => Health::Failed,
            Err(SinkError::Transport(_) | SinkError::Timeout(_)) => Health::Failed,
            Err(_) => Health::Answered,
        }
    }
}

/// The write budget of one apiserver, shared by every sink (core/v1 and events.k8s.io/v1
/// chains, of one pipeline or several) that writes to it: clone the handle and give it to
/// each ([`SinkOptions::budget`](crate::SinkOptions::budget),
/// [`SeriesSinkOptions::budget`](crate::SeriesSinkOptions::budget),
/// [`PipelineBuilder::write_budget`](crate::PipelineBuilder::write_budget)). Without one, each
/// pipeline builder makes one with [`BudgetOptions::default`], named `default`, shared by
/// its chains.
///
/// * **Rate**: a token bucket of `qps` requests per second and `burst` at once (one token per
///   attempt, retries included). A write that finds no token waits (counted
///   `deferred_rate`) and keeps absorbing newer results for its event.
/// * **429**: an answer `429` pauses every write of the budget until its `Retry-After`
///   (within `max_retry_after`; `default_retry_after` without one), not only the write that
///   got it.
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
        let bucket = NonZeroU32::new(options.qps).map(|qps| {
            let burst = NonZeroU32::new(options.burst).unwrap_or(NonZeroU32::MIN);
            let clock = TokioTime {
                base: Instant::now(),
            };
            let limiter = RateLimiter::direct_with_clock(
                Quota::per_second(qps).allow_burst(burst),
                clock.clone(),
            );
            (limiter, clock)
        });
        Self::assemble(BudgetCounters::new(name), true, options, bucket)
    }

    /// No budget: no rate limit, no pause after 429, no circuit breaker (each write follows
    /// its own retry policy only, as before budgets existed).
    pub fn off() -> Self {
        Self::assemble(
            BudgetCounters::detached("off"),
            false,
            BudgetOptions::default(),
            None,
        )
    }

    fn assemble(
        counters: BudgetCounters,
        enabled: bool,
        options: BudgetOptions,
        bucket: Option<(Bucket, TokioTime)>,
    ) -> Self {
        WriteBudget(Arc::new(Inner {
            enabled,
            options,
            bucket,
            state: Mutex::new(State {
                paused_until: None,
                failures: 0,
                circuit: Circuit::Closed,
            }),
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

    /// May a request start now? A `Go` uses one token (or is the circuit's probe).
    pub(crate) fn admit(&self) -> Admit {
        if !self.0.enabled {
            return Admit::Go { probe: false };
        }
        let now = Instant::now();
        let max_probe = self.0.options.breaker.max_probe_interval;
        {
            let mut st = lock(&self.0.state);
            match st.circuit {
                Circuit::Closed => {}
                Circuit::Open {
                    next_probe,
                    interval,
                } => {
                    if now < next_probe {
                        return Admit::Wait(next_probe - now, Deferral::Circuit);
                    }
                    st.circuit = Circuit::Probing {
                        since: now,
                        interval,
                    };
                    self.0.counters.probe();
                    tracing::debug!(budget = %self.name(), "circuit open: sending a probe write");
                    return Admit::Go { probe: true };
                }
                Circuit::Probing { since, interval } => {
                    // A probe that never reports (its sink stopped) is replaced after a while.
                    let stale = max_probe.max(interval);
                    if now.saturating_duration_since(since) >= stale {
                        st.circuit = Circuit::Probing {
                            since: now,
                            interval,
                        };
                        self.0.counters.probe();
                        return Admit::Go { probe: true };
                    }
                    return Admit::Wait(
                        interval.min(Duration::from_millis(100)),
                        Deferral::Circuit,
                    );
                }
            }
            if let Some(until) = st.paused_until {
                if now < until {
                    return Admit::Wait(until - now, Deferral::RetryAfter);
                }
                st.paused_until = None;
            }
        }
        match &self.0.bucket {
            None => Admit::Go { probe: false },
            Some((bucket, clock)) => match bucket.check() {
                Ok(()) => Admit::Go { probe: false },
                Err(not_until) => {
                    let wait = not_until.wait_time_from(clock.now());
                    Admit::Wait(wait.max(Duration::from_millis(1)), Deferral::Rate)
                }
            },
        }
    }

    /// Learns from one request's answer (`probe`: it was admitted as the circuit's probe).
    pub(crate) fn report(&self, probe: bool, health: Health) {
        if !self.0.enabled {
            return;
        }
        let now = Instant::now();
        let o = &self.0.options;
        let mut st = lock(&self.0.state);
        let answered = match health {
            Health::Answered => true,
            Health::Throttled(retry_after) => {
                let d = retry_after
                    .unwrap_or(o.default_retry_after)
                    .min(o.max_retry_after);
                let until = now + d;
                if st.paused_until.is_none_or(|u| u < until) {
                    st.paused_until = Some(until);
                    self.0.counters.paused();
                    tracing::info!(budget = %self.name(), retry_after = ?d,
                        "apiserver answered 429: pausing every write of this budget");
                }
                true
            }
            Health::Failed => false,
        };
        if answered {
            st.failures = 0;
            if st.circuit != Circuit::Closed {
                st.circuit = Circuit::Closed;
                self.0.counters.circuit(false);
                tracing::info!(budget = %self.name(), "apiserver answers again: circuit closed, writes resume");
            }
            return;
        }
        st.failures = st.failures.saturating_add(1);
        match st.circuit {
            Circuit::Probing { interval, .. } if probe => {
                let interval = (interval * 2).min(o.breaker.max_probe_interval);
                st.circuit = Circuit::Open {
                    next_probe: now + interval,
                    interval,
                };
                tracing::debug!(budget = %self.name(), next_probe = ?interval,
                    "probe write failed: circuit stays open");
            }
            Circuit::Closed if o.breaker.failures > 0 && st.failures >= o.breaker.failures => {
                let interval = o.breaker.probe_interval.min(o.breaker.max_probe_interval);
                st.circuit = Circuit::Open {
                    next_probe: now + interval,
                    interval,
                };
                self.0.counters.circuit(true);
                tracing::warn!(budget = %self.name(), failures = st.failures, probe_in = ?interval,
                    "apiserver failing: circuit open, writes wait (events keep coalescing) until a probe succeeds");
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevents_core::Status;

    fn status(code: u16, retry_after: Option<u64>) -> SinkError {
        let mut s = Status::failure(code, "X", "x");
        s.retry_after = retry_after.map(Duration::from_secs);
        SinkError::Status(Box::new(s))
    }

    #[test]
    fn health_of_answers() {
        assert_eq!(Health::of::<()>(&Ok(())), Health::Answered);
        assert_eq!(
            Health::of::<()>(&Err(status(429, Some(3)))),
            Health::Throttled(Some(Duration::from_secs(3)))
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
        assert_eq!(b.admit(), Admit::Go { probe: false });
        assert_eq!(b.admit(), Admit::Go { probe: false });
        let Admit::Wait(d, Deferral::Rate) = b.admit() else {
            panic!("expected a wait");
        };
        assert!(d <= Duration::from_millis(100), "{d:?}");
        tokio::time::advance(d).await;
        assert_eq!(b.admit(), Admit::Go { probe: false });
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
            assert_eq!(b.admit(), Admit::Go { probe: false });
            b.report(false, Health::Failed);
        }
        assert!(b.snapshot().circuit_open);
        assert!(matches!(b.admit(), Admit::Wait(_, Deferral::Circuit)));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(b.admit(), Admit::Go { probe: true });
        // One probe at a time.
        assert!(matches!(b.admit(), Admit::Wait(_, Deferral::Circuit)));
        b.report(true, Health::Failed);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(matches!(b.admit(), Admit::Wait(_, Deferral::Circuit)));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(b.admit(), Admit::Go { probe: true });
        b.report(true, Health::Answered);
        assert_eq!(b.admit(), Admit::Go { probe: false });
        let s = b.snapshot();
        assert_eq!((s.circuit_opens, s.probes, s.circuit_open), (1, 2, false));
    }

    #[tokio::test(start_paused = true)]
    async fn throttled_pauses_everything() {
        let b = WriteBudget::new("t", BudgetOptions::default());
        b.report(false, Health::Throttled(Some(Duration::from_secs(3))));
        assert_eq!(
            b.admit(),
            Admit::Wait(Duration::from_secs(3), Deferral::RetryAfter)
        );
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(b.admit(), Admit::Go { probe: false });
        assert_eq!(b.snapshot().pauses, 1);
        assert_eq!(WriteBudget::off().admit(), Admit::Go { probe: false });
    }
}
