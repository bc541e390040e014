//! events.k8s.io/v1 through the actor pipeline: series timers under tokio's paused clock,
//! the shutdown flush, the core/v1 fallback, validation at the call, and client-go's
//! D10-D12, D18-D20 adapted to 1.27+ semantics.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kevents_actors::{
    CoreCalls, EventsV1Config, Pipeline, RecordError, RetryPolicy, SinkOptions, TokioClock,
    eventf_events_v1,
};
use kevents_core::events_v1::{
    ACTION_ANNOTATION, ClusterScopedNamespace, CoreFallback, NotePolicy, Reporter, SeriesOptions,
};
use kevents_core::{
    EventSource, EventType, ObjectReference, Reference, SinkError, Status, Time, VirtualClock,
    events_v1,
};
use kevents_sim::MemoryApiServer;

const MIN: Duration = Duration::from_secs(60);

fn t0() -> Time {
    Time::parse_rfc3339("2021-01-01T00:00:00Z").unwrap()
}

fn reporter() -> Reporter {
    Reporter::with_instance("eventTest", "eventTest-host")
}

/// A pipeline on tokio's (paused) clock with one series chain writing to `api`, with
/// client-go's timers only.
fn v1_pipeline(api: &MemoryApiServer, series: SeriesOptions) -> Pipeline {
    tokio::time::pause();
    let clock = Arc::new(TokioClock::new(t0()));
    Pipeline::builder(EventSource::new("eventTest", "host"))
        .clock(clock)
        .events_v1(EventsV1Config::new(reporter()))
        .sink_events_v1(
            "v1",
            api.clone(),
            kevents_actors::events_v1::SinkOptions {
                series,
                // These tests check client-go's timers: no live counts
                // (tests/live_counts.rs checks those).
                freshness: None,
                ..Default::default()
            },
        )
        .start()
}

fn pod() -> ObjectReference {
    ObjectReference::new("v1", "Pod", "baz", "foo").with_uid("bar")
}

fn backoff() -> kevents_core::events_v1::Occurrence {
    kevents_core::events_v1::Occurrence::new(
        pod(),
        None,
        EventType::Warning,
        "BackOff",
        "Restart",
        "crash",
    )
}

fn only_event(api: &MemoryApiServer) -> events_v1::Event {
    let all = api.list_events_v1();
    assert_eq!(all.len(), 1, "{all:#?}");
    all.into_iter().next().unwrap()
}

fn count(e: &events_v1::Event) -> Option<i32> {
    e.series.map(|s| s.count)
}

/// D10 (1.27+): first CREATE, second PATCH with count 2, later repeats counted in memory;
/// a different action is a new event without series. Shutdown writes the latest count.
#[actix_rt::test]
async fn series_first_create_second_patch_then_flush_on_shutdown() {
    let api = MemoryApiServer::new();
    let p = v1_pipeline(&api, SeriesOptions::default());
    let r = p.recorder();
    let related =
        ObjectReference::new("v1", "Pod", "baz", "foo").with_field_path(".spec.containers[0]");
    for i in 0..5 {
        eventf_events_v1!(
            r,
            &pod(),
            Some(&related as &dyn Reference),
            EventType::Normal,
            "test",
            "started",
            "some verbose message: {}",
            1
        )
        .unwrap();
        p.flush().await.unwrap();
        let e = only_event(&api);
        assert!(e.metadata.name.starts_with("foo."));
        assert_eq!(e.reporting_instance, "eventTest-host");
        // Count 2 from the second occurrence on; later repeats stay in memory.
        assert_eq!(count(&e), if i == 0 { None } else { Some(2) });
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(api.request_counts(), (1, 1));
    eventf_events_v1!(
        r,
        &pod(),
        Some(&related as &dyn Reference),
        EventType::Normal,
        "test",
        "stopped",
        "some verbose message: {}",
        1
    )
    .unwrap();
    p.flush().await.unwrap();
    let all = api.list_events_v1();
    assert_eq!(all.len(), 2);
    let stopped = all.iter().find(|e| e.action == "stopped").unwrap();
    assert_eq!(stopped.series, None);

    let report = p.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
    let started = api
        .list_events_v1()
        .into_iter()
        .find(|e| e.action == "started")
        .unwrap();
    assert_eq!(count(&started), Some(5), "the flush wrote the latest count");
    let s = report.stats.sink_events_v1("v1").unwrap();
    assert_eq!(s.cache.flushed, 1);
    assert_eq!(s.flush_written, 1);
    assert_eq!((s.created, s.patched, s.failed()), (2, 2, 0));
    assert_eq!(report.live_actors, 0);
}

/// D11 under virtual time: a series idle for more than 6 minutes gets its final PATCH with the
/// cached count and is forgotten; a singleton is forgotten without a write; a later
/// occurrence starts a new event.
#[actix_rt::test]
async fn finish_and_singleton_forgotten_under_virtual_time() {
    let api = MemoryApiServer::new();
    let p = v1_pipeline(&api, SeriesOptions::default());
    let r = p.recorder();
    for _ in 0..3 {
        r.events_v1().emit(backoff()).unwrap();
    }
    let single = ObjectReference::new("v1", "Pod", "baz", "lonely");
    r.events_v1()
        .emit(kevents_core::events_v1::Occurrence::new(
            single.clone(),
            None,
            EventType::Normal,
            "Pulled",
            "Pull",
            "ok",
        ))
        .unwrap();
    p.flush().await.unwrap();
    assert_eq!(api.request_counts(), (2, 1));
    assert_eq!(
        count(
            &api.get_events_v1(
                "baz",
                &api.list_events_v1()
                    .iter()
                    .find(|e| e.reason == "BackOff")
                    .unwrap()
                    .metadata
                    .name
            )
            .unwrap()
        ),
        Some(2)
    );

    // Five minutes: nothing is due yet.
    tokio::time::sleep(5 * MIN).await;
    assert_eq!(api.request_counts(), (2, 1));
    // Past six minutes: the final PATCH (count 3) and both entries forgotten.
    tokio::time::sleep(2 * MIN).await;
    p.flush().await.unwrap();
    assert_eq!(api.request_counts(), (2, 2));
    let backoff_event = api
        .list_events_v1()
        .into_iter()
        .find(|e| e.reason == "BackOff")
        .unwrap();
    assert_eq!(count(&backoff_event), Some(3));
    let stats = p.stats();
    let s = stats.sink_events_v1("v1").unwrap();
    assert_eq!(
        (
            s.cache.finished,
            s.cache.singletons_forgotten,
            s.cache.entries
        ),
        (1, 1, 0)
    );

    // The singleton is forgotten: its repeat is a new event (CREATE, new name).
    r.events_v1()
        .emit(kevents_core::events_v1::Occurrence::new(
            single,
            None,
            EventType::Normal,
            "Pulled",
            "Pull",
            "ok",
        ))
        .unwrap();
    p.flush().await.unwrap();
    assert_eq!(api.request_counts(), (3, 2));
    assert_eq!(
        api.list_events_v1()
            .iter()
            .filter(|e| e.reason == "Pulled")
            .count(),
        2
    );
    let report = p.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
    // Nothing open any more: the flush writes nothing.
    assert_eq!(report.stats.sink_events_v1("v1").unwrap().cache.flushed, 0);
}

/// D12 under virtual time: an open series gets a heartbeat PATCH with its current count 30
/// minutes after its last write; the entry stays; the final PATCH is skipped when the
/// server already has the count.
#[actix_rt::test]
async fn heartbeat_every_30_minutes_under_virtual_time() {
    let api = MemoryApiServer::new();
    let p = v1_pipeline(&api, SeriesOptions::default());
    let start = tokio::time::Instant::now();
    let r = p.recorder();
    // Occurrences at 0, 5, 10, 15, 20, 25, 30 and 33 minutes: count 8, last write (series
    // start) at 5 minutes, so the heartbeat is due at 35.
    for at in [0, 5, 10, 15, 20, 25, 30, 33] {
        let now = tokio::time::Instant::now();
        let target = start + at * MIN;
        if target > now {
            tokio::time::sleep_until(target).await;
        }
        r.events_v1().emit(backoff()).unwrap();
        p.flush().await.unwrap();
    }
    assert_eq!(api.request_counts(), (1, 1));
    tokio::time::sleep_until(start + 36 * MIN).await;
    p.flush().await.unwrap();
    assert_eq!(api.request_counts(), (1, 2));
    assert_eq!(count(&only_event(&api)), Some(8));
    let stats = p.stats();
    let s = stats.sink_events_v1("v1").unwrap();
    assert_eq!(
        (s.cache.heartbeats, s.cache.entries, s.cache.open_series),
        (1, 1, 1)
    );

    // Idle since 33 min: finished after 39 min, without a PATCH (the server has count 8).
    tokio::time::sleep_until(start + 40 * MIN).await;
    p.flush().await.unwrap();
    assert_eq!(api.request_counts(), (1, 2));
    let stats = p.stats();
    assert_eq!(stats.sink_events_v1("v1").unwrap().cache.finished, 1);
    assert_eq!(stats.sink_events_v1("v1").unwrap().cache.entries, 0);
    p.shutdown(Duration::from_secs(5)).await;
}

/// events.k8s.io/v1 not served: v1 calls go down the core/v1 correlator path (action and
/// related dropped, as client-go's adapter), counted by the correlator; the series chain sees
/// nothing.
#[actix_rt::test]
async fn fallback_to_core_v1_when_not_served() {
    let api = MemoryApiServer::new();
    let clock = VirtualClock::new(t0());
    let p = Pipeline::builder(EventSource::new("eventTest", "host"))
        .clock(Arc::new(clock.clone()))
        .events_v1(EventsV1Config::new(reporter()).served(false))
        .sink("core", api.clone(), sink_options(&clock))
        .sink_events_v1(
            "v1",
            api.clone(),
            kevents_actors::events_v1::SinkOptions::default(),
        )
        .start();
    let r = p.recorder();
    let node = ObjectReference::new("v1", "Node", "", "n1");
    for _ in 0..3 {
        eventf_events_v1!(
            r,
            &pod(),
            Some(&node as &dyn Reference),
            EventType::Warning,
            "Failed",
            "Pull",
            "pull {} failed",
            "nginx"
        )
        .unwrap();
        clock.advance(Duration::from_secs(1));
    }
    let report = p.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
    let core = api.list();
    assert_eq!(core.len(), 1);
    assert_eq!(core[0].count, 3, "the correlator counts the repeats");
    assert_eq!(core[0].message, "pull nginx failed");
    assert_eq!(core[0].involved_object, pod());
    assert!(
        core[0].metadata.annotations.is_empty(),
        "action and related dropped"
    );
    assert_eq!(report.stats.sink_events_v1("v1").unwrap().cache.observed, 0);
    assert_eq!(report.stats.sink("core").unwrap().correlated, 3);
}

/// The fallback keeping action and related in annotations.
#[actix_rt::test]
async fn fallback_keeps_action_in_annotations_when_asked() {
    let api = MemoryApiServer::new();
    let clock = VirtualClock::new(t0());
    let p = Pipeline::builder(EventSource::new("eventTest", "host"))
        .clock(Arc::new(clock.clone()))
        .events_v1(
            EventsV1Config::new(reporter())
                .served(false)
                .fallback(CoreFallback::KeepInAnnotations),
        )
        .sink("core", api.clone(), sink_options(&clock))
        .start();
    p.recorder().events_v1().emit(backoff()).unwrap();
    p.shutdown(Duration::from_secs(5)).await;
    assert_eq!(
        api.list()[0].metadata.annotations[ACTION_ANNOTATION],
        "Restart"
    );
}

fn sink_options(clock: &VirtualClock) -> SinkOptions {
    let mut o = SinkOptions::default();
    o.correlator.clock = Some(Arc::new(clock.clone()));
    o
}

/// A v1 pipeline's core chain ignores v1 events, and core events are not seen by the series
/// chain (unless core calls are routed into the new API, next test).
#[actix_rt::test]
async fn core_and_v1_chains_each_take_their_own_events() {
    let api = MemoryApiServer::new();
    let core_api = MemoryApiServer::new();
    let clock = VirtualClock::new(t0());
    let p = Pipeline::builder(EventSource::new("eventTest", "host"))
        .clock(Arc::new(clock.clone()))
        .events_v1(EventsV1Config::new(reporter()))
        .sink("core", core_api.clone(), sink_options(&clock))
        .sink_events_v1(
            "v1",
            api.clone(),
            kevents_actors::events_v1::SinkOptions::default(),
        )
        .start();
    let r = p.recorder();
    r.events_v1().emit(backoff()).unwrap();
    r.event(&pod(), EventType::Normal, "Started", "started")
        .unwrap();
    let report = p.shutdown(Duration::from_secs(5)).await;
    assert_eq!(core_api.list().len(), 1);
    assert_eq!(core_api.list()[0].reason, "Started");
    assert_eq!(api.list_events_v1().len(), 1);
    assert_eq!(api.list_events_v1()[0].reason, "BackOff");
    assert_eq!(report.stats.sink("core").unwrap().correlated, 1);
    assert_eq!(report.stats.sink_events_v1("v1").unwrap().cache.observed, 1);
}

/// `CoreCalls::EventsV1`: `recorder.event(..)` records into the new API (action = reason),
/// repeats form a series.
#[actix_rt::test]
async fn core_calls_recorded_into_events_v1() {
    let api = MemoryApiServer::new();
    tokio::time::pause();
    let p = Pipeline::builder(EventSource::new("eventTest", "host"))
        .clock(Arc::new(TokioClock::new(t0())))
        .events_v1(EventsV1Config::new(reporter()).core_calls(CoreCalls::EventsV1 { action: None }))
        .sink_events_v1(
            "v1",
            api.clone(),
            kevents_actors::events_v1::SinkOptions::default(),
        )
        .start();
    let r = p.recorder();
    for _ in 0..4 {
        r.event(&pod(), EventType::Normal, "Pulled", "pulled")
            .unwrap();
    }
    let report = p.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
    let e = only_event(&api);
    assert_eq!((e.action.as_str(), e.note.as_str()), ("Pulled", "pulled"));
    assert_eq!(count(&e), Some(4));
}

/// Validation errors go back to the caller; nothing is queued.
#[actix_rt::test]
async fn validation_errors_returned_to_the_caller() {
    let api = MemoryApiServer::new();
    let mut factory = kevents_core::events_v1::EventFactory::new(reporter());
    factory.note_policy = NotePolicy::Reject;
    let p = Pipeline::builder(EventSource::new("eventTest", "host"))
        .events_v1(EventsV1Config::new(reporter()).factory(factory))
        .sink_events_v1(
            "v1",
            api.clone(),
            kevents_actors::events_v1::SinkOptions::default(),
        )
        .start();
    let r = p.recorder();
    let no_action = kevents_core::events_v1::Occurrence::new(
        pod(),
        None,
        EventType::Normal,
        "Started",
        "",
        "x",
    );
    assert_eq!(
        r.events_v1().emit(no_action),
        Err(RecordError::InvalidEventsV1(
            kevents_core::events_v1::InvalidEvent::ActionMissing
        ))
    );
    let long = kevents_core::events_v1::Occurrence::new(
        pod(),
        None,
        EventType::Normal,
        "Started",
        "Run",
        "x".repeat(1025),
    );
    assert_eq!(
        r.events_v1().emit(long),
        Err(RecordError::InvalidEventsV1(
            kevents_core::events_v1::InvalidEvent::NoteTooLong(1025)
        ))
    );
    let long_reason = kevents_core::events_v1::Occurrence::new(
        pod(),
        None,
        EventType::Normal,
        "R".repeat(129),
        "A",
        "n",
    );
    assert_eq!(
        r.events_v1().emit(long_reason),
        Err(RecordError::InvalidEventsV1(
            kevents_core::events_v1::InvalidEvent::ReasonTooLong(129)
        ))
    );
    let report = p.shutdown(Duration::from_secs(5)).await;
    assert_eq!(report.stats.recorded, 0);
    assert_eq!(report.stats.dropped_invalid, 3);
    assert!(api.list_events_v1().is_empty());
    assert_eq!(api.request_counts(), (0, 0));
}

/// Writes a series with a failing server: retried with back-off, then stored.
struct Flaky {
    api: MemoryApiServer,
    failures: AtomicU32,
}

impl Flaky {
    fn fail(&self) -> Option<SinkError> {
        let left = self.failures.load(Ordering::SeqCst);
        if left == 0 {
            return None;
        }
        self.failures.store(left - 1, Ordering::SeqCst);
        Some(SinkError::Status(Box::new(Status::failure(
            503,
            "ServiceUnavailable",
            "busy",
        ))))
    }
}

impl kevents_core::events_v1::EventSink for Flaky {
    fn create_events_v1(&self, event: &events_v1::Event) -> kevents_core::events_v1::SinkFuture {
        match self.fail() {
            Some(e) => Box::pin(async move { Err(e) }),
            None => self.api.create_events_v1(event),
        }
    }
    fn patch_events_v1(
        &self,
        event: &events_v1::Event,
        patch: &[u8],
    ) -> kevents_core::events_v1::SinkFuture {
        match self.fail() {
            Some(e) => Box::pin(async move { Err(e) }),
            None => self.api.patch_events_v1(event, patch),
        }
    }
}

#[actix_rt::test]
async fn retryable_errors_are_retried_with_back_off() {
    let api = MemoryApiServer::new();
    tokio::time::pause();
    let flaky = Flaky {
        api: api.clone(),
        failures: AtomicU32::new(2),
    };
    let p = Pipeline::builder(EventSource::new("eventTest", "host"))
        .clock(Arc::new(TokioClock::new(t0())))
        .events_v1(EventsV1Config::new(reporter()))
        .sink_events_v1(
            "v1",
            flaky,
            kevents_actors::events_v1::SinkOptions {
                retry: RetryPolicy {
                    randomize_first: false,
                    ..RetryPolicy::default()
                },
                ..Default::default()
            },
        )
        .start();
    p.recorder().events_v1().emit(backoff()).unwrap();
    p.recorder().events_v1().emit(backoff()).unwrap();
    p.flush().await.unwrap();
    let e = only_event(&api);
    assert_eq!(count(&e), Some(2), "the series start waited for its CREATE");
    let stats = p.stats();
    let s = stats.sink_events_v1("v1").unwrap();
    assert_eq!((s.attempts, s.created, s.patched, s.failed()), (4, 1, 1, 0));
    p.shutdown(Duration::from_secs(5)).await;
}

/// An events.k8s.io/v1 sink that panics on its `panic_on`th request (1-based), and otherwise
/// writes to `api`.
struct PanicsOnce {
    api: MemoryApiServer,
    calls: AtomicU32,
    panic_on: u32,
}

impl PanicsOnce {
    fn call(&self) {
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.panic_on {
            panic!("a series sink bug");
        }
    }
}

impl kevents_core::events_v1::EventSink for PanicsOnce {
    fn create_events_v1(&self, event: &events_v1::Event) -> kevents_core::events_v1::SinkFuture {
        self.call();
        self.api.create_events_v1(event)
    }
    fn patch_events_v1(
        &self,
        event: &events_v1::Event,
        patch: &[u8],
    ) -> kevents_core::events_v1::SinkFuture {
        self.call();
        self.api.patch_events_v1(event, patch)
    }
}

/// A series sink that panics mid-run is restarted (as a core/v1 sink is) and keeps its queue
/// and its series cache: no occurrence is lost, the stored series count equals the
/// occurrences recorded, and the restart is counted.
#[actix_rt::test]
async fn a_panicking_series_sink_restarts_and_loses_no_count() {
    let api = MemoryApiServer::new();
    tokio::time::pause();
    let sink = PanicsOnce {
        api: api.clone(),
        calls: AtomicU32::new(0),
        panic_on: 2,
    };
    let p = Pipeline::builder(EventSource::new("eventTest", "host"))
        .clock(Arc::new(TokioClock::new(t0())))
        .events_v1(EventsV1Config::new(reporter()))
        .sink_events_v1(
            "v1",
            sink,
            kevents_actors::events_v1::SinkOptions {
                retry: RetryPolicy {
                    randomize_first: false,
                    ..RetryPolicy::default()
                },
                ..Default::default()
            },
        )
        .start();
    let occurrences = 25;
    for i in 0..occurrences {
        p.recorder().events_v1().emit(backoff()).unwrap();
        if i % 5 == 0 {
            // Let the writes start mid-run (the 2nd request, the series' first PATCH, panics).
            p.flush().await.unwrap();
        }
    }
    let report = p.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed, "{report}");
    assert_eq!(report.live_actors, 0, "{report}");
    let e = only_event(&api);
    assert_eq!(
        count(&e),
        Some(occurrences),
        "every occurrence in the stored count"
    );
    let s = report.stats.sink_events_v1("v1").unwrap();
    assert_eq!(s.restarts, 1, "{s:#?}");
    assert_eq!(
        (s.retry_exhausted, s.abandoned, s.unwritten),
        (0, 0, 0),
        "{s:#?}"
    );
}

/// The cap: with room for two entries, a third series evicts the least recently observed one,
/// whose final PATCH keeps its count; the eviction is counted.
#[actix_rt::test]
async fn bounded_cache_evicts_with_a_final_patch() {
    let api = MemoryApiServer::new();
    let p = v1_pipeline(
        &api,
        SeriesOptions {
            max_entries: 2,
            ..Default::default()
        },
    );
    let r = p.recorder();
    for name in ["a", "b", "c"] {
        let o = ObjectReference::new("v1", "Pod", "baz", name);
        for _ in 0..3 {
            r.events_v1()
                .emit(kevents_core::events_v1::Occurrence::new(
                    o.clone(),
                    None,
                    EventType::Warning,
                    "BackOff",
                    "Restart",
                    "x",
                ))
                .unwrap();
        }
        p.flush().await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let stats = p.stats();
    let s = stats.sink_events_v1("v1").unwrap();
    assert_eq!(s.cache.evicted_series, 1);
    assert_eq!(s.cache.entries, 2);
    let a = api
        .list_events_v1()
        .into_iter()
        .find(|e| e.regarding.name == "a")
        .unwrap();
    assert_eq!(count(&a), Some(3), "the evicted series' count was written");
    let report = p.shutdown(Duration::from_secs(5)).await;
    for e in api.list_events_v1() {
        assert_eq!(count(&e), Some(3), "{}", e.regarding.name);
    }
    assert_eq!(report.stats.sink_events_v1("v1").unwrap().cache.flushed, 2);
}

/// D18 (1.27) at the pipeline level: a series PATCH that finds nothing (the event expired)
/// re-creates the event with its series.
#[actix_rt::test]
async fn expired_event_is_recreated_with_its_series() {
    let api = MemoryApiServer::new();
    let p = v1_pipeline(&api, SeriesOptions::default());
    let r = p.recorder();
    r.events_v1().emit(backoff()).unwrap();
    p.flush().await.unwrap();
    let name = only_event(&api).metadata.name;
    assert!(api.delete("baz", &name));
    r.events_v1().emit(backoff()).unwrap();
    p.flush().await.unwrap();
    let e = only_event(&api);
    assert_eq!(
        (e.metadata.name.as_str(), count(&e)),
        (name.as_str(), Some(2))
    );
    let stats = p.stats();
    assert_eq!(stats.sink_events_v1("v1").unwrap().recreated, 1);
    p.shutdown(Duration::from_secs(5)).await;
}

/// D19 (1.27): two identical Eventf calls on an empty reference → exactly one event in
/// "default" (client-go's namespace choice), with a series.
#[actix_rt::test]
async fn d19_two_identical_calls_make_one_series() {
    let api = MemoryApiServer::new();
    let mut factory = kevents_core::events_v1::EventFactory::new(reporter());
    factory.cluster_scoped_namespace = ClusterScopedNamespace::Default;
    tokio::time::pause();
    let p = Pipeline::builder(EventSource::new("eventTest", "host"))
        .clock(Arc::new(TokioClock::new(t0())))
        .events_v1(EventsV1Config::new(reporter()).factory(factory))
        .sink_events_v1(
            "v1",
            api.clone(),
            kevents_actors::events_v1::SinkOptions::default(),
        )
        .start();
    let r = p.recorder();
    for _ in 0..2 {
        eventf_events_v1!(
            r,
            &ObjectReference::default(),
            None,
            EventType::Normal,
            "reason",
            "action",
            ""
        )
        .unwrap();
    }
    p.flush().await.unwrap();
    let e = only_event(&api);
    assert_eq!(e.metadata.namespace, "default");
    assert!(e.series.is_some());
    p.shutdown(Duration::from_secs(5)).await;
}

/// D20 (1.33) through the pipeline: fixed clock, reporter c1/i1, name `<pod>.<hex nanos>`.
#[actix_rt::test]
async fn d20_eventf_fields_through_the_pipeline() {
    let api = MemoryApiServer::new();
    let clock = VirtualClock::new(Time::parse_rfc3339("2023-01-01T12:00:00Z").unwrap());
    let p = Pipeline::builder(EventSource::new("c1", "host"))
        .clock(Arc::new(clock))
        .events_v1(EventsV1Config::new(Reporter::with_instance("c1", "i1")))
        .sink_events_v1(
            "v1",
            api.clone(),
            kevents_actors::events_v1::SinkOptions::default(),
        )
        .start();
    let pod1 = ObjectReference::new("v1", "Pod", "ns1", "pod1").with_uid("12345");
    let node1 = ObjectReference::new("v1", "Node", "", "node1").with_uid("67890");
    eventf_events_v1!(
        p.recorder(),
        &pod1,
        Some(&node1 as &dyn Reference),
        EventType::Normal,
        "Scheduled",
        "Bind",
        "Pod failed to schedule on {}: {}",
        "node1",
        "not enough resources"
    )
    .unwrap();
    p.shutdown(Duration::from_secs(5)).await;
    let e = only_event(&api);
    assert_eq!(e.metadata.name, "pod1.17362d8e1c698000");
    assert_eq!(e.metadata.namespace, "ns1");
    assert_eq!(
        e.note,
        "Pod failed to schedule on node1: not enough resources"
    );
    assert_eq!(e.related.as_ref().unwrap().uid, "67890");
    assert_eq!(
        (
            e.reporting_controller.as_str(),
            e.reporting_instance.as_str()
        ),
        ("c1", "i1")
    );
}

/// `event_v1_note` on an `ObjectReference` and on borrowed fields and `eventf_events_v1!` (all
/// checked and packed at the call, built by the broadcaster) and `events_v1().event` of the same
/// occurrence (built at the call) store identical events.
#[actix_rt::test]
async fn packed_v1_paths_store_the_same_event() {
    let mut stored = Vec::new();
    for path in 0..4 {
        let api = MemoryApiServer::new();
        let p = Pipeline::builder(EventSource::new("eventTest", "host"))
            .clock(Arc::new(VirtualClock::new(t0())))
            .events_v1(EventsV1Config::new(reporter()))
            .sink_events_v1(
                "v1",
                api.clone(),
                kevents_actors::events_v1::SinkOptions::default(),
            )
            .start();
        let r = p.recorder();
        let pod = pod().with_resource_version("7");
        let (reason, action, note) = ("BackOff", "Restart", "crash ünïcode");
        match path {
            0 => r
                .events_v1()
                .event(&pod, None, EventType::Warning, reason, action, note),
            1 => {
                let fields = kevents_core::ReferenceRef::from(&pod);
                r.events_v1()
                    .event(&fields, None, EventType::Warning, reason, action, note)
            }
            2 => eventf_events_v1!(
                r,
                &pod,
                None,
                EventType::Warning,
                reason,
                action,
                "crash {}",
                "ünïcode"
            ),
            _ => r.events_v1().emit(kevents_core::events_v1::Occurrence::new(
                pod,
                None,
                EventType::Warning,
                reason,
                action,
                note,
            )),
        }
        .unwrap();
        assert!(p.shutdown(Duration::from_secs(5)).await.completed);
        stored.push(only_event(&api));
    }
    assert_eq!(stored[0].regarding, pod().with_resource_version("7"));
    assert_eq!(stored[0].note, "crash ünïcode");
    assert_eq!(stored[0], stored[1]);
    assert_eq!(stored[1], stored[2]);
    assert_eq!(stored[2], stored[3]);
}

/// A series chain added to a running pipeline sees every event distributed after the call
/// (its own series cache), as a core/v1 chain added with `add_sink` does; on the pipeline's
/// own thread too.
#[actix_rt::test]
async fn add_sink_v1_sees_later_events() {
    for own_thread in [false, true] {
        let first = MemoryApiServer::new();
        let builder = Pipeline::builder(EventSource::new("eventTest", "host"))
            .events_v1(EventsV1Config::new(reporter()))
            .sink_events_v1(
                "one",
                first.clone(),
                kevents_actors::events_v1::SinkOptions::default(),
            );
        let mut p = if own_thread {
            builder.start_thread().unwrap()
        } else {
            builder.start()
        };
        assert_eq!(p.runs_on_own_thread(), own_thread);
        for _ in 0..3 {
            p.recorder().events_v1().emit(backoff()).unwrap();
        }
        p.flush().await.unwrap();
        let second = MemoryApiServer::new();
        let watcher = p
            .add_sink_events_v1(
                "two",
                second.clone(),
                kevents_actors::events_v1::SinkOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(watcher.name(), "series:two");
        for _ in 0..2 {
            p.recorder().events_v1().emit(backoff()).unwrap();
        }
        let report = p.shutdown(Duration::from_secs(10)).await;
        assert!(report.completed, "{report}");
        assert_eq!(report.live_actors, 0, "{report}");
        // The first chain counted all five, the second only the two after it was added.
        assert_eq!(count(&only_event(&first)), Some(5));
        assert_eq!(count(&only_event(&second)), Some(2));
        assert_eq!(report.stats.sinks_events_v1.len(), 2);
    }
}

/// Issue 36: `StatsSnapshot::dropped_total()` counts the writes an events.k8s.io/v1 series
/// chain gave up (200 failed writes were `dropped_total() == 0`, so a test asserting 0 on the
/// kube-rs drop-in could not fail).
#[actix_rt::test]
async fn failed_series_writes_count_in_dropped_total() {
    let api = MemoryApiServer::new();
    tokio::time::pause();
    let always = Flaky {
        api: api.clone(),
        failures: AtomicU32::new(u32::MAX),
    };
    let p = Pipeline::builder(EventSource::new("eventTest", "host"))
        .clock(Arc::new(TokioClock::new(t0())))
        .events_v1(EventsV1Config::new(reporter()))
        .sink_events_v1(
            "v1",
            always,
            kevents_actors::events_v1::SinkOptions {
                retry: RetryPolicy {
                    max_attempts: 2,
                    randomize_first: false,
                    ..RetryPolicy::default()
                },
                ..Default::default()
            },
        )
        .start();
    for i in 0..200 {
        let mut o = backoff();
        o.reason = format!("Reason{i}");
        p.recorder().events_v1().emit(o).unwrap();
    }
    let report = p.shutdown(Duration::from_secs(3600)).await;
    let s = report.stats.sink_events_v1("v1").unwrap();
    assert_eq!(s.created + s.patched, 0, "{s:?}");
    assert_eq!(s.failed(), 200, "{s:?}");
    assert_eq!(s.not_stored, 0, "a 503 is no refusal: {s:?}");
    assert_eq!(report.stats.dropped_total(), 200, "{report:?}");
    assert!(api.list_events_v1().is_empty());
}
