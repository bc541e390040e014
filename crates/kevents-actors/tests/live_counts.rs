//! Live counts (kevents' default, not client-go's): an events.k8s.io/v1 series' count reaches
//! the sink within `events_v1::SinkOptions::freshness`, one coalesced PATCH per interval, under
//! tokio's paused clock.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use kevents_actors::events_v1::DEFAULT_FRESHNESS;
use kevents_actors::{EventsV1Config, Pipeline, TokioClock};
use kevents_core::events_v1::Reporter;
use kevents_core::{EventSource, EventType, ObjectReference, Time, events_v1};
use kevents_sim::MemoryApiServer;

const SEC: Duration = Duration::from_secs(1);

fn pipeline(api: &MemoryApiServer, freshness: Option<Duration>) -> Pipeline {
    tokio::time::pause();
    let clock = Arc::new(TokioClock::new(
        Time::parse_rfc3339("2021-01-01T00:00:00Z").unwrap(),
    ));
    Pipeline::builder(EventSource::new("ctl", "host"))
        .clock(clock)
        .events_v1(EventsV1Config::new(Reporter::with_instance(
            "ctl", "ctl-host",
        )))
        .sink_events_v1(
            "v1",
            api.clone(),
            kevents_actors::events_v1::SinkOptions {
                freshness,
                ..Default::default()
            },
        )
        .start()
}

fn backoff(pod: &str) -> kevents_core::events_v1::Occurrence {
    kevents_core::events_v1::Occurrence::new(
        ObjectReference::new("v1", "Pod", "ns", pod).with_uid(pod),
        None,
        EventType::Warning,
        "BackOff",
        "Restart",
        "crash",
    )
}

fn stored_count(api: &MemoryApiServer, pod: &str) -> Option<i32> {
    let all: Vec<events_v1::Event> = api.list_events_v1();
    all.iter()
        .find(|e| e.regarding.name == pod)
        .and_then(|e| e.series.map(|s| s.count))
}

/// Occurrences at 0..10 s: the series start writes 2; by 60 s after the first counted-in-memory
/// occurrence the stored count is 10, in one PATCH; later repeats reach it within another
/// interval; an idle series gets no more writes (its heartbeat and finish stay client-go's).
#[actix_rt::test]
async fn a_series_count_reaches_the_sink_within_the_freshness_interval() {
    assert_eq!(DEFAULT_FRESHNESS, 60 * SEC);
    let api = MemoryApiServer::new();
    let p = pipeline(&api, Some(DEFAULT_FRESHNESS));
    let start = tokio::time::Instant::now();
    let r = p.recorder();
    for _ in 0..10 {
        r.events_v1().emit(backoff("a")).unwrap();
        p.flush().await.unwrap();
        tokio::time::sleep(SEC).await;
    }
    assert_eq!(stored_count(&api, "a"), Some(2));
    assert_eq!(api.request_counts(), (1, 1));
    // The third occurrence (at 2 s) was counted in memory: written at 62 s (the timer's
    // write is not one `flush` waits for: look a second later).
    tokio::time::sleep_until(start + 63 * SEC).await;
    p.flush().await.unwrap();
    assert_eq!(
        stored_count(&api, "a"),
        Some(10),
        "live within the interval"
    );
    assert_eq!(api.request_counts(), (1, 2), "one coalesced PATCH");
    let s = p.stats().sink_events_v1("v1").unwrap().clone();
    assert_eq!((s.refreshed, s.unwritten), (1, 0));

    // Five more at 70..74 s: stored by 130 s, again in one PATCH.
    tokio::time::sleep_until(start + 70 * SEC).await;
    for _ in 0..5 {
        r.events_v1().emit(backoff("a")).unwrap();
        p.flush().await.unwrap();
        tokio::time::sleep(SEC).await;
    }
    assert_eq!(stored_count(&api, "a"), Some(10));
    tokio::time::sleep_until(start + 131 * SEC).await;
    p.flush().await.unwrap();
    assert_eq!(stored_count(&api, "a"), Some(15));
    assert_eq!(api.request_counts(), (1, 3));

    // Idle: nothing new, no write; the finish after 6 idle minutes has nothing to add.
    tokio::time::sleep_until(start + 20 * 60 * SEC).await;
    p.flush().await.unwrap();
    assert_eq!(api.request_counts(), (1, 3));
    let stats = p.stats();
    let s = stats.sink_events_v1("v1").unwrap();
    assert_eq!((s.refreshed, s.cache.finished, s.cache.entries), (2, 1, 0));
    let report = p.shutdown(Duration::from_secs(5)).await;
    assert!(report.completed);
}

/// Many series, a burst of repeats each: each series' count is written once per interval,
/// not once per occurrence, and all are exact within the interval.
#[actix_rt::test]
async fn live_counts_are_coalesced_per_series_and_interval() {
    let api = MemoryApiServer::new();
    let p = pipeline(&api, Some(30 * SEC));
    let start = tokio::time::Instant::now();
    let r = p.recorder();
    let pods: Vec<String> = (0..20).map(|i| format!("p{i}")).collect();
    for round in 0..25 {
        for pod in &pods {
            r.events_v1().emit(backoff(pod)).unwrap();
        }
        p.flush().await.unwrap();
        tokio::time::sleep_until(start + (round + 1) * SEC).await;
    }
    // 25 s of repeats: created and started, nothing refreshed yet (30 s interval).
    assert_eq!(api.request_counts(), (20, 20));
    tokio::time::sleep_until(start + 33 * SEC).await;
    p.flush().await.unwrap();
    for pod in &pods {
        assert_eq!(stored_count(&api, pod), Some(25), "{pod}");
    }
    assert_eq!(api.request_counts(), (20, 40), "one refresh per series");
    assert_eq!(p.stats().sink_events_v1("v1").unwrap().refreshed, 20);
    p.shutdown(Duration::from_secs(5)).await;
}

/// Off (`freshness: None`): client-go's behaviour, the count waits for the heartbeat, the
/// finish or the shutdown flush; the snapshot says how many occurrences are unwritten.
#[actix_rt::test]
async fn without_freshness_the_count_waits_for_client_go_timers() {
    let api = MemoryApiServer::new();
    let p = pipeline(&api, None);
    let r = p.recorder();
    for _ in 0..7 {
        r.events_v1().emit(backoff("a")).unwrap();
        p.flush().await.unwrap();
        tokio::time::sleep(SEC).await;
    }
    tokio::time::sleep(5 * 60 * SEC).await;
    p.flush().await.unwrap();
    assert_eq!(stored_count(&api, "a"), Some(2));
    let s = p.stats().sink_events_v1("v1").unwrap().clone();
    assert_eq!((s.refreshed, s.unwritten), (0, 5));
    let report = p.shutdown(Duration::from_secs(5)).await;
    assert_eq!(stored_count(&api, "a"), Some(7), "the shutdown flush");
    assert_eq!(report.stats.sink_events_v1("v1").unwrap().unwritten, 0);
}

/// The core/v1 chain's defaults defer spam-filtered tails: 30 repeats through client-go's
/// burst of 25 end in a stored count of 30 at shutdown (client-go stores 25 and drops 5).
#[actix_rt::test]
async fn core_v1_defaults_leave_no_spam_tail_outside_a_stored_count() {
    let api = MemoryApiServer::new();
    let p = Pipeline::builder(EventSource::new("ctl", "host"))
        .sink("api", api.clone(), kevents_actors::SinkOptions::default())
        .start();
    let r = p.recorder();
    let pod = ObjectReference::new("v1", "Pod", "ns", "a").with_uid("a");
    for _ in 0..30 {
        r.event(&pod, EventType::Normal, "Started", "same").unwrap();
    }
    let report = p.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed);
    let s = report.stats.sink("api").unwrap();
    assert_eq!((s.spam_filtered, s.deferred), (0, 0), "{s:?}");
    assert_eq!(api.list()[0].count, 30);
    assert_eq!(report.stats.dropped_total(), 0);
    assert_eq!(report.stats.unwritten(), 0);
}
