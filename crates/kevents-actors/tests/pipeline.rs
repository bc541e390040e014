//! Flow control, supervision, shutdown and accounting of the actor pipeline.
#![allow(missing_docs)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use common::*;
use kevents_actors::{
    DropReason, Emit, IntakePolicy, Pipeline, RecordError, RetryPolicy, SinkOptions, WatcherPolicy,
    WriteBudget,
};
use kevents_core::{
    EventSource, EventType, InvalidEvent, ObjectReference, SinkError, Status, Time, VirtualClock,
};

fn source() -> EventSource {
    EventSource::new("test", "node")
}

/// A pipeline with an unbounded intake and one watcher, `c`, that takes everything.
fn collected(c: &Collector) -> Pipeline {
    Pipeline::builder(source())
        .intake(IntakePolicy::Unbounded)
        .watcher(
            "c",
            c.clone().start().recipient(),
            WatcherPolicy::Backpressure { capacity: 16 },
        )
        .start()
}

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        sleep: Duration::ZERO,
        randomize_first: false,
        ..RetryPolicy::default()
    }
}

/// Every watcher sees events in intake order: backpressure watchers all of them, a
/// drop-if-full watcher a subsequence, with drops counted exactly.
#[actix_rt::test]
async fn per_watcher_ordering() {
    let a = Collector::default();
    let b = Collector::default();
    let lossy = Collector::default();
    let p = Pipeline::builder(source())
        .intake(IntakePolicy::Unbounded)
        .watcher(
            "a",
            a.clone().start().recipient(),
            WatcherPolicy::Backpressure { capacity: 16 },
        )
        .watcher(
            "b",
            b.clone().start().recipient(),
            WatcherPolicy::Backpressure { capacity: 3 },
        )
        .watcher(
            "lossy",
            lossy.clone().start().recipient(),
            WatcherPolicy::DropIfFull { capacity: 8 },
        )
        .start();
    let r = p.recorder();
    let n = 5_000;
    for i in 0..n {
        assert_eq!(r.emit(occ(i)).unwrap(), Emit::Queued);
    }
    p.flush().await.unwrap();
    let expected: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    for c in [&a, &b] {
        assert_eq!(c.seqs(), (0..n as u64).collect::<Vec<_>>());
        assert_eq!(c.messages(), expected);
    }
    let seqs = lossy.seqs();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "lossy watcher out of order"
    );
    let s = p.stats();
    let w = s.watcher("lossy").unwrap();
    assert_eq!(w.accepted as usize, seqs.len());
    assert_eq!(w.accepted + w.dropped_full, n as u64);
    assert_eq!(s.watcher("a").unwrap().dropped_full, 0);
    p.shutdown(Duration::from_secs(10)).await;
}

/// Calls whose strings do not fit the compact packing of the hot path (64 KiB in all) take
/// the general path: every call arrives whole and in order, whatever its size, on a plain
/// and on a bound recorder.
#[actix_rt::test]
async fn calls_of_any_size_arrive_whole_and_in_order() {
    let a = Collector::default();
    let p = collected(&a);
    let r = p.recorder();
    let object = pod("big");
    let bound = r.for_object(&object).unwrap();
    let total = |m: usize| ["v1", "Pod", "default", "big", "Reason"].concat().len() + m;
    // Around the packing's bound: fits, fits exactly, one byte over, far over.
    let sizes = [10, 65_535 - total(0), 65_536 - total(0), 200_000];
    let mut expected = Vec::new();
    for (i, size) in sizes.into_iter().enumerate() {
        let m = format!("{i}").repeat(size);
        assert_eq!(
            r.event(&object, EventType::Normal, "Reason", &m).unwrap(),
            Emit::Queued
        );
        assert_eq!(
            bound.event(EventType::Normal, "Reason", &m).unwrap(),
            Emit::Queued
        );
        expected.extend([m.clone(), m]);
    }
    p.flush().await.unwrap();
    assert_eq!(total(sizes[1]), 65_535);
    assert_eq!(a.messages(), expected);
    p.shutdown(Duration::from_secs(10)).await;
}

/// Callers that wait for room (`emit_wait`) in a small bounded intake, from several threads
/// at once: every occurrence is queued once, none dropped, each thread's in its order.
#[actix_rt::test]
async fn waiting_callers_on_a_small_intake_lose_nothing() {
    let c = Collector::default();
    let p = Pipeline::builder(source())
        .intake(IntakePolicy::DropIfFull { capacity: 4 })
        .watcher(
            "c",
            c.clone().start().recipient(),
            WatcherPolicy::Backpressure { capacity: 16 },
        )
        .start();
    let (threads, per_thread) = (4, 500);
    let callers: Vec<_> = (0..threads)
        .map(|t| {
            let r = p.recorder();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("runtime");
                rt.block_on(async {
                    for i in 0..per_thread {
                        r.emit_wait(occ(t * 10_000 + i)).await.expect("queued");
                    }
                });
            })
        })
        .collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while c.len() < threads * per_thread && std::time::Instant::now() < deadline {
        actix_rt::time::sleep(Duration::from_millis(2)).await;
    }
    // Before joining: a caller that is never given room would block the join.
    assert_eq!(
        c.len(),
        threads * per_thread,
        "not all waiting callers got room"
    );
    for t in callers {
        t.join().expect("caller");
    }
    p.flush().await.unwrap();
    let got = c.messages();
    assert_eq!(got.len(), threads * per_thread);
    for t in 0..threads {
        let mine: Vec<&String> = got
            .iter()
            .filter(|m| m[1..].parse::<usize>().is_ok_and(|v| v / 10_000 == t))
            .collect();
        let expected: Vec<String> = (0..per_thread)
            .map(|i| format!("m{}", t * 10_000 + i))
            .collect();
        assert_eq!(mine, expected.iter().collect::<Vec<_>>(), "thread {t}");
    }
    let s = p.stats();
    assert_eq!(
        (s.recorded, s.dropped_intake_full),
        ((threads * per_thread) as u64, 0)
    );
    p.shutdown(Duration::from_secs(10)).await;
}

/// The intake holds exactly its capacity, whatever the number of producers and handles.
#[actix_rt::test]
async fn intake_bound_is_exact() {
    let p = Pipeline::builder(source())
        .intake(IntakePolicy::DropIfFull { capacity: 100 })
        .start();
    // The actix thread is busy here, so nothing is taken from the intake meanwhile.
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let r = p.recorder();
            std::thread::spawn(move || {
                let mut queued = 0u64;
                let mut dropped = 0u64;
                for i in 0..250 {
                    match r.clone().emit(occ(i)) {
                        Ok(Emit::Queued) => queued += 1,
                        Ok(Emit::Dropped(DropReason::IntakeFull)) => dropped += 1,
                        other => panic!("unexpected {other:?}"),
                    }
                }
                (queued, dropped)
            })
        })
        .collect();
    let (mut queued, mut dropped) = (0, 0);
    for t in threads {
        let (q, d) = t.join().unwrap();
        queued += q;
        dropped += d;
    }
    assert_eq!(queued, 100);
    assert_eq!(dropped, 1_900);
    let s = p.stats();
    assert_eq!(
        (s.recorded, s.dropped_intake_full, s.intake_depth),
        (100, 1_900, 100)
    );
    p.flush().await.unwrap();
    assert_eq!(p.stats().broadcast, 100);
    p.shutdown(Duration::from_secs(10)).await;
}

/// A drop-if-full watcher never has more than its capacity queued; every event is either
/// accepted or dropped for it, exactly.
#[actix_rt::test]
async fn watcher_bound_is_exact_and_accounted() {
    let holder = Holder::default();
    let held = holder.held.clone();
    let released = holder.released.clone();
    let addr = holder.start();
    let p = Pipeline::builder(source())
        .intake(IntakePolicy::Unbounded)
        .watcher(
            "holder",
            addr.clone().recipient(),
            WatcherPolicy::DropIfFull { capacity: 10 },
        )
        .start();
    let r = p.recorder();
    for i in 0..500 {
        r.emit(occ(i)).unwrap();
    }
    until_broadcast(&p, 500).await;
    run_until(10_000, || held.lock().unwrap().len() == 10).await;
    let w = p.stats().watcher("holder").cloned().unwrap();
    assert_eq!((w.accepted, w.dropped_full, w.depth), (10, 490, 10));
    // Freed slots are reused.
    addr.send(Release).await.unwrap();
    assert_eq!(p.stats().watcher("holder").unwrap().depth, 0);
    for i in 0..50 {
        r.emit(occ(i)).unwrap();
    }
    until_broadcast(&p, 550).await;
    run_until(10_000, || held.lock().unwrap().len() == 10).await;
    let w = p.stats().watcher("holder").cloned().unwrap();
    assert_eq!(w.accepted + w.dropped_full, 550);
    assert_eq!(w.accepted, 20);
    addr.send(Release).await.unwrap();
    assert_eq!(released.load(std::sync::atomic::Ordering::SeqCst), 20);
    p.shutdown(Duration::from_secs(10)).await;
}

/// Backpressure: the broadcaster waits for the watcher, the intake fills, and the intake's
/// policy decides; emitted = queued + dropped and the watcher gets exactly the queued ones.
#[actix_rt::test]
async fn backpressure_reaches_the_intake_and_everything_is_accounted() {
    let holder = Holder::default();
    let held = holder.held.clone();
    let addr = holder.start();
    let p = Pipeline::builder(source())
        .intake(IntakePolicy::DropIfFull { capacity: 50 })
        .watcher(
            "slow",
            addr.clone().recipient(),
            WatcherPolicy::Backpressure { capacity: 10 },
        )
        .start();
    let r = p.recorder();
    let (mut queued, mut dropped) = (0u64, 0u64);
    for i in 0..1_000 {
        match r.emit(occ(i)).unwrap() {
            Emit::Queued => queued += 1,
            Emit::Dropped(_) => dropped += 1,
        }
        if i % 10 == 0 {
            actix_rt::task::yield_now().await;
        }
    }
    assert_eq!(queued + dropped, 1_000);
    assert!(
        dropped > 0,
        "the blocked watcher must make the intake overflow"
    );
    // Never more than the capacity queued for the watcher.
    run_until(10_000, || held.lock().unwrap().len() == 10).await;
    assert_eq!(p.stats().watcher("slow").unwrap().depth, 10);
    let mut got = 0;
    while got < queued as usize {
        addr.send(Release).await.unwrap();
        got = p.stats().watcher("slow").unwrap().accepted as usize;
        actix_rt::task::yield_now().await;
    }
    addr.send(Release).await.unwrap();
    p.flush().await.unwrap();
    let s = p.stats();
    assert_eq!(s.recorded, queued);
    assert_eq!(s.dropped_intake_full, dropped);
    assert_eq!(s.watcher("slow").unwrap().accepted, queued);
    assert_eq!(s.watcher("slow").unwrap().dropped_full, 0);
    p.shutdown(Duration::from_secs(10)).await;
}

/// A stuck drop-if-full watcher does not slow anyone else.
#[actix_rt::test]
async fn slow_watcher_is_isolated() {
    let stuck = Holder::default();
    let fast = Collector::default();
    let p = Pipeline::builder(source())
        .intake(IntakePolicy::DropIfFull { capacity: 64 })
        .watcher(
            "stuck",
            stuck.start().recipient(),
            WatcherPolicy::DropIfFull { capacity: 5 },
        )
        .watcher(
            "fast",
            fast.clone().start().recipient(),
            WatcherPolicy::Backpressure { capacity: 4 },
        )
        .start();
    let r = p.recorder();
    for i in 0..2_000 {
        // Wait for room rather than drop, so every event is emitted.
        r.emit_wait(occ(i)).await.unwrap();
    }
    run_until(1_000_000, || fast.len() == 2_000).await;
    assert_eq!(fast.seqs(), (0..2_000).collect::<Vec<_>>());
    let s = p.stats();
    assert_eq!(s.watcher("stuck").unwrap().accepted, 5);
    assert_eq!(s.watcher("stuck").unwrap().dropped_full, 1_995);
    assert_eq!(s.dropped_intake_full, 0);
    let report = p.shutdown(Duration::from_secs(1)).await;
    assert_eq!(report.pending_watchers, vec![("stuck".to_owned(), 5)]);
}

/// Backpressure end to end loses nothing in a burst of a million occurrences.
#[actix_rt::test]
async fn backpressure_loses_nothing_in_a_million() {
    #[derive(Default)]
    struct Check {
        next: u64,
        out_of_order: u64,
    }
    impl Actor for Check {
        type Context = Context<Self>;
    }
    impl Handler<kevents_actors::EventMessage> for Check {
        type Result = ();
        fn handle(&mut self, m: kevents_actors::EventMessage, _: &mut Context<Self>) {
            if m.seq() != self.next {
                self.out_of_order += 1;
            }
            self.next = m.seq() + 1;
        }
    }
    #[derive(Message)]
    #[rtype(result = "(u64, u64)")]
    struct Get;
    impl Handler<Get> for Check {
        type Result = MessageResult<Get>;
        fn handle(&mut self, _: Get, _: &mut Context<Self>) -> Self::Result {
            MessageResult((self.next, self.out_of_order))
        }
    }
    let check = Check::default().start();
    let p = Pipeline::builder(source())
        .watcher(
            "check",
            check.clone().recipient(),
            WatcherPolicy::Backpressure { capacity: 1000 },
        )
        .start();
    let r = p.recorder();
    let o = kevents_core::Occurrence::new(pod("p"), EventType::Normal, "R", "m");
    const N: u64 = 1_000_000;
    for _ in 0..N {
        r.emit_wait(o.clone()).await.unwrap();
    }
    p.flush().await.unwrap();
    assert_eq!(check.send(Get).await.unwrap(), (N, 0));
    let s = p.stats();
    assert_eq!((s.recorded, s.broadcast), (N, N));
    assert_eq!(s.dropped_total(), 0);
    p.shutdown(Duration::from_secs(10)).await;
}

/// A sink that panics on its 3rd write is restarted and still delivers every event, in
/// order, without losing its queue.
#[actix_rt::test]
async fn supervised_sink_restart_keeps_the_queue() {
    let sink = ScriptedSink {
        panic_on_call: Some(3),
        ..ScriptedSink::new()
    };
    let p = Pipeline::builder(source())
        .sink(
            "api",
            sink.clone(),
            SinkOptions {
                max_in_flight: 1,
                retry: fast_retry(),
                ..SinkOptions::default()
            },
        )
        .start();
    let r = p.recorder();
    for i in 0..10 {
        r.event(
            &pod(&format!("p{i}")),
            EventType::Normal,
            "Started",
            &format!("m{i}"),
        )
        .unwrap();
    }
    let report = p.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed);
    let s = report.stats.sink("api").unwrap();
    assert_eq!(s.restarts, 1);
    assert_eq!(s.created, 10);
    assert_eq!(s.attempts, 11);
    let delivered: Vec<String> = sink
        .calls()
        .iter()
        .filter(|c| c.ok)
        .map(|c| c.message.clone())
        .collect();
    assert_eq!(
        delivered,
        (0..10).map(|i| format!("m{i}")).collect::<Vec<_>>()
    );
    assert_eq!(sink.api.list().len(), 10);
    assert_eq!(report.live_actors, 0);
}

/// Same with concurrent writes: everything delivered, per-event order kept.
#[actix_rt::test]
async fn supervised_sink_restart_with_concurrency() {
    tokio::time::pause();
    let sink = ScriptedSink {
        panic_on_call: Some(3),
        delay: Some(Duration::from_millis(5)),
        ..ScriptedSink::new()
    };
    // Every count is written (the per-event sequence below), none coalesced.
    let p = Pipeline::builder(source())
        .sink(
            "api",
            sink.clone(),
            SinkOptions {
                retry: fast_retry(),
                coalesce: false,
                ..SinkOptions::default()
            },
        )
        .start();
    let r = p.recorder();
    for i in 0..200 {
        // 20 pods, 10 occurrences each: counts 1..10 per event, in order.
        r.event(
            &pod(&format!("p{}", i % 20)),
            EventType::Normal,
            "Started",
            "same",
        )
        .unwrap();
    }
    let report = p.shutdown(Duration::from_secs(60)).await;
    assert!(report.completed);
    assert_eq!(report.stats.sink("api").unwrap().restarts, 1);
    let stored = sink.api.list();
    assert_eq!(stored.len(), 20);
    assert!(stored.iter().all(|e| e.count == 10), "{stored:?}");
    let mut per_name: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for c in sink.calls().into_iter().filter(|c| c.ok) {
        per_name.entry(c.name).or_default().push(c.count);
    }
    for counts in per_name.values() {
        assert_eq!(counts, &(1..=10).collect::<Vec<_>>());
    }
}

/// A sink with no server copy to return answers `Stored::AsSent`: the pipeline learns its
/// writes back from the events it sent and makes exactly the requests it makes with a sink
/// that returns the server's copy (creates, patches with client-go's counts, re-creates after
/// a 404), whichever of its writes the sink answers so. With only the creates answered as
/// sent, an event re-created after a 404 had learned a resourceVersion from its patch: its
/// CREATE leaves it out, and what is learned back is the event without it.
#[actix_rt::test]
async fn a_sink_answering_as_sent_makes_the_same_requests() {
    type Requests = BTreeMap<String, Vec<(&'static str, i32, bool)>>;
    async fn run(as_sent: &'static [&'static str]) -> (Requests, Vec<(String, i32)>) {
        let sink = ScriptedSink {
            as_sent,
            ..ScriptedSink::new()
        };
        // A fixed clock: the same event names in every run.
        let clock = VirtualClock::new(Time::parse_rfc3339("2021-01-01T00:00:00Z").unwrap());
        let p = Pipeline::builder(source())
            .clock(Arc::new(clock))
            .sink(
                "api",
                sink.clone(),
                SinkOptions {
                    coalesce: false,
                    retry: fast_retry(),
                    ..SinkOptions::default()
                },
            )
            .start();
        let r = p.recorder();
        for round in 0..4 {
            for i in 0..5 {
                r.event(&pod(&format!("p{i}")), EventType::Normal, "Started", "m")
                    .unwrap();
            }
            p.flush().await.unwrap();
            if round == 1 {
                for e in sink.api.list() {
                    assert!(sink.api.delete(&e.metadata.namespace, &e.metadata.name));
                }
            }
        }
        let report = p.shutdown(Duration::from_secs(10)).await;
        assert!(report.completed);
        assert_eq!(report.stats.dropped_total(), 0);
        let mut requests = Requests::new();
        for c in sink.calls() {
            requests
                .entry(c.name)
                .or_default()
                .push((c.verb, c.count, c.ok));
        }
        let mut stored: Vec<_> = sink
            .api
            .list()
            .into_iter()
            .map(|e| (e.metadata.name, e.count))
            .collect();
        stored.sort();
        (requests, stored)
    }
    let returned = run(&[]).await;
    assert_eq!(returned.0.len(), 5, "{returned:?}");
    for writes in returned.0.values() {
        assert_eq!(
            writes,
            &[
                ("create", 1, true),
                ("patch", 2, true),
                ("patch", 3, false),
                ("create", 3, true),
                ("patch", 4, true)
            ]
        );
    }
    assert!(returned.1.iter().all(|(_, count)| *count == 4));
    assert_eq!(run(&["create", "patch"]).await, returned);
    assert_eq!(run(&["create"]).await, returned);
    assert_eq!(run(&["patch"]).await, returned);
}

/// Shutdown drains intake, broadcaster, watchers and sinks, then stops every actor.
#[actix_rt::test]
async fn shutdown_flushes_everything() {
    tokio::time::pause();
    let sink = ScriptedSink {
        delay: Some(Duration::from_millis(10)),
        ..ScriptedSink::new()
    };
    let p = Pipeline::builder(source())
        .logging(WatcherPolicy::default())
        .sink("api", sink.clone(), SinkOptions::default())
        .start();
    let r = p.recorder();
    for i in 0..300 {
        r.event(&pod(&format!("p{i}")), EventType::Warning, "Failed", "x")
            .unwrap();
    }
    let report = p.shutdown(Duration::from_secs(60)).await;
    assert!(report.completed);
    assert_eq!(report.pending(), 0);
    assert_eq!(report.delivered(), 300);
    assert_eq!(report.stats.dropped_total(), 0);
    assert_eq!(report.live_actors, 0);
    assert_eq!(sink.api.list().len(), 300);
}

/// A sink that never answers: shutdown returns at the deadline and reports what was left,
/// each occurrence once.
#[actix_rt::test]
async fn shutdown_deadline_reports_pending() {
    tokio::time::pause();
    let sink = ScriptedSink {
        hang: true,
        ..ScriptedSink::new()
    };
    let p = Pipeline::builder(source())
        .sink("api", sink, SinkOptions::default())
        .start();
    let r = p.recorder();
    for i in 0..20 {
        r.event(&pod(&format!("p{i}")), EventType::Normal, "Started", "x")
            .unwrap();
    }
    let report = p.shutdown(Duration::from_secs(5)).await;
    assert!(!report.completed);
    // The 20 queued writes are abandoned (failed), and so not pending too (issue 36: they
    // were counted in both).
    assert_eq!(report.pending_watchers, Vec::<(String, u64)>::new());
    let s = report.stats.sink("api").unwrap();
    assert_eq!((s.abandoned, s.delivered()), (20, 0));
    assert_eq!(report.failed() + report.pending(), 20);
    assert_eq!(report.live_actors, 0);
}

/// Calls after shutdown return an error (never panic) and are counted.
#[actix_rt::test]
async fn record_after_shutdown_is_an_error() {
    let p = Pipeline::builder(source()).start();
    let r = p.recorder();
    let r2 = r.clone();
    assert!(!r.is_shut_down());
    p.shutdown(Duration::from_secs(1)).await;
    assert!(r.is_shut_down());
    let pod = pod("p");
    assert_eq!(
        r.event(&pod, EventType::Normal, "Started", "late"),
        Err(RecordError::Shutdown)
    );
    assert_eq!(r2.emit_wait(occ(0)).await, Err(RecordError::Shutdown));
    let t = std::thread::spawn(move || r2.event(&pod, EventType::Normal, "Started", "late"));
    assert_eq!(t.join().unwrap(), Err(RecordError::Shutdown));
}

/// Invalid input is refused synchronously with the typed error and nothing is emitted.
#[actix_rt::test]
async fn invalid_input_is_refused() {
    let c = Collector::default();
    let p = Pipeline::builder(source())
        .watcher(
            "c",
            c.clone().start().recipient(),
            WatcherPolicy::Backpressure { capacity: 10 },
        )
        .start();
    let r = p.recorder();
    let bad_ns = ObjectReference::new("v1", "Pod", "Not_A_Label", "p");
    assert!(matches!(
        r.event(&bad_ns, EventType::Normal, "Started", "x"),
        Err(RecordError::Invalid(kevents_core::InvalidEvent::Namespace(
            _
        )))
    ));
    let mut o = occ(0);
    o.event_type = "Info".into();
    assert!(matches!(
        r.emit(o),
        Err(RecordError::Invalid(kevents_core::InvalidEvent::Type(_)))
    ));
    assert!(matches!(
        r.annotated_event(&pod("p"), [("bad key", "v")], EventType::Normal, "R", "m"),
        Err(RecordError::Invalid(
            kevents_core::InvalidEvent::AnnotationKey(_)
        ))
    ));
    r.annotated_event(&pod("p"), [("team", "a")], EventType::Normal, "R", "m")
        .unwrap();
    p.flush().await.unwrap();
    let s = p.stats();
    assert_eq!((s.dropped_invalid, s.recorded), (3, 1));
    assert_eq!(c.len(), 1);
    assert_eq!(
        c.seen.lock().unwrap()[0].1.metadata.annotations["team"],
        "a"
    );
    p.shutdown(Duration::from_secs(1)).await;
}

/// One event's retries do not hold back other events (client-go's head-of-line blocking,
/// reference G2), and the server's Retry-After is honoured.
#[actix_rt::test]
async fn retries_block_only_their_own_event_and_honour_retry_after() {
    tokio::time::pause();
    let mut busy = Status::failure(429, "TooManyRequests", "slow down");
    busy.retry_after = Some(Duration::from_secs(7));
    let sink = ScriptedSink {
        fail_once: Some(SinkError::Status(Box::new(busy))),
        ..ScriptedSink::new()
    };
    // Per-event retries: no shared budget (its 429 would pause every event's writes).
    let p = Pipeline::builder(source())
        .sink(
            "api",
            sink.clone(),
            SinkOptions {
                budget: Some(WriteBudget::off()),
                ..SinkOptions::default()
            },
        )
        .start();
    let r = p.recorder();
    let start = tokio::time::Instant::now();
    r.event(&pod("a"), EventType::Normal, "Started", "first")
        .unwrap();
    r.event(&pod("b"), EventType::Normal, "Started", "second")
        .unwrap();
    p.flush().await.unwrap();
    let waited = start.elapsed();
    let calls = sink.calls();
    let order: Vec<(&str, bool)> = calls.iter().map(|c| (c.message.as_str(), c.ok)).collect();
    assert_eq!(order, [("first", false), ("second", true), ("first", true)]);
    // Virtual time: the retry slept exactly the server's Retry-After.
    assert!(
        waited >= Duration::from_secs(7) && waited < Duration::from_secs(8),
        "{waited:?}"
    );
    let s = p.stats();
    assert_eq!(s.sink("api").unwrap().attempts, 3);
    p.shutdown(Duration::from_secs(1)).await;
}

/// 12 attempts by default, then the write is given up and counted.
#[actix_rt::test]
async fn retry_budget_is_counted() {
    tokio::time::pause();
    let sink = ScriptedSink {
        always_fail: Some(SinkError::Status(Box::new(Status::failure(
            503,
            "ServiceUnavailable",
            "down",
        )))),
        ..ScriptedSink::new()
    };
    let p = Pipeline::builder(source())
        .sink("api", sink.clone(), SinkOptions::default())
        .start();
    p.recorder()
        .event(&pod("a"), EventType::Warning, "Failed", "x")
        .unwrap();
    let report = p.shutdown(Duration::from_secs(600)).await;
    assert!(report.completed);
    let s = report.stats.sink("api").unwrap();
    assert_eq!((s.attempts, s.retry_exhausted, s.delivered()), (12, 1, 0));
    assert_eq!(sink.calls().len(), 12);
    // client-go's classification would not retry a 503 at all.
    let sink = ScriptedSink {
        always_fail: Some(SinkError::Status(Box::new(Status::failure(
            503,
            "ServiceUnavailable",
            "down",
        )))),
        ..ScriptedSink::new()
    };
    let p = Pipeline::builder(source())
        .sink(
            "api",
            sink.clone(),
            SinkOptions {
                retry: RetryPolicy {
                    classifier: kevents_actors::Classifier::ClientGo,
                    ..RetryPolicy::default()
                },
                ..SinkOptions::default()
            },
        )
        .start();
    p.recorder()
        .event(&pod("a"), EventType::Warning, "Failed", "x")
        .unwrap();
    let report = p.shutdown(Duration::from_secs(600)).await;
    let s = report.stats.sink("api").unwrap();
    assert_eq!((s.attempts, s.rejected), (1, 1));
}

/// A fatal error restarts the sink with a rebuilt `EventSink` and the write goes through.
#[actix_rt::test]
async fn fatal_error_rebuilds_the_sink() {
    let broken = ScriptedSink {
        always_fail: Some(SinkError::Status(Box::new(Status::failure(
            401,
            "Unauthorized",
            "token expired",
        )))),
        ..ScriptedSink::new()
    };
    let healthy = ScriptedSink::new();
    let h = healthy.clone();
    let p = Pipeline::builder(source())
        .sink(
            "api",
            broken,
            SinkOptions {
                retry: RetryPolicy {
                    fatal: Some(Arc::new(|e: &SinkError| e.code() == Some(401))),
                    ..fast_retry()
                },
                rebuild: Some(Arc::new(move || Arc::new(h.clone()))),
                ..SinkOptions::default()
            },
        )
        .start();
    p.recorder()
        .event(&pod("a"), EventType::Warning, "Failed", "x")
        .unwrap();
    let report = p.shutdown(Duration::from_secs(10)).await;
    let s = report.stats.sink("api").unwrap();
    assert_eq!((s.restarts, s.created, s.attempts), (1, 1, 2));
    assert_eq!(healthy.api.list().len(), 1);
}

/// Watchers can be added and removed at any time; a late watcher sees every later event.
#[actix_rt::test]
async fn register_and_unregister_at_any_time() {
    let early = Collector::default();
    let late = Collector::default();
    let p = Pipeline::builder(source())
        .watcher(
            "early",
            early.clone().start().recipient(),
            WatcherPolicy::Backpressure { capacity: 8 },
        )
        .start();
    let r = p.recorder();
    for i in 0..10 {
        r.emit(occ(i)).unwrap();
    }
    p.flush().await.unwrap();
    let h = p
        .add_watcher(
            "late",
            late.clone().start().recipient(),
            WatcherPolicy::Backpressure { capacity: 8 },
        )
        .await
        .unwrap();
    for i in 10..20 {
        r.emit(occ(i)).unwrap();
    }
    p.flush().await.unwrap();
    assert!(p.remove_watcher(&h).await.unwrap());
    for i in 20..30 {
        r.emit(occ(i)).unwrap();
    }
    p.flush().await.unwrap();
    assert_eq!(early.len(), 30);
    assert_eq!(late.seqs(), (10..20).collect::<Vec<_>>());
    p.shutdown(Duration::from_secs(1)).await;
}

/// The spam filter's skips are counted as drops of the sink chain.
#[actix_rt::test]
async fn spam_filtered_events_are_counted() {
    let sink = ScriptedSink::new();
    // One write per correlator result and client-go's spam filter (skipped repeats are
    // dropped): the counts below are client-go's.
    let p = Pipeline::builder(source())
        .sink(
            "api",
            sink.clone(),
            SinkOptions {
                coalesce: false,
                defer_spam_tails: false,
                ..SinkOptions::default()
            },
        )
        .start();
    let r = p.recorder();
    for _ in 0..30 {
        r.event(&pod("a"), EventType::Normal, "Started", "same")
            .unwrap();
    }
    let report = p.shutdown(Duration::from_secs(10)).await;
    let s = report.stats.sink("api").unwrap();
    // client-go's burst of 25 per object.
    assert_eq!(
        (s.correlated, s.spam_filtered, s.created, s.patched),
        (30, 5, 1, 24)
    );
    assert_eq!(sink.api.list()[0].count, 25);
    assert_eq!(report.stats.dropped_total(), 5);
}

/// `ObjectRecorder` calls are `Recorder::event` calls on the bound object: the same events
/// (object, source, type, reason, message), in call order with plain calls, the same typed
/// refusals, and refused after shutdown.
#[actix_rt::test]
async fn object_recorder_records_like_event() {
    let c = Collector::default();
    let p = collected(&c);
    let r = p.recorder();
    let object = pod("p").with_field_path("spec.containers{app}");
    let bound = r.for_object(&object).unwrap();
    assert_eq!(bound.object(), &object);
    let n = 200;
    for i in 0..n {
        let message = format!("m{i}");
        let emitted = if i % 2 == 0 {
            bound.event(EventType::Warning, "BackOff", &message)
        } else {
            r.event(&object, EventType::Warning, "BackOff", &message)
        };
        assert_eq!(emitted.unwrap(), Emit::Queued);
    }
    bound
        .eventf(EventType::Normal, "Scaled", format_args!("{} replicas", 3))
        .unwrap();
    // A namespace that is not a DNS-1123 label is refused at every call (counted each
    // time), as by `event`, though the binding checked it once.
    let mut q = pod("q");
    q.namespace = "Not_A_Label".into();
    let bad = r.for_object(&q).unwrap();
    let invalid_before = p.stats().dropped_invalid;
    for _ in 0..2 {
        assert!(matches!(
            bad.event(EventType::Normal, "R", "m"),
            Err(RecordError::Invalid(InvalidEvent::Namespace(_)))
        ));
    }
    assert_eq!(p.stats().dropped_invalid, invalid_before + 2);
    p.flush().await.unwrap();
    let mut expected: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    expected.push("3 replicas".into());
    assert_eq!(c.messages(), expected);
    let seen = c.seen.lock().unwrap().clone();
    for (_, e) in &seen {
        assert_eq!(e.involved_object, object);
        assert_eq!(e.source, source());
        assert_eq!(e.metadata.namespace, "ns");
        assert!(e.metadata.name.starts_with("p."), "{}", e.metadata.name);
    }
    assert_eq!(seen[0].1.reason, "BackOff");
    assert_eq!(seen[0].1.type_, "Warning");
    assert_eq!(seen[n].1.type_, "Normal");
    p.shutdown(Duration::from_secs(10)).await;
    assert!(matches!(
        bound.event(EventType::Normal, "R", "after"),
        Err(RecordError::Shutdown)
    ));
}
