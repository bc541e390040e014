//! `kevents bench fleet`: N pipelines in one process, each with its own write budget (as N
//! processes would have), each writing workload `api` in a namespace of its own, all against
//! one in-memory apiserver ([`MemoryApiServer`]) that throttles them as kube-apiserver's
//! `EventRateLimit` admission plugin does and answers after a latency. Prints per run one
//! `FLEET` JSON line with the fields of `scripts/bench/throttled.py --fleet`, plus Jain's
//! fairness index over the pipelines' throughputs.
//!
//! The pipelines run in real time: they run on the actix system's one thread, and the
//! budgets and the server's token buckets read the real clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use kevents_actors::{BudgetOptions, Pipeline, SinkOptions, WriteBudget};
use kevents_core::{Clock as _, EventSource, EventType, SystemClock};
use kevents_sim::MemoryApiServer;
use kevents_sim::fleet_lease::MemoryLease;
use kevents_sim::rate_limit::{EventRateLimits, RateLimit};
use kevents_sim::workload::Workload;
use serde_json::json;
use tokio::sync::Barrier;

use crate::cluster::{self, Failure, FailureKind, Health, Totals, WatchedSink, is_idle, round};
use crate::verify;

/// The latency the simulator answers with by default: about what kube-apiserver 1.20 on
/// loopback takes for an event create on the machine this was measured on (see
/// `docs/benchmarks.md`, "Fleets in the simulator").
pub const DEFAULT_LATENCY_MS: u64 = 3;

/// When, of that latency, the simulator's rate limits decide by default: kube-apiserver
/// admits a write before it stores it (on 1.20.2 over loopback a 429 came back after 2.0 ms,
/// a 201 after 3.7 ms, medians of about 200 each; the timers here count whole milliseconds).
pub const DEFAULT_ADMISSION_LATENCY_MS: u64 = 2;

/// `throttled_first_5s` counts the 429s of this long from the start.
const EARLY: Duration = Duration::from_secs(5);

/// Options of `kevents bench fleet`.
#[derive(Args, Debug, Clone)]
pub struct FleetArgs {
    /// Pipelines (each with its own write budget, in namespace `fleet-I`).
    #[arg(long, allow_negative_numbers = true, default_value_t = 8, value_parser = crate::bounds::parse::fleet_pipelines)]
    pub pipelines: usize,
    /// An `EventRateLimit` limit, `TYPE:QPS:BURST[:CACHE_SIZE]` (TYPE: Server, Namespace,
    /// User, SourceAndObject), repeatable, checked in the order given (default
    /// `Server:100:200`).
    #[arg(long = "limit", allow_hyphen_values = true, value_parser = parse_limit)]
    pub limits: Vec<RateLimit>,
    /// Occurrences of workload `api` each pipeline records (its first N; at most 3 000).
    #[arg(long, allow_negative_numbers = true, default_value_t = Workload::API.n, value_parser = crate::bounds::parse::fleet_occurrences)]
    pub occurrences: usize,
    /// The simulator's answer latency, in milliseconds.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_LATENCY_MS, value_parser = crate::bounds::parse::fleet_latency_ms)]
    pub latency_ms: u64,
    /// When, of the latency, the rate limits decide, in milliseconds: a write refused 429
    /// is answered then, one admitted at the latency (kube-apiserver admits before it
    /// stores); at least the latency: together with the store.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_ADMISSION_LATENCY_MS, value_parser = crate::bounds::parse::fleet_admission_latency_ms)]
    pub admission_latency_ms: u64,
    /// Pipelines start recording spread evenly over this many milliseconds (processes
    /// launched together do not start at once), after every pipeline is built. 80: as
    /// kube-apiserver on 2 cores answers the first writes of 8 processes started together
    /// (docs/benchmarks.md, "The start, matched").
    #[arg(long, allow_negative_numbers = true, default_value_t = 0, value_parser = crate::bounds::parse::fleet_stagger_ms)]
    pub stagger_ms: u64,
    /// Runs (one `FLEET` line each).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, value_parser = crate::bounds::parse::fleet_runs)]
    pub runs: usize,
    /// The pipelines' budgets share their law through one Lease (in memory here, each
    /// leg after the latency: `WriteBudget::join_fleet`, as `kevents bench apiserver
    /// --fleet-lease` does on a real apiserver).
    #[arg(long)]
    pub share_law: bool,
}

/// A limit, or a usage error that says the form (a value such as `-1` reaches here, not
/// clap's "unexpected argument").
fn parse_limit(s: &str) -> Result<RateLimit, String> {
    s.parse()
        .map_err(|e: kevents_sim::rate_limit::RateLimitError| {
            format!("{e} (a limit is TYPE:QPS:BURST[:CACHE_SIZE], e.g. Server:100:200)")
        })
}

/// What one pipeline did.
struct Finished {
    namespace: String,
    /// When it began recording (every pipeline built by then).
    began: Instant,
    /// When everything it recorded was written.
    ended: Instant,
    /// When it sent its first write, and when the first answer came back.
    first_write: Option<Instant>,
    first_answer: Option<Instant>,
    accepted: u64,
    requests: u64,
    throttled: u64,
    failed: u64,
    dropped: u64,
    expected: verify::Counts,
    /// The shutdown report's sentence (what was stored, failed, abandoned, dropped).
    report: String,
}

/// Runs the fleet `runs` times and prints a `FLEET` line each; exit 1 when a pipeline's
/// stored counts are not exact.
pub fn run(args: FleetArgs) -> anyhow::Result<()> {
    cluster::finish(actix::System::new().block_on(async move {
        let limits = EventRateLimits::from(if args.limits.is_empty() {
            vec![RateLimit {
                kind: kevents_sim::LimitType::Server,
                qps: 100,
                burst: 200,
                cache_size: 0,
            }]
        } else {
            args.limits.clone()
        });
        let mut all_exact = true;
        for run in 0..args.runs {
            let line = run_once(&args, &limits, run).await?;
            all_exact &= line["all_exact"] == true;
            println!("FLEET {line}");
        }
        if !all_exact {
            return Err(Failure::new(
                FailureKind::Other,
                "a pipeline's stored counts are not what it recorded (see the FLEET line)",
            )
            .into());
        }
        Ok(())
    }))
}

async fn run_once(
    args: &FleetArgs,
    limits: &EventRateLimits,
    run: usize,
) -> anyhow::Result<serde_json::Value> {
    let api = MemoryApiServer::new()
        .with_event_rate_limits(limits)
        .with_latency(Duration::from_millis(args.latency_ms))
        .with_admission_latency(Duration::from_millis(args.admission_latency_ms));
    // Every pipeline is built (and its expected counts computed) before any records: on
    // one thread a thousand take seconds to build, and the first ones would otherwise
    // have the limit to themselves meanwhile (a fleet of processes started together).
    let ready = Arc::new(Barrier::new(args.pipelines + 1));
    // The 429s of the first 5 s (the fleet's descent from its configured rates), counted
    // from when every pipeline may start.
    let early = actix_rt::spawn({
        let (api, ready) = (api.clone(), ready.clone());
        async move {
            ready.wait().await;
            actix_rt::time::sleep(EARLY).await;
            api.throttled()
        }
    });
    let lease = args
        .share_law
        .then(|| MemoryLease::new(Duration::from_millis(args.latency_ms)));
    let mut tasks = Vec::with_capacity(args.pipelines);
    for i in 0..args.pipelines {
        let stagger =
            Duration::from_millis(args.stagger_ms).mul_f64(i as f64 / args.pipelines as f64);
        tasks.push(actix_rt::spawn(pipeline(
            api.clone(),
            format!("fleet-{i}"),
            args.occurrences,
            ready.clone(),
            stagger,
            lease.clone(),
        )));
    }
    let mut done = Vec::with_capacity(tasks.len());
    for t in tasks {
        done.push(
            t.await
                .map_err(|e| anyhow::anyhow!("a pipeline's task failed: {e}"))??,
        );
    }
    let throttled_early = early
        .await
        .map_err(|e| anyhow::anyhow!("the 429 counter's task failed: {e}"))?;
    // Every pipeline's events read back from the server, against client-go's serial path.
    let stored = api.list();
    let mut exact = 0usize;
    let (mut sum_count, mut expected_sum_count) = (0i64, 0i64);
    let mut throughputs = Vec::with_capacity(done.len());
    // Each pipeline's time from its own first recording, as each process's own in
    // `throttled.py --fleet`.
    let seconds = |f: &Finished| (f.ended - f.began).as_secs_f64();
    for f in &done {
        let mine: Vec<_> = stored
            .iter()
            .filter(|e| e.metadata.namespace == f.namespace)
            .cloned()
            .collect();
        sum_count += mine.iter().map(|e| i64::from(e.count)).sum::<i64>();
        expected_sum_count += verify::sum(&f.expected);
        let ok = verify::compare(
            &verify::by_object(&mine),
            &f.expected,
            "client-go's serial path over the workload",
        );
        match ok {
            Ok(()) if f.failed == 0 && f.dropped == 0 => exact += 1,
            Ok(()) => eprintln!(
                "kevents bench fleet: {} failed {} and dropped {} writes",
                f.namespace, f.failed, f.dropped
            ),
            Err(m) => eprintln!(
                "kevents bench fleet: {}: stored counts MISMATCH: {m} ({})",
                f.namespace, f.report
            ),
        }
        throughputs.push(if seconds(f) > 0.0 {
            f.accepted as f64 / seconds(f)
        } else {
            0.0
        });
    }
    let (creates, patches) = api.request_counts();
    let accepted = creates + patches;
    let throttled = api.throttled();
    let writes = accepted + throttled;
    // The tightest limit sets the bound (every pipeline is the same user, and a Server or
    // User limit covers the whole fleet).
    let tightest = limits
        .limits
        .iter()
        .min_by_key(|l| (l.qps, l.burst))
        .copied();
    let bound = tightest.map_or(0.0, |l| {
        (accepted.saturating_sub(u64::from(l.burst))) as f64 / f64::from(l.qps)
    });
    let slowest = done.iter().map(seconds).fold(0.0, f64::max);
    let fastest = done.iter().map(seconds).fold(f64::INFINITY, f64::min);
    // The last pipeline's first recording, first write sent and first answer after the
    // first's (processes started together send their first writes tens of milliseconds
    // apart on a busy machine, and a loaded server answers them further apart).
    let spread = |first: fn(&Finished) -> Option<Instant>, digits| {
        let firsts: Vec<Instant> = done.iter().filter_map(first).collect();
        match (firsts.iter().min(), firsts.iter().max()) {
            (Some(a), Some(b)) => Some(round((*b - *a).as_secs_f64(), digits)),
            _ => None,
        }
    };
    let n = done.len();
    let ratio = |a: f64, b: f64| (b > 0.0).then(|| round(a / b, 3));
    Ok(json!({
        "limit": limits.to_string(),
        "run": run,
        "processes": n,
        "occurrences": args.occurrences,
        "latency_ms": args.latency_ms,
        "admission_latency_ms": args.admission_latency_ms,
        "stagger_ms": args.stagger_ms,
        "exact": format!("{exact} of {n}"),
        "all_exact": exact == n,
        // The stored counts of every pipeline's events, read back, and what client-go's
        // serial path stores for the same occurrences.
        "sum_count": sum_count,
        "expected_sum_count": expected_sum_count,
        "writes": writes,
        "throttled": throttled,
        "throttled_share": (writes > 0).then(|| round(throttled as f64 / writes as f64, 4)),
        "throttled_first_5s": throttled_early,
        "bound": round(bound, 2),
        "slowest": round(slowest, 2),
        "slowest_over_bound": ratio(slowest, bound),
        "fastest": round(fastest, 2),
        "fastest_over_slowest": ratio(fastest, slowest),
        "began_spread": spread(|f| Some(f.began), 2).unwrap_or(0.0),
        "first_write_spread": spread(|f| f.first_write, 3),
        "first_answer_spread": spread(|f| f.first_answer, 3),
        // Finishing times at 0, 10, ..., 100 % of the pipelines.
        "finished_deciles": deciles(done.iter().map(seconds).collect()),
        "jain": jain(&throughputs).map(|j| round(j, 4)),
        "requests": done.iter().map(|f| f.requests).sum::<u64>(),
        "pipelines_throttled": done.iter().map(|f| f.throttled).sum::<u64>(),
        "share_law": args.share_law,
        "lease_writes": lease.as_ref().map(MemoryLease::writes),
        "lease_refused": lease.as_ref().map(MemoryLease::refused),
    }))
}

/// `x` sorted, at 0, 10, ..., 100 % (nearest rank), rounded to 0.1.
fn deciles(mut x: Vec<f64>) -> Vec<f64> {
    x.sort_by(f64::total_cmp);
    if x.is_empty() {
        return Vec::new();
    }
    (0..=10)
        .map(|d| round(x[(d * (x.len() - 1) + 5) / 10], 1))
        .collect()
}

/// Jain's fairness index, `(sum x)^2 / (n * sum x^2)`: 1 when every share is equal, `1/n`
/// when one takes everything. `None` for no shares or all zero.
fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let squares: f64 = x.iter().map(|v| v * v).sum();
    (squares > 0.0).then(|| sum * sum / (x.len() as f64 * squares))
}

/// One pipeline of the fleet: built, then (once every pipeline is) records its
/// occurrences, waits until everything is written, shuts down.
async fn pipeline(
    api: MemoryApiServer,
    namespace: String,
    occurrences: usize,
    ready: Arc<Barrier>,
    stagger: Duration,
    lease: Option<MemoryLease>,
) -> anyhow::Result<Finished> {
    let w = Workload::API;
    let occs: Vec<_> = (0..occurrences.min(w.n))
        .map(|i| {
            let mut o = w.occurrence(i, EventType::Warning);
            o.object.namespace = namespace.clone();
            o
        })
        .collect();
    let options = SinkOptions::default();
    let source = EventSource::new("bench", "node");
    let expected = verify::serial_by_object(
        source.clone(),
        &occs,
        SystemClock.now(),
        options.correlator.clone(),
        options.defer_spam_tails,
    );
    let health = Arc::new(Health::default());
    let mut builder = Pipeline::builder(source);
    // A process's own budget (as the builder's default), in the fleet's Lease if shared.
    let mut link = None;
    if let Some(lease) = &lease {
        let budget = WriteBudget::new("default", BudgetOptions::default());
        link = Some(lease.spawn(budget.join_fleet()));
        builder = builder.write_budget(budget);
    }
    let pipeline = builder
        .sink(
            "apiserver",
            WatchedSink::new(api, Arc::clone(&health)),
            options,
        )
        .start();
    let recorder = pipeline.recorder();
    ready.wait().await;
    actix_rt::time::sleep(stagger).await;
    let began = Instant::now();
    for o in &occs {
        recorder.event(&o.object, EventType::Warning, &o.reason, &o.message)?;
    }
    // Polled every 20 ms (a thousand pipelines share one thread).
    let deadline = Instant::now() + Duration::from_secs(1800);
    while !is_idle(&pipeline.stats()) && Instant::now() < deadline {
        actix_rt::time::sleep(Duration::from_millis(20)).await;
    }
    // The shutdown writes what the pipeline holds (deferred spam tails, about a hundred
    // writes) at its budget's rate, its share of the limit while the others still write:
    // it gets what is left of the deadline, as `bench apiserver`'s processes do.
    let report = pipeline
        .shutdown(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_secs(30)),
        )
        .await;
    let ended = Instant::now();
    if let Some(link) = link {
        link.abort();
    }
    let t = Totals::of([&report.stats]);
    Ok(Finished {
        namespace,
        began,
        ended,
        first_write: health.first_request(),
        first_answer: health.first_answer(),
        accepted: t.sinks(|k| k.created) + t.sinks(|k| k.patched),
        requests: t.requests(),
        throttled: report.stats.budgets.iter().map(|b| b.throttled).sum(),
        failed: t.failed(),
        dropped: report.stats.dropped_total() - t.sinks(|k| k.spam_filtered),
        expected,
        report: report.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deciles_of_finishing_times() {
        let x: Vec<f64> = (0..=100).map(f64::from).collect();
        assert_eq!(
            deciles(x),
            vec![
                0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0
            ]
        );
        assert_eq!(deciles(vec![3.0]), vec![3.0; 11]);
        assert!(deciles(Vec::new()).is_empty());
    }

    #[test]
    fn jain_is_one_for_equal_shares_and_one_over_n_for_one_taker() {
        assert_eq!(jain(&[2.0, 2.0, 2.0]), Some(1.0));
        assert_eq!(jain(&[4.0, 0.0, 0.0, 0.0]), Some(0.25));
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0]), None);
    }
}

#[cfg(test)]
mod limit_flag {
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: super::FleetArgs,
    }

    #[test]
    fn a_negative_or_malformed_limit_is_refused_with_its_form() {
        for value in ["-1", "x", "Server:-1:2", ""] {
            let e = Cli::try_parse_from(["t", "--limit", value])
                .err()
                .unwrap_or_else(|| panic!("--limit {value:?} accepted"));
            assert_eq!(e.exit_code(), 2, "{value:?}: {e}");
            assert!(e.to_string().contains("TYPE:QPS:BURST"), "{value:?}: {e}");
        }
        assert!(Cli::try_parse_from(["t", "--limit", "Server:1:2"]).is_ok());
    }
}
