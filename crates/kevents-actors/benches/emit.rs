//! The cost of the user-facing record calls while the pipeline runs on its own actix thread:
//! chunks of 1000 calls into an intake of 1000 (so every call is queued), the pipeline
//! drained between chunks outside the timed region.
//!
//! - `recorder_event`: core/v1 `Recorder::event` (validation, intake), into a correlator
//!   sink chain.
//! - `object_recorder_event`: the same call on an `ObjectRecorder` bound to the pod
//!   beforehand (`Recorder::for_object`).
//! - `recorder_event_v1`: events.k8s.io/v1 `Recorder::eventf_events_v1` with a literal note (event
//!   built and validated with the server's rules at the call, intake), into a series sink
//!   chain.

use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kevents_actors::{Emit, EventsV1Config, Pipeline, PipelineBuilder, SinkOptions};
use kevents_core::core_v1::correlator::CorrelatorOptions;
use kevents_core::events_v1::Reporter;
use kevents_core::{EventSource, EventType, ObjectReference};
use kevents_sim::MemoryApiServer;

/// A pipeline running in an actix System on its own thread; send on the oneshot to stop it.
struct Running {
    pipeline: Pipeline,
    done: tokio::sync::oneshot::Sender<()>,
    system: JoinHandle<()>,
}

impl Running {
    fn start(build: impl FnOnce() -> PipelineBuilder + Send + 'static) -> Option<Running> {
        let (tx, rx) = mpsc::channel();
        let system = std::thread::spawn(move || {
            actix::System::new().block_on(async move {
                let pipeline = build().start();
                let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
                if tx.send((pipeline, done_tx)).is_err() {
                    return;
                }
                let _ = done_rx.await;
            })
        });
        let (pipeline, done) = rx.recv().ok()?;
        Some(Running {
            pipeline,
            done,
            system,
        })
    }

    /// Times `chunk` calls of `call(i)` per round, draining the intake between rounds
    /// (untimed).
    fn time_calls(&self, iters: u64, mut call: impl FnMut(usize)) -> Duration {
        let mut timed = Duration::ZERO;
        let mut done = 0u64;
        while done < iters {
            let chunk = (iters - done).min(1000);
            let start = Instant::now();
            for i in 0..chunk {
                call(i as usize);
            }
            timed += start.elapsed();
            done += chunk;
            // Let the pipeline drain the intake (untimed).
            while self.pipeline.stats().intake_depth > 0 {
                std::thread::yield_now();
            }
        }
        timed
    }

    fn stop(self) {
        let _ = self.done.send(());
        let _ = self.system.join();
    }
}

fn pods() -> Vec<ObjectReference> {
    (0..1000)
        .map(|i| {
            ObjectReference::new("v1", "Pod", "bench", format!("pod-{i}"))
                .with_uid(format!("uid-{i}"))
        })
        .collect()
}

fn emit(c: &mut Criterion) {
    let pods = pods();

    let Some(core) = Running::start(|| {
        Pipeline::builder(EventSource::new("bench", "node")).sink(
            "memory",
            MemoryApiServer::new(),
            SinkOptions {
                correlator: CorrelatorOptions {
                    burst_size: 1 << 30,
                    ..CorrelatorOptions::default()
                },
                ..SinkOptions::default()
            },
        )
    }) else {
        return;
    };
    let recorder = core.pipeline.recorder();
    c.bench_function("recorder_event", |b| {
        b.iter_custom(|iters| {
            core.time_calls(iters, |i| {
                let r = recorder.event(&pods[i], EventType::Normal, "Reason1", "message variant 0");
                debug_assert_eq!(r, Ok(Emit::Queued));
                std::hint::black_box(r).ok();
            })
        })
    });
    let bound: Vec<_> = pods
        .iter()
        .filter_map(|p| recorder.for_object(p).ok())
        .collect();
    c.bench_function("object_recorder_event", |b| {
        b.iter_custom(|iters| {
            core.time_calls(iters, |i| {
                let r = bound[i].event(EventType::Normal, "Reason1", "message variant 0");
                debug_assert_eq!(r, Ok(Emit::Queued));
                std::hint::black_box(r).ok();
            })
        })
    });
    core.stop();

    let Some(v1) = Running::start(|| {
        Pipeline::builder(EventSource::new("bench", "node"))
            .events_v1(EventsV1Config::new(Reporter::with_instance(
                "kevents.io/bench",
                "bench-0",
            )))
            .sink_events_v1(
                "memory",
                MemoryApiServer::new(),
                kevents_actors::events_v1::SinkOptions::default(),
            )
    }) else {
        return;
    };
    let recorder = v1.pipeline.recorder();
    c.bench_function("recorder_event_v1", |b| {
        b.iter_custom(|iters| {
            v1.time_calls(iters, |i| {
                let r = recorder.events_v1().eventf(
                    &pods[i],
                    None,
                    EventType::Normal,
                    "Reason1",
                    "Action1",
                    format_args!("message variant 0"),
                );
                debug_assert_eq!(r, Ok(Emit::Queued));
                std::hint::black_box(r).ok();
            })
        })
    });
    v1.stop();
}

criterion_group!(benches, emit);
criterion_main!(benches);
