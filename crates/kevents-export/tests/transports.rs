//! kevents-export over both transports against a real kube-apiserver (v1.20.2, and the newest
//! with `KEVENTS_K8S_VERSION`): the same run ([`kevents_export::run`], a memory resume point,
//! records collected in memory) reads through kevents-http's `HttpSink` and through
//! kevents-kube's `KubeSink` over a `kube::Client` built by kube's own loader, while plain
//! requests create core/v1 events and raise their counts. Every event's deltas sum to its
//! stored count and no `(uid, count)` is exported twice.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::{Collected, real, send};
use kevents_core::request::{APPLICATION_JSON, Method, STRATEGIC_MERGE_PATCH, StreamTransport};
use kevents_export::{ExportConfig, MemoryResume};
use kevents_http::HttpSink;
use kevents_testkit::Identity;
use serde_json::json;

/// Writes 6 events in `ns`, raising each to count 1 + 3 over three rounds, while `transport`
/// exports them; checks the exported history against the stored counts.
async fn exports_exactly<T: StreamTransport>(transport: T, admin: &HttpSink, ns: &str) {
    let collected = Collected::default();
    let config = ExportConfig {
        namespaces: vec![ns.to_owned()],
        watch_timeout: Duration::from_secs(30),
        ..ExportConfig::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = kevents_export::run(
        transport,
        config,
        collected.clone(),
        MemoryResume::default(),
        async {
            let _ = stopped.await;
        },
    );
    let writer = async {
        let mut counts: HashMap<String, u64> = HashMap::new();
        for i in 0..6 {
            let name = format!("exp-{i}");
            let body = json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": name, "namespace": ns},
                "involvedObject": {"kind": "Pod", "namespace": ns, "name": format!("pod-{i}")},
                "reason": "External", "message": "written by plain requests", "type": "Normal",
                "count": 1, "source": {"component": "external-writer"}});
            send(
                admin,
                Method::Post,
                format!("/api/v1/namespaces/{ns}/events"),
                APPLICATION_JSON,
                body,
            )
            .await;
            counts.insert(name, 1);
        }
        for round in 0..3 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            for i in 0..6 {
                let name = format!("exp-{i}");
                let count = counts[&name] + 1 + (i + round) as u64 % 2;
                send(
                    admin,
                    Method::Patch,
                    format!("/api/v1/namespaces/{ns}/events/{name}"),
                    STRATEGIC_MERGE_PATCH,
                    json!({"count": count}),
                )
                .await;
                counts.insert(name, count);
            }
        }
        // Until the export has the last count of every event (at most 30 s), then stop it.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let last: HashMap<String, u64> = collected
                .0
                .lock()
                .expect("lock")
                .iter()
                .map(|r| (r.name.clone(), r.count))
                .collect();
            if counts.iter().all(|(name, c)| last.get(name) == Some(c)) || Instant::now() > deadline
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = stop.send(());
        counts
    };
    let (stats, counts) = tokio::join!(run, writer);
    let stats = stats.expect("the run ends cleanly");
    let records = collected.0.lock().expect("lock").clone();
    // What the server stores, read back.
    let stored = admin.requests().list_events(ns).await.expect("list");
    assert_eq!(stored.len(), 6);
    let mut sums: HashMap<String, u64> = HashMap::new();
    let mut keys = HashSet::new();
    for r in &records {
        assert!(keys.insert(r.key()), "{} exported twice", r.key());
        *sums.entry(r.name.clone()).or_default() += r.delta;
    }
    for event in &stored {
        let name = &event.metadata.name;
        assert_eq!(
            u64::from(event.count.unsigned_abs()),
            counts[name],
            "{name} as written"
        );
        assert_eq!(
            sums.get(name).copied(),
            Some(counts[name]),
            "{name}: deltas against its stored count"
        );
    }
    assert_eq!(stats.occurrences, counts.values().sum::<u64>());
}

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_export_over_http_sink_is_exact() {
        let t = real().await;
        t.real_apiserver().expect("real").create_namespace("export-http").expect("namespace");
        exports_exactly(t.admin.clone(), &t.admin, "export-http").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_export_over_kube_sink_is_exact() {
        let t = real().await;
        t.real_apiserver().expect("real").create_namespace("export-kube").expect("namespace");
        let yaml = t.kubeconfig(Identity::Admin).expect("kubeconfig");
        let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).expect("kubeconfig parses");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("kube config");
        let client = kube::Client::try_from(config).expect("kube client");
        exports_exactly(kevents_kube::KubeSink::new(client), &t.admin, "export-kube").await;
    }
}
