//! `kevents history` against what a real kube-apiserver stores: an external writer (plain
//! HTTP requests) creates core/v1 and events.k8s.io/v1 events in two namespaces and raises
//! their counts, `kevents export` exports them into a real JetStream `nats-server` until the
//! stream holds every stored count, and `kevents history -o json` must give every stored
//! event with its stored count and, over a window, exactly the occurrences written inside it
//! (read back from the apiserver). `--follow` must print a new occurrence as it is exported.
//! And the usage errors and connection failures, without any server.

use std::collections::HashMap;
use std::io::BufRead as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kevents_core::request::{APPLICATION_JSON, Method, STRATEGIC_MERGE_PATCH};
use kevents_core::{Clock, SystemClock};
use kevents_export::{ExportRecord, JetStream, JetStreamConfig};
use kevents_http::{HttpConfig, HttpSink};
use kevents_testkit::nats::NatsServer;
use serde_json::{Value, json};

const NAMESPACES: [&str; 2] = ["default", "kube-public"];

fn now(micros: bool) -> String {
    let t = SystemClock.now();
    if micros {
        t.to_rfc3339_micros()
    } else {
        t.to_rfc3339()
    }
}

/// Plain requests, as any program writes events: (namespace, name, core/v1?) -> count.
struct Writer {
    sink: HttpSink,
    counts: HashMap<(String, String, bool), u64>,
}

impl Writer {
    async fn create(&mut self, ns: &str, i: usize, core: bool) {
        let name = format!("hist-{}-{i}", if core { "core" } else { "v1" });
        let regarding = json!({"kind": "Pod", "namespace": ns, "name": format!("pod-{i}"),
                               "uid": format!("00000000-0000-0000-0000-{i:012}")});
        let (path, body) = if core {
            (
                format!("/api/v1/namespaces/{ns}/events"),
                json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": name, "namespace": ns},
                "involvedObject": regarding, "reason": "HistoryCore", "message": "from curl",
                "type": "Warning", "count": 1, "firstTimestamp": now(false),
                "lastTimestamp": now(false), "source": {"component": "external-writer"}}),
            )
        } else {
            (
                format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"),
                json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": name, "namespace": ns}, "eventTime": now(true),
                "regarding": regarding, "reason": "HistoryV1", "note": "from curl",
                "type": "Normal", "action": "Probe", "reportingController": "example.com/writer",
                "reportingInstance": "writer-1"}),
            )
        };
        kevents_testkit::send_json(&self.sink, Method::Post, path, APPLICATION_JSON, &body).await;
        self.counts.insert((ns.to_owned(), name, core), 1);
    }

    async fn raise(&mut self, ns: &str, name: &str, core: bool, add: u64) {
        let key = (ns.to_owned(), name.to_owned(), core);
        let count = self.counts[&key] + add;
        let (path, body) = if core {
            (
                format!("/api/v1/namespaces/{ns}/events/{name}"),
                json!({"count": count, "lastTimestamp": now(false)}),
            )
        } else {
            (
                format!("/apis/events.k8s.io/v1/namespaces/{ns}/events/{name}"),
                json!({"series": {"count": count, "lastObservedTime": now(true)}}),
            )
        };
        kevents_testkit::send_json(
            &self.sink,
            Method::Patch,
            path,
            STRATEGIC_MERGE_PATCH,
            &body,
        )
        .await;
        self.counts.insert(key, count);
    }

    /// Raises every event's count by 1..=3.
    async fn raise_all(&mut self, round: u64) {
        let keys: Vec<_> = self.counts.keys().cloned().collect();
        for (i, (ns, name, core)) in keys.into_iter().enumerate() {
            self.raise(&ns, &name, core, (i as u64 + round) % 3 + 1)
                .await;
        }
    }
}

/// Every stored event of the namespaces, read back: uid -> its record as the export makes it.
async fn stored(sink: &HttpSink) -> HashMap<String, ExportRecord> {
    let mut out = HashMap::new();
    for ns in NAMESPACES {
        let body = sink
            .requests()
            .get(&format!("/api/v1/namespaces/{ns}/events"), 64 << 20)
            .await
            .expect("listing events");
        let list: Value = serde_json::from_slice(&body).expect("a list");
        for item in list["items"].as_array().expect("items") {
            let r = ExportRecord::from_object(kevents_export::Api::CoreV1, item).expect("uid");
            if r.name.starts_with("hist-") {
                out.insert(r.uid.clone(), r);
            }
        }
    }
    out
}

/// Waits until every stored event's last record in the stream carries its stored count.
async fn caught_up(sink: &HttpSink, nats: &str) -> HashMap<String, ExportRecord> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let client = kevents_export::async_nats::connect(nats)
            .await
            .expect("NATS");
        let js = JetStream::open(client, JetStreamConfig::new("export"))
            .await
            .expect("stream");
        let records = kevents_export::jetstream::read_all(js.context(), "export")
            .await
            .expect("reading the stream");
        let mut last: HashMap<&str, u64> = HashMap::new();
        for (_, r) in &records {
            last.insert(&r.uid, r.count);
        }
        let stored = stored(sink).await;
        let behind: Vec<_> = stored
            .values()
            .filter(|r| last.get(r.uid.as_str()) != Some(&r.count))
            .map(|r| (&r.name, r.count, last.get(r.uid.as_str())))
            .collect();
        if behind.is_empty() {
            return stored;
        }
        assert!(
            Instant::now() < deadline,
            "the export did not catch up in 60 s: {behind:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn kevents(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("history")
        .args(args)
        .output()
        .expect("running kevents history")
}

/// `kevents history ... -o json`: uid -> the line's object.
fn history_json(nats: &str, extra: &[&str]) -> HashMap<String, Value> {
    let mut args = vec!["--nats", nats, "--stream", "export", "-o", "json"];
    args.extend_from_slice(extra);
    let out = kevents(&args);
    assert!(
        out.status.success(),
        "kevents history {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let mut events = HashMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("a JSON line");
        for field in [
            "uid",
            "namespace",
            "regarding",
            "reason",
            "count",
            "occurrences",
        ] {
            assert!(v.get(field).is_some(), "{field} missing from {line}");
        }
        let uid = v["uid"].as_str().expect("uid").to_owned();
        assert!(events.insert(uid, v).is_none(), "an event twice: {text}");
    }
    events
}

fn spawn_export(kubeconfig: &Path, nats: &str, log: &Path) -> Child {
    let log = std::fs::File::create(log).expect("log file");
    Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("export")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", NAMESPACES[0], "--namespace", NAMESPACES[1]])
        .args(["--nats", nats, "--stream", "export", "--progress", "0"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("running kevents export")
}

fn sigterm(child: &Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn history_agrees_with_the_apiserver_counts_and_windows_and_follows() {
        let server = kevents_testkit::RealApiserver::start()
            .expect("starting kube-apiserver")
            .expect("kube-apiserver is provisioned");
        let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let url = nats.url();
        let logdir = tempfile::tempdir().expect("temporary directory");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let sink = HttpSink::new(
                HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None)
                    .await
                    .expect("config"),
            )
            .expect("sink");
            let mut writer = Writer { sink: sink.clone(), counts: HashMap::new() };
            for ns in NAMESPACES {
                for i in 0..4 {
                    writer.create(ns, i, true).await;
                    writer.create(ns, i, false).await;
                }
            }
            let mut export = spawn_export(&server.admin_kubeconfig, &url, &logdir.path().join("export.log"));
            writer.raise_all(1).await;
            writer.raise_all(2).await;
            let before = caught_up(&sink, &url).await;
            assert_eq!(before.len(), 16, "{before:?}");

            // The whole history: every stored event, its stored count, all its occurrences.
            let all = history_json(&url, &["--since", "1h"]);
            assert_eq!(all.len(), before.len(), "{all:?}");
            for (uid, r) in &before {
                let e = &all[uid];
                assert_eq!(e["count"], r.count, "{} {e}", r.name);
                assert_eq!(e["occurrences"], r.count, "{} {e}", r.name);
                assert_eq!(e["namespace"], r.namespace.as_str());
                assert_eq!(e["regarding"]["name"], r.regarding.name.as_str());
                assert_eq!(e["reason"], r.reason.as_str());
            }

            // A window: only the occurrences written inside it. core/v1 times have whole
            // seconds; the window starts more than a second after the last write before it.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let mid = now(true);
            tokio::time::sleep(Duration::from_millis(1500)).await;
            writer.raise_all(3).await;
            writer.raise(NAMESPACES[0], "hist-core-1", true, 5).await;
            let after = caught_up(&sink, &url).await;
            let window = history_json(&url, &["--from", &mid]);
            assert_eq!(window.len(), after.len(), "every event was raised: {window:?}");
            for (uid, r) in &after {
                let e = &window[uid];
                assert_eq!(e["count"], r.count, "{} {e}", r.name);
                assert_eq!(e["occurrences"], r.count - before[uid].count, "{} {e}", r.name);
            }
            // --from/--to before the raise: the earlier counts and all their occurrences.
            let earlier = history_json(&url, &["--from", "2000-01-01T00:00:00Z", "--to", &mid]);
            for (uid, r) in &before {
                assert_eq!(earlier[uid]["count"], r.count, "{}", r.name);
                assert_eq!(earlier[uid]["occurrences"], r.count, "{}", r.name);
            }

            // Filters: a namespace, an object, a reason.
            let ns = history_json(&url, &["-n", NAMESPACES[1]]);
            assert_eq!(ns.len(), 8);
            assert!(ns.values().all(|e| e["namespace"] == NAMESPACES[1]));
            let pod = history_json(&url, &["-n", NAMESPACES[0], "--for", "pod/pod-1"]);
            assert_eq!(pod.len(), 2, "core and v1 events of pod-1: {pod:?}");
            for (uid, e) in &pod {
                assert_eq!(e["regarding"]["name"], "pod-1");
                assert_eq!(e["count"], after[uid].count);
                assert_eq!(e["occurrences"], after[uid].count);
            }
            let reason = history_json(&url, &["--reason", "HistoryV1", "--for", "Pods/pod-2"]);
            assert_eq!(reason.len(), 2, "one in each namespace: {reason:?}");
            assert!(reason.values().all(|e| e["reason"] == "HistoryV1"));

            // The table: a header and one line per event, with the occurrences.
            let table = kevents(&["--nats", &url, "--stream", "export", "-n", "default", "--for", "pod/pod-1"]);
            assert!(table.status.success());
            let text = String::from_utf8(table.stdout).expect("UTF-8");
            let lines: Vec<&str> = text.lines().collect();
            assert!(lines[0].starts_with("LAST SEEN") && lines[0].contains("OCCURRENCES"), "{text}");
            assert_eq!(lines.len(), 3, "{text}");
            let core1 = after.values().find(|r| r.name == "hist-core-1" && r.namespace == "default").expect("hist-core-1");
            assert!(text.lines().any(|l| l.contains("HistoryCore") && l.contains(&format!(" {} ", core1.count))), "{text}");
            let wide = kevents(&["--nats", &url, "--stream", "export", "-o", "wide", "--reason", "HistoryCore"]);
            let text = String::from_utf8(wide.stdout).expect("UTF-8");
            assert!(text.contains("NAMESPACE") && text.contains("external-writer"), "{text}");

            // --follow: the window, then the new occurrence as it is exported.
            let mut follow = Command::new(env!("CARGO_BIN_EXE_kevents"))
                .args(["history", "--nats", &url, "--stream", "export", "-o", "json", "--follow", "-n", "default", "--for", "pod/pod-3"])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("kevents history --follow");
            let (tx, rx) = std::sync::mpsc::channel::<String>();
            let stdout = follow.stdout.take().expect("stdout");
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            let line = |wait: Duration| -> Value {
                let l = rx.recv_timeout(wait).expect("a line from --follow");
                serde_json::from_str(&l).expect("JSON")
            };
            let mut initial = HashMap::new();
            for _ in 0..2 {
                let e = line(Duration::from_secs(20));
                initial.insert(e["uid"].as_str().expect("uid").to_owned(), e);
            }
            let core3 = after.values().find(|r| r.name == "hist-core-3" && r.namespace == "default").expect("hist-core-3").clone();
            assert_eq!(initial[&core3.uid]["count"], core3.count);
            writer.raise("default", "hist-core-3", true, 4).await;
            let e = line(Duration::from_secs(30));
            assert_eq!(e["uid"], core3.uid.as_str(), "{e}");
            assert_eq!(e["count"], core3.count + 4, "{e}");
            assert_eq!(e["occurrences"], 4, "the new occurrences: {e}");
            let stored_now = stored(&sink).await;
            assert_eq!(stored_now[&core3.uid].count, core3.count + 4);
            assert!(rx.recv_timeout(Duration::from_millis(500)).is_err(), "only that record");
            sigterm(&follow);
            let status = follow.wait().expect("waiting for --follow");
            assert!(status.success(), "--follow after SIGTERM: {status}");
            sigterm(&export);
            assert!(export.wait().expect("export").success());
        });
    }
}

#[test]
fn usage_errors_exit_2_before_connecting() {
    // Port 1 has no NATS: a usage error must be found first.
    for args in [
        vec!["--since", "1h", "--from", "2026-01-01T00:00:00Z"],
        vec!["--since", "yesterday"],
        vec!["--since", "0s"],
        vec!["--from", "noon"],
        vec!["--to", "2026-01-01T00:00:00Z"],
        vec![
            "--from",
            "2026-01-02T00:00:00Z",
            "--to",
            "2026-01-01T00:00:00Z",
        ],
        vec![
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "2026-01-02T00:00:00Z",
            "--follow",
        ],
        vec!["--for", "pod"],
        vec!["--for", "pod/"],
        vec!["-n", "Not_A_Namespace"],
        vec!["--stream", "a.b"],
        vec!["-o", "yaml"],
    ] {
        let mut all = vec!["--nats", "nats://127.0.0.1:1"];
        all.extend_from_slice(&args);
        let out = kevents(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("cannot connect"), "{args:?}: {stderr}");
    }
}

#[test]
fn an_unreachable_nats_exits_3_as_export_does() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("nats://user:s3cret@127.0.0.1:{port}");
    let out = kevents(&["--nats", &url, "--since", "1h"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot connect to NATS at nats://127.0.0.1:{port}"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
}
