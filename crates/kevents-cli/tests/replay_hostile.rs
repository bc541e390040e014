//! `kevents replay` on hostile input: every bad input or flag is a clear error naming where,
//! printed once, with at most a short sanitised excerpt of the input, and nothing replayed
//! from a `--from kubectl` document that is refused.

use std::io::Write;
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
    let mut stdin_pipe = child.stdin.take().expect("stdin is piped");
    // The command may refuse its flags before reading; a broken pipe is fine then.
    let _ = stdin_pipe.write_all(stdin);
    drop(stdin_pipe);
    child.wait_with_output().expect("kevents finishes")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn decisions(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("stdout carries JSON lines only"))
        .collect()
}

/// Asserts a failed run with exit code 1, one error line on stderr containing every `want`.
fn assert_input_error(out: &Output, want: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "exit code; stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one error line: {err}");
    assert!(err.starts_with("kevents: "), "{err}");
    for w in want {
        assert!(err.contains(w), "stderr lacks {w:?}: {err}");
    }
}

const GOOD: &str = r#"{"time": 1700000000000000000, "object": {"name": "a"}, "type": "Normal", "reason": "r", "message": "m"}"#;

fn event_list(items: &str) -> String {
    format!(r#"{{"apiVersion":"v1","kind":"EventList","items":[{items}]}}"#)
}

fn event_with_count(count: &str) -> String {
    format!(
        r#"{{"metadata":{{"name":"web.1","namespace":"default"}},
        "involvedObject":{{"kind":"Pod","namespace":"default","name":"web"}},
        "reason":"BackOff","message":"m","source":{{"component":"kubelet"}},
        "firstTimestamp":"2023-11-14T22:00:00Z","lastTimestamp":"2023-11-14T22:05:00Z",
        "count":{count},"type":"Warning"}}"#
    )
}

#[test]
fn a_huge_count_is_refused_naming_the_item_and_its_count() {
    // 2^31 - 1 occurrences used to be materialised one line each: the process aborted.
    let input = event_list(&event_with_count("2147483647"));
    let out = kevents(&["replay", "--from", "kubectl"], input.as_bytes());
    assert_input_error(
        &out,
        &["item 0", "count 2147483647", "--max-occurrences", "1000000"],
    );
    assert!(
        out.stdout.is_empty(),
        "nothing replayed from a refused document"
    );

    // The cap counts the total over all items, and is a flag.
    let two = format!("{},{}", event_with_count("3"), event_with_count("3"));
    let out = kevents(
        &["replay", "--from", "kubectl", "--max-occurrences", "5"],
        event_list(&two).as_bytes(),
    );
    assert_input_error(&out, &["item 1", "count 3", "6", "--max-occurrences 5"]);
    let out = kevents(
        &["replay", "--from", "kubectl", "--max-occurrences", "6"],
        event_list(&two).as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(decisions(&out).len(), 6);
}

#[test]
fn bad_counts_are_typed_errors_naming_the_item() {
    for (count, want) in [
        ("0", "count 0"),
        ("-3", "count -3"),
        ("2147483648", "count 2147483648"),
        ("99999999999999999999", "count 1"),
        ("2.5", "count 2.5"),
    ] {
        let items = format!("{},{}", event_with_count("1"), event_with_count(count));
        let out = kevents(
            &["replay", "--from", "kubectl"],
            event_list(&items).as_bytes(),
        );
        assert_input_error(&out, &["item 1", want, "1 to 2147483647"]);
        assert!(out.stdout.is_empty(), "count {count}: nothing replayed");
    }
    let out = kevents(
        &["replay", "--from", "kubectl"],
        event_list(&event_with_count(r#""many""#)).as_bytes(),
    );
    assert_input_error(
        &out,
        &[
            "item 0 (default/web.1)",
            "count \"many\"",
            "1 to 2147483647",
        ],
    );
}

#[test]
fn documents_that_are_not_event_lists_are_refused() {
    for (input, want) in [
        ("{}", "no \"kind\" and no \"items\""),
        (
            r#"{"apiVersion":"v1","kind":"PodList","items":[{"metadata":{"name":"p"}}]}"#,
            "kind \"PodList\"",
        ),
        (
            r#"{"apiVersion":"v1","kind":"List","items":[{"kind":"Pod","metadata":{"name":"p"}}]}"#,
            "item 0 is not an Event (kind \"Pod\")",
        ),
        (r#"{"kind":"EventList"}"#, "no \"items\""),
        ("[]", "not a JSON object"),
        ("", "empty"),
        (
            &event_list(r#"{"metadata":{"name":"x","namespace":"y"}}"#),
            "item 0 (y/x): no firstTimestamp, lastTimestamp or eventTime",
        ),
    ] {
        let out = kevents(&["replay", "--from", "kubectl"], input.as_bytes());
        assert_input_error(&out, &[want]);
        assert!(out.stdout.is_empty());
    }
    // An empty list is a valid answer from a quiet cluster.
    let out = kevents(&["replay", "--from", "kubectl"], event_list("").as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn kubectl_input_errors_name_the_document_line() {
    let input = "{\n  \"kind\": \"EventList\",\n  \"items\": [\n    {,\n  ]\n}\n";
    let out = kevents(&["replay", "--from", "kubectl"], input.as_bytes());
    assert_input_error(&out, &["line 4"]);
    let mut bad = event_list(&event_with_count("1")).into_bytes();
    let at = bad.iter().position(|b| *b == b'B').unwrap();
    bad[at] = 0xff;
    let out = kevents(&["replay", "--from", "kubectl"], &bad);
    assert_input_error(&out, &["line 3"]);
}

#[test]
fn blank_lines_count_in_line_numbers() {
    let input = format!("{GOOD}\n\n\r\n{{not json\n");
    let out = kevents(&["replay"], input.as_bytes());
    assert_input_error(&out, &["line 4"]);
    assert_eq!(decisions(&out).len(), 1);
}

#[test]
fn invalid_utf8_and_binary_input_name_the_line() {
    let mut input = format!("{GOOD}\n\n").into_bytes();
    input.extend_from_slice(b"{\"time\": 1, \"reason\": \"\xff\xfe\"}\n");
    let out = kevents(&["replay"], &input);
    assert_input_error(&out, &["line 3", "UTF-8"]);
    assert_eq!(decisions(&out).len(), 1);

    let binary: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    let out = kevents(&["replay"], &binary);
    assert_input_error(&out, &["line 1"]);

    let nul = b"\0\0\0\x01\x02garbage";
    let out = kevents(&["replay"], nul);
    assert_input_error(&out, &["line 1"]);

    let utf16 = b"\xff\xfe{\0\"\0";
    let out = kevents(&["replay"], utf16);
    assert_input_error(&out, &["line 1", "UTF-16"]);
}

#[test]
fn a_byte_order_mark_is_skipped_at_the_start_only() {
    let plain = kevents(&["replay"], format!("{GOOD}\n").as_bytes());
    let with_bom = kevents(&["replay"], format!("\u{feff}{GOOD}\n").as_bytes());
    assert!(with_bom.status.success(), "{}", stderr(&with_bom));
    assert_eq!(with_bom.stdout, plain.stdout);

    let out = kevents(&["replay"], format!("{GOOD}\n\u{feff}{GOOD}\n").as_bytes());
    assert_input_error(&out, &["line 2", "byte-order mark"]);

    let list = format!("\u{feff}{}", event_list(&event_with_count("2")));
    let out = kevents(&["replay", "--from", "kubectl"], list.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(decisions(&out).len(), 2);
}

#[test]
fn over_long_lines_are_refused_naming_the_line() {
    let long = format!(
        r#"{{"time": 1700000000000000001, "object": {{"name": "a"}}, "type": "Normal", "reason": "r", "message": "{}"}}"#,
        "x".repeat(2 << 20)
    );
    let input = format!("{GOOD}\n{long}\n");
    let out = kevents(&["replay"], input.as_bytes());
    assert_input_error(&out, &["line 2", "1048576 bytes", "--max-line-bytes"]);
    assert_eq!(decisions(&out).len(), 1);

    let out = kevents(&["replay", "--max-line-bytes", "4194304"], input.as_bytes());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(decisions(&out).len(), 2);

    // Exactly at the limit is fine, one byte over is not (the line terminator, `\n` or
    // `\r\n`, does not count; neither does a missing one at the end of the input).
    let at = GOOD.len().to_string();
    let under = (GOOD.len() - 1).to_string();
    for input in [format!("{GOOD}\r\n"), format!("{GOOD}\n"), GOOD.to_owned()] {
        let out = kevents(&["replay", "--max-line-bytes", &at], input.as_bytes());
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(decisions(&out).len(), 1);
        let out = kevents(&["replay", "--max-line-bytes", &under], input.as_bytes());
        assert_input_error(&out, &["line 1", "--max-line-bytes"]);
    }
}

#[test]
fn out_of_range_flags_are_usage_errors_naming_flag_and_range() {
    for (flag, value, range) in [
        ("--burst", "0", "1 to 2147483647"),
        ("--burst", "-1", "1 to 2147483647"),
        ("--qps", "-1", "finite number greater than 0"),
        ("--qps", "0", "finite number greater than 0"),
        ("--qps", "NaN", "finite number greater than 0"),
        ("--qps", "inf", "finite number greater than 0"),
        ("--qps", "1e39", "finite number greater than 0"),
        ("--qps", "1e-50", "finite number greater than 0"),
        ("--lru", "0", "1 to 9223372036854775807"),
        ("--max-events", "0", "1 to 9223372036854775807"),
        ("--max-events", "-10", "1 to 9223372036854775807"),
        ("--max-interval", "0", "1 to 9223372036854775807"),
        ("--max-interval", "-600", "1 to 9223372036854775807"),
        ("--max-occurrences", "0", "1 to 18446744073709551615"),
        ("--max-line-bytes", "0", "1 to"),
        ("--burst", "many", "1 to 2147483647"),
    ] {
        let out = kevents(
            &["replay", &format!("{flag}={value}")],
            format!("{GOOD}\n").as_bytes(),
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(err.contains(flag), "{flag} {value}: {err}");
        assert!(err.contains(range), "{flag} {value}: {err}");
        assert!(out.stdout.is_empty());
    }
    // In range: accepted.
    let out = kevents(
        &[
            "replay",
            "--burst",
            "1",
            "--qps",
            "1e-30",
            "--lru",
            "1",
            "--max-events",
            "1",
        ],
        format!("{GOOD}\n").as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn errors_are_printed_once() {
    let out = kevents(&["replay"], b"{not json\n");
    let err = stderr(&out);
    assert_eq!(err.matches("key must be a string").count(), 1, "{err}");
    assert_eq!(err.matches("line 1").count(), 1, "{err}");
}

#[test]
fn errors_quote_only_a_short_sanitised_excerpt() {
    let secret = format!("sk-{}", "A".repeat(200));
    for line in [
        format!(r#"{{"time": "{secret}"}}"#),
        format!(r#"{{"time": 1, "{secret}": 1}}"#),
        format!(r#"{{"time": 1, "object": {{"name": "a"}}, "\u001b[31m{secret}": 1}}"#),
        format!(r#"{{"time": 1, "delete": {{"namespace": 7, "name": "{secret}"}}}}"#),
    ] {
        let out = kevents(&["replay"], format!("{line}\n").as_bytes());
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("line 1"), "{err}");
        assert!(!err.contains(&secret[..60]), "the input is echoed: {err}");
        assert!(
            !err.as_bytes().contains(&0x1b),
            "raw control character: {err}"
        );
        assert!(err.len() < 400, "{err}");
    }
    let list = event_list(&format!(
        r#"{{"metadata":{{"name":"{secret}","namespace":"n"}},"count":-1,
        "firstTimestamp":"2023-11-14T22:00:00Z"}}"#
    ));
    let out = kevents(&["replay", "--from", "kubectl"], list.as_bytes());
    let err = stderr(&out);
    assert!(err.contains("item 0"), "{err}");
    assert!(!err.contains(&secret[..60]), "the input is echoed: {err}");
}

#[test]
fn a_large_count_within_the_cap_streams() {
    // 200 000 occurrences of one event: decided one by one, in time order.
    let out = kevents(
        &["replay", "--from", "kubectl"],
        event_list(&event_with_count("200000")).as_bytes(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 200_000);
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["i"], 199_999);
}
