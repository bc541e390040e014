//! `kevents doctor`: may a kubeconfig's identity write events where a recorder will write
//! them? Against the simulator (which answers SelfSubjectAccessReview: its admin token is
//! allowed everything, its nobody token nothing) and a real kube-apiserver v1.20.2
//! (kevents-testkit's `RealApiserver`: RBAC, the admin token in `system:masters`, `nobody`
//! without any role). Exit code 0: events will be written; 4: every problem named.

use std::path::Path;
use std::process::Command;

use kevents_testkit::RealApiserver;

fn doctor(kubeconfig: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("doctor")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("running kevents doctor");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The line naming a missing permission.
fn denied(verb: &str, group: &str, ns: &str) -> String {
    format!("may not {verb} events in API group {group} in namespace \"{ns}\"")
}

const V1: &str = "\"events.k8s.io\"";
const CORE: &str = "\"\" (core)";

/// What both apiservers must answer: the admin may do everything (exit 0), nobody nothing
/// (exit 4, each verb in each namespace named, the cluster-scoped objects' namespace
/// included), a reporting instance over 128 bytes is named even for the admin, and
/// `--api core` checks group "" and the namespace `default`.
fn check_both_identities(admin: &Path, nobody: &Path, secrets: &[&str]) {
    let (code, stdout, stderr) = doctor(admin, &["-n", "team-a", "-n", "team-b"]);
    assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("events are written with events.k8s.io/v1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("no problem found: events will be written"),
        "{stdout}"
    );
    // Two namespaces and kube-system, two verbs each.
    assert_eq!(stdout.matches(" allowed").count(), 6, "{stdout}");

    let (code, stdout, stderr) = doctor(nobody, &["-n", "team-a", "-n", "team-b"]);
    assert_eq!(code, Some(4), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for ns in ["team-a", "team-b", "kube-system"] {
        for verb in ["create", "patch"] {
            assert!(
                stdout.contains(&denied(verb, V1, ns)),
                "{verb} {ns}:\n{stdout}"
            );
        }
    }
    assert!(
        stdout.contains("6 problems (events would be lost)"),
        "{stdout}"
    );
    assert!(
        stderr.contains("kevents: events would be lost: 6 problems found"),
        "{stderr}"
    );
    // The fix, for the identity checked: a Role and a RoleBinding per namespace.
    for ns in ["team-a", "team-b", "kube-system"] {
        assert!(
            stdout.contains(&format!(
                "kubectl create role kevents-events-writer --namespace={ns} \
                 --verb=create,patch --resource=events.events.k8s.io"
            )),
            "{ns}:\n{stdout}"
        );
        assert!(
            stdout.contains(&format!(
                "kubectl create rolebinding kevents-events-writer --namespace={ns} \
                 --role=kevents-events-writer --user="
            )),
            "{ns}:\n{stdout}"
        );
    }

    let long = "i".repeat(200);
    let (code, stdout, _) = doctor(
        admin,
        &[
            "-n",
            "team-a",
            "--reporting-instance",
            &long,
            "--reporting-controller",
            "Not A Name",
        ],
    );
    assert_eq!(code, Some(4), "{stdout}");
    assert!(
        stdout.contains("reportingInstance is 200 bytes, more than 128"),
        "{stdout}"
    );
    assert!(
        stdout.contains("reportingController \"Not A Name\""),
        "{stdout}"
    );

    let (code, stdout, _) = doctor(nobody, &["-n", "team-a", "--api", "core"]);
    assert_eq!(code, Some(4), "{stdout}");
    for ns in ["team-a", "default"] {
        for verb in ["create", "patch"] {
            assert!(
                stdout.contains(&denied(verb, CORE, ns)),
                "{verb} {ns}:\n{stdout}"
            );
        }
    }
    assert!(
        !stdout.contains("reportingInstance"),
        "core/v1: no reporting names"
    );

    for secret in secrets {
        for run in [doctor(admin, &[]), doctor(nobody, &[])] {
            assert!(!run.1.contains(secret) && !run.2.contains(secret));
        }
    }
}

#[test]
fn doctor_against_the_simulator_names_every_missing_permission() {
    let sim = kevents_sim::Simulator::start_blocking(kevents_sim::SimConfig::like_apiserver())
        .expect("simulator");
    let dir = tempfile::tempdir().expect("tempdir");
    let admin = dir.path().join("admin.kubeconfig");
    let nobody = dir.path().join("nobody.kubeconfig");
    std::fs::write(&admin, sim.kubeconfig(sim.admin_token(), "default")).unwrap();
    std::fs::write(&nobody, sim.kubeconfig(sim.nobody_token(), "default")).unwrap();
    let secrets = [sim.admin_token().unwrap(), sim.nobody_token().unwrap()];
    check_both_identities(&admin, &nobody, &secrets);
}

#[test]
fn doctor_refuses_a_bad_namespace_before_sending_anything() {
    let sim = kevents_sim::Simulator::start_blocking(kevents_sim::SimConfig::like_apiserver())
        .expect("simulator");
    let dir = tempfile::tempdir().expect("tempdir");
    let admin = dir.path().join("admin.kubeconfig");
    std::fs::write(&admin, sim.kubeconfig(sim.admin_token(), "default")).unwrap();
    let (code, stdout, stderr) = doctor(&admin, &["-n", "Bad_NS"]);
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("invalid --namespace \"Bad_NS\""),
        "{stderr}"
    );
    assert_eq!(sim.stats().requests, 0, "nothing sent");
}

// Listed as ignored, with the command that runs it, where the apiserver is not provisioned;
// run (and failing without it) in CI.
/// The manifests `doctor -o yaml` prints for the nobody identity, applied with the admin
/// identity (`<USER>`, where the apiserver cannot say who it is, replaced by `nobody`, the
/// user of start.sh's nobody token): doctor then finds nothing missing.
fn apply_the_printed_fix(admin: &Path, nobody: &Path) {
    use kevents_core::request::{APPLICATION_JSON, Method};
    let (code, yaml, stderr) = doctor(nobody, &["-n", "default", "-o", "yaml"]);
    assert_eq!(code, Some(4), "{yaml}\n{stderr}");
    assert!(
        stderr.contains("problems (events would be lost)"),
        "{stderr}"
    );
    let yaml = yaml.replace("<USER>", "nobody");
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&yaml).expect("doctor's YAML parses");
    let kinds: Vec<&str> = docs.iter().filter_map(|d| d["kind"].as_str()).collect();
    assert_eq!(
        kinds,
        ["Role", "RoleBinding", "Role", "RoleBinding"],
        "{yaml}"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let config = kevents_http::HttpConfig::from_kubeconfig(Some(admin), None)
            .await
            .expect("admin kubeconfig");
        let sink = kevents_http::HttpSink::new(config).expect("admin sink");
        for doc in &docs {
            let ns = doc["metadata"]["namespace"].as_str().expect("namespace");
            let plural = match doc["kind"].as_str() {
                Some("Role") => "roles",
                _ => "rolebindings",
            };
            let path = format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/{plural}");
            let body = serde_json::to_vec(doc).expect("json");
            let answer = sink
                .requests()
                .send(Method::Post, path, Some(APPLICATION_JSON), body, 1 << 20)
                .await
                .expect("apply");
            assert_eq!(
                answer.code,
                201,
                "{}",
                String::from_utf8_lossy(&answer.body)
            );
        }
    });
    let (code, stdout, stderr) = doctor(nobody, &["-n", "default"]);
    assert_eq!(code, Some(0), "after the fix:\n{stdout}\n{stderr}");
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn doctor_prints_a_fix_that_works_on_the_real_apiserver() {
        let server = RealApiserver::start()
            .expect("starting the real kube-apiserver")
            .expect("kube-apiserver is not provisioned (see above)");
        apply_the_printed_fix(&server.admin_kubeconfig, &server.nobody_kubeconfig);
    }

    #[test]
    fn doctor_against_the_real_apiserver_names_every_missing_permission() {
        let server = RealApiserver::start()
            .expect("starting the real kube-apiserver")
            .expect("kube-apiserver is not provisioned (see above)");
        check_both_identities(
            &server.admin_kubeconfig,
            &server.nobody_kubeconfig,
            &[&server.admin_token, &server.nobody_token],
        );
    }
}

/// A plain-HTTP apiserver that answers `GET /version` and discovery, and accepts every
/// `SelfSubjectAccessReview` without ever answering it (its connection stays open).
fn silent_reviewer() -> std::net::SocketAddr {
    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            let Ok(clone) = stream.try_clone() else {
                continue;
            };
            held.push(clone);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let path = request_line.split(' ').nth(1).unwrap_or("").to_owned();
                    if path.contains("accessreviews") || path.contains("selfsubjectreviews") {
                        // Accepted, never answered.
                        std::thread::sleep(std::time::Duration::from_secs(3600));
                        return;
                    }
                    let (status, body) = if path == "/version" {
                        (
                            "200 OK",
                            r#"{"major":"1","minor":"20","gitVersion":"v1.20.2"}"#,
                        )
                    } else {
                        (
                            "404 Not Found",
                            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#,
                        )
                    };
                    let answer = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if reader.get_mut().write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// docs/preflight.md: exit 3 when the server does not answer within 5 s. One deadline for
/// all the reviews: before, each review waited for the 10 s request timeout, one after the
/// other (`-n a1 -n a2 -n a3`: 80 s of silence, then exit 4).
#[test]
fn doctor_gives_up_on_a_server_that_never_answers_the_reviews_with_exit_3() {
    let addr = silent_reviewer();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"http://{addr}\"}}}}]\n\
             users: [{{name: u, user: {{}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\n\
             current-context: x\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("doctor")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--api", "core", "-n", "a1", "-n", "a2", "-n", "a3"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("running kevents doctor");
    // A guard, not a timing assertion: the old code took 80 s; give up well after 5 s.
    let started = std::time::Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if started.elapsed() > std::time::Duration::from_secs(40) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("waiting");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "stderr:\n{stderr}");
    assert!(
        stderr.contains("did not answer the access reviews within 5 s"),
        "{stderr}"
    );
}
