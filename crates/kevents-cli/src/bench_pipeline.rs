//! `kevents bench pipeline`: workload `hot` or `wide` through the whole actor pipeline
//! (recorder -> broadcaster -> correlator -> a sink that only counts), as in
//! `docs/benchmarks.md` figures 2-4.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};

use crate::counting_sink::CountingSink;
use kevents_actors::{Emit, IntakePolicy, Pipeline, SinkOptions, WatcherPolicy, WriteBudget};
use kevents_core::core_v1::correlator::CorrelatorOptions;
use kevents_core::{EventFactory, EventSource, EventType, Naming, ObjectReference};
use kevents_sim::workload::{Workload, peak_rss_bytes};
use serde_json::json;

/// Delivery policy of the benchmark pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Policy {
    /// Intake and sink watcher drop-if-full (client-go's queue sizes by default: 1000 each).
    Drop,
    /// Sink watcher with backpressure, unbounded intake: the caller never blocks and
    /// nothing is lost.
    Backpressure,
    /// The library's defaults: intake and sink watcher coalesce-if-full (1000 slots each by
    /// default), overflow merged by identity, writes coalesced per event.
    Coalesce,
}

impl Policy {
    fn as_str(self) -> &'static str {
        match self {
            Policy::Drop => "drop",
            Policy::Backpressure => "backpressure",
            Policy::Coalesce => "coalesce",
        }
    }
}

/// Options of `kevents bench pipeline`.
#[derive(Args, Debug, Clone)]
pub struct PipelineArgs {
    /// `hot` or `wide` (see docs/benchmarks.md).
    #[arg(long, default_value = "hot")]
    pub workload: String,
    /// `drop`, `backpressure` or `coalesce`.
    #[arg(long, value_enum, default_value = "drop")]
    pub policy: Policy,
    /// Runs (one JSON line each; run separate processes for independent peak RSS figures).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, value_parser = crate::bounds::parse::pipeline_runs)]
    pub runs: usize,
    /// Override the number of occurrences.
    #[arg(long, allow_negative_numbers = true, value_parser = crate::bounds::parse::pipeline_n)]
    pub n: Option<usize>,
    /// Intake capacity for `--policy drop` and `--policy coalesce`.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1000, value_parser = crate::bounds::parse::pipeline_intake_capacity)]
    pub intake_capacity: usize,
    /// Overflow table entries (intake and sink watcher) for `--policy coalesce`.
    #[arg(long, allow_negative_numbers = true, default_value_t = kevents_actors::DEFAULT_OVERFLOW_ENTRIES, value_parser = crate::bounds::parse::pipeline_overflow)]
    pub overflow: usize,
    /// Sink watcher queue capacity (both policies).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1000, value_parser = crate::bounds::parse::pipeline_watcher_capacity)]
    pub watcher_capacity: usize,
    /// Run the sink chain's correlator on its own arbiter thread (`true`) or on the same
    /// thread as the recorder and the broadcaster (`false`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub sink_thread: bool,
    /// Run the sink chain's writer (the sink actor) on an arbiter thread of its own
    /// (`PipelineBuilder::writer_arbiter`; `true`) or on the thread of the recorder and the
    /// broadcaster (`false`).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub writer_thread: bool,
}

/// Runs the benchmark and prints one JSON object per run.
pub fn run(args: PipelineArgs) -> anyhow::Result<()> {
    let mut w = Workload::by_name(&args.workload)
        .ok_or_else(|| anyhow::anyhow!("unknown workload {:?} (hot, wide, api)", args.workload))?;
    if let Some(n) = args.n {
        w.n = n;
    }
    for _ in 0..args.runs {
        let result = actix::System::new().block_on(run_once(w, args.clone()))?;
        println!("{result}");
    }
    Ok(())
}

struct Emitted {
    emit_ns: u128,
    queued: u64,
    dropped: u64,
}

/// Emits every occurrence as fast as possible from one thread. The workload's objects,
/// reasons and messages are built outside the timed region (all of them up front when there
/// are few distinct objects, as in `hot`; otherwise the objects of each chunk of calls just
/// before it); the timed part is the recorder call itself.
fn emit_all(recorder: kevents_actors::Recorder, w: Workload) -> anyhow::Result<Emitted> {
    const CHUNK: usize = 1000;
    const PREBUILT_OBJECTS: usize = 10_000;
    let mut out = Emitted {
        emit_ns: 0,
        queued: 0,
        dropped: 0,
    };
    // Occurrence `i` uses object `i % objects`, reason `(i / objects) % reasons`, message
    // `(i / (objects * reasons)) % messages` (`Workload::occurrence`, which builds them here).
    let reasons: Vec<String> = (0..w.reasons)
        .map(|r| w.occurrence(r * w.objects, EventType::Normal).reason)
        .collect();
    let messages: Vec<String> = (0..w.messages)
        .map(|m| {
            w.occurrence(m * w.objects * w.reasons, EventType::Normal)
                .message
        })
        .collect();
    let object = |o: usize| w.object(o);
    let prebuilt: Vec<ObjectReference> = if w.objects <= PREBUILT_OBJECTS {
        (0..w.objects).map(object).collect()
    } else {
        Vec::new()
    };
    let mut chunk: Vec<ObjectReference> = Vec::with_capacity(CHUNK);
    let mut i = 0;
    while i < w.n {
        let end = (i + CHUNK).min(w.n);
        if prebuilt.is_empty() {
            chunk.clear();
            chunk.extend((i..end).map(|j| object(j % w.objects)));
        }
        let start = Instant::now();
        for j in i..end {
            let o = if prebuilt.is_empty() {
                &chunk[j - i]
            } else {
                &prebuilt[j % w.objects]
            };
            let reason = &reasons[(j / w.objects) % w.reasons];
            let message = &messages[(j / (w.objects * w.reasons)) % w.messages];
            match recorder.event(o, EventType::Normal, reason, message)? {
                Emit::Queued => out.queued += 1,
                Emit::Dropped(_) => out.dropped += 1,
            }
        }
        out.emit_ns += start.elapsed().as_nanos();
        i = end;
    }
    Ok(out)
}

async fn run_once(w: Workload, args: PipelineArgs) -> anyhow::Result<serde_json::Value> {
    let sink = CountingSink::tracking(w.n);
    let (intake, delivery) = match args.policy {
        Policy::Drop => (
            IntakePolicy::DropIfFull {
                capacity: args.intake_capacity,
            },
            WatcherPolicy::DropIfFull {
                capacity: args.watcher_capacity,
            },
        ),
        Policy::Backpressure => (
            IntakePolicy::Unbounded,
            WatcherPolicy::Backpressure {
                capacity: args.watcher_capacity,
            },
        ),
        Policy::Coalesce => (
            IntakePolicy::CoalesceIfFull {
                capacity: args.intake_capacity,
                overflow: args.overflow,
            },
            WatcherPolicy::CoalesceIfFull {
                capacity: args.watcher_capacity,
                overflow: args.overflow,
            },
        ),
    };
    // `drop` and `backpressure`: one write per correlator result, as client-go does, so
    // `pipeline_delivered` and delivered/s compare like for like. `coalesce`: the library's
    // write coalescing too. No write budget either way (the sink is not a server).
    let coalesce_writes = args.policy == Policy::Coalesce;
    let arbiter = args.sink_thread.then(actix::Arbiter::new);
    let writer = args.writer_thread.then(actix::Arbiter::new);
    let mut builder = Pipeline::builder(EventSource::new("bench", "node"));
    if let Some(a) = &writer {
        builder = builder.writer_arbiter(a.handle());
    }
    if let Some(a) = &arbiter {
        builder = builder.sink_arbiter(a.handle());
    }
    let pipeline = builder
        .factory(EventFactory {
            source: EventSource::new("bench", "node"),
            naming: Naming::Legacy,
            reporting_fields: false,
        })
        .intake(intake)
        .sink(
            "count",
            sink.clone(),
            SinkOptions {
                // Spam filter effectively off.
                correlator: CorrelatorOptions {
                    burst_size: 1 << 30,
                    ..CorrelatorOptions::default()
                },
                delivery,
                coalesce: coalesce_writes,
                budget: Some(WriteBudget::off()),
                ..SinkOptions::default()
            },
        )
        .start();
    let recorder = pipeline.recorder();
    let start = Instant::now();
    let emitted = actix_rt::task::spawn_blocking(move || emit_all(recorder, w)).await??;
    let report = pipeline.shutdown(Duration::from_secs(600)).await;
    let elapsed = start.elapsed();
    for a in [arbiter, writer].into_iter().flatten() {
        a.stop();
    }
    let delivered = sink.writes.load(Ordering::Relaxed);
    let stored_count_sum = sink.stored_count_sum();
    let s = &report.stats;
    let sink_stats = s.sink("count").cloned().unwrap_or_default();
    let watcher_dropped = s.watcher("sink:count").map(|w| w.dropped_full).unwrap_or(0);
    Ok(json!({
        "workload": w.name,
        "policy": args.policy.as_str(),
        "n": w.n,
        "intake_capacity": match intake {
            IntakePolicy::DropIfFull { capacity } | IntakePolicy::CoalesceIfFull { capacity, .. } => Some(capacity),
            IntakePolicy::Unbounded => None,
        },
        "watcher_capacity": args.watcher_capacity,
        "sink_thread": args.sink_thread,
        "writer_thread": args.writer_thread,
        "emit_ns_per_event": emitted.emit_ns as f64 / w.n.max(1) as f64,
        "pipeline_delivered": delivered,
        "writes": delivered,
        "stored_events": sink.stored_events(),
        "stored_count_sum": stored_count_sum,
        // Occurrences not reflected in a stored count (the spam filter is off).
        "pipeline_lost": (w.n as u64).saturating_sub(stored_count_sum),
        "pipeline_events_per_s": delivered as f64 / elapsed.as_secs_f64(),
        // Occurrences reflected in stored counts per second (with one write per occurrence,
        // as client-go makes, the same as delivered/s).
        "pipeline_counted_per_s": stored_count_sum as f64 / elapsed.as_secs_f64(),
        "pipeline_seconds": elapsed.as_secs_f64(),
        "dropped_intake_full": s.dropped_intake_full,
        "dropped_watcher_full": watcher_dropped,
        "coalesced_intake": s.intake_coalesced,
        "coalesced_watcher": s.watcher("sink:count").map(|w| w.coalesced).unwrap_or(0),
        "superseded_writes": sink_stats.superseded,
        "spam_filtered": sink_stats.spam_filtered,
        "aggregated": sink_stats.aggregated,
        "created": sink_stats.created,
        "patched": sink_stats.patched,
        "emit_queued": emitted.queued,
        "emit_dropped": emitted.dropped,
        "shutdown_completed": report.completed,
        "peak_rss_bytes": peak_rss_bytes(),
    }))
}
