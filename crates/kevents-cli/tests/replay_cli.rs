//! The `kevents replay` command end to end: flags, stdin, stdout, errors.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn kevents(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kevents binary runs");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn traces() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/traces")
}

fn values(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// v1.20.2's answers with `--client-go 1.20`, v0.36.4's with `--client-go 1.36`, v0.37.2's
/// with the default (1.37).
#[test]
fn replay_command_agrees_with_client_go_on_samples_with_flags() {
    for (dir, profile) in [
        (traces(), &["--client-go", "1.20"][..]),
        (
            traces().with_file_name("traces-1.36"),
            &["--client-go", "1.36"][..],
        ),
        (traces().with_file_name("traces-1.37"), &[][..]),
    ] {
        for name in ["spam-1-012", "similar-1-011", "ttl-1-006", "mixed-1-010"] {
            let flags = std::fs::read_to_string(dir.join(format!("{name}.flags"))).unwrap();
            let input = std::fs::read(dir.join(format!("{name}.jsonl"))).unwrap();
            let expected = std::fs::read(dir.join(format!("{name}.expected"))).unwrap();
            let args: Vec<&str> = std::iter::once("replay")
                .chain(flags.split_whitespace())
                .chain(profile.iter().copied())
                .collect();
            let out = kevents(&args, &input);
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(values(&out.stdout), values(&expected), "{name} {profile:?}");
        }
    }
}

#[test]
fn bad_input_is_a_clear_error_naming_the_line() {
    let good = r#"{"time": 1700000000000000000, "object": {"name": "a"}, "type": "Normal", "reason": "r", "message": "m"}"#;
    let out = kevents(&["replay"], format!("{good}\n{{not json\n").as_bytes());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2"), "{err}");
    // The first line was still decided and printed before the error.
    assert_eq!(values(&out.stdout).len(), 1);

    let back =
        r#"{"time": 1, "object": {"name": "a"}, "type": "Normal", "reason": "r", "message": "m"}"#;
    let out = kevents(&["replay"], format!("{good}\n{back}\n").as_bytes());
    assert!(String::from_utf8_lossy(&out.stderr).contains("before the previous line"));
}

#[test]
fn kubectl_event_lists_replay() {
    let list = r#"{"apiVersion":"v1","kind":"EventList","items":[
      {"metadata":{"name":"web.1","namespace":"default"},
       "involvedObject":{"kind":"Pod","namespace":"default","name":"web","uid":"u"},
       "reason":"BackOff","message":"Back-off restarting failed container",
       "source":{"component":"kubelet","host":"node-1"},
       "firstTimestamp":"2023-11-14T22:00:00Z","lastTimestamp":"2023-11-14T22:05:00Z",
       "count":30,"type":"Warning"}]}"#;
    let out = kevents(&["replay", "--from", "kubectl"], list.as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = values(&out.stdout);
    assert_eq!(v.len(), 30);
    let actions: Vec<&str> = v.iter().map(|d| d["action"].as_str().unwrap()).collect();
    assert_eq!(actions[0], "create");
    assert!(actions[1..25].iter().all(|a| *a == "patch"));
    assert_eq!(actions[29], "patch");
    // 30 occurrences in 5 minutes: 25 pass (the burst), 4 are skipped, and the last, exactly
    // 300 s after the first, gets the one token refilled by then and carries count 30.
    assert_eq!(actions.iter().filter(|a| **a == "skip").count(), 4);
    assert_eq!(v[29]["count"], 30);
}
