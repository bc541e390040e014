//! events.k8s.io/v1 series through the whole pipeline (recorder → intake → broadcaster →
//! series actor → sink) with 100 000 open series: the caller's emit cost, end-to-end
//! throughput, the memory of the open series, and the shutdown flush. Prints one JSON object.
//!
//! `cargo bench -p kevents-actors --bench series [-- <open_series> <repeats>]`
//! (defaults 100 000 and 1 000 000). The sink answers at once without storing anything, so
//! the figures are the pipeline's own cost.

use std::time::{Duration, Instant};

use kevents_actors::{IntakePolicy, Pipeline, WatcherPolicy};
use kevents_core::events_v1::{Event, SeriesOptions};
use kevents_core::{EventSource, EventType, ObjectReference, Stored};

/// Answers every request with "stored as sent".
struct NullSink;

impl kevents_core::events_v1::EventSink for NullSink {
    fn create_events_v1(&self, _: &Event) -> kevents_core::events_v1::SinkFuture {
        Box::pin(async { Ok(Stored::AsSent) })
    }
    fn patch_events_v1(&self, _: &Event, _: &[u8]) -> kevents_core::events_v1::SinkFuture {
        Box::pin(async { Ok(Stored::AsSent) })
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

fn arg(n: usize, default: usize) -> usize {
    std::env::args()
        .filter(|a| !a.starts_with('-'))
        .nth(n)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let open = arg(1, 100_000);
    let repeats = arg(2, 1_000_000);
    actix::System::new().block_on(async move {
        let objects: Vec<ObjectReference> = (0..open)
            .map(|i| ObjectReference::new("v1", "Pod", "bench", format!("pod-{i}")))
            .collect();
        let occ = |i: usize| {
            kevents_core::events_v1::Occurrence::new(
                objects[i % open].clone(),
                None,
                EventType::Warning,
                "BackOff",
                "Restart",
                "back-off restarting failed container",
            )
        };
        let pipeline = Pipeline::builder(EventSource::new("kevents.io/bench", "node"))
            .intake(IntakePolicy::DropIfFull { capacity: 10_000 })
            .sink_events_v1(
                "null",
                NullSink,
                kevents_actors::events_v1::SinkOptions {
                    series: SeriesOptions {
                        max_entries: open * 2,
                        ..Default::default()
                    },
                    delivery: WatcherPolicy::Backpressure { capacity: 10_000 },
                    max_in_flight: 256,
                    ..Default::default()
                },
            )
            .start();
        let r = pipeline.recorder();
        let rss_start = rss_kib();

        // Open every series: CREATE, then the series start (two writes each).
        let t = Instant::now();
        let mut caller = Duration::ZERO;
        for round in 0..2 {
            for i in 0..open {
                let c = Instant::now();
                r.events_v1().emit_wait(occ(i)).await.expect("valid");
                caller += c.elapsed();
                let _ = round;
            }
        }
        pipeline.flush().await.expect("flush");
        let open_total = t.elapsed();
        let rss_open = rss_kib();

        // Repeats spread over every open series: counted in memory, no write.
        let t = Instant::now();
        let mut caller_rep = Duration::ZERO;
        for i in 0..repeats {
            let c = Instant::now();
            r.events_v1().emit_wait(occ(i)).await.expect("valid");
            caller_rep += c.elapsed();
        }
        pipeline.flush().await.expect("flush");
        let repeat_total = t.elapsed();
        let stats = pipeline.stats();
        let s = stats.sink_events_v1("null").expect("series stats").clone();
        let rss_repeats = rss_kib();

        let t = Instant::now();
        let report = pipeline.shutdown(Duration::from_secs(600)).await;
        let flush_total = t.elapsed();
        let f = report.stats.sink_events_v1("null").expect("series stats");
        let per = |d: Duration, n: usize| d.as_nanos() as f64 / n.max(1) as f64;
        println!(
            "{{\"open_series\":{open},\"repeats\":{repeats},\
\"open_emit_caller_ns\":{:.0},\"open_end_to_end_ns_per_emit\":{:.0},\
\"repeat_emit_caller_ns\":{:.0},\"repeat_end_to_end_ns_per_emit\":{:.0},\
\"counted_in_memory\":{},\"open_series_tracked\":{},\"evicted\":{},\
\"rss_start_mib\":{:.1},\"rss_open_mib\":{:.1},\"rss_after_repeats_mib\":{:.1},\
\"bytes_per_open_series\":{:.0},\
\"shutdown_flush_s\":{:.3},\"flush_written\":{},\"completed\":{}}}",
            per(caller, 2 * open),
            per(open_total, 2 * open),
            per(caller_rep, repeats),
            per(repeat_total, repeats),
            s.cache.counted_in_memory,
            s.cache.open_series,
            s.cache.evicted_series + s.cache.evicted_singletons,
            rss_start as f64 / 1024.0,
            rss_open as f64 / 1024.0,
            rss_repeats as f64 / 1024.0,
            (rss_open.saturating_sub(rss_start) * 1024) as f64 / open.max(1) as f64,
            flush_total.as_secs_f64(),
            f.flush_written,
            report.completed,
        );
    });
}
