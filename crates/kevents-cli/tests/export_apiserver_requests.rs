//! The requests `kevents export` makes to a real kube-apiserver, read back from the
//! apiserver's own record, not the program's counters: its audit log (a line for every
//! request received from the exporter's user, `kevents-exec-0`, at stage `RequestReceived`)
//! and its `/metrics` (`apiserver_request_total`). The figures are those of docs/export.md,
//! "The apiserver's side":
//! - the first list of N live events takes ceil(N/500) list requests per scope: pages of 500,
//!   the first without a resourceVersion (a consistent read), the others with the continue
//!   token; the watch starts from the list's resourceVersion, with bookmarks;
//! - in steady state, with a writer raising counts: no list, one watch per scope per
//!   `--watch-timeout`;
//! - a restart with a saved resume point watches from it: no list;
//! - `--leader-elect`: a GET and an UPDATE of the Lease per retry period.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::read_stream;
use kevents_core::request::{APPLICATION_JSON, Method, STRATEGIC_MERGE_PATCH};
use kevents_http::{HttpConfig, HttpSink};
use kevents_testkit::nats::NatsServer;
use serde_json::{Value, json};

/// The exporter's user (a static token of the test apiserver, group `system:masters`).
const USER: &str = "kevents-exec-0";
/// Events in the busy namespace: 3 pages of 500 (the last of one event).
const BUSY: usize = 1_001;
/// Events in the other namespace: 1 page.
const FEW: usize = 5;
const WATCH_TIMEOUT: u64 = 2;
const RETRY_PERIOD: u64 = 1;

/// The audit policy: every request of [`USER`], once, when received; nothing else.
const POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted, ResponseComplete, Panic]
rules:
- level: Metadata
  users: [\"kevents-exec-0\"]
- level: None
";

/// One request of the exporter, as the audit log has it.
#[derive(Debug, Clone)]
struct Request {
    verb: String,
    resource: String,
    namespace: String,
    uri: String,
}

/// Every request of [`USER`] in the audit log so far.
fn audited(log: &Path) -> Vec<Request> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["user"]["username"] == USER && e["stage"] == "RequestReceived")
        .map(|e| Request {
            verb: e["verb"].as_str().unwrap_or_default().to_owned(),
            resource: e["objectRef"]["resource"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            namespace: e["objectRef"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            uri: e["requestURI"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

/// Requests by (verb, resource, namespace).
fn tally(requests: &[Request]) -> BTreeMap<(String, String, String), usize> {
    let mut out = BTreeMap::new();
    for r in requests {
        *out.entry((r.verb.clone(), r.resource.clone(), r.namespace.clone()))
            .or_default() += 1;
    }
    out
}

fn count(requests: &[Request], verb: &str, resource: &str, ns: Option<&str>) -> usize {
    requests
        .iter()
        .filter(|r| r.verb == verb && r.resource == resource)
        .filter(|r| ns.is_none_or(|ns| r.namespace == ns))
        .count()
}

/// `apiserver_request_total{verb=VERB,resource="events"}` summed over its other labels
/// (codes, scopes, API groups), from the apiserver's `/metrics`.
async fn events_requests_metric(sink: &HttpSink, verb: &str) -> u64 {
    let body = sink
        .requests()
        .get("/metrics", 64 << 20)
        .await
        .expect("GET /metrics");
    let text = String::from_utf8_lossy(&body);
    text.lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| l.contains(&format!("verb=\"{verb}\"")) && l.contains("resource=\"events\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// The exporter's kubeconfig: the admin's, with [`USER`]'s token.
fn exporter_kubeconfig(server: &kevents_testkit::RealApiserver, dir: &Path) -> PathBuf {
    let admin = std::fs::read_to_string(&server.admin_kubeconfig).expect("admin kubeconfig");
    let text = admin.replace(&server.admin_token, &server.exec_tokens[0]);
    assert_ne!(text, admin, "the admin token is in its kubeconfig");
    let path = dir.join("exporter.kubeconfig");
    std::fs::write(&path, text).expect("writing a kubeconfig");
    path
}

/// The export of `default` and `kube-public`, leader-elected, as the figures are measured.
fn spawn_export(kubeconfig: &Path, nats: &str, log: &Path) -> Child {
    let retry = RETRY_PERIOD.to_string();
    let args = [
        "--namespace",
        "default",
        "--namespace",
        "kube-public",
        "--leader-elect",
        "--lease-name",
        "export-requests",
        "--identity",
        "requests-a",
        "--lease-duration",
        "4",
        "--renew-deadline",
        "3",
        "--retry-period",
        &retry,
    ];
    spawn_export_with(kubeconfig, nats, log, &args)
}

fn spawn_export_with(kubeconfig: &Path, nats: &str, log: &Path, args: &[&str]) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("export")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--nats", nats, "--stream", "export", "--progress", "1"])
        .args(["--watch-timeout", &WATCH_TIMEOUT.to_string()])
        .args(args)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("running kevents export")
}

fn core_event(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": name},
        "reason": "Requests", "message": "seeded", "type": "Normal", "count": 1,
        "source": {"component": "external-writer"}})
}

/// Creates `n` events in `ns`, 32 requests at a time.
async fn seed(sink: &HttpSink, ns: &'static str, n: usize) {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        if tasks.len() >= 32 {
            tasks.join_next().await.expect("a task").expect("seeding");
        }
        let sink = sink.clone();
        tasks.spawn(async move {
            let body = core_event(ns, &format!("seed-{i}"));
            let path = format!("/api/v1/namespaces/{ns}/events");
            kevents_testkit::send_json(&sink, Method::Post, path, APPLICATION_JSON, &body).await;
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.expect("seeding");
    }
}

/// Raises the counts of the first events of both namespaces every 250 ms for `lasting`.
async fn write_for(sink: &HttpSink, lasting: Duration, round: &mut u64) {
    let until = Instant::now() + lasting;
    while Instant::now() < until {
        *round += 1;
        for (ns, i) in [("default", 0), ("default", 1), ("kube-public", 0)] {
            let body = json!({"count": 1 + *round});
            let path = format!("/api/v1/namespaces/{ns}/events/seed-{i}");
            kevents_testkit::send_json(sink, Method::Patch, path, STRATEGIC_MERGE_PATCH, &body)
                .await;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until the stream holds at least `n` records.
async fn records_at_least(nats: &str, n: usize, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = read_stream(nats).await.len();
        if got >= n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{got} of {n} records in 60 s; export's log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn sigterm(mut child: Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let status = child.wait().expect("waiting for export");
    assert!(status.success(), "export after SIGTERM: {status}");
}

/// A kube-apiserver with an audit log of [`USER`]'s requests (its path) and `more` flags.
fn audited_server(dir: &Path, more: &[&str]) -> (kevents_testkit::RealApiserver, PathBuf) {
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, POLICY).expect("writing the audit policy");
    let audit = dir.join("audit.log");
    let mut args = vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", audit.display()),
    ];
    args.extend(more.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = kevents_testkit::RealApiserver::start_with_args(&args)
        .expect("starting kube-apiserver")
        .expect("kube-apiserver is provisioned");
    (server, audit)
}

/// A scope nobody writes to (`kube-public`, one event) while the cluster's revision moves
/// (a writer in `default`, not exported) and the apiserver compacts every 2 s: the lists
/// and watches of the export in 8 s of that. Without the events watch cache (the default)
/// its watches read etcd, which sends no bookmarks: the scope's resourceVersion stays the
/// list's, and once compacted away, the next watch answers 410 and the scope relists. With
/// the watch cache, the watch is served from it (bookmarks, a window of its own): no relist.
fn quiet_scope(cache: bool) -> (usize, usize, f64) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut more = vec!["--etcd-compaction-interval=2s"];
    if cache {
        more.push("--watch-cache-sizes=events#1000");
    }
    let (server, audit) = audited_server(dir.path(), &more);
    let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
    let nats_url = nats.url();
    let kubeconfig = exporter_kubeconfig(&server, dir.path());
    let log = dir.path().join("export.log");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let sink = HttpSink::new(
            HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None)
                .await
                .expect("config"),
        )
        .expect("sink");
        seed(&sink, "default", 2).await;
        seed(&sink, "kube-public", 1).await;
        let export = spawn_export_with(
            &kubeconfig,
            &nats_url,
            &log,
            &["--namespace", "kube-public"],
        );
        records_at_least(&nats_url, 1, &log).await;
        let before = audited(&audit).len();
        let window = Instant::now();
        let until = window + Duration::from_secs(8);
        let mut round = 0;
        while Instant::now() < until {
            round += 1;
            for i in 0..2 {
                let body = json!({"count": 1 + round});
                let path = format!("/api/v1/namespaces/default/events/seed-{i}");
                kevents_testkit::send_json(
                    &sink,
                    Method::Patch,
                    path,
                    STRATEGIC_MERGE_PATCH,
                    &body,
                )
                .await;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let lasted = window.elapsed().as_secs_f64();
        let all = audited(&audit);
        let quiet = &all[before..];
        sigterm(export);
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            !text.contains("watch scope failed"),
            "a relist is not a failure:\n{text}"
        );
        (
            count(quiet, "list", "events", None),
            count(quiet, "watch", "events", None),
            lasted,
        )
    })
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn a_quiet_scope_relists_after_compaction_without_the_events_watch_cache() {
        let (lists, watches, lasted) = quiet_scope(false);
        eprintln!(
            "quiet scope, no events watch cache, compaction every 2 s, watch timeout {WATCH_TIMEOUT} s: \
             {lists} lists, {watches} watches in {lasted:.1} s"
        );
        // Each watch after the first starts from a compacted version: at least one relist,
        // at most one per watch.
        assert!(lists >= 1, "{lists} lists, {watches} watches");
        assert!(lists <= watches + 1, "{lists} lists, {watches} watches");
    }

    #[test]
    fn a_quiet_scope_never_relists_with_the_events_watch_cache() {
        let (lists, watches, lasted) = quiet_scope(true);
        eprintln!(
            "quiet scope, events watch cache of 1000, compaction every 2 s, watch timeout {WATCH_TIMEOUT} s: \
             {lists} lists, {watches} watches in {lasted:.1} s"
        );
        assert_eq!(lists, 0, "{watches} watches");
        assert!(watches >= 2, "{watches} watches");
    }

    #[test]
    fn the_exports_requests_read_back_from_the_apiserver() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (server, audit) = audited_server(dir.path(), &[]);
        let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let nats_url = nats.url();
        let kubeconfig = exporter_kubeconfig(&server, dir.path());
        let log = dir.path().join("export.log");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let sink = HttpSink::new(
                HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None)
                    .await
                    .expect("config"),
            )
            .expect("sink");
            let seeding = Instant::now();
            seed(&sink, "default", BUSY).await;
            seed(&sink, "kube-public", FEW).await;
            eprintln!("seeded {} events in {:.1} s", BUSY + FEW, seeding.elapsed().as_secs_f64());
            let lists_before = events_requests_metric(&sink, "LIST").await;

            // 1. The first export: pages of 500, then a watch from the list's resourceVersion.
            let started = Instant::now();
            let export = spawn_export(&kubeconfig, &nats_url, &log);
            records_at_least(&nats_url, BUSY + FEW, &log).await;
            let first = audited(&audit);
            let lists_default = count(&first, "list", "events", Some("default"));
            let lists_public = count(&first, "list", "events", Some("kube-public"));
            assert_eq!(lists_default, BUSY.div_ceil(500), "{:?}", tally(&first));
            assert_eq!(lists_public, FEW.div_ceil(500), "{:?}", tally(&first));
            let lists_metric = events_requests_metric(&sink, "LIST").await - lists_before;
            assert_eq!(lists_metric as usize, lists_default + lists_public, "the apiserver's /metrics");
            for r in first.iter().filter(|r| r.verb == "list" && r.resource == "events") {
                assert!(r.uri.contains("limit=500"), "{}", r.uri);
                assert!(!r.uri.contains("resourceVersion"), "a consistent read: {}", r.uri);
            }
            let continued = first
                .iter()
                .filter(|r| r.verb == "list" && r.uri.contains("continue="))
                .count();
            assert_eq!(continued, lists_default - 1 + lists_public - 1);
            let watches: Vec<&Request> = first
                .iter()
                .filter(|r| r.verb == "watch" && r.resource == "events")
                .collect();
            assert!(!watches.is_empty(), "{:?}", tally(&first));
            for w in &watches {
                assert!(w.uri.contains("allowWatchBookmarks=true"), "{}", w.uri);
                assert!(w.uri.contains(&format!("timeoutSeconds={WATCH_TIMEOUT}")), "{}", w.uri);
                assert!(w.uri.contains("resourceVersion="), "{}", w.uri);
            }
            let first_export = started.elapsed();

            // 2. Steady state: a writer raising counts; watches end every WATCH_TIMEOUT and
            //    start again from the last resourceVersion; never a list.
            let mut round = 0;
            let before = audited(&audit).len();
            let window = Instant::now();
            write_for(&sink, Duration::from_secs(10), &mut round).await;
            let lasted = window.elapsed().as_secs_f64();
            let all = audited(&audit);
            let steady = &all[before..];
            let per_minute = |n: usize| n as f64 * 60.0 / lasted;
            let lists = count(steady, "list", "events", None);
            let watches = count(steady, "watch", "events", None);
            let lease_gets = count(steady, "get", "leases", None);
            let lease_updates = count(steady, "update", "leases", None);
            assert_eq!(lists, 0, "no list in steady state: {:?}", tally(steady));
            // Two scopes, a watch each per WATCH_TIMEOUT (+1 each for the window's edges).
            let scopes = 2.0;
            let bound = (lasted / WATCH_TIMEOUT as f64).ceil() * scopes + scopes;
            assert!(watches as f64 <= bound, "{watches} watches in {lasted:.1} s: {:?}", tally(steady));
            assert!(
                watches as f64 >= (lasted / WATCH_TIMEOUT as f64).floor() * scopes - scopes,
                "{watches} watches in {lasted:.1} s"
            );
            // The leader renews every retry period: a GET and an UPDATE (fewer on a loaded
            // machine: the period starts after the last renewal's answer), never more.
            let periods = lasted / RETRY_PERIOD as f64;
            for (what, n) in [("get", lease_gets), ("update", lease_updates)] {
                assert!(
                    (n as f64) <= periods + 1.0 && (n as f64) >= periods / 2.0,
                    "{n} Lease {what}s in {lasted:.1} s (retry period {RETRY_PERIOD} s)"
                );
            }
            let other: Vec<_> = tally(steady)
                .into_iter()
                .filter(|((verb, res, _), _)| {
                    !(res == "events" && verb == "watch")
                        && !(res == "leases" && (verb == "get" || verb == "update"))
                })
                .collect();
            assert!(other.is_empty(), "other requests in steady state: {other:?}");
            eprintln!(
                "apiserver {}: first export of {} events: {} list requests, {:.1} s; steady state \
                 over {lasted:.1} s per minute: lists {:.1}, watches {:.1} (2 scopes, timeout {WATCH_TIMEOUT} s), \
                 Lease gets {:.1}, updates {:.1} (retry period {RETRY_PERIOD} s)",
                server.version,
                BUSY + FEW,
                lists_default + lists_public,
                first_export.as_secs_f64(),
                per_minute(lists),
                per_minute(watches),
                per_minute(lease_gets),
                per_minute(lease_updates),
            );

            // 3. A restart with saved resume points: it watches from them, it lists nothing.
            sigterm(export);
            let before = audited(&audit).len();
            let export = spawn_export(&kubeconfig, &nats_url, &log);
            write_for(&sink, Duration::from_secs(3), &mut round).await;
            let all = audited(&audit);
            let restarted = &all[before..];
            assert_eq!(
                count(restarted, "list", "events", None),
                0,
                "a restart lists nothing: {:?}",
                tally(restarted)
            );
            let watches = count(restarted, "watch", "events", None);
            assert!((2..=8).contains(&watches), "{watches} watches after the restart");
            // What was written reached the stream (seed-0's deltas sum to its count).
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let sum: u64 = read_stream(&nats_url)
                    .await
                    .iter()
                    .filter(|(_, r)| r.namespace == "default" && r.name == "seed-0")
                    .map(|(_, r)| r.delta)
                    .sum();
                if sum == 1 + round {
                    break;
                }
                assert!(Instant::now() < deadline, "seed-0: deltas sum to {sum}, count {}", 1 + round);
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            sigterm(export);
        });
    }
}
