//! `kevents demo --kubeconfig F` against a real kube-apiserver v1.20.2 where F's user is an
//! exec credential plugin (a bash script that counts its runs): the story is written and read
//! back, and the plugin runs a handful of times, not once per request. Ignored, with the
//! command that runs it, where the apiserver is not provisioned; run (and failing without
//! it) in CI or with `KEVENTS_REQUIRE_APISERVER=1`.

use std::process::Command;

use kevents_testkit::RealApiserver;

/// The value of a row of the demo's counter table (`  requests      123`).
fn counter(stdout: &str, name: &str) -> Option<u64> {
    stdout.lines().find_map(|l| {
        let rest = l.trim_start().strip_prefix(name)?;
        let value = rest.trim();
        (!value.is_empty() && value.chars().all(|c| c.is_ascii_digit()))
            .then(|| value.parse().ok())
            .flatten()
    })
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn demo_with_an_exec_plugin_kubeconfig_runs_the_plugin_a_handful_of_times() {
        let server = RealApiserver::start()
            .expect("starting the real kube-apiserver")
            .expect("kube-apiserver is not provisioned (see above)");
        let token = server.exec_tokens[0].clone();
        let dir = tempfile::tempdir().unwrap();
        let plugin = dir.path().join("plugin.sh");
        std::fs::write(
            &plugin,
            format!(
                r#"#!/bin/bash
D="$(cd "$(dirname "$0")" && pwd)"
echo run >> "$D/runs"
printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{token}"}}}}\n'
"#
            ),
        )
        .unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: plug\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n      command: /bin/bash\n      args: [\"{}\"]\n      installHint: \"the test writes it\"\ncontexts:\n- name: real\n  context: {{cluster: real, user: plug, namespace: default}}\ncurrent-context: real\n",
                server.url,
                server.ca_file.display(),
                plugin.display()
            ),
        )
        .unwrap();
        let ns = format!("kevents-exec-demo-{}", std::process::id());
        let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
            .arg("demo")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--namespace", &ns, "--pace-ms", "0"])
            .output()
            .expect("running kevents demo");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(
            stdout.contains("accounting: every occurrence is accounted for"),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("kube-apiserver {}", server.version)),
            "{stdout}"
        );
        assert!(!stdout.contains(&token) && !stderr.contains(&token));
        let runs = std::fs::read_to_string(dir.path().join("runs"))
            .map(|s| s.lines().count())
            .unwrap_or(0);
        let requests = counter(&stdout, "requests").expect("a requests counter");
        let stored = counter(&stdout, "stored events").expect("a stored events counter");
        eprintln!("exec plugin runs: {runs}; pipeline requests: {requests}; stored events: {stored}");
        // kevents: the probes and the pipeline share one cached credential (one run);
        // `kubectl create namespace` runs the plugin itself once more.
        assert!((1..=5).contains(&runs), "{runs} plugin runs");
        assert!(requests >= 20, "{requests} requests\n{stdout}");
    }
}
