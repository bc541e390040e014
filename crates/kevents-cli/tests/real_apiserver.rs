//! The whole pipeline (recorder -> broadcaster -> correlator -> sink actor -> HttpSink)
//! against a real kube-apiserver v1.20.2 (kevents-testkit's `RealApiserver`).
//!
//! Without a provisioned apiserver these tests are ignored, with the command that runs them
//! (`kevents_testkit::real_apiserver_tests!`), except in CI (`CI=true`) or with
//! `KEVENTS_REQUIRE_APISERVER=1`, where they run and fail.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kevents_actors::{
    IntakePolicy, Pipeline, RetryPolicy, SinkOptions, SinkSnapshot, WatcherPolicy,
};
use kevents_core::{Event, EventSource, EventType, ObjectReference};
use kevents_http::{HttpConfig, HttpSink};
use kevents_sim::workload::Workload;
use kevents_testkit::RealApiserver;

fn start() -> RealApiserver {
    RealApiserver::start()
        .expect("starting the real kube-apiserver")
        .expect("kube-apiserver is not provisioned (see above)")
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn pipeline_against_real_apiserver() {
        pipeline_run();
    }

    /// Workload `api` (type Warning): 3 000 occurrences, 2 500 pass the spam filter; a correct
    /// run stores 600 events whose counts sum to 2 500 (client-go: 1 004).
    #[test]
    fn api_workload_stores_every_occurrence_that_passes_the_spam_filter() {
        api_workload_run();
    }

    /// The library's defaults (coalesce-if-full queues, coalescing writes, the write
    /// budget), with 8-slot queues so the burst overflows: 20 repeats of each of 50 events end
    /// with count 20 each in `kubectl get events`, with fewer writes than occurrences.
    #[test]
    fn a_burst_of_repeats_ends_in_exact_counts_with_the_defaults() {
        burst_run();
    }
}

async fn sink(kubeconfig: &Path) -> HttpSink {
    HttpSink::new(
        HttpConfig::from_kubeconfig(Some(kubeconfig), None)
            .await
            .unwrap(),
    )
    .unwrap()
}

/// A pipeline writing to `sink`, retrying quickly.
fn pipeline(sink: &HttpSink, max_in_flight: usize) -> Pipeline {
    Pipeline::builder(EventSource::new("kevents-test", "node-1"))
        .intake(IntakePolicy::Unbounded)
        .sink(
            "apiserver",
            sink.clone(),
            SinkOptions {
                retry: RetryPolicy {
                    sleep: Duration::from_millis(100),
                    ..RetryPolicy::default()
                },
                max_in_flight,
                delivery: WatcherPolicy::Backpressure { capacity: 1000 },
                // One write per correlator result and client-go's spam filter (skipped
                // repeats dropped): the request sequences checked below.
                coalesce: false,
                defer_spam_tails: false,
                ..SinkOptions::default()
            },
        )
        .start()
}

/// Waits until nothing is queued or in flight anywhere in the pipeline.
async fn settle(p: &Pipeline) -> SinkSnapshot {
    for _ in 0..3000 {
        let s = p.stats();
        if s.intake_depth == 0
            && s.broadcast == s.recorded
            && s.watchers.iter().all(|w| w.depth == 0)
        {
            return s.sink("apiserver").cloned().unwrap();
        }
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("pipeline not idle after 30 s: {:?}", p.stats());
}

fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

async fn stored_for(admin: &HttpSink, ns: &str, object: &str) -> Vec<Event> {
    let mut v: Vec<Event> = admin
        .requests()
        .list_events(ns)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.involved_object.name == object)
        .collect();
    v.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    v
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("kubectl is needed for this test (it is installed with the apiserver tooling)");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn pipeline_run() {
    let server = start();
    actix::System::new().block_on(async {
        let admin = sink(&server.admin_kubeconfig).await;
        let nobody = sink(&server.nobody_kubeconfig).await;

        // Create, then repeats patch the count.
        let p = pipeline(&admin, 16);
        let r = p.recorder();
        let name = unique("web");
        let pod = ObjectReference::new("v1", "Pod", "default", &name).with_uid(unique("uid"));
        r.event(
            &pod,
            EventType::Warning,
            "BackOff",
            "Back-off restarting failed container",
        )
        .unwrap();
        let s = settle(&p).await;
        assert_eq!((s.created, s.patched), (1, 0), "{s:?}");
        for _ in 0..2 {
            r.event(
                &pod,
                EventType::Warning,
                "BackOff",
                "Back-off restarting failed container",
            )
            .unwrap();
        }
        let s = settle(&p).await;
        assert_eq!((s.created, s.patched, s.failed()), (1, 2, 0), "{s:?}");
        let stored = stored_for(&admin, "default", &name).await;
        assert_eq!(stored.len(), 1, "{stored:?}");
        assert_eq!(stored[0].count, 3);
        eprintln!("create + 2 repeats: stored count {}", stored[0].count);

        // Deleted on the server: the next repeat's PATCH gets 404 and re-creates it with the
        // accumulated count.
        admin
            .requests()
            .delete_event("default", &stored[0].metadata.name)
            .await
            .unwrap();
        r.event(
            &pod,
            EventType::Warning,
            "BackOff",
            "Back-off restarting failed container",
        )
        .unwrap();
        let s = settle(&p).await;
        assert_eq!(s.recreated, 1, "{s:?}");
        let stored = stored_for(&admin, "default", &name).await;
        assert_eq!(stored.len(), 1, "{stored:?}");
        assert_eq!(stored[0].count, 4, "re-created with the accumulated count");

        // Aggregation: 10 similar events (same reason, different messages) on one object.
        let rs_name = unique("rs");
        let rs = ObjectReference::new("apps/v1", "ReplicaSet", "default", &rs_name)
            .with_uid(unique("uid"));
        for i in 0..12 {
            r.event(
                &rs,
                EventType::Normal,
                "SuccessfulCreate",
                &format!("Created pod: {rs_name}-{i:05}"),
            )
            .unwrap();
        }
        let s = settle(&p).await;
        assert!(s.aggregated > 0, "{s:?}");
        let stored = stored_for(&admin, "default", &rs_name).await;
        let combined: Vec<&Event> = stored
            .iter()
            .filter(|e| e.message.starts_with("(combined from similar events): "))
            .collect();
        assert_eq!(combined.len(), 1, "{stored:?}");
        assert!(combined[0].count >= 2, "{:?}", combined[0]);
        eprintln!(
            "aggregation: {} stored, combined count {}",
            stored.len(),
            combined[0].count
        );

        // A namespace that does not exist: 404, dropped, not retried.
        let before = settle(&p).await;
        let ghost = ObjectReference::new("v1", "Pod", unique("missing-ns"), "web");
        r.event(&ghost, EventType::Warning, "BackOff", "nowhere")
            .unwrap();
        let s = settle(&p).await;
        assert_eq!(s.rejected - before.rejected, 1, "{s:?}");
        assert_eq!(s.attempts - before.attempts, 1, "not retried: {s:?}");
        assert_eq!(s.retry_exhausted, 0, "{s:?}");
        p.shutdown(Duration::from_secs(10)).await;

        // A token without RBAC rights: 403, dropped, not retried.
        let p = pipeline(&nobody, 16);
        let name = unique("forbidden");
        let pod = ObjectReference::new("v1", "Pod", "default", &name);
        p.recorder()
            .event(&pod, EventType::Warning, "BackOff", "forbidden")
            .unwrap();
        let s = settle(&p).await;
        assert_eq!(
            (s.rejected, s.attempts, s.created, s.retry_exhausted),
            (1, 1, 0, 0),
            "{s:?}"
        );
        assert!(stored_for(&admin, "default", &name).await.is_empty());
        p.shutdown(Duration::from_secs(10)).await;

        // kubectl describe shows the repeated event as (xN over ...).
        let cm = unique("settings");
        kubectl(
            &server.admin_kubeconfig,
            &[
                "-n",
                "default",
                "create",
                "configmap",
                &cm,
                "--from-literal=a=b",
            ],
        );
        let uid = kubectl(
            &server.admin_kubeconfig,
            &[
                "-n",
                "default",
                "get",
                "configmap",
                &cm,
                "-o",
                "jsonpath={.metadata.uid}",
            ],
        );
        let p = pipeline(&admin, 16);
        let object = ObjectReference::new("v1", "ConfigMap", "default", &cm).with_uid(uid.trim());
        // The same object as a k8s-openapi ConfigMap, as a controller holds it: recorded from
        // its borrowed metadata (`Reference::reference_ref`), it is the same series.
        let mut typed = ConfigMap::default();
        typed.metadata.name = Some(cm.clone());
        typed.metadata.namespace = Some("default".into());
        typed.metadata.uid = Some(uid.trim().to_owned());
        for i in 0..5 {
            let r = p.recorder();
            let sent = if i % 2 == 0 {
                r.event(&typed, EventType::Warning, "Synced", "hello")
            } else {
                r.event(&object, EventType::Warning, "Synced", "hello")
            };
            sent.unwrap();
        }
        let s = settle(&p).await;
        assert_eq!((s.created, s.patched), (1, 4), "{s:?}");
        let stored = stored_for(&admin, "default", &cm).await;
        assert_eq!(stored.len(), 1, "{stored:?}");
        assert_eq!(stored[0].involved_object, object);
        p.shutdown(Duration::from_secs(10)).await;
        let described = kubectl(
            &server.admin_kubeconfig,
            &["-n", "default", "describe", "configmap", &cm],
        );
        let line = described
            .lines()
            .find(|l| l.contains("Synced"))
            .unwrap_or_else(|| panic!("no event in kubectl describe:\n{described}"));
        assert!(line.contains("(x5 over"), "{line}");
        assert!(
            line.contains("kevents-test") && line.contains("hello"),
            "{line}"
        );
        eprintln!("kubectl describe: {}", line.trim());
    });
}

/// Workload `api` through the pipeline to kube-apiserver, then its counts checked.
fn api_workload_run() {
    let server = start();
    kubectl(&server.admin_kubeconfig, &["create", "namespace", "bench"]);
    actix::System::new().block_on(async {
        let admin = sink(&server.admin_kubeconfig).await;
        let p = pipeline(&admin, 64);
        let r = p.recorder();
        let w = Workload::API;
        for i in 0..w.n {
            let o = w.occurrence(i, EventType::Warning);
            assert!(
                r.event(&o.object, EventType::Warning, &o.reason, &o.message)
                    .unwrap()
                    .is_queued()
            );
        }
        let s = settle(&p).await;
        let report = p.shutdown(Duration::from_secs(10)).await;
        assert!(report.completed);
        assert_eq!(s.spam_filtered, 500, "{s:?}");
        assert_eq!((s.created, s.patched, s.failed()), (600, 1_900, 0), "{s:?}");
        let stored = admin.requests().list_events("bench").await.unwrap();
        let sum: i64 = stored.iter().map(|e| i64::from(e.count)).sum();
        eprintln!(
            "api workload: {} stored, count sum {sum}, {} attempts",
            stored.len(),
            s.attempts
        );
        assert_eq!(stored.len(), 600);
        assert_eq!(sum, 2_500);
    });
}

fn burst_run() {
    let server = start();
    let ns = unique("burst");
    kubectl(&server.admin_kubeconfig, &["create", "namespace", &ns]);
    actix::System::new().block_on(async {
        let admin = sink(&server.admin_kubeconfig).await;
        let p = Pipeline::builder(EventSource::new("kevents-test", "node-1"))
            .intake(IntakePolicy::CoalesceIfFull {
                capacity: 8,
                overflow: kevents_actors::DEFAULT_OVERFLOW_ENTRIES,
            })
            .sink(
                "apiserver",
                admin.clone(),
                SinkOptions {
                    delivery: WatcherPolicy::CoalesceIfFull {
                        capacity: 8,
                        overflow: kevents_actors::DEFAULT_OVERFLOW_ENTRIES,
                    },
                    ..SinkOptions::default()
                },
            )
            .start();
        let r = p.recorder();
        let pods: Vec<ObjectReference> = (0..50)
            .map(|i| {
                ObjectReference::new("v1", "Pod", &ns, format!("pod-{i}"))
                    .with_uid(format!("uid-{i}"))
            })
            .collect();
        for _ in 0..20 {
            for pod in &pods {
                assert!(
                    r.event(pod, EventType::Warning, "BackOff", "restarting")
                        .unwrap()
                        .is_queued()
                );
            }
        }
        let report = p.shutdown(Duration::from_secs(60)).await;
        assert!(report.completed, "{report:?}");
        let s = &report.stats;
        s.check_sinks().unwrap();
        assert_eq!(s.dropped_total(), 0, "{s:?}");
        assert!(
            s.intake_coalesced > 0,
            "the burst overflowed and merged: {s:?}"
        );
        let k = s.sink("apiserver").unwrap();
        assert!(
            k.attempts < 1000,
            "{} writes for 1 000 occurrences: {k:?}",
            k.attempts
        );
        let listed: serde_json::Value = serde_json::from_str(&kubectl(
            &server.admin_kubeconfig,
            &["get", "events", "-n", &ns, "-o", "json"],
        ))
        .unwrap();
        let items = listed["items"].as_array().unwrap();
        assert_eq!(items.len(), 50, "{listed}");
        assert!(
            items.iter().all(|e| e["count"] == 20),
            "every event holds its 20 occurrences: {:?}",
            items.iter().map(|e| &e["count"]).collect::<Vec<_>>()
        );
        eprintln!(
            "burst of 1 000 repeats of 50 events: {} writes, exact counts",
            k.attempts
        );
    });
}
