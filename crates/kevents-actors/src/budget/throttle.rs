//! One adaptive token bucket: the rate a write budget (or one namespace of it) sends at,
//! lowered when the apiserver answers 429 and raised slowly while it accepts.
//!
//! **The choice.** An apiserver's event limits are token buckets too (EventRateLimit:
//! `qps` and `burst` per server, namespace, user or source+object; APF: seats per priority
//! level), often shared by a fleet of processes that cannot talk to each other. Sending
//! above the limit gets 429s; sending below it wastes time; and a fleet must share it
//! fairly. The throttle is AIMD in *epochs* (Chiu and Jain: additive increase and
//! multiplicative decrease is what converges to a fair share without coordination):
//!
//! * A decrease starts an epoch. A 429 for a write admitted in an earlier epoch (sent at
//!   the old rate, answered after the decrease) does not decrease again: one decrease per
//!   round trip, as TCP's congestion window.
//! * **Slow start.** The first 429 takes the rate to one write a second, and it doubles
//!   every 250 ms from there (in time, not per write: members of a fleet throttled
//!   together climb the same curve) until the next 429. If no write of that epoch was
//!   accepted, that one multiplies it by 0.36 and slow start begins again from there.
//!   Otherwise slow start ends at **the rate its writes were accepted at**: those accepted
//!   since it began over the time since (at most 0.6 of the rate reached). The server's
//!   bucket was empty when slow start began (a 429) and is empty again at its end (a 429);
//!   in between it accepted its limit's worth, and every member of a fleet climbing the
//!   same curve an equal part of it, so each ends near its share and close to the others.
//!   Cutting the rate reached by 0.6 instead left them far apart: slow start overshoots the
//!   limit two doublings or more (the server's bucket refills while the members start
//!   slowly), and the 429s that brought the rates down from four times the limit fell on
//!   members at random (the model's 8 x `Server` 100/200, one seed, 3 s in: 2.6 to 33
//!   writes/s each after the cut by 0.6, 7.7 to 16 after the exit at the accepted rate).
//!   A server alone with its limit costs about a second of it (1/s to 64/s in 1.5 s); a
//!   thousand members started together each find their share within a few seconds
//!   (cutting 200/s down by 0.6 and 0.36 a 429 at a time was a lottery: Jain's index 0.29
//!   in `fleet_model.rs`, 0.48 in `kevents bench fleet`). Back at the configured rate, the
//!   next 429 starts over.
//! * A 429 in the current epoch afterwards multiplies the rate by 0.8.
//! * Every accepted write adds 0.05 writes/s, whatever the rate. Two budgets sharing a
//!   limit gain the same per write, while the faster one meets more 429s (a server refuses
//!   whoever sends when its bucket is empty) and loses more per decrease: shares converge.
//!   Once settled, a budget sees a 429 about every (1 - 0.8) / 0.05 = 4 s whatever its
//!   rate, that is one per 4 writes at 1 write/s, one per 40 at 10/s, one per 200 at
//!   50/s: the price of fairness is paid at low shares.
//! * **Why 0.8.** A member learns where its share is only from the 429s it meets; its mean
//!   rate over a run wanders from the share by a variance (of the logarithm) of about
//!   ln(1 / decrease) / (0.05 x seconds), and the share of its writes refused is about
//!   0.05 / (ln(1 / decrease) x its rate): the decrease trades one for the other. With 0.6
//!   (ln 1/0.6 = 0.51) eight processes under `Server` 100/200 wandered so far that in 4 of
//!   15 runs on kube-apiserver the first was done before half the last's time (the model,
//!   200 seeds started over 80 ms: 27); with 0.8 (0.22), the exit at the accepted rate and
//!   the probe below after 12 s, in 1 of 200 seeds, at 2.35 % of the writes refused
//!   instead of 2.23 %, 3.8 % instead of 3.3 % for eight sharing `User` 50/100 (a share of
//!   6 writes/s), 17-20 % instead of 17 % for a thousand at a write a second each.
//! * The growth doubles every second past 12 s without a 429 (three times the 4 s a
//!   settled budget meets one in): when the limit frees up (other members finished) the
//!   remaining ones take it within seconds. After 8 s (two) it fired often enough without
//!   anything freed to cost eight members sharing `User` 50/100 half a point of 429s
//!   (4.3 % against 3.8 % in the model), and bought nothing in fairness.
//! * The bucket's burst is 100 ms of the rate while it is below the configured one (the
//!   configured burst once it is back), and a decrease empties it: after a 429 the next
//!   write waits one token.
//! * **In a fleet that shares its law** ([`Throttle::in_fleet`], `fleet.rs`) the law of an
//!   epoch ([`Law`]) is what every member follows: the member that meets a 429 decides
//!   the next one by the rules above and the others [`adopt`](Throttle::adopt) it. So it
//!   must be a function of time alone: adapted, the rate grows by 5 % of the epoch's
//!   start rate a second (the growth doubling every second past 12 s), not per accepted
//!   write. A member sees only its own part of the fleet's writes: in slow start, a 429
//!   with nothing of its own accepted restarts slow start only within the first doubling
//!   (the server's bucket still empty from the epoch before); later, with fewer than 4 of
//!   its own accepted, slow start ends at half the rate reached. Adopting a law empties
//!   the bucket, as a decrease does.
//!
//! **What was tried first** (issue 23): a decrease to 95 % of the rate the server was
//! measured to accept, and a growth of 0.1 % of the rate per accepted write. Alone against
//! a limit it converged in three decreases; in a fleet both parts kept each member's share
//! from its start (the measured rate is the share; growth proportional to the rate grows
//! the big ones fastest): 8 processes under `Server` 100/200 finished 1.6x to 2.35x the
//! bound, the fastest before a quarter of the slowest's time. `fleet_model.rs` runs both
//! against one server bucket; `docs/semantics.md` ("Throttled and hardened clusters") has
//! the figures measured on the real apiserver.

use std::time::Duration;

use kevents_core::fleet::{FLEET_EXIT_SAMPLE, FLEET_EXIT_UNSAMPLED, FLEET_GROWTH};
use tokio::time::Instant;

use crate::telemetry::Deferral;

/// Never below this rate (writes per second): a bucket that has come down to it still
/// probes the server every 5 s.
pub(crate) const MIN_RATE: f64 = kevents_core::fleet::FLEET_MIN_RATE;
/// A 429 multiplies the rate by this (once per epoch, past slow start)...
const DECREASE: f64 = 0.8;
/// ...or, at the configured rate or in slow start when the epoch had no write accepted,
/// by this (and slow start begins again).
const DECREASE_UNANSWERED: f64 = 0.36;
/// Slow start ends at the rate its writes were accepted at, at most this much of the rate
/// it reached.
const EXIT_AT_MOST: f64 = 0.6;
/// The first 429 takes the rate down to this (writes per second, or lower if the rate
/// times [`DECREASE_UNANSWERED`] is), and slow start takes it back up from there.
const SLOW_START_RATE: f64 = 1.0;
/// Slow start doubles the rate this often until the next 429.
const SLOW_START_DOUBLING: Duration = Duration::from_millis(250);
/// Writes per second added per accepted write, the same for every budget whatever its
/// rate and configuration: the slower of two budgets sharing a limit gains on the faster.
const STEP: f64 = 0.05;
/// After this long without a 429 the growth doubles every [`PROBE_DOUBLING_SECS`].
const PROBE_AFTER_SECS: f64 = 12.0;
const PROBE_DOUBLING_SECS: f64 = 1.0;
/// The burst while adapted: this long at the current rate (at least one write).
const ADAPTED_BURST: f64 = 0.1;

/// The law a budget follows in one epoch, all a fleet's members need to send at the same
/// rate: in slow start, doubling from `from` at `since`; adapted, growing from `from` at
/// `since` by [`FLEET_GROWTH`] of it a second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Law {
    pub epoch: u64,
    pub slow_start: bool,
    pub from: f64,
    pub since: Instant,
}

/// The seconds of `d` as a float.
fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Where a bucket's law is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// At the configured rate, no 429 since it was (the start, or back at it).
    Configured,
    /// After the first 429: the rate doubles every [`SLOW_START_DOUBLING`] from `from`
    /// (set `since`) until the next 429.
    SlowStart { since: Instant, from: f64 },
    /// Additive increase, multiplicative decrease.
    Adapted,
}

/// A token bucket whose rate adapts to 429s (see the module's documentation).
#[derive(Debug, Clone)]
pub(crate) struct Throttle {
    adaptive: bool,
    /// The configured rate and burst (the most it ever sends at); rate infinite: none.
    ceiling: f64,
    ceiling_burst: f64,
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
    paused_until: Option<Instant>,
    epoch: u64,
    /// When the last decrease was (the epoch began).
    epoch_start: Instant,
    /// Writes of this epoch answered without a 429.
    accepted: u64,
    /// A `Retry-After` paused it and no write has been accepted since: the next 429 with a
    /// `Retry-After` pauses again without a decrease (a server that keeps asking for time,
    /// APF under load, would otherwise take the rate to the floor one pause after another).
    paused_unanswered: bool,
    /// Where the law is (see [`Phase`]).
    phase: Phase,
    /// [`STEP`], and accepted writes of the epoch before a probe besides
    /// [`PROBE_AFTER_SECS`] (none): others only in the model's comparisons of laws.
    step: f64,
    probe_after_writes: u64,
    /// A member of a fleet sharing its law: adapted, the rate grows in time from
    /// `adapted_from` (the epoch's start rate), not per accepted write.
    fleet: bool,
    adapted_from: f64,
    /// Joined a fleet in slow start and nothing asked for a token since: slow start
    /// begins at the first write, not at the join.
    unused_since_join: bool,
    /// A fleet member's random state (xorshift64*): where in a token it restarts when it
    /// adopts a law.
    rng: u64,
}

impl Throttle {
    /// A full bucket of `rate` writes per second (0: no rate limit) and `burst`, adaptive
    /// or pinned.
    pub(crate) fn new(rate: u32, burst: u32, adaptive: bool, now: Instant) -> Self {
        let ceiling = if rate == 0 {
            f64::INFINITY
        } else {
            f64::from(rate)
        };
        let burst = f64::from(burst.max(1));
        Throttle {
            // Without a rate there is nothing to adapt from.
            adaptive: adaptive && ceiling.is_finite(),
            ceiling,
            ceiling_burst: burst,
            rate: ceiling,
            burst,
            tokens: burst,
            last: now,
            paused_until: None,
            epoch: 0,
            epoch_start: now,
            accepted: 0,
            paused_unanswered: false,
            phase: Phase::Configured,
            step: STEP,
            probe_after_writes: 0,
            fleet: false,
            adapted_from: 0.0,
            unused_since_join: false,
            rng: 1,
        }
    }

    /// The same bucket as a member of a fleet sharing its law ([`Law`]), from `now`: an
    /// adaptive one at its configured rate starts slow start (one write a second, doubling
    /// every 250 ms) at its first write: it does not know where the fleet is, and members
    /// started together at their configured rates send each one's window into the
    /// server's bucket at once. `seed` makes its own random phase (see [`adopt`](Self::adopt)).
    pub(crate) fn in_fleet(mut self, now: Instant, seed: u64) -> Self {
        self.fleet = true;
        self.rng = seed | 1;
        if self.adaptive && self.phase == Phase::Configured {
            self.refill(now);
            self.phase = Phase::SlowStart {
                since: now,
                from: SLOW_START_RATE,
            };
            self.set_rate(SLOW_START_RATE);
            self.tokens = self.tokens.min(self.burst);
            self.unused_since_join = true;
        }
        self
    }

    /// The law of the current epoch; `None` at the configured rate (nothing to share).
    pub(crate) fn law(&self) -> Option<Law> {
        let (slow_start, from, since) = match self.phase {
            Phase::Configured => return None,
            Phase::SlowStart { since, from } => (true, from, since),
            Phase::Adapted => (false, self.adapted_from, self.epoch_start),
        };
        Some(Law {
            epoch: self.epoch,
            slow_start,
            from,
            since,
        })
    }

    /// Follows `law` (a fleet's, decided by another member) from `now`: its epoch, and the
    /// rate it gives now. A pinned bucket keeps its rate.
    pub(crate) fn adopt(&mut self, law: &Law, now: Instant) {
        if !self.adaptive || !law.from.is_finite() || law.from <= 0.0 {
            return;
        }
        // The tokens so far at the rate so far.
        self.refill(now);
        self.unused_since_join = false;
        self.epoch = law.epoch;
        self.epoch_start = law.since;
        self.accepted = 0;
        self.adapted_from = law.from;
        self.phase = if law.slow_start {
            Phase::SlowStart {
                since: law.since,
                from: law.from,
            }
        } else {
            Phase::Adapted
        };
        self.set_rate(law.from.max(MIN_RATE));
        // The rate the law gives now (its growth since `since`).
        self.refill(now);
        // As a decrease of its own, the next write waits a token (the members' saved tokens
        // all spent at once met the server's bucket still empty, and a second decrease
        // followed), and a random part of another: members that follow a law at once
        // would otherwise all write a token's time later, at once, and again at every
        // token (a thousand at a write a second each sent their writes in bursts of a
        // thousand, a second apart, and a burst meeting a server's bucket lower than
        // itself is refused all past it).
        self.tokens = -self.unit();
    }

    /// A uniform number in [0, 1) from the member's random state.
    fn unit(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The same bucket with another step and a probe waiting for writes as well as time
    /// (the model's comparisons of laws).
    #[cfg(test)]
    pub(crate) fn with_law(mut self, step: f64, probe_after_writes: u64) -> Self {
        self.step = step;
        self.probe_after_writes = probe_after_writes;
        self
    }

    /// A bucket for a part of the budget (one namespace) that a 429 was scoped to: starts
    /// at `from`'s current rate, adaptive.
    pub(crate) fn scoped(from: &Throttle, now: Instant) -> Self {
        Throttle {
            adaptive: true,
            rate: from.rate,
            burst: from.burst,
            tokens: from.burst,
            ..Throttle::new(0, 1, true, now)
        }
        .with_ceiling(from.ceiling, from.ceiling_burst)
    }

    fn with_ceiling(mut self, ceiling: f64, burst: f64) -> Self {
        self.ceiling = ceiling;
        self.ceiling_burst = burst;
        if !self.rate.is_finite() {
            // A scope of an unlimited budget starts where a measurement will take it.
            self.rate = 1000.0;
            self.burst = 1000.0 * ADAPTED_BURST;
        }
        self
    }

    /// The current rate (writes per second; infinite: no limit).
    pub(crate) fn rate(&self) -> f64 {
        self.rate
    }

    /// The current epoch (changes at every decrease).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether it has come back to where it started and holds no pause (a scoped one can go).
    pub(crate) fn is_settled(&self, now: Instant) -> bool {
        self.rate >= self.ceiling && self.paused_until.is_none_or(|u| u <= now)
    }

    /// How long until a write may go; `None`: now (then call [`take`](Self::take)).
    pub(crate) fn wait(&mut self, now: Instant) -> Option<(Duration, Deferral)> {
        if let Some(until) = self.paused_until {
            if now < until {
                return Some((until - now, Deferral::RetryAfter));
            }
            self.paused_until = None;
        }
        if !self.rate.is_finite() {
            return None;
        }
        if std::mem::take(&mut self.unused_since_join)
            && let Phase::SlowStart { from, .. } = self.phase
        {
            // The first write since joining: slow start begins now.
            self.phase = Phase::SlowStart { since: now, from };
            self.last = now;
        }
        self.refill(now);
        if self.tokens >= 1.0 {
            return None;
        }
        let need = 1.0 - self.tokens;
        let wait = match self.phase {
            // The rate grows while the write waits: the time the growing rate takes to fill
            // the token (from one write a second: 0.48 s, not 1 s; a wait at the current rate
            // left the server's bucket to refill meanwhile, and a fleet to overshoot it the
            // more once it climbed).
            Phase::SlowStart { .. } => {
                let tau = secs(SLOW_START_DOUBLING);
                tau * (1.0 + need * std::f64::consts::LN_2 / (self.rate * tau)).log2()
            }
            Phase::Configured | Phase::Adapted => need / self.rate,
        };
        Some((
            Duration::from_secs_f64(wait).max(Duration::from_millis(1)),
            Deferral::Rate,
        ))
    }

    /// Takes the token [`wait`](Self::wait) found.
    pub(crate) fn take(&mut self) {
        if self.rate.is_finite() {
            self.tokens -= 1.0;
        }
    }

    fn refill(&mut self, now: Instant) {
        let dt = secs(now.saturating_duration_since(self.last));
        let before = self.rate;
        match self.phase {
            Phase::SlowStart { since, from } => {
                let doublings =
                    secs(now.saturating_duration_since(since)) / secs(SLOW_START_DOUBLING);
                self.set_rate(from * 2f64.powf(doublings.min(64.0)));
            }
            Phase::Adapted if self.fleet => {
                let grown = fleet_growth(secs(now.saturating_duration_since(self.epoch_start)));
                self.set_rate(self.adapted_from * (1.0 + FLEET_GROWTH * grown));
            }
            Phase::Adapted | Phase::Configured => {}
        }
        // The rate grew during `dt` in slow start: the mean of its two ends.
        self.tokens = (self.tokens + dt * (before + self.rate) / 2.0).min(self.burst);
        self.last = now;
    }

    /// The rate, at most the ceiling (where slow start and the law end: configured again),
    /// and the burst that goes with it.
    fn set_rate(&mut self, rate: f64) {
        self.rate = rate.min(self.ceiling);
        if self.rate >= self.ceiling {
            self.burst = self.ceiling_burst;
            self.phase = Phase::Configured;
        } else {
            self.burst = (self.rate * ADAPTED_BURST).max(1.0);
        }
    }

    /// A write admitted in `epoch` was answered (not 429): the rate grows by [`STEP`],
    /// doubled for every [`PROBE_DOUBLING_SECS`] past [`PROBE_AFTER_SECS`] without a 429.
    pub(crate) fn answered(&mut self, now: Instant, epoch: u64) {
        if epoch == self.epoch {
            self.accepted += 1;
        }
        self.paused_unanswered = false;
        if !self.adaptive || self.rate >= self.ceiling {
            return;
        }
        self.refill(now);
        if self.phase != Phase::Adapted || self.fleet {
            // Slow start, and a fleet's law, grow with time (`refill`), not per write.
            return;
        }
        let quiet = secs(now.saturating_duration_since(self.epoch_start));
        let probe = if self.accepted < self.probe_after_writes {
            1.0
        } else {
            2f64.powf(((quiet - PROBE_AFTER_SECS) / PROBE_DOUBLING_SECS).clamp(0.0, 10.0))
        };
        self.set_rate(self.rate + self.step * probe);
    }

    /// A write admitted in `epoch` was answered 429 (`retry_after`: its header). Decreases
    /// the rate (adaptive, once per epoch) and pauses for `retry_after`, or without one
    /// for `default` when pinned (an adaptive bucket's emptied bucket is its pause).
    /// Returns the pause it started or extended.
    pub(crate) fn throttled(
        &mut self,
        now: Instant,
        epoch: u64,
        retry_after: Option<Duration>,
        default: Duration,
        max: Duration,
    ) -> Option<Duration> {
        let paused_again = retry_after.is_some() && self.paused_unanswered;
        if self.adaptive && epoch == self.epoch && !paused_again {
            self.decrease(now);
        }
        if retry_after.is_some() {
            self.paused_unanswered = true;
        }
        let pause = match retry_after {
            Some(d) => d.min(max),
            None if !self.adaptive => default.min(max),
            None => return None,
        };
        let until = now + pause;
        if let Phase::SlowStart { since, .. } = &mut self.phase {
            // Nothing is sent while paused: slow start begins when the pause ends.
            *since = (*since).max(until);
        }
        if self.paused_until.is_none_or(|u| u < until) {
            self.paused_until = Some(until);
            return Some(pause);
        }
        None
    }

    /// Where slow start (sending since `since`) ends: the writes of its epoch accepted over
    /// the time since, at most [`EXIT_AT_MOST`] of the rate reached.
    fn accepted_rate(&self, now: Instant, since: Instant) -> f64 {
        let most = self.rate * EXIT_AT_MOST;
        let elapsed = secs(now.saturating_duration_since(since));
        if elapsed <= 0.0 {
            return most;
        }
        (self.accepted as f64 / elapsed).min(most)
    }

    fn decrease(&mut self, now: Instant) {
        self.refill(now);
        self.unused_since_join = false;
        let (rate, slow_start) = match self.phase {
            Phase::Configured => ((self.rate * DECREASE_UNANSWERED).min(SLOW_START_RATE), true),
            // A fleet's member sees a few of the writes its law lets the fleet send: nothing
            // of its own accepted says the server's bucket is still empty only within the
            // first doubling; later, with fewer than a handful of its own accepted, it ends
            // slow start at a quarter of the rate reached.
            Phase::SlowStart { since, .. }
                if self.fleet
                    && (self.accepted > 0
                        || now.saturating_duration_since(since) >= SLOW_START_DOUBLING) =>
            {
                let rate = if self.accepted >= FLEET_EXIT_SAMPLE {
                    self.accepted_rate(now, since)
                } else {
                    self.rate * FLEET_EXIT_UNSAMPLED
                };
                (rate, false)
            }
            Phase::SlowStart { .. } if self.accepted == 0 => {
                (self.rate * DECREASE_UNANSWERED, true)
            }
            Phase::SlowStart { since, .. } => (self.accepted_rate(now, since), false),
            Phase::Adapted => (self.rate * DECREASE, false),
        };
        self.accepted = 0;
        self.set_rate(rate.max(MIN_RATE));
        self.phase = if slow_start {
            Phase::SlowStart {
                since: now,
                from: self.rate,
            }
        } else {
            Phase::Adapted
        };
        self.adapted_from = self.rate;
        self.tokens = 0.0;
        self.last = now;
        self.epoch += 1;
        self.epoch_start = now;
    }
}

/// Seconds of growth a fleet's law counts `quiet` seconds into an epoch: one a second, then
/// doubling every [`PROBE_DOUBLING_SECS`] past [`PROBE_AFTER_SECS`] (the integral of the
/// local law's probe).
fn fleet_growth(quiet: f64) -> f64 {
    if quiet <= PROBE_AFTER_SECS {
        return quiet;
    }
    let past = ((quiet - PROBE_AFTER_SECS) / PROBE_DOUBLING_SECS).min(60.0);
    PROBE_AFTER_SECS + PROBE_DOUBLING_SECS * (2f64.powf(past) - 1.0) / std::f64::consts::LN_2
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);
    const NO_RA: Option<Duration> = None;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    /// Sends as fast as `t` allows for `secs` against a server bucket of `qps`/`burst`
    /// (EventRateLimit's), answering at once; returns (accepted, rejected).
    fn against_server(
        t: &mut Throttle,
        qps: f64,
        burst: f64,
        secs: u64,
        base: Instant,
    ) -> (u64, u64) {
        let (mut accepted, mut rejected) = (0, 0);
        let mut server = burst;
        let mut last = base;
        let mut now = base;
        let end = base + Duration::from_secs(secs);
        while now < end {
            match t.wait(now) {
                Some((d, _)) => now += d,
                None => {
                    t.take();
                    let epoch = t.epoch();
                    server = (server + secs_f(now - last) * qps).min(burst);
                    last = now;
                    if server >= 1.0 {
                        server -= 1.0;
                        accepted += 1;
                        t.answered(now, epoch);
                    } else {
                        rejected += 1;
                        t.throttled(now, epoch, NO_RA, SEC, 60 * SEC);
                    }
                    now += Duration::from_micros(100);
                }
            }
        }
        (accepted, rejected)
    }

    fn secs_f(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn a_pinned_bucket_keeps_its_rate_and_pauses_on_429() {
        let base = Instant::now();
        let mut t = Throttle::new(10, 2, false, base);
        assert!(t.wait(base).is_none());
        t.take();
        assert!(t.wait(base).is_none());
        t.take();
        let (d, why) = t.wait(base).unwrap();
        assert_eq!(why, Deferral::Rate);
        assert!(d <= Duration::from_millis(100), "{d:?}");
        assert_eq!(t.throttled(base, 0, NO_RA, SEC, 60 * SEC), Some(SEC));
        assert_eq!(t.rate(), 10.0, "pinned");
        assert_eq!(t.wait(at(base, 500)).unwrap().1, Deferral::RetryAfter);
        assert!(t.wait(at(base, 1000)).is_none());
    }

    #[test]
    fn one_decrease_per_epoch_and_retry_after_honoured() {
        let base = Instant::now();
        let mut t = Throttle::new(200, 1000, true, base);
        let e = t.epoch();
        assert_eq!(t.throttled(base, e, NO_RA, SEC, 60 * SEC), None);
        assert_eq!(t.rate(), SLOW_START_RATE, "the first 429: slow start");
        // More 429s of writes sent before the decrease: no further decrease.
        t.throttled(base, e, NO_RA, SEC, 60 * SEC);
        assert_eq!(t.rate(), SLOW_START_RATE);
        // A Retry-After pauses, whatever the epoch.
        assert_eq!(
            t.throttled(base, e, Some(3 * SEC), SEC, 60 * SEC),
            Some(3 * SEC)
        );
        assert_eq!(t.wait(at(base, 10)).unwrap().1, Deferral::RetryAfter);
        // The decrease emptied the bucket; by the pause's end it holds a token again.
        assert!(t.wait(at(base, 3000)).is_none());
    }

    /// A server that answers every write 429 with `Retry-After` (APF under load) pauses the
    /// budget each time, but lowers its rate once until a write is accepted again.
    #[test]
    fn retry_after_storm_lowers_the_rate_once() {
        let base = Instant::now();
        let mut t = Throttle::new(200, 1000, true, base);
        for i in 0..30 {
            let e = t.epoch();
            t.throttled(at(base, 1000 * i), e, Some(SEC), SEC, 60 * SEC);
        }
        assert_eq!(
            t.rate(),
            SLOW_START_RATE,
            "once, and no slow start while paused"
        );
        // Slow start from the last pause's end (30 s).
        t.answered(at(base, 31_000), t.epoch());
        assert_eq!(t.rate(), 16.0);
        let e = t.epoch();
        t.throttled(at(base, 31_010), e, Some(SEC), SEC, 60 * SEC);
        assert!(t.rate() < 10.0, "lowered again after an accepted write");
    }

    /// The first 429 takes the rate to one write a second, and slow start doubles it every
    /// 250 ms; a 429 then cuts it by 0.36 when nothing of its epoch was accepted (slow start
    /// again from there), or else ends slow start at the rate its writes were accepted at;
    /// from then on a 429 multiplies it by 0.8 and the law is additive: 0.05 writes/s more
    /// per accepted write, whatever the rate, the growth doubling every second past 12 s
    /// without a 429. Back at the configured rate, it starts over.
    #[test]
    fn slow_start_then_multiplicative_decrease_additive_increase() {
        let base = Instant::now();
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let mut t = Throttle::new(200, 1000, true, base);
        t.throttled(base, 0, NO_RA, SEC, 60 * SEC);
        assert_eq!(t.rate(), 1.0);
        // Slow start: twice the rate every 250 ms, with or without answers.
        t.wait(at(base, 500));
        assert!(near(t.rate(), 4.0), "{}", t.rate());
        // Epoch 1's first write refused: nothing of it accepted, times 0.36, slow start again.
        t.throttled(at(base, 500), 1, NO_RA, SEC, 60 * SEC);
        assert!(near(t.rate(), 4.0 * 0.36), "{}", t.rate());
        t.wait(at(base, 750));
        assert!(near(t.rate(), 2.0 * 4.0 * 0.36), "{}", t.rate());
        // Three writes of epoch 2 accepted in the second since it began, then a 429: slow
        // start ends at the rate they were accepted at, 3 a second (not 0.6 x 23).
        for ms in [900, 1200, 1400] {
            t.answered(at(base, ms), 2);
        }
        t.throttled(at(base, 1500), 2, NO_RA, SEC, 60 * SEC);
        assert!(near(t.rate(), 3.0), "{}", t.rate());
        t.wait(at(base, 5000));
        assert!(near(t.rate(), 3.0), "no more slow start: {}", t.rate());
        // A 429 of epoch 3: times 0.8, and the law is additive.
        t.throttled(at(base, 5000), 3, NO_RA, SEC, 60 * SEC);
        let r = 3.0 * 0.8;
        assert!(near(t.rate(), r), "{}", t.rate());
        // Additive: the same step at any rate.
        for i in 0..20 {
            t.answered(at(base, 5000 + i), t.epoch());
        }
        assert!(near(t.rate(), r + 20.0 * STEP), "{}", t.rate());
        // More than 12 s after the decrease (14.75 s): the step is 2^2.75 times as large.
        let r = t.rate();
        t.answered(at(base, 5000 + 14_750), t.epoch());
        assert!(near(t.rate(), r + 2f64.powf(2.75) * STEP), "{}", t.rate());
        // Back at the configured rate: the next 429 starts slow start again.
        let mut back = Throttle::new(200, 1000, true, base);
        back.throttled(base, 0, NO_RA, SEC, 60 * SEC);
        back.wait(at(base, 3000));
        assert_eq!(
            back.rate(),
            200.0,
            "2^12 times one write a second: the ceiling"
        );
        let e = back.epoch();
        back.throttled(at(base, 3000), e, NO_RA, SEC, 60 * SEC);
        assert_eq!(back.rate(), 1.0);
        // A slow start from below one write a second goes no lower than the floor.
        let mut slow = Throttle::new(200, 1000, true, base);
        for _ in 0..12 {
            let e = slow.epoch();
            slow.throttled(base, e, NO_RA, SEC, 60 * SEC);
        }
        assert_eq!(slow.rate(), MIN_RATE);
        // Slow start caps its exit at 0.6 of the rate reached: a write accepted at once.
        let mut quick = Throttle::new(200, 1000, true, base);
        quick.throttled(base, 0, NO_RA, SEC, 60 * SEC);
        quick.answered(at(base, 250), 1);
        quick.throttled(at(base, 250), 1, NO_RA, SEC, 60 * SEC);
        assert!(near(quick.rate(), 2.0 * EXIT_AT_MOST), "{}", quick.rate());
    }

    /// In slow start a write waits for the growing rate to fill its token: from one write
    /// a second and an empty bucket, 0.25 x log2(1 + ln 2 / 0.25) = 0.48 s, not 1 s.
    #[test]
    fn slow_start_waits_for_the_growing_rate() {
        let base = Instant::now();
        let mut t = Throttle::new(200, 1000, true, base);
        t.throttled(base, 0, NO_RA, SEC, 60 * SEC);
        let (wait, why) = t.wait(base).unwrap();
        assert_eq!(why, Deferral::Rate);
        let expected = 0.25 * (1.0 + std::f64::consts::LN_2 / 0.25).log2();
        assert!((wait.as_secs_f64() - expected).abs() < 1e-3, "{wait:?}");
        assert!(t.wait(base + wait).is_none(), "a token by then");
        // Past slow start the rate is constant: a token takes 1 / rate.
        t.answered(base + wait, 1);
        t.throttled(base + wait, 1, NO_RA, SEC, 60 * SEC);
        let rate = t.rate();
        let (wait, _) = t.wait(base + wait).unwrap();
        assert!(
            (wait.as_secs_f64() - 1.0 / rate).abs() < 1e-3,
            "{wait:?} at {rate}"
        );
    }

    /// Against a server bucket of 50/s burst 100, starting at 200/s burst 1000: few 429s
    /// and close to the server's rate over 20 s.
    #[test]
    fn converges_on_a_token_bucket_server() {
        let base = Instant::now();
        let mut t = Throttle::new(200, 1000, true, base);
        let (accepted, rejected) = against_server(&mut t, 50.0, 100.0, 20, base);
        eprintln!(
            "50/100: {accepted} accepted, {rejected} rejected, rate {}",
            t.rate()
        );
        // The bound: 100 + 50 * 20 = 1 100 writes in 20 s.
        assert!(accepted as f64 >= 0.9 * 1100.0, "{accepted} accepted");
        assert!(
            rejected as f64 <= 0.03 * accepted as f64,
            "{rejected} rejected of {accepted}"
        );
        // And a slow one (SourceAndObject-like 1/5).
        let mut t = Throttle::new(200, 1000, true, base);
        let (accepted, rejected) = against_server(&mut t, 1.0, 5.0, 60, base);
        eprintln!(
            "1/5: {accepted} accepted, {rejected} rejected, rate {}",
            t.rate()
        );
        assert!(accepted >= 55, "{accepted} accepted of 65 possible");
        // About one 429 per (1 - 0.8) / 0.05 = 4 accepted writes at 1 write/s (the steady
        // share is 0.05 / (0.2 * rate): the law's price at very low rates).
        assert!(rejected <= 20, "{rejected} rejected");
    }

    /// In a fleet sharing its law the rate is a function of the epoch's law and time:
    /// joining, it starts in slow start; adapted, it grows by 5 % of the epoch's start rate
    /// a second (not per write), the growth doubling every second past 12 s; a 429 in slow
    /// start within its first doubling with nothing accepted starts it again from 0.36 of
    /// the rate; later, with fewer than 4 of its own writes accepted, ends it at a quarter
    /// of the rate reached.
    #[test]
    fn a_fleet_member_follows_its_law_in_time() {
        let base = Instant::now();
        let near = |a: f64, b: f64| (a - b).abs() < 1e-6;
        let mut t = Throttle::new(200, 1000, true, base).in_fleet(base, 1);
        let joined = Law {
            epoch: 0,
            slow_start: true,
            from: 1.0,
            since: base,
        };
        assert_eq!(t.law(), Some(joined), "a member starts in slow start");
        // A 429 100 ms in, nothing accepted: the server's bucket still empty, slow start again.
        t.throttled(at(base, 100), 0, NO_RA, SEC, 60 * SEC);
        let again = t.law().unwrap();
        assert!(again.slow_start && again.epoch == 1, "{again:?}");
        assert!(near(again.from, 2f64.powf(0.4) * 0.36), "{again:?}");
        // 1 s on, one write accepted: a quarter of the rate reached (2^4 from `from`).
        t.answered(at(base, 1000), 1);
        t.throttled(at(base, 1100), 1, NO_RA, SEC, 60 * SEC);
        let adapted = t.law().unwrap();
        assert!(!adapted.slow_start);
        assert!(near(adapted.from, again.from * 16.0 * 0.25), "{adapted:?}");
        // Accepted writes add nothing; time does: 5 % of `from` a second.
        let from = adapted.from;
        for ms in [1200, 1300, 1400] {
            t.answered(at(base, ms), 2);
        }
        t.wait(at(base, 3100));
        assert!(near(t.rate(), from * 1.1), "{} {from}", t.rate());
        // Past 12 s the growth doubles every second: 12 + (2^2 - 1) / ln 2 seconds' worth.
        t.wait(at(base, 1100 + 14_000));
        let grown = 12.0 + 3.0 / std::f64::consts::LN_2;
        assert!(near(t.rate(), from * (1.0 + 0.05 * grown)), "{}", t.rate());
    }

    /// A law decided by another member: followed from its epoch and start, at the rate it
    /// gives now; the bucket is emptied (as by a decrease of its own); a pinned bucket
    /// keeps its rate; a stale slow start is back at the configured rate.
    #[test]
    fn a_fleet_member_adopts_the_law_of_another() {
        let base = Instant::now();
        let mut t = Throttle::new(200, 1000, true, base).in_fleet(base, 1);
        let law = Law {
            epoch: 9,
            slow_start: false,
            from: 10.0,
            since: base,
        };
        t.adopt(&law, at(base, 2000));
        assert_eq!(t.epoch(), 9);
        assert_eq!(t.law(), Some(law));
        assert!((t.rate() - 11.0).abs() < 1e-9, "{}", t.rate());
        assert!(t.wait(at(base, 2000)).is_some(), "no token saved");
        // A 429 of a write admitted in epoch 9: the next epoch from 0.8 of the rate.
        t.throttled(at(base, 2100), 9, NO_RA, SEC, 60 * SEC);
        let next = t.law().unwrap();
        assert_eq!(next.epoch, 10);
        assert!(
            (next.from - 0.8 * 10.0 * (1.0 + 0.05 * 2.1)).abs() < 1e-9,
            "{next:?}"
        );
        // A slow start of an hour ago has long reached the ceiling.
        let old = Law {
            epoch: 11,
            slow_start: true,
            from: 1.0,
            since: base,
        };
        t.adopt(&old, at(base, 3_600_000));
        assert_eq!(t.rate(), 200.0);
        assert_eq!(t.law(), None, "configured again");
        let mut pinned = Throttle::new(50, 50, false, base).in_fleet(base, 1);
        pinned.adopt(&law, at(base, 10));
        assert_eq!((pinned.rate(), pinned.epoch()), (50.0, 0));
    }

    /// A member's slow start begins at its first write, not when it joined (a process joins
    /// at its start and may write its first event much later).
    #[test]
    fn a_fleet_member_starts_slow_at_its_first_write() {
        let base = Instant::now();
        let mut t = Throttle::new(200, 1000, true, base).in_fleet(base, 1);
        assert!(t.wait(at(base, 60_000)).is_none(), "its first write goes");
        t.take();
        let law = t.law().unwrap();
        assert_eq!((law.slow_start, law.from), (true, 1.0));
        assert_eq!(law.since, at(base, 60_000));
        assert!(
            t.wait(at(base, 60_100)).is_some(),
            "at about a write a second"
        );
        assert!((t.rate() - 2f64.powf(0.4)).abs() < 1e-9, "{}", t.rate());
    }
}
