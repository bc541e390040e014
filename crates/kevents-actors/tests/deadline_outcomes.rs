//! At a shutdown deadline every occurrence is in exactly one outcome, in occurrences (issue
//! 36): written, given up (rejected, retries exhausted, abandoned at the deadline), still
//! pending (the intake, a watcher's queue or overflow table), dropped or spam-filtered.
//! Before, `failed()` (writes abandoned) and `pending()` (the same events, still in their
//! watcher's queue) overlapped, and occurrences still in the chain's overflow table were in
//! no failure counter.

use std::time::Duration;

use kevents_actors::{IntakePolicy, Pipeline, SinkOptions, WatcherPolicy};
use kevents_core::{Event, EventSink, EventSource, EventType, ObjectReference, SinkFuture};

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

#[actix_rt::test]
async fn at_a_deadline_every_occurrence_is_in_exactly_one_outcome() {
    let options = SinkOptions {
        delivery: WatcherPolicy::CoalesceIfFull {
            capacity: 4,
            overflow: 1000,
        },
        ..SinkOptions::default()
    };
    let p = Pipeline::builder(EventSource::new("deadline-test", "node"))
        .intake(IntakePolicy::Unbounded)
        .sink("api", Dead, options)
        .start();
    let r = p.recorder();
    for i in 0..200 {
        let pod = ObjectReference::new("v1", "Pod", "default", format!("p{}", i % 40));
        r.event(
            &pod,
            EventType::Warning,
            "BackOff",
            &format!("message {}", i % 7),
        )
        .expect("recorded");
    }
    let report = p.shutdown(Duration::from_millis(300)).await;
    let s = &report.stats;
    let k = s.sink("api").expect("the chain");
    assert!(!report.completed, "{report}");
    assert_eq!(s.recorded, 200, "{report}");
    let spam: u64 = s.sinks.iter().map(|k| k.spam_filtered).sum();
    let superseded: u64 = s.sinks.iter().map(|k| k.superseded).sum();
    assert_eq!(
        report.delivered()
            + report.failed()
            + report.pending()
            + report.dropped()
            + spam
            + superseded,
        s.recorded,
        "every occurrence in exactly one outcome: {report} ({k:?})"
    );
    // The chain's queued writes are abandoned (failed), the rest of the burst still in its
    // overflow table is pending: both said, in their units, in the report.
    assert!(report.abandoned() > 0 && report.pending() > 0, "{report}");
    assert_eq!(report.failed(), report.abandoned(), "{report}");
    let text = report.to_string();
    assert!(
        text.contains(&format!(
            "{} writes failed ({} abandoned at the deadline)",
            report.failed(),
            report.abandoned()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{} occurrences not written by the deadline (intake 0, sink:api {})",
            report.pending(),
            report.pending()
        )),
        "{text}"
    );
}
