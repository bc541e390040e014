//! The completeness counters against a real kube-apiserver: an export started after events
//! already had counts counts their occurrences as `before_start`; an event deleted before its
//! last count was read (known to the resume point, absent from the list) is counted as
//! `deleted_unread`; an event deleted while watched is exported with its last count first.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::{Collected, real, send};
use kevents_core::request::{APPLICATION_JSON, Method, STRATEGIC_MERGE_PATCH};
use kevents_export::{ExportConfig, ExportRecord, MemoryResume, ResumePoint};
use kevents_http::HttpSink;
use serde_json::json;

async fn create(admin: &HttpSink, ns: &str, name: &str, count: u64) {
    send(
        admin,
        Method::Post,
        format!("/api/v1/namespaces/{ns}/events"),
        APPLICATION_JSON,
        json!({"metadata": {"name": name, "namespace": ns},
               "involvedObject": {"kind": "Pod", "namespace": ns, "name": "p"},
               "reason": "R", "message": "m", "type": "Normal", "count": count,
               "source": {"component": "writer"}}),
    )
    .await;
}

/// Runs the export until `done` says the records suffice (at most 30 s); its stats.
async fn run_until(
    admin: &HttpSink,
    ns: &str,
    store: MemoryResume,
    sink: Collected,
    during: impl std::future::Future<Output = ()>,
    done: impl Fn(&[ExportRecord]) -> bool,
) -> kevents_export::ExportStats {
    let config = ExportConfig {
        namespaces: vec![ns.to_owned()],
        ..ExportConfig::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = kevents_export::run(admin.clone(), config, sink.clone(), store, async {
        let _ = stopped.await;
    });
    let watch = async {
        during.await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done(&sink.0.lock().expect("lock")) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = stop.send(());
    };
    let (stats, ()) = tokio::join!(run, watch);
    stats.expect("the run ends cleanly")
}

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn before_start_and_deleted_unread_are_counted_by_cause() {
        let t = real().await;
        let ns = "completeness";
        t.real_apiserver().expect("real").create_namespace(ns).expect("namespace");
        let admin = t.admin.clone();
        // Events with counts before any export: 3 + 5 + 1 occurrences.
        for (name, count) in [("c-a", 3), ("c-b", 5), ("c-c", 1)] {
            create(&admin, ns, name, count).await;
        }
        // A resume point that knows an event since deleted (its uid is not listed).
        let mut point = ResumePoint::default();
        point.counts.insert("00000000-dead-dead-dead-000000000000", 4, ns);
        let store = MemoryResume::from_point(point);
        let sink = Collected::default();
        let stats = run_until(&admin, ns, store.clone(), sink.clone(), async {}, |r| r.len() >= 3).await;
        assert_eq!(stats.incomplete.before_start, 9, "{stats:?}");
        assert_eq!(stats.incomplete.deleted_unread, 1, "{stats:?}");
        assert_eq!(stats.incomplete.watch_gap, 0, "{stats:?}");
        assert_eq!(stats.occurrences, 9);

        // Started again from its resume point: nothing before its start any more; an event
        // raised and deleted while watched is exported with its last count first.
        let sink = Collected::default();
        let during = async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            send(&admin, Method::Patch, format!("/api/v1/namespaces/{ns}/events/c-b"),
                STRATEGIC_MERGE_PATCH, json!({"count": 8})).await;
            send(&admin, Method::Delete, format!("/api/v1/namespaces/{ns}/events/c-b"),
                APPLICATION_JSON, json!({})).await;
        };
        let stats = run_until(&admin, ns, store, sink.clone(), during, |r| r.iter().any(|r| r.count == 8)).await;
        assert!(stats.incomplete.is_exact(), "{stats:?}");
        let records = sink.0.lock().expect("lock").clone();
        let keys: HashMap<String, u64> = records.iter().map(|r| (r.name.clone(), r.delta)).collect();
        assert_eq!(keys.get("c-b"), Some(&3), "the last 3 occurrences of c-b: {records:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_quiet_namespace_is_no_failure() {
        // Hostile round 5: a watch of a namespace where nothing happens sends no line until
        // the apiserver ends it at its timeoutSeconds (1.20 sends no bookmark before then).
        // Silence is allowed up to timeoutSeconds plus the idle margin; a per-line idle
        // deadline counted a failure every idle period on a healthy cluster.
        let t = real().await;
        let ns = "quiet";
        t.real_apiserver().expect("real").create_namespace(ns).expect("namespace");
        let config = ExportConfig {
            namespaces: vec![ns.to_owned()],
            watch_timeout: Duration::from_secs(6),
            idle_timeout: Duration::from_secs(2),
            ..ExportConfig::default()
        };
        let stats = kevents_export::run(
            t.admin.clone(),
            config,
            Collected::default(),
            MemoryResume::default(),
            tokio::time::sleep(Duration::from_secs(15)),
        )
        .await
        .expect("the run ends cleanly");
        assert_eq!(stats.failures, 0, "silence within timeoutSeconds is no failure: {stats:?}");
        assert!(stats.watch_restarts >= 1, "the server ended its 6 s watches: {stats:?}");
        assert_eq!(stats.records, 0);
    }
}
