//! `kevents export`'s usage errors exit 2 before anything is connected to: the NATS server
//! named here (a closed port) and the kubeconfig (a file that does not exist) are never
//! reached, so each message is the option's own (docs/cli-bounds.md).

use std::process::Command;

/// Runs `kevents export` with `args`: (exit code, stderr).
fn export(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let nats: &[&str] = if args.contains(&"--nats") {
        &[]
    } else {
        &["--nats", "nats://127.0.0.1:1"]
    };
    let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("export")
        .args(["--kubeconfig", "/nonexistent/kubeconfig"])
        .args(nats)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("running kevents export");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn configuration_errors_exit_2_before_nats_or_the_apiserver() {
    for (args, says) in [
        (
            &[
                "--leader-elect",
                "--lease-duration",
                "4",
                "--renew-deadline",
                "4",
            ][..],
            "must be greater than the renew deadline",
        ),
        (
            &["--leader-elect", "--identity", ""][..],
            "identity is empty",
        ),
        (
            &["--leader-elect", "--lease-name", "../../x"][..],
            "../../x",
        ),
        (&["--stream", "a.b"][..], "\"a.b\""),
        (&["--stream", "a b"][..], "\"a b\""),
        (&["--namespace", "Not_A_Namespace"][..], "Not_A_Namespace"),
        (
            &["--nats", "nats://h:1,http://h:2"][..],
            "server 2 of the list",
        ),
        (&["--nats-user", "u"][..], "needs a password"),
        (
            &["--nats-creds", "/nonexistent/u.creds"][..],
            "/nonexistent/u.creds",
        ),
    ] {
        let (code, text) = export(args, &[]);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
        assert!(
            !text.contains("kubeconfig"),
            "{args:?} reached the kubeconfig: {text}"
        );
    }
}

#[test]
fn a_url_password_is_never_printed_even_in_a_refusal() {
    let (code, text) = export(
        &[
            "--nats",
            "nats://me:hunter2-Secret@127.0.0.1:1",
            "--stream",
            "a.b",
        ],
        &[("RUST_LOG", "trace")],
    );
    assert_eq!(code, 2, "{text}");
    assert!(!text.contains("hunter2-Secret"), "{text}");
    // Two ways to authenticate at once: refused, neither secret shown.
    let (code, text) = export(
        &["--nats", "nats://me:hunter2-Secret@127.0.0.1:1"],
        &[("NATS_TOKEN", "tok-Secret-99")],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("one way to authenticate"), "{text}");
    assert!(
        !text.contains("hunter2-Secret") && !text.contains("tok-Secret-99"),
        "{text}"
    );
}

/// Runs `kevents export` without NATS (no `--nats`, no NATS_URL) with `args`.
fn export_without_nats(args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("export")
        .args(["--kubeconfig", "/nonexistent/kubeconfig"])
        .args(args)
        .env_remove("NATS_URL")
        .envs(env.iter().copied())
        .output()
        .expect("running kevents export");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn otlp_and_webhook_option_errors_exit_2_without_showing_a_secret() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let token = dir.path().join("token");
    std::fs::write(&token, "Bearer s3cret-T0ken\n").expect("token file");
    let not_pem = dir.path().join("ca.pem");
    std::fs::write(&not_pem, "s3cret-T0ken is not a certificate").expect("ca file");
    let token_arg = format!("Authorization={}", token.display());
    let ca_arg = not_pem.display().to_string();
    for (args, says) in [
        (
            &["--otlp", "http://user:s3cret-T0ken@127.0.0.1:4318"][..],
            "carries no credentials",
        ),
        (&["--webhook", "ftp://127.0.0.1/x"][..], "http or https"),
        (
            &[
                "--otlp",
                "http://127.0.0.1:4318",
                "--webhook",
                "http://127.0.0.1:9",
            ][..],
            "need NATS",
        ),
        (
            &[
                "--otlp",
                "http://127.0.0.1:4318",
                "--otlp-header",
                "=s3cret-T0ken",
            ][..],
            "without a name",
        ),
        (
            &[
                "--otlp",
                "http://127.0.0.1:4318",
                "--otlp-header-file",
                "Authorization=/nonexistent/t",
            ][..],
            "/nonexistent/t",
        ),
        (
            &[
                "--otlp",
                "http://127.0.0.1:4318",
                "--otlp-header-env",
                "Authorization=KEVENTS_TEST_UNSET_VAR",
            ][..],
            "KEVENTS_TEST_UNSET_VAR is not set",
        ),
        (
            &[
                "--otlp",
                "https://127.0.0.1:4318",
                "--otlp-header-file",
                &token_arg,
                "--otlp-ca",
                &ca_arg,
            ][..],
            "holds no certificate",
        ),
        (
            &[
                "--webhook",
                "http://127.0.0.1:9",
                "--resume-configmap",
                "Bad_Name",
            ][..],
            "Bad_Name",
        ),
    ] {
        let (code, text) = export_without_nats(args, &[]);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(text.contains(says), "{args:?}: {text}");
        assert!(!text.contains("s3cret"), "{args:?} showed a secret: {text}");
        assert!(
            !text.contains("kubeconfig"),
            "{args:?} reached the kubeconfig: {text}"
        );
    }
}
