//! The last `Pipeline` handle dropped without `shutdown` waits for the drain of a pipeline on
//! its own thread, wherever the drop happens: on a plain thread, on the `block_on` thread or a
//! worker of a multi-thread tokio runtime, on a current-thread runtime. Right after the drop
//! (what a process returning from `main` has) every count is stored, with a sink that takes
//! 30 ms per request.
#![allow(missing_docs)]

use std::time::Duration;

use kevents_actors::{Pipeline, SinkOptions};
use kevents_core::{Event, EventSink, EventSource, EventType, ObjectReference, SinkFuture, Stored};
use kevents_sim::MemoryApiServer;

/// The in-memory apiserver, 30 ms away (the sleep runs on the pipeline's own runtime).
#[derive(Clone)]
struct Slow(MemoryApiServer);

const LATENCY: Duration = Duration::from_millis(30);

impl EventSink for Slow {
    fn create(&self, event: &Event) -> SinkFuture {
        let (api, event) = (self.0.clone(), event.clone());
        Box::pin(async move {
            tokio::time::sleep(LATENCY).await;
            api.create_now(&event).map(Stored::from)
        })
    }
    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        let (api, event, patch) = (self.0.clone(), event.clone(), patch.to_vec());
        Box::pin(async move {
            tokio::time::sleep(LATENCY).await;
            api.patch_now(&event.metadata.namespace, &event.metadata.name, &patch)
                .map(Stored::from)
        })
    }
}

/// Records 10 repeats of each of 5 events and drops the pipeline; returns the counts stored
/// right after the drop returned.
fn record_and_drop(api: &MemoryApiServer) -> Vec<i32> {
    let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
        .sink("apiserver", Slow(api.clone()), SinkOptions::default())
        .start_thread()
        .expect("started");
    let recorder = pipeline.recorder();
    for i in 0..5 {
        let pod = ObjectReference::new("v1", "Pod", "default", format!("web-{i}"));
        for _ in 0..10 {
            recorder
                .event(&pod, EventType::Warning, "BackOff", "restarting")
                .expect("recorded");
        }
    }
    drop(pipeline);
    let mut counts: Vec<i32> = api.list().iter().map(|e| e.count).collect();
    counts.sort_unstable();
    counts
}

const ALL: [i32; 5] = [10; 5];

#[test]
fn dropped_on_a_plain_thread() {
    let api = MemoryApiServer::new();
    assert_eq!(record_and_drop(&api), ALL);
}

#[test]
fn dropped_on_the_block_on_thread_of_a_multi_thread_runtime() {
    // What `#[tokio::main]` does when `main` returns: its locals drop inside `block_on`.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let api = MemoryApiServer::new();
    assert_eq!(rt.block_on(async { record_and_drop(&api) }), ALL);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn dropped_in_a_task_on_a_runtime_worker() {
    // The only worker waits in `block_in_place`: the runtime keeps running other tasks.
    let ticks = tokio::spawn(async {
        let mut n = 0u32;
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            n += 1;
        }
        n
    });
    let api = MemoryApiServer::new();
    let counts = tokio::spawn({
        let api = api.clone();
        async move { record_and_drop(&api) }
    })
    .await
    .expect("task");
    assert_eq!(counts, ALL);
    assert_eq!(ticks.await.expect("ticks"), 50);
}

#[tokio::test(flavor = "current_thread")]
async fn dropped_on_a_current_thread_runtime() {
    // The sink runs on the pipeline's own thread: blocking this runtime holds nothing up.
    let api = MemoryApiServer::new();
    assert_eq!(record_and_drop(&api), ALL);
}

#[test]
fn a_shut_down_pipeline_is_not_waited_for_again() {
    let api = MemoryApiServer::new();
    let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
        .sink("apiserver", Slow(api.clone()), SinkOptions::default())
        .start_thread()
        .expect("started");
    let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
    pipeline
        .recorder()
        .event(&pod, EventType::Normal, "Started", "started")
        .expect("recorded");
    let report = pipeline
        .shutdown_blocking(Duration::from_secs(5))
        .expect("shut down");
    assert!(report.completed, "{report}");
    assert_eq!(api.list()[0].count, 1);
}

#[test]
fn a_drain_longer_than_the_drop_deadline_is_not_waited_for_longer() {
    // 50 events one write each at 30 ms, 16 at once: about 100 ms of writes against a 1 ms
    // deadline. The drop returns within the deadline and its grace (and says so on stderr).
    let api = MemoryApiServer::new();
    let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
        .sink("apiserver", Slow(api.clone()), SinkOptions::default())
        .drop_deadline(Duration::from_millis(1))
        .start_thread()
        .expect("started");
    let recorder = pipeline.recorder();
    for i in 0..50 {
        let pod = ObjectReference::new("v1", "Pod", "default", format!("web-{i}"));
        recorder
            .event(&pod, EventType::Warning, "BackOff", "restarting")
            .expect("recorded");
    }
    let started = std::time::Instant::now();
    drop(pipeline);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(api.list().len() < 50, "all 50 written within 1 ms?");
}

/// An events.k8s.io/v1 sink whose requests wait until the gate opens.
#[derive(Clone)]
struct Gated {
    api: MemoryApiServer,
    gate: std::sync::Arc<tokio::sync::Semaphore>,
}

impl kevents_core::events_v1::EventSink for Gated {
    fn create_events_v1(
        &self,
        event: &kevents_core::events_v1::Event,
    ) -> kevents_core::events_v1::SinkFuture {
        let (this, event) = (self.clone(), event.clone());
        Box::pin(async move {
            let _permit = this.gate.acquire().await;
            this.api.create_now_events_v1(&event).map(Stored::from)
        })
    }
    fn patch_events_v1(
        &self,
        event: &kevents_core::events_v1::Event,
        patch: &[u8],
    ) -> kevents_core::events_v1::SinkFuture {
        let (this, event, patch) = (self.clone(), event.clone(), patch.to_vec());
        Box::pin(async move {
            let _permit = this.gate.acquire().await;
            this.api
                .patch_now_events_v1(&event.metadata.namespace, &event.metadata.name, &patch)
                .map(Stored::from)
        })
    }
}

#[test]
fn unwritten_counts_occurrences_once() {
    // 10 repeats while the CREATE and the series' first PATCH wait for the server: 10
    // occurrences are unwritten (not 12: the two writes hold watcher slots, not more).
    use kevents_actors::EventsV1Config;
    use kevents_core::events_v1::Reporter;
    let api = MemoryApiServer::new();
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let pipeline = Pipeline::builder(EventSource::new("ctl", "host"))
        .events_v1(EventsV1Config::new(Reporter::with_instance("ctl", "ctl-0")))
        .sink_events_v1(
            "v1",
            Gated {
                api: api.clone(),
                gate: std::sync::Arc::clone(&gate),
            },
            kevents_actors::events_v1::SinkOptions {
                freshness: None,
                ..Default::default()
            },
        )
        .start_thread()
        .expect("started");
    let pod = ObjectReference::new("v1", "Pod", "ns", "a").with_uid("a");
    for _ in 0..10 {
        let occ = kevents_core::events_v1::Occurrence::new(
            pod.clone(),
            None,
            EventType::Warning,
            "BackOff",
            "Restart",
            "x",
        );
        pipeline.recorder().events_v1().emit(occ).expect("recorded");
    }
    let observed = || pipeline.stats().sinks_events_v1[0].cache.observed;
    let start = std::time::Instant::now();
    while observed() < 10 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    // The series' in-memory count is summed at most every 20 ms.
    std::thread::sleep(Duration::from_millis(50));
    let stats = pipeline.stats();
    assert_eq!(
        stats.sinks_events_v1[0].queued, 2,
        "{:?}",
        stats.sinks_events_v1
    );
    assert_eq!(stats.unwritten(), 10, "{stats:?}");
    gate.add_permits(1_000);
    let report = pipeline
        .shutdown_blocking(Duration::from_secs(5))
        .expect("shut down");
    assert_eq!(report.stats.unwritten(), 0, "{report}");
    assert_eq!(api.list_events_v1()[0].series.map(|s| s.count), Some(10));
}
