//! The `retries` counter (issue 27): requests that re-sent a write after a failed attempt,
//! and nothing else; a write abandoned during its first attempt (a server that never
//! answers) made no retry.
#![allow(missing_docs)]

mod common;

use std::time::Duration;

use common::*;
use kevents_actors::{Pipeline, RetryPolicy, SinkOptions, WriteBudget};
use kevents_core::{EventSource, EventType, Occurrence, SinkError};

fn options() -> SinkOptions {
    SinkOptions {
        retry: RetryPolicy {
            sleep: Duration::ZERO,
            randomize_first: false,
            ..RetryPolicy::default()
        },
        budget: Some(WriteBudget::off()),
        ..SinkOptions::default()
    }
}

fn record(p: &Pipeline, objects: usize) {
    let r = p.recorder();
    for i in 0..objects {
        let o = Occurrence::new(pod(&format!("p{i}")), EventType::Normal, "Reason", "m");
        r.emit(o).unwrap();
    }
}

#[actix_rt::test]
async fn writes_abandoned_in_their_first_attempt_made_no_retry() {
    let sink = ScriptedSink {
        hang: true,
        ..ScriptedSink::new()
    };
    let p = Pipeline::builder(EventSource::new("test", "node"))
        .sink("hang", sink, options())
        .start();
    record(&p, 5);
    // Every write is in its first attempt (flush would wait for them: they never end).
    actix_rt::time::sleep(Duration::from_millis(300)).await;
    let report = p.shutdown(Duration::from_millis(500)).await;
    let k = &report.stats.sinks[0];
    assert_eq!(k.attempts, 5, "{k:?}");
    assert_eq!(k.abandoned, 5, "{k:?}");
    assert_eq!(k.retries, 0, "{k:?}");
}

#[actix_rt::test]
async fn every_resent_request_is_one_retry() {
    // Each event's CREATE fails twice (transport errors) and then succeeds.
    let sink = ScriptedSink {
        fail_first_creates: 2,
        ..ScriptedSink::new()
    };
    let p = Pipeline::builder(EventSource::new("test", "node"))
        .sink("flaky", sink, options())
        .start();
    record(&p, 4);
    let report = p.shutdown(Duration::from_secs(10)).await;
    let k = &report.stats.sinks[0];
    assert_eq!(k.created, 4, "{k:?}");
    assert_eq!(k.attempts, 12, "{k:?}");
    assert_eq!(k.retries, 8, "{k:?}");

    // A write refused at once (not retried) made none either.
    let sink = ScriptedSink {
        always_fail: Some(SinkError::Status(Box::new(kevents_core::Status::failure(
            403,
            "Forbidden",
            "no",
        )))),
        ..ScriptedSink::new()
    };
    let p = Pipeline::builder(EventSource::new("test", "node"))
        .sink("refused", sink, options())
        .start();
    record(&p, 3);
    let report = p.shutdown(Duration::from_secs(10)).await;
    let k = &report.stats.sinks[0];
    assert_eq!((k.rejected, k.attempts, k.retries), (3, 3, 0), "{k:?}");
}
