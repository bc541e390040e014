//! `kevents demo`: the whole actor pipeline on a realistic story.
//!
//! One pipeline (recorder -> broadcaster -> correlator -> sink actor) per component, as in a
//! cluster where the kubelet and each controller record their own events; all of them write
//! through an [`HttpSink`] to the embedded apiserver simulator (default) or to a real cluster
//! (`--kubeconfig`). Before anything is recorded, the namespace is checked and the apiserver
//! probed (reachable, credentials accepted, events listable and creatable), so a dead or
//! refusing cluster is reported within seconds. The story ([`scenario::story`]) runs on a
//! virtual clock: 30 simulated minutes take a few seconds and the timestamps end at "now".
//! After each instant of the story the demo waits until every pipeline is idle, so the result
//! does not depend on scheduling, unless the writes are in trouble (errors, or requests
//! without an answer): then it only waits for the correlators, says on standard error why
//! writes are waiting, and moves on. It ends with the events read back from the server, as
//! `kubectl get events` would show them (every server string escaped), and the pipelines'
//! counters, which are printed whatever happened. The exit code says how it went
//! ([`FailureKind`]).

pub mod run;
pub mod scenario;
pub mod table;

use std::io::{IsTerminal as _, Write as _};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use kevents_actors::{
    Classifier, IntakePolicy, Pipeline, RetryPolicy, ShutdownReport, SinkOptions, StatsSnapshot,
    WatcherPolicy, WriteBudget,
};
use kevents_core::{
    Clock as _, CorrelatorOptions, Event, EventSink, EventSource, SharedClock, SystemClock, Time,
    VirtualClock,
};
use kevents_http::{HttpConfig, HttpSink};
use kevents_sim::{MemoryApiServer, SimConfig, SimHandle, Simulator};

use crate::cluster::{
    self, Failure, FailureKind, Health, KubeTarget, Totals, WaitNotes, WatchedSink, is_idle,
    one_line,
};
use crate::sanitize;
use crate::verify::{self, Ledger, LedgerSink};
use scenario::Step;

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
    #[arg(long, allow_negative_numbers = true, default_value_t = 100, value_parser = crate::bounds::parse::demo_pace_ms)]
    pub pace_ms: u64,
    /// Longest message shown in the table (characters).
    #[arg(long, allow_negative_numbers = true, default_value_t = 90, value_parser = crate::bounds::parse::demo_width)]
    pub width: usize,
}

/// Longest wait at one instant of the story while the writes are healthy.
const STEP_WAIT: Duration = Duration::from_secs(30);
/// A request without an answer for this long means the writes are in trouble.
const SLOW_REQUEST: Duration = Duration::from_secs(2);
/// A wait longer than this is explained on standard error.
const EXPLAIN_AFTER: Duration = Duration::from_secs(2);
/// At most one "writes waiting" note this often.
const NOTE_EVERY: Duration = Duration::from_secs(3);
/// Longest wait for the last writes after the story.
const DRAIN_WAIT: Duration = Duration::from_secs(30);
/// The wait for the last writes ends early when they are failing and none succeeded for
/// this long.
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);
/// Shutdown deadline when writes are still pending (they are then abandoned, and counted).
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(5);
/// Longest read-back of the events (every page).
const READ_BACK_TIMEOUT: Duration = Duration::from_secs(30);
/// Refused occurrences reported one by one; the rest are counted.
const REFUSALS_SHOWN: u64 = 3;

/// The queue and write policies a story is played with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policies {
    /// client-go's: drop-if-full queues of 1 000, one write per correlator result, no write
    /// budget, client-go's error classification, spam-filtered tails skipped.
    ClientGo,
    /// kevents' defaults (what the demo writes to the apiserver with): deferred spam tails
    /// included (`SinkOptions::defer_spam_tails`).
    Defaults,
    /// kevents' defaults without deferred spam tails: the spam filter's tails skipped, as
    /// client-go does.
    TailsSkipped,
}

impl Policies {
    fn intake(self) -> IntakePolicy {
        match self {
            Policies::ClientGo => IntakePolicy::DropIfFull { capacity: 1000 },
            Policies::Defaults | Policies::TailsSkipped => IntakePolicy::default(),
        }
    }

    fn sink_options(self, correlator: CorrelatorOptions) -> SinkOptions {
        let defaults = SinkOptions {
            correlator,
            retry: RetryPolicy::default(),
            ..SinkOptions::default()
        };
        match self {
            Policies::ClientGo => SinkOptions {
                delivery: WatcherPolicy::DropIfFull { capacity: 1000 },
                coalesce: false,
                defer_spam_tails: false,
                budget: Some(WriteBudget::off()),
                retry: RetryPolicy {
                    classifier: Classifier::ClientGo,
                    ..RetryPolicy::default()
                },
                ..defaults
            },
            Policies::Defaults => defaults,
            Policies::TailsSkipped => SinkOptions {
                defer_spam_tails: false,
                ..defaults
            },
        }
    }
}

/// Runs the demo.
pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    cluster::finish(actix::System::new().block_on(run_async(args)))
}

/// The apiserver the demo writes to.
enum Target {
    Sim(SimHandle),
    Cluster,
}

async fn run_async(args: DemoArgs) -> anyhow::Result<()> {
    let namespace = args.namespace.clone().unwrap_or_else(|| {
        if args.kubeconfig.is_some() {
            "kevents-demo".into()
        } else {
            "demo".into()
        }
    });
    cluster::validate_namespace(&namespace)?;
    let (target, config, server, version) = match &args.kubeconfig {
        Some(path) => {
            let t = KubeTarget::new(path.clone(), args.context.clone());
            let config = t.config().await?;
            let version = cluster::probe_server(&config).await?;
            t.ensure_namespace(&namespace);
            cluster::probe_events(&config, &namespace).await?;
            let server = format!("{} (kubeconfig)", config.cluster_url);
            let version = format!(
                ", kube-apiserver {}",
                sanitize::cell(&version.git_version, 40)
            );
            (Target::Cluster, config, server, version)
        }
        None => {
            let sim = Simulator::start(SimConfig::default())
                .await
                .context("starting the embedded apiserver simulator")?;
            let config =
                HttpConfig::from_kubeconfig_yaml(&sim.kubeconfig(None, &namespace), None).await?;
            cluster::probe_server(&config).await?;
            cluster::probe_events(&config, &namespace).await?;
            let server = format!("the embedded apiserver simulator at {}", sim.url());
            (Target::Sim(sim), config, server, String::new())
        }
    };
    let where_ = one_line(&server);
    let sink = HttpSink::new(config).map_err(|e| Failure::new(FailureKind::Config, e))?;

    let story = scenario::story(&namespace);
    let span = scenario::STORY_SECS;
    let now = SystemClock.now();
    // Earlier runs into this namespace: their run identifiers are not used again.
    let used = match read_back(&sink, &namespace).await {
        Ok(events) => events
            .iter()
            .filter_map(|e| run::run_id_of(&e.metadata.name))
            .collect(),
        Err(_) => Default::default(),
    };
    let run = run::choose_run_id(&used);
    let start = run::story_start(now.unix_secs() - span as i64, run);
    let clock = VirtualClock::new(start);

    println!(
        "kevents demo: {} occurrences from {} components over {} simulated minutes, namespace {namespace:?}, run {run}, written to {where_}{version}",
        story.len(),
        scenario::COMPONENTS.len(),
        span / 60
    );
    let health = Arc::new(Health::default());
    let ledger = Ledger::default();
    let played = play(
        &story,
        &WatchedSink::new(
            LedgerSink::new(sink.clone(), ledger.clone()),
            Arc::clone(&health),
        ),
        &health,
        &clock,
        Duration::from_millis(args.pace_ms),
        std::io::stderr().is_terminal(),
        Policies::Defaults,
    )
    .await;
    let totals = played.totals();

    let read = read_back(&sink, &namespace).await.map(|mut events| {
        // On a real cluster, earlier runs and other writers may have left events here: only
        // this run's are shown (its identifier is in every name).
        events.retain(|e| {
            scenario::COMPONENTS.contains(&e.source.component.as_str())
                && run::run_id_of(&e.metadata.name) == Some(run)
        });
        events
    });

    let mut out = std::io::stdout().lock();
    match &read {
        Ok(events) => {
            writeln!(
                out,
                "\n$ kubectl get events -n {namespace}   ({} events read back from {where_})\n",
                events.len()
            )?;
            write!(out, "{}", table::render(events, now, args.width))?;
        }
        Err(why) => writeln!(
            out,
            "\n$ kubectl get events -n {namespace}   (reading the events back from {where_} failed: {})",
            one_line(why)
        )?,
    }
    writeln!(
        out,
        "\npipeline counters ({} pipelines, {:.1} s):",
        played.reports.len(),
        played.elapsed.as_secs_f64()
    )?;
    let rows: [(&str, u64); 22] = [
        ("emitted", played.emitted),
        ("queued", totals.queued()),
        ("dropped: invalid", totals.pipelines(|s| s.dropped_invalid)),
        (
            "dropped: intake full",
            totals.pipelines(|s| s.dropped_intake_full),
        ),
        (
            "dropped: after shutdown",
            totals.pipelines(|s| s.dropped_after_shutdown),
        ),
        (
            "dropped: sink queue full",
            totals.sink_queues(|w| w.dropped_full),
        ),
        (
            "dropped: sink stopped",
            totals.sink_queues(|w| w.dropped_closed),
        ),
        ("spam-filtered", totals.sinks(|k| k.spam_filtered)),
        ("deferred", totals.sinks(|k| k.deferred)),
        ("aggregated", totals.sinks(|k| k.aggregated)),
        ("written", totals.delivered()),
        ("created", totals.sinks(|k| k.created)),
        ("patched", totals.sinks(|k| k.patched)),
        ("recreated", totals.sinks(|k| k.recreated)),
        ("failed", totals.failed()),
        ("failed: rejected", totals.sinks(|k| k.rejected)),
        ("failed: retry budget", totals.sinks(|k| k.retry_exhausted)),
        ("failed: abandoned", totals.sinks(|k| k.abandoned)),
        ("superseded", totals.sinks(|k| k.superseded)),
        ("requests", totals.requests()),
        ("retries", totals.retries()),
        ("sink restarts", totals.sinks(|k| k.restarts)),
    ];
    for (name, value) in rows {
        writeln!(out, "  {name:<26}{value:>8}")?;
    }
    if let Ok(events) = &read {
        let stored_sum: i64 = events.iter().map(|e| i64::from(e.count)).sum();
        writeln!(
            out,
            "  {:<26}{:>8}\n  {:<26}{:>8}",
            "stored events",
            events.len(),
            "stored count sum",
            stored_sum
        )?;
    }
    drop(out);
    let (side_by_side, in_memory) = compare(&story, start, played.emitted).await;
    // The counters cannot see a count written lower than it should be (still one successful
    // write): the stored counts are checked against what the sink was answered and against
    // the same story's in-memory run, event by event.
    // What was stored is compared with the in-memory run only when every write succeeded
    // and nothing was dropped (otherwise the run fails as not written, below, and says why).
    let complete = totals.failed()
        + totals.refused()
        + totals.sink_queues(|w| w.dropped_full + w.dropped_closed)
        == 0;
    let accounted = accounting(&played).and_then(|()| match &read {
        Ok(events) => {
            let stored = verify::counts(events);
            // Other writers may use the namespace: events this run did not write are theirs.
            verify::compare_in(&stored, &ledger.counts(), "the writes' answers", false)
                .and_then(|()| {
                    if complete {
                        verify::compare_in(
                            &stored,
                            &in_memory,
                            "the in-memory run of the story",
                            false,
                        )
                    } else {
                        Ok(())
                    }
                })
                .map_err(|m| m.to_string())
        }
        Err(_) => Ok(()),
    });
    let mut out = std::io::stdout().lock();
    match &accounted {
        Ok(()) => writeln!(
            out,
            "accounting: every occurrence is accounted for (emitted = queued + dropped; queued = spam-filtered + deferred + written + failed + superseded){}",
            if read.is_ok() && complete {
                "; every stored count read back is the one written and the one the in-memory run stores"
            } else {
                ""
            }
        )?,
        Err(e) => writeln!(out, "accounting: MISMATCH: {e}")?,
    }
    write!(out, "{side_by_side}")?;
    drop(out);
    if let Target::Sim(sim) = target {
        sim.shutdown().await;
    }

    if let Err(e) = accounted {
        return Err(Failure::new(
            FailureKind::Other,
            format!("the counters do not add up: {e}"),
        )
        .into());
    }
    let dropped = totals.pipelines(|s| s.dropped_invalid)
        + totals.pipelines(|s| s.dropped_intake_full)
        + totals.pipelines(|s| s.dropped_after_shutdown)
        + totals.sink_queues(|w| w.dropped_full)
        + totals.sink_queues(|w| w.dropped_closed);
    if dropped + totals.failed() > 0 {
        let last_error = health
            .report()
            .last_error
            .map(|(_, why)| format!("; last apiserver error: {why}"))
            .unwrap_or_default();
        return Err(Failure::new(
            FailureKind::NotWritten,
            format!(
                "the story was not fully written: {} writes failed (rejected {}, retry budget used up {}, abandoned at shutdown {}) and {dropped} occurrences were dropped before a write{last_error}",
                totals.failed(),
                totals.sinks(|k| k.rejected),
                totals.sinks(|k| k.retry_exhausted),
                totals.sinks(|k| k.abandoned),
            ),
        )
        .into());
    }
    if let Err(why) = read {
        return Err(Failure::new(
            FailureKind::ReadBack,
            format!(
                "the story was written, but reading the events back from {where_} failed: {why}"
            ),
        )
        .into());
    }
    Ok(())
}

/// The story played again in memory (an in-process apiserver store, no pacing) under
/// client-go's policies, kevents' defaults, and kevents' defaults without deferred spam tails:
/// requests, events stored and the sum of their counts, side by side.
/// Also returns the counts the in-memory apiserver stores under kevents' defaults (the
/// policies of the run itself), by `namespace/name`.
async fn compare(story: &[Step], start: Time, emitted: u64) -> (String, verify::Counts) {
    use std::fmt::Write as _;
    let columns = [
        ("client-go policies", Policies::ClientGo),
        ("kevents defaults", Policies::Defaults),
        ("- deferred tails", Policies::TailsSkipped),
    ];
    let mut cells: Vec<[u64; 5]> = Vec::new();
    let mut defaults = verify::Counts::new();
    for (_, policies) in columns {
        let api = MemoryApiServer::new();
        let health = Arc::new(Health::default());
        let played = play(
            story,
            &WatchedSink::new(api.clone(), Arc::clone(&health)),
            &health,
            &VirtualClock::new(start),
            Duration::ZERO,
            false,
            policies,
        )
        .await;
        let t = played.totals();
        let stored = api.list();
        if policies == Policies::Defaults {
            defaults = verify::counts(&stored);
        }
        let sum: u64 = stored
            .iter()
            .map(|e| u64::try_from(e.count).unwrap_or(0))
            .sum();
        cells.push([
            played.emitted,
            t.requests(),
            stored.len() as u64,
            sum,
            played.emitted.saturating_sub(sum),
        ]);
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nthe same story ({emitted} occurrences) under each policy, played again in memory:"
    );
    let _ = write!(out, "  {:<34}", "");
    for (name, _) in columns {
        let _ = write!(out, "{name:>20}");
    }
    out.push('\n');
    let rows = [
        "occurrences emitted",
        "requests sent",
        "events stored",
        "sum of stored counts",
        "occurrences not in a stored count",
    ];
    for (i, row) in rows.iter().enumerate() {
        let _ = write!(out, "  {row:<34}");
        for c in &cells {
            let _ = write!(out, "{:>20}", c[i]);
        }
        out.push('\n');
    }
    (out, defaults)
}

/// Every event of `namespace`, within [`READ_BACK_TIMEOUT`]; the error says why not.
async fn read_back(sink: &HttpSink, namespace: &str) -> Result<Vec<Event>, String> {
    match actix_rt::time::timeout(READ_BACK_TIMEOUT, sink.requests().list_events(namespace)).await {
        Ok(Ok(events)) => Ok(events),
        Ok(Err(e)) => Err(cluster::describe(&cluster::list_error(e))),
        Err(_) => Err(format!(
            "no answer within {}",
            cluster::secs(READ_BACK_TIMEOUT)
        )),
    }
}

/// What playing the story did.
struct Played {
    /// Recorder calls made.
    emitted: u64,
    /// Every pipeline's shutdown report.
    reports: Vec<ShutdownReport>,
    /// From the first call to the end of the shutdown.
    elapsed: Duration,
}

impl Played {
    fn totals(&self) -> Totals {
        Totals::of(self.reports.iter().map(|r| &r.stats))
    }
}

/// Checks that every call is accounted for exactly once. The pipelines count the calls
/// they refuse (`dropped: invalid`, ...) themselves, so every call made (refused ones
/// included) is checked against their counters.
fn accounting(played: &Played) -> Result<(), String> {
    played.totals().check(played.emitted)
}

/// Whether every event handed to a sink chain has been through its correlator (what may be
/// left are writes).
fn correlated(s: &StatsSnapshot) -> bool {
    let accepted: u64 = s
        .watchers
        .iter()
        .filter(|w| w.name.starts_with("sink:"))
        .map(|w| w.accepted)
        .sum();
    let taken: u64 = s.sinks.iter().map(|k| k.correlated + k.abandoned).sum();
    s.intake_depth == 0 && s.broadcast == s.recorded && taken >= accepted
}

/// How long [`settle`] waits.
#[derive(Clone, Copy)]
enum Wait {
    /// Between two instants of the story: until idle, at most [`STEP_WAIT`], and only until
    /// the correlators caught up when the writes are in trouble.
    Step,
    /// After the story: until idle, at most [`DRAIN_WAIT`], ending when the writes fail and
    /// none succeeded for [`GIVE_UP_AFTER`].
    Drain,
}

/// Waits as `wait` says; returns whether every pipeline became idle. Explains on standard
/// error why writes are waiting when they are in trouble or the wait is long.
async fn settle(
    pipelines: &[&Pipeline],
    health: &Health,
    notes: &mut WaitNotes,
    wait: Wait,
) -> bool {
    let started = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        let snapshots: Vec<StatsSnapshot> = pipelines.iter().map(|p| p.stats()).collect();
        if snapshots.iter().all(is_idle) {
            return true;
        }
        let h = health.report();
        let failing = h.failing(SLOW_REQUEST);
        let waited = started.elapsed();
        if failing || waited >= EXPLAIN_AFTER {
            notes.note(&snapshots, &h);
        }
        let give_up = match wait {
            Wait::Step => (failing && snapshots.iter().all(correlated)) || waited >= STEP_WAIT,
            Wait::Drain => {
                let quiet = h.since_success.map_or(waited, |d| d.min(waited));
                (failing && quiet >= GIVE_UP_AFTER) || waited >= DRAIN_WAIT
            }
        };
        if give_up {
            return false;
        }
        actix_rt::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// Plays `story` through one pipeline per component writing to `sink`, on `clock`, then
/// waits for the last writes (bounded) and shuts the pipelines down. Never blocks longer
/// than the bounds of [`settle`] and [`SHUTDOWN_DEADLINE`], whatever the server does.
async fn play(
    story: &[Step],
    sink: &(impl EventSink + Clone),
    health: &Health,
    clock: &VirtualClock,
    pace: Duration,
    tty: bool,
    policies: Policies,
) -> Played {
    let span = scenario::STORY_SECS;
    let start = clock.now();
    let options = policies.sink_options(CorrelatorOptions::default());
    let mut notes = WaitNotes::new(
        NOTE_EVERY,
        options.retry.sleep,
        options.retry.max_attempts,
        tty,
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
                .intake(policies.intake())
                .sink(
                    "apiserver",
                    sink.clone(),
                    // The spam filter's refill and aggregate events' timestamps follow the
                    // story's clock too.
                    policies.sink_options(CorrelatorOptions {
                        clock: Some(shared),
                        ..CorrelatorOptions::default()
                    }),
                )
                .start()
        })
        .collect();
    let recorders: Vec<_> = pipelines.iter().map(Pipeline::recorder).collect();
    let refs: Vec<&Pipeline> = pipelines.iter().collect();

    let wall = Instant::now();
    let mut emitted = 0u64;
    let mut refused = 0u64;
    let mut minute = 0u64;
    let mut stalled = false;
    // Steps of the same second are 1 ms apart: event names are `<object>.<unix nanos>`, so
    // two events about one object at the very same instant would collide (client-go's too).
    let mut same_second = (u64::MAX, 0i64);
    for step in story {
        same_second = if same_second.0 == step.at_secs {
            (step.at_secs, same_second.1 + 1)
        } else {
            (step.at_secs, 0)
        };
        let t = Time::from_unix_nanos(
            start.unix_nanos() + step.at_secs as i64 * 1_000_000_000 + same_second.1 * 1_000_000,
        );
        if t != clock.now() {
            // Everything of the previous instant is written before time moves on (unless
            // the writes are in trouble).
            stalled |= !settle(&refs, health, &mut notes, Wait::Step).await;
            while (minute + 1) * 60 <= step.at_secs {
                minute += 1;
                if !pace.is_zero() {
                    actix_rt::time::sleep(pace).await;
                }
                progress(tty, minute, span, emitted, &pipelines);
            }
            clock.set(t);
        }
        emitted += 1;
        let Some(recorder) = recorders.get(step.component) else {
            continue;
        };
        // Every outcome is counted by the pipeline, refusals included.
        if let Err(e) = recorder.event(&step.object, step.event_type, step.reason, &step.message) {
            refused += 1;
            if refused <= REFUSALS_SHOWN {
                eprintln!(
                    "occurrence {} refused: {}",
                    step.reason,
                    one_line(&e.to_string())
                );
            }
        }
    }
    let drained = settle(&refs, health, &mut notes, Wait::Drain).await;
    stalled |= !drained;
    progress(tty, span.div_ceil(60), span, emitted, &pipelines);
    if tty {
        eprintln!();
    }
    if refused > REFUSALS_SHOWN {
        eprintln!(
            "... and {} more occurrences refused",
            refused - REFUSALS_SHOWN
        );
    }
    if stalled {
        eprintln!(
            "warning: the apiserver was slow or failing; writes were still pending between steps"
        );
    }
    // All pipelines at once; writes still pending at the deadline are abandoned (counted).
    let deadline = if drained {
        Duration::from_secs(30)
    } else {
        SHUTDOWN_DEADLINE
    };
    let handles: Vec<_> = pipelines
        .into_iter()
        .map(|p| actix_rt::spawn(p.shutdown(deadline)))
        .collect();
    let mut reports = Vec::new();
    for h in handles {
        match h.await {
            Ok(report) => reports.push(report),
            Err(e) => eprintln!("warning: a pipeline's shutdown failed: {e}"),
        }
    }
    Played {
        emitted,
        reports,
        elapsed: wall.elapsed(),
    }
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
        t.sinks(|k| k.created),
        t.sinks(|k| k.patched),
        t.sinks(|k| k.spam_filtered),
        t.sinks(|k| k.aggregated),
    );
    if tty {
        eprint!("\r{line}");
    } else if minute.is_multiple_of(5) {
        eprintln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use kevents_sim::MemoryApiServer;

    use super::*;

    /// Plays the first `n` steps of the story against an in-memory apiserver, the steps at
    /// the indices in `invalid` moved to a namespace the recorder refuses.
    fn play_with_invalid(n: usize, invalid: &[usize]) -> (Played, MemoryApiServer) {
        let mut story: Vec<Step> = scenario::story("demo").into_iter().take(n).collect();
        for &i in invalid {
            story[i].object.namespace = "Bad_NS".into();
        }
        let server = MemoryApiServer::new();
        let health = Arc::new(Health::default());
        let sink = WatchedSink::new(server.clone(), Arc::clone(&health));
        let clock = VirtualClock::new(Time::from_unix_secs(1_700_000_000));
        let played = actix::System::new().block_on(play(
            &story,
            &sink,
            &health,
            &clock,
            Duration::ZERO,
            false,
            Policies::Defaults,
        ));
        (played, server)
    }

    #[test]
    fn invalid_calls_are_counted_once_and_the_accounting_balances() {
        let invalid = [0, 7, 19, 20, 33];
        let (played, server) = play_with_invalid(60, &invalid);
        let t = played.totals();
        assert_eq!(played.emitted, 60);
        assert_eq!(
            t.pipelines(|s| s.dropped_invalid),
            invalid.len() as u64,
            "{t:?}"
        );
        assert_eq!(t.queued(), 60 - invalid.len() as u64, "{t:?}");
        assert_eq!(accounting(&played), Ok(()), "{t:?}");
        // And the valid ones were all written.
        assert_eq!(t.failed(), 0, "{t:?}");
        assert!(t.delivered() > 0 && !server.list().is_empty(), "{t:?}");
        assert!(
            server.list().iter().all(|e| e.metadata.namespace == "demo"),
            "an invalid occurrence was sent"
        );
    }

    #[test]
    fn accounting_catches_a_lost_call() {
        let (mut played, _) = play_with_invalid(30, &[3]);
        assert_eq!(accounting(&played), Ok(()));
        played.emitted += 1;
        assert!(accounting(&played).is_err());
    }
}
