//! `kevents export` against a real kube-apiserver and a real JetStream `nats-server`
//! (kevents-testkit's `NatsServer`: Debian's 2.9.10 by default, the 2.15 that
//! `scripts/nats/provision.sh` builds with `KEVENTS_NATS_VERSION=current`; `.ci/run` runs
//! both): an external writer (plain HTTP requests, no kevents recorder) creates core/v1 and
//! events.k8s.io/v1 events in two namespaces and raises their counts; the exporter is killed
//! with SIGKILL and restarted; afterwards every stored event's deltas in the stream sum to its
//! count and no `(uid, count)` appears twice. And a forced 410 Gone (a resume point older than
//! the apiserver's history) relists without loss or duplicate.

mod common;

use common::read_stream;
use std::collections::{HashMap, HashSet};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kevents_core::request::{APPLICATION_JSON, Method, STRATEGIC_MERGE_PATCH};
use kevents_core::{Clock, SystemClock};
use kevents_export::{ExportRecord, JetStream, JetStreamConfig};
use kevents_http::{HttpConfig, HttpSink};
use kevents_testkit::nats::{NatsCluster, NatsServer};
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

/// The external writer: plain requests with JSON bodies, as any other program writes events.
struct Writer {
    sink: HttpSink,
    /// (namespace, name, core/v1?) -> count written.
    counts: HashMap<(String, String, bool), u64>,
}

/// The admin's sink of `server`.
async fn admin_sink(server: &kevents_testkit::RealApiserver) -> HttpSink {
    HttpSink::new(
        HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None)
            .await
            .expect("config"),
    )
    .expect("sink")
}

impl Writer {
    /// A writer that created `n` events of each API in each namespace.
    async fn seeded(sink: &HttpSink, n: usize) -> Writer {
        let mut writer = Writer {
            sink: sink.clone(),
            counts: HashMap::new(),
        };
        for ns in NAMESPACES {
            for i in 0..n {
                writer.create(ns, i, true).await;
                writer.create(ns, i, false).await;
            }
        }
        writer
    }

    async fn request(&self, method: Method, path: String, ct: &'static str, body: Value) {
        kevents_testkit::send_json(&self.sink, method, path, ct, &body).await;
    }

    async fn create(&mut self, ns: &str, i: usize, core: bool) {
        let name = format!("ext-{}-{i}", if core { "core" } else { "v1" });
        let regarding = json!({"kind": "Pod", "namespace": ns, "name": format!("pod-{i}"),
                               "uid": format!("00000000-0000-0000-0000-{i:012}")});
        if core {
            let body = json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": name, "namespace": ns},
                "involvedObject": regarding, "reason": "ExternalCore", "message": "from curl",
                "type": "Warning", "count": 1, "firstTimestamp": now(false),
                "lastTimestamp": now(false), "source": {"component": "external-writer"}});
            self.request(
                Method::Post,
                format!("/api/v1/namespaces/{ns}/events"),
                APPLICATION_JSON,
                body,
            )
            .await;
        } else {
            let body = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": name, "namespace": ns}, "eventTime": now(true),
                "regarding": regarding, "reason": "ExternalV1", "note": "from curl",
                "type": "Normal", "action": "Probe", "reportingController": "example.com/writer",
                "reportingInstance": "writer-1"});
            self.request(
                Method::Post,
                format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"),
                APPLICATION_JSON,
                body,
            )
            .await;
        }
        self.counts.insert((ns.to_owned(), name, core), 1);
    }

    /// Raises every event's count by 1..=3.
    async fn raise_all(&mut self, round: u64) {
        let keys: Vec<_> = self.counts.keys().cloned().collect();
        for (i, (ns, name, core)) in keys.into_iter().enumerate() {
            let add = (i as u64 + round) % 3 + 1;
            let count = self.counts[&(ns.clone(), name.clone(), core)] + add;
            if core {
                let body = json!({"count": count, "lastTimestamp": now(false)});
                self.request(
                    Method::Patch,
                    format!("/api/v1/namespaces/{ns}/events/{name}"),
                    STRATEGIC_MERGE_PATCH,
                    body,
                )
                .await;
            } else {
                let body = json!({"series": {"count": count, "lastObservedTime": now(true)}});
                self.request(
                    Method::Patch,
                    format!("/apis/events.k8s.io/v1/namespaces/{ns}/events/{name}"),
                    STRATEGIC_MERGE_PATCH,
                    body,
                )
                .await;
            }
            self.counts.insert((ns, name, core), count);
        }
    }
}

/// Every stored event of the namespaces: uid -> (count by the record's rule, name, api
/// written through).
async fn stored(sink: &HttpSink) -> HashMap<String, (u64, String)> {
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
            out.insert(r.uid, (r.count, r.name));
        }
    }
    out
}

/// Checks the stream against the stored events; `Err` says what differs.
fn check(
    records: &[(String, ExportRecord)],
    stored: &HashMap<String, (u64, String)>,
) -> Result<(), String> {
    let mut seen = HashSet::new();
    let mut sums: HashMap<&str, u64> = HashMap::new();
    for (subject, r) in records {
        if !seen.insert((r.uid.clone(), r.count)) {
            return Err(format!("({}, {}) appears twice", r.uid, r.count));
        }
        if subject != &format!("export.{}.{}", r.namespace, r.uid) {
            return Err(format!(
                "record of {}/{} on subject {subject}",
                r.namespace, r.uid
            ));
        }
        *sums.entry(&r.uid).or_default() += r.delta;
    }
    for (uid, (count, name)) in stored {
        let sum = sums.get(uid.as_str()).copied().unwrap_or(0);
        if sum != *count {
            return Err(format!(
                "{name} ({uid}): deltas sum to {sum}, count is {count}"
            ));
        }
    }
    Ok(())
}

/// `GET /metrics` of the exporter's Prometheus listener.
fn metrics(port: u16) -> String {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).expect("metrics listener");
    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .expect("request");
    let mut text = String::new();
    conn.read_to_string(&mut text).expect("answer");
    text
}

/// Sends `sig` to `child`.
fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig)
        .unwrap_or_else(|e| panic!("{sig}: {e}"));
}

fn spawn_export(kubeconfig: &Path, nats: &str, log: &Path, metrics_port: Option<u16>) -> Child {
    spawn_export_with(kubeconfig, nats, log, metrics_port, &[])
}

fn spawn_export_with(
    kubeconfig: &Path,
    nats: &str,
    log: &Path,
    metrics_port: Option<u16>,
    extra: &[&str],
) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("export")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", NAMESPACES[0], "--namespace", NAMESPACES[1]])
        .args(["--nats", nats, "--stream", "export", "--progress", "1"])
        .args(metrics_port.map(|p| format!("--metrics-addr=127.0.0.1:{p}")))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("running kevents export")
}

/// A `--leader-elect` replica competing for Lease `default/{lease}` with the tests' short
/// durations (lease 4 s, renew deadline 3 s, retry period 1 s).
fn spawn_replica(
    kubeconfig: &Path,
    nats: &str,
    log: &Path,
    lease: &str,
    id: &str,
    extra: &[&str],
) -> Child {
    let mut args = vec![
        "--leader-elect",
        "--lease-name",
        lease,
        "--identity",
        id,
        "--lease-duration",
        "4",
        "--renew-deadline",
        "3",
        "--retry-period",
        "1",
    ];
    args.extend_from_slice(extra);
    spawn_export_with(kubeconfig, nats, log, None, &args)
}

/// The holder of Lease `default/{lease}` (waits up to 30 s for one).
async fn lease_holder(sink: &HttpSink, lease: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let path = format!("/apis/coordination.k8s.io/v1/namespaces/default/leases/{lease}");
        if let Ok(body) = sink.requests().get(&path, 1 << 20).await {
            let lease: Value = serde_json::from_slice(&body).expect("a Lease");
            if let Some(h) = lease["spec"]["holderIdentity"]
                .as_str()
                .filter(|h| !h.is_empty())
            {
                return h.to_string();
            }
        }
        assert!(Instant::now() < deadline, "nobody took the Lease in 30 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Two `--leader-elect` replicas exporting through `nats` (a server list), an external
/// writer raising counts while `fault` runs beside it, then: the stream converges to the
/// stored counts, every record written by its term's writer, both replicas alive and
/// ending cleanly on SIGTERM.
async fn replicas_survive(
    server: &kevents_testkit::RealApiserver,
    nats: &str,
    extra: &[&str],
    fault: impl std::future::Future<Output = ()>,
) {
    let logdir = tempfile::tempdir().expect("temporary directory");
    let log = logdir.path().join("export.log");
    let sink = HttpSink::new(
        HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None)
            .await
            .expect("config"),
    )
    .expect("sink");
    let replica = |id: &str| {
        let mut args = vec![
            "--leader-elect",
            "--lease-name",
            "export-nats",
            "--identity",
            id,
            "--lease-duration",
            "4",
            "--renew-deadline",
            "3",
            "--retry-period",
            "1",
        ];
        args.extend_from_slice(extra);
        spawn_export_with(&server.admin_kubeconfig, nats, &log, None, &args)
    };
    let mut replicas = vec![replica("na"), replica("nb")];
    let mut writer = Writer {
        sink: sink.clone(),
        counts: HashMap::new(),
    };
    for ns in NAMESPACES {
        for i in 0..6 {
            writer.create(ns, i, true).await;
            writer.create(ns, i, false).await;
        }
    }
    lease_holder(&sink, "export-nats").await;
    let writes = async {
        let started = Instant::now();
        let mut round = 0;
        while started.elapsed() < Duration::from_secs(40) {
            round += 1;
            writer.raise_all(round).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::join!(writes, fault);
    let nats_one = nats.split(',').next().expect("a server");
    let records = converge(&sink, nats_one, &log).await;
    assert!(records.len() > 100, "{} records", records.len());
    let (terms, mismatched) = fenced_writers(nats_one).await;
    assert!(terms >= 1);
    assert!(
        mismatched.is_empty(),
        "records written outside their writer's term: {mismatched:?}"
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    for child in &mut replicas {
        assert!(
            child.try_wait().expect("status").is_none(),
            "a replica died:\n{text}"
        );
    }
    for mut child in replicas {
        signal(&child, nix::sys::signal::Signal::SIGTERM);
        let status = child.wait().expect("waiting for export");
        assert!(status.success(), "export after SIGTERM: {status}\n{text}");
    }
}

/// The stream read message by message: how many terms began (markers), and the records
/// whose writer is not the writer of the last marker before them (sequence, writer, term's).
async fn fenced_writers(nats: &str) -> (usize, Vec<(u64, String, String)>) {
    let client = kevents_export::async_nats::connect(nats)
        .await
        .expect("NATS");
    let context = kevents_export::async_nats::jetstream::new(client);
    let mut stream = context.get_stream("export").await.expect("stream");
    let last = stream.info().await.expect("info").state.last_sequence;
    let (mut terms, mut term_writer, mut wrong) = (0, String::new(), Vec::new());
    for seq in 1..=last {
        let m = stream.get_raw_message(seq).await.expect("a message");
        let writer = m
            .headers
            .get(kevents_export::jetstream::WRITER_HEADER)
            .map(|v| v.as_str().to_owned())
            .unwrap_or_default();
        if m.subject.ends_with("._fence") {
            terms += 1;
            term_writer = writer;
        } else if writer != term_writer {
            wrong.push((seq, writer, term_writer.clone()));
        }
    }
    (terms, wrong)
}

/// Waits until the stream matches the stored events (or panics with the last difference).
async fn converge(sink: &HttpSink, nats: &str, log: &Path) -> Vec<(String, ExportRecord)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let records = read_stream(nats).await;
        let stored = stored(sink).await;
        match check(&records, &stored) {
            Ok(()) => return records,
            Err(e) if Instant::now() > deadline => panic!(
                "the stream does not match the stored events: {e}\nexport's log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            ),
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn export_is_exact_across_sigkill_and_restart_for_both_apis() {
        let server = kevents_testkit::RealApiserver::start()
            .expect("starting kube-apiserver")
            .expect("kube-apiserver is provisioned");
        let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let nats_url = nats.url();
        let logdir = tempfile::tempdir().expect("temporary directory");
        let log = logdir.path().join("export.log");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let sink = admin_sink(&server).await;
            let mut writer = Writer { sink: sink.clone(), counts: HashMap::new() };
            let mut export = spawn_export(&server.admin_kubeconfig, &nats_url, &log, None);
            for ns in NAMESPACES {
                for i in 0..8 {
                    writer.create(ns, i, true).await;
                    writer.create(ns, i, false).await;
                }
            }
            writer.raise_all(1).await;
            writer.raise_all(2).await;
            // Killed in the middle of the work, no chance to save anything.
            tokio::time::sleep(Duration::from_millis(300)).await;
            signal(&export, nix::sys::signal::Signal::SIGKILL);
            let _ = export.wait();
            writer.raise_all(3).await;
            for ns in NAMESPACES {
                writer.create(ns, 100, true).await;
                writer.create(ns, 100, false).await;
            }
            let metrics_port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let mut export = spawn_export(&server.admin_kubeconfig, &nats_url, &log, Some(metrics_port));
            writer.raise_all(4).await;
            writer.raise_all(5).await;
            let records = converge(&sink, &nats_url, &log).await;
            // Both APIs' events were exported, with the API that wrote them.
            let apis: HashSet<_> = records.iter().filter_map(|(_, r)| r.api.clone()).collect();
            assert!(apis.contains("v1") && apis.contains("events.k8s.io/v1"), "{apis:?}");
            let v1 = records.iter().find(|(_, r)| r.reason == "ExternalV1").expect("a v1 record");
            assert_eq!(v1.1.reporting_controller, "example.com/writer");
            assert_eq!(v1.1.action, "Probe");
            // Raised counts gave records with a delta below their count.
            assert!(records.iter().any(|(_, r)| r.delta < r.count && r.delta > 0));
            // The restarted process's counts, served to Prometheus.
            let text = metrics(metrics_port);
            for name in ["kevents_export_records_total", "kevents_export_occurrences_total", "kevents_export_lag_seconds"] {
                assert!(text.contains(name), "{name} missing from /metrics:\n{text}");
            }
            // The progress line (every second, `--progress 1`), for people.
            let shown = Instant::now() + Duration::from_secs(10);
            loop {
                let progress = std::fs::read_to_string(&log).unwrap_or_default();
                if progress.contains("occurrences=") {
                    break;
                }
                assert!(Instant::now() < shown, "no progress line in 10 s: {progress}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            // SIGTERM: a clean end.
            signal(&export, nix::sys::signal::Signal::SIGTERM);
            let status = export.wait().expect("waiting for export");
            assert!(status.success(), "export after SIGTERM: {status}");
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(text.contains("export: stopped after"), "{text}");
        });
    }

    #[test]
    fn a_resume_point_older_than_the_history_relists_without_loss_or_duplicate() {
        // Events are not in the watch cache: a watch reads etcd, which answers 410 Gone for a
        // resourceVersion compacted away; the apiserver compacts every 2 s here.
        let server = kevents_testkit::RealApiserver::start_with_args(&["--etcd-compaction-interval=2s"])
            .expect("starting kube-apiserver")
            .expect("kube-apiserver is provisioned");
        let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let nats_url = nats.url();
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let sink = admin_sink(&server).await;
            let mut writer = Writer::seeded(&sink, 5).await;
            let client = kevents_export::async_nats::connect(nats_url.as_str()).await.expect("NATS");
            let js = JetStream::open(client, JetStreamConfig::new("export")).await.expect("stream");
            let config = kevents_export::ExportConfig {
                namespaces: NAMESPACES.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            };
            let store = kevents_export::MemoryResume::default();
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let first = tokio::spawn(kevents_export::run(sink.clone(), config.clone(), js.clone(), store.clone(), async {
                let _ = stopped.await;
            }));
            let dummy_log = tempfile::NamedTempFile::new().expect("temp file");
            converge(&sink, &nats_url, dummy_log.path()).await;
            // The resume point now says resourceVersion 1 for every scope: compacted away
            // (two compaction intervals and more writes later), so the watch answers 410 Gone.
            writer.raise_all(7).await;
            tokio::time::sleep(Duration::from_secs(6)).await;
            converge(&sink, &nats_url, dummy_log.path()).await;
            let _ = stop.send(());
            let stats = first.await.expect("joined").expect("first run");
            assert_eq!(stats.relists, 0);
            let mut point = store.point();
            for rv in point.resource_versions.values_mut() {
                *rv = "1".into();
            }
            assert_eq!(point.resource_versions.len(), 2);
            let before: u64 = writer.counts.values().sum();
            writer.raise_all(1).await;
            let raised = writer.counts.values().sum::<u64>() - before;
            let store = kevents_export::MemoryResume::from_point(point);
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let second = tokio::spawn(kevents_export::run(sink.clone(), config, js.clone(), store, async {
                let _ = stopped.await;
            }));
            converge(&sink, &nats_url, dummy_log.path()).await;
            let _ = stop.send(());
            let stats = second.await.expect("joined").expect("second run");
            assert_eq!(stats.relists, 2, "{stats:?}");
            // Exactly the new occurrences, none of the first run's again.
            assert_eq!(stats.occurrences, raised, "{stats:?}");
        });
    }

    #[test]
    fn two_leader_elected_replicas_stay_exact_with_the_holder_killed_twice() {
        let server = kevents_testkit::RealApiserver::start()
            .expect("starting kube-apiserver")
            .expect("kube-apiserver is provisioned");
        let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let nats_url = nats.url();
        let logdir = tempfile::tempdir().expect("temporary directory");
        let log = logdir.path().join("export.log");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let sink = admin_sink(&server).await;
            // Short lease times so the takeovers fit a test (client-go's defaults otherwise).
            let replica = |id: &str| {
                spawn_replica(&server.admin_kubeconfig, &nats_url, &log, "export-test", id, &[])
            };
            let holder = || lease_holder(&sink, "export-test");
            let mut replicas: HashMap<String, Child> = HashMap::new();
            replicas.insert("a0".into(), replica("a0"));
            replicas.insert("b0".into(), replica("b0"));
            let mut writer = Writer::seeded(&sink, 6).await;
            let mut holders = Vec::new();
            for round in 1..=2u64 {
                writer.raise_all(round).await;
                let h = holder().await;
                // The holder dies without a word; a new replica takes its place as standby.
                let mut child = replicas.remove(&h).expect("the holder is one of ours");
                signal(&child, nix::sys::signal::Signal::SIGKILL);
                let _ = child.wait();
                holders.push(h);
                let fresh = format!("r{round}");
                replicas.insert(fresh.clone(), replica(&fresh));
                writer.raise_all(round + 10).await;
                for ns in NAMESPACES {
                    writer.create(ns, 100 + round as usize, round % 2 == 0).await;
                }
                // A standby took over from the dead holder.
                let deadline = Instant::now() + Duration::from_secs(30);
                while holder().await == *holders.last().expect("a holder") {
                    assert!(Instant::now() < deadline, "no takeover in 30 s");
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
            }
            writer.raise_all(20).await;
            let records = converge(&sink, &nats_url, &log).await;
            assert!(records.iter().any(|(_, r)| r.delta < r.count && r.delta > 0));
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(text.matches("leads; exporting").count() >= 3, "{text}");
            // The survivors end cleanly; the holder releases the Lease.
            for (_, mut child) in replicas {
                signal(&child, nix::sys::signal::Signal::SIGTERM);
                let status = child.wait().expect("waiting for export");
                assert!(status.success(), "export after SIGTERM: {status}");
            }
        });
    }

    #[test]
    fn a_holder_frozen_past_its_lease_lands_nothing_after_the_takeover() {
        let server = kevents_testkit::RealApiserver::start()
            .expect("starting kube-apiserver")
            .expect("kube-apiserver is provisioned");
        let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let nats_url = nats.url();
        let logdir = tempfile::tempdir().expect("temporary directory");
        let log = logdir.path().join("export.log");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let sink = admin_sink(&server).await;
            let replica = |id: &str| {
                spawn_replica(&server.admin_kubeconfig, &nats_url, &log, "export-freeze", id, &[])
            };
            let holder = || lease_holder(&sink, "export-freeze");
            let mut replicas: HashMap<String, Child> = HashMap::new();
            replicas.insert("fa".into(), replica("fa"));
            replicas.insert("fb".into(), replica("fb"));
            let mut writer = Writer::seeded(&sink, 6).await;
            // The external writer raises counts for 60 s; meanwhile the holder is frozen past
            // its Lease three times and thawed after the other replica took over.
            let started = Instant::now();
            let mut round = 0u64;
            let mut freezes = 0;
            let mut frozen: Option<(String, Instant)> = None;
            while started.elapsed() < Duration::from_secs(60) {
                round += 1;
                writer.raise_all(round).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                let due = started.elapsed() > Duration::from_secs(5 + 18 * freezes);
                match &frozen {
                    None if freezes < 3 && due => {
                        let h = holder().await;
                        signal(&replicas[&h], nix::sys::signal::Signal::SIGSTOP);
                        frozen = Some((h, Instant::now()));
                        freezes += 1;
                    }
                    // Thawed once the other one holds the Lease and has exported a while (its
                    // writes go on: the frozen one's watch has events waiting).
                    Some((h, since))
                        if since.elapsed() > Duration::from_secs(8) && holder().await != *h =>
                    {
                        signal(&replicas[h], nix::sys::signal::Signal::SIGCONT);
                        frozen = None;
                    }
                    _ => {}
                }
            }
            assert_eq!(freezes, 3);
            if let Some((h, _)) = frozen.take() {
                signal(&replicas[&h], nix::sys::signal::Signal::SIGCONT);
            }
            let records = converge(&sink, &nats_url, &log).await;
            assert!(records.len() > 100, "{} records", records.len());
            // The fence: every record was written by the writer of the last term marker before
            // it, so a thawed holder landed nothing after the next one began its term.
            let (terms, mismatched) = fenced_writers(&nats_url).await;
            assert!(terms >= 4, "{terms} terms began");
            assert!(mismatched.is_empty(), "records written outside their writer's term: {mismatched:?}");
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            for (_, mut child) in replicas {
                signal(&child, nix::sys::signal::Signal::SIGTERM);
                let status = child.wait().expect("waiting for export");
                assert!(status.success(), "export after SIGTERM: {status}\n{text}");
            }
        });
    }

    #[test]
    fn nats_killed_and_restarted_mid_run_every_replica_alive_and_exact() {
        let server = kevents_testkit::RealApiserver::start()
            .expect("starting kube-apiserver")
            .expect("kube-apiserver is provisioned");
        let mut nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let url = nats.url();
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let fault = async {
                tokio::time::sleep(Duration::from_secs(8)).await;
                nats.kill().expect("SIGKILL to nats-server");
                tokio::time::sleep(Duration::from_secs(4)).await;
                nats.restart().expect("nats-server back, same store");
            };
            replicas_survive(&server, &url, &[], fault).await;
        });
    }

    #[test]
    fn a_three_server_cluster_restarted_server_by_server_keeps_the_history_exact() {
        let server = kevents_testkit::RealApiserver::start()
            .expect("starting kube-apiserver")
            .expect("kube-apiserver is provisioned");
        let mut cluster = NatsCluster::start(3).unwrap_or_else(|e| panic!("starting 3 nats-servers: {e}"));
        let urls = cluster.urls();
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let fault = async {
                for i in 0..3 {
                    tokio::time::sleep(Duration::from_secs(6)).await;
                    cluster.kill(i).expect("SIGKILL to one server");
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    cluster.restart(i).expect("the server back, the cluster whole again");
                }
            };
            replicas_survive(&server, &urls, &["--nats-replicas", "3"], fault).await;
        });
    }
}
