//! Registers a user-defined watcher actor next to the built-in logging watcher and a sink
//! chain writing to an in-memory apiserver.
//!
//! Run with `cargo run --example custom_watcher`.

use std::collections::BTreeMap;
use std::time::Duration;

use actix::prelude::*;
use kevents_actors::{EventMessage, Pipeline, SinkOptions, WatcherPolicy, eventf};
use kevents_core::{EventSource, EventType, ObjectReference};
use kevents_sim::MemoryApiServer;

/// A watcher that counts Warning events per reason (what a metrics or alerting plug-in
/// would do).
#[derive(Default)]
struct WarningCounter {
    by_reason: BTreeMap<String, u64>,
}

impl Actor for WarningCounter {
    type Context = Context<Self>;
}

impl Handler<EventMessage> for WarningCounter {
    type Result = ();

    fn handle(&mut self, msg: EventMessage, _: &mut Context<Self>) {
        if let Some(e) = msg.event()
            && e.type_ == "Warning"
        {
            *self.by_reason.entry(e.reason.clone()).or_default() += 1;
        }
    }
}

/// Asks the counter for its totals.
#[derive(Message)]
#[rtype(result = "BTreeMap<String, u64>")]
struct Totals;

impl Handler<Totals> for WarningCounter {
    type Result = MessageResult<Totals>;

    fn handle(&mut self, _: Totals, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.by_reason.clone())
    }
}

#[actix::main]
async fn main() {
    // The application, not the library, decides where logs go.
    tracing_subscriber::fmt().with_target(false).init();
    let api = MemoryApiServer::new();
    let mut pipeline = Pipeline::builder(EventSource::new("example-controller", "node-1"))
        .logging(WatcherPolicy::default())
        .sink("apiserver", api.clone(), SinkOptions::default())
        .start();

    // A watcher can be registered at any time; it sees every event distributed afterwards.
    let counter = WarningCounter::default().start();
    let handle = pipeline
        .add_watcher(
            "warning-counter",
            counter.clone().recipient(),
            WatcherPolicy::Backpressure { capacity: 100 },
        )
        .await
        .expect("pipeline is running");

    let recorder = pipeline.recorder();
    for i in 0..5 {
        let pod = ObjectReference::new("v1", "Pod", "default", format!("web-{}", i % 2));
        eventf!(
            recorder,
            &pod,
            EventType::Warning,
            "BackOff",
            "restarting container (attempt {i})"
        )
        .expect("valid event");
    }
    recorder
        .event(
            &ObjectReference::new("v1", "Pod", "default", "web-0"),
            EventType::Normal,
            "Started",
            "started container",
        )
        .expect("valid event");

    pipeline.flush().await.expect("pipeline is running");
    let totals = counter.send(Totals).await.expect("counter is running");
    println!("warnings by reason: {totals:?}");
    println!(
        "stats for {}: {:?}",
        handle.name(),
        pipeline.stats().watcher(handle.name())
    );

    // A second sink with its own correlator can also be added later.
    pipeline
        .add_sink("mirror", MemoryApiServer::new(), SinkOptions::default())
        .await
        .expect("pipeline is running");

    let report = pipeline.shutdown(Duration::from_secs(10)).await;
    println!(
        "shutdown: completed={} delivered={} dropped={} pending={}",
        report.completed,
        report.delivered(),
        report.stats.dropped_total(),
        report.pending()
    );
    for e in api.list() {
        println!(
            "stored {}/{} count={} {}: {}",
            e.metadata.namespace, e.metadata.name, e.count, e.reason, e.message
        );
    }
}
