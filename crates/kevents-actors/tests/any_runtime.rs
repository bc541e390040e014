//! A pipeline started from anywhere: inside an actix `System` (on the caller's arbiter), from a
//! tokio runtime or from plain synchronous code (on a thread of its own), with the same
//! `Pipeline` and `Recorder` handles; and the shutdown report over both chains.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kevents_actors::{EventsV1Config, Pipeline, PipelineError, SinkOptions, WatcherPolicy};
use kevents_core::events_v1::Reporter;
use kevents_core::{EventSource, EventType, ObjectReference, Time, VirtualClock};
use kevents_sim::MemoryApiServer;

fn pod() -> ObjectReference {
    ObjectReference::new("v1", "Pod", "default", "web-1")
}

fn pipeline(api: &MemoryApiServer) -> Pipeline {
    Pipeline::builder(EventSource::new("my-controller", "node-1"))
        .sink("apiserver", api.clone(), SinkOptions::default())
        .start()
}

/// Records 3 repeats, flushes, adds a watcher and a second sink, records once more, shuts
/// down: everything through the handle, from whatever runtime awaits it.
async fn record_and_shut_down(api: &MemoryApiServer) {
    let mut pipeline = pipeline(api);
    assert!(pipeline.runs_on_own_thread());
    let recorder = pipeline.recorder();
    for _ in 0..3 {
        recorder
            .event(&pod(), EventType::Warning, "BackOff", "restarting")
            .expect("recorded");
    }
    pipeline.flush().await.expect("flushed");
    assert_eq!(api.list().len(), 1);
    assert_eq!(api.list()[0].count, 3);

    let second = MemoryApiServer::new();
    let watcher = pipeline
        .add_sink("second", second.clone(), SinkOptions::default())
        .await
        .expect("sink added");
    assert_eq!(watcher.name(), "sink:second");
    recorder
        .event(&pod(), EventType::Warning, "BackOff", "restarting")
        .expect("recorded");
    let report = pipeline.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed, "{report}");
    assert_eq!(report.live_actors, 0, "{report}");
    // Writes coalesce (fewer than occurrences); every occurrence is in a stored count.
    let sinks: u64 = report.stats.sinks.iter().map(|s| s.delivered()).sum();
    assert_eq!(report.delivered(), sinks, "{report}");
    assert!(report.delivered() >= 3, "{report}");
    assert_eq!(api.list()[0].count, 4);
    assert_eq!(second.list()[0].count, 1);
    assert!(recorder.is_shut_down());
}

#[tokio::test(flavor = "current_thread")]
async fn from_a_current_thread_tokio_runtime() {
    record_and_shut_down(&MemoryApiServer::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_a_multi_thread_tokio_runtime() {
    record_and_shut_down(&MemoryApiServer::new()).await;
}

/// As a `#[tokio::main]` application does it: a runtime built by hand, `block_on` of main.
#[test]
fn from_tokio_main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(record_and_shut_down(&MemoryApiServer::new()));
}

#[test]
fn from_plain_synchronous_code() {
    let api = MemoryApiServer::new();
    let pipeline = pipeline(&api);
    assert!(pipeline.runs_on_own_thread());
    let recorder = pipeline.recorder();
    // The handle is Send: record from other threads too.
    std::thread::scope(|s| {
        for _ in 0..4 {
            let r = recorder.clone();
            s.spawn(move || {
                for _ in 0..25 {
                    r.event(&pod(), EventType::Normal, "Synced", "synced")
                        .expect("recorded");
                }
            });
        }
    });
    let report = pipeline
        .shutdown_blocking(Duration::from_secs(10))
        .expect("no runtime on this thread");
    assert!(report.completed, "{report}");
    assert_eq!(report.stats.recorded, 100);
    report
        .stats
        .check_sinks()
        .expect("every occurrence accounted for");
    let stored = api.list();
    assert_eq!(stored.len(), 1);
    // At least client-go's spam filter's burst of 25 per key.
    assert!(stored[0].count >= 25, "{report}");
}

#[tokio::test(flavor = "current_thread")]
async fn blocking_shutdown_inside_a_runtime_is_an_error_not_a_panic() {
    let api = MemoryApiServer::new();
    let pipeline = pipeline(&api);
    pipeline
        .recorder()
        .event(&pod(), EventType::Normal, "Synced", "synced")
        .expect("recorded");
    let err = pipeline
        .shutdown_blocking(Duration::from_secs(5))
        .expect_err("would block the runtime");
    assert_eq!(err, PipelineError::InsideRuntime);
    assert!(
        err.to_string().contains("shutdown(deadline).await"),
        "{err}"
    );
    // The pipeline was dropped: drained on its own thread.
    wait_for(|| api.list().len() == 1).await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_pipeline_on_its_own_thread_dropped_without_shutdown_is_drained() {
    let api = MemoryApiServer::new();
    let pipeline = pipeline(&api);
    for _ in 0..2 {
        pipeline
            .recorder()
            .event(&pod(), EventType::Warning, "BackOff", "restarting")
            .expect("recorded");
    }
    drop(pipeline);
    wait_for(|| api.list().first().is_some_and(|e| e.count == 2)).await;
}

#[test]
fn inside_an_actix_system_it_runs_on_the_callers_arbiter() {
    actix::System::new().block_on(async {
        let api = MemoryApiServer::new();
        let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
            .logging(WatcherPolicy::default())
            .sink("apiserver", api.clone(), SinkOptions::default())
            .start();
        assert!(!pipeline.runs_on_own_thread());
        pipeline
            .recorder()
            .event(&pod(), EventType::Normal, "Synced", "synced")
            .expect("recorded");
        let report = pipeline.shutdown(Duration::from_secs(5)).await;
        assert_eq!(report.delivered(), 1);
        // And on a thread of its own when asked for.
        let own = Pipeline::builder(EventSource::new("my-controller", "node-1"))
            .sink("apiserver", api.clone(), SinkOptions::default())
            .start_thread()
            .expect("started");
        assert!(own.runs_on_own_thread());
        own.recorder()
            .event(&pod(), EventType::Normal, "Synced", "synced")
            .expect("recorded");
        let report = own.shutdown(Duration::from_secs(5)).await;
        assert_eq!(report.delivered(), 1, "{report}");
        assert_eq!(api.list().len(), 2, "one event per pipeline's correlator");
    });
}

/// `delivered()` and friends count the events.k8s.io/v1 series chain too (they counted the
/// core/v1 sinks only: a drop-in's report said `delivered=0` after every write succeeded).
#[test]
fn the_report_counts_both_chains() {
    let (api, api_v1) = (MemoryApiServer::new(), MemoryApiServer::new());
    // Whole seconds: the in-memory apiserver keeps eventTime to the microsecond.
    let clock = Arc::new(VirtualClock::new(Time::from_unix_secs(1_700_000_000)));
    let pipeline = Pipeline::builder(EventSource::new("example.com/ctl", "node-1"))
        .clock(clock)
        .events_v1(EventsV1Config::new(Reporter::with_instance(
            "example.com/ctl",
            "ctl-1",
        )))
        .sink_events_v1(
            "apiserver",
            api_v1.clone(),
            kevents_actors::events_v1::SinkOptions::default(),
        )
        .sink("apiserver", api.clone(), SinkOptions::default())
        .start();
    let recorder = pipeline.recorder();
    for _ in 0..3 {
        recorder
            .events_v1()
            .emit(kevents_core::events_v1::Occurrence::new(
                pod(),
                None,
                EventType::Normal,
                "Scheduled",
                "Binding",
                "bound",
            ))
            .expect("recorded");
    }
    recorder
        .event(&pod(), EventType::Warning, "BackOff", "restarting")
        .expect("recorded");
    let report = pipeline
        .shutdown_blocking(Duration::from_secs(10))
        .expect("no runtime here");
    assert!(report.completed, "{report}");
    let series = report
        .stats
        .sink_events_v1("apiserver")
        .expect("series chain");
    let sink = report.stats.sink("apiserver").expect("core/v1 chain");
    assert!(series.delivered() >= 2, "{report:?}");
    assert_eq!(sink.delivered(), 1);
    assert_eq!(report.delivered(), series.delivered() + sink.delivered());
    assert_eq!(report.created(), series.created + sink.created);
    assert_eq!(report.failed(), 0);
    assert_eq!(
        api_v1.list_events_v1()[0].series.as_ref().map(|s| s.count),
        Some(3)
    );
    assert_eq!(api.list()[0].count, 1);
    let text = report.to_string();
    assert!(
        text.contains(&format!("{} writes stored", report.delivered()))
            && text.contains("1 core/v1 sink and 1 events.k8s.io/v1 series sink")
            && text.ends_with("nothing pending."),
        "{text}"
    );
    assert!(!text.contains('\n'), "one paragraph: {text}");
}

/// Polls `ok` for up to 10 s.
async fn wait_for(ok: impl Fn() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < Duration::from_secs(10), "timed out");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
