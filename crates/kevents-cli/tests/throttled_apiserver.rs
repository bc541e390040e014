//! Exact counts against a hardened, throttling kube-apiserver (v1.20.2, or v1.36 with
//! `KEVENTS_K8S_VERSION=1.36`): the `EventRateLimit`
//! admission plugin (as the CIS Kubernetes benchmark asks) with each kind of limit, the demo
//! and workload `api` under it, four processes sharing one `Server` limit (adapting alone,
//! and sharing their write law through a Lease), and a user whose
//! API Priority and Fairness level has one seat. Every run
//! reads the events back and checks every stored count against what was written and what
//! client-go's serial path stores (the commands fail on a mismatch); nothing is lost.
//!
//! Ignored with the command that runs them where the apiserver is not provisioned; run (and
//! failing without it) in CI.

use std::path::Path;
use std::process::{Command, Output};

use kevents_testkit::RealApiserver;

fn start(limits: &[(&str, u32, u32)]) -> RealApiserver {
    RealApiserver::start_with_event_rate_limits(limits)
        .expect("starting the real kube-apiserver")
        .expect("kube-apiserver is not provisioned (see above)")
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn bench(kubeconfig: &Path, ns: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kevents"));
    c.args(["bench", "apiserver", "--namespace", ns, "--kubeconfig"])
        .arg(kubeconfig);
    c
}

/// Runs workload `api` (3 000 occurrences, 600 events, 2 500 past the spam filter) and
/// checks its JSON line: every event stored with its exact count, nothing dropped or failed.
fn checked(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().expect("one JSON line");
    let r: serde_json::Value = serde_json::from_str(line).expect("JSON");
    assert_eq!(r["stored_counts_ok"], true, "{r}");
    assert_eq!(r["stored_events"], 600, "{r}");
    assert_eq!(r["sum_count"], r["expected_sum_count"], "{r}");
    assert_eq!(
        (r["failed"].as_u64(), r["dropped"].as_u64()),
        (Some(0), Some(0)),
        "{r}"
    );
    eprintln!(
        "{}: {:.1} s, {} requests, {} answered 429, rate at the end {}",
        r["server"], r["seconds"], r["requests"], r["throttled"], r["budget_rate"]
    );
    r
}

fn api_workload_under(limits: &[(&str, u32, u32)]) -> serde_json::Value {
    let server = start(limits);
    server
        .create_namespace("bench")
        .expect("kubectl create namespace");
    let out = bench(&server.admin_kubeconfig, "bench")
        .output()
        .expect("running kevents bench apiserver");
    checked(&out)
}

fn throttled(r: &serde_json::Value) {
    assert!(
        r["throttled"].as_u64() > Some(0),
        "the limit was reached: {r}"
    );
}

/// A tight API Priority and Fairness level for the user `nobody`: one seat (of 30 in all),
/// requests beyond it rejected with 429 and `Retry-After`; and the rights to write events.
/// `{VERSION}` and `{LIMITED}` are filled in by [`apf_objects`] for the served API version.
const APF: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: kevents-event-writer}
rules:
- apiGroups: ["", "events.k8s.io"]
  resources: [events]
  verbs: [create, patch, get, list, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kevents-event-writer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kevents-event-writer}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: nobody}
---
apiVersion: flowcontrol.apiserver.k8s.io/{VERSION}
kind: PriorityLevelConfiguration
metadata: {name: kevents-tight}
spec:
  type: Limited
  limited:
{LIMITED}
    limitResponse: {type: Reject}
---
apiVersion: flowcontrol.apiserver.k8s.io/{VERSION}
kind: FlowSchema
metadata: {name: kevents-tight}
spec:
  priorityLevelConfiguration: {name: kevents-tight}
  matchingPrecedence: 100
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects:
    - kind: User
      user: {name: nobody}
    resourceRules:
    - {verbs: ["*"], apiGroups: ["*"], resources: ["*"], namespaces: ["*"], clusterScope: true}
    nonResourceRules:
    - {verbs: ["*"], nonResourceURLs: ["*"]}
"#;

/// The APF objects in the version of `flowcontrol.apiserver.k8s.io` the server serves, as its
/// discovery says: `v1beta1` on 1.20 (removed in 1.26), `v1` on 1.29 and later. `v1beta3`
/// renamed `assuredConcurrencyShares` to `nominalConcurrencyShares` and added borrowing;
/// `borrowingLimitPercent: 0` keeps the level at its one seat (unset, it may borrow without
/// limit from levels that lend).
fn apf_objects(kubeconfig: &Path) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "--raw", "/apis/flowcontrol.apiserver.k8s.io"])
        .output()
        .expect("running kubectl");
    assert!(out.status.success(), "{}", text(&out));
    let group: serde_json::Value = serde_json::from_slice(&out.stdout).expect("discovery JSON");
    let served: Vec<&str> = group["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .filter_map(|v| v["version"].as_str())
        .collect();
    let (version, limited) = if served.contains(&"v1") {
        (
            "v1",
            "    nominalConcurrencyShares: 1\n    lendablePercent: 0\n    borrowingLimitPercent: 0",
        )
    } else if served.contains(&"v1beta1") {
        ("v1beta1", "    assuredConcurrencyShares: 1")
    } else {
        panic!("flowcontrol.apiserver.k8s.io serves neither v1 nor v1beta1: {served:?}");
    };
    eprintln!("flowcontrol.apiserver.k8s.io/{version} (served: {served:?})");
    APF.replace("{VERSION}", version)
        .replace("{LIMITED}", limited)
}

kevents_testkit::real_apiserver_tests! {
    /// Workload `api` as a user whose API Priority and Fairness level has one seat (429s with
    /// `Retry-After`, which apply to the whole budget): every count stored exactly.
    #[test]
    fn api_workload_under_a_tight_priority_level_is_exact() {
        let server = RealApiserver::start_with_args(&[
            "--max-requests-inflight=20",
            "--max-mutating-requests-inflight=10",
        ])
        .expect("starting the real kube-apiserver")
        .expect("kube-apiserver is not provisioned (see above)");
        let file = server.state_dir().join("apf.yaml");
        std::fs::write(&file, apf_objects(&server.admin_kubeconfig))
            .expect("writing the APF objects");
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&server.admin_kubeconfig)
            .arg("apply")
            .arg("-f")
            .arg(&file)
            .output()
            .expect("running kubectl");
        assert!(out.status.success(), "{}", text(&out));
        server.create_namespace("apf").expect("kubectl create namespace");
        // The apiserver's APF controller picks the new objects up within a few seconds.
        std::thread::sleep(std::time::Duration::from_secs(5));
        let out = bench(&server.nobody_kubeconfig, "apf")
            .output()
            .expect("running kevents bench apiserver");
        throttled(&checked(&out));
    }

    /// The demo's story (three components, 596 occurrences) against SourceAndObject qps 1
    /// burst 5: the stored counts are the ones its in-memory run stores, event by event
    /// (before the fix of issue 23 they were rolled back: 338-340 of 352).
    #[test]
    fn demo_under_source_and_object_limits_stores_its_in_memory_counts() {
        let server = start(&[("SourceAndObject", 1, 5)]);
        let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
            .arg("demo")
            .arg("--kubeconfig")
            .arg(&server.admin_kubeconfig)
            .args(["--namespace", "throttled", "--pace-ms", "0"])
            .output()
            .expect("running kevents demo");
        let all = text(&out);
        assert_eq!(out.status.code(), Some(0), "{all}");
        assert!(
            all.contains("every stored count read back is the one written and the one the in-memory run stores"),
            "{all}"
        );
    }

    /// Workload `api` under EventRateLimit Namespace qps 50 burst 100.
    #[test]
    fn api_workload_under_a_namespace_limit_is_exact() {
        throttled(&api_workload_under(&[("Namespace", 50, 100)]));
    }

    /// Workload `api` under EventRateLimit User qps 20 burst 50.
    #[test]
    fn api_workload_under_a_user_limit_is_exact() {
        throttled(&api_workload_under(&[("User", 20, 50)]));
    }

    /// Workload `api` under EventRateLimit SourceAndObject qps 1 burst 5 (about six writes
    /// per object: few or no 429s), then under three limits at once.
    #[test]
    fn api_workload_under_a_source_and_object_limit_is_exact() {
        api_workload_under(&[("SourceAndObject", 1, 5)]);
        throttled(&api_workload_under(&[
            ("SourceAndObject", 1, 3),
            ("Namespace", 80, 100),
            ("User", 60, 100),
        ]));
    }

    /// Four processes, each a pipeline with its own adaptive budget, share one Server limit
    /// (qps 100, burst 200): all end exact, none starved.
    #[test]
    fn four_processes_sharing_a_server_limit_all_end_exact() {
        let server = start(&[("Server", 100, 200)]);
        let children: Vec<_> = (0..4)
            .map(|i| {
                let ns = format!("fleet-{i}");
                server.create_namespace(&ns).expect("kubectl create namespace");
                bench(&server.admin_kubeconfig, &ns)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("starting kevents bench apiserver")
            })
            .collect();
        let mut throttled = 0;
        for child in children {
            let out = child.wait_with_output().expect("waiting for kevents");
            throttled += checked(&out)["throttled"].as_u64().unwrap_or(0);
        }
        assert!(throttled > 0, "the shared limit was reached");
    }

    /// The same four sharing their write law through one Lease (`--fleet-lease`): all end
    /// exact; the Lease holds the fleet's law (its annotation, a decrease or more past the
    /// first 429), written by the processes and followed by the others.
    #[test]
    fn four_processes_sharing_their_law_through_a_lease_all_end_exact() {
        let server = start(&[("Server", 100, 200)]);
        let children: Vec<_> = (0..4)
            .map(|i| {
                let ns = format!("shared-{i}");
                server.create_namespace(&ns).expect("kubectl create namespace");
                bench(&server.admin_kubeconfig, &ns)
                    .args(["--fleet-lease", "default/kevents-fleet"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("starting kevents bench apiserver")
            })
            .collect();
        let (mut throttled, mut proposed, mut adopted) = (0, 0, 0);
        for child in children {
            let out = child.wait_with_output().expect("waiting for kevents");
            let r = checked(&out);
            throttled += r["throttled"].as_u64().unwrap_or(0);
            proposed += r["fleet_laws_proposed"].as_u64().unwrap_or(0);
            adopted += r["fleet_laws_adopted"].as_u64().unwrap_or(0);
        }
        assert!(throttled > 0, "the shared limit was reached");
        assert!(proposed > 0, "laws decided after 429s");
        assert!(adopted >= 3, "the others followed them: {adopted}");
        let lease = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&server.admin_kubeconfig)
            .args(["get", "lease", "-n", "default", "kevents-fleet", "-o", "json"])
            .output()
            .expect("kubectl get lease");
        assert!(lease.status.success(), "{}", text(&lease));
        let lease: serde_json::Value = serde_json::from_slice(&lease.stdout).expect("JSON");
        let law = lease["metadata"]["annotations"]["kevents.io/fleet-law"]
            .as_str()
            .expect("the law's annotation");
        let law = kevents_core::fleet::FleetLaw::from_annotation(law).expect("a valid law");
        assert!(law.epoch >= 2, "{law:?}");
    }

    /// A Lease holding a hostile law (epoch u64::MAX, 1e-9 writes per second): members that
    /// name it are not stopped by it (the law is refused, they adapt alone and replace it):
    /// the run ends exact, about as fast as adapting alone.
    #[test]
    fn a_hostile_fleet_law_leaves_members_as_fast_as_adapting_alone() {
        let server = start(&[("Server", 100, 200)]);
        server.create_namespace("alone").expect("kubectl create namespace");
        server.create_namespace("hostile").expect("kubectl create namespace");
        let alone = bench(&server.admin_kubeconfig, "alone").output().expect("bench alone");
        let alone = checked(&alone)["seconds"].as_f64().expect("seconds");
        let since = kevents_core::fleet::FleetLaw::micros_of(std::time::SystemTime::now());
        let law = format!(
            r#"{{"epoch":18446744073709551615,"phase":"Adapted","from":1e-9,"sinceMicros":{since}}}"#
        );
        let lease = serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "hostile", "namespace": "default",
                         "annotations": {"kevents.io/fleet-law": law}},
            "spec": {"holderIdentity": "mallory"}
        });
        let mut create = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&server.admin_kubeconfig)
            .args(["create", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("kubectl create");
        use std::io::Write as _;
        create
            .stdin
            .take()
            .expect("stdin")
            .write_all(lease.to_string().as_bytes())
            .expect("the Lease");
        let made = create.wait_with_output().expect("kubectl");
        assert!(made.status.success(), "{}", text(&made));
        // Bounded: a member stopped by the law would not end (90 s and more before the fix).
        let mut child = bench(&server.admin_kubeconfig, "hostile")
            .args(["--fleet-lease", "default/hostile"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("bench with the hostile Lease");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(alone as u64 * 3 + 30);
        while child.try_wait().expect("status").is_none() {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let out = child.wait_with_output().expect("output");
                panic!("the member is stopped by the hostile law:\n{}", text(&out));
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let out = child.wait_with_output().expect("output");
        let hostile = checked(&out)["seconds"].as_f64().expect("seconds");
        eprintln!("alone {alone:.1} s, with the hostile Lease {hostile:.1} s");
        assert!(hostile <= alone * 1.5 + 3.0, "alone {alone:.1} s, hostile Lease {hostile:.1} s");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("out-of-bounds law"),
            "the refusal is logged at warn:\n{}",
            text(&out)
        );
    }
}
