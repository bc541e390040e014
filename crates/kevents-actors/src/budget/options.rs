//! What a [`WriteBudget`](super::WriteBudget) is made with: its rate, how it adapts, how
//! long a 429 may pause it, and its circuit breaker.

use std::time::Duration;

/// Writes per second of the default budget.
pub const DEFAULT_BUDGET_QPS: u32 = 200;
/// Burst of the default budget.
pub const DEFAULT_BUDGET_BURST: u32 = 1000;

/// The circuit breaker of a [`WriteBudget`](super::WriteBudget).
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

/// Options of a [`WriteBudget`](super::WriteBudget).
///
/// ```
/// use kevents_actors::{BudgetOptions, DEFAULT_BUDGET_BURST, DEFAULT_BUDGET_QPS};
/// let o = BudgetOptions::default();
/// assert_eq!((o.qps, o.burst, o.adaptive), (DEFAULT_BUDGET_QPS, DEFAULT_BUDGET_BURST, true));
/// // Pinned to a known EventRateLimit setting (Namespace qps 50, burst 100): a little
/// // below it, and no adaptation.
/// let pinned = BudgetOptions { qps: 45, burst: 90, adaptive: false, ..BudgetOptions::default() };
/// # let _ = pinned;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetOptions {
    /// Sustained requests per second at most (0: no rate limit, and no adaptation).
    pub qps: u32,
    /// Requests that may be made at once above the rate (at least 1).
    pub burst: u32,
    /// Adapt to 429s (the default): lower the rate and the writes in flight on a 429,
    /// raise them slowly while writes are accepted, never above `qps` (see
    /// [`WriteBudget`](super::WriteBudget)). `false` pins the rate at `qps`.
    pub adaptive: bool,
    /// Pause after a 429 without `Retry-After` when not adaptive (adaptive: the emptied
    /// bucket paces the next write), and of a source and object after a `SourceAndObject`
    /// 429.
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
            adaptive: true,
            default_retry_after: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(60),
            breaker: BreakerOptions::default(),
        }
    }
}
