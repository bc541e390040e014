//! The batched hand-offs inside the pipeline (broadcaster -> sink chain -> sink, and the
//! sink's replies) keep every per-event guarantee: order, exact bounds, exact accounting; the
//! packed fast path of `Recorder::event` builds the same events as the general path.
#![allow(missing_docs)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use kevents_actors::{IntakePolicy, Pipeline, SinkOptions, WatcherPolicy};
use kevents_core::core_v1::correlator::CorrelatorOptions;
use kevents_core::{
    EventSource, EventType, ObjectReference, Occurrence, ReferenceRef, SharedClock, Time,
    VirtualClock,
};
use kevents_sim::MemoryApiServer;

fn source() -> EventSource {
    EventSource::new("test", "node")
}

/// Occurrence `i`: its own reason (so nothing is aggregated) and message `m<i>`.
fn distinct(i: usize, objects: usize) -> Occurrence {
    Occurrence::new(
        pod(&format!("p{}", i % objects)),
        EventType::Normal,
        format!("R{i}"),
        format!("m{i}"),
    )
}

/// A clock that the test advances by 1 ms per call, so that event names never collide.
fn ticking() -> (Arc<VirtualClock>, SharedClock) {
    let c = Arc::new(VirtualClock::new(
        Time::parse_rfc3339("2021-01-01T00:00:00Z").unwrap(),
    ));
    (Arc::clone(&c), c)
}

/// Spam filter off, so that every distinct occurrence is written.
fn no_spam(delivery: WatcherPolicy) -> SinkOptions {
    SinkOptions {
        correlator: CorrelatorOptions {
            burst_size: 100_000,
            ..CorrelatorOptions::default()
        },
        delivery,
        ..SinkOptions::default()
    }
}

/// A sink chain whose writes never finish holds exactly `capacity` events (slots are taken
/// ahead in batches by the broadcaster, but never more than the queue has), and every other
/// event is counted as dropped for it.
#[actix_rt::test]
async fn sink_chain_bound_is_exact_with_batches() {
    let mut sink = ScriptedSink::new();
    sink.hang = true;
    let (tick, clock) = ticking();
    let p = Pipeline::builder(source())
        .clock(clock)
        .intake(IntakePolicy::Unbounded)
        .sink(
            "hang",
            sink.clone(),
            no_spam(WatcherPolicy::DropIfFull { capacity: 37 }),
        )
        .start();
    let r = p.recorder();
    // More than one recorder batch (256), distinct messages so nothing is aggregated.
    for i in 0..1000 {
        tick.advance(Duration::from_millis(1));
        r.emit(distinct(i, 7)).unwrap();
    }
    until_broadcast(&p, 1000).await;
    run_until(100_000, || {
        p.stats().sink("hang").is_some_and(|s| s.queued == 37)
    })
    .await;
    let s = p.stats();
    let w = s.watcher("sink:hang").unwrap();
    assert_eq!((w.accepted, w.dropped_full, w.depth), (37, 963, 37));
    let k = s.sink("hang").unwrap();
    assert_eq!((k.correlated, k.queued), (37, 37));
    let report = p.shutdown(Duration::from_millis(50)).await;
    assert!(!report.completed);
    let k = report.stats.sink("hang").unwrap();
    assert_eq!(k.abandoned, 37);
}

/// Backpressure with a capacity that does not divide the batches: every event reaches the
/// sink, written in intake order, nothing is dropped anywhere.
#[actix_rt::test]
async fn backpressure_batches_keep_order_and_lose_nothing() {
    let sink = ScriptedSink::new();
    let (tick, clock) = ticking();
    let p = Pipeline::builder(source())
        .clock(clock)
        .intake(IntakePolicy::Unbounded)
        .sink(
            "api",
            sink.clone(),
            no_spam(WatcherPolicy::Backpressure { capacity: 7 }),
        )
        .start();
    let r = p.recorder();
    let n = 3000;
    for i in 0..n {
        // Several objects, so writes of different events interleave in the sink.
        tick.advance(Duration::from_millis(1));
        r.emit(distinct(i, 5)).unwrap();
    }
    let report = p.shutdown(Duration::from_secs(60)).await;
    assert!(report.completed);
    assert_eq!(report.stats.dropped_total(), 0);
    let w = report.stats.watcher("sink:api").unwrap();
    assert_eq!((w.accepted, w.dropped_full, w.depth), (n as u64, 0, 0));
    let calls = sink.calls();
    assert_eq!(calls.len(), n);
    assert!(calls.iter().all(|c| c.ok && c.verb == "create"));
    let order: Vec<usize> = calls
        .iter()
        .map(|c| c.message[1..].parse().unwrap())
        .collect();
    assert_eq!(order, (0..n).collect::<Vec<_>>());
}

/// A drop-if-full sink chain next to a collecting watcher: per watcher, the events received
/// are in intake order and accepted + dropped = broadcast, exactly.
#[actix_rt::test]
async fn batched_and_single_watchers_account_exactly() {
    let collector = Collector::default();
    let seen = collector.seen.clone();
    let addr = actix::Actor::start(collector);
    let sink = ScriptedSink::new();
    let (tick, clock) = ticking();
    let p = Pipeline::builder(source())
        .clock(clock)
        .intake(IntakePolicy::Unbounded)
        .sink(
            "api",
            sink.clone(),
            no_spam(WatcherPolicy::DropIfFull { capacity: 50 }),
        )
        .watcher(
            "all",
            addr.recipient(),
            WatcherPolicy::Backpressure { capacity: 3 },
        )
        .start();
    let r = p.recorder();
    let n = 2000u64;
    for i in 0..n {
        tick.advance(Duration::from_millis(1));
        r.emit(distinct(i as usize, 3)).unwrap();
    }
    let report = p.shutdown(Duration::from_secs(60)).await;
    assert!(report.completed);
    let s = &report.stats;
    assert_eq!(s.broadcast, n);
    let w = s.watcher("sink:api").unwrap();
    assert_eq!(w.accepted + w.dropped_full, n);
    let k = s.sink("api").unwrap();
    assert_eq!(k.correlated, w.accepted);
    assert_eq!((k.created, k.patched), (w.accepted, 0));
    let written: Vec<usize> = sink
        .calls()
        .iter()
        .map(|c| c.message[1..].parse().unwrap())
        .collect();
    assert!(written.windows(2).all(|p| p[0] < p[1]), "sink order kept");
    let seen = seen.lock().unwrap();
    let seqs: Vec<u64> = seen.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, (0..n).collect::<Vec<_>>());
}

/// How a test records its occurrence.
#[derive(Clone, Copy)]
enum Path {
    /// `Recorder::event` on an `ObjectReference`: packed at the call.
    Packed,
    /// `Recorder::event` on a `ReferenceRef` (borrowed fields, as a k8s-openapi object
    /// lends them): packed at the call, nothing copied before.
    Borrowed,
    /// `eventf!` formatting the message: packed at the call, the message formatted into
    /// the thread's buffer.
    Formatted,
    /// `Recorder::emit` of the occurrence: the general path.
    General,
}

/// `Recorder::event` on an `ObjectReference` and on borrowed fields, and `eventf!` (all packed
/// at the call) and `Recorder::emit` of the same occurrence (the general path) produce
/// identical events.
#[actix_rt::test]
async fn packed_event_path_builds_the_same_event() {
    let at = Time::parse_rfc3339("2021-01-01T00:02:25Z").unwrap();
    let mut object = ObjectReference::new("apps/v1", "Deployment", "team-a", "web");
    object.uid = "u-1".into();
    object.resource_version = "42".into();
    object.field_path = "spec.template".into();
    let run = |path: Path| {
        let object = object.clone();
        async move {
            let api = MemoryApiServer::new();
            let clock: SharedClock = Arc::new(VirtualClock::new(at));
            let p = Pipeline::builder(source())
                .clock(clock)
                .sink("api", api.clone(), no_spam(WatcherPolicy::default()))
                .start();
            let r = p.recorder();
            let (reason, message) = ("Scaled", "scaled to 3 ünïcode");
            match path {
                Path::Packed => r.event(&object, EventType::Warning, reason, message),
                Path::Borrowed => {
                    let fields = ReferenceRef::from(&object);
                    r.event(&fields, EventType::Warning, reason, message)
                }
                Path::Formatted => kevents_actors::eventf!(
                    r,
                    &object,
                    EventType::Warning,
                    reason,
                    "scaled to {} ünïcode",
                    3
                ),
                Path::General => {
                    r.emit(Occurrence::new(object, EventType::Warning, reason, message))
                }
            }
            .unwrap();
            assert!(p.shutdown(Duration::from_secs(10)).await.completed);
            api.list()
        }
    };
    let packed = run(Path::Packed).await;
    let general = run(Path::General).await;
    assert_eq!(packed.len(), 1);
    assert_eq!(packed, general);
    assert_eq!(run(Path::Borrowed).await, general);
    assert_eq!(run(Path::Formatted).await, general);
    let e = &packed[0];
    assert_eq!(e.involved_object, object);
    assert_eq!(
        (e.reason.as_str(), e.message.as_str()),
        ("Scaled", "scaled to 3 ünïcode")
    );
    assert_eq!(e.first_timestamp, Some(at));
}

/// A burst of 2 000 distinct-enough occurrences through a chain with a 10-slot backpressure
/// queue, on the arbiters `place` sets; returns the shutdown report and the sink.
async fn burst_on_arbiters(
    sink: ScriptedSink,
    place: impl FnOnce(kevents_actors::PipelineBuilder) -> kevents_actors::PipelineBuilder,
) -> (kevents_actors::ShutdownReport, ScriptedSink, usize) {
    let (tick, clock) = ticking();
    let builder = Pipeline::builder(source())
        .clock(clock)
        .intake(IntakePolicy::Unbounded)
        .sink(
            "api",
            sink.clone(),
            no_spam(WatcherPolicy::Backpressure { capacity: 10 }),
        );
    let p = place(builder).start();
    let r = p.recorder();
    let n = 2000;
    for i in 0..n {
        tick.advance(Duration::from_millis(1));
        r.emit(distinct(i, 4)).unwrap();
    }
    (p.shutdown(Duration::from_secs(60)).await, sink, n)
}

/// The messages the sink stored, in the order it stored them.
fn stored_order(sink: &ScriptedSink) -> Vec<usize> {
    sink.calls()
        .iter()
        .filter(|c| c.ok)
        .map(|c| c.message[1..].parse().unwrap())
        .collect()
}

/// With a sink arbiter the correlator runs there and the sink actor on the arbiter of
/// `start`: batches cross threads both ways, order and accounting are kept, and shutdown
/// leaves no actor behind.
#[actix_rt::test]
async fn sink_arbiter_split_keeps_order_and_stops_cleanly() {
    let arbiter = actix::Arbiter::new();
    let handle = arbiter.handle();
    let (report, sink, n) =
        burst_on_arbiters(ScriptedSink::new(), |b| b.sink_arbiter(handle)).await;
    arbiter.stop();
    assert!(report.completed);
    assert_eq!(report.live_actors, 0);
    assert_eq!(report.stats.dropped_total(), 0);
    assert_eq!(report.delivered(), n as u64);
    assert_eq!(stored_order(&sink), (0..n).collect::<Vec<_>>());
}

/// With a writer arbiter as well, the sink actor runs on a third thread: order and
/// accounting are kept, a sink that panics is restarted there by its supervisor with its
/// queued writes, and shutdown leaves no actor behind.
#[actix_rt::test]
async fn writer_arbiter_keeps_order_restarts_and_stops_cleanly() {
    let (correlate, write) = (actix::Arbiter::new(), actix::Arbiter::new());
    let (c, w) = (correlate.handle(), write.handle());
    let sink = ScriptedSink {
        panic_on_call: Some(7),
        ..ScriptedSink::new()
    };
    let (report, sink, n) = burst_on_arbiters(sink, |b| b.sink_arbiter(c).writer_arbiter(w)).await;
    correlate.stop();
    write.stop();
    assert!(report.completed);
    assert_eq!(report.live_actors, 0);
    assert_eq!(report.stats.dropped_total(), 0);
    assert_eq!(report.delivered(), n as u64);
    assert_eq!(report.stats.sink("api").unwrap().restarts, 1);
    // Every occurrence was stored once, in order (the write the panic interrupted again).
    assert_eq!(stored_order(&sink), (0..n).collect::<Vec<_>>());
}
