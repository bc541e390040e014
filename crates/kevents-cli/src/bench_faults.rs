//! `kevents bench faults`: an apiserver outage (the simulator refuses connections) in the
//! middle of a steady stream of events, through the whole pipeline and the [`HttpSink`].
//! Prints one JSON object: the caller's emit latency before and during the outage, the
//! deepest queues seen against their capacities, what was delivered after recovery and how
//! long that took, and what was dropped, by reason.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use kevents_actors::{IntakePolicy, Pipeline, SinkOptions, StatsSnapshot, WatcherPolicy};
use kevents_core::{EventSource, EventType};
use kevents_http::{HttpConfig, HttpSink};
use kevents_sim::workload::{Workload, peak_rss_bytes};
use kevents_sim::{SimConfig, Simulator};
use serde_json::json;

use crate::cluster::{Totals, wait_idle};

/// Options of `kevents bench faults`.
#[derive(Args, Debug, Clone)]
pub struct FaultsArgs {
    /// How long the apiserver refuses connections.
    #[arg(long, allow_negative_numbers = true, default_value_t = 60, value_parser = crate::bounds::parse::faults_outage_secs)]
    pub outage_secs: u64,
    /// Seconds of normal operation before the outage (the latency baseline).
    #[arg(long, allow_negative_numbers = true, default_value_t = 5, value_parser = crate::bounds::parse::faults_baseline_secs)]
    pub baseline_secs: u64,
    /// Occurrences per second emitted before and during the outage (workload `api`'s
    /// occurrences, in order, wrapping around).
    #[arg(long, allow_negative_numbers = true, default_value_t = 50, value_parser = crate::bounds::parse::faults_rate)]
    pub rate: u64,
    /// `coalesce`: the library's defaults (coalesce-if-full intake and sink queue of 1 000,
    /// coalescing writes, the write budget and its circuit breaker); `drop`: drop-if-full
    /// intake and sink queue of 1 000 (client-go's queues), writes coalesced all the same.
    #[arg(long, value_enum, default_value = "coalesce")]
    pub policy: FaultsPolicy,
}

/// The queue policies of `kevents bench faults`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FaultsPolicy {
    /// The library's defaults.
    Coalesce,
    /// Drop-if-full queues of 1 000.
    Drop,
}

/// Latency figures of a set of calls, in nanoseconds.
fn latency(mut ns: Vec<u64>) -> serde_json::Value {
    if ns.is_empty() {
        return json!(null);
    }
    ns.sort_unstable();
    let pick = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize];
    json!({
        "calls": ns.len(),
        "mean_ns": ns.iter().sum::<u64>() / ns.len() as u64,
        "p50_ns": pick(0.5),
        "p99_ns": pick(0.99),
        "max_ns": ns[ns.len() - 1],
    })
}

#[derive(Default)]
struct Depths {
    intake: u64,
    watcher: u64,
    /// Occurrences held in the sink chain's overflow table.
    overflow: u64,
    sink_queued: u64,
}

impl Depths {
    fn observe(&mut self, s: &StatsSnapshot) {
        self.intake = self.intake.max(s.intake_depth);
        for w in &s.watchers {
            self.watcher = self.watcher.max(w.depth);
            self.overflow = self.overflow.max(w.overflow);
        }
        for k in &s.sinks {
            self.sink_queued = self.sink_queued.max(k.queued);
        }
    }
}

/// Emits for `secs` at `per_tick` occurrences every 100 ms, sampling queue depths every
/// tick; returns the latency of every call in nanoseconds.
async fn phase(
    pipeline: &Pipeline,
    w: Workload,
    next: &mut usize,
    per_tick: usize,
    secs: u64,
    depths: &mut Depths,
) -> anyhow::Result<Vec<u64>> {
    let tick = Duration::from_millis(100);
    let recorder = pipeline.recorder();
    let mut calls = Vec::new();
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let mut at = start;
    while Instant::now() < end {
        for _ in 0..per_tick {
            let o = w.occurrence(*next % w.n, EventType::Warning);
            *next += 1;
            let t = Instant::now();
            let r = recorder.event(&o.object, EventType::Warning, &o.reason, &o.message);
            calls.push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
            r?;
        }
        depths.observe(&pipeline.stats());
        at += tick;
        let now = Instant::now();
        if at > now {
            actix_rt::time::sleep(at - now).await;
        }
    }
    Ok(calls)
}

/// Runs the scenario and prints one JSON object.
pub fn run(args: FaultsArgs) -> anyhow::Result<()> {
    let result = actix::System::new().block_on(run_async(args))?;
    println!("{result}");
    Ok(())
}

async fn run_async(args: FaultsArgs) -> anyhow::Result<serde_json::Value> {
    let sim = Simulator::start(SimConfig::default())
        .await
        .context("starting the simulator")?;
    let config = HttpConfig::from_kubeconfig_yaml(&sim.kubeconfig(None, "bench"), None)
        .await?
        .with_request_timeout(Duration::from_secs(2))
        .with_connect_timeout(Duration::from_secs(1));
    let sink = HttpSink::new(config)?;
    let intake_capacity = 1000;
    let watcher_capacity = 1000;
    let (intake, delivery) = match args.policy {
        FaultsPolicy::Coalesce => (IntakePolicy::default(), WatcherPolicy::sink_default()),
        FaultsPolicy::Drop => (
            IntakePolicy::DropIfFull {
                capacity: intake_capacity,
            },
            WatcherPolicy::DropIfFull {
                capacity: watcher_capacity,
            },
        ),
    };
    let options = SinkOptions {
        delivery,
        ..SinkOptions::default()
    };
    let retry = options.retry.clone();
    let pipeline = Pipeline::builder(EventSource::new("bench", "node"))
        .intake(intake)
        .sink("apiserver", sink, options)
        .start();
    let w = Workload::API;
    let mut next = 0usize;
    let mut depths = Depths::default();
    let per_tick = (args.rate / 10).max(1) as usize;

    let before = phase(
        &pipeline,
        w,
        &mut next,
        per_tick,
        args.baseline_secs,
        &mut depths,
    )
    .await?;
    let emitted_before = before.len();
    wait_idle(&[&pipeline], Duration::from_secs(30), |s| depths.observe(s)).await;
    let delivered_before = Totals::of([&pipeline.stats()]).delivered();

    sim.refuse_connections(None).await;
    let during = phase(
        &pipeline,
        w,
        &mut next,
        per_tick,
        args.outage_secs,
        &mut depths,
    )
    .await?;
    let emitted_during = during.len();
    let at_recovery = pipeline.stats();
    sim.accept_connections().await;
    let recovered = Instant::now();
    let idle = wait_idle(&[&pipeline], Duration::from_secs(600), |s| {
        depths.observe(s)
    })
    .await;
    let drain_secs = recovered.elapsed().as_secs_f64();
    let report = pipeline.shutdown(Duration::from_secs(30)).await;
    let t = Totals::of([&report.stats]);
    let stored = sim.events();
    let sum_count: i64 = stored.iter().map(|e| i64::from(e.count)).sum();
    let emitted = (emitted_before + emitted_during) as u64;
    let held_at_recovery = at_recovery
        .watcher("sink:apiserver")
        .map(|w| w.depth + w.overflow)
        .unwrap_or(0);
    let coalesced_watcher = report
        .stats
        .watcher("sink:apiserver")
        .map_or(0, |w| w.coalesced);
    // Every occurrence that passed the spam filter is in a stored count unless it was lost:
    // dropped at a full queue, or its write given up.
    let lost = t.pipelines(|s| s.dropped_intake_full)
        + t.sink_queues(|w| w.dropped_full)
        + t.sink_queues(|w| w.dropped_closed)
        + t.pipelines(|s| s.dropped_after_shutdown)
        + t.failed();
    let mut result = json!({
        "scenario": "outage",
        "policy": match args.policy { FaultsPolicy::Coalesce => "coalesce", FaultsPolicy::Drop => "drop" },
        "outage_secs": args.outage_secs,
        "baseline_secs": args.baseline_secs,
        "rate_per_s": args.rate,
        "retry": { "max_attempts": retry.max_attempts, "sleep_secs": retry.sleep.as_secs_f64(), "randomize_first": retry.randomize_first },
        "emitted": emitted,
        "emitted_before": emitted_before,
        "emitted_during": emitted_during,
        "emit_latency_before": latency(before),
        "emit_latency_during": latency(during),
        "intake_capacity": intake_capacity,
        "watcher_capacity": watcher_capacity,
        "max_intake_depth": depths.intake,
        "max_watcher_depth": depths.watcher,

        "max_sink_queued": depths.sink_queued,
        "held_at_recovery": held_at_recovery,
        "delivered_before_outage": delivered_before,
        "delivered_after_recovery": t.delivered() - delivered_before,
        "drain_secs": drain_secs,
        "idle_after_recovery": idle,
        "created": t.sinks(|k| k.created),
        "patched": t.sinks(|k| k.patched),
        "recreated": t.sinks(|k| k.recreated),
        "requests": t.requests(),
        "retries": t.retries(),
        "spam_filtered": t.sinks(|k| k.spam_filtered),
        "aggregated": t.sinks(|k| k.aggregated),
        "dropped_intake_full": t.pipelines(|s| s.dropped_intake_full),
        "dropped_queue_full": t.sink_queues(|w| w.dropped_full),
        "retry_exhausted": t.sinks(|k| k.retry_exhausted),
        "rejected": t.sinks(|k| k.rejected),
        "abandoned": t.sinks(|k| k.abandoned),
        "stored_events": stored.len(),
        "stored_sum_count": sum_count,
        "accounting_ok": t.check(emitted).is_ok(),
        "peak_rss_bytes": peak_rss_bytes(),
    });
    // Coalescing: what the overflow tables and the writer merged, and what was lost anyway.
    let coalescing = json!({
        "max_watcher_overflow": depths.overflow,
        "coalesced_intake": report.stats.intake_coalesced,
        "coalesced_watcher": coalesced_watcher,
        "superseded": t.sinks(|k| k.superseded),
        "circuit_opens": report.stats.budgets.iter().map(|b| b.circuit_opens).sum::<u64>(),
        "lost": lost,
    });
    if let (Some(r), serde_json::Value::Object(c)) = (result.as_object_mut(), coalescing) {
        r.extend(c);
    }
    sim.shutdown().await;
    Ok(result)
}
