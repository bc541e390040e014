//! `kevents replay` refuses, with the line number and a clear message, every line that is
//! not a JSON object of the documented shape (arrays included, at the top or inside), and a
//! line with both `object` and `delete`; the lines before it are replayed, nothing after.
//! Also the flags of issue 24: `--client-go`, `--api events.k8s.io/v1` and their checks.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn kevents(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kevents binary runs");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    let _ = pipe.write_all(stdin);
    drop(pipe);
    child.wait_with_output().expect("kevents finishes")
}

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("stdout carries JSON lines only"))
        .collect()
}

/// A failed run: exit code 1, one error line containing every `want`.
fn assert_refused(out: &Output, want: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "exit code; stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one error line: {err}");
    for w in want {
        assert!(err.contains(w), "stderr lacks {w:?}: {err}");
    }
}

const GOOD: &str = r#"{"time": 1700000000000000000, "object": {"name": "a"}, "type": "Normal", "reason": "r", "message": "m"}"#;

#[test]
fn core_v1_lines_of_the_wrong_shape_are_refused_with_their_line_number() {
    let cases: &[(&str, &[&str])] = &[
        // serde alone took a struct's fields from an array, in order.
        (
            r#"[1700000000000000001, {"component": "k"}, {"name": "a"}, "Normal", "r", "m", {}, null]"#,
            &["line 2", "expected a JSON object, got an array"],
        ),
        (
            r#"{"time": 1700000000000000001, "object": ["v1", "Pod", "ns", "a"], "type": "Normal"}"#,
            &["line 2, column 41", "unexpected array"],
        ),
        (
            r#"{"time": 1700000000000000001, "source": ["kubelet", "node"], "object": {"name": "a"}}"#,
            &["line 2, column 41", "unexpected array"],
        ),
        ("42", &["line 2", "expected a JSON object, got a number"]),
        (r#""a string""#, &["line 2", "got a string"]),
        ("null", &["line 2", "got null"]),
        ("true", &["line 2", "got a boolean"]),
        (
            r#"{"time": 1700000000000000001, "object": {"name": "a"}, "type": "Normal", "delete": {"namespace": "default", "name": "a.1"}}"#,
            &["line 2", "both \"object\" and \"delete\""],
        ),
    ];
    for (bad, want) in cases {
        let input = format!("{GOOD}\n{bad}\n{GOOD}\n");
        let out = kevents(&["replay"], input.as_bytes());
        assert_refused(&out, want);
        assert_eq!(
            lines(&out).len(),
            1,
            "only the line before is replayed: {bad}"
        );
    }
}

const V1: &str = r#"{"time": 1700000000000000000, "regarding": {"kind": "Pod", "namespace": "ns", "name": "p"}, "type": "Normal", "reason": "R", "action": "A", "note": "n", "reportingController": "c"}"#;

#[test]
fn series_lines_of_the_wrong_shape_are_refused_with_their_line_number() {
    let cases: &[(&str, &[&str])] = &[
        (r#"[1700000000000000001]"#, &["line 2", "got an array"]),
        (
            r#"{"time": 1700000000000000001, "regarding": [{"name": "p"}], "type": "Normal"}"#,
            &["line 2, column 44", "unexpected array"],
        ),
        (
            r#"{"time": 1700000000000000001, "tick": "refresh", "delete": {"namespace": "ns", "name": "x"}}"#,
            &["line 2", "not several"],
        ),
        (r#"{"tick": "sometimes"}"#, &["line 2", "unknown variant"]),
        (r#"{"shutdown": false}"#, &["line 2", "must be true"]),
        (r#"{}"#, &["line 2", "needs"]),
        (r#"{"reason": "R"}"#, &["line 2", "needs \"regarding\""]),
        (
            r#"{"time": 1, "tick": "refresh"}"#,
            &["line 2", "before the previous line"],
        ),
        (
            r#"{"time": 1700000000000000001, "color": "red"}"#,
            &["line 2", "unknown field"],
        ),
    ];
    for (bad, want) in cases {
        let input = format!("{V1}\n{bad}\n{V1}\n");
        let out = kevents(&["replay", "--api", "events.k8s.io/v1"], input.as_bytes());
        assert_refused(&out, want);
        assert_eq!(
            lines(&out).len(),
            1,
            "only the line before is replayed: {bad}"
        );
    }
}

/// A usage error: exit code 2, nothing replayed.
fn assert_usage(args: &[&str], want: &str) {
    let out = kevents(args, GOOD.as_bytes());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn flags_of_one_api_are_refused_with_the_other() {
    assert_usage(&["replay", "--client-go", "1.19"], "1.19");
    assert_usage(
        &["replay", "--api", "events.k8s.io/v1", "--burst", "3"],
        "--burst applies to --api core/v1 only",
    );
    assert_usage(
        &["replay", "--api", "events.k8s.io/v1", "--client-go", "1.20"],
        "client-go 1.37 and 1.36",
    );
    assert_usage(
        &["replay", "--ticks", "auto"],
        "--ticks auto applies to --api events.k8s.io/v1 only",
    );
    assert_usage(&["replay", "--all"], "--all applies");
}

fn fixture(dir: &str, name: &str, ext: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(dir)
        .join(format!("{name}.{ext}"));
    std::fs::read(p).unwrap()
}

/// Through the binary: the default is client-go 1.37, `--client-go 1.20` gives v1.20.2's
/// decisions (`spam-1-012` line 65 differs between them: the spam key's type), `1.36` and
/// `1.37` the same as the default.
#[test]
fn the_client_go_flag_selects_the_release() {
    let input = fixture("traces", "spam-1-012", "jsonl");
    let flags = String::from_utf8(fixture("traces", "spam-1-012", "flags")).unwrap();
    let mut args = vec!["replay"];
    args.extend(flags.split_whitespace());
    let default = lines(&kevents(&args, &input));
    let with = |v: &'static str| {
        let mut a = args.clone();
        a.extend(["--client-go", v]);
        lines(&kevents(&a, &input))
    };
    let old = with("1.20");
    let parse = |b: Vec<u8>| -> Vec<Value> {
        String::from_utf8(b)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    assert_eq!(old, parse(fixture("traces", "spam-1-012", "expected")));
    assert_eq!(
        default,
        parse(fixture("traces-1.37", "spam-1-012", "expected"))
    );
    assert_eq!(with("1.37"), default);
    assert_eq!(
        with("1.36"),
        parse(fixture("traces-1.36", "spam-1-012", "expected"))
    );
    assert_ne!(default[65], old[65]);
}

/// Through the binary: `--api events.k8s.io/v1 --all` prints the harness's lines.
#[test]
fn series_replay_prints_one_line_per_sink_call() {
    let input = fixture("traces-v1", "manual-5-002", "jsonl");
    let out = kevents(&["replay", "--api", "events.k8s.io/v1"], &input);
    assert_eq!(out.status.code(), Some(0));
    let got = lines(&out);
    let want: Vec<Value> = String::from_utf8(fixture("traces-v1", "manual-5-002", "expected"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got, want);
}
