//! Golden scenarios for events.k8s.io/v1 (reference D10-D12, D18-D20, P8, adapted to client-go
//! 1.27+ semantics), series timers under virtual time, shutdown flush, the cap, validation
//! and the fallback bridge.

use std::time::Duration;

use kevents_core::events_v1::{
    self, ApiBridge, ClusterScopedNamespace, ClusterScopedRule, CoreFallback, Event, EventSeries,
    NotePolicy, Reporter, Route, SeriesCache, SeriesOptions, Step, Write, WriteReason,
};
use kevents_core::{
    Clock, EventType, ObjectReference, SinkError, Status, Time, VirtualClock, occurrence_events_v1,
};
use kevents_sim::MemoryApiServer;
use proptest::prelude::*;

fn t(s: &str) -> Time {
    Time::parse_rfc3339(s).unwrap()
}

fn mins(m: u64) -> Duration {
    Duration::from_secs(60 * m)
}

fn factory(controller: &str, instance: &str) -> kevents_core::events_v1::EventFactory {
    kevents_core::events_v1::EventFactory::new(Reporter::with_instance(controller, instance))
}

fn pod(ns: &str, name: &str) -> ObjectReference {
    ObjectReference::new("v1", "Pod", ns, name)
}

fn occ(
    regarding: ObjectReference,
    reason: &str,
    action: &str,
    note: &str,
) -> kevents_core::events_v1::Occurrence {
    kevents_core::events_v1::Occurrence::new(
        regarding,
        None,
        EventType::Normal,
        reason,
        action,
        note,
    )
}

fn status_err(code: u16, reason: &str) -> SinkError {
    SinkError::Status(Box::new(Status::failure(code, reason, "test")))
}

/// Sends every write to the in-memory apiserver the way an actor would: recreate after 404
/// within the attempt, retry up to 12 attempts. Returns the steps seen.
fn drive(cache: &mut SeriesCache, api: &MemoryApiServer, writes: Vec<Write>) -> Vec<Step> {
    let mut steps = Vec::new();
    for mut w in writes {
        for _ in 0..12 {
            let r = api.send_now_events_v1(&w);
            let mut step = cache.on_write_result(&w, &r);
            if step == Step::Recreate {
                w = w.recreate();
                let r = api.send_now_events_v1(&w);
                step = cache.on_write_result(&w, &r);
            }
            steps.push(step);
            if step != Step::Retry {
                break;
            }
            w = w.retry();
        }
    }
    steps
}

#[test]
fn wire_json_matches_client_go_with_series_and_related() {
    let f = factory("eventTest", "eventTest-host");
    let related = pod("baz", "foo").with_field_path(".spec.containers[0]");
    let mut e = f
        .make(
            t("2021-01-01T00:00:01.123456789Z"),
            kevents_core::events_v1::Occurrence::new(
                pod("baz", "foo").with_uid("bar"),
                Some(related),
                EventType::Normal,
                "test",
                "started",
                "n",
            ),
        )
        .unwrap();
    e.series = Some(EventSeries::new(2, t("2021-01-01T00:05:00.987654Z")));
    let json = String::from_utf8(kevents_core::json::to_vec(&e).unwrap()).unwrap();
    assert_eq!(
        json,
        concat!(
            r#"{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"foo.1655f29dbb729715","#,
            r#""namespace":"baz","creationTimestamp":null},"eventTime":"2021-01-01T00:00:01.123456Z","#,
            r#""series":{"count":2,"lastObservedTime":"2021-01-01T00:05:00.987654Z"},"#,
            r#""reportingController":"eventTest","reportingInstance":"eventTest-host","action":"started","#,
            r#""reason":"test","regarding":{"kind":"Pod","namespace":"baz","name":"foo","uid":"bar","#,
            r#""apiVersion":"v1"},"related":{"kind":"Pod","namespace":"baz","name":"foo","apiVersion":"v1","#,
            r#""fieldPath":".spec.containers[0]"},"note":"n","type":"Normal","deprecatedSource":{},"#,
            r#""deprecatedFirstTimestamp":null,"deprecatedLastTimestamp":null}"#
        )
    );
    // Parsing gives the same event up to MicroTime's truncation of eventTime.
    let back: Event = serde_json::from_str(&json).unwrap();
    assert_eq!(back.event_time, Some(t("2021-01-01T00:00:01.123456Z")));
    assert_eq!(kevents_core::json::to_vec(&back).unwrap(), json.as_bytes());
    // deprecatedCount appears only when non-zero.
    e.deprecated_count = 3;
    let json = String::from_utf8(kevents_core::json::to_vec(&e).unwrap()).unwrap();
    assert!(json.ends_with(r#""deprecatedLastTimestamp":null,"deprecatedCount":3}"#));
}

#[test]
fn p8_series_start_patch_bytes() {
    let f = factory("eventTest", "eventTest-host");
    let mut cache = SeriesCache::new(SeriesOptions::default());
    let e = f
        .make(
            t("2021-01-01T00:00:00Z"),
            occ(pod("ns", "p"), "r", "a", "n"),
        )
        .unwrap();
    cache.observe(e.clone(), t("2021-01-01T00:00:00Z"));
    let w = cache
        .observe(e, t("2021-01-01T00:05:00.987654321Z"))
        .write
        .unwrap();
    assert_eq!(
        w.patch().unwrap(),
        br#"{"series":{"count":2,"lastObservedTime":"2021-01-01T00:05:00.987654Z"}}"#
    );
}

#[test]
fn d10_event_series_1_27() {
    let f = factory("eventTest", &format!("eventTest-{}", events_v1::hostname()));
    let regarding = pod("baz", "foo")
        .with_uid("bar")
        .with_field_path(".spec.containers[1]");
    let related = pod("baz", "foo")
        .with_uid("bar")
        .with_field_path(".spec.containers[0]");
    let call = |action: &str| {
        occurrence_events_v1!(
            regarding.clone(),
            Some(related.clone()),
            EventType::Normal,
            "test",
            action,
            "some verbose message: {}",
            1
        )
    };
    let clock = VirtualClock::new(t("2021-01-01T00:00:00Z"));
    let mut cache = SeriesCache::new(SeriesOptions::default());
    let api = MemoryApiServer::new();

    // Step 0: CREATE.
    let e0 = f.make(clock.now(), call("started")).unwrap();
    let w0 = cache.observe(e0, clock.now()).write.unwrap();
    assert!(w0.is_create() && w0.event().series.is_none());
    assert_eq!(drive(&mut cache, &api, vec![w0]), vec![Step::Stored]);

    // Step 1: identical call → PATCH with series.count 2 (1 in client-go 1.20), same object.
    clock.advance(Duration::from_secs(1));
    let e1 = f.make(clock.now(), call("started")).unwrap();
    let w1 = cache.observe(e1, clock.now()).write.unwrap();
    assert!(!w1.is_create());
    assert_eq!(w1.reason(), WriteReason::SeriesStart);
    assert_eq!(w1.event().series.unwrap().count, 2);
    assert!(w1.event().metadata.name.starts_with("foo"));
    assert_eq!(drive(&mut cache, &api, vec![w1]), vec![Step::Stored]);

    // Step 2: different action → CREATE with series nil.
    clock.advance(Duration::from_secs(1));
    let e2 = f.make(clock.now(), call("stopped")).unwrap();
    let w2 = cache.observe(e2, clock.now()).write.unwrap();
    assert!(w2.is_create() && w2.event().series.is_none());
    assert_eq!(drive(&mut cache, &api, vec![w2]), vec![Step::Stored]);

    let stored = api.list_events_v1();
    assert_eq!(stored.len(), 2);
    let started = stored.iter().find(|e| e.action == "started").unwrap();
    assert_eq!(started.series.unwrap().count, 2);
    assert_eq!(started.note, "some verbose message: 1");
}

/// Seeds a series of `count` occurrences whose last one is at `last`, sent to `api`.
fn seed_series(
    cache: &mut SeriesCache,
    api: &MemoryApiServer,
    e: &Event,
    count: usize,
    last: Time,
) {
    let start = Time::from_unix_nanos(last.unix_nanos() - (count as i64 - 1) * 1_000_000_000);
    for i in 0..count {
        let now = start.saturating_add(Duration::from_secs(i as u64));
        let w: Vec<Write> = cache.observe(e.clone(), now).into_iter().collect();
        drive(cache, api, w);
    }
}

#[test]
fn d11_finish_series() {
    let now = t("2021-01-01T01:00:00.5Z");
    let nine_min_ago = Time::from_unix_nanos(now.unix_nanos() - 9 * 60 * 1_000_000_000);
    let api = MemoryApiServer::new();
    let mut cache = SeriesCache::new(SeriesOptions::default());
    let a = factory("eventTest", "eventTest-h")
        .make(nine_min_ago, occ(pod("ns", "p"), "r", "a", "n"))
        .unwrap();
    seed_series(&mut cache, &api, &a, 10, nine_min_ago);
    let b = factory("nonFinished-controller", "nonFinished-controller-h")
        .make(now, occ(pod("ns", "p"), "r", "a", "n"))
        .unwrap();
    cache.observe(b.clone(), now);
    assert_eq!(cache.len(), 2);
    let (creates, patches) = api.request_counts();

    let writes = cache.finish_idle(now);
    assert_eq!(writes.len(), 1);
    let w = &writes[0];
    assert_eq!(w.reason(), WriteReason::Finish);
    assert!(!w.is_create());
    assert_eq!(w.event().reporting_controller, "eventTest");
    assert_eq!(
        w.event().series,
        Some(EventSeries::new(10, nine_min_ago)),
        "the cached lastObservedTime is kept"
    );
    assert_eq!(cache.len(), 1);
    assert!(cache.series_of(&a).is_none());
    drive(&mut cache, &api, writes);
    assert_eq!(api.request_counts(), (creates, patches + 1));
    let stored = api.get_events_v1("ns", &a.metadata.name).unwrap();
    assert_eq!(stored.series.unwrap().count, 10);
    // (b) is still tracked: its next occurrence starts a series on the same object.
    let w = cache.observe(b.clone(), now).write.unwrap();
    assert_eq!(w.event().metadata.name, b.metadata.name);
    assert_eq!(w.reason(), WriteReason::SeriesStart);
}

#[test]
fn d12_heartbeat_success_and_failure() {
    let now = t("2021-01-01T01:00:00Z");
    let nine_min_ago = Time::from_unix_nanos(now.unix_nanos() - 9 * 60 * 1_000_000_000);
    let api = MemoryApiServer::new();
    let mut cache = SeriesCache::new(SeriesOptions::default());
    let a = factory("eventTest", "eventTest-h")
        .make(nine_min_ago, occ(pod("ns", "p"), "r", "a", "n"))
        .unwrap();
    seed_series(&mut cache, &api, &a, 10, nine_min_ago);

    // (i) the PATCH succeeds: exactly one patch, entry still present.
    let (_, patches) = api.request_counts();
    let writes = cache.heartbeat_all(now);
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].reason(), WriteReason::Heartbeat);
    assert_eq!(writes[0].event().series.unwrap().count, 10);
    assert_eq!(drive(&mut cache, &api, writes), vec![Step::Stored]);
    assert_eq!(api.request_counts().1, patches + 1);
    assert_eq!(cache.len(), 1);
    assert_eq!(cache.series_of(&a).unwrap().count, 10);

    // (ii) the PATCH fails: exactly one attempt, no retry, entry still present.
    for err in [
        SinkError::Construction("bad".into()),
        SinkError::Transport("refused".into()),
    ] {
        let writes = cache.heartbeat_all(now);
        assert_eq!(writes.len(), 1);
        let step = cache.on_write_result(&writes[0], &Err(err.clone()));
        assert!(
            matches!(step, Step::Dropped { quiet: false } | Step::Rescheduled),
            "{step:?}"
        );
        assert_ne!(step, Step::Retry);
        assert_eq!(cache.len(), 1);
    }
    // The failure marks the server's count unknown, so the finish writes it even unchanged.
    let fin = cache.finish_idle(now.saturating_add(mins(7)));
    assert_eq!(fin.len(), 1);
}

fn d18_events() -> (Event, Event) {
    let f = kevents_core::events_v1::EventFactory {
        cluster_scoped_namespace: ClusterScopedNamespace::Default,
        ..factory("c", "c-1")
    };
    let mut e = f
        .make(t("2021-01-01T00:00:00Z"), occ(pod("", ""), "r", "a", "n"))
        .unwrap();
    e.metadata.name = "test".into();
    assert_eq!(e.metadata.namespace, "default");
    let mut e2 = e.clone();
    e2.series = Some(EventSeries::new(2, t("2021-01-01T00:00:01Z")));
    (e, e2)
}

fn as_write(e: &Event) -> Write {
    match e.series {
        None => Write::Create {
            event: e.clone(),
            reason: WriteReason::First,
        },
        Some(s) => Write::Patch {
            event: e.clone(),
            patch: events_v1::series_patch(&s),
            reason: WriteReason::SeriesStart,
        },
    }
}

#[test]
fn d18_record_event_to_sink() {
    let (e, e2) = d18_events();
    let strip = |mut x: Event| {
        x.metadata.resource_version.clear();
        x
    };
    for (input, want, steps) in [
        (vec![&e], &e, vec![Step::Stored]),
        (vec![&e, &e2], &e2, vec![Step::Stored, Step::Stored]),
        (
            vec![&e2, &e],
            &e2,
            vec![Step::Stored, Step::Dropped { quiet: true }],
        ),
        (vec![&e2], &e2, vec![Step::Stored]),
    ] {
        let api = MemoryApiServer::new();
        let mut cache = SeriesCache::new(SeriesOptions::default());
        let writes = input.into_iter().map(as_write).collect();
        assert_eq!(drive(&mut cache, &api, writes), steps);
        let stored = api.list_events_v1();
        assert_eq!(stored.len(), 1);
        assert_eq!(&strip(stored[0].clone()), want);
    }
}

#[test]
fn already_exists_on_series_create_is_retried_as_patch() {
    let (e, e2) = d18_events();
    let api = MemoryApiServer::new();
    let mut cache = SeriesCache::new(SeriesOptions::default());
    // The series PATCH raced ahead of the CREATE: 404 → CREATE with series.
    let w = as_write(&e2);
    let r = api.send_now_events_v1(&w);
    assert_eq!(cache.on_write_result(&w, &r), Step::Recreate);
    let create = w.recreate();
    // Meanwhile the original CREATE landed.
    api.create_now_events_v1(&e).unwrap();
    let r = api.send_now_events_v1(&create);
    assert!(r.as_ref().unwrap_err().is_already_exists());
    assert_eq!(cache.on_write_result(&create, &r), Step::Retry);
    let retry = create.retry();
    assert!(!retry.is_create());
    assert_eq!(
        cache.on_write_result(&retry, &api.send_now_events_v1(&retry)),
        Step::Stored
    );
    assert_eq!(api.list_events_v1()[0].series.unwrap().count, 2);
}

#[test]
fn d19_two_identical_calls_one_event_with_series() {
    let f = kevents_core::events_v1::EventFactory {
        cluster_scoped_namespace: ClusterScopedNamespace::Default,
        ..factory("c", "c-1")
    };
    let api = MemoryApiServer::new();
    let mut cache = SeriesCache::new(SeriesOptions::default());
    let clock = VirtualClock::new(t("2021-01-01T00:00:00Z"));
    for _ in 0..2 {
        let e = f
            .make(
                clock.now(),
                occ(ObjectReference::default(), "reason", "action", ""),
            )
            .unwrap();
        let w = cache.observe(e, clock.now()).into_iter().collect();
        drive(&mut cache, &api, w);
        clock.advance(Duration::from_millis(3));
    }
    let stored = api.list_events_v1();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].metadata.namespace, "default");
    assert_eq!(stored[0].series.unwrap().count, 2);
}

#[test]
fn d20_names_related_and_cluster_scoped() {
    let now = t("2023-01-01T12:00:00Z");
    assert_eq!(format!("{:x}", now.unix_nanos()), "17362d8e1c698000");
    let f = factory("c1", "i1");
    let p = pod("ns1", "pod1").with_uid("12345");
    let e = f
        .make(now, occ(p.clone(), "Scheduled", "Binding", ""))
        .unwrap();
    assert_eq!(e.metadata.name, "pod1.17362d8e1c698000");
    assert_eq!(e.metadata.namespace, "ns1");
    assert_eq!(e.regarding, p);
    assert_eq!(
        (
            e.reporting_controller.as_str(),
            e.reporting_instance.as_str()
        ),
        ("c1", "i1")
    );

    let node = ObjectReference::new("v1", "Node", "", "node1").with_uid("67890");
    let e = f
        .make(
            now,
            occurrence_events_v1!(
                p.clone(),
                Some(node.clone()),
                EventType::Warning,
                "FailedScheduling",
                "Scheduling",
                "Pod failed to schedule on {}: {}",
                "node1",
                "not enough resources"
            ),
        )
        .unwrap();
    assert_eq!(
        e.note,
        "Pod failed to schedule on node1: not enough resources"
    );
    assert_eq!(e.related, Some(node));

    let ip = ObjectReference::new("networking.k8s.io/v1", "IPAddress", "", "2001:db8::123");
    let client_go = kevents_core::events_v1::EventFactory {
        cluster_scoped_namespace: ClusterScopedNamespace::Default,
        ..f.clone()
    };
    let e = client_go.make(now, occ(ip.clone(), "r", "a", "")).unwrap();
    assert_eq!(e.metadata.namespace, "default");
    assert!(uuid::Uuid::parse_str(&e.metadata.name).is_ok());
    // kevents' default placement works on a 1.20 apiserver too.
    let e = f.make(now, occ(ip, "r", "a", "")).unwrap();
    assert_eq!(e.metadata.namespace, "kube-system");

    let long = pod("ns1", &"x".repeat(4 * 253));
    let e = f.make(now, occ(long, "r", "a", "")).unwrap();
    assert!(uuid::Uuid::parse_str(&e.metadata.name).is_ok());
}

#[test]
fn timers_under_virtual_time() {
    let clock = VirtualClock::new(t("2021-01-01T00:00:00Z"));
    let f = factory("c", "c-1");
    let mut cache = SeriesCache::new(SeriesOptions::default());
    let hot = f
        .make(clock.now(), occ(pod("ns", "hot"), "r", "a", ""))
        .unwrap();
    let once = f
        .make(clock.now(), occ(pod("ns", "once"), "r", "a", ""))
        .unwrap();
    assert!(
        cache
            .observe(hot.clone(), clock.now())
            .write
            .unwrap()
            .is_create()
    );
    assert!(
        cache
            .observe(once.clone(), clock.now())
            .write
            .unwrap()
            .is_create()
    );
    let start = clock.now();
    assert_eq!(
        cache.observe(hot.clone(), start).write.unwrap().reason(),
        WriteReason::SeriesStart
    );

    let mut heartbeats = Vec::new();
    let mut forgotten_at = None;
    // 45 minutes, one tick per minute, the hot event repeating every 5 minutes.
    for minute in 1..=45u64 {
        clock.advance(mins(1));
        if minute % 5 == 0 {
            assert!(cache.observe(hot.clone(), clock.now()).write.is_none());
        }
        for w in cache.tick(clock.now()) {
            assert_eq!(w.reason(), WriteReason::Heartbeat);
            heartbeats.push((minute, w.event().series.unwrap().count));
        }
        if forgotten_at.is_none() && cache.stats().singletons_forgotten == 1 {
            forgotten_at = Some(minute);
        }
    }
    // Singleton idle for 6 min is kept at exactly 6 min, forgotten just after (7th tick).
    assert_eq!(forgotten_at, Some(7));
    // One heartbeat 30 min after the series start, with the in-memory count (2 + 6 repeats).
    assert_eq!(heartbeats, vec![(30, 8)]);
    assert_eq!(cache.stats().heartbeats, 1);

    // The singleton recurs after being forgotten: a brand-new event (CREATE).
    let again = cache.observe(once.clone(), clock.now()).write.unwrap();
    assert!(again.is_create());

    // Finish: the hot event stops at minute 45; at exactly 6 min idle nothing happens...
    let last = clock.now();
    clock.set(last.saturating_add(mins(6)));
    let w = cache.tick(clock.now());
    assert!(w.is_empty(), "{w:?}");
    // ...one nanosecond later the final PATCH carries count 11 and the last occurrence time.
    clock.set(
        last.saturating_add(mins(6))
            .saturating_add(Duration::from_nanos(1)),
    );
    assert_eq!(cache.next_deadline(), Some(clock.now()));
    let w = cache.tick(clock.now());
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].reason(), WriteReason::Finish);
    assert_eq!(w[0].event().series, Some(EventSeries::new(11, last)));
    assert_eq!(cache.open_series(), 0);
    assert_eq!(cache.len(), 0);
    assert_eq!(cache.next_deadline(), None);
}

#[test]
fn finish_that_fails_retryably_is_kept_for_the_next_tick() {
    let clock = VirtualClock::new(t("2021-01-01T00:00:00Z"));
    let e = factory("c", "c-1")
        .make(clock.now(), occ(pod("ns", "p"), "r", "a", ""))
        .unwrap();
    let mut cache = SeriesCache::new(SeriesOptions::default());
    for _ in 0..3 {
        cache.observe(e.clone(), clock.now());
    }
    clock.advance(mins(7));
    let w = cache.tick(clock.now());
    assert_eq!((w.len(), cache.len()), (1, 0));
    let step = cache.on_write_result(&w[0], &Err(status_err(503, "ServiceUnavailable")));
    assert_eq!(step, Step::Rescheduled);
    assert_eq!(cache.series_of(&e).unwrap().count, 3);
    clock.advance(mins(6));
    let again = cache.tick(clock.now());
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].event().series.unwrap().count, 3);
    assert_eq!(
        cache.on_write_result(&again[0], &Err(status_err(403, "Forbidden"))),
        Step::Dropped { quiet: false }
    );
    assert!(cache.is_empty());
}

#[test]
fn flush_on_shutdown_writes_every_open_series_once() {
    let clock = VirtualClock::new(t("2021-01-01T00:00:00Z"));
    let f = factory("c", "c-1");
    let api = MemoryApiServer::new();
    let mut cache = SeriesCache::new(SeriesOptions::default());
    let a = f
        .make(clock.now(), occ(pod("ns", "a"), "r", "a", ""))
        .unwrap();
    let b = f
        .make(clock.now(), occ(pod("ns", "b"), "r", "a", ""))
        .unwrap();
    let c = f
        .make(clock.now(), occ(pod("ns", "c"), "r", "a", ""))
        .unwrap();
    for (e, n) in [(&a, 7), (&b, 2), (&c, 1)] {
        for _ in 0..n {
            clock.advance(Duration::from_secs(1));
            let w = cache.observe(e.clone(), clock.now()).into_iter().collect();
            drive(&mut cache, &api, w);
        }
    }
    let writes = cache.flush();
    // a: count 7 not yet on the server; b: the server already has count 2; c: singleton.
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].reason(), WriteReason::Flush);
    drive(&mut cache, &api, writes);
    assert!(cache.is_empty());
    assert_eq!(
        api.get_events_v1("ns", &a.metadata.name)
            .unwrap()
            .series
            .unwrap()
            .count,
        7
    );
    assert_eq!(cache.stats().flushed, 2);
}

#[test]
fn cap_evicts_singletons_first_then_finishes_series() {
    let clock = VirtualClock::new(t("2021-01-01T00:00:00Z"));
    let f = factory("c", "c-1");
    let mut cache = SeriesCache::new(SeriesOptions {
        max_entries: 3,
        ..Default::default()
    });
    let ev = |n: &str| {
        f.make(clock.now(), occ(pod("ns", n), "r", "a", ""))
            .unwrap()
    };
    let (s1, s2, x, y, z) = (ev("s1"), ev("s2"), ev("x"), ev("y"), ev("z"));
    // Two series (s1 older) and one singleton.
    for e in [&s1, &s1, &s1, &s2, &s2, &x] {
        clock.advance(Duration::from_secs(1));
        cache.observe(e.clone(), clock.now());
    }
    assert_eq!((cache.len(), cache.open_series()), (3, 2));
    // A new event: the singleton x goes first, without a write.
    let o = cache.observe(y.clone(), clock.now());
    assert!(o.write.unwrap().is_create() && o.evicted.is_none());
    assert_eq!(cache.stats().evicted_singletons, 1);
    // Another: y is the only singleton, so it goes.
    let o = cache.observe(z.clone(), clock.now());
    assert!(o.evicted.is_none());
    assert_eq!(cache.stats().evicted_singletons, 2);
    // s2 is observed again, so s1 is now the least recently observed series.
    clock.advance(Duration::from_secs(1));
    cache.observe(s2.clone(), clock.now());
    cache.observe(z.clone(), clock.now()); // z becomes a series: no singleton left
    let o = cache.observe(x.clone(), clock.now());
    let evicted = o.evicted.expect("s1's final PATCH");
    assert_eq!(evicted.reason(), WriteReason::Evicted);
    assert_eq!(evicted.event().metadata.name, s1.metadata.name);
    assert_eq!(evicted.event().series.unwrap().count, 3);
    assert_eq!(cache.stats().evicted_series, 1);
    assert_eq!(cache.len(), 3);
}

#[test]
fn note_in_identity_option() {
    let f = factory("c", "c-1");
    let now = t("2021-01-01T00:00:00Z");
    let e1 = f.make(now, occ(pod("ns", "p"), "r", "a", "one")).unwrap();
    let e2 = f.make(now, occ(pod("ns", "p"), "r", "a", "two")).unwrap();
    let mut compat = SeriesCache::new(SeriesOptions::default());
    compat.observe(e1.clone(), now);
    let w = compat.observe(e2.clone(), now).write.unwrap();
    assert_eq!(
        w.event().note,
        "one",
        "client-go merges and keeps the first note"
    );
    let mut keep = SeriesCache::new(SeriesOptions {
        note_in_identity: true,
        ..Default::default()
    });
    keep.observe(e1, now);
    let w = keep.observe(e2, now).write.unwrap();
    assert!(w.is_create());
    assert_eq!(w.event().note, "two");
}

#[test]
fn isomorphism_key_fields() {
    let f = factory("c", "c-1");
    let now = t("2021-01-01T00:00:00Z");
    let base = f.make(now, occ(pod("ns", "p"), "r", "a", "")).unwrap();
    let mut variants = Vec::new();
    let mut v = base.clone();
    v.type_ = "Warning".into();
    variants.push(v);
    let mut v = base.clone();
    v.reporting_instance = "c-2".into();
    variants.push(v);
    let mut v = base.clone();
    v.regarding.resource_version = "9".into();
    variants.push(v);
    let mut v = base.clone();
    v.related = Some(pod("ns", "q"));
    variants.push(v);
    for v in variants {
        let mut cache = SeriesCache::new(SeriesOptions::default());
        cache.observe(base.clone(), now);
        assert!(cache.observe(v, now).write.unwrap().is_create());
    }
    // An empty related reference equals none; eventTime and name are not in the key.
    let mut v = base.clone();
    v.related = Some(ObjectReference::default());
    v.event_time = Some(t("2022-01-01T00:00:00Z"));
    v.metadata.name = "other.1".into();
    let mut cache = SeriesCache::new(SeriesOptions::default());
    cache.observe(base.clone(), now);
    let w = cache.observe(v, now).write.unwrap();
    assert_eq!(w.reason(), WriteReason::SeriesStart);
    assert_eq!(w.event().metadata.name, base.metadata.name);
}

#[test]
fn validation_rules() {
    let now = t("2021-01-01T00:00:00Z");
    let f = factory("c", "c-1");
    let ok = || occ(pod("ns", "p"), "r", "a", "n");
    let err = |f: &kevents_core::events_v1::EventFactory,
               o: kevents_core::events_v1::Occurrence| f.make(now, o).unwrap_err();

    let mut o = ok();
    o.event_type = "Info".into();
    assert_eq!(
        err(&f, o),
        kevents_core::events_v1::InvalidEvent::Type("Info".into())
    );
    let mut o = ok();
    o.reason.clear();
    assert_eq!(
        err(&f, o),
        kevents_core::events_v1::InvalidEvent::ReasonMissing
    );
    let mut o = ok();
    o.reason = "r".repeat(129);
    assert_eq!(
        err(&f, o),
        kevents_core::events_v1::InvalidEvent::ReasonTooLong(129)
    );
    let mut o = ok();
    o.reason = "é".repeat(64); // 128 bytes: fits
    assert!(f.make(now, o).is_ok());
    let mut o = ok();
    o.action.clear();
    assert_eq!(
        err(&f, o),
        kevents_core::events_v1::InvalidEvent::ActionMissing
    );
    let mut o = ok();
    o.action = "a".repeat(129);
    assert_eq!(
        err(&f, o),
        kevents_core::events_v1::InvalidEvent::ActionTooLong(129)
    );

    // Note: truncated on a char boundary with the marker, or rejected.
    let mut o = ok();
    o.note = format!("{}{}", "a".repeat(1020), "€€€");
    let e = f.make(now, o.clone()).unwrap();
    assert_eq!(e.note, format!("{}...", "a".repeat(1020)));
    assert!(e.note.len() <= 1024);
    let reject = kevents_core::events_v1::EventFactory {
        note_policy: NotePolicy::Reject,
        ..f.clone()
    };
    assert_eq!(
        err(&reject, o),
        kevents_core::events_v1::InvalidEvent::NoteTooLong(1029)
    );
    let mut o = ok();
    o.note = "n".repeat(1024);
    assert_eq!(reject.make(now, o).unwrap().note.len(), 1024);

    for bad in ["", "-c", "a/b/c", "UPPER.example/c", &"c".repeat(64)] {
        let g = factory(bad, "i");
        assert_eq!(
            err(&g, ok()),
            kevents_core::events_v1::InvalidEvent::ReportingController(bad.into())
        );
    }
    assert!(
        factory("example.com/my-ctl_v2", "i")
            .make(now, ok())
            .is_ok()
    );
    assert_eq!(
        err(&factory("c", ""), ok()),
        kevents_core::events_v1::InvalidEvent::ReportingInstanceMissing
    );
    assert_eq!(
        err(&factory("c", &"i".repeat(129)), ok()),
        kevents_core::events_v1::InvalidEvent::ReportingInstanceTooLong(129)
    );

    // Names: legacy naming keeps invalid names and is refused; UUID fallback fixes them.
    let legacy = kevents_core::events_v1::EventFactory {
        naming: kevents_core::Naming::Legacy,
        ..f.clone()
    };
    let mut o = ok();
    o.regarding.name = "Upper".into();
    assert!(matches!(
        err(&legacy, o.clone()),
        kevents_core::events_v1::InvalidEvent::Name(_)
    ));
    assert!(f.make(now, o).is_ok());

    let mut o = ok();
    o.regarding.namespace = "Bad_NS".into();
    assert_eq!(
        err(&f, o),
        kevents_core::events_v1::InvalidEvent::Namespace("Bad_NS".into())
    );

    // Cluster-scoped objects on a 1.20 apiserver: only kube-system.
    let node = ObjectReference::new("v1", "Node", "", "n1");
    let old_server = kevents_core::events_v1::EventFactory {
        cluster_scoped_namespace: ClusterScopedNamespace::Default,
        cluster_scoped_rule: ClusterScopedRule::KubeSystemOnly,
        ..f.clone()
    };
    assert!(matches!(
        err(&old_server, occ(node.clone(), "r", "a", "")),
        kevents_core::events_v1::InvalidEvent::ClusterScopedNamespace { .. }
    ));
    let old_server_ok = kevents_core::events_v1::EventFactory {
        cluster_scoped_namespace: ClusterScopedNamespace::KubeSystem,
        ..old_server
    };
    assert!(old_server_ok.make(now, occ(node, "r", "a", "")).is_ok());

    let mut o = ok();
    o.annotations.insert("bad key".into(), "v".into());
    assert_eq!(
        err(&f, o),
        kevents_core::events_v1::InvalidEvent::AnnotationKey("bad key".into())
    );

    // Hand-built events: eventTime, series and deprecated fields.
    let good = f.make(now, ok()).unwrap();
    let rule = ClusterScopedRule::default();
    let mut e = good.clone();
    e.event_time = None;
    assert_eq!(
        events_v1::validate_create(&e, rule),
        Err(kevents_core::events_v1::InvalidEvent::EventTimeMissing)
    );
    let mut e = good.clone();
    e.series = Some(EventSeries::new(1, now));
    assert_eq!(
        events_v1::validate_create(&e, rule),
        Err(kevents_core::events_v1::InvalidEvent::SeriesCount(1))
    );
    let mut e = good.clone();
    e.series = Some(EventSeries {
        count: 2,
        last_observed_time: None,
    });
    assert_eq!(
        events_v1::validate_create(&e, rule),
        Err(kevents_core::events_v1::InvalidEvent::SeriesLastObservedTime)
    );
    let mut e = good.clone();
    e.deprecated_count = 1;
    assert_eq!(
        events_v1::validate_create(&e, rule),
        Err(kevents_core::events_v1::InvalidEvent::Deprecated(
            "deprecatedCount"
        ))
    );
    let mut e = good;
    e.deprecated_source.component = "kubelet".into();
    assert_eq!(
        events_v1::validate_create(&e, rule),
        Err(kevents_core::events_v1::InvalidEvent::Deprecated(
            "deprecatedSource"
        ))
    );
}

#[test]
fn memory_server_enforces_the_strict_rules() {
    let now = t("2021-01-01T00:00:00Z");
    let api = MemoryApiServer::new();
    let mut e = factory("c", "c-1")
        .make(now, occ(pod("ns", "p"), "r", "a", ""))
        .unwrap();
    e.series = Some(EventSeries::new(1, now));
    assert_eq!(api.create_now_events_v1(&e).unwrap_err().code(), Some(422));
    e.series = None;
    api.create_now_events_v1(&e).unwrap();
    let ns = e.metadata.namespace.clone();
    let name = e.metadata.name.clone();
    let count1 = br#"{"series":{"count":1,"lastObservedTime":"2021-01-01T00:00:00.000000Z"}}"#;
    assert_eq!(
        api.patch_now_events_v1(&ns, &name, count1)
            .unwrap_err()
            .code(),
        Some(422)
    );
    assert_eq!(
        api.patch_now_events_v1(&ns, &name, br#"{"note":"other"}"#)
            .unwrap_err()
            .code(),
        Some(422)
    );
    assert!(
        api.patch_now_events_v1(&ns, "missing", b"{}")
            .unwrap_err()
            .is_not_found()
    );
    // Both APIs see the same object.
    assert_eq!(api.get(&ns, &name).unwrap().involved_object.name, "p");
}

#[test]
fn fallback_routing_between_the_apis() {
    let now = t("2021-01-01T00:00:00Z");
    let f = factory("c", "c-1");
    let node = ObjectReference::new("v1", "Node", "", "n1");
    let call = kevents_core::events_v1::Occurrence::new(
        pod("ns", "p"),
        Some(node),
        EventType::Warning,
        "Failed",
        "Pull",
        "boom",
    );
    assert!(events_v1::events_v1_served(["events.k8s.io/v1"]));
    let v1 = ApiBridge {
        events_v1_served: true,
        ..Default::default()
    };
    match v1.route(&f, now, call.clone()).unwrap() {
        Route::EventsV1(e) => assert_eq!((e.action.as_str(), e.note.as_str()), ("Pull", "boom")),
        other => panic!("{other:?}"),
    }
    // Not served: a core/v1 occurrence the core factory accepts; action and related dropped.
    let core = ApiBridge::default();
    let Route::CoreV1(o) = core.route(&f, now, call.clone()).unwrap() else {
        panic!("expected core/v1")
    };
    assert!(o.annotations.is_empty());
    let ev = kevents_core::EventFactory::new(kevents_core::EventSource::new("c", "h"))
        .make(now, *o)
        .unwrap();
    assert_eq!(
        (ev.reason.as_str(), ev.message.as_str()),
        ("Failed", "boom")
    );
    assert_eq!(ev.involved_object.name, "p");
    // ...or kept in annotations.
    let keep = ApiBridge {
        events_v1_served: false,
        fallback: CoreFallback::KeepInAnnotations,
    };
    let Route::CoreV1(o) = keep.route(&f, now, call.clone()).unwrap() else {
        panic!("expected core/v1")
    };
    assert_eq!(o.annotations[events_v1::ACTION_ANNOTATION], "Pull");
    assert_eq!(o.annotations[events_v1::RELATED_ANNOTATION], "v1/Node//n1");
    // Invalid calls are refused on the v1 path before anything is built.
    let mut bad = call;
    bad.action.clear();
    assert_eq!(
        v1.route(&f, now, bad),
        Err(kevents_core::events_v1::InvalidEvent::ActionMissing)
    );

    // A core/v1 style call recorded into the new API: action defaults to the reason.
    let o = kevents_core::Occurrence::new(pod("ns", "p"), EventType::Normal, "Pulled", "ok");
    let e = f
        .make(now, events_v1::from_core_occurrence(o, None))
        .unwrap();
    assert_eq!((e.action.as_str(), e.reason.as_str()), ("Pulled", "Pulled"));
}

#[test]
fn conversion_round_trips_through_core() {
    let f = factory("c", "c-1");
    let mut e = f
        .make(
            t("2021-01-01T00:00:00Z"),
            kevents_core::events_v1::Occurrence::new(
                pod("ns", "p"),
                Some(pod("ns", "q")),
                EventType::Normal,
                "r",
                "a",
                "n",
            ),
        )
        .unwrap();
    e.series = Some(EventSeries::new(4, t("2021-01-01T00:01:00Z")));
    let core = kevents_core::Event::from(e.clone());
    assert_eq!(core.message, "n");
    assert_eq!(core.reporting_component, "c");
    assert_eq!(core.series.as_ref().unwrap().count, 4);
    assert_eq!(Event::from(core), e);
}

#[derive(Debug, Clone)]
enum Op {
    Observe(u8),
    Advance(u16),
    Tick,
    Fail(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..12).prop_map(Op::Observe),
        2 => (0u16..900).prop_map(Op::Advance),
        1 => Just(Op::Tick),
        1 => (0u8..4).prop_map(Op::Fail),
    ]
}

proptest! {
    #[test]
    fn cache_never_exceeds_its_cap_and_counts_add_up(
        cap in 1usize..6,
        ops in proptest::collection::vec(op(), 0..200),
    ) {
        let f = factory("c", "c-1");
        let clock = VirtualClock::new(t("2021-01-01T00:00:00Z"));
        let mut cache = SeriesCache::new(SeriesOptions { max_entries: cap, ..Default::default() });
        let mut last_write: Option<Write> = None;
        let mut observed = 0u64;
        for op in ops {
            match op {
                Op::Observe(k) => {
                    let e = f.make(clock.now(), occ(pod("ns", &format!("p{k}")), "r", "a", "")).unwrap();
                    observed += 1;
                    for w in cache.observe(e, clock.now()) {
                        last_write = Some(w);
                    }
                }
                Op::Advance(s) => clock.advance(Duration::from_secs(u64::from(s))),
                Op::Tick => {
                    for w in cache.tick(clock.now()) {
                        prop_assert!(w.event().series.unwrap().count >= 2);
                        last_write = Some(w);
                    }
                }
                Op::Fail(kind) => {
                    if let Some(w) = &last_write {
                        let err = match kind {
                            0 => status_err(404, "NotFound"),
                            1 => status_err(409, "AlreadyExists"),
                            2 => SinkError::Transport("x".into()),
                            _ => status_err(500, "InternalError"),
                        };
                        let _ = cache.on_write_result(w, &Err(err));
                    }
                }
            }
            prop_assert!(cache.len() <= cap, "len {} > cap {}", cache.len(), cap);
        }
        prop_assert_eq!(cache.stats().observed, observed);
        for w in cache.flush() {
            prop_assert!(w.event().series.unwrap().count >= 2);
        }
        prop_assert!(cache.is_empty());
    }

    #[test]
    fn factory_never_panics_and_only_builds_valid_events(
        controller in ".{0,70}",
        instance in ".{0,130}",
        ns in "[a-zA-Z0-9.:-]{0,12}",
        name in ".{0,300}",
        reason in ".{0,130}",
        action in ".{0,130}",
        note in ".{0,1100}",
        kube_system in any::<bool>(),
    ) {
        let f = kevents_core::events_v1::EventFactory {
            cluster_scoped_namespace: if kube_system {
                ClusterScopedNamespace::KubeSystem
            } else {
                ClusterScopedNamespace::Default
            },
            ..factory(&controller, &instance)
        };
        let o = kevents_core::events_v1::Occurrence::new(pod(&ns, &name), None, EventType::Normal, reason, action, note);
        if let Ok(e) = f.make(t("2021-01-01T00:00:00Z"), o) {
            prop_assert_eq!(events_v1::validate_create(&e, ClusterScopedRule::default()), Ok(()));
            let api = MemoryApiServer::new();
            prop_assert!(api.create_now_events_v1(&e).is_ok());
            prop_assert!(e.note.len() <= 1024);
        }
    }
}

/// A write result does not change which series is least recently observed: series A,
/// idle for 6 minutes, is finished even when the result of its series-start PATCH arrived
/// after series B's latest occurrence (the result used to promote A in the LRU, and the
/// finish pass stopped at B, which is not idle, leaving A unfinished).
#[test]
fn write_results_do_not_delay_the_finish_of_an_idle_series() {
    let f = factory("ctl", "ctl-1");
    let t0 = t("2021-01-01T00:00:00Z");
    let at = |s: u64| t0.saturating_add(Duration::from_secs(s));
    let mut cache = SeriesCache::new(SeriesOptions::default());
    let a = |s| f.make(at(s), occ(pod("ns", "a"), "R", "A", "n")).unwrap();
    let b = |s| f.make(at(s), occ(pod("ns", "b"), "R", "A", "n")).unwrap();
    cache.observe(a(0), at(0));
    let a_start = cache.observe(a(1), at(1)).write.unwrap();
    assert!(cache.observe(a(2), at(2)).write.is_none()); // count 3, in memory
    cache.observe(b(3), at(3));
    cache.observe(b(4), at(4));
    cache.observe(b(200), at(200));
    let stored = Ok(kevents_core::Stored::AsSent);
    assert_eq!(cache.on_write_result(&a_start, &stored), Step::Stored);
    let done = cache.finish_idle(at(2 + 360 + 1));
    assert_eq!(done.len(), 1, "series A finished: {done:?}");
    assert_eq!(done[0].event().regarding.name, "a");
    assert_eq!(done[0].event().series.unwrap().count, 3);
    assert_eq!(cache.open_series(), 1);
}
