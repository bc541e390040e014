//! A fleet of budgets sharing one server token bucket, event by event on a virtual clock:
//! the control law's own test bench (the pipelines' simulation against the simulator's
//! EventRateLimit is `kevents bench fleet`). Each member has `writes` to make, at most
//! `in_flight` requests at once, starts at its own offset, and drives a [`Throttle`]
//! exactly as the budget does (`wait`, `take`, `answered`, `throttled`); a request reaches
//! the server half a round trip after it was sent, is accepted if the bucket holds a token
//! (refilled at `qps` up to `burst`, full at the start), and its answer arrives half a round
//! trip later. A refused write is sent again (the budget's writes are never given up on a
//! 429).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use tokio::time::Instant;

use super::throttle::{Law, Throttle};

/// What a fleet is made of.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fleet {
    pub members: usize,
    pub writes: u64,
    pub qps: f64,
    pub burst: f64,
    /// The round trip (request and answer), jittered by up to half of it.
    pub rtt: Duration,
    /// Members start spread evenly over this.
    pub spread: Duration,
    pub in_flight: u32,
    /// Each member's budget: configured qps and burst.
    pub budget_qps: u32,
    pub budget_burst: u32,
    /// The law's step and probe (writes) when not the budget's own.
    pub law: Option<(f64, u64)>,
    /// Members share their law through one store (a Lease), each leg (a member's proposal
    /// to the store, the store's change to every member) this long, jittered as the round
    /// trip; `None`: each adapts alone.
    pub shared: Option<Duration>,
}

/// How it went.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// Each member's finishing time, seconds from the first start.
    pub finished: Vec<f64>,
    /// Each member's start, seconds.
    pub started: Vec<f64>,
    pub accepted: u64,
    pub rejected: u64,
    /// Of them, in the first 5 s.
    pub rejected_early: u64,
    /// The bound: (accepted - burst) / qps.
    pub bound: f64,
}

impl Outcome {
    pub fn slowest(&self) -> f64 {
        self.finished.iter().copied().fold(0.0, f64::max)
    }
    pub fn fastest(&self) -> f64 {
        self.finished.iter().copied().fold(f64::INFINITY, f64::min)
    }
    pub fn rejected_share(&self) -> f64 {
        self.rejected as f64 / (self.accepted + self.rejected) as f64
    }
    /// Jain's index over each member's throughput (writes over its time running).
    pub fn jain(&self, writes: u64) -> f64 {
        let x: Vec<f64> = self
            .finished
            .iter()
            .zip(&self.started)
            .map(|(f, s)| writes as f64 / (f - s).max(1e-9))
            .collect();
        let sum: f64 = x.iter().sum();
        let sq: f64 = x.iter().map(|v| v * v).sum();
        sum * sum / (x.len() as f64 * sq)
    }
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Wake,
    Arrive {
        epoch: u64,
    },
    Answer {
        epoch: u64,
        accepted: bool,
    },
    /// A member's proposal (an index into the laws) reaches the store.
    Publish {
        law: usize,
    },
    /// The store's law reaches a member.
    Adopt {
        law: usize,
    },
}

/// xorshift64*: a fixed, seeded jitter.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Runs `fleet` to the end (every member's writes accepted).
pub(crate) fn run(fleet: Fleet, seed: u64) -> Outcome {
    let base = Instant::now();
    let n = fleet.members;
    let mut rng = Rng(seed.max(1));
    let mut throttles: Vec<Throttle> = (0..n)
        .map(|i| {
            let t = Throttle::new(fleet.budget_qps, fleet.budget_burst, true, base);
            let t = match fleet.law {
                Some((step, probe)) => t.with_law(step, probe),
                None => t,
            };
            if fleet.shared.is_some() {
                t.in_fleet(
                    base,
                    seed.wrapping_mul(1_000_003).wrapping_add(i as u64 + 1),
                )
            } else {
                t
            }
        })
        .collect();
    let mut done = vec![0u64; n];
    let mut in_flight = vec![0u32; n];
    // The budget's own limit of writes in flight (budget/mod.rs): from one, one more per
    // answer until the first decrease, halved at a decrease, then one more per round.
    let mut in_flight_limit = vec![1.0f64; n];
    let mut slow_start = vec![true; n];
    // The member's next wake-up already queued, if any (one at a time).
    let mut wake_at: Vec<Option<Duration>> = vec![None; n];
    let mut finished = vec![0.0; n];
    let mut started = vec![0.0; n];
    let (mut accepted, mut rejected, mut rejected_early) = (0u64, 0u64, 0u64);
    let mut tokens = fleet.burst;
    let mut refilled = Duration::ZERO;
    let mut queue: BinaryHeap<Reverse<(Duration, u64, usize, Step)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |q: &mut BinaryHeap<_>, at: Duration, i: usize, s: Step| {
        seq += 1;
        q.push(Reverse((at, seq, i, s)));
    };
    for i in 0..n {
        let at = fleet.spread.mul_f64(i as f64 / n.max(1) as f64);
        started[i] = at.as_secs_f64();
        wake_at[i] = Some(at);
        push(&mut queue, at, i, Step::Wake);
    }
    let half_rtt = |rng: &mut Rng| fleet.rtt.mul_f64(0.5 * (0.75 + 0.5 * rng.unit()));
    let leg = |rng: &mut Rng| {
        fleet
            .shared
            .unwrap_or_default()
            .mul_f64(0.75 + 0.5 * rng.unit())
    };
    // Every law proposed, and the store's (an index into them).
    let mut laws: Vec<Law> = Vec::new();
    let mut stored: Option<usize> = None;
    while let Some(Reverse((at, _, i, step))) = queue.pop() {
        let now = base + at;
        match step {
            Step::Wake => {
                if wake_at[i] != Some(at) {
                    continue;
                }
                wake_at[i] = None;
            }
            Step::Arrive { epoch } => {
                let dt = at.saturating_sub(refilled).as_secs_f64();
                tokens = (tokens + dt * fleet.qps).min(fleet.burst);
                refilled = refilled.max(at);
                let ok = tokens >= 1.0;
                if ok {
                    tokens -= 1.0;
                }
                let back = at + half_rtt(&mut rng);
                push(
                    &mut queue,
                    back,
                    i,
                    Step::Answer {
                        epoch,
                        accepted: ok,
                    },
                );
                continue;
            }
            Step::Publish { law } => {
                if stored.is_none_or(|s| laws[s].epoch < laws[law].epoch) {
                    stored = Some(law);
                    for m in 0..n {
                        let back = at + leg(&mut rng);
                        push(&mut queue, back, m, Step::Adopt { law });
                    }
                } else if let Some(s) = stored {
                    // A conflict: the proposer reads the store's law.
                    let back = at + leg(&mut rng);
                    push(&mut queue, back, i, Step::Adopt { law: s });
                }
                continue;
            }
            Step::Adopt { law } => {
                let l = laws[law];
                let t = &mut throttles[i];
                if l.epoch > t.epoch() || (l.epoch == t.epoch() && t.law() != Some(l)) {
                    t.adopt(&l, now);
                }
            }
            Step::Answer {
                epoch,
                accepted: ok,
            } => {
                in_flight[i] -= 1;
                if ok {
                    accepted += 1;
                    done[i] += 1;
                    throttles[i].answered(now, epoch);
                    if in_flight_limit[i].is_finite() {
                        in_flight_limit[i] += if slow_start[i] {
                            1.0
                        } else {
                            1.0 / in_flight_limit[i]
                        };
                        if in_flight_limit[i] > 4096.0 {
                            in_flight_limit[i] = f64::INFINITY;
                        }
                    }
                    if done[i] == fleet.writes {
                        finished[i] = at.as_secs_f64();
                    }
                } else {
                    rejected += 1;
                    let before = throttles[i].epoch();
                    if at < Duration::from_secs(5) {
                        rejected_early += 1;
                    }
                    throttles[i].throttled(
                        now,
                        epoch,
                        None,
                        Duration::from_secs(1),
                        Duration::from_secs(60),
                    );
                    if throttles[i].epoch() != before {
                        in_flight_limit[i] = (f64::from(in_flight[i] + 1) * 0.5).max(1.0);
                        slow_start[i] = false;
                        if let (Some(_), Some(l)) = (fleet.shared, throttles[i].law()) {
                            laws.push(l);
                            let arrive = at + leg(&mut rng);
                            push(
                                &mut queue,
                                arrive,
                                i,
                                Step::Publish {
                                    law: laws.len() - 1,
                                },
                            );
                        }
                    }
                }
            }
        }
        // Send what the member may now.
        loop {
            let unsent = fleet.writes - done[i] - u64::from(in_flight[i]);
            if unsent == 0
                || in_flight[i] >= fleet.in_flight
                || f64::from(in_flight[i]) >= in_flight_limit[i]
            {
                break;
            }
            match throttles[i].wait(now) {
                Some((d, _)) => {
                    let next = at + d;
                    if wake_at[i].is_none_or(|w| w > next) {
                        wake_at[i] = Some(next);
                        push(&mut queue, next, i, Step::Wake);
                    }
                    break;
                }
                None => {
                    throttles[i].take();
                    in_flight[i] += 1;
                    let epoch = throttles[i].epoch();
                    let arrive = at + half_rtt(&mut rng);
                    push(&mut queue, arrive, i, Step::Arrive { epoch });
                }
            }
        }
    }
    let bound = ((accepted as f64 - fleet.burst) / fleet.qps).max(0.0);
    Outcome {
        finished,
        started,
        accepted,
        rejected,
        rejected_early,
        bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(members: usize, qps: f64, burst: f64, writes: u64) -> Fleet {
        Fleet {
            members,
            writes,
            qps,
            burst,
            rtt: Duration::from_millis(4),
            spread: Duration::from_millis(500),
            in_flight: 16,
            budget_qps: 200,
            budget_burst: 1000,
            law: None,
            shared: None,
        }
    }

    fn report(name: &str, f: Fleet, o: &Outcome) {
        eprintln!(
            "{name}: {} members, slowest {:.1} s / bound {:.1} s = {:.3}, fastest/slowest {:.3}, 429 {:.2} % ({} early), jain {:.3}",
            f.members,
            o.slowest(),
            o.bound,
            o.slowest() / o.bound,
            o.fastest() / o.slowest(),
            100.0 * o.rejected_share(),
            o.rejected_early,
            o.jain(f.writes)
        );
    }

    /// Fleets of 4, 8 and 16 budgets under `Server` 100/200 and 8 under a `User` limit of
    /// 50/100, five seeds each, started as kube-apiserver answers processes started
    /// together (over 80 ms: `docs/benchmarks.md`, "The start, matched"): every run within
    /// 1.25x the bound and the median within 1.2x, the fastest member not done before half
    /// the slowest's time, Jain's index over the members' throughput at least 0.9, at most
    /// 5 % of the writes answered 429. Started over 500 ms (the first one alone takes the
    /// server's burst, a quarter of its writes, and the others' slow starts are offset) the
    /// fastest is not done before 0.4 of the slowest's time. (The law before issue 34 — a
    /// decrease to the rate measured, a growth proportional to the rate — kept each
    /// member's share from its start: 1.6x to 2.9x the bound.)
    #[test]
    fn fleets_share_a_limit_fairly() {
        for (spread, fastest) in [(80, 0.5), (500, 0.4)] {
            for (name, f) in [
                ("server 100/200 x4", fleet(4, 100.0, 200.0, 850)),
                ("server 100/200 x8", fleet(8, 100.0, 200.0, 850)),
                ("server 100/200 x16", fleet(16, 100.0, 200.0, 850)),
                ("user 50/100 x8", fleet(8, 50.0, 100.0, 850)),
            ] {
                let f = Fleet {
                    spread: Duration::from_millis(spread),
                    ..f
                };
                let name = format!("{name} over {spread} ms");
                let mut over: Vec<f64> = Vec::new();
                for seed in 1..=5 {
                    let o = run(f, seed);
                    report(&name, f, &o);
                    let ratio = o.slowest() / o.bound;
                    assert!(ratio <= 1.25, "{name}: {ratio}");
                    assert!(o.fastest() / o.slowest() >= fastest, "{name}: {o:?}");
                    assert!(o.jain(f.writes) >= 0.9, "{name}: {o:?}");
                    assert!(o.rejected_share() <= 0.05, "{name}: {o:?}");
                    over.push(ratio);
                }
                over.sort_by(f64::total_cmp);
                assert!(over[2] <= 1.2, "{name}: median {over:?}");
            }
        }
    }

    /// Eight budgets under `Server` 100/200 started over 80 ms, 200 seeds: the fastest done
    /// before half the slowest's time in at most 2 % of them (1 of 200 when measured; 27 of
    /// 200 with the law before: slow start cut by 0.6, a decrease of 0.6, the probe after
    /// 8 s), at most 3 % of the writes refused in the median run (2.35 %; 2.23 % before).
    #[test]
    fn eight_rarely_share_unfairly() {
        let f = Fleet {
            spread: Duration::from_millis(80),
            ..fleet(8, 100.0, 200.0, 850)
        };
        let runs: Vec<Outcome> = (1..=200).map(|seed| run(f, seed)).collect();
        let unfair = runs
            .iter()
            .filter(|o| o.fastest() / o.slowest() < 0.5)
            .count();
        let mut refused: Vec<f64> = runs.iter().map(Outcome::rejected_share).collect();
        refused.sort_by(f64::total_cmp);
        eprintln!(
            "8 x server 100/200 over 80 ms: {unfair} of 200 seeds with the fastest before half the slowest's time, 429 median {:.2} %",
            100.0 * refused[100]
        );
        assert!(unfair <= 4, "{unfair} of 200");
        assert!(refused[100] <= 0.03, "{}", refused[100]);
    }

    /// A thousand budgets sharing `Server` 1 000/2 000, 300 writes each (a write a second
    /// each: `kevents bench fleet --pipelines 1000 --occurrences 300`'s shape), started over
    /// 500 ms and all at once: within 1.1x the bound, Jain's index at least 0.95; the 429s
    /// are the law's price at that share (a 429 takes 0.2 of a write a second off, and 0.05
    /// a write adds it back in 4 writes: about a write in five, 17-20 % measured): at most
    /// 25 %. (Before slow start, when the first 429 multiplied the rate by 0.6 and the next
    /// ones by 0.36 until one was accepted, those started at once shared it as a lottery:
    /// Jain's index 0.29, the fastest done in a fiftieth of the slowest's time.)
    #[test]
    fn a_thousand_members_share_a_limit() {
        for spread in [500, 0] {
            let f = Fleet {
                spread: Duration::from_millis(spread),
                ..fleet(1000, 1000.0, 2000.0, 300)
            };
            let o = run(f, 1);
            report(&format!("server 1000/2000 x1000 over {spread} ms"), f, &o);
            assert!(o.slowest() / o.bound <= 1.1, "{}", o.slowest() / o.bound);
            assert!(o.jain(f.writes) >= 0.95, "{}", o.jain(f.writes));
            assert!(o.rejected_share() <= 0.25, "{}", o.rejected_share());
        }
    }

    /// The price of a small share (docs/semantics.md, "How the budget adapts"): a step of
    /// 0.008 writes/s per write instead of 0.05, and a probe that waits for 50 accepted
    /// writes as well as 12 s (else the probe, not the step, sets how often a budget at a
    /// write a second meets a 429), refuse far fewer writes of a thousand members at a
    /// write a second each, but their shares converge so much more slowly that they are
    /// far less fair and the slowest takes far longer than the bound.
    #[test]
    fn a_smaller_step_trades_fair_shares_for_fewer_429s() {
        let thousand = fleet(1000, 1000.0, 2000.0, 300);
        let small_step = Fleet {
            law: Some((0.008, 50)),
            ..thousand
        };
        let median = |f: Fleet| {
            let runs: Vec<Outcome> = (1..=3).map(|seed| run(f, seed)).collect();
            let mid = |what: &dyn Fn(&Outcome) -> f64| {
                let mut v: Vec<f64> = runs.iter().map(what).collect();
                v.sort_by(f64::total_cmp);
                v[1]
            };
            (
                mid(&|o| o.rejected_share()),
                mid(&|o| o.jain(f.writes)),
                mid(&|o| o.slowest() / o.bound),
            )
        };
        let now = median(thousand);
        let small = median(small_step);
        eprintln!(
            "x1000 (429 share, Jain, slowest/bound): {now:.3?} now, {small:.3?} step 0.008, probe after 50 writes"
        );
        assert!(small.0 < 0.6 * now.0, "{small:?} against {now:?}");
        assert!(small.1 < now.1 - 0.1, "{small:?} against {now:?}");
        assert!(small.2 > now.2 + 0.1, "{small:?} against {now:?}");
    }

    /// One budget alone under `Namespace` 50/100: within 1.1x the bound, at most 3 % 429s.
    #[test]
    fn one_budget_alone_uses_the_limit() {
        let f = fleet(1, 50.0, 100.0, 850);
        let o = run(f, 1);
        report("namespace 50/100 x1", f, &o);
        assert!(o.slowest() / o.bound <= 1.1, "{o:?}");
        assert!(o.rejected_share() <= 0.03, "{o:?}");
    }

    /// Fleets that share their law (one store, a Lease; each leg, a member's proposal to
    /// the store and the store's change to every member, 20 ms): every member sends at one
    /// rate, so shares are equal by construction and an epoch costs a few 429s whatever
    /// the share. 4, 8 and 16 under `Server` 100/200 and 8 under `User` 50/100, three
    /// seeds each: at most 1 % 429s (0.4-0.6 % measured), within 1.05x the bound, the
    /// fastest done after 0.9 of the slowest's time (0.99). A thousand under `Server`
    /// 1 000/2 000, a write a second each: at most 2 % 429s (0.65 %; 17-20 % adapting
    /// alone), within 1.05x the bound, Jain's index at least 0.99, the fastest after 0.9 of
    /// the slowest's time (0.97).
    #[test]
    fn fleets_sharing_their_law_share_the_limit() {
        let legs = Some(Duration::from_millis(20));
        for (name, f) in [
            ("server 100/200 x4", fleet(4, 100.0, 200.0, 850)),
            ("server 100/200 x8", fleet(8, 100.0, 200.0, 850)),
            ("server 100/200 x16", fleet(16, 100.0, 200.0, 850)),
            ("user 50/100 x8", fleet(8, 50.0, 100.0, 850)),
        ] {
            let f = Fleet {
                spread: Duration::from_millis(80),
                shared: legs,
                ..f
            };
            for seed in 1..=3 {
                let o = run(f, seed);
                report(&format!("{name}, shared"), f, &o);
                assert!(o.rejected_share() <= 0.01, "{name}: {o:?}");
                assert!(o.slowest() / o.bound <= 1.05, "{name}: {o:?}");
                assert!(o.fastest() / o.slowest() >= 0.9, "{name}: {o:?}");
            }
        }
        let f = Fleet {
            shared: legs,
            ..fleet(1000, 1000.0, 2000.0, 300)
        };
        let o = run(f, 1);
        report("server 1000/2000 x1000, shared", f, &o);
        assert!(o.rejected_share() <= 0.02, "{}", o.rejected_share());
        assert!(o.slowest() / o.bound <= 1.1, "{}", o.slowest() / o.bound);
        assert!(o.jain(f.writes) >= 0.95, "{}", o.jain(f.writes));
        assert!(
            o.fastest() / o.slowest() >= 0.5,
            "{}",
            o.fastest() / o.slowest()
        );
    }
}
