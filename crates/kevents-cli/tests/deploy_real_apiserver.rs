//! deploy/ against a real kube-apiserver (v1.20.2 and v1.37 in CI): every manifest of each
//! event API is accepted by `kubectl apply --dry-run=server` (and nothing is stored by it),
//! then applied for real; `kevents export --leader-elect` runs as the ServiceAccount's
//! identity (a TokenRequest token) in two replicas: it takes the Lease and exports the
//! events, and the standby serves every metric family with `kevents_export_leader 0`.
//! Then one rule at a time is taken away: without `update` on the Lease no replica can lead,
//! without `watch` on events no new occurrence is exported (until the rule is back), and
//! `kevents doctor --for export` names exactly what is missing and the rule to grant.

mod common;

use common::{free_port, read_stream};
use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kevents_core::request::{APPLICATION_JSON, Method};
use kevents_export::ExportRecord;
use kevents_http::{HttpConfig, HttpSink};
use kevents_testkit::nats::NatsServer;
use serde_json::{Value, json};

/// The repository's deploy/ directory.
fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// The minor version of `v1.MINOR.PATCH`.
fn minor(version: &str) -> u32 {
    version
        .trim_start_matches('v')
        .split('.')
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("version {version}"))
}

/// Runs kubectl as `kubeconfig`, with `stdin` given; panics when it fails.
fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl_output(kubeconfig, args, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn kubectl_output(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running kubectl (scripts/apiserver/provision.sh installs it)");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).expect("kubectl's stdin");
    }
    drop(input);
    child.wait_with_output().expect("kubectl")
}

/// The `kubectl apply` arguments of deploy/ for one API directory: `-k` on 1.21+, and on
/// 1.20 (no policy/v1) every file with the PodDisruptionBudget of deploy/kubernetes-1.20/.
fn apply_args(api_dir: &str, server_minor: u32) -> Vec<String> {
    let deploy = deploy_dir();
    if server_minor >= 21 {
        return vec!["-k".into(), deploy.join(api_dir).display().to_string()];
    }
    let mut files = Vec::new();
    for f in [
        "common/namespace.yaml",
        "common/serviceaccount.yaml",
        "common/lease-rbac.yaml",
        "common/service.yaml",
        "kubernetes-1.20/pdb.yaml",
    ] {
        files.push(deploy.join(f));
    }
    files.push(deploy.join(api_dir).join("rbac.yaml"));
    files.push(deploy.join(api_dir).join("deployment.yaml"));
    files
        .iter()
        .flat_map(|f| ["-f".to_owned(), f.display().to_string()])
        .collect()
}

async fn admin_sink(server: &kevents_testkit::RealApiserver) -> HttpSink {
    HttpSink::new(
        HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None)
            .await
            .expect("config"),
    )
    .expect("sink")
}

/// GET `path` as the admin: the object, or `None` on 404.
async fn get(sink: &HttpSink, path: &str) -> Option<Value> {
    let answer = sink
        .requests()
        .send(Method::Get, path.to_owned(), None, Vec::new(), 1 << 20)
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    match answer.code {
        200 => Some(serde_json::from_slice(&answer.body).expect("JSON")),
        404 => None,
        code => panic!("GET {path}: {code}"),
    }
}

/// Creates event `name` in `default` through `api` with count 1 and returns its uid.
async fn create_event(sink: &HttpSink, core: bool, name: &str) -> String {
    let regarding = json!({"kind": "Pod", "namespace": "default", "name": "web-0", "uid": "p-1"});
    let (path, body) = if core {
        (
            "/api/v1/namespaces/default/events",
            json!({"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": name, "namespace": "default"},
                "involvedObject": regarding, "reason": "Deploy", "message": "m",
                "type": "Normal", "count": 1, "firstTimestamp": "2026-12-01T00:00:00Z",
                "lastTimestamp": "2026-12-01T00:00:00Z", "source": {"component": "t"}}),
        )
    } else {
        (
            "/apis/events.k8s.io/v1/namespaces/default/events",
            json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": name, "namespace": "default"},
                "eventTime": "2026-12-01T00:00:00.000000Z", "regarding": regarding,
                "reason": "Deploy", "note": "n", "type": "Normal", "action": "A",
                "reportingController": "example.com/t", "reportingInstance": "t-1"}),
        )
    };
    kevents_testkit::send_json(sink, Method::Post, path.to_owned(), APPLICATION_JSON, &body).await;
    let read = if core {
        format!("/api/v1/namespaces/default/events/{name}")
    } else {
        format!("/apis/events.k8s.io/v1/namespaces/default/events/{name}")
    };
    let stored = get(sink, &read).await.expect("the event just created");
    stored["metadata"]["uid"].as_str().expect("uid").to_owned()
}

/// Waits up to `secs` for a record of every uid in `uids` in the stream.
async fn wait_exported(nats: &str, uids: &[&str], secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let have: HashSet<String> = read_stream(nats)
            .await
            .into_iter()
            .map(|(_, r)| r.uid)
            .collect();
        if uids.iter().all(|u| have.contains(*u)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// `GET /metrics` of an exporter's listener (the body), waiting for it to listen.
fn metrics(port: u16) -> String {
    use std::io::Read;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(mut conn) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
                .expect("request");
            let mut text = String::new();
            conn.read_to_string(&mut text).expect("answer");
            return text
                .split_once("\r\n\r\n")
                .map(|(_, b)| b.to_owned())
                .unwrap_or(text);
        }
        assert!(Instant::now() < deadline, "no metrics listener on {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The metric families (`# TYPE` lines) of a `/metrics` body.
fn families(body: &str) -> HashSet<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// A `--leader-elect` replica as deploy/ runs it (Lease kevents/kevents-export), with the
/// tests' short durations.
fn spawn_replica(
    kubeconfig: &Path,
    api: &str,
    nats: &str,
    id: &str,
    port: u16,
    log: &Path,
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
        .args([
            "--api",
            api,
            "--nats",
            nats,
            "--stream",
            "export",
            "--progress",
            "1",
        ])
        .args([
            "--leader-elect",
            "--lease-namespace",
            "kevents",
            "--lease-name",
        ])
        .args(["kevents-export", "--identity", id])
        .args([
            "--lease-duration",
            "4",
            "--renew-deadline",
            "3",
            "--retry-period",
            "1",
        ])
        .arg(format!("--metrics-addr=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("running kevents export")
}

fn sigterm(child: &mut Child) -> std::process::ExitStatus {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    child.wait().expect("waiting for export")
}

/// The Lease's holder as stored (`""`: none).
async fn holder(sink: &HttpSink) -> String {
    get(
        sink,
        "/apis/coordination.k8s.io/v1/namespaces/kevents/leases/kevents-export",
    )
    .await
    .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_owned))
    .unwrap_or_default()
}

/// `kevents doctor --for export` as `kubeconfig`: exit code and stdout.
fn doctor(kubeconfig: &Path, api: &str) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("doctor")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--for", "export", "--api", api, "--leader-elect"])
        .args(["--lease-namespace", "kevents"])
        .output()
        .expect("running kevents doctor");
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The whole story for one event API (`core` or `events`, deploy/core-v1 or deploy/events-v1).
fn deploy_story(api: &str) {
    let (api_dir, core, doctor_api) = match api {
        "core" => ("core-v1", true, "core"),
        _ => ("events-v1", false, "events-v1"),
    };
    let server = kevents_testkit::RealApiserver::start()
        .expect("starting kube-apiserver")
        .expect("kube-apiserver is provisioned");
    let admin = server.admin_kubeconfig.clone();
    let server_minor = minor(&server.version);
    let deploy = deploy_dir();
    let args = apply_args(api_dir, server_minor);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let sink = rt.block_on(admin_sink(&server));

    // The kustomization builds on every version (kubectl's own kustomize, no network).
    let built = kubectl(
        &admin,
        &["kustomize", &deploy.join(api_dir).display().to_string()],
        None,
    );
    for kind in [
        "kind: Namespace",
        "kind: ServiceAccount",
        "kind: Role\n",
        "kind: RoleBinding",
        "kind: ClusterRole\n",
        "kind: ClusterRoleBinding",
        "kind: Service\n",
        "kind: PodDisruptionBudget",
        "kind: Deployment",
    ] {
        assert!(
            built.contains(kind),
            "{kind} missing from deploy/{api_dir}:\n{built}"
        );
    }

    // Server-side dry run: everything accepted, nothing stored. The namespace is created for
    // real first (a dry-run namespace does not exist for the objects in it).
    kubectl(
        &admin,
        &[
            "apply",
            "-f",
            &deploy.join("common/namespace.yaml").display().to_string(),
        ],
        None,
    );
    let mut dry = vec!["apply", "--dry-run=server"];
    dry.extend_from_slice(&args);
    let out = kubectl(&admin, &dry, None);
    assert_eq!(out.matches("(server dry run)").count(), 9, "{out}");
    rt.block_on(async {
        assert!(
            get(
                &sink,
                "/apis/apps/v1/namespaces/kevents/deployments/kevents-export"
            )
            .await
            .is_none()
        );
        assert!(
            get(
                &sink,
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/kevents-export-events"
            )
            .await
            .is_none()
        );
        assert!(
            get(
                &sink,
                "/api/v1/namespaces/kevents/serviceaccounts/kevents-export"
            )
            .await
            .is_none()
        );
    });

    // For real (no controller-manager runs: the Deployment makes no pods here).
    let mut real = vec!["apply"];
    real.extend_from_slice(&args);
    kubectl(&admin, &real, None);
    rt.block_on(async {
        let deployment = get(
            &sink,
            "/apis/apps/v1/namespaces/kevents/deployments/kevents-export",
        )
        .await
        .expect("the Deployment");
        assert_eq!(deployment["spec"]["replicas"], 2);
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let argv: Vec<&str> = container["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(argv.contains(&format!("--api={api}").as_str()), "{argv:?}");
        assert!(argv.contains(&"--leader-elect"), "{argv:?}");
        assert!(argv.contains(&"--identity=$(POD_NAME)"), "{argv:?}");
        let role = get(
            &sink,
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/kevents-export-events",
        )
        .await
        .expect("the ClusterRole");
        let group = if core { "" } else { "events.k8s.io" };
        assert_eq!(
            role["rules"],
            json!([{"apiGroups": [group], "resources": ["events"], "verbs": ["list", "watch"]}])
        );
    });

    // The ServiceAccount's identity: a TokenRequest token, in a kubeconfig of its own.
    let token = kubectl(
        &admin,
        &[
            "create",
            "token",
            "kevents-export",
            "-n",
            "kevents",
            "--duration=1h",
        ],
        None,
    );
    let token = token.trim();
    assert!(!token.is_empty());
    let dir = tempfile::tempdir().expect("temporary directory");
    let sa_kubeconfig = dir.path().join("sa.kubeconfig");
    std::fs::write(
        &sa_kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster:\n    server: {}\n    \
             certificate-authority: {}\nusers:\n- name: sa\n  user:\n    token: {token}\n\
             contexts:\n- name: sa\n  context:\n    cluster: k\n    user: sa\n    namespace: \
             kevents\ncurrent-context: sa\n",
            server.url,
            server.ca_file.display()
        ),
    )
    .expect("writing the kubeconfig");

    // doctor: every permission of the export is there.
    let (code, text) = doctor(&sa_kubeconfig, doctor_api);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(text.matches("[ok]").count(), 5, "{text}");
    assert!(!text.contains("DENIED"), "{text}");

    let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
    let nats_url = nats.url();
    let log = dir.path().join("export.log");
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let (first, second) = rt.block_on(async {
        let first = create_event(&sink, core, "before").await;
        // Two replicas as the ServiceAccount: one takes the Lease and exports.
        let (pa, pb) = (free_port(), free_port());
        let a = spawn_replica(&sa_kubeconfig, api, &nats_url, "replica-a", pa, &log);
        let b = spawn_replica(&sa_kubeconfig, api, &nats_url, "replica-b", pb, &log);
        assert!(
            wait_exported(&nats_url, &[first.as_str()], 30).await,
            "{}",
            log_text()
        );
        let second = create_event(&sink, core, "while-leading").await;
        assert!(
            wait_exported(&nats_url, &[second.as_str()], 30).await,
            "{}",
            log_text()
        );
        let h = holder(&sink).await;
        assert!(
            h == "replica-a" || h == "replica-b",
            "holder {h:?}\n{}",
            log_text()
        );
        let (leader_port, standby_port) = if h == "replica-a" { (pa, pb) } else { (pb, pa) };
        // The standby serves its metrics: leader 0 and every family the leader serves.
        let leading = metrics(leader_port);
        let standby = metrics(standby_port);
        assert!(leading.contains("\nkevents_export_leader 1\n"), "{leading}");
        assert!(standby.contains("\nkevents_export_leader 0\n"), "{standby}");
        assert!(
            standby.contains("\nkevents_export_records_total 0\n"),
            "{standby}"
        );
        assert!(
            standby.contains("kevents_export_incomplete_events_total{cause=\"deleted_unread\"} 0"),
            "{standby}"
        );
        let (lf, sf) = (families(&leading), families(&standby));
        assert!(lf.len() >= 12, "{leading}");
        assert!(
            lf.is_subset(&sf),
            "the standby lacks {:?}",
            lf.difference(&sf).collect::<Vec<_>>()
        );
        for mut child in [a, b] {
            let status = sigterm(&mut child);
            assert!(
                status.success(),
                "export after SIGTERM: {status}\n{}",
                log_text()
            );
        }
        // The holder released the Lease on SIGTERM.
        assert_eq!(holder(&sink).await, "", "{}", log_text());
        (first, second)
    });

    // Without update on the Lease: doctor says so, and no replica can lead.
    let lease_rbac =
        std::fs::read_to_string(deploy.join("common/lease-rbac.yaml")).expect("lease-rbac.yaml");
    let without_update = lease_rbac.replace("verbs: [\"get\", \"update\"]", "verbs: [\"get\"]");
    assert_ne!(without_update, lease_rbac);
    kubectl(&admin, &["apply", "-f", "-"], Some(&without_update));
    let (code, text) = doctor(&sa_kubeconfig, doctor_api);
    assert_eq!(code, Some(4), "{text}");
    assert_eq!(text.matches("DENIED").count(), 1, "{text}");
    assert!(
        text.contains(
            "[DENIED] update leases/kevents-export (coordination.k8s.io) in namespace kevents"
        ),
        "{text}"
    );
    // Who the identity is: SelfSubjectReview (1.26+); before, a placeholder to fill in.
    if server_minor >= 28 {
        assert!(
            text.contains(
                "kind: ServiceAccount\n  name: \"kevents-export\"\n  namespace: \"kevents\""
            ),
            "{text}"
        );
    } else {
        assert!(text.contains("<USER>"), "{text}");
    }
    assert!(
        text.contains("resourceNames: [\"kevents-export\"]\n  verbs: [\"get\", \"update\"]"),
        "{text}"
    );
    rt.block_on(async {
        let port = free_port();
        let mut c = spawn_replica(&sa_kubeconfig, api, &nats_url, "replica-c", port, &log);
        let third = create_event(&sink, core, "no-update").await;
        assert!(
            !wait_exported(&nats_url, &[third.as_str()], 8).await,
            "exported without update"
        );
        assert_eq!(holder(&sink).await, "", "{}", log_text());
        assert!(metrics(port).contains("\nkevents_export_leader 0\n"));
        let _ = sigterm(&mut c);
        assert!(
            log_text().contains("not allowed to update leases"),
            "{}",
            log_text()
        );

        // Lease back; without watch on events: nothing new is exported.
        kubectl(&admin, &["apply", "-f", "-"], Some(&lease_rbac));
        let rbac =
            std::fs::read_to_string(deploy.join(api_dir).join("rbac.yaml")).expect("rbac.yaml");
        let without_watch = rbac.replace("verbs: [\"list\", \"watch\"]", "verbs: [\"list\"]");
        assert_ne!(without_watch, rbac);
        kubectl(&admin, &["apply", "-f", "-"], Some(&without_watch));
        let (code, text) = doctor(&sa_kubeconfig, doctor_api);
        assert_eq!(code, Some(4), "{text}");
        assert_eq!(text.matches("DENIED").count(), 1, "{text}");
        assert!(text.contains("[DENIED] watch events"), "{text}");
        assert!(text.contains("kind: ClusterRole\n"), "{text}");
        let mut d = spawn_replica(
            &sa_kubeconfig,
            api,
            &nats_url,
            "replica-d",
            free_port(),
            &log,
        );
        // It leads; it continues from the stream's resume point with a watch, which is
        // refused: nothing since is exported.
        let deadline = Instant::now() + Duration::from_secs(30);
        while holder(&sink).await != "replica-d" {
            assert!(
                Instant::now() < deadline,
                "replica-d did not lead\n{}",
                log_text()
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let fourth = create_event(&sink, core, "no-watch").await;
        let missing = [third.as_str(), fourth.as_str()];
        assert!(
            !wait_exported(&nats_url, &missing[..1], 8).await,
            "exported without watch"
        );
        assert!(
            !wait_exported(&nats_url, &missing[1..], 1).await,
            "exported without watch"
        );
        assert!(
            log_text().contains("cannot watch resource \"events\""),
            "{}",
            log_text()
        );
        // The rule back: the watch (retried every 10 s) exports both.
        kubectl(&admin, &["apply", "-f", "-"], Some(&rbac));
        assert!(
            wait_exported(&nats_url, &missing, 40).await,
            "{}",
            log_text()
        );
        let status = sigterm(&mut d);
        assert!(status.success(), "{status}");
        // Exactly one record per event (each created with count 1), none twice.
        let records = read_stream(&nats_url).await;
        let ours: Vec<&ExportRecord> = records
            .iter()
            .map(|(_, r)| r)
            .filter(|r| [&first, &second, &third, &fourth].contains(&&r.uid))
            .collect();
        assert_eq!(ours.len(), 4, "{ours:?}");
        assert!(
            ours.iter().all(|r| r.count == 1 && r.delta == 1),
            "{ours:?}"
        );
    });
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn deploy_core_v1_applies_and_its_rbac_is_least_and_sufficient() {
        deploy_story("core");
    }

    #[test]
    fn deploy_events_v1_applies_and_its_rbac_is_least_and_sufficient() {
        deploy_story("events");
    }
}

/// Every `kevents_export_*` name the export's code uses is registered at start
/// (src/export_metrics.rs), so a standby serves it too.
#[test]
fn every_export_metric_is_registered_at_start() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let registered =
        std::fs::read_to_string(root.join("src/export_metrics.rs")).expect("export_metrics.rs");
    let mut sources = vec![
        root.join("src/export_cmd.rs"),
        root.join("src/export_shards.rs"),
    ];
    for entry in std::fs::read_dir(root.join("../kevents-export/src")).expect("kevents-export/src")
    {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            sources.push(path);
        }
    }
    let mut names = HashSet::new();
    for path in sources {
        let text = std::fs::read_to_string(&path).expect("source");
        for piece in text.split("\"kevents_export_").skip(1) {
            let name: String = piece
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            names.insert(format!("kevents_export_{name}"));
        }
    }
    assert!(names.len() >= 12, "{names:?}");
    for name in &names {
        assert!(
            registered.contains(&format!("name: \"{name}\"")),
            "{name} is used but not registered in src/export_metrics.rs"
        );
    }
}
