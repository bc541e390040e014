//! `kevents demo`: the whole actor pipeline on a realistic story.
//!
//! One pipeline (recorder -> broadcaster -> correlator -> sink actor) per component, as in a
//! cluster where the kubelet and each controller record their own events; all of them write
//! through an [`HttpSink`] to the embedded apiserver simulator (default) or to a real cluster
//! (`--kubeconfig`). The story ([`scenario::story`]) runs on a virtual clock: 30 simulated
//! minutes take a few seconds and the timestamps end at "now". After each instant of the
//! story the demo waits until every pipeline is idle, so the result does not depend on
//! scheduling. It ends with the events read back from the server, as `kubectl get events`
//! would show them, and the pipelines' counters.

pub mod scenario;
pub mod table;

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use kevents_actors::{Emit, Pipeline, RecordError, SinkOptions};
use kevents_core::{
    Clock as _, CorrelatorOptions, EventSource, SharedClock, SystemClock, Time, VirtualClock,
};
use kevents_http::{HttpConfig, HttpSink};
use kevents_sim::{SimConfig, SimHandle, Simulator};

use crate::cluster::{KubeTarget, Totals, wait_idle};

/// Options of `kevents demo`.
#[derive(Args, Debug, Clone)]
pub struct DemoArgs {
    /// Forward to the cluster of this kubeconfig instead of the embedded simulator.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long, requires = "kubeconfig")]
    pub context: Option<String>,
    /// Namespace of the story's objects and events (created with kubectl on a real cluster
    /// if missing). Default: `demo` on the simulator, `kevents-demo` on a cluster.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Real milliseconds spent per simulated minute (0: as fast as the pipeline goes).
    #[arg(long, default_value_t = 100)]
    pub pace_ms: u64,
    /// Longest message shown in the table (characters).
    #[arg(long, default_value_t = 90)]
    pub width: usize,
}

/// Runs the demo.
pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    actix::System::new().block_on(run_async(args))
}

/// The apiserver the demo writes to.
enum Target {
    Sim(SimHandle),
    Cluster(KubeTarget),
}

async fn run_async(args: DemoArgs) -> anyhow::Result<()> {
    let (target, namespace) = match &args.kubeconfig {
        Some(path) => {
            let t = KubeTarget {
                kubeconfig: path.clone(),
                context: args.context.clone(),
            };
            let ns = args
                .namespace
                .clone()
                .unwrap_or_else(|| "kevents-demo".into());
            t.ensure_namespace(&ns)?;
            (Target::Cluster(t), ns)
        }
        None => {
            let sim = Simulator::start(SimConfig::default())
                .await
                .context("starting the embedded apiserver simulator")?;
            (
                Target::Sim(sim),
                args.namespace.clone().unwrap_or_else(|| "demo".into()),
            )
        }
    };
    let sink = match &target {
        Target::Sim(sim) => HttpSink::new(
            HttpConfig::from_kubeconfig_yaml(&sim.kubeconfig(None, &namespace), None).await?,
        )?,
        Target::Cluster(t) => t.sink().await?,
    };
    let where_ = match &target {
        Target::Sim(sim) => format!("the embedded apiserver simulator at {}", sim.url()),
        Target::Cluster(_) => format!("{} (kubeconfig)", sink.base_url()),
    };

    let story = scenario::story(&namespace);
    let span = scenario::STORY_SECS;
    let now = SystemClock.now();
    let start = Time::from_unix_secs(now.unix_secs() - span as i64);
    let clock = VirtualClock::new(start);

    println!(
        "kevents demo: {} occurrences from {} components over {} simulated minutes, namespace {namespace:?}, written to {where_}",
        story.len(),
        scenario::COMPONENTS.len(),
        span / 60
    );
    let pipelines: Vec<Pipeline> = scenario::COMPONENTS
        .iter()
        .map(|component| {
            let host = if *component == "kubelet" {
                "node-1"
            } else {
                ""
            };
            let shared: SharedClock = Arc::new(clock.clone());
            Pipeline::builder(EventSource::new(*component, host))
                .clock(Arc::clone(&shared))
                .sink(
                    "apiserver",
                    sink.clone(),
                    SinkOptions {
                        // The spam filter's refill and aggregate events' timestamps follow
                        // the story's clock too.
                        correlator: CorrelatorOptions {
                            clock: Some(shared),
                            ..CorrelatorOptions::default()
                        },
                        ..SinkOptions::default()
                    },
                )
                .start()
        })
        .collect();
    let recorders: Vec<_> = pipelines.iter().map(Pipeline::recorder).collect();
    let refs: Vec<&Pipeline> = pipelines.iter().collect();

    let tty = std::io::stderr().is_terminal();
    let wall = Instant::now();
    let mut emitted = 0u64;
    let mut refused_by_caller = 0u64;
    let mut minute = 0u64;
    let mut stalled = false;
    // Steps of the same second are 1 ms apart: event names are `<object>.<unix nanos>`, so
    // two events about one object at the very same instant would collide (client-go's too).
    let mut same_second = (u64::MAX, 0i64);
    for step in &story {
        same_second = if same_second.0 == step.at_secs {
            (step.at_secs, same_second.1 + 1)
        } else {
            (step.at_secs, 0)
        };
        let t = Time::from_unix_nanos(
            start.unix_nanos() + step.at_secs as i64 * 1_000_000_000 + same_second.1 * 1_000_000,
        );
        if t != clock.now() {
            // Everything of the previous instant is written before time moves on.
            stalled |= !wait_idle(&refs, Duration::from_secs(30), |_| {}).await;
            while (minute + 1) * 60 <= step.at_secs {
                minute += 1;
                if args.pace_ms > 0 {
                    actix_rt::time::sleep(Duration::from_millis(args.pace_ms)).await;
                }
                progress(tty, minute, span, emitted, &pipelines);
            }
            clock.set(t);
        }
        emitted += 1;
        match recorders[step.component].event(
            &step.object,
            step.event_type,
            step.reason,
            &step.message,
        ) {
            Ok(Emit::Queued | Emit::Dropped(_)) => {}
            Err(RecordError::Invalid(e)) => {
                refused_by_caller += 1;
                eprintln!("invalid occurrence {}: {e}", step.reason);
            }
            Err(e) => return Err(e).context("recording"),
        }
    }
    stalled |= !wait_idle(&refs, Duration::from_secs(30), |_| {}).await;
    progress(tty, span.div_ceil(60), span, emitted, &pipelines);
    if tty {
        eprintln!();
    }
    if stalled {
        eprintln!("warning: the apiserver was slow; some writes were still pending between steps");
    }

    let mut reports = Vec::new();
    for p in pipelines {
        reports.push(p.shutdown(Duration::from_secs(30)).await);
    }
    let elapsed = wall.elapsed();
    let totals = Totals::of(reports.iter().map(|r| &r.stats));

    let mut events = sink
        .list_events(&namespace)
        .await
        .context("reading the events back")?;
    // On a real cluster, earlier runs and other writers may have left events here.
    events.retain(|e| {
        scenario::COMPONENTS.contains(&e.source.component.as_str())
            && e.first_timestamp.is_none_or(|t| t >= start)
    });

    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "\n$ kubectl get events -n {namespace}   ({} events read back from {where_})\n",
        events.len()
    )?;
    write!(out, "{}", table::render(&events, now, args.width))?;
    writeln!(
        out,
        "\npipeline counters ({} pipelines, {:.1} s):",
        reports.len(),
        elapsed.as_secs_f64()
    )?;
    let rows: [(&str, u64); 20] = [
        ("emitted", emitted),
        ("queued", totals.queued),
        ("dropped: invalid", totals.dropped_invalid),
        ("dropped: intake full", totals.dropped_intake_full),
        ("dropped: after shutdown", totals.dropped_after_shutdown),
        ("dropped: sink queue full", totals.dropped_queue_full),
        ("dropped: sink stopped", totals.dropped_closed),
        ("spam-filtered", totals.spam_filtered),
        ("aggregated", totals.aggregated),
        ("written", totals.delivered()),
        ("created", totals.created),
        ("patched", totals.patched),
        ("recreated", totals.recreated),
        ("failed", totals.failed()),
        ("failed: rejected", totals.rejected),
        ("failed: retry budget", totals.retry_exhausted),
        ("failed: abandoned", totals.abandoned),
        ("requests", totals.requests()),
        ("retries", totals.retries()),
        ("sink restarts", totals.restarts),
    ];
    for (name, value) in rows {
        writeln!(out, "  {name:<26}{value:>8}")?;
    }
    let stored_sum: i64 = events.iter().map(|e| i64::from(e.count)).sum();
    writeln!(
        out,
        "  {:<26}{:>8}\n  {:<26}{:>8}",
        "stored events",
        events.len(),
        "stored count sum",
        stored_sum
    )?;
    match totals.check(emitted - refused_by_caller) {
        Ok(()) => writeln!(
            out,
            "accounting: every occurrence is accounted for (emitted = queued + dropped; queued = spam-filtered + written + failed)"
        )?,
        Err(e) => {
            writeln!(out, "accounting: MISMATCH: {e}")?;
            anyhow::bail!("the counters do not add up: {e}");
        }
    }
    drop(out);
    if let Target::Sim(sim) = target {
        sim.shutdown().await;
    }
    Ok(())
}

/// One progress line on standard error (rewritten in place on a terminal, every five
/// simulated minutes otherwise).
fn progress(tty: bool, minute: u64, span: u64, emitted: u64, pipelines: &[Pipeline]) {
    let t = Totals::of(
        pipelines
            .iter()
            .map(|p| p.stats())
            .collect::<Vec<_>>()
            .iter(),
    );
    let line = format!(
        "[{:02}:00 / {:02}:{:02}] emitted {emitted:>4}  written {:>4} (created {:>3}, patched {:>4})  spam-filtered {:>3}  aggregated {:>3}",
        minute.min(span.div_ceil(60)),
        span / 60,
        span % 60,
        t.delivered(),
        t.created,
        t.patched,
        t.spam_filtered,
        t.aggregated,
    );
    if tty {
        eprint!("\r{line}");
    } else if minute.is_multiple_of(5) {
        eprintln!("{line}");
    }
}
