//! `kevents export --otlp` into a real OpenTelemetry Collector (kevents-testkit's `Otelcol`:
//! core v0.161.0 with the OTLP receiver and the file exporter, built by
//! `scripts/otelcol/provision.sh`) from a real kube-apiserver: an external writer (plain HTTP
//! requests) raises the counts of core/v1 and events.k8s.io/v1 events for 60 s while two
//! exports (`--api core` and `--api events`, each into a Collector of its own) are killed
//! with SIGKILL and restarted. In each Collector's output, counting each `uid:count` key
//! once, the deltas of every event sum to its stored count (read back from the apiserver);
//! the keys received more than once are counted and printed with their cause, and are at
//! most one per SIGKILL (the record in flight). Without NATS: the resume point is a
//! ConfigMap (read back too); with NATS: the Collector is fed from the stream.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kevents_core::request::{APPLICATION_JSON, Method, STRATEGIC_MERGE_PATCH};
use kevents_core::{Clock, SystemClock};
use kevents_export::ExportRecord;
use kevents_http::{HttpConfig, HttpSink};
use kevents_testkit::otelcol::{LogRecord, Otelcol};
use serde_json::{Value, json};

const NAMESPACES: [&str; 2] = ["default", "kube-public"];
/// Events of each API in each namespace.
const PER_API: usize = 4;

fn now(micros: bool) -> String {
    let t = SystemClock.now();
    if micros {
        t.to_rfc3339_micros()
    } else {
        t.to_rfc3339()
    }
}

/// The external writer: plain requests with JSON bodies.
struct Writer {
    sink: HttpSink,
    /// (namespace, name, core/v1?) -> count written.
    counts: BTreeMap<(String, String, bool), u64>,
}

impl Writer {
    async fn create(&mut self, ns: &str, i: usize, core: bool) {
        let name = format!("otlp-{}-{i}", if core { "core" } else { "v1" });
        let regarding = json!({"kind": "Pod", "namespace": ns, "name": format!("pod-{i}"),
            "uid": format!("00000000-0000-0000-0000-{i:012}"), "apiVersion": "v1",
            "fieldPath": "spec.containers{app}"});
        let (path, body) = if core {
            (
                format!("/api/v1/namespaces/{ns}/events"),
                json!({"apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": name, "namespace": ns},
                    "involvedObject": regarding, "reason": "ExternalCore", "message": "from curl",
                    "type": "Warning", "count": 1, "firstTimestamp": now(false),
                    "lastTimestamp": now(false), "source": {"component": "external-writer"}}),
            )
        } else {
            (
                format!("/apis/events.k8s.io/v1/namespaces/{ns}/events"),
                json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                    "metadata": {"name": name, "namespace": ns}, "eventTime": now(true),
                    "regarding": regarding, "reason": "ExternalV1", "note": "from the v1 API",
                    "type": "Normal", "action": "Probe",
                    "reportingController": "example.com/writer", "reportingInstance": "writer-1"}),
            )
        };
        kevents_testkit::send_json(&self.sink, Method::Post, path, APPLICATION_JSON, &body).await;
        self.counts.insert((ns.to_owned(), name, core), 1);
    }

    /// Raises every event's count by 1..=3.
    async fn raise_all(&mut self, round: u64) {
        let keys: Vec<_> = self.counts.keys().cloned().collect();
        for (i, (ns, name, core)) in keys.into_iter().enumerate() {
            let count = self.counts[&(ns.clone(), name.clone(), core)] + (i as u64 + round) % 3 + 1;
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
            self.counts.insert((ns, name, core), count);
        }
    }
}

/// Every stored event of the namespaces, read back: uid -> (count, name).
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

/// What a Collector received: per key the records (its deltas), the keys received twice.
struct Received {
    sums: HashMap<String, u64>,
    repeated: BTreeMap<String, usize>,
    records: Vec<LogRecord>,
}

fn received(records: Vec<LogRecord>) -> Received {
    let mut first: HashMap<String, usize> = HashMap::new();
    let mut sums: HashMap<String, u64> = HashMap::new();
    let mut repeated = BTreeMap::new();
    for r in &records {
        let key = r
            .str("kevents.event.key")
            .expect("kevents.event.key")
            .to_owned();
        let uid = r.str("k8s.event.uid").expect("k8s.event.uid").to_owned();
        assert_eq!(
            key,
            format!(
                "{uid}:{}",
                r.int("k8s.event.count").expect("k8s.event.count")
            ),
            "the key is uid:count"
        );
        let seen = first.entry(key.clone()).or_default();
        *seen += 1;
        if *seen > 1 {
            *repeated.entry(key).or_default() += 1;
            continue;
        }
        *sums.entry(uid).or_default() +=
            u64::try_from(r.int("kevents.event.delta").expect("kevents.event.delta"))
                .expect("delta >= 0");
    }
    Received {
        sums,
        repeated,
        records,
    }
}

fn compare(got: &Received, stored: &HashMap<String, (u64, String)>) -> Result<(), String> {
    for (uid, (count, name)) in stored {
        let sum = got.sums.get(uid).copied().unwrap_or(0);
        if sum != *count {
            return Err(format!(
                "{name} ({uid}): deltas sum to {sum}, the apiserver stores {count}"
            ));
        }
    }
    Ok(())
}

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig)
        .unwrap_or_else(|e| panic!("{sig}: {e}"));
}

fn spawn_export(kubeconfig: &Path, log: &Path, args: &[&str]) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("export")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--namespace",
            NAMESPACES[0],
            "--namespace",
            NAMESPACES[1],
            "--progress",
            "5",
        ])
        .args(args)
        .env_remove("NATS_URL")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("running kevents export")
}

/// One export into one Collector (`--api api`), killed and restarted on demand.
struct Export {
    api: &'static str,
    args: Vec<String>,
    child: Child,
    kills: usize,
    collector: Otelcol,
    log: std::path::PathBuf,
}

impl Export {
    fn start(kubeconfig: &Path, dir: &Path, api: &'static str, extra: &[String]) -> Export {
        let collector = Otelcol::start().unwrap_or_else(|e| panic!("starting the Collector: {e}"));
        let mut args = vec![
            "--api".to_owned(),
            api.to_owned(),
            "--otlp".to_owned(),
            collector.endpoint(),
        ];
        args.extend(extra.iter().cloned());
        let log = dir.join(format!("export-{api}.log"));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let child = spawn_export(kubeconfig, &log, &refs);
        Export {
            api,
            args,
            child,
            kills: 0,
            collector,
            log,
        }
    }

    fn kill_and_restart(&mut self, kubeconfig: &Path) {
        signal(&self.child, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
        self.kills += 1;
        let refs: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.child = spawn_export(kubeconfig, &self.log, &refs);
    }

    /// Waits until the Collector's output matches the stored counts; what it received.
    async fn converge(&self, sink: &HttpSink) -> Received {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let got = received(
                self.collector
                    .log_records()
                    .expect("the Collector's output"),
            );
            let stored = stored(sink).await;
            match compare(&got, &stored) {
                Ok(()) => return got,
                Err(e) if Instant::now() > deadline => panic!(
                    "--api {}: the Collector's output does not match the stored events: {e}\nexport's log:\n{}\nCollector's log:\n{}",
                    self.api,
                    std::fs::read_to_string(&self.log).unwrap_or_default(),
                    self.collector.log_tail()
                ),
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// SIGTERM: a clean end.
    fn stop(mut self) -> String {
        signal(&self.child, nix::sys::signal::Signal::SIGTERM);
        let status = self.child.wait().expect("waiting for export");
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(
            status.success(),
            "--api {}: export after SIGTERM: {status}\n{text}",
            self.api
        );
        text
    }
}

/// The writer for 60 s with both exports killed and restarted twice each; then each
/// Collector's output against the stored counts.
async fn storm(
    server: &kevents_testkit::RealApiserver,
    extra: impl Fn(&str) -> Vec<String>,
) -> Vec<(Export, Received)> {
    let dir = tempfile::tempdir().expect("temporary directory").keep();
    let sink = HttpSink::new(
        HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None)
            .await
            .expect("config"),
    )
    .expect("sink");
    let mut writer = Writer {
        sink: sink.clone(),
        counts: BTreeMap::new(),
    };
    let kubeconfig = server.admin_kubeconfig.clone();
    let mut exports = vec![
        Export::start(&kubeconfig, &dir, "core", &extra("core")),
        Export::start(&kubeconfig, &dir, "events", &extra("events")),
    ];
    for ns in NAMESPACES {
        for i in 0..PER_API {
            writer.create(ns, i, true).await;
            writer.create(ns, i, false).await;
        }
    }
    let started = Instant::now();
    let mut round = 0;
    let mut killed = 0;
    while started.elapsed() < Duration::from_secs(60) {
        round += 1;
        writer.raise_all(round).await;
        // SIGKILL at 15 s and 35 s (core) and 25 s and 45 s (events): in the middle of the work.
        let due = [15u64, 25, 35, 45];
        if killed < due.len() && started.elapsed() >= Duration::from_secs(due[killed]) {
            let which = killed % 2;
            exports[which].kill_and_restart(&kubeconfig);
            killed += 1;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "writer: {round} rounds over {} events in 60 s",
        writer.counts.len()
    );
    let mut out = Vec::new();
    for export in exports {
        let got = export.converge(&sink).await;
        out.push((export, got));
    }
    out
}

/// The checks common to both modes: the mapping as the Collector wrote it, the repeats (at
/// most `in_flight` records per SIGKILL).
fn check_received(
    export: &Export,
    got: &Received,
    stored: &HashMap<String, (u64, String)>,
    in_flight: usize,
    cause: &str,
) {
    assert!(
        got.records.len() > 100,
        "--api {}: only {} records",
        export.api,
        got.records.len()
    );
    let warning = got
        .records
        .iter()
        .find(|r| r.str("k8s.event.reason") == Some("ExternalCore"))
        .expect("a core/v1 record");
    assert_eq!(
        (warning.severity_number, warning.severity_text.as_str()),
        (13, "Warning")
    );
    assert_eq!(warning.body, "from curl");
    assert_eq!(warning.str("kevents.event.api"), Some("v1"));
    assert!(warning.time_unix_nano > 0);
    let normal = got
        .records
        .iter()
        .find(|r| r.str("k8s.event.reason") == Some("ExternalV1"))
        .expect("an events.k8s.io/v1 record");
    assert_eq!(
        (normal.severity_number, normal.severity_text.as_str()),
        (9, "Normal")
    );
    assert_eq!(normal.body, "from the v1 API");
    assert_eq!(normal.str("k8s.event.action"), Some("Probe"));
    assert_eq!(normal.str("kevents.event.api"), Some("events.k8s.io/v1"));
    for r in [warning, normal] {
        assert!(NAMESPACES.contains(&r.str("k8s.namespace.name").unwrap_or_default()));
        assert!(
            r.str("k8s.event.name")
                .is_some_and(|n| n.starts_with("otlp-"))
        );
        assert!(
            r.str("k8s.event.start_time")
                .is_some_and(|t| t.ends_with('Z'))
        );
        assert_eq!(r.resource.get("k8s.object.kind"), Some(&json!("Pod")));
        assert!(
            r.resource
                .get("k8s.object.name")
                .is_some_and(|n| n.as_str().unwrap_or("").starts_with("pod-"))
        );
        assert_eq!(
            r.resource.get("k8s.object.fieldpath"),
            Some(&json!("spec.containers{app}"))
        );
        assert_eq!(r.resource.get("k8s.object.api_version"), Some(&json!("v1")));
    }
    let repeats: usize = got.repeated.values().sum();
    eprintln!(
        "--api {}: {} log records, {} events, {} keys received more than once ({} repeats) after {} SIGKILLs",
        export.api,
        got.records.len(),
        stored.len(),
        got.repeated.len(),
        repeats,
        export.kills
    );
    for (key, n) in &got.repeated {
        eprintln!("  repeated {key} x{n}: cause: {cause}");
    }
    assert!(
        repeats <= export.kills * in_flight,
        "--api {}: {repeats} repeats for {} SIGKILLs: more than the records in flight",
        export.api,
        export.kills
    );
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn otlp_without_nats_is_exact_across_sigkill_with_the_resume_point_in_a_configmap() {
        let server = kevents_testkit::RealApiserver::start()
            .expect("starting kube-apiserver")
            .expect("kube-apiserver is provisioned");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let results = storm(&server, |api| {
                vec![
                    "--resume-namespace".into(),
                    "default".into(),
                    "--resume-configmap".into(),
                    format!("kevents-otlp-{api}"),
                ]
            })
            .await;
            let sink = HttpSink::new(
                HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None).await.expect("config"),
            )
            .expect("sink");
            let stored = stored(&sink).await;
            for (export, got) in results {
                check_received(
                    &export,
                    &got,
                    &stored,
                    // The CLI's batch in ConfigMap mode (export_cmd.rs): a batch's records are
                    // pending together, so a kill repeats at most the batch in flight.
                    32,
                    "a record of the batch in flight when the export was SIGKILLed, delivered again from the resume ConfigMap with its key",
                );
                let api = export.api;
                let text = export.stop();
                assert!(text.contains("resume point in the ConfigMap default/kevents-otlp-"), "{text}");
                // The resume point, read back from the apiserver: every stored event's last
                // exported count is its count, nothing pending after a clean stop.
                let body = sink
                    .requests()
                    .get(&format!("/api/v1/namespaces/default/configmaps/kevents-otlp-{api}"), 4 << 20)
                    .await
                    .expect("the resume ConfigMap");
                let cm: Value = serde_json::from_slice(&body).expect("a ConfigMap");
                let counts: HashMap<String, (u64, String)> =
                    serde_json::from_str(cm["data"]["counts"].as_str().expect("counts")).expect("counts JSON");
                for (uid, (count, name)) in &stored {
                    assert_eq!(counts.get(uid).map(|c| c.0), Some(*count), "--api {api}: {name} in the ConfigMap");
                }
                let pending: Vec<Value> =
                    serde_json::from_str(cm["data"]["pending"].as_str().expect("pending")).expect("pending JSON");
                assert!(pending.is_empty(), "--api {api}: pending after a clean stop: {pending:?}");
            }
        });
    }

    #[test]
    fn otlp_fed_from_the_nats_stream_is_exact_across_sigkill() {
        let server = kevents_testkit::RealApiserver::start()
            .expect("starting kube-apiserver")
            .expect("kube-apiserver is provisioned");
        let nats = kevents_testkit::nats::NatsServer::start()
            .unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let url = nats.url();
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let results = storm(&server, |api| {
                vec!["--nats".into(), url.clone(), "--stream".into(), format!("otlp-{api}")]
            })
            .await;
            let sink = HttpSink::new(
                HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None).await.expect("config"),
            )
            .expect("sink");
            let stored = stored(&sink).await;
            for (export, got) in results {
                check_received(
                    &export,
                    &got,
                    &stored,
                    kevents_export::FeedConfig::new("x").batch,
                    "the batch in flight when the export was SIGKILLed (not acknowledged), handed out again by the durable consumer",
                );
                let api = export.api;
                let text = export.stop();
                assert!(text.contains("feeding OTLP"), "--api {api}: {text}");
                // No ConfigMap: the stream is the resume point.
                let cm = sink
                    .requests()
                    .get("/api/v1/namespaces/default/configmaps/kevents-export-resume", 1 << 20)
                    .await;
                assert!(cm.is_err(), "--api {api}: a resume ConfigMap was written with NATS");
            }
        });
    }
}
