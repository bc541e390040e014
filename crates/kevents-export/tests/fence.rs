//! The fence against a real `nats-server -js` (and, for the run, a real kube-apiserver):
//! a writer deposed while it could not tell lands nothing once the next writer's term began,
//! whatever counts it still holds; and a reader stopped in the middle of its work and
//! started again after the stream's duplicate window (2 s here) stores every record once.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use kevents_core::request::{APPLICATION_JSON, Method, STRATEGIC_MERGE_PATCH};
use kevents_export::{
    ExportConfig, ExportRecord, JetStream, JetStreamConfig, RecordSink, ResumeStore,
};
use kevents_testkit::Target;
use kevents_testkit::nats::NatsServer;
use serde_json::json;

async fn open(url: &str, identity: &str, window: Duration) -> JetStream {
    let client = kevents_export::async_nats::connect(url)
        .await
        .expect("NATS");
    let mut config = JetStreamConfig::new("export");
    config.identity = identity.into();
    config.duplicate_window = window;
    JetStream::open(client, config).await.expect("stream")
}

fn record(uid: &str, count: u64, delta: u64) -> ExportRecord {
    ExportRecord {
        uid: uid.into(),
        namespace: "default".into(),
        name: format!("ev-{uid}"),
        count,
        delta,
        ..Default::default()
    }
}

/// Every record in the stream and the per-uid sums of their deltas.
async fn history(url: &str) -> (Vec<ExportRecord>, HashMap<String, u64>) {
    let js = open(url, "reader", Duration::from_secs(120)).await;
    let all = kevents_export::jetstream::read_all(js.context(), "export")
        .await
        .expect("read");
    let mut sums = HashMap::new();
    for (_, r) in &all {
        *sums.entry(r.uid.clone()).or_default() += r.delta;
    }
    (all.into_iter().map(|(_, r)| r).collect(), sums)
}

// NATS and the apiserver both come from scripts/apiserver/provision.sh: the tests that need
// only NATS are ignored without it as the others are, and fail in CI.
kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deposed_writer_lands_nothing_after_the_next_term_began() {
        let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let url = nats.url();
        // A leads: its term begins, it exports u up to 5.
        let mut a = open(&url, "a", Duration::from_secs(120)).await;
        assert!(a.load().await.expect("A's term").counts.is_empty());
        a.deliver(&record("u", 5, 5))
            .await
            .expect("A stores (u, 5)");
        // A freezes. B takes over: its term begins, it continues from the stream (u at 5).
        let mut b = open(&url, "b", Duration::from_secs(120)).await;
        let point = b.load().await.expect("B's term");
        assert_eq!(point.counts.get("u").map(|c| c.0), Some(5), "B continues from the stream");
        b.deliver(&record("u", 9, 4))
            .await
            .expect("B stores (u, 9)");
        b.deliver(&record("v", 2, 2))
            .await
            .expect("B stores (v, 2)");
        // A thaws, still holding its own counts (u at 5), and exports what its watch had
        // waiting: (u, 7) with a delta of 2 from its stale count, and a new event w.
        let refused = a
            .deliver(&record("u", 7, 2))
            .await
            .expect_err("A is fenced");
        assert!(refused.is_fenced(), "{refused}");
        let refused = a
            .deliver(&record("w", 1, 1))
            .await
            .expect_err("A stays fenced");
        assert!(refused.is_fenced(), "{refused}");
        // What the server stored, read back: B's records only after B's term began.
        let (records, sums) = history(&url).await;
        let keys: Vec<String> = records.iter().map(|r| r.key()).collect();
        assert_eq!(keys, ["u:5", "u:9", "v:2"]);
        assert_eq!((sums["u"], sums["v"]), (9, 2));
        // B goes on writing.
        b.deliver(&record("u", 10, 1)).await.expect("B still leads");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_existing_stream_that_would_drop_records_is_refused_with_what_differs() {
        let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let url = nats.url();
        let client = kevents_export::async_nats::connect(url.as_str())
            .await
            .expect("NATS");
        let context = kevents_export::async_nats::jetstream::new(client.clone());
        context
            .create_stream(kevents_export::async_nats::jetstream::stream::Config {
                name: "export".into(),
                subjects: vec!["export.>".into()],
                max_messages_per_subject: 1,
                ..Default::default()
            })
            .await
            .expect("a stream someone else made");
        let err = JetStream::open(client, JetStreamConfig::new("export"))
            .await
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains("stream \"export\"") && text.contains("max_msgs_per_subject is 1"),
            "{text}"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_deleted_under_a_writer_ends_it_with_a_store_error() {
        let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let url = nats.url();
        let mut a = open(&url, "a", Duration::from_secs(120)).await;
        a.load().await.expect("term");
        a.deliver(&record("u", 1, 1)).await.expect("stored");
        a.context()
            .delete_stream("export")
            .await
            .expect("deleted by someone");
        let err = a.deliver(&record("u", 2, 1)).await.expect_err("refused");
        assert!(
            matches!(err, kevents_export::ExportError::Store(_)),
            "{err:?}"
        );
        assert!(err.to_string().contains("\"export\""), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reader_stopped_mid_work_and_started_after_the_duplicate_window_stores_each_record_once() {
        let t = match Target::real().await {
            Ok(Some(t)) => t,
            Ok(None) => panic!("kube-apiserver is not provisioned"),
            Err(e) => panic!("starting kube-apiserver: {e}"),
        };
        t.real_apiserver().expect("real").create_namespace("fence").expect("namespace");
        let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let url = nats.url();
        let admin = t.admin.clone();
        let send = |method: Method, path: String, ct: &'static str, body: serde_json::Value| {
            let admin = admin.clone();
            async move {
                let a = admin
                    .requests()
                    .send(method, path, Some(ct), body.to_string().into_bytes(), 1 << 20)
                    .await
                    .expect("answer");
                assert!((200..300).contains(&a.code), "{}", String::from_utf8_lossy(&a.body));
            }
        };
        let config = ExportConfig {
            namespaces: vec!["fence".into()],
            ..ExportConfig::default()
        };
        let mut counts: HashMap<String, u64> = HashMap::new();
        for i in 0..20 {
            let name = format!("f-{i}");
            send(Method::Post, "/api/v1/namespaces/fence/events".into(), APPLICATION_JSON,
                json!({"metadata": {"name": name, "namespace": "fence"},
                       "involvedObject": {"kind": "Pod", "namespace": "fence", "name": "p"},
                       "reason": "R", "message": "m", "type": "Normal", "count": 1,
                       "source": {"component": "writer"}})).await;
            counts.insert(name, 1);
        }
        // Runs stopped at once (their future dropped, as a process killed) after a while,
        // each after the 2-second duplicate window of the one before: no record twice.
        for round in 0..4u64 {
            let js = open(&url, &format!("r{round}"), Duration::from_secs(2)).await;
            let run = kevents_export::run(admin.clone(), config.clone(), js.clone(), js, std::future::pending());
            let writes = async {
                for i in 0..20u64 {
                    let name = format!("f-{i}");
                    let count = counts[&name] + 1 + (i + round) % 3;
                    send(Method::Patch, format!("/api/v1/namespaces/fence/events/{name}"),
                        STRATEGIC_MERGE_PATCH, json!({"count": count})).await;
                    counts.insert(name, count);
                }
                tokio::time::sleep(Duration::from_millis(150 + 100 * round)).await;
            };
            tokio::select! {
                r = run => panic!("the run ended: {r:?}"),
                () = writes => {}
            }
            tokio::time::sleep(Duration::from_millis(2500)).await;
        }
        // A last run to the end of the history.
        let js = open(&url, "last", Duration::from_secs(2)).await;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = kevents_export::run(admin.clone(), config, js.clone(), js, async {
            let _ = stopped.await;
        });
        let wait = async {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let (_, sums) = history(&url).await;
                let by_name: HashMap<String, u64> = sums.into_iter().collect();
                let total: u64 = by_name.values().sum();
                if total >= counts.values().sum::<u64>() || Instant::now() > deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let _ = stop.send(());
        };
        let (ran, ()) = tokio::join!(run, wait);
        ran.expect("the last run");
        let (records, sums) = history(&url).await;
        let mut keys = HashSet::new();
        for r in &records {
            assert!(keys.insert(r.key()), "{} stored twice", r.key());
        }
        let stored = admin.requests().list_events("fence").await.expect("list");
        assert_eq!(stored.len(), 20);
        for e in stored {
            let uid = e.metadata.uid.clone();
            assert_eq!(sums.get(&uid).copied(), Some(counts[&e.metadata.name]), "{}", e.metadata.name);
        }
    }
}
