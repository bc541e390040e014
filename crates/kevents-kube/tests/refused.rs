//! Issue 31: with a token that may not write events, the drop-in `Recorder`'s publishes
//! return Ok but nothing is stored; the shutdown report must say so (25 occurrences not
//! stored, with the apiserver's 403 as the cause), and the events.k8s.io/v1 series chain
//! must not PATCH an event whose CREATE was refused. Against the simulator (whose token
//! without rights gets 403 on every event request, as kube-apiserver's) and against a real
//! kube-apiserver (ignored, with the command that runs it, when it is not provisioned;
//! failing in CI or with `KEVENTS_REQUIRE_APISERVER=1`).

mod common;

use std::time::Duration;

use common::{client_for, real_target};
use k8s_openapi::api::core::v1::ObjectReference;
use kevents_kube::{Recorder, SINK_NAME};
use kevents_testkit::{Identity, Target};
use kube::runtime::events::{Event, EventType, Reporter};

fn configmap() -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        namespace: Some("default".into()),
        name: Some("refused-cm".into()),
        uid: Some("uid-refused-cm".into()),
        ..Default::default()
    }
}

/// 25 publishes of one event through the drop-in recorder on the nobody identity's client,
/// then a shutdown: every occurrence is reported not stored, and no PATCH was attempted.
async fn refused_publishes<S>(target: &Target<S>) {
    let client = client_for(target, Identity::Nobody).await;
    let reporter = Reporter {
        controller: "kevents.io/refused-test".into(),
        instance: Some("refused-test-0".into()),
    };
    let recorder = Recorder::new(client, reporter);
    let event = Event {
        type_: EventType::Warning,
        reason: "Refused".into(),
        note: Some("a token without rights".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    for _ in 0..25 {
        recorder
            .publish(&event, &configmap())
            .await
            .expect("publish returns Ok (the write fails later)");
    }
    let report = recorder
        .shutdown(Duration::from_secs(30))
        .await
        .expect("shutdown");
    assert!(report.completed, "{report}");
    assert_eq!(report.not_stored(), 25, "{report}");
    let cause = "403 Forbidden: create events.k8s.io/v1 events in namespace \"default\"";
    assert!(
        report
            .to_string()
            .contains(&format!("25 occurrences not stored: 25 \u{d7} {cause}")),
        "{report}"
    );
    let s = report
        .stats
        .sink_events_v1(SINK_NAME)
        .expect("the series chain");
    assert_eq!(s.not_stored_by_cause, [(cause.to_owned(), 25)], "{s:?}");
    // Every request was one of the CREATEs the cache produced (a 403 is not retried): no
    // PATCH was attempted.
    assert!(s.attempts >= 1 && s.attempts <= s.cache.creates, "{s:?}");
    assert_eq!((s.delivered(), s.patched), (0, 0), "{s:?}");
    assert!(report.stats.dropped_total() >= 25, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_without_rights_is_reported_against_the_simulator() {
    let target = Target::simulator().await.expect("simulator");
    refused_publishes(&target).await;
    let sim = target.simulator_handle().expect("a simulator");
    assert_eq!(sim.stats().patches, 0);
    assert!(sim.events().is_empty());
}

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_token_without_rights_is_reported_against_the_real_apiserver() {
        refused_publishes(&real_target().await).await;
    }
}
