//! `HttpSink::infer_blocking` from plain synchronous code and from inside a tokio runtime,
//! with `KUBECONFIG` naming a temporary kubeconfig. The environment of this process is left
//! alone (setting a variable while other tests run is a race): the test runs itself again as
//! a child process with `KUBECONFIG` set, and the child does the checks.

use std::process::Command;

use kevents_http::HttpSink;

/// Set in the child process: its tests check; without it they start the child.
const CHILD: &str = "KEVENTS_INFER_BLOCKING_CHILD";

const KUBECONFIG: &str = "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: \"https://127.0.0.1:6443/prefix\", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t0ken}
contexts:
- name: x
  context: {cluster: c, user: u, namespace: team-a}
current-context: x
";

/// Runs `test` (this binary's test of that name) in a child process whose `KUBECONFIG` is a
/// temporary file holding [`KUBECONFIG`], and asserts that it passed.
fn in_child_with_kubeconfig(test: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    std::fs::write(&path, KUBECONFIG).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("KUBECONFIG", &path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(text.contains("1 passed"), "the child ran no test:\n{text}");
}

fn check(sink: &HttpSink) {
    assert_eq!(sink.base_url().as_str(), "https://127.0.0.1:6443/prefix");
    assert_eq!(sink.default_namespace(), "team-a");
}

#[test]
fn infer_blocking_from_plain_synchronous_code() {
    if std::env::var_os(CHILD).is_none() {
        return in_child_with_kubeconfig("infer_blocking_from_plain_synchronous_code");
    }
    // No runtime anywhere on this thread.
    assert!(tokio::runtime::Handle::try_current().is_err());
    let sink = HttpSink::infer_blocking().expect("the kubeconfig loads");
    check(&sink);
}

#[test]
fn infer_blocking_inside_a_runtime_does_not_panic() {
    if std::env::var_os(CHILD).is_none() {
        return in_child_with_kubeconfig("infer_blocking_inside_a_runtime_does_not_panic");
    }
    for runtime in [
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap(),
    ] {
        let sink = runtime.block_on(async { HttpSink::infer_blocking() });
        check(&sink.expect("the kubeconfig loads inside a runtime"));
    }
}

#[test]
fn infer_blocking_reports_a_missing_kubeconfig_as_an_error() {
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The child of this test sets KUBECONFIG to a file that does not exist.
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["missing_kubeconfig_child", "--exact", "--nocapture"])
        .env(CHILD, "1")
        .env("KUBECONFIG", dir.path().join("absent"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

/// The child of `infer_blocking_reports_a_missing_kubeconfig_as_an_error` (passes at once in
/// a plain run).
#[test]
fn missing_kubeconfig_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let err = HttpSink::infer_blocking().expect_err("no such kubeconfig");
    let text = err.to_string();
    assert!(text.contains("absent"), "{text}");
}
