//! A pipeline dropped without `shutdown` while counts are unwritten: one `warn!` saying how
//! many occurrences, and the chains asked to write them (they do, while the actix System
//! runs). A pipeline with nothing unwritten, or shut down, says nothing.
#![allow(missing_docs)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kevents_actors::{EventsV1Config, Pipeline, SinkOptions, TokioClock};
use kevents_core::events_v1::Reporter;
use kevents_core::{CorrelatorOptions, EventSource, EventType, ObjectReference, Time};
use kevents_sim::MemoryApiServer;

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// Captures this thread's log lines (the actix System runs here) until the guard is dropped.
fn capture() -> (Buf, tracing::subscriber::DefaultGuard) {
    let buf = Buf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    (buf, tracing::subscriber::set_default(subscriber))
}

/// Log lines written while `f` runs.
fn logs_of(f: impl FnOnce()) -> String {
    let (buf, guard) = capture();
    f();
    drop(guard);
    buf.text()
}

fn v1_pipeline(api: &MemoryApiServer) -> Pipeline {
    Pipeline::builder(EventSource::new("ctl", "host"))
        .clock(Arc::new(TokioClock::new(
            Time::parse_rfc3339("2021-01-01T00:00:00Z").unwrap(),
        )))
        .events_v1(EventsV1Config::new(Reporter::with_instance("ctl", "ctl-0")))
        .sink_events_v1(
            "v1",
            api.clone(),
            kevents_actors::events_v1::SinkOptions {
                // No live counts: the repeats stay in memory until the drop.
                freshness: None,
                ..Default::default()
            },
        )
        .start()
}

fn backoff() -> kevents_core::events_v1::Occurrence {
    kevents_core::events_v1::Occurrence::new(
        ObjectReference::new("v1", "Pod", "ns", "a").with_uid("a"),
        None,
        EventType::Warning,
        "BackOff",
        "Restart",
        "crash",
    )
}

#[actix_rt::test]
async fn dropping_a_pipeline_with_unwritten_counts_warns_and_writes_them() {
    tokio::time::pause();
    let api = MemoryApiServer::new();
    let p = v1_pipeline(&api);
    let r = p.recorder();
    for _ in 0..6 {
        r.events_v1().emit(backoff()).unwrap();
    }
    p.flush().await.unwrap();
    let count = || api.list_events_v1()[0].series.map(|s| s.count);
    assert_eq!(count(), Some(2));
    assert_eq!(p.stats().unwritten(), 4, "{:?}", p.stats().sinks_events_v1);

    let logs = logs_of(|| drop(p));
    assert!(logs.contains("WARN"), "{logs}");
    assert!(
        logs.contains("dropped without shutdown: 4 occurrences are not in a stored count"),
        "{logs}"
    );
    // Best effort: the actors still run on this System and write the latest count.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(count(), Some(6));
    // The handle outlives the pipeline and keeps recording into the same series.
    r.events_v1().emit(backoff()).unwrap();
}

#[actix_rt::test]
async fn dropping_a_pipeline_with_held_spam_tails_writes_them() {
    let api = MemoryApiServer::new();
    let p = Pipeline::builder(EventSource::new("ctl", "host"))
        .sink(
            "api",
            api.clone(),
            SinkOptions {
                correlator: CorrelatorOptions {
                    burst_size: 1,
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .start();
    let r = p.recorder();
    let pod = ObjectReference::new("v1", "Pod", "ns", "a").with_uid("a");
    for _ in 0..3 {
        r.event(&pod, EventType::Normal, "Started", "same").unwrap();
    }
    p.flush().await.unwrap();
    assert_eq!(api.list()[0].count, 1);
    assert_eq!(p.stats().unwritten(), 1, "one held tail");
    let logs = logs_of(|| drop(p));
    assert!(
        logs.contains("dropped without shutdown: 1 occurrences"),
        "{logs}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(api.list()[0].count, 3);
}

#[actix_rt::test]
async fn nothing_unwritten_nothing_said() {
    let api = MemoryApiServer::new();
    let p = v1_pipeline(&api);
    p.recorder().events_v1().emit(backoff()).unwrap();
    p.flush().await.unwrap();
    assert_eq!(p.stats().unwritten(), 0);
    let logs = logs_of(|| drop(p));
    assert!(logs.is_empty(), "{logs}");

    let p = v1_pipeline(&api);
    for _ in 0..3 {
        p.recorder().events_v1().emit(backoff()).unwrap();
    }
    p.flush().await.unwrap();
    // Unwritten counts, but shut down: the drop inside `shutdown` says nothing.
    assert_eq!(p.stats().unwritten(), 1);
    let (buf, guard) = capture();
    let report = p.shutdown(Duration::from_secs(5)).await;
    drop(guard);
    assert!(report.completed);
    assert_eq!(report.stats.unwritten(), 0);
    assert!(
        !buf.text().contains("dropped without shutdown"),
        "{}",
        buf.text()
    );
}
