//! Cost of `SeriesCache::observe` and memory with many open series.
//!
//! `cargo run --release -p kevents-core --example series_bench [open_series] [repeats]`
//!
//! Opens `open_series` series (2 occurrences each: CREATE + series-start PATCH), then
//! observes `repeats` further occurrences spread over all of them (counted in memory, the
//! hot path), then runs a heartbeat pass, then flushes. Prints ns per operation and the
//! peak RSS, and the exact heap bytes the cache holds per open series (a counting global
//! allocator: bytes allocated minus bytes freed while the series were opened).

use std::alloc::System;
use std::time::{Duration, Instant};

use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

use kevents_core::events_v1::{Reporter, SeriesCache, SeriesOptions};
use kevents_core::{EventType, ObjectReference, Time};
use kevents_sim::workload::peak_rss_bytes;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Heap bytes in use now (allocated minus freed, reallocations included).
fn heap_in_use() -> i128 {
    let s = GLOBAL.stats();
    s.bytes_allocated as i128 + s.bytes_reallocated as i128 - s.bytes_deallocated as i128
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let repeats: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rss_start = peak_rss_bytes().unwrap_or(0);

    let factory = kevents_core::events_v1::EventFactory::new(Reporter::with_instance(
        "example.com/bench-controller",
        "bench-controller-node-1",
    ));
    let t0 = Time::parse_rfc3339("2021-01-01T00:00:00Z").unwrap_or(Time::UNIX_EPOCH);
    let events: Vec<_> = (0..n)
        .filter_map(|i| {
            let mut pod = ObjectReference::new("v1", "Pod", "bench", format!("pod-{i}"));
            pod.uid = format!("uid-{i}");
            let occ = kevents_core::events_v1::Occurrence::new(
                pod,
                None,
                EventType::Warning,
                "FailedScheduling",
                "Scheduling",
                format!("0/100 nodes are available: pod-{i} does not fit"),
            );
            factory.make(t0, occ).ok()
        })
        .collect();
    let rss_events = peak_rss_bytes().unwrap_or(0);
    let heap_before = heap_in_use();

    let mut cache = SeriesCache::new(SeriesOptions {
        max_entries: n.max(1),
        ..Default::default()
    });
    let mut writes = 0usize;
    let start = Instant::now();
    for round in 0..2u64 {
        let now = t0.saturating_add(Duration::from_millis(round));
        for e in &events {
            writes += cache.observe(e.clone(), now).into_iter().count();
        }
    }
    let open = start.elapsed();
    let rss_open = peak_rss_bytes().unwrap_or(0);
    let heap_open = heap_in_use() - heap_before;

    let start = Instant::now();
    let mut counted = 0usize;
    for i in 0..repeats {
        let now = t0.saturating_add(Duration::from_micros(i as u64));
        let e = events[i % events.len()].clone();
        counted += usize::from(cache.observe(e, now).write.is_none());
    }
    let hot = start.elapsed();

    let start = Instant::now();
    let mut bytes = 0usize;
    for i in 0..repeats {
        let e = events[i % events.len()].clone();
        bytes += e.note.len();
    }
    let clone_only = start.elapsed();

    let start = Instant::now();
    // client-go's refresh pass: one heartbeat PATCH per open series.
    let heartbeats = cache
        .heartbeat_all(t0.saturating_add(Duration::from_secs(2)))
        .len();
    let tick = start.elapsed();
    // One more occurrence each, so every series has a count the server has not seen.
    for e in &events {
        cache.observe(e.clone(), t0.saturating_add(Duration::from_secs(3)));
    }
    let start = Instant::now();
    let flushed = cache.flush().len();
    let flush = start.elapsed();
    let rss_end = peak_rss_bytes().unwrap_or(0);

    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!("open series:            {n}");
    println!(
        "heap held by the cache:  {heap_open} B for {n} open series ({:.1} B/series, counting allocator)",
        heap_open as f64 / n.max(1) as f64
    );
    println!(
        "open (2 observe/series): {:>8.0} ns/observe  ({writes} writes)",
        open.as_nanos() as f64 / (2 * n) as f64
    );
    println!(
        "repeat (in memory):      {:>8.0} ns/observe  ({counted} of {repeats} counted, incl. event clone)",
        hot.as_nanos() as f64 / repeats as f64
    );
    println!(
        "  of which event clone:  {:>8.0} ns  ({bytes} note bytes)",
        clone_only.as_nanos() as f64 / repeats as f64
    );
    println!("heartbeat pass:          {tick:?} for {heartbeats} series");
    println!("flush:                   {flush:?} for {flushed} series");
    println!(
        "peak RSS: start {:.1} MiB, events built {:.1} MiB, {n} series open {:.1} MiB (+{:.1} MiB, {:.0} B/series), end {:.1} MiB",
        mib(rss_start),
        mib(rss_events),
        mib(rss_open),
        mib(rss_open.saturating_sub(rss_events)),
        rss_open.saturating_sub(rss_events) as f64 / n as f64,
        mib(rss_end)
    );
}
