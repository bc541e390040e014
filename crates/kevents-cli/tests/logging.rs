//! `kevents` logs through `tracing` to stderr as `RUST_LOG` asks, is quiet without it, and never
//! writes a log line to stdout (which carries the replay and bench output).

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn kevents(args: &[&str], rust_log: Option<&str>, stdin: &[u8]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kevents"));
    cmd.args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(filter) = rust_log {
        cmd.env("RUST_LOG", filter);
    }
    let mut child = cmd.spawn().expect("kevents binary runs");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    let _ = pipe.write_all(stdin);
    drop(pipe);
    child.wait_with_output().expect("kevents finishes")
}

const TRACE: &str = concat!(
    r#"{"time": 1700000000000000000, "object": {"name": "a"}, "type": "Normal", "reason": "r", "message": "m"}"#,
    "\n",
    r#"{"time": 1700000000000000001, "object": {"name": "a"}, "type": "Normal", "reason": "r", "message": "m"}"#,
    "\n"
);

/// Lines that look like `tracing`'s fmt output: a level word after the timestamp.
fn log_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| {
            [" TRACE ", " DEBUG ", " INFO ", " WARN ", " ERROR "]
                .iter()
                .any(|level| l.contains(level))
        })
        .collect()
}

#[test]
fn replay_logs_to_stderr_only_when_asked() {
    let out = kevents(&["replay"], Some("kevents=debug"), TRACE.as_bytes());
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let logs = log_lines(&stderr);
    assert!(
        logs.iter()
            .any(|l| l.contains("DEBUG") && l.contains("replay")),
        "no debug line about the replay on stderr: {stderr}"
    );
    // stdout: exactly the two decisions, each a JSON object.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a decision, not a log line");
        assert!(v["action"].is_string());
    }

    // Without RUST_LOG the command is quiet.
    let quiet = kevents(&["replay"], None, TRACE.as_bytes());
    assert!(quiet.status.success());
    assert!(
        quiet.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    assert_eq!(quiet.stdout, out.stdout);
}

#[test]
fn demo_logs_at_trace_level_on_stderr_and_not_on_stdout() {
    let out = kevents(
        &["demo", "--pace-ms", "0", "--width", "200"],
        Some("trace"),
        b"",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let logs = log_lines(&stderr);
    assert!(
        logs.iter().any(|l| l.contains("TRACE")),
        "no TRACE line on stderr: {}",
        &stderr[..stderr.len().min(2000)]
    );
    assert!(
        logs.iter().any(|l| l.contains("kevents")),
        "no line from a kevents crate on stderr"
    );
    assert!(
        log_lines(&stdout).is_empty(),
        "log lines on stdout: {stdout}"
    );
    assert!(
        stdout.contains("LAST SEEN"),
        "the demo's table is still on stdout"
    );
}

#[test]
fn an_invalid_filter_is_reported_and_the_command_still_runs() {
    let out = kevents(&["replay"], Some("kevents=notalevel"), TRACE.as_bytes());
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("RUST_LOG"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
}
