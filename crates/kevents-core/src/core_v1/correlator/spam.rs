//! The spam filter: one token bucket per spam key (client-go
//! `EventSourceObjectSpamFilter`), each a `governor` GCRA limiter, kept in an LRU.
//!
//! GCRA with period `1/qps` and burst `b` makes the same single-token decisions as
//! client-go's `x/time/rate` bucket: it starts full, never holds more than `b` tokens and
//! refills one token every `1/qps` seconds (299.9999927 s for client-go's float32 `1/300`).
//! That is client-go 1.20's arithmetic ([`TokenBucket::Legacy`]); client-go 1.36's
//! `golang.org/x/time` 0.16 computes in doubles and decides differently within tens of
//! nanoseconds of a token boundary, so [`TokenBucket::XTimeRate016`] repeats its operations.

use std::time::Duration;

use super::cache::BoundedCache;
use super::hash::KeyHasher;
use crate::profile::TokenBucket;
use crate::time::Time;

/// One token bucket: governor's GCRA state for a direct (unkeyed) limiter, kept inline
/// instead of a `governor::RateLimiter` per key (which holds an atomic state and a clock
/// handle, allocated per bucket): the same arithmetic, in the same order (`governor`
/// 0.10 `Gcra::test_and_update`), without an allocation or an atomic per check.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// The filter's clock reading when the bucket was created (governor's `start`).
    start: u64,
    /// Theoretical arrival time relative to `start`; 0 = never checked (governor's empty
    /// state, which a successful check never writes back: it stores at least `t`).
    tat: u64,
}

/// governor's `Gcra`: `t` = one cell's period (at least 1 ns), `tau` = `t * (burst - 1)`.
#[derive(Debug, Clone, Copy)]
struct Gcra {
    t: u64,
    tau: u64,
}

impl Gcra {
    fn new(period: Duration, burst: std::num::NonZeroU32) -> Self {
        let t = u64::try_from(period.as_nanos()).unwrap_or(u64::MAX).max(1);
        Gcra {
            t,
            tau: t * u64::from(burst.get() - 1),
        }
    }

    /// `true`: a cell conforms (a token was taken) at `now`.
    fn check(self, bucket: &mut Bucket, now: u64) -> bool {
        let t0 = now.saturating_sub(bucket.start);
        let tat = if bucket.tat == 0 { t0 } else { bucket.tat };
        if t0 < tat.saturating_sub(self.tau) {
            return false;
        }
        bucket.tat = tat.max(t0) + self.t;
        true
    }
}

/// `golang.org/x/time/rate` 0.16's `Limiter` state (`tokens`, `last`) for one key.
#[derive(Debug, Clone, Copy)]
struct RateBucket {
    tokens: f64,
    /// Unix nanoseconds of the last accepted call; `None`: Go's zero `time.Time`, so the
    /// first call finds a full bucket.
    last: Option<i64>,
}

/// `rate.Limiter.AllowN(now, 1)` of x/time 0.16 with limit `limit` and burst `burst`.
#[derive(Debug, Clone, Copy)]
struct Rate {
    limit: f64,
    burst: f64,
}

impl Rate {
    /// `true`: a token was taken at `now` (Unix nanoseconds).
    fn allow(self, bucket: &mut RateBucket, now: i64) -> bool {
        // advance(): elapsed time since the last accepted call, never negative.
        let last = bucket.last.map_or(now, |l| l.min(now));
        let mut tokens = if bucket.last.is_none() {
            self.burst
        } else {
            let d = now.saturating_sub(last);
            // d.Seconds() * limit, as Go computes d.Seconds().
            let secs = (d / 1_000_000_000) as f64 + (d % 1_000_000_000) as f64 / 1e9;
            (bucket.tokens + secs * self.limit).min(self.burst)
        };
        tokens -= 1.0;
        // durationFromTokens(-tokens) <= 0: time.Duration truncates towards zero.
        let ok = tokens >= 0.0 || (-tokens / self.limit) * 1e9 < 1.0;
        if ok {
            bucket.last = Some(now);
            bucket.tokens = tokens;
        }
        ok
    }
}

/// One key's state under either arithmetic.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Gcra(Bucket),
    Rate(RateBucket),
}

/// What a bucket does, derived from burst and qps as `x/time/rate` would behave.
#[derive(Debug, Clone, Copy)]
enum Policy {
    /// A real token bucket, client-go 1.20's arithmetic.
    Limited(Gcra),
    /// A real token bucket, x/time 0.16's arithmetic.
    Rate(Rate),
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
    buckets: BoundedCache<Slot>,
    /// The correlator's key hash (the same function as its other caches').
    hasher: KeyHasher,
    // Nanoseconds since `base`, never moving backwards (governor's relative clock).
    clock_at: u64,
    base: Option<i64>,
}

impl SpamFilter {
    pub(crate) fn new(
        burst: i32,
        qps: f32,
        lru_size: i64,
        hasher: KeyHasher,
        arithmetic: TokenBucket,
    ) -> Self {
        let policy = if burst < 1 {
            Policy::RejectAll
        } else if qps.is_nan() || qps <= 0.0 || qps.is_infinite() {
            // NaN falls here too: x/time/rate with a NaN limit never refuses a full bucket
            // refill either, and "allow" is the harmless choice.
            Policy::AllowAll
        } else if arithmetic == TokenBucket::XTimeRate016 {
            Policy::Rate(Rate {
                limit: f64::from(qps),
                burst: f64::from(burst),
            })
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
            // governor's `Quota::with_period` refuses a zero period (`max` above rules it out).
            match u32::try_from(burst)
                .ok()
                .and_then(std::num::NonZeroU32::new)
            {
                Some(b) => Policy::Limited(Gcra::new(period, b)),
                None => Policy::AllowAll,
            }
        };
        SpamFilter {
            policy,
            buckets: BoundedCache::new(lru_size),
            hasher,
            clock_at: 0,
            base: None,
        }
    }

    /// Takes a token for `key` at `now`; `true` means the occurrence is spam (no token).
    /// The key is added to (or refreshed in) the LRU either way, as client-go does.
    pub(crate) fn is_spam(&mut self, key: &[u8], now: Time) -> bool {
        self.is_spam_hashed(self.hasher.hash(key), key, now)
    }

    /// [`is_spam`](Self::is_spam) with the key's hash (`KeyHasher::hash`) known.
    pub(crate) fn is_spam_hashed(&mut self, hash: u64, key: &[u8], now: Time) -> bool {
        debug_assert_eq!(hash, self.hasher.hash(key));
        let gcra = match self.policy {
            Policy::AllowAll => return self.touch(hash, key, false),
            Policy::RejectAll => return self.touch(hash, key, true),
            Policy::Rate(rate) => return self.is_spam_rate(rate, hash, key, now),
            Policy::Limited(g) => g,
        };
        let at = self.move_clock(now);
        if let Some(Slot::Gcra(bucket)) = self.buckets.get_mut(hash, key) {
            return !gcra.check(bucket, at);
        }
        let mut bucket = Bucket { start: at, tat: 0 };
        let spam = !gcra.check(&mut bucket, at);
        self.buckets.insert(hash, key, Slot::Gcra(bucket));
        spam
    }

    fn is_spam_rate(&mut self, rate: Rate, hash: u64, key: &[u8], now: Time) -> bool {
        let at = now.unix_nanos();
        if let Some(Slot::Rate(bucket)) = self.buckets.get_mut(hash, key) {
            return !rate.allow(bucket, at);
        }
        let mut bucket = RateBucket {
            tokens: 0.0,
            last: None,
        };
        let spam = !rate.allow(&mut bucket, at);
        self.buckets.insert(hash, key, Slot::Rate(bucket));
        spam
    }

    fn touch(&mut self, hash: u64, key: &[u8], spam: bool) -> bool {
        // Keep LRU bookkeeping identical even when buckets are trivial.
        if self.buckets.get_mut(hash, key).is_none() {
            let bucket = Bucket {
                start: self.clock_at,
                tat: 0,
            };
            self.buckets.insert(hash, key, Slot::Gcra(bucket));
        }
        spam
    }

    /// Moves the relative clock to `now` (never backwards) and returns its reading.
    fn move_clock(&mut self, now: Time) -> u64 {
        let base = *self.base.get_or_insert(now.unix_nanos());
        // Time before the first reading, or a clock that went backwards, does not move the
        // buckets (x/time/rate also never lets time run backwards).
        let target = u64::try_from(now.unix_nanos().saturating_sub(base)).unwrap_or(0);
        self.clock_at = self.clock_at.max(target);
        self.clock_at
    }

    pub(crate) fn len(&self) -> usize {
        self.buckets.len()
    }

    pub(crate) fn evictions(&self) -> u64 {
        self.buckets.evictions()
    }
}

#[cfg(test)]
mod tests {
    use super::{Bucket, Gcra};
    use governor::clock::{Clock as _, FakeRelativeClock};
    use governor::{Quota, RateLimiter};
    use proptest::prelude::*;
    use std::num::NonZeroU32;
    use std::time::Duration;

    proptest! {
        /// The inline GCRA decides exactly like a `governor` direct limiter (what it
        /// replaced), including buckets created after the clock started.
        #[test]
        fn decides_like_governor(period in 1u64..5_000, burst in 1u32..8, created in 0u64..10_000,
                                 steps in prop::collection::vec(0u64..3_000, 1..100)) {
            let clock = FakeRelativeClock::default();
            clock.advance(Duration::from_nanos(created));
            let b = NonZeroU32::new(burst).unwrap();
            let limiter = RateLimiter::direct_with_clock(
                Quota::with_period(Duration::from_nanos(period)).unwrap().allow_burst(b), clock.clone());
            let gcra = Gcra::new(Duration::from_nanos(period), b);
            let mut bucket = Bucket { start: created, tat: 0 };
            for step in steps {
                clock.advance(Duration::from_nanos(step));
                let now = u64::from(clock.now());
                prop_assert_eq!(gcra.check(&mut bucket, now), limiter.check().is_ok());
            }
        }
    }
}
