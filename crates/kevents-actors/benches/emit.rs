//! The cost of the user-facing record call (`Recorder::event`) while the pipeline runs on
//! its own actix thread: chunks of 1000 calls into an intake of 1000 (so every call is
//! queued), the pipeline drained between chunks outside the timed region.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use kevents_actors::{Emit, Pipeline, SinkOptions};
use kevents_core::correlator::CorrelatorOptions;
use kevents_core::{EventSource, EventType, MemoryApiServer, ObjectReference};

fn emit(c: &mut Criterion) {
    let (tx, rx) = mpsc::channel();
    let system = std::thread::spawn(move || {
        actix::System::new().block_on(async move {
            let pipeline = Pipeline::builder(EventSource::new("bench", "node"))
                .sink(
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
                .start();
            let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
            if tx.send((pipeline, done_tx)).is_err() {
                return;
            }
            let _ = done_rx.await;
        })
    });
    let Ok((pipeline, done)) = rx.recv() else {
        return;
    };
    let recorder = pipeline.recorder();
    let pods: Vec<ObjectReference> = (0..1000)
        .map(|i| {
            ObjectReference::new("v1", "Pod", "bench", format!("pod-{i}"))
                .with_uid(format!("uid-{i}"))
        })
        .collect();

    c.bench_function("recorder_event", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            let mut done = 0u64;
            while done < iters {
                let chunk = (iters - done).min(1000);
                let start = Instant::now();
                for i in 0..chunk {
                    let r = recorder.event(
                        &pods[i as usize],
                        EventType::Normal,
                        "Reason1",
                        "message variant 0",
                    );
                    debug_assert_eq!(r, Ok(Emit::Queued));
                    std::hint::black_box(r).ok();
                }
                timed += start.elapsed();
                done += chunk;
                // Let the pipeline drain the intake (untimed).
                while pipeline.stats().intake_depth > 0 {
                    std::thread::yield_now();
                }
            }
            timed
        })
    });
    let _ = done.send(());
    let _ = system.join();
}

criterion_group!(benches, emit);
criterion_main!(benches);
