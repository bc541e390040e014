//! Peak memory while a pipeline holds large events for an apiserver that never answers.
//!
//! `cargo run --release -p kevents-actors --example dead_server_memory [events] [message_bytes]`
//!
//! Emits `events` (default 2 500) distinct Warning events of `message_bytes` (default 1 MiB)
//! into a pipeline with default options whose sink never answers, lets the pipeline move,
//! then prints what the queues hold, what was dropped, and the process's peak RSS (VmHWM).
//! With the default byte bounds (64 MiB for the intake, 64 MiB per watcher queue) the peak
//! stays near 64 MiB + 64 MiB whatever `events` is.

use std::time::Duration;

use kevents_actors::{Pipeline, SinkOptions};
use kevents_core::{Event, EventSink, EventSource, EventType, ObjectReference, SinkFuture};

/// A sink that never answers (a dead apiserver).
struct Dead;

impl EventSink for Dead {
    fn create(&self, _: &Event) -> SinkFuture {
        Box::pin(std::future::pending())
    }
    fn patch(&self, _: &Event, _: &[u8]) -> SinkFuture {
        Box::pin(std::future::pending())
    }
}

fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[actix::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let events: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2_500);
    let size: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1 << 20);
    let pipeline = Pipeline::builder(EventSource::new("dead-server-memory", "node"))
        .sink("dead", Dead, SinkOptions::default())
        .start();
    let recorder = pipeline.recorder();
    let message = "x".repeat(size);
    for i in 0..events {
        let pod = ObjectReference::new("v1", "Pod", "default", format!("pod-{i}"));
        let _ = recorder.event(&pod, EventType::Warning, "Big", &message);
        // A controller's reconcile loop yields between calls; so does this one.
        actix_rt::task::yield_now().await;
    }
    actix_rt::time::sleep(Duration::from_millis(200)).await;
    let s = pipeline.stats();
    let w = s.watcher("sink:dead").cloned();
    println!(
        "events {events} x {size} B: intake holds {} B, sink queue holds {:?} events / {:?} B; \
         dropped: intake full {}, queue full {:?}; peak RSS {} MiB",
        s.intake_bytes,
        w.as_ref().map(|w| w.depth),
        w.as_ref().map(|w| w.bytes),
        s.dropped_intake_full,
        w.as_ref().map(|w| w.dropped_full),
        peak_rss_bytes() >> 20,
    );
    let report = pipeline.shutdown(Duration::from_millis(100)).await;
    println!(
        "shutdown: abandoned {}",
        report.stats.sink("dead").map_or(0, |s| s.abandoned)
    );
}
