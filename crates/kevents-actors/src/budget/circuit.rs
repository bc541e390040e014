//! The circuit breaker of a budget: after consecutive failed requests (transport errors,
//! timeouts, 5xx) no request is made but one probe at a time, at growing intervals, until
//! the server answers again.

use std::time::Duration;

use tokio::time::Instant;

use super::options::BreakerOptions;

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

/// What the breaker says of a request that asks to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gate {
    /// The circuit is closed: the budget's other limits decide.
    Closed,
    /// Send it as the circuit's probe.
    Probe,
    /// Ask again after this long.
    Wait(Duration),
}

/// What a failed request did to the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterFailure {
    /// Nothing changed (not enough failures yet, or the circuit was already open).
    Unchanged,
    /// The circuit opened; the first probe goes after this long.
    Opened(Duration),
    /// The probe failed; the next goes after this long.
    Reopened(Duration),
}

/// Consecutive failures and the circuit's state.
#[derive(Debug)]
pub(super) struct Breaker {
    failures: u32,
    circuit: Circuit,
}

impl Breaker {
    pub(super) fn new() -> Self {
        Breaker {
            failures: 0,
            circuit: Circuit::Closed,
        }
    }

    /// May a request start now? `max_probe` bounds how long a probe that never reports (its
    /// sink stopped) holds the circuit.
    pub(super) fn gate(&mut self, now: Instant, max_probe: Duration) -> Gate {
        match self.circuit {
            Circuit::Closed => Gate::Closed,
            Circuit::Open {
                next_probe,
                interval,
            } => {
                if now < next_probe {
                    return Gate::Wait(next_probe - now);
                }
                self.circuit = Circuit::Probing {
                    since: now,
                    interval,
                };
                Gate::Probe
            }
            Circuit::Probing { since, interval } => {
                if now.saturating_duration_since(since) >= max_probe.max(interval) {
                    self.circuit = Circuit::Probing {
                        since: now,
                        interval,
                    };
                    return Gate::Probe;
                }
                Gate::Wait(interval.min(Duration::from_millis(100)))
            }
        }
    }

    /// The server answered: whether that closed an open circuit.
    pub(super) fn answered(&mut self) -> bool {
        self.failures = 0;
        let was_open = self.circuit != Circuit::Closed;
        self.circuit = Circuit::Closed;
        was_open
    }

    /// A request failed (`probe`: it was the circuit's probe).
    pub(super) fn failed(&mut self, probe: bool, now: Instant, o: &BreakerOptions) -> AfterFailure {
        self.failures = self.failures.saturating_add(1);
        match self.circuit {
            Circuit::Probing { interval, .. } if probe => {
                let interval = (interval * 2).min(o.max_probe_interval);
                self.circuit = Circuit::Open {
                    next_probe: now + interval,
                    interval,
                };
                AfterFailure::Reopened(interval)
            }
            Circuit::Closed if o.failures > 0 && self.failures >= o.failures => {
                let interval = o.probe_interval.min(o.max_probe_interval);
                self.circuit = Circuit::Open {
                    next_probe: now + interval,
                    interval,
                };
                AfterFailure::Opened(interval)
            }
            _ => AfterFailure::Unchanged,
        }
    }

    /// Consecutive failures so far.
    pub(super) fn failures(&self) -> u32 {
        self.failures
    }
}
