//! Byte bounds next to event bounds: large events fill the intake and the watcher queues by
//! their size, not only by their number, so what a pipeline holds for a slow or dead
//! consumer stays within a known amount of memory.

mod common;

use std::time::Duration;

use actix::prelude::*;
use common::{Holder, Release, pod, run_until};
use kevents_actors::{Emit, IntakePolicy, Pipeline, SinkOptions, WatcherPolicy};
use kevents_core::{Event, EventSink, EventSource, EventType, SinkFuture};

const MB: usize = 1_000_000;
const FOUR_MIB: usize = 4 << 20;

fn source() -> EventSource {
    EventSource::new("bytes-test", "node")
}

fn big_message(i: usize) -> String {
    let mut m = format!("m{i} ");
    m.push_str(&"x".repeat(MB));
    m
}

/// Ten 1 MB occurrences into a drop-if-full intake of 1 000 slots and 4 MiB: four fit, the
/// other six are dropped and counted as intake full, and the intake's bytes stay within
/// the bound.
#[actix_rt::test]
async fn a_full_intake_by_bytes_drops_and_counts() {
    let p = Pipeline::builder(source())
        .intake(IntakePolicy::DropIfFull { capacity: 1000 })
        .intake_max_bytes(FOUR_MIB)
        .start();
    let r = p.recorder();
    // The emitting loop does not yield: the recorder actor cannot take anything meanwhile.
    let outcomes: Vec<Emit> = (0..10)
        .map(|i| {
            r.event(&pod("big"), EventType::Normal, "Big", &big_message(i))
                .unwrap()
        })
        .collect();
    let queued = outcomes.iter().filter(|o| o.is_queued()).count();
    assert_eq!(queued, 4, "{outcomes:?}");
    let s = p.stats();
    assert_eq!((s.recorded, s.dropped_intake_full), (4, 6));
    assert!(
        s.intake_bytes > 4 * MB as u64 && s.intake_bytes <= FOUR_MIB as u64,
        "{s:?}"
    );
    let report = p.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
    assert_eq!(report.stats.intake_bytes, 0);
}

/// A drop-if-full watcher with room for 1 000 events but 4 MiB keeps four 1 MB events and
/// drops the rest (counted as full); once it lets go, it takes more.
#[actix_rt::test]
async fn a_watcher_queue_full_by_bytes_drops_and_counts() {
    let holder = Holder::default();
    let held = holder.held.clone();
    let addr = holder.start();
    let p = Pipeline::builder(source())
        .intake(IntakePolicy::Unbounded)
        .queue_max_bytes(FOUR_MIB)
        .watcher(
            "holder",
            addr.clone().recipient(),
            WatcherPolicy::DropIfFull { capacity: 1000 },
        )
        .start();
    let r = p.recorder();
    for i in 0..10 {
        r.event(&pod("big"), EventType::Normal, "Big", &big_message(i))
            .unwrap();
    }
    run_until(10_000, || p.stats().broadcast == 10).await;
    run_until(10_000, || held.lock().unwrap().len() == 4).await;
    let w = p.stats().watcher("holder").cloned().unwrap();
    assert_eq!((w.accepted, w.dropped_full, w.depth), (4, 6, 4));
    assert!(
        w.bytes > 4 * MB as u64 && w.bytes <= FOUR_MIB as u64,
        "{w:?}"
    );

    addr.send(Release).await.unwrap();
    assert_eq!(p.stats().watcher("holder").unwrap().bytes, 0);
    for i in 0..3 {
        r.event(&pod("big"), EventType::Normal, "Big", &big_message(i))
            .unwrap();
    }
    run_until(10_000, || held.lock().unwrap().len() == 3).await;
    let w = p.stats().watcher("holder").cloned().unwrap();
    assert_eq!((w.accepted, w.dropped_full), (7, 6));
    addr.send(Release).await.unwrap();
    p.shutdown(Duration::from_secs(5)).await;
}

/// With backpressure the byte bound makes the broadcaster wait instead of dropping: four
/// 1 MB events are delivered, the fifth waits until the watcher lets go; nothing is lost.
#[actix_rt::test]
async fn a_backpressure_queue_full_by_bytes_waits() {
    let holder = Holder::default();
    let held = holder.held.clone();
    let addr = holder.start();
    let p = Pipeline::builder(source())
        .intake(IntakePolicy::Unbounded)
        .queue_max_bytes(FOUR_MIB)
        .watcher(
            "holder",
            addr.clone().recipient(),
            WatcherPolicy::Backpressure { capacity: 1000 },
        )
        .start();
    let r = p.recorder();
    for i in 0..10 {
        r.event(&pod("big"), EventType::Normal, "Big", &big_message(i))
            .unwrap();
    }
    run_until(10_000, || held.lock().unwrap().len() == 4).await;
    for _ in 0..1_000 {
        actix_rt::task::yield_now().await;
    }
    assert_eq!(held.lock().unwrap().len(), 4, "the fifth event must wait");
    let mut delivered = 0;
    while delivered < 10 {
        run_until(10_000, || !held.lock().unwrap().is_empty()).await;
        delivered += held.lock().unwrap().len();
        addr.send(Release).await.unwrap();
    }
    let s = p.stats();
    assert_eq!(delivered, 10);
    assert_eq!(s.dropped_total(), 0);
    p.shutdown(Duration::from_secs(5)).await;
}

/// A sink that never answers (a dead apiserver).
#[derive(Clone)]
struct Dead;

impl EventSink for Dead {
    fn create(&self, _: &Event) -> SinkFuture {
        Box::pin(std::future::pending())
    }
    fn patch(&self, _: &Event, _: &[u8]) -> SinkFuture {
        Box::pin(std::future::pending())
    }
}

/// What a sink chain holds for a dead apiserver is bounded by bytes too: 50 distinct 1 MB
/// events with default policies (1 000 slots, coalesce-if-full) leave at most 4 MiB in the
/// chain's queue and 4 MiB in each overflow table (intake, chain); the rest are dropped and
/// counted; shutdown abandons what is held, and counts it.
#[actix_rt::test]
async fn a_sink_chain_holds_at_most_its_bytes_for_a_dead_server() {
    let p = Pipeline::builder(source())
        .queue_max_bytes(FOUR_MIB)
        .intake_max_bytes(FOUR_MIB)
        .sink("api", Dead, SinkOptions::default())
        .start();
    let r = p.recorder();
    let mut dropped_at_intake = 0;
    for i in 0..50 {
        let e = r
            .event(
                &pod(&format!("p{i}")),
                EventType::Warning,
                "Big",
                &big_message(i),
            )
            .unwrap();
        if !e.is_queued() {
            dropped_at_intake += 1;
        }
        // Let the pipeline move between calls, as a controller's reconcile loop would.
        actix_rt::task::yield_now().await;
    }
    run_until(10_000, || {
        let s = p.stats();
        s.broadcast + s.intake_depth + s.dropped_intake_full == 50
    })
    .await;
    let s = p.stats();
    let w = s.watcher("sink:api").unwrap();
    assert!(w.bytes <= FOUR_MIB as u64, "{w:?}");
    assert!(w.accepted <= 4, "{w:?}");
    assert!(w.overflow <= 4 && s.intake_overflow <= 4, "{s:?}");
    assert_eq!(
        w.accepted + w.overflow + w.dropped_full + s.intake_depth + s.dropped_intake_full,
        50,
        "every occurrence is held or counted as dropped: {s:?}"
    );
    assert!(
        w.dropped_full + s.dropped_intake_full >= 50 - 16,
        "the byte bounds forced drops: {s:?}"
    );
    assert_eq!(s.dropped_intake_full, dropped_at_intake);
    let report = p.shutdown(Duration::from_millis(200)).await;
    assert!(!report.completed);
    assert_eq!(report.stats.sink("api").unwrap().abandoned, w.accepted);
    // Pending for the chain: what it held (at most 4 MiB) and what its overflow table held
    // (at most 4 MiB more).
    assert!(
        report.pending_watchers.iter().all(|(_, n)| *n <= 8),
        "{:?}",
        report.pending_watchers
    );
}
