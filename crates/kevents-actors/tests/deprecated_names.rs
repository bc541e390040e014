//! The names the events.k8s.io/v1 axis had before it got one spelling stay usable for one
//! release, as deprecated aliases of the new ones (docs/events-v1.md, "Names").
#![allow(deprecated)]

use kevents_actors::{EventsV1Config, Pipeline, SeriesSinkOptions, SinkOptionsV1};
use kevents_core::events_v1::{
    EventSinkV1, EventsV1Sink, OccurrenceV1, Reporter, SinkFutureV1, V1SinkFuture, V1WriteOutcome,
    WriteOutcomeV1,
};
use kevents_core::{EventSource, EventType, ObjectReference};
use kevents_sim::MemoryApiServer;
use std::time::Duration;

fn same<T>(_: Option<T>, _: Option<T>) {}

fn old_trait_bound<S: EventsV1Sink>(_: &S) {}
fn new_trait_bound<S: EventSinkV1>(s: &S) {
    old_trait_bound(s)
}

#[test]
fn old_type_names_are_the_new_types() {
    same::<SinkOptionsV1>(None, None::<SeriesSinkOptions>);
    same::<SinkFutureV1>(None, None::<V1SinkFuture>);
    same::<WriteOutcomeV1>(None, None::<V1WriteOutcome>);
    new_trait_bound(&MemoryApiServer::new());
}

#[actix::test]
async fn the_old_builder_and_snapshot_methods_still_work() {
    let api = MemoryApiServer::new();
    let pipeline = Pipeline::builder(EventSource::new("ctl", "node-1"))
        .events_v1(EventsV1Config::new(Reporter::with_instance(
            "example.com/ctl",
            "ctl-0",
        )))
        .series_sink("v1", api.clone(), SeriesSinkOptions::default())
        .start();
    let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
    for _ in 0..3 {
        pipeline
            .recorder()
            .event_v1(OccurrenceV1::new(
                pod.clone(),
                None,
                EventType::Normal,
                "Synced",
                "Sync",
                "synced",
            ))
            .expect("queued");
    }
    let report = pipeline.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed);
    let series = report
        .stats
        .series_sink("v1")
        .expect("the chain is named v1");
    assert_eq!(series.name, "v1");
    let stored = api.list_v1();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].series.as_ref().map(|s| s.count), Some(3));
}
