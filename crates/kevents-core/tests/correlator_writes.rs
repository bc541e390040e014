//! The correlator scenarios that write through the in-memory apiserver
//! (`kevents_sim::MemoryApiServer`) with [`write_event`], as client-go's `recordToSink` does:
//! golden scenarios from client-go's own tests (reference section D), the extra scenarios
//! derived by running client-go v1.20 (P2-P6), and property tests. The pure correlator
//! scenarios are unit tests in `src/core_v1/correlator/tests.rs`.

use std::sync::Arc;

use kevents_core::ClientGoVersion;
use std::time::Duration;

use kevents_core::core_v1::correlator::{
    AGGREGATE_PREFIX, AggregatePop, Correlator, CorrelatorOptions, SpamKeyFn, spam_key_with_type,
};
use kevents_core::core_v1::{Event, EventSink, EventSource, SinkFuture, WriteKind, write_event};
use kevents_core::{Clock, ObjectReference, SinkError, Status, Time, VirtualClock};
use kevents_sim::MemoryApiServer;
use kevents_sim::replay::block_on;

fn t(s: &str) -> Time {
    Time::parse_rfc3339(s).unwrap()
}

const START: &str = "2021-01-01T00:00:00Z";

/// events_cache_test.go `makeObjectReference`.
fn fixture_ref(kind: &str, name: &str, ns: &str) -> ObjectReference {
    ObjectReference {
        kind: kind.into(),
        name: name.into(),
        namespace: ns.into(),
        uid: "C934D34AFB20242".into(),
        api_version: "version".into(),
        field_path: "spec.containers{mycontainer}".into(),
        ..Default::default()
    }
}

/// events_cache_test.go `makeEvent`: no name, no namespace, count 1, type Normal.
fn fixture_event(reason: &str, message: &str, r: ObjectReference) -> Event {
    Event {
        reason: reason.into(),
        message: message.into(),
        involved_object: r,
        source: EventSource::new("kubelet", "kublet.node1"),
        count: 1,
        type_: "Normal".into(),
        ..Default::default()
    }
}

fn my_pod() -> ObjectReference {
    fixture_ref("Pod", "my-pod", "my-ns")
}

fn with_clock(clock: impl Clock + 'static, opts: CorrelatorOptions) -> Correlator {
    Correlator::new(CorrelatorOptions {
        clock: Some(Arc::new(clock)),
        ..opts
    })
}

/// Correlator on a virtual clock plus the in-memory apiserver, like `recordToSink`.
struct Harness {
    clock: VirtualClock,
    c: Correlator,
    api: MemoryApiServer,
}

impl Harness {
    fn new(opts: CorrelatorOptions) -> Self {
        let clock = VirtualClock::new(t(START));
        let c = with_clock(clock.clone(), opts);
        Harness {
            clock,
            c,
            api: MemoryApiServer::new(),
        }
    }

    fn emit(&mut self, mut e: Event) -> Option<(WriteKind, Event, Option<Vec<u8>>)> {
        let now = self.clock.now();
        e.metadata.name = kevents_core::name::event_name(&e.involved_object.name, now);
        e.metadata.namespace = if e.involved_object.namespace.is_empty() {
            "default".into()
        } else {
            e.involved_object.namespace.clone()
        };
        e.first_timestamp = Some(now);
        e.last_timestamp = Some(now);
        let r = self.c.correlate(e);
        if r.skip {
            return None;
        }
        let mut ev = r.event;
        let out = block_on(write_event(&self.api, &mut ev, r.patch.as_deref()));
        // A conflict (two events named alike at the same instant) is dropped, as client-go does.
        if let Some(stored) = out.stored_event(&ev) {
            self.c.update_state(&stored);
        }
        Some((out.kind, ev, r.patch))
    }
}

#[test]
fn p2_skipped_occurrences_are_still_counted() {
    let mut h = Harness::new(CorrelatorOptions::default());
    let dup = fixture_event("r", "m", my_pod());
    let mut counts = Vec::new();
    for _ in 0..27 {
        counts.push(h.emit(dup.clone()).map(|(_, e, _)| e.count));
    }
    let expected: Vec<_> = (1..=25).map(Some).chain([None, None]).collect();
    assert_eq!(counts, expected);
    h.clock.advance(Duration::from_secs(300));
    let (kind, e, patch) = h.emit(dup).expect("a token refilled after 300 s");
    assert_eq!((kind, e.count), (WriteKind::Patch, 28));
    assert!(patch.unwrap().starts_with(br#"{"count":28,"#));
    assert_eq!(h.api.list()[0].count, 28);
}

#[test]
fn p3_spam_boundary_is_client_gos_float32_rate() {
    let mut h = Harness::new(CorrelatorOptions::default());
    let dup = fixture_event("r", "m", my_pod());
    for _ in 0..25 {
        assert!(h.emit(dup.clone()).is_some());
    }
    h.clock.advance(Duration::from_nanos(299_999_992_000));
    assert!(
        h.emit(dup.clone()).is_none(),
        "+299.999992 s: still no token"
    );
    h.clock
        .set(t(START).saturating_add(Duration::from_secs(300)));
    assert!(h.emit(dup.clone()).is_some(), "+300 s: exactly one token");
    assert!(h.emit(dup.clone()).is_none());
    // After 3 hours idle the bucket holds 25 tokens, not more.
    h.clock.advance(Duration::from_secs(3 * 3600));
    let accepted = (0..30).filter(|_| h.emit(dup.clone()).is_some()).count();
    assert_eq!(accepted, 25);
}

#[test]
fn p4_one_bucket_per_object_in_1_20_and_per_type_with_the_1_32_key() {
    // The profile's key (1.20: one bucket; 1.36, the default: per type), and the
    // 1.32 key given explicitly as an override of the 1.20 profile.
    for (key, version, warning_passes) in [
        (None, ClientGoVersion::V1_20, false),
        (
            Some(Arc::new(spam_key_with_type) as SpamKeyFn),
            ClientGoVersion::V1_20,
            true,
        ),
        (None, ClientGoVersion::default(), true),
    ] {
        let mut h = Harness::new(CorrelatorOptions {
            spam_key_fn: key,
            ..CorrelatorOptions::for_client_go(version)
        });
        for i in 0..25 {
            h.clock.advance(Duration::from_millis(1));
            assert!(
                h.emit(fixture_event("Chatty", &format!("m{i}"), my_pod()))
                    .is_some()
            );
        }
        h.clock.advance(Duration::from_millis(1));
        let mut warning = fixture_event("Failed", "boom", my_pod());
        warning.type_ = "Warning".into();
        assert_eq!(h.emit(warning).is_some(), warning_passes);
    }
}

#[test]
fn p5_aggregation_pop_is_deterministic() {
    // Re-sending the first of 10 distinct messages: client-go aggregates it 45 times out of
    // 200 (random PopAny). kevents: Oldest removes message 0, so it is aggregated; Newest
    // keeps it, so it counts on its own event.
    for (pop, aggregated) in [(AggregatePop::Oldest, true), (AggregatePop::Newest, false)] {
        let mut h = Harness::new(CorrelatorOptions {
            aggregate_pop: pop,
            ..Default::default()
        });
        for i in 0..10 {
            h.clock.advance(Duration::from_secs(1));
            h.emit(fixture_event("similar", &format!("msg {i}"), my_pod()));
        }
        h.clock.advance(Duration::from_secs(1));
        let (_, e, _) = h.emit(fixture_event("similar", "msg 0", my_pod())).unwrap();
        assert_eq!(
            e.message.starts_with(AGGREGATE_PREFIX),
            aggregated,
            "{pop:?}"
        );
        assert_eq!(
            e.count, 2,
            "either the aggregate's second write or msg 0's second"
        );
    }
}

/// A recorded sink call: method, event, patch body.
type Call = (&'static str, Event, Vec<u8>);

/// A sink whose PATCH always answers 404 and that records every call.
#[derive(Default, Clone)]
struct PatchAlways404 {
    api: MemoryApiServer,
    calls: Arc<std::sync::Mutex<Vec<Call>>>,
}

impl EventSink for PatchAlways404 {
    fn create(&self, event: &Event) -> SinkFuture {
        self.calls
            .lock()
            .unwrap()
            .push(("create", event.clone(), Vec::new()));
        self.api
            .delete(&event.metadata.namespace, &event.metadata.name);
        self.api.create(event)
    }
    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        self.calls
            .lock()
            .unwrap()
            .push(("patch", event.clone(), patch.to_vec()));
        let err = SinkError::Status(Box::new(Status::failure(404, "NotFound", "gone")));
        Box::pin(async move { Err(err) })
    }
}

#[test]
fn p6_patch_404_recreates_with_accumulated_count() {
    let clock = VirtualClock::new(t(START));
    let mut c = with_clock(clock.clone(), CorrelatorOptions::default());
    let sink = PatchAlways404::default();
    let t1 = clock.now();
    for _ in 0..3 {
        let now = clock.now();
        let mut e = fixture_event("r", "m", my_pod());
        e.metadata.name = kevents_core::name::event_name("my-pod", now);
        e.metadata.namespace = "my-ns".into();
        e.first_timestamp = Some(now);
        e.last_timestamp = Some(now);
        let r = c.correlate(e);
        let mut ev = r.event;
        let out = block_on(write_event(&sink, &mut ev, r.patch.as_deref()));
        c.update_state(&out.stored_event(&ev).unwrap());
        clock.advance(Duration::from_secs(10));
    }
    let calls = sink.calls.lock().unwrap();
    let kinds: Vec<_> = calls.iter().map(|c| c.0).collect();
    assert_eq!(kinds, ["create", "patch", "create", "patch", "create"]);
    assert!(calls[1].2.starts_with(br#"{"count":2,"#));
    let recreated = &calls[2].1;
    assert_eq!(recreated.metadata.name, calls[0].1.metadata.name);
    assert_eq!(recreated.count, 2);
    assert_eq!(recreated.first_timestamp, Some(t1));
    assert_eq!(recreated.last_timestamp, Some(t("2021-01-01T00:00:10Z")));
    assert_eq!(recreated.metadata.resource_version, "");
    assert_eq!(calls[4].1.count, 3);
}

#[test]
fn d3_update_expired_event_patches_then_creates_with_empty_resource_version() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    let mut e = fixture_event("r", "m", my_pod());
    e.metadata.name = "my-pod.1".into();
    e.metadata.namespace = "my-ns".into();
    e.count = 2;
    e.metadata.resource_version = "updated-resource-version".into();
    let r = c.correlate(e);
    assert!(r.patch.is_none(), "no observation, so no patch");
    assert_eq!(r.event.count, 2);
    let sink = PatchAlways404::default();
    let mut ev = r.event;
    let out = block_on(write_event(&sink, &mut ev, r.patch.as_deref()));
    assert_eq!(out.kind, WriteKind::Recreate);
    let calls = sink.calls.lock().unwrap();
    assert_eq!(
        calls.iter().map(|c| c.0).collect::<Vec<_>>(),
        ["patch", "create"]
    );
    assert_eq!(calls[1].1.metadata.resource_version, "");
}

#[test]
fn d1_eventf_table_through_correlator_and_sink() {
    // TestEventf's 7 items (testRef = Pod baz/foo uid bar with fieldPath spec.containers[2],
    // testPod the object itself, testRef2 the pod with uid differentUid and containers[3]).
    let test_ref = ObjectReference::new("v1", "Pod", "baz", "foo")
        .with_uid("bar")
        .with_field_path("spec.containers[2]");
    let test_pod = ObjectReference::new("v1", "Pod", "baz", "foo").with_uid("bar");
    let test_ref2 = ObjectReference::new("v1", "Pod", "baz", "foo")
        .with_uid("differentUid")
        .with_field_path("spec.containers[3]");
    let items = [
        (
            &test_ref,
            "Started",
            "some verbose message: 1",
            WriteKind::Create,
            1,
        ),
        (
            &test_pod,
            "Killed",
            "some other verbose message: 1",
            WriteKind::Create,
            1,
        ),
        (
            &test_ref,
            "Started",
            "some verbose message: 1",
            WriteKind::Patch,
            2,
        ),
        (
            &test_ref2,
            "Started",
            "some verbose message: 1",
            WriteKind::Create,
            1,
        ),
        (
            &test_ref,
            "Started",
            "some verbose message: 1",
            WriteKind::Patch,
            3,
        ),
        (
            &test_ref2,
            "Stopped",
            "some verbose message: 1",
            WriteKind::Create,
            1,
        ),
        (
            &test_ref2,
            "Stopped",
            "some verbose message: 1",
            WriteKind::Patch,
            2,
        ),
    ];
    let mut h = Harness::new(CorrelatorOptions::default());
    for (r, reason, msg, kind, count) in items {
        h.clock.advance(Duration::from_secs(1));
        let e = Event {
            involved_object: r.clone(),
            reason: reason.into(),
            message: msg.into(),
            source: EventSource::new("eventTest", ""),
            count: 1,
            type_: "Normal".into(),
            ..Default::default()
        };
        let (k, ev, _) = h.emit(e).unwrap();
        assert_eq!((k, ev.count), (kind, count), "{reason} on {r:?}");
        assert_eq!(ev.metadata.namespace, "baz");
        assert!(ev.metadata.name.starts_with("foo."));
        if count > 1 {
            assert_ne!(ev.first_timestamp, ev.last_timestamp);
        }
    }
}

#[test]
fn g15_keys_do_not_collide_where_client_go_would_merge() {
    let mut h = Harness::new(CorrelatorOptions::default());
    let (_, a, _) = h.emit(fixture_event("Fail", "ed x", my_pod())).unwrap();
    h.clock.advance(Duration::from_millis(1));
    let (kind, b, _) = h.emit(fixture_event("Failed", " x", my_pod())).unwrap();
    assert_eq!((a.count, b.count, kind), (1, 1, WriteKind::Create));
}

#[test]
fn huge_bursts_do_not_overflow_the_bucket() {
    // burst 2^30 is how benchmarks switch the spam filter off; with client-go's qps that is
    // a bucket span far beyond u64 nanoseconds. (The burst is capped so that burst / qps
    // stays below ~146 years: with qps 1e-3 that still leaves 4.6 million tokens.)
    for (burst, qps) in [
        (1 << 30, 0.0),
        (i32::MAX, 1e-3),
        (i32::MAX, 1e9),
        (1 << 20, 0.01),
    ] {
        let mut h = Harness::new(CorrelatorOptions {
            burst_size: burst,
            qps,
            ..Default::default()
        });
        for i in 0..2_000 {
            h.clock.advance(Duration::from_micros(1));
            let mut e = fixture_event("r", "m", my_pod());
            e.message = format!("m{}", i % 3);
            assert!(
                h.emit(e).is_some(),
                "burst {burst} qps {qps}: occurrence {i} filtered"
            );
        }
    }
}

#[test]
fn negative_cache_size_keeps_nothing_and_max_events_one_always_aggregates() {
    let mut h = Harness::new(CorrelatorOptions {
        lru_cache_size: -1,
        ..Default::default()
    });
    for _ in 0..3 {
        let (kind, e, _) = h.emit(fixture_event("r", "m", my_pod())).unwrap();
        assert_eq!((kind, e.count), (WriteKind::Create, 1));
        h.clock.advance(Duration::from_secs(1));
    }
    assert_eq!(h.c.stats().cache_len, [0, 0, 0]);
    let mut h = Harness::new(CorrelatorOptions {
        max_events: 1,
        ..Default::default()
    });
    let (_, e, _) = h.emit(fixture_event("r", "m", my_pod())).unwrap();
    assert_eq!(e.message, "(combined from similar events): m");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    struct Step {
        gap_ms: u64,
        object: u8,
        reason: u8,
        message: u8,
        warning: bool,
        delete_first: bool,
    }

    fn step() -> impl Strategy<Value = Step> {
        (
            0u64..400_000,
            0u8..6,
            0u8..3,
            0u8..12,
            any::<bool>(),
            prop::bool::weighted(0.05),
        )
            .prop_map(
                |(gap_ms, object, reason, message, warning, delete_first)| Step {
                    gap_ms,
                    object,
                    reason,
                    message,
                    warning,
                    delete_first,
                },
            )
    }

    fn options() -> impl Strategy<Value = CorrelatorOptions> {
        (
            -1i64..9,
            -1i32..6,
            prop_oneof![Just(0.0f32), Just(0.01), Just(1.0), Just(-1.0)],
            -1i64..6,
            -1i64..900,
        )
            .prop_map(
                |(lru, burst, qps, max_events, interval)| CorrelatorOptions {
                    lru_cache_size: lru,
                    burst_size: burst,
                    qps,
                    max_events,
                    max_interval_in_seconds: interval,
                    ..Default::default()
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// No panic on any input, caches never exceed their bound, and the count written
        /// under one event name never decreases.
        #[test]
        fn bounded_monotonic_and_panic_free(opts in options(), steps in prop::collection::vec(step(), 1..200)) {
            let bound = opts.clone().with_defaults().lru_cache_size;
            let mut h = Harness::new(opts);
            let mut last_count: std::collections::HashMap<(String, String), i32> = Default::default();
            for s in steps {
                h.clock.advance(Duration::from_millis(s.gap_ms));
                if s.delete_first
                    && let Some(e) = h.api.list().first()
                {
                    h.api.delete(&e.metadata.namespace, &e.metadata.name);
                    last_count.remove(&(e.metadata.namespace.clone(), e.metadata.name.clone()));
                }
                let r = fixture_ref("Pod", &format!("pod-{}", s.object), "ns");
                let mut e = fixture_event(&format!("R{}", s.reason), &format!("m{}", s.message), r);
                if s.warning { e.type_ = "Warning".into(); }
                if let Some((_, ev, _)) = h.emit(e) {
                    let key = (ev.metadata.namespace.clone(), ev.metadata.name.clone());
                    let prev = last_count.insert(key, ev.count);
                    prop_assert!(prev.is_none_or(|p| p <= ev.count), "count went from {prev:?} to {}", ev.count);
                }
                let stats = h.c.stats();
                for len in stats.cache_len {
                    prop_assert!(bound <= 0 || len as i64 <= bound, "cache {len} > {bound}");
                }
            }
        }

        /// A skipped occurrence is still counted: with one key and no eviction, every written
        /// event carries the number of occurrences so far, skipped ones included.
        #[test]
        fn skipped_occurrences_count(burst in 1i32..5, gaps in prop::collection::vec(0u64..200_000, 1..120)) {
            let mut h = Harness::new(CorrelatorOptions { burst_size: burst, qps: 0.01, ..Default::default() });
            for (n, gap) in gaps.into_iter().enumerate() {
                h.clock.advance(Duration::from_millis(gap));
                if let Some((_, ev, _)) = h.emit(fixture_event("r", "m", my_pod())) {
                    prop_assert_eq!(ev.count as usize, n + 1);
                }
            }
        }
    }
}
