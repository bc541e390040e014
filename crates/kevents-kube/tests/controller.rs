//! Against a real kube-apiserver v1.20.2 (ignored, with the command that runs it, when it is
//! not provisioned; failing in CI or with `KEVENTS_REQUIRE_APISERVER=1`):
//!
//! * the example's kube-rs `Controller` (`examples/configmap_controller.rs`, included here)
//!   over several ConfigMaps, its reconciler publishing concurrently through the drop-in:
//!   the stored events and their series counts are exact, and the apiserver got far fewer
//!   event requests (its own `apiserver_request_total`) than there were publish calls;
//! * 16 concurrent tasks publishing the same event through kube-rs's own recorder and
//!   through the drop-in: kube-rs sends one request per call (and may duplicate events or
//!   lose counts); the drop-in stores one event with the exact count.

mod common;

#[allow(dead_code)] // its `main` is the example's
#[path = "../examples/configmap_controller.rs"]
mod example;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{client_for, real_target};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ObjectReference};
use kevents_kube::{KubeSink, Recorder, SINK_NAME};
use kevents_testkit::Identity;
use kube::api::{Api, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};

/// Sum of `apiserver_request_total` for events.k8s.io events with verb POST or PATCH.
async fn event_writes(client: &kube::Client) -> u64 {
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("request");
    let text = client.request_text(req).await.expect("GET /metrics");
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| l.contains("group=\"events.k8s.io\"") && l.contains("resource=\"events\""))
        .filter(|l| l.contains("verb=\"POST\"") || l.contains("verb=\"PATCH\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

async fn create_namespace(client: &kube::Client, name: &str) {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(name.into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace created");
}

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn controller_records_exact_series_against_real_apiserver() {
        let target = real_target().await;
        let client = client_for(&target, Identity::Admin).await;
        let ns = "kevents-controller";
        create_namespace(&client, ns).await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        for i in 0..5 {
            let mut cm = ConfigMap::default();
            cm.metadata.name = Some(format!("app-{i}"));
            cm.data = Some(BTreeMap::from([("key".to_owned(), format!("v{i}"))]));
            cms.create(&PostParams::default(), &cm).await.expect("configmap created");
        }
        let writes_before = event_writes(&client).await;

        let reporter = Reporter { controller: "kevents.io/cm-controller".into(), instance: None };
        let recorder = Recorder::new(client.clone(), reporter);
        let ctx = Arc::new(example::Ctx {
            recorder: recorder.clone(),
            publishes_per_reconcile: 8,
            requeue: Duration::from_millis(100),
            published: Mutex::default(),
        });
        let stop = tokio::time::sleep(Duration::from_secs(4));
        let reconciled = example::run_controller(client.clone(), ns, Arc::clone(&ctx), stop).await;
        let report = recorder.shutdown(Duration::from_secs(30)).await.expect("shutdown");
        assert!(report.completed, "{report:?}");
        let s = report.stats.sink_events_v1(SINK_NAME).expect("series chain").clone();
        assert_eq!(s.failed(), 0, "{s:?}");

        let published = ctx.published.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let calls: u64 = published.values().sum();
        assert_eq!(published.len(), 5, "{published:?}");
        assert!(reconciled >= 10, "{reconciled} reconciles");

        let events = KubeSink::new(client.clone()).requests().events_v1().list_events(ns).await.expect("list");
        for (name, n) in &published {
            let about: Vec<_> = events.iter().filter(|e| &e.regarding.name == name).collect();
            assert_eq!(about.len(), 1, "one event about {name}: {about:#?}");
            let e = about[0];
            assert_eq!(e.series.map(|s| s.count as u64), Some(*n), "{name}: {e:#?}");
            assert_eq!((e.reason.as_str(), e.action.as_str()), ("Reconciled", "Reconcile"));
            assert_eq!(e.reporting_instance, "kevents.io/cm-controller");
            assert_eq!(e.note, "1 keys in sync");
        }
        let writes = event_writes(&client).await - writes_before;
        eprintln!(
            "controller: {reconciled} reconciles, {calls} publish calls, {writes} event write requests \
             (apiserver_request_total), pipeline: {} creates, {} patches",
            s.created, s.patched
        );
        assert_eq!(writes, s.created + s.patched + s.recreated, "the apiserver saw what the pipeline sent");
        assert!(writes * 20 <= calls, "{writes} requests for {calls} publish calls");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sixteen_tasks_kube_rs_recorder_vs_drop_in_against_real_apiserver() {
        let target = real_target().await;
        let client = client_for(&target, Identity::Admin).await;
        let ns = "kevents-race";
        create_namespace(&client, ns).await;
        const TASKS: u64 = 16;
        const CALLS: u64 = 20;
        let object = |name: &str| ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("ConfigMap".into()),
            namespace: Some(ns.into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        };
        let ev = || Event {
            type_: EventType::Warning,
            reason: "Drift".into(),
            note: Some("spec drifted".into()),
            action: "Reconcile".into(),
            secondary: None,
        };

        // kube-rs's recorder: one awaited request per call.
        let before = event_writes(&client).await;
        let kube_recorder = kube::runtime::events::Recorder::new(
            client.clone(),
            Reporter { controller: "kevents.io/kube-rs".into(), instance: None },
        );
        let started = std::time::Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            let (r, o) = (kube_recorder.clone(), object("with-kube-rs"));
            tasks.push(tokio::spawn(async move {
                let mut errors = 0u64;
                for _ in 0..CALLS {
                    if r.publish(&ev(), &o).await.is_err() {
                        errors += 1;
                    }
                }
                errors
            }));
        }
        let mut kube_errors = 0;
        for t in tasks {
            kube_errors += t.await.expect("task");
        }
        let kube_elapsed = started.elapsed();
        let kube_writes = event_writes(&client).await - before;

        // The drop-in.
        let before = event_writes(&client).await;
        let recorder = Recorder::new(
            client.clone(),
            Reporter { controller: "kevents.io/kevents".into(), instance: None },
        );
        let started = std::time::Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..TASKS {
            let (r, o) = (recorder.clone(), object("with-kevents"));
            tasks.push(tokio::spawn(async move {
                for _ in 0..CALLS {
                    r.publish(&ev(), &o).await.expect("published");
                }
            }));
        }
        for t in tasks {
            t.await.expect("task");
        }
        let publish_elapsed = started.elapsed();
        let report = recorder.shutdown(Duration::from_secs(30)).await.expect("shutdown");
        assert!(report.completed, "{report:?}");
        let kevents_writes = event_writes(&client).await - before;

        let events = KubeSink::new(client.clone()).requests().events_v1().list_events(ns).await.expect("list");
        let summary = |name: &str| {
            let about: Vec<_> = events.iter().filter(|e| e.regarding.name == name).collect();
            let total: u64 = about.iter().map(|e| e.series.map_or(1, |s| s.count as u64)).sum();
            (about.len(), total)
        };
        let (kube_events, kube_total) = summary("with-kube-rs");
        let (ours_events, ours_total) = summary("with-kevents");
        eprintln!(
            "{TASKS} tasks x {CALLS} calls = {} publishes\n  kube-rs: {kube_writes} requests, {kube_events} events stored, counts sum {kube_total}, {kube_errors} errors, {kube_elapsed:?} in publish\n  kevents: {kevents_writes} requests, {ours_events} event stored, count {ours_total}, 0 errors, {publish_elapsed:?} in publish",
            TASKS * CALLS
        );
        assert_eq!(kube_writes, TASKS * CALLS, "kube-rs sends one request per call");
        assert_eq!((ours_events, ours_total), (1, TASKS * CALLS), "exact with kevents");
        assert!(kevents_writes <= 3, "{kevents_writes} requests");
    }
}
