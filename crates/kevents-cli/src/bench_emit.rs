//! `kevents bench emit`: the caller-side cost of a record call while the pipeline runs,
//! core/v1 `Recorder::event` and the events.k8s.io/v1 call (`Recorder::event_v1_note`, the
//! same arguments plus an action), measured the same way in the same process.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Args;
use k8s_openapi::api::core::v1::Pod;

use crate::counting_sink::CountingSink;
use kevents_actors::{
    EventsV1Config, IntakePolicy, Pipeline, Recorder, SinkOptions, WatcherPolicy, WriteBudget,
};
use kevents_core::core_v1::correlator::CorrelatorOptions;
use kevents_core::events_v1::Reporter;
use kevents_core::{EventFactory, EventSource, EventType, Naming, ObjectReference};
use kevents_sim::workload::{Workload, peak_rss_bytes};
use serde_json::json;

/// Options of `kevents bench emit`.
#[derive(Args, Debug, Clone)]
pub struct EmitArgs {
    /// `hot` or `wide` (see docs/benchmarks.md): the objects, reasons and messages.
    #[arg(long, default_value = "hot")]
    pub workload: String,
    /// Runs (one JSON line each).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, value_parser = crate::bounds::parse::emit_runs)]
    pub runs: usize,
    /// Calls of each kind per run (default: the workload's n).
    #[arg(long, allow_negative_numbers = true, value_parser = crate::bounds::parse::emit_n)]
    pub n: Option<usize>,
}

/// Runs the benchmark and prints one JSON object per run.
pub fn run(args: EmitArgs) -> anyhow::Result<()> {
    let mut w = Workload::by_name(&args.workload)
        .ok_or_else(|| anyhow::anyhow!("unknown workload {:?} (hot, wide, api)", args.workload))?;
    if let Some(n) = args.n {
        w.n = n;
    }
    for _ in 0..args.runs {
        let result = actix::System::new().block_on(run_once(w))?;
        println!("{result}");
    }
    Ok(())
}

#[derive(Default)]
struct Timings {
    core_ns: u128,
    bound_ns: u128,
    v1_ns: u128,
    core_with_args_ns: u128,
    pod_ns: u128,
    eventf_ns: u128,
    refused: u64,
}

/// Chunks of 1000 calls of each kind, alternating (core, v1, core building its arguments,
/// core on a recorder bound to the object, core on a k8s-openapi `Pod`, `eventf!` formatting
/// its message), so the figures see the same load. Objects,
/// reasons and messages (and the bound recorders) are built outside
/// the timed region, except for the third figure, which builds them inside as client-go's
/// harness does around `Eventf` (`fmt.Sprintf` of the pod name, uid, reason and message).
fn emit_all(recorder: Recorder, w: Workload) -> Timings {
    const CHUNK: usize = 1000;
    let objects: Vec<ObjectReference> = (0..w.objects.min(10_000)).map(|o| w.object(o)).collect();
    let reasons: Vec<String> = (0..w.reasons)
        .map(|r| w.occurrence(r * w.objects, EventType::Normal).reason)
        .collect();
    let messages: Vec<String> = (0..w.messages)
        .map(|m| {
            w.occurrence(m * w.objects * w.reasons, EventType::Normal)
                .message
        })
        .collect();
    // Bound once per object, as a controller binds one per object it reconciles (untimed).
    let bound: Vec<_> = objects.iter().map(|o| recorder.for_object(o)).collect();
    // The same objects as the typed objects a kube-rs controller holds.
    let pods: Vec<Pod> = objects.iter().map(pod).collect();
    let pick = |j: usize| {
        (
            &objects[j % objects.len()],
            reasons[(j / w.objects) % w.reasons].as_str(),
            messages[(j / (w.objects * w.reasons)) % w.messages].as_str(),
        )
    };
    let mut t = Timings::default();
    let mut ok = |r: Result<kevents_actors::Emit, kevents_actors::RecordError>| {
        if !matches!(r, Ok(e) if e.is_queued()) {
            t.refused += 1;
        }
    };
    let (mut core_ns, mut v1_ns, mut args_ns, mut bound_ns) = (0, 0, 0, 0);
    let (mut pod_ns, mut eventf_ns) = (0, 0);
    let mut i = 0;
    while i < w.n {
        let end = (i + CHUNK).min(w.n);
        let start = Instant::now();
        for j in i..end {
            let (o, reason, message) = pick(j);
            ok(recorder.event(o, EventType::Normal, reason, message));
        }
        core_ns += start.elapsed().as_nanos();
        let start = Instant::now();
        for j in i..end {
            let (o, reason, message) = pick(j);
            ok(recorder
                .events_v1()
                .event(o, None, EventType::Normal, reason, "Bench", message));
        }
        v1_ns += start.elapsed().as_nanos();
        let start = Instant::now();
        for j in i..end {
            let o = j % w.objects;
            let mut pod = ObjectReference::new("v1", "Pod", "bench", format!("pod-{o}"));
            pod.uid = format!("uid-{o}");
            let reason = format!("Reason{}", (j / w.objects) % w.reasons);
            let message = format!(
                "message variant {}",
                (j / (w.objects * w.reasons)) % w.messages
            );
            ok(recorder.event(&pod, EventType::Normal, &reason, &message));
        }
        args_ns += start.elapsed().as_nanos();
        let start = Instant::now();
        for j in i..end {
            let (_, reason, message) = pick(j);
            ok(match &bound[j % objects.len()] {
                Ok(b) => b.event(EventType::Normal, reason, message),
                Err(e) => Err(e.clone()),
            });
        }
        bound_ns += start.elapsed().as_nanos();
        let start = Instant::now();
        for j in i..end {
            let (_, reason, message) = pick(j);
            ok(recorder.event(&pods[j % pods.len()], EventType::Normal, reason, message));
        }
        pod_ns += start.elapsed().as_nanos();
        // client-go's `Eventf`: the message formatted by the call.
        let start = Instant::now();
        for j in i..end {
            let (o, reason, _) = pick(j);
            let variant = (j / (w.objects * w.reasons)) % w.messages;
            ok(kevents_actors::eventf!(
                recorder,
                o,
                EventType::Normal,
                reason,
                "message variant {variant}"
            ));
        }
        eventf_ns += start.elapsed().as_nanos();
        i = end;
    }
    t.core_ns = core_ns;
    t.v1_ns = v1_ns;
    t.core_with_args_ns = args_ns;
    t.bound_ns = bound_ns;
    t.pod_ns = pod_ns;
    t.eventf_ns = eventf_ns;
    t
}

/// `r` as a k8s-openapi `Pod` (the workload's objects are pods).
fn pod(r: &ObjectReference) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some(r.name.clone());
    pod.metadata.namespace = Some(r.namespace.clone());
    pod.metadata.uid = Some(r.uid.clone());
    pod
}

async fn run_once(w: Workload) -> anyhow::Result<serde_json::Value> {
    let sink = CountingSink::default();
    let arbiter = actix::Arbiter::new();
    let pipeline = Pipeline::builder(EventSource::new("bench", "node"))
        .sink_arbiter(arbiter.handle())
        .factory(EventFactory {
            source: EventSource::new("bench", "node"),
            naming: Naming::Legacy,
            reporting_fields: false,
        })
        .events_v1(EventsV1Config::new(Reporter::with_instance(
            "bench", "node",
        )))
        .intake(IntakePolicy::Unbounded)
        .sink(
            "count",
            sink.clone(),
            SinkOptions {
                // Spam filter effectively off.
                correlator: CorrelatorOptions {
                    burst_size: 1 << 30,
                    ..CorrelatorOptions::default()
                },
                delivery: WatcherPolicy::Backpressure { capacity: 1000 },
                // One write per result and no pacing, as in `bench pipeline`: the sink side
                // keeps up the same way in every run.
                coalesce: false,
                budget: Some(WriteBudget::off()),
                ..SinkOptions::default()
            },
        )
        .sink_events_v1(
            "count-v1",
            sink.clone(),
            kevents_actors::events_v1::SinkOptions {
                delivery: WatcherPolicy::Backpressure { capacity: 1000 },
                coalesce: false,
                budget: Some(WriteBudget::off()),
                ..kevents_actors::events_v1::SinkOptions::default()
            },
        )
        .start();
    let recorder = pipeline.recorder();
    let t = actix_rt::task::spawn_blocking(move || emit_all(recorder, w)).await?;
    let report = pipeline.shutdown(Duration::from_secs(600)).await;
    arbiter.stop();
    let n = w.n.max(1) as f64;
    let core = t.core_ns as f64 / n;
    let v1 = t.v1_ns as f64 / n;
    Ok(json!({
        "workload": w.name,
        "n": w.n,
        "core_emit_ns": core,
        "v1_emit_ns": v1,
        "v1_over_core": v1 / core,
        "core_emit_with_args_ns": t.core_with_args_ns as f64 / n,
        "bound_emit_ns": t.bound_ns as f64 / n,
        "pod_emit_ns": t.pod_ns as f64 / n,
        "eventf_emit_ns": t.eventf_ns as f64 / n,
        "refused": t.refused,
        "delivered": sink.writes.load(Ordering::Relaxed),
        "dropped_intake_full": report.stats.dropped_intake_full,
        "shutdown_completed": report.completed,
        "peak_rss_bytes": peak_rss_bytes(),
    }))
}
