//! client-go's record tests (reference D1, D4, D6, D13) run through the actor pipeline.
#![allow(missing_docs)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use kevents_actors::{
    Emit, LogStyle, LoggingWatcher, Pipeline, RecordError, RetryPolicy, SinkOptions, WatcherPolicy,
    eventf,
};
use kevents_core::core_v1::correlator::CorrelatorOptions;
use kevents_core::{EventSource, EventType, ObjectReference, Time, VirtualClock};

#[derive(Clone, Default)]
struct LogBuf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogBuf {
    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner()))
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

thread_local! {
    /// The buffer of the test running on this thread, if it captures logs.
    static THREAD_BUF: std::cell::RefCell<Option<LogBuf>> = const { std::cell::RefCell::new(None) };
}

/// Writes to the capturing buffer of the current thread, or nowhere.
struct ThreadWriter;

impl std::io::Write for ThreadWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        THREAD_BUF.with(|t| match t.borrow_mut().as_mut() {
            Some(buf) => buf.write(b),
            None => Ok(b.len()),
        })
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Clears this thread's capture when the test ends.
struct CaptureGuard;

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        THREAD_BUF.with(|t| *t.borrow_mut() = None);
    }
}

/// Captures the log lines written on this thread (the test's actix system, where the
/// pipeline's watchers run).
///
/// One global subscriber for the whole binary, not `set_default` per test: with several
/// scoped subscribers registering and dropping on parallel test threads, tracing-core's
/// global max-level and callsite interest are rebuilt concurrently and a callsite can be
/// left disabled for a while, so lines went missing (seen in CI: 5 of 7 structured lines).
fn capture_logs() -> (LogBuf, CaptureGuard) {
    static INIT: std::sync::Once = std::sync::Once::new();
    INIT.call_once(|| {
        let sub = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(|| ThreadWriter)
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .finish();
        tracing::subscriber::set_global_default(sub).expect("one global subscriber");
    });
    let buf = LogBuf::default();
    THREAD_BUF.with(|t| *t.borrow_mut() = Some(buf.clone()));
    (buf, CaptureGuard)
}

fn test_pod() -> ObjectReference {
    ObjectReference::new("v1", "Pod", "baz", "foo").with_uid("bar")
}
fn test_ref() -> ObjectReference {
    test_pod().with_field_path("spec.containers[2]")
}
fn test_ref2() -> ObjectReference {
    ObjectReference::new("v1", "Pod", "baz", "foo")
        .with_uid("differentUid")
        .with_field_path("spec.containers[3]")
}

/// The 7-item table of D1/D6: (object, reason, message).
fn table() -> Vec<(ObjectReference, &'static str, &'static str)> {
    vec![
        (test_ref(), "Started", "some verbose message: 1"),
        (test_pod(), "Killed", "some other verbose message: 1"),
        (test_ref(), "Started", "some verbose message: 1"),
        (test_ref2(), "Started", "some verbose message: 1"),
        (test_ref(), "Started", "some verbose message: 1"),
        (test_ref2(), "Stopped", "some verbose message: 1"),
        (test_ref2(), "Stopped", "some verbose message: 1"),
    ]
}

const EXPECTED_CALLS: [(&str, i32); 7] = [
    ("create", 1),
    ("create", 1),
    ("patch", 2),
    ("create", 1),
    ("patch", 3),
    ("create", 1),
    ("patch", 2),
];

fn sink_options(clock: &VirtualClock) -> SinkOptions {
    SinkOptions {
        correlator: CorrelatorOptions {
            clock: Some(Arc::new(clock.clone())),
            ..CorrelatorOptions::default()
        },
        retry: RetryPolicy {
            sleep: Duration::ZERO,
            ..RetryPolicy::default()
        },
        ..SinkOptions::default()
    }
}

/// Runs the table once, one item at a time (client-go waits for each item too).
async fn run_table(p: &Pipeline, clock: &VirtualClock) {
    let r = p.recorder();
    for (object, reason, message) in table() {
        clock.advance(Duration::from_secs(1));
        let emitted = eventf!(r, &object, EventType::Normal, reason, "{message}").unwrap();
        assert_eq!(emitted, Emit::Queued);
        p.flush().await.unwrap();
    }
}

fn calls_of(sink: &ScriptedSink) -> Vec<(&'static str, i32)> {
    sink.calls().iter().map(|c| (c.verb, c.count)).collect()
}

#[actix_rt::test]
async fn d1_eventf_table_through_the_pipeline() {
    let (logs, _guard) = capture_logs();
    let clock = VirtualClock::new(Time::parse_rfc3339("2021-01-01T00:00:00Z").unwrap());
    let sink = ScriptedSink::new();
    let p = Pipeline::builder(EventSource::new("eventTest", ""))
        .clock(Arc::new(clock.clone()))
        .logging_with(
            LoggingWatcher::new(LogStyle::Both),
            WatcherPolicy::default(),
        )
        .sink("api", sink.clone(), sink_options(&clock))
        .start();
    run_table(&p, &clock).await;
    assert_eq!(calls_of(&sink), EXPECTED_CALLS);

    let stored = sink.api.list();
    assert_eq!(stored.len(), 4);
    let first = sink.calls()[0].name.clone();
    assert!(first.starts_with("foo."), "{first}");
    let e1 = sink.api.get("baz", &first).unwrap();
    assert_eq!(e1.count, 3);
    assert_eq!(e1.involved_object, test_ref());
    assert_eq!(e1.source, EventSource::new("eventTest", ""));
    assert_ne!(e1.first_timestamp, e1.last_timestamp);
    let killed = stored.iter().find(|e| e.reason == "Killed").unwrap();
    assert_eq!(
        (killed.count, killed.involved_object.field_path.as_str()),
        (1, "")
    );

    let lines = logs.lines();
    let go: Vec<&String> = lines.iter().filter(|l| l.contains("Event(v1.")).collect();
    assert_eq!(go.len(), 7);
    assert!(go[0].ends_with(concat!(
        r#"Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"bar", "#,
        r#"APIVersion:"v1", ResourceVersion:"", FieldPath:"spec.containers[2]"}): "#,
        "type: 'Normal' reason: 'Started' some verbose message: 1"
    )));
    let structured: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("Event occurred"))
        .collect();
    assert_eq!(structured.len(), 7);
    assert!(
        structured[0].contains(concat!(
            r#"Event occurred object="baz/foo" fieldPath="spec.containers[2]" kind="Pod" "#,
            r#"apiVersion="v1" type="Normal" reason="Started" msg="some verbose message: 1""#
        )),
        "{}",
        structured[0]
    );
    assert!(structured[1].contains(r#"fieldPath="""#));
    let report = p.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
    assert_eq!(report.stats.dropped_total(), 0);
}

#[actix_rt::test]
async fn d4_lots_of_events_nothing_lost() {
    d4(None).await;
}

/// The same with the sink chain on its own arbiter (thread).
#[actix_rt::test]
async fn d4_with_sink_arbiter() {
    let arbiter = actix::Arbiter::new();
    d4(Some(arbiter.handle())).await;
    arbiter.stop();
}

async fn d4(arbiter: Option<actix::ArbiterHandle>) {
    let (logs, _guard) = capture_logs();
    let sink = ScriptedSink {
        fail_first_creates: 4,
        ..ScriptedSink::new()
    };
    let mut b = Pipeline::builder(EventSource::new("eventTest", ""))
        .logging(WatcherPolicy::default())
        .sink(
            "api",
            sink.clone(),
            SinkOptions {
                retry: RetryPolicy {
                    sleep: Duration::ZERO,
                    ..RetryPolicy::default()
                },
                ..SinkOptions::default()
            },
        );
    if let Some(a) = arbiter {
        b = b.sink_arbiter(a);
    }
    let p = b.start();
    let threads: Vec<_> = (0..1000)
        .map(|i| {
            let r = p.recorder();
            std::thread::spawn(move || {
                let pod = ObjectReference::new("version", "Pod", "baz", format!("foo-{i}"))
                    .with_uid("bar");
                eventf!(r, &pod, EventType::Normal, &format!("Reason-{i}"), "{i}")
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), Ok(Emit::Queued));
    }
    let report = p.shutdown(Duration::from_secs(60)).await;
    assert!(report.completed);
    assert_eq!(report.stats.dropped_total(), 0);
    assert_eq!(sink.api.list().len(), 1000);
    let mut creates = std::collections::HashMap::<String, usize>::new();
    for c in sink.calls() {
        *creates.entry(c.name).or_default() += 1;
    }
    assert_eq!(creates.len(), 1000);
    assert!(
        creates.values().all(|&n| n == 5),
        "every event needs 5 attempts"
    );
    let s = report.stats.sink("api").unwrap();
    assert_eq!((s.created, s.attempts), (1000, 5000));
    assert_eq!(report.stats.watcher("logging").unwrap().accepted, 1000);
    let logged = logs
        .lines()
        .iter()
        .filter(|l| l.contains("Event occurred"))
        .count();
    assert_eq!(logged, 1000);
}

#[actix_rt::test]
async fn d6_two_sinks_have_independent_correlators() {
    let clock = VirtualClock::new(Time::parse_rfc3339("2021-01-01T00:00:00Z").unwrap());
    let sink1 = ScriptedSink::new();
    let sink2 = ScriptedSink::new();
    let mut p = Pipeline::builder(EventSource::new("eventTest", ""))
        .clock(Arc::new(clock.clone()))
        .sink("one", sink1.clone(), sink_options(&clock))
        .start();
    run_table(&p, &clock).await;
    assert_eq!(calls_of(&sink1), EXPECTED_CALLS);
    p.add_sink("two", sink2.clone(), sink_options(&clock))
        .await
        .unwrap();
    run_table(&p, &clock).await;
    assert_eq!(calls_of(&sink2), EXPECTED_CALLS);
    // Sink one saw the replay too, continuing its own counts.
    let one: Vec<(&str, i32)> = calls_of(&sink1)[7..].to_vec();
    assert_eq!(
        one,
        [
            ("patch", 4),
            ("patch", 2),
            ("patch", 5),
            ("patch", 2),
            ("patch", 6),
            ("patch", 3),
            ("patch", 4)
        ]
    );
    let report = p.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
}

#[actix_rt::test]
async fn d13_concurrent_emitters_then_shutdown() {
    let p = Pipeline::builder(EventSource::new("eventTest", ""))
        .logging(WatcherPolicy::default())
        .sink(
            "api",
            kevents_sim::MemoryApiServer::new(),
            SinkOptions::default(),
        )
        .start();
    let threads: Vec<_> = (0..100)
        .map(|_| {
            let r = p.recorder();
            std::thread::spawn(move || {
                r.event(
                    &ObjectReference::default(),
                    EventType::Normal,
                    "Started",
                    "blah",
                )
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), Ok(Emit::Queued));
    }
    let report = p.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed);
    assert_eq!(report.stats.broadcast, 100);
    assert_eq!(report.live_actors, 0);
}

/// Emitters racing with shutdown: no panic; every call that was accepted is distributed,
/// every other one reports the shutdown.
#[actix_rt::test]
async fn d13_emitters_racing_shutdown() {
    let c = Collector::default();
    let p = Pipeline::builder(EventSource::new("eventTest", ""))
        .intake(kevents_actors::IntakePolicy::Unbounded)
        .watcher(
            "c",
            actix::Actor::start(c.clone()).recipient(),
            WatcherPolicy::Backpressure { capacity: 100 },
        )
        .start();
    let queued = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let r = p.recorder();
            let (q, x) = (Arc::clone(&queued), Arc::clone(&refused));
            std::thread::spawn(move || {
                for i in 0..20_000 {
                    match r.emit(occ(i)) {
                        Ok(Emit::Queued) => q.fetch_add(1, Ordering::SeqCst),
                        Err(RecordError::Shutdown) => x.fetch_add(1, Ordering::SeqCst),
                        other => panic!("unexpected {other:?}"),
                    };
                }
            })
        })
        .collect();
    actix_rt::task::yield_now().await;
    let report = p.shutdown(Duration::from_secs(60)).await;
    for t in threads {
        t.join().unwrap();
    }
    assert!(report.completed);
    assert_eq!(
        queued.load(Ordering::SeqCst) + refused.load(Ordering::SeqCst),
        80_000
    );
    assert_eq!(report.stats.broadcast, queued.load(Ordering::SeqCst));
    assert_eq!(c.len() as u64, queued.load(Ordering::SeqCst));
}
