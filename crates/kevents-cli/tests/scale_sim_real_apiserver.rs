//! The scale simulator (`kevents_sim::scale::ScaleSim`) checked against a real
//! kube-apiserver (v1.20.2, or 1.36/1.37 with `KEVENTS_K8S_VERSION`): the same writes
//! (create, counts raised by PATCH and by PUT, delete) on both, then what each serves
//! compared: the watch events of both APIs (types, names, counts, order, a bookmark before
//! the timeout), the pages of a paged list read across writes (the continue token reads the
//! first page's resourceVersion), a continue token and a watch from before a compaction
//! (410 Expired, and in which form: an HTTP status or an ERROR line), and the relist
//! kevents' watcher makes after that 410.
//!
//! ```text
//! KEVENTS_REQUIRE_APISERVER=1 cargo test -p kevents-cli --test scale_sim_real_apiserver
//! KEVENTS_K8S_VERSION=1.37 KEVENTS_REQUIRE_APISERVER=1 cargo test -p kevents-cli --test scale_sim_real_apiserver
//! ```

use std::time::Duration;

use kevents_core::request::StreamTransport as _;
use kevents_core::request::{APPLICATION_JSON, Method, STRATEGIC_MERGE_PATCH, StreamRequest};
use kevents_core::{Clock as _, SystemClock};
use kevents_http::{HttpConfig, HttpSink};
use kevents_runtime::watcher::{WatchConfig, WatchEvent, Watcher};
use kevents_sim::scale::{EventId, NewEvent, ScaleConfig, ScaleSim};
use serde_json::{Value, json};

const NS: &str = "cmp";

/// Where the writes go: the real apiserver over HTTP, or the simulator's calls.
enum Writes<'a> {
    Real(&'a HttpSink, String),
    Sim(&'a ScaleSim),
}

fn name(object: &str, i: u64) -> String {
    format!("{object}.{i:016x}")
}

async fn send(
    sink: &HttpSink,
    method: Method,
    path: &str,
    ct: Option<&'static str>,
    body: Value,
) -> (u16, Value) {
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    let a = sink
        .requests()
        .send(method, path.to_owned(), ct, body, 64 << 20)
        .await
        .expect("request");
    (
        a.code,
        serde_json::from_slice(&a.body).unwrap_or(Value::Null),
    )
}

impl Writes<'_> {
    async fn create(&self, object: &str, i: u64) {
        match self {
            Writes::Sim(sim) => {
                sim.create(&NewEvent::pod(NS, object, i, "Cmp", "compared"))
                    .expect("sim create");
            }
            Writes::Real(sink, _) => {
                let t = SystemClock.now().to_rfc3339();
                let body = json!({"apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": name(object, i), "namespace": NS},
                    "involvedObject": {"kind": "Pod", "namespace": NS, "name": object},
                    "reason": "Cmp", "message": "compared", "type": "Normal", "count": 1,
                    "firstTimestamp": t, "lastTimestamp": t, "source": {"component": "kubelet"}});
                let (code, v) = send(
                    sink,
                    Method::Post,
                    &format!("/api/v1/namespaces/{NS}/events"),
                    Some(APPLICATION_JSON),
                    body,
                )
                .await;
                assert_eq!(code, 201, "{v}");
            }
        }
    }

    fn sim_id(sim: &ScaleSim, object: &str, i: u64) -> EventId {
        sim.find(NS, &name(object, i)).expect("a live sim event")
    }

    /// Raises by one, by PATCH (`put`: by GET then PUT of the whole object).
    async fn raise(&self, object: &str, i: u64, put: bool) {
        match self {
            Writes::Sim(sim) => {
                sim.raise(Self::sim_id(sim, object, i), 1)
                    .expect("sim raise");
            }
            Writes::Real(sink, _) => {
                let path = format!("/api/v1/namespaces/{NS}/events/{}", name(object, i));
                let (code, mut ev) = send(sink, Method::Get, &path, None, Value::Null).await;
                assert_eq!(code, 200);
                let count = ev["count"].as_u64().expect("count") + 1;
                let t = SystemClock.now().to_rfc3339();
                let (code, v) = if put {
                    ev["count"] = json!(count);
                    ev["lastTimestamp"] = json!(t);
                    send(sink, Method::Put, &path, Some(APPLICATION_JSON), ev).await
                } else {
                    send(
                        sink,
                        Method::Patch,
                        &path,
                        Some(STRATEGIC_MERGE_PATCH),
                        json!({"count": count, "lastTimestamp": t}),
                    )
                    .await
                };
                assert_eq!(code, 200, "{v}");
            }
        }
    }

    async fn delete(&self, object: &str, i: u64) {
        match self {
            Writes::Sim(sim) => sim
                .delete(Self::sim_id(sim, object, i))
                .expect("sim delete"),
            Writes::Real(sink, _) => {
                let path = format!("/api/v1/namespaces/{NS}/events/{}", name(object, i));
                let (code, v) = send(sink, Method::Delete, &path, None, Value::Null).await;
                assert_eq!(code, 200, "{v}");
            }
        }
    }

    /// Compacts the history up to the newest revision (etcd's compaction through its
    /// gateway; the simulator's window).
    async fn compact(&self) {
        match self {
            Writes::Sim(sim) => sim.compact(sim.resource_version()),
            Writes::Real(_, etcd) => {
                let out = std::process::Command::new("curl")
                    .args([
                        "-fsS",
                        "-X",
                        "POST",
                        &format!("{etcd}/v3/kv/range"),
                        "-d",
                        r#"{"key":"AA=="}"#,
                    ])
                    .output()
                    .expect("curl");
                let head: Value = serde_json::from_slice(&out.stdout).expect("etcd range answer");
                let rev = head["header"]["revision"]
                    .as_str()
                    .expect("etcd revision")
                    .to_owned();
                let out = std::process::Command::new("curl")
                    .args([
                        "-fsS",
                        "-X",
                        "POST",
                        &format!("{etcd}/v3/kv/compaction"),
                        "-d",
                        &format!(r#"{{"revision":"{rev}","physical":true}}"#),
                    ])
                    .output()
                    .expect("curl");
                assert!(
                    out.status.success(),
                    "etcd compaction: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// A watch event as compared: type, name, count (core `count` or `deprecatedCount`).
fn summary(line: &Value) -> (String, String, u64) {
    let o = &line["object"];
    let count = o["count"]
        .as_u64()
        .or(o["deprecatedCount"].as_u64())
        .unwrap_or(0);
    (
        line["type"].as_str().unwrap_or("").to_owned(),
        o["metadata"]["name"].as_str().unwrap_or("").to_owned(),
        count,
    )
}

/// The lines of a watch until it ends (its timeout) or `max` lines: the HTTP status and
/// the lines.
async fn watch_lines(sink: &HttpSink, path: &str, max: usize) -> (u16, Vec<Value>) {
    let mut lines = sink
        .open_lines(StreamRequest {
            path: path.to_owned(),
            timeout: Duration::from_secs(30),
            max_line_bytes: 1 << 20,
        })
        .await
        .expect("watch");
    let status = lines.status();
    let mut out = Vec::new();
    while out.len() < max {
        match tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await {
            Ok(Ok(Some(l))) => out.push(serde_json::from_slice(&l).unwrap_or(Value::Null)),
            _ => break,
        }
    }
    (status, out)
}

/// What one server served for the scenario, to compare.
#[derive(Debug, PartialEq)]
struct Seen {
    core_watch: Vec<(String, String, u64)>,
    events_v1_watch: Vec<(String, String, u64)>,
    bookmarks: usize,
    page1: Vec<(String, u64)>,
    page2: Vec<(String, u64)>,
    page2_same_rv: bool,
    page1_continues: bool,
    page2_continues: bool,
    continue_after_compaction: (u16, String),
    watch_after_compaction: (u16, Option<(u64, String)>),
    relist: Vec<String>,
}

fn items(list: &Value) -> Vec<(String, u64)> {
    list["items"].as_array().map_or(Vec::new(), |a| {
        a.iter()
            .map(|o| {
                (
                    o["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                    o["count"]
                        .as_u64()
                        .or(o["deprecatedCount"].as_u64())
                        .unwrap_or(0),
                )
            })
            .collect()
    })
}

async fn scenario(sink: &HttpSink, w: &Writes<'_>) -> Seen {
    let base = format!("/api/v1/namespaces/{NS}/events");
    let base_v1 = format!("/apis/events.k8s.io/v1/namespaces/{NS}/events");
    let (code, list) = send(sink, Method::Get, &base, None, Value::Null).await;
    assert_eq!(code, 200, "{list}");
    let rv0 = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("list rv")
        .to_owned();
    // Watches of both APIs from the list, 6 s long (a bookmark 2 s before the end).
    let q = format!("?watch=1&resourceVersion={rv0}&allowWatchBookmarks=true&timeoutSeconds=6");
    let (core, v1) = {
        let (core_path, v1_path) = (format!("{base}{q}"), format!("{base_v1}{q}"));
        let core = watch_lines(sink, &core_path, 64);
        let v1 = watch_lines(sink, &v1_path, 64);
        let writes = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            w.create("a", 1).await;
            w.create("b", 2).await;
            w.create("c", 3).await;
            w.raise("a", 1, false).await;
            w.raise("b", 2, true).await;
            w.raise("b", 2, false).await;
            w.delete("c", 3).await;
            w.create("d", 4).await;
        };
        let (core, v1, ()) = tokio::join!(core, v1, writes);
        (core, v1)
    };
    assert_eq!(core.0, 200);
    let bookmarks = core
        .1
        .iter()
        .chain(&v1.1)
        .filter(|l| l["type"] == "BOOKMARK")
        .count();
    let no_bookmarks = |lines: &[Value]| {
        lines
            .iter()
            .filter(|l| l["type"] != "BOOKMARK")
            .map(summary)
            .collect::<Vec<_>>()
    };
    // Resource versions increase along the watch.
    let rvs: Vec<u64> = core
        .1
        .iter()
        .filter(|l| l["type"] != "BOOKMARK")
        .map(|l| {
            l["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("0")
                .parse()
                .unwrap_or(0)
        })
        .collect();
    assert!(rvs.windows(2).all(|p| p[0] < p[1]), "{rvs:?}");
    // A paged list read across writes.
    let (code, page1) = send(
        sink,
        Method::Get,
        &format!("{base}?limit=2"),
        None,
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{page1}");
    let token = page1["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    w.raise("a", 1, false).await;
    w.create("e", 5).await;
    let (code, page2) = send(
        sink,
        Method::Get,
        &format!(
            "{base}?limit=2&continue={}",
            kevents_core::request::encode_segment(&token)
        ),
        None,
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{page2}");
    // A continue token and a watch from before a compaction.
    let (code, first) = send(
        sink,
        Method::Get,
        &format!("{base}?limit=1"),
        None,
        Value::Null,
    )
    .await;
    assert_eq!(code, 200, "{first}");
    let old_token = first["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let old_rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    w.raise("d", 4, false).await;
    w.raise("d", 4, true).await;
    w.compact().await;
    w.raise("e", 5, false).await;
    let (code, expired) = send(
        sink,
        Method::Get,
        &format!(
            "{base}?limit=1&continue={}",
            kevents_core::request::encode_segment(&old_token)
        ),
        None,
        Value::Null,
    )
    .await;
    let continue_after_compaction = (code, expired["reason"].as_str().unwrap_or("").to_owned());
    let (status, lines) = watch_lines(
        sink,
        &format!(
            "{base}?watch=1&resourceVersion={old_rv}&allowWatchBookmarks=true&timeoutSeconds=3"
        ),
        1,
    )
    .await;
    let error = lines.first().filter(|l| l["type"] == "ERROR").map(|l| {
        (
            l["object"]["code"].as_u64().unwrap_or(0),
            l["object"]["reason"].as_str().unwrap_or("").to_owned(),
        )
    });
    // kevents' watcher from that resourceVersion: 410, then a relist.
    let config = WatchConfig::new(base.clone())
        .with_page_size(2)
        .with_watch_timeout(Duration::from_secs(5));
    let mut watcher = Watcher::new(sink.clone(), config, Some(old_rv));
    let mut relist = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ev = tokio::time::timeout_at(deadline, watcher.next())
            .await
            .expect("the watcher relists in time");
        match ev {
            WatchEvent::ListStart { relist: r } => relist.push(format!("list-start relist={r}")),
            WatchEvent::Listed(o) => relist.push(format!(
                "listed {} {}",
                o["metadata"]["name"].as_str().unwrap_or(""),
                o["count"]
            )),
            WatchEvent::ListEnd { .. } => {
                relist.push("list-end".into());
                break;
            }
            WatchEvent::Applied { object, .. } => relist.push(format!(
                "applied {}",
                object["metadata"]["name"].as_str().unwrap_or("")
            )),
            WatchEvent::Failed { .. } | WatchEvent::Restarted => {}
            other => relist.push(format!("{other:?}").chars().take(40).collect()),
        }
    }
    Seen {
        core_watch: no_bookmarks(&core.1),
        events_v1_watch: no_bookmarks(&v1.1),
        bookmarks,
        page1: items(&page1),
        page2: items(&page2),
        page2_same_rv: page1["metadata"]["resourceVersion"] == page2["metadata"]["resourceVersion"],
        page1_continues: !token.is_empty(),
        page2_continues: page2["metadata"]["continue"]
            .as_str()
            .is_some_and(|c| !c.is_empty()),
        continue_after_compaction,
        watch_after_compaction: (status, error),
        relist,
    }
}

fn env_value(dir: &std::path::Path, key: &str) -> String {
    let text = std::fs::read_to_string(dir.join("env")).expect("start.sh's env file");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(|v| v.trim_matches('\'').to_owned())
        .expect("ETCD_URL in the env file")
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn the_scale_simulator_serves_what_kube_apiserver_serves() {
        let server = kevents_testkit::RealApiserver::start()
            .expect("starting kube-apiserver")
            .expect("kube-apiserver is provisioned");
        let etcd = env_value(&server.state_dir(), "ETCD_URL");
        let sim = ScaleSim::start(ScaleConfig::default()).expect("scale sim");
        // Other events elsewhere, which the namespace's lists and watches must not show.
        sim.preload(50, 5);
        let dir = tempfile::tempdir().expect("tempdir");
        let sim_kubeconfig = dir.path().join("sim.kubeconfig");
        std::fs::write(&sim_kubeconfig, sim.kubeconfig(NS)).expect("kubeconfig");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let real = HttpSink::new(HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None).await.expect("config")).expect("sink");
            let (code, v) = send(&real, Method::Post, "/api/v1/namespaces", Some(APPLICATION_JSON), json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})).await;
            assert_eq!(code, 201, "{v}");
            let simc = HttpSink::new(HttpConfig::from_kubeconfig(Some(&sim_kubeconfig), None).await.expect("config")).expect("sink");
            let real_seen = scenario(&real, &Writes::Real(&real, etcd)).await;
            let sim_seen = scenario(&simc, &Writes::Sim(&sim)).await;
            eprintln!("{} served: {real_seen:#?}", server.version);
            // What the scenario expects of a server, checked on the real one first.
            let n = |o: &str, i| name(o, i);
            let expected: Vec<(String, String, u64)> = [
                ("ADDED", n("a", 1), 1), ("ADDED", n("b", 2), 1), ("ADDED", n("c", 3), 1),
                ("MODIFIED", n("a", 1), 2), ("MODIFIED", n("b", 2), 2), ("MODIFIED", n("b", 2), 3),
                ("DELETED", n("c", 3), 1), ("ADDED", n("d", 4), 1),
            ].into_iter().map(|(t, n, c)| (t.to_owned(), n, c)).collect();
            assert_eq!(real_seen.core_watch, expected);
            assert_eq!(real_seen.events_v1_watch, expected);
            assert_eq!(real_seen.page1, vec![(n("a", 1), 2), (n("b", 2), 3)]);
            assert_eq!(real_seen.page2, vec![(n("d", 4), 1)], "the continue reads the first page's resourceVersion");
            assert_eq!(real_seen.continue_after_compaction, (410, "Expired".to_owned()));
            assert_eq!(real_seen.watch_after_compaction, (200, Some((410, "Expired".to_owned()))));
            assert_eq!(real_seen.bookmarks, 0, "events are watched from etcd: no bookmarks");
            assert_eq!(real_seen.relist.first().map(String::as_str), Some("list-start relist=true"));
            // The simulator serves the same.
            assert_eq!(sim_seen, real_seen);
        });
    }
}
