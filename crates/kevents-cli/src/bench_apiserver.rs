//! `kevents bench apiserver`: workload `api` (type Warning) through the whole pipeline and the
//! [`HttpSink`] to an apiserver, as in `docs/benchmarks.md` figure 5.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use kevents_actors::{BudgetOptions, Emit, Pipeline, RetryPolicy, SinkOptions, WriteBudget};
use kevents_core::{Clock as _, EventSource, EventType, SystemClock};
use kevents_http::{HttpConfig, HttpSink};
use kevents_runtime::fleet::FleetLease;
use kevents_sim::workload::Workload;
use kevents_sim::{SimConfig, Simulator};
use serde_json::json;

use crate::cluster::{
    self, Failure, FailureKind, Health, KubeTarget, Totals, WaitNotes, WatchedSink, round,
    validate_namespace, wait_idle,
};
use crate::verify::{self, Ledger, LedgerSink};

/// A run waits this long at most for its writes, the shutdown's included (a throttled fleet
/// of 16 writes workload `api` in about two minutes).
const RUN_DEADLINE: Duration = Duration::from_secs(300);

/// Options of `kevents bench apiserver`.
#[derive(Args, Debug, Clone)]
pub struct ApiserverArgs {
    /// The apiserver's kubeconfig. Without it the embedded simulator is used.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current context).
    #[arg(long, requires = "kubeconfig")]
    pub context: Option<String>,
    /// Namespace of the workload's objects and events (created with kubectl if missing).
    #[arg(long, default_value = "bench")]
    pub namespace: String,
    /// Writes in flight at once across different events (`SinkOptions::max_in_flight`;
    /// default: the library's, 16).
    #[arg(long, allow_negative_numbers = true, default_value_t = SinkOptions::default().max_in_flight, value_parser = crate::bounds::parse::apiserver_max_in_flight)]
    pub max_in_flight: usize,
    /// Runs (one JSON line each).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, value_parser = crate::bounds::parse::apiserver_runs)]
    pub runs: usize,
    /// Keep the namespace's existing events (by default they are deleted first, so that the
    /// read-back counts only this run's).
    #[arg(long)]
    pub keep_existing: bool,
    /// Before each run's first recording (the apiserver probed, the namespace cleared, the
    /// pipeline built), print `READY` on standard output and wait for a line on standard
    /// input (or its end): processes of a fleet started by one script then begin together.
    #[arg(long)]
    pub start_on_input: bool,
    /// `NAMESPACE/NAME` of a coordination.k8s.io Lease through which the processes of a
    /// fleet share their write law (`WriteBudget::join_fleet`, linked by `FleetLease`); the
    /// identity needs get, list, watch, create and update on it. Without it the budget
    /// adapts alone.
    #[arg(long, value_parser = parse_fleet_lease)]
    pub fleet_lease: Option<(String, String)>,
}

/// `NAMESPACE/NAME`, both checked as a Lease's.
fn parse_fleet_lease(s: &str) -> Result<(String, String), String> {
    let (ns, name) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} is not NAMESPACE/NAME"))?;
    FleetLease::new(ns, name, "check").map_err(|e| e.to_string())?;
    Ok((ns.to_owned(), name.to_owned()))
}

/// Runs the benchmark and prints one JSON object per run. The namespace is checked and the
/// apiserver probed first (reachable, credentials accepted, events listable and creatable),
/// so a dead or refusing apiserver fails within seconds with the exit code of
/// [`FailureKind`](crate::cluster::FailureKind).
pub fn run(args: ApiserverArgs) -> anyhow::Result<()> {
    cluster::finish(actix::System::new().block_on(async move {
        validate_namespace(&args.namespace)?;
        let sim;
        let (config, server) = match &args.kubeconfig {
            Some(path) => {
                let t = KubeTarget::new(path.clone(), args.context.clone());
                let config = t.config().await?;
                let version = cluster::probe_server(&config).await?;
                t.ensure_namespace(&args.namespace);
                cluster::probe_events(&config, &args.namespace).await?;
                (config, format!("kube-apiserver {}", version.git_version))
            }
            None => {
                sim = Simulator::start(SimConfig::default())
                    .await
                    .context("starting the simulator")?;
                let config =
                    HttpConfig::from_kubeconfig_yaml(&sim.kubeconfig(None, &args.namespace), None)
                        .await?;
                (config, "simulator".to_owned())
            }
        };
        let sink = HttpSink::new(config).map_err(|e| Failure::new(FailureKind::Config, e))?;
        let mut mismatched = 0;
        for _ in 0..args.runs {
            let result = run_once(&sink, &server, &args).await?;
            println!("{result}");
            if result["stored_counts_ok"] != serde_json::Value::Bool(true) {
                mismatched += 1;
            }
        }
        if mismatched > 0 {
            return Err(Failure::new(
                FailureKind::Other,
                format!(
                    "{mismatched} of {} runs stored counts that differ from what was written or expected (see stderr)",
                    args.runs
                ),
            )
            .into());
        }
        Ok(())
    }))
}

/// Prints `READY` and waits for a line on standard input, or its end (`--start-on-input`).
async fn wait_for_start() -> anyhow::Result<()> {
    use std::io::{BufRead as _, Write as _};
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY")?;
    out.flush()?;
    drop(out);
    // A blocking read off the actix thread; the line's content does not matter.
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).map(|_| ())
    })
    .await
    .context("waiting for the start line")?
    .context("reading the start line from standard input")
}

/// Deletes every event of `namespace`; returns how many.
async fn clear(sink: &HttpSink, namespace: &str) -> anyhow::Result<usize> {
    let events = sink.requests().list_events(namespace).await?;
    for e in &events {
        match sink
            .requests()
            .delete_event(namespace, &e.metadata.name)
            .await
        {
            Ok(()) => {}
            Err(err) if err.is_not_found() => {}
            Err(err) => return Err(err).context("deleting old events"),
        }
    }
    Ok(events.len())
}

async fn run_once(
    sink: &HttpSink,
    server: &str,
    args: &ApiserverArgs,
) -> anyhow::Result<serde_json::Value> {
    let deleted = if args.keep_existing {
        0
    } else {
        clear(sink, &args.namespace).await?
    };
    let w = Workload::API;
    let occurrences: Vec<_> = (0..w.n)
        .map(|i| {
            let mut o = w.occurrence(i, EventType::Warning);
            o.object.namespace = args.namespace.clone();
            o
        })
        .collect();
    let health = Arc::new(Health::default());
    let ledger = Ledger::default();
    let options = SinkOptions {
        max_in_flight: args.max_in_flight,
        ..SinkOptions::default()
    };
    let expected = verify::serial_by_object(
        EventSource::new("bench", "node"),
        &occurrences,
        SystemClock.now(),
        options.correlator.clone(),
        options.defer_spam_tails,
    );
    // The library's defaults: coalesce-if-full queues, coalescing writes, the write budget
    // (the builder's own, or the same in a fleet's Lease).
    let mut builder = Pipeline::builder(EventSource::new("bench", "node"));
    let link = match &args.fleet_lease {
        Some((ns, name)) => {
            let budget = WriteBudget::new("default", BudgetOptions::default());
            let identity = format!("{}-{}", args.namespace, std::process::id());
            let link = FleetLease::new(ns.as_str(), name.as_str(), identity)
                .map_err(|e| Failure::new(FailureKind::Config, e))?
                .spawn(sink.clone(), budget.join_fleet());
            builder = builder.write_budget(budget);
            Some(link)
        }
        None => None,
    };
    let pipeline = builder
        .sink(
            "apiserver",
            WatchedSink::new(
                LedgerSink::new(sink.clone(), ledger.clone()),
                Arc::clone(&health),
            ),
            options,
        )
        .start();
    // The apiserver's own count of event writes, before and after (`None` where /metrics is
    // not served, e.g. the simulator, or not allowed).
    let writes_before = event_writes(sink).await;
    if args.start_on_input {
        wait_for_start().await?;
    }
    let recorder = pipeline.recorder();
    let start = Instant::now();
    // When recording began by the wall clock, to line up processes started together.
    let began_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut queued = 0u64;
    for o in &occurrences {
        if let Emit::Queued =
            recorder.event(&o.object, EventType::Warning, &o.reason, &o.message)?
        {
            queued += 1;
        }
    }
    let emit_secs = start.elapsed().as_secs_f64();
    // Writes in trouble (errors, requests unanswered for 2 s) are explained on standard
    // error every few seconds.
    let retry = RetryPolicy::default();
    let mut notes = WaitNotes::new(
        Duration::from_secs(3),
        retry.sleep,
        retry.max_attempts,
        false,
    );
    let idle = wait_idle(&[&pipeline], RUN_DEADLINE, |s| {
        let h = health.report();
        if h.failing(Duration::from_secs(2)) {
            notes.note(std::slice::from_ref(s), &h);
        }
    })
    .await;
    let seconds = start.elapsed().as_secs_f64();
    // The shutdown writes what it holds (deferred spam tails: a hundred writes) at the
    // budget's rate, which in a throttled fleet is the process's share of the limit (a few
    // writes/s): it gets what is left of the run's deadline, at least 30 s.
    let report = pipeline
        .shutdown(
            RUN_DEADLINE
                .saturating_sub(start.elapsed())
                .max(Duration::from_secs(30)),
        )
        .await;
    // The final state is on the server once the shutdown has written what it holds
    // (deferred spam tails, the latest counts).
    let final_seconds = start.elapsed().as_secs_f64();
    if let Some(link) = link
        && let Err(e) = link.stop().await
    {
        eprintln!("kevents bench apiserver: the fleet's Lease link: {e}");
    }
    let t = Totals::of([&report.stats]);
    let stored = sink
        .requests()
        .list_events(&args.namespace)
        .await
        .map_err(|e| {
            Failure::new(
                FailureKind::ReadBack,
                format!(
                    "reading the events back failed: {}",
                    cluster::describe(&cluster::list_error(e))
                ),
            )
        })?;
    let sum_count: i64 = stored.iter().map(|e| i64::from(e.count)).sum();
    // What the server stored, against what the writes were answered and what client-go's
    // serial path stores (per object: names carry real instants): a count written lower
    // than it should be is still a successful write, invisible to the counters.
    let verified = verify::compare(
        &verify::counts(&stored),
        &ledger.counts(),
        "the writes' answers",
    )
    .and_then(|()| {
        verify::compare(
            &verify::by_object(&stored),
            &expected,
            "client-go's serial path over the workload",
        )
    });
    if let Err(m) = &verified {
        eprintln!("kevents bench apiserver: stored counts MISMATCH: {m}");
    }
    let counted_by_apiserver = match (writes_before, event_writes(sink).await) {
        (Some(b), Some(a)) => Some(a.saturating_sub(b)),
        _ => None,
    };
    let requests = t.requests();
    let lost = report.stats.dropped_total() - t.sinks(|k| k.spam_filtered);
    // Milliseconds after recording began, to a tenth.
    let ms_after_start =
        |t: Instant| round(t.saturating_duration_since(start).as_secs_f64() * 1000.0, 1);
    Ok(json!({
        "workload": w.name,
        "server": server,
        "max_in_flight": args.max_in_flight,
        "occurrences": w.n,
        "queued": queued,
        "requests": requests,
        // Event writes (POST, PATCH) as the apiserver counted them (`apiserver_request_total`).
        "apiserver_event_writes": counted_by_apiserver,
        "seconds": seconds,
        "final_seconds": final_seconds,
        "began_unix_ms": began_unix_ms,
        // The first write sent, in milliseconds after recording began (a fleet started
        // together sends its first writes this far apart: `throttled.py --fleet`).
        "first_write_ms": health.first_request().map(ms_after_start),
        // Its answer (or the first answer of any write), in milliseconds after recording began.
        "first_answer_ms": health.first_answer().map(ms_after_start),
        "requests_per_s": requests as f64 / seconds,
        "emit_seconds": emit_secs,
        "idle": idle,
        "created": t.sinks(|k| k.created),
        "patched": t.sinks(|k| k.patched),
        "recreated": t.sinks(|k| k.recreated),
        // Writes replaced before they started by a newer one of the same event (coalescing).
        "superseded": t.sinks(|k| k.superseded),
        // Writes that waited for the write budget (rate, 429 pause, open circuit).
        "budget_deferred": report.stats.budgets.iter().map(|b| b.deferred()).sum::<u64>(),
        "retries": t.retries(),
        "spam_filtered": t.sinks(|k| k.spam_filtered),
        "aggregated": t.sinks(|k| k.aggregated),
        "dropped": lost,
        "failed": t.failed(),
        "stored_events": stored.len(),
        "sum_count": sum_count,
        "deleted_before": deleted,
        "expected_sum_count": verify::sum(&expected),
        "stored_counts_ok": verified.is_ok(),
        "accounting_ok": t.check(w.n as u64).is_ok(),
        // 429 answers, and the write budget's rate when the run ended.
        "throttled": report.stats.budgets.iter().map(|b| b.throttled).sum::<u64>(),
        "fleet_laws_proposed": report.stats.budgets.iter().map(|b| b.fleet_laws_proposed).sum::<u64>(),
        "fleet_laws_adopted": report.stats.budgets.iter().map(|b| b.fleet_laws_adopted).sum::<u64>(),
        "budget_rate": report.stats.budgets.first().map(|b| b.rate),
    }))
}

/// The event writes the apiserver has counted so far: the sum of `apiserver_request_total`
/// over `resource="events"` and verbs `POST`, `PATCH` and `CREATE`, both event APIs.
async fn event_writes(sink: &HttpSink) -> Option<u64> {
    let text = sink.server_metrics().await.ok()?;
    Some(sum_event_writes(&text))
}

/// [`event_writes`]' sum over a metrics text.
fn sum_event_writes(text: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| l.contains(r#"resource="events""#))
        .filter(|l| {
            ["POST", "PATCH", "CREATE"]
                .iter()
                .any(|v| l.contains(&format!(r#"verb="{v}""#)))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::sum_event_writes;

    #[test]
    fn sums_event_writes_of_both_apis_only() {
        let text = r#"# HELP apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",contentType="application/json",dry_run="",group="",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 600
apiserver_request_total{code="200",component="apiserver",contentType="application/json",dry_run="",group="",resource="events",scope="resource",subresource="",verb="PATCH",version="v1"} 65
apiserver_request_total{code="200",component="apiserver",contentType="application/json",dry_run="",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="PATCH",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",contentType="application/json",dry_run="",group="",resource="events",scope="namespace",subresource="",verb="LIST",version="v1"} 9
apiserver_request_total{code="200",component="apiserver",contentType="application/json",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="PATCH",version="v1"} 7
"#;
        assert_eq!(sum_event_writes(text), 670);
    }
}
