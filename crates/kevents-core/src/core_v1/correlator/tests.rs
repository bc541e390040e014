//! Golden scenarios from client-go's own tests (reference section D) and the extra scenarios
//! derived by running client-go v1.20 (P1-P6), with client-go's inputs and expected values.
//! The scenarios that write through an in-memory apiserver are in
//! `crates/kevents-core/tests/correlator_writes.rs` (they need `kevents-sim`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;
use crate::core_v1::EventSource;
use crate::reference::ObjectReference;
use crate::time::{Clock, IntervalClock, Time};

/// `correlate`, with the hint of the pipeline's fast form (`correlate_in_place`).
fn with_hint(c: &mut Correlator, mut event: Event) -> (Correlated, Option<StateHint>) {
    let d = c.correlate_decision(&mut event);
    let correlated = Correlated {
        event,
        patch: d.patch,
        skip: d.skip,
        aggregated: d.aggregated,
    };
    (correlated, d.hint)
}

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

/// The TestEventCorrelator harness: the clock is read once to stamp each event, then the
/// correlator reads it (aggregator, spam filter); UpdateState after each non-skipped result.
fn play(clock: &IntervalClock, c: &mut Correlator, previous: &[Event], new: Event) -> Correlated {
    for e in previous {
        let mut e = e.clone();
        let now = clock.now();
        e.first_timestamp = Some(now);
        e.last_timestamp = Some(now);
        let r = c.correlate(e);
        if !r.skip {
            c.update_state(&r.event);
        }
    }
    let mut e = new;
    let now = clock.now();
    e.first_timestamp = Some(now);
    e.last_timestamp = Some(now);
    c.correlate(e)
}

fn scenario(interval_secs: u64, previous: &[Event], new: Event) -> Correlated {
    let clock = IntervalClock::new(t(START), Duration::from_secs(interval_secs));
    let mut c = with_clock(clock.clone(), CorrelatorOptions::default());
    play(&clock, &mut c, previous, new)
}

fn similar(i: usize) -> Event {
    let mut r = my_pod();
    r.field_path = "spec.containers{container1}".into();
    fixture_event(
        "similar",
        &format!("similar message-{i}-similar message"),
        r,
    )
}

#[test]
fn d9a_create_a_single_event() {
    let r = scenario(5, &[], fixture_event("first", "i am first", my_pod()));
    assert!(!r.skip && r.patch.is_none());
    assert_eq!(r.event.count, 1);
    assert_eq!(r.event.first_timestamp, Some(t("2021-01-01T00:00:05Z")));
    assert_eq!(r.event.last_timestamp, Some(t("2021-01-01T00:00:05Z")));
}

#[test]
fn d9b_the_same_event_should_just_count() {
    let dup = fixture_event("duplicate", "me again", my_pod());
    let r = scenario(5, std::slice::from_ref(&dup), dup.clone());
    assert_eq!(r.event.count, 2);
    assert_eq!(r.event.first_timestamp, Some(t("2021-01-01T00:00:05Z")));
    assert_eq!(r.event.last_timestamp, Some(t("2021-01-01T00:00:20Z")));
    assert_eq!(
        r.patch.as_deref(),
        Some(&br#"{"count":2,"lastTimestamp":"2021-01-01T00:00:20Z","message":"me again"}"#[..])
    );
}

#[test]
fn d9c_the_same_event_should_just_count_even_if_more_than_aggregate() {
    let dup = fixture_event("duplicate", "me again", my_pod());
    let r = scenario(30, &vec![dup.clone(); 10], dup);
    assert!(!r.skip && !r.aggregated);
    assert_eq!(r.event.count, 11);
    assert_eq!(r.event.first_timestamp, Some(t("2021-01-01T00:00:30Z")));
    assert_eq!(r.event.last_timestamp, Some(t("2021-01-01T00:15:30Z")));
}

#[test]
fn d9d_the_same_event_is_spam_if_happens_too_frequently() {
    let dup = fixture_event("duplicate", "me again", my_pod());
    let clock = IntervalClock::new(t(START), Duration::from_secs(1));
    let mut c = with_clock(clock.clone(), CorrelatorOptions::default());
    let mut counts = Vec::new();
    let mut last_accepted = None;
    for _ in 0..26 {
        let mut e = dup.clone();
        let now = clock.now();
        e.first_timestamp = Some(now);
        e.last_timestamp = Some(now);
        let r = c.correlate(e);
        if !r.skip {
            counts.push(r.event.count);
            last_accepted = r.event.last_timestamp;
            c.update_state(&r.event);
        }
    }
    assert_eq!(
        counts,
        (1..=25).collect::<Vec<_>>(),
        "occurrence 26 is skipped"
    );
    assert_eq!(last_accepted, Some(t("2021-01-01T00:01:13Z")));
    let r = play(&clock, &mut c, &[], dup);
    assert!(r.skip, "the 27th is skipped too");
}

#[test]
fn d9e_create_many_unique_events() {
    let previous: Vec<Event> = (0..30)
        .map(|i| {
            let r = fixture_ref("Pod", &format!("pod-{i}"), &format!("ns-{i}"));
            fixture_event(&format!("reason-{i}"), &format!("message-{i}"), r)
        })
        .collect();
    let r = scenario(5, &previous, fixture_event("unique", "snowflake", my_pod()));
    assert_eq!(r.event.count, 1);
    assert!(r.patch.is_none() && !r.skip);
}

#[test]
fn d9f_similar_events_should_aggregate_event() {
    let previous: Vec<Event> = (0..9).map(similar).collect();
    let mut new = similar(0);
    new.message = "similar message".into();
    let r = scenario(5, &previous, new);
    assert!(r.aggregated && r.patch.is_none());
    assert_eq!(r.event.metadata.name, "my-pod.1655f2bf3b286a00");
    assert_eq!(r.event.count, 1);
    assert_eq!(r.event.first_timestamp, Some(t("2021-01-01T00:02:25Z")));
    assert_eq!(r.event.last_timestamp, Some(t("2021-01-01T00:02:25Z")));
    assert_eq!(
        r.event.message,
        "(combined from similar events): similar message"
    );
    assert_eq!(
        r.event.involved_object.field_path,
        "spec.containers{container1}"
    );
}

#[test]
fn d9g_similar_events_many_times_should_count_the_aggregate() {
    let previous: Vec<Event> = (0..10).map(similar).collect();
    let clock = IntervalClock::new(t(START), Duration::from_secs(5));
    let mut c = with_clock(clock.clone(), CorrelatorOptions::default());
    // The 10th previous event is already the aggregate.
    let tenth = play(&clock, &mut c, &previous[..9], previous[9].clone());
    assert!(tenth.aggregated);
    assert_eq!(
        tenth.event.message,
        "(combined from similar events): similar message-9-similar message"
    );
    assert_eq!(tenth.event.first_timestamp, Some(t("2021-01-01T00:02:25Z")));
    c.update_state(&tenth.event);
    let mut new = similar(0);
    new.message = "similar message".into();
    let r = play(&clock, &mut c, &[], new);
    assert_eq!(r.event.count, 2);
    assert_eq!(r.event.first_timestamp, Some(t("2021-01-01T00:02:25Z")));
    assert_eq!(r.event.last_timestamp, Some(t("2021-01-01T00:02:40Z")));
    assert_eq!(
        r.patch.as_deref(),
        Some(
            &br#"{"count":2,"lastTimestamp":"2021-01-01T00:02:40Z","message":"(combined from similar events): similar message"}"#[..]
        )
    );
}

#[test]
fn d9h_events_from_different_containers_do_not_aggregate() {
    let mut r2 = my_pod();
    r2.field_path = "spec.containers{container2}".into();
    let mut r1 = my_pod();
    r1.field_path = "spec.containers{container1}".into();
    let prev = fixture_event("similar", "similar message", r2);
    let r = scenario(5, &[prev], fixture_event("similar", "similar message", r1));
    assert_eq!(r.event.count, 1);
    assert!(r.patch.is_none());
}

#[test]
fn d9i_similar_events_whose_interval_is_greater_than_aggregate_interval_do_not_aggregate() {
    let previous: Vec<Event> = (0..9).map(similar).collect();
    let mut new = similar(0);
    new.message = "similar message".into();
    let r = scenario(600, &previous, new);
    assert!(!r.aggregated);
    assert_eq!(r.event.count, 1);
}

#[test]
fn d7_aggregator_by_reason_keys() {
    let pod = fixture_ref("Pod", "pod1", "other");
    let e1 = fixture_event("end-of-world", "it was fun", pod.clone());
    let e2 = fixture_event("end-of-world", "it was awful", pod.clone());
    let e3 = fixture_event("nevermind", "it was a bug", pod);
    let keys = |e: &Event| {
        let (mut a, mut l) = (KeyBuilder::default(), KeyBuilder::default());
        aggregate_by_reason(e, &mut a, &mut l);
        (a.as_bytes().to_vec(), l.as_bytes().to_vec())
    };
    let (a1, l1) = keys(&e1);
    let (a2, l2) = keys(&e2);
    let (a3, _) = keys(&e3);
    assert_eq!(a1, a2);
    assert_ne!(l1, l2);
    assert_ne!(a1, a3);
}

#[test]
fn d8_aggregate_message_prefix() {
    let e = fixture_event("r", "msg", my_pod());
    assert!(aggregate_message(&e).starts_with("(combined from similar events): "));
}

#[test]
fn d14_spam_filter_with_custom_spam_key() {
    let run = |spam_key_fn: Option<SpamKeyFn>, reason: &str, message: &str| {
        let clock = IntervalClock::new(t(START), Duration::from_secs(1));
        let opts = CorrelatorOptions {
            burst_size: 1,
            spam_key_fn,
            ..Default::default()
        };
        let mut c = with_clock(clock.clone(), opts);
        let first = fixture_event("original", "i am first", my_pod());
        play(
            &clock,
            &mut c,
            &[first],
            fixture_event(reason, message, my_pod()),
        )
    };
    let by_reason: SpamKeyFn = Arc::new(|e: &Event, kb: &mut KeyBuilder| {
        spam_key(e, kb);
        kb.push(&e.reason);
    });
    assert!(
        run(None, "duplicate", "me again").skip,
        "(a) default key: skipped"
    );
    let b = run(Some(by_reason.clone()), "duplicate", "me again");
    assert!(!b.skip, "(b) custom key, other reason: own bucket");
    assert_eq!(b.event.count, 1);
    assert!(
        run(Some(by_reason), "original", "me again").skip,
        "(c) custom key, same reason"
    );
}

#[test]
fn p1_clock_reads_per_correlate_are_two() {
    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);
    impl Clock for Counting {
        fn now(&self) -> Time {
            self.0.fetch_add(1, Ordering::SeqCst);
            Time::UNIX_EPOCH
        }
    }
    let clock = Arc::new(Counting::default());
    let mut c = Correlator::new(CorrelatorOptions {
        clock: Some(clock.clone()),
        ..Default::default()
    });
    c.correlate(fixture_event("r", "m", my_pod()));
    assert_eq!(clock.0.load(Ordering::SeqCst), 2);
    c.update_state(&fixture_event("r", "m", my_pod()));
    assert_eq!(
        clock.0.load(Ordering::SeqCst),
        2,
        "update_state reads no clock"
    );
}

#[test]
fn patch_edge_cases_match_c2() {
    let mut e = Event {
        count: 2,
        last_timestamp: Some(Time::from_unix_nanos(999_999_999)),
        message: "m".into(),
        ..Default::default()
    };
    assert_eq!(observation_patch(&e), br#"{"count":2,"message":"m"}"#);
    e.message = "<a&b>".into();
    e.last_timestamp = Some(t("2021-01-01T00:00:20Z"));
    assert_eq!(
        observation_patch(&e),
        br#"{"count":2,"lastTimestamp":"2021-01-01T00:00:20Z","message":"\u003ca\u0026b\u003e"}"#
    );
}

mod hints {
    use super::*;
    use crate::time::VirtualClock;
    use proptest::prelude::*;

    fn event(object: u8, reason: u8, message: u8) -> Event {
        let mut e = fixture_event(
            &format!("R{reason}"),
            &format!("m{message}"),
            fixture_ref("Pod", &format!("p{object}"), "ns"),
        );
        e.metadata.name = format!("p{object}.{reason}{message}");
        e.metadata.namespace = "ns".into();
        e
    }

    proptest! {
        /// Learning with any hint (the right one, a stale one, one of another event, none)
        /// leaves the correlator deciding exactly as `update_state` without hints does: a
        /// small LRU so entries are reused, tight aggregation so aggregate events appear.
        #[test]
        fn any_hint_learns_like_update_state(
            steps in prop::collection::vec((0u8..6, 0u8..2, 0u8..3, 0usize..4, any::<bool>()), 1..120),
        ) {
            let clock = VirtualClock::new(t(START));
            let opts = || CorrelatorOptions {
                lru_cache_size: 4,
                max_events: 3,
                clock: Some(Arc::new(clock.clone())),
                ..Default::default()
            };
            let (mut hinted, mut plain) = (Correlator::new(opts()), Correlator::new(opts()));
            let mut hints: Vec<Option<StateHint>> = Vec::new();
            for (n, (object, reason, message, pick, learn)) in steps.into_iter().enumerate() {
                clock.advance(Duration::from_secs(1));
                let e = event(object, reason, message);
                let (a, a_hint) = with_hint(&mut hinted, e.clone());
                let b = plain.correlate(e);
                prop_assert_eq!(&a.event, &b.event);
                prop_assert_eq!(&a.patch, &b.patch);
                prop_assert_eq!((a.skip, a.aggregated), (b.skip, b.aggregated));
                hints.push(a_hint);
                if learn && !a.skip {
                    let mut stored = a.event.clone();
                    stored.metadata.resource_version = n.to_string();
                    // The right hint, or one from an earlier correlation (maybe reused since).
                    let hint = hints[hints.len().saturating_sub(1 + pick)];
                    hinted.learn_with_hint(hint, &stored);
                    plain.learn_with_hint(None, &stored);
                }
            }
            prop_assert_eq!(hinted.stats(), plain.stats());
        }
    }
}

/// A write answered after more occurrences were observed (a pipeline correlates while its
/// writes are in flight): learning the answer keeps the observed count, so the occurrences
/// the spam filter skipped meanwhile are carried by the next write instead of rolled back.
/// (Issue 23: learning the answer's count made stored counts lag behind the occurrences.)
#[test]
fn a_late_answer_does_not_roll_the_observed_count_back() {
    let clock = IntervalClock::new(t(START), Duration::from_secs(1));
    let mut c = with_clock(
        clock.clone(),
        CorrelatorOptions {
            burst_size: 1,
            qps: 1.0 / 300.0,
            ..CorrelatorOptions::default()
        },
    );
    let e = || fixture_event("BackOff", "restarting", my_pod());
    let (first, first_hint) = with_hint(&mut c, e());
    assert!(!first.skip);
    // Two more occurrences while the CREATE is in flight: no token, observed only.
    assert!(c.correlate(e()).skip);
    let third = c.correlate(e());
    assert!(third.skip);
    assert_eq!(third.event.count, 3);
    // The CREATE's answer arrives now: the server stored count 1, with a resourceVersion.
    let mut stored = first.event.clone();
    stored.metadata.resource_version = "41".into();
    c.learn_with_hint(first_hint, &stored);
    let fourth = c.correlate(e());
    assert_eq!(
        fourth.event.count, 4,
        "the two skipped occurrences are kept"
    );
    assert_eq!(
        fourth.event.metadata.resource_version, "41",
        "name and version learnt"
    );
    // The same through the lookup path (no hint).
    let mut stored = fourth.event.clone();
    stored.count = 2;
    stored.metadata.resource_version = "42".into();
    c.update_state(&stored);
    let (fifth, fifth_hint) = with_hint(&mut c, e());
    assert_eq!(fifth.event.count, 5);
    assert_eq!(fifth.event.metadata.resource_version, "42");
    // A server copy with a higher count (another writer) is taken, as client-go does.
    let mut stored = fifth.event.clone();
    stored.count = 9;
    c.learn_with_hint(fifth_hint, &stored);
    assert_eq!(c.correlate(e()).event.count, 10);
}

/// Hostile answer counts (issue 36): a server answering `count: 2147483647` must not make
/// the next write's count wrap to i32::MIN (every later PATCH then refused with 409): it
/// saturates at i32::MAX, the largest count the apiserver stores; a negative answer count
/// must not defeat "never below what was observed".
#[test]
fn hostile_answer_counts_neither_wrap_nor_roll_back() {
    let mut c = with_clock(
        IntervalClock::new(t(START), Duration::from_secs(1)),
        CorrelatorOptions::default(),
    );
    let e = || fixture_event("BackOff", "restarting", my_pod());
    let (first, hint) = with_hint(&mut c, e());
    let mut stored = first.event.clone();
    stored.count = i32::MAX;
    stored.metadata.resource_version = "7".into();
    c.learn_with_hint(hint, &stored);
    let next = c.correlate(e());
    assert_eq!(next.event.count, i32::MAX, "saturates, never wraps");
    assert_eq!(c.correlate(e()).event.count, i32::MAX);

    let mut c = with_clock(
        IntervalClock::new(t(START), Duration::from_secs(1)),
        CorrelatorOptions::default(),
    );
    let (first, _) = with_hint(&mut c, e());
    let second = c.correlate(e());
    assert_eq!(second.event.count, 2);
    let mut stored = first.event.clone();
    stored.count = -5;
    stored.metadata.resource_version = "8".into();
    c.update_state(&stored);
    assert_eq!(
        c.correlate(e()).event.count,
        3,
        "a negative answer count does not roll the observed count back"
    );
}

/// Issue 36 (`replay --max-line-bytes 1073741824` cost about 9x the line): the key builders
/// a message of megabytes grew are freed once used, not kept (with a copy's worth of memory)
/// while the sink writes the event and after.
#[test]
fn a_long_message_leaves_no_key_buffer_behind() {
    let mut c = Correlator::new(CorrelatorOptions::default());
    let e = Event {
        involved_object: ObjectReference::new("v1", "Pod", "ns", "p"),
        reason: "BackOff".into(),
        count: 1,
        message: "x".repeat(4 << 20),
        ..Event::default()
    };
    let r = c.correlate(e.clone());
    assert!(!r.skip);
    c.update_state(&r.event);
    let mut stored = r.event.clone();
    stored.reason = "Other".into(); // not the key correlate built: update_state builds its own
    c.update_state(&stored);
    for (name, kb) in [
        ("full", &c.kb_full),
        ("aggregate", &c.kb_agg),
        ("local", &c.kb_local),
        ("spam", &c.kb_spam),
    ] {
        assert!(kb.capacity() <= 64 * 1024, "{name}: {}", kb.capacity());
    }
    // Still correlated as before: the repeat is a PATCH of the same event.
    let again = c.correlate(e);
    assert!(again.patch.is_some());
}
