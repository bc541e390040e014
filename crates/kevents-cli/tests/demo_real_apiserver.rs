//! `kevents demo` against a real kube-apiserver v1.20.2 (kevents-testkit's
//! `RealApiserver`): a user without rights is refused by the probe before anything is
//! written (exit code 3), the admin runs the whole story and reads it back (exit code 0).
//!
//! Without a provisioned apiserver this test prints why and passes, except in CI (`CI=true`)
//! or with `KEVENTS_REQUIRE_APISERVER=1`, where it fails.

use std::process::Command;

use kevents_testkit::RealApiserver;

fn demo(kubeconfig: &std::path::Path, namespace: &str) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("demo")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", namespace, "--pace-ms", "0"])
        .output()
        .expect("running kevents demo");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// Listed as ignored, with the command that runs it, where the apiserver is not provisioned;
// run (and failing without it) in CI.
kevents_testkit::real_apiserver_tests! {
    #[test]
    fn demo_probes_the_real_apiserver_then_writes_and_reads_the_story_back() {
        let server = RealApiserver::start()
            .expect("starting the real kube-apiserver")
            .expect("kube-apiserver is not provisioned (see above)");
        let ns = format!("kevents-demo-{}", std::process::id());

        let (code, stdout, stderr) = demo(&server.nobody_kubeconfig, &ns);
        assert_eq!(code, Some(3), "stdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(
            stderr.contains("403 Forbidden") && stderr.contains(&ns),
            "{stderr}"
        );
        assert!(stdout.is_empty(), "{stdout}");
        for secret in [&server.nobody_token, &server.admin_token] {
            assert!(!stdout.contains(secret.as_str()) && !stderr.contains(secret.as_str()));
        }

        let (code, stdout, stderr) = demo(&server.admin_kubeconfig, &ns);
        assert_eq!(code, Some(0), "stdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(
            stdout.contains("accounting: every occurrence is accounted for"),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("kube-apiserver {}", server.version)),
            "{stdout}"
        );
        assert!(
            !stdout.contains(server.admin_token.as_str())
                && !stderr.contains(server.admin_token.as_str())
        );
    }
}
