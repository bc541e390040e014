//! A 429 is "later", not "never": a write refused with 429 for longer than the retry policy
//! lasts (8 answers against 3 attempts) is not given up; it waits under the write budget
//! and is stored once the server accepts it. A 503 still spends the attempts. The same for
//! the events.k8s.io/v1 series chain.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kevents_actors::{EventsV1Config, Pipeline, RetryPolicy, SinkOptions};
use kevents_core::events_v1::{Occurrence, Reporter};
use kevents_core::{
    Event, EventSink, EventSource, EventType, ObjectReference, SinkError, SinkFuture, Status,
    Stored,
};
use kevents_sim::MemoryApiServer;

/// The in-memory apiserver behind `refusals` answers of `code` (no `Retry-After`).
#[derive(Clone)]
struct Refusing {
    api: MemoryApiServer,
    left: Arc<AtomicU32>,
    code: u16,
}

impl Refusing {
    fn refuse(&self) -> Option<SinkError> {
        let left = self.left.load(Ordering::SeqCst);
        (left > 0).then(|| {
            self.left.store(left - 1, Ordering::SeqCst);
            SinkError::Status(Box::new(Status::failure(
                self.code,
                if self.code == 429 {
                    "TooManyRequests"
                } else {
                    "ServiceUnavailable"
                },
                "Too many requests: limit reached on type SourceAndObject for key k",
            )))
        })
    }
}

impl EventSink for Refusing {
    fn create(&self, event: &Event) -> SinkFuture {
        let out = match self.refuse() {
            Some(e) => Err(e),
            None => self.api.create_now(event).map(Stored::from),
        };
        Box::pin(async move { out })
    }
    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        let out = match self.refuse() {
            Some(e) => Err(e),
            None => self
                .api
                .patch_now(&event.metadata.namespace, &event.metadata.name, patch)
                .map(Stored::from),
        };
        Box::pin(async move { out })
    }
}

impl kevents_core::events_v1::EventSink for Refusing {
    fn create_events_v1(
        &self,
        event: &kevents_core::events_v1::Event,
    ) -> kevents_core::events_v1::SinkFuture {
        let out = match self.refuse() {
            Some(e) => Err(e),
            None => self.api.create_now_events_v1(event).map(Stored::from),
        };
        Box::pin(async move { out })
    }
    fn patch_events_v1(
        &self,
        event: &kevents_core::events_v1::Event,
        patch: &[u8],
    ) -> kevents_core::events_v1::SinkFuture {
        let out = match self.refuse() {
            Some(e) => Err(e),
            None => self
                .api
                .patch_now_events_v1(&event.metadata.namespace, &event.metadata.name, patch)
                .map(Stored::from),
        };
        Box::pin(async move { out })
    }
}

fn retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        sleep: Duration::from_millis(1),
        randomize_first: false,
        ..RetryPolicy::default()
    }
}

/// Five occurrences of one event through the events.k8s.io/v1 series chain, the server
/// refusing the first `refusals` requests with `code`: the stored series count and the
/// report.
fn run_events_v1(code: u16, refusals: u32) -> (Option<i32>, kevents_actors::ShutdownReport) {
    let api = MemoryApiServer::new();
    let sink = Refusing {
        api: api.clone(),
        left: Arc::new(AtomicU32::new(refusals)),
        code,
    };
    let options = kevents_actors::events_v1::SinkOptions {
        retry: retry(),
        ..Default::default()
    };
    let pipeline = Pipeline::builder(EventSource::new("example.com/ctl", "host"))
        .events_v1(EventsV1Config::new(Reporter::with_instance(
            "example.com/ctl",
            "ctl-1",
        )))
        .sink_events_v1("api", sink, options)
        .start_thread()
        .expect("started");
    let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
    for _ in 0..5 {
        pipeline
            .recorder()
            .events_v1()
            .emit(Occurrence::new(
                pod.clone(),
                None,
                EventType::Warning,
                "BackOff",
                "Restarting",
                "restarting",
            ))
            .expect("recorded");
    }
    let report = pipeline
        .shutdown_blocking(Duration::from_secs(60))
        .expect("shut down");
    let stored = api.list_events_v1();
    let count = stored
        .first()
        .map(|e| e.series.as_ref().map_or(1, |s| s.count));
    (count, report)
}

fn run(code: u16, refusals: u32) -> (Option<i32>, kevents_actors::ShutdownReport) {
    let api = MemoryApiServer::new();
    let sink = Refusing {
        api: api.clone(),
        left: Arc::new(AtomicU32::new(refusals)),
        code,
    };
    let options = SinkOptions {
        retry: retry(),
        ..SinkOptions::default()
    };
    let pipeline = Pipeline::builder(EventSource::new("ctl", "host"))
        .sink("api", sink, options)
        .start_thread()
        .expect("started");
    let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
    for _ in 0..5 {
        pipeline
            .recorder()
            .event(&pod, EventType::Warning, "BackOff", "restarting")
            .expect("recorded");
    }
    let report = pipeline
        .shutdown_blocking(Duration::from_secs(60))
        .expect("shut down");
    (api.list().first().map(|e| e.count), report)
}

#[test]
fn a_write_throttled_longer_than_the_retry_policy_is_not_given_up() {
    let (count, report) = run(429, 8);
    assert_eq!(count, Some(5), "{report}");
    assert_eq!(report.stats.sinks[0].retry_exhausted, 0, "{report}");
    assert!(report.completed, "{report}");
}

#[test]
fn a_failing_server_still_spends_the_attempts() {
    let (count, report) = run(503, 20);
    assert_eq!(count, None, "{report}");
    assert!(report.stats.sinks[0].retry_exhausted > 0, "{report}");
}

#[test]
fn a_series_write_throttled_longer_than_the_retry_policy_is_not_given_up() {
    let (count, report) = run_events_v1(429, 8);
    let series = report.stats.sink_events_v1("api").expect("series chain");
    assert_eq!(count, Some(5), "{report}");
    assert_eq!(series.retry_exhausted, 0, "{report}");
    assert!(report.completed, "{report}");
}

#[test]
fn a_failing_server_still_spends_the_series_attempts() {
    let (count, report) = run_events_v1(503, 40);
    let series = report.stats.sink_events_v1("api").expect("series chain");
    assert_ne!(count, Some(5), "{report}");
    assert!(series.retry_exhausted > 0, "{report}");
}
