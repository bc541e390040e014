//! [`Backoff`]: the pause after failures in a row, jittered and doubling, as client-go's
//! reflector and the fleet's Lease link wait between tries; with when to log at warn.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// A uniform random number in `[0, 1)` (std's random hasher keys; no crate needed).
pub(crate) fn unit_random() -> f64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Failures in a row: each pause is between half and all of `first` doubled once per earlier
/// failure, at most `max`; a refusal of the identity (401/403) waits `forbidden` instead (its
/// rights will not come back soon). Warns at the first failure and every tenth.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    first: Duration,
    max: Duration,
    forbidden: Duration,
    failures: u32,
}

impl Backoff {
    /// Pauses from `first` doubling to `max`; a 401/403 waits `max` (see
    /// [`Backoff::with_forbidden`]).
    pub(crate) fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max: max.max(first),
            forbidden: max.max(first),
            failures: 0,
        }
    }

    /// The same with another pause after a 401/403.
    pub(crate) fn with_forbidden(mut self, forbidden: Duration) -> Self {
        self.forbidden = forbidden;
        self
    }

    /// One more failure: the pause before the next try, and whether to log it at warn.
    pub(crate) fn failed(&mut self) -> (Duration, bool) {
        self.failures = self.failures.saturating_add(1);
        let mut full = self.first;
        for _ in 1..self.failures.min(32) {
            full = full.saturating_mul(2);
            if full >= self.max {
                break;
            }
        }
        let full = full.min(self.max);
        let pause = full / 2 + (full / 2).mul_f64(unit_random());
        (pause, self.warns())
    }

    /// One more 401/403: the slow pause (up to a tenth more, jittered), and whether to log it
    /// at warn.
    pub(crate) fn forbidden(&mut self) -> (Duration, bool) {
        self.failures = self.failures.saturating_add(1);
        let pause = self.forbidden + self.forbidden.mul_f64(0.1 * unit_random());
        (pause, self.warns())
    }

    /// Failures in a row so far.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    fn warns(&self) -> bool {
        self.failures == 1 || self.failures.is_multiple_of(10)
    }

    /// A success: the next failure starts from `first` again.
    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_max_jittered_and_warns_first_and_every_tenth() {
        let (first, max) = (Duration::from_secs(1), Duration::from_secs(30));
        let mut b = Backoff::new(first, max).with_forbidden(Duration::from_secs(60));
        let mut warned = Vec::new();
        for n in 1..=20u32 {
            let (pause, warn) = b.failed();
            let full = (first * 2u32.pow((n - 1).min(5))).min(max);
            assert!(pause >= full / 2 && pause <= full, "{n}: {pause:?}");
            if warn {
                warned.push(n);
            }
        }
        assert_eq!(warned, [1, 10, 20]);
        b.reset();
        assert!(b.failed().0 <= first);
        let (pause, _) = b.forbidden();
        assert!(pause >= Duration::from_secs(60) && pause <= Duration::from_secs(66));
    }

    #[test]
    fn unit_random_is_in_the_unit_interval() {
        for _ in 0..1000 {
            let r = unit_random();
            assert!((0.0..1.0).contains(&r));
        }
    }
}
