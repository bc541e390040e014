//! The spam filter: one token bucket per spam key (client-go
//! `EventSourceObjectSpamFilter`), each a `governor` GCRA limiter, kept in an LRU.
//!
//! GCRA with period `1/qps` and burst `b` makes the same single-token decisions as
//! client-go's `x/time/rate` bucket: it starts full, never holds more than `b` tokens and
//! refills one token every `1/qps` seconds (299.9999927 s for client-go's float32 `1/300`).

use std::time::Duration;

use governor::clock::{Clock as _, FakeRelativeClock};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use super::cache::BoundedCache;
use crate::time::Time;

type Bucket =
    RateLimiter<NotKeyed, InMemoryState, FakeRelativeClock, NoOpMiddleware<governor::nanos::Nanos>>;

/// What a bucket does, derived from burst and qps as `x/time/rate` would behave.
#[derive(Debug, Clone, Copy)]
enum Policy {
    /// A real token bucket.
    Limited(Quota),
    /// Every occurrence passes (infinite or negative qps keeps the bucket full).
    AllowAll,
    /// No occurrence passes (burst < 1: a bucket that never holds a token).
    RejectAll,
}

// Periods beyond this are treated as "never refills within any realistic run" (governor keeps
// time in u64 nanoseconds; 100 years keeps every sum far from overflow).
const MAX_PERIOD: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
// Largest `period * burst` handed to governor (about 146 years, a quarter of u64 nanoseconds).
const MAX_BUCKET_SPAN_NANOS: u64 = u64::MAX / 4;

pub(crate) struct SpamFilter {
    policy: Policy,
    buckets: BoundedCache<Bucket>,
    // governor reads time from a clock it owns; we move this shared clock to the correlator's
    // "now" right before each check, so the correlator's clock is read exactly once per check.
    clock: FakeRelativeClock,
    clock_at: u64,
    base: Option<i64>,
}

impl SpamFilter {
    pub(crate) fn new(burst: i32, qps: f32, lru_size: i64) -> Self {
        let policy = if burst < 1 {
            Policy::RejectAll
        } else if qps.is_nan() || qps <= 0.0 || qps.is_infinite() {
            // NaN falls here too: x/time/rate with a NaN limit never refuses a full bucket
            // refill either, and "allow" is the harmless choice.
            Policy::AllowAll
        } else {
            let secs = 1.0 / f64::from(qps);
            let period = Duration::try_from_secs_f64(secs)
                .unwrap_or(MAX_PERIOD)
                .min(MAX_PERIOD);
            let period = period.max(Duration::from_nanos(1));
            // governor keeps `period * burst` in u64 nanoseconds; a huge burst (2^30 to switch
            // the filter off) would overflow it. Past MAX_BUCKET_SPAN the bucket holds more
            // tokens than can refill in 146 years, so capping the burst there changes nothing
            // observable within a process's lifetime but the tokens of the first burst.
            let period_ns = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX).max(1);
            let max_burst = (MAX_BUCKET_SPAN_NANOS / period_ns).clamp(1, u64::from(u32::MAX));
            let burst = u64::from(burst.unsigned_abs()).min(max_burst);
            match (
                Quota::with_period(period),
                u32::try_from(burst)
                    .ok()
                    .and_then(std::num::NonZeroU32::new),
            ) {
                (Some(q), Some(b)) => Policy::Limited(q.allow_burst(b)),
                _ => Policy::AllowAll,
            }
        };
        SpamFilter {
            policy,
            buckets: BoundedCache::new(lru_size),
            clock: FakeRelativeClock::default(),
            clock_at: 0,
            base: None,
        }
    }

    /// Takes a token for `key` at `now`; `true` means the occurrence is spam (no token).
    /// The key is added to (or refreshed in) the LRU either way, as client-go does.
    pub(crate) fn is_spam(&mut self, key: &[u8], now: Time) -> bool {
        let quota = match self.policy {
            Policy::AllowAll => return self.touch(key, false),
            Policy::RejectAll => return self.touch(key, true),
            Policy::Limited(q) => q,
        };
        self.move_clock(now);
        if let Some(bucket) = self.buckets.get_mut(key) {
            return bucket.check().is_err();
        }
        let bucket = RateLimiter::direct_with_clock(quota, self.clock.clone());
        let spam = bucket.check().is_err();
        self.buckets.insert(key, bucket);
        spam
    }

    fn touch(&mut self, key: &[u8], spam: bool) -> bool {
        // Keep LRU bookkeeping identical even when buckets are trivial.
        if self.buckets.get_mut(key).is_none() {
            let bucket = RateLimiter::direct_with_clock(
                Quota::per_second(std::num::NonZeroU32::MIN),
                self.clock.clone(),
            );
            self.buckets.insert(key, bucket);
        }
        spam
    }

    fn move_clock(&mut self, now: Time) {
        let base = *self.base.get_or_insert(now.unix_nanos());
        // Time before the first reading, or a clock that went backwards, does not move the
        // buckets (x/time/rate also never lets time run backwards).
        let target = u64::try_from(now.unix_nanos().saturating_sub(base)).unwrap_or(0);
        if target > self.clock_at {
            self.clock
                .advance(Duration::from_nanos(target - self.clock_at));
            self.clock_at = target;
        }
        debug_assert_eq!(u64::from(self.clock.now()), self.clock_at);
    }

    pub(crate) fn len(&self) -> usize {
        self.buckets.len()
    }

    pub(crate) fn evictions(&self) -> u64 {
        self.buckets.evictions()
    }
}
