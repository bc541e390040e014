//! Comparing replay output with a client-go harness's, as `../shared/tools/compare.py` and
//! `compare_series.py` do: JSON values line by line, random UUID event names renamed
//! `uuid-1`, `uuid-2`, ... in order of first appearance (only their pattern has to agree),
//! the prose `why` of lines that wrote nothing ignored.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The fixtures folder `name` of the repository, and `../shared/<name>` beside the checkout
/// when it exists (CI has it; users do not), so a newer shared sample is replayed too.
pub fn trace_dirs(name: &str) -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs = vec![root.join("tests/fixtures").join(name)];
    let shared = root.join("../shared").join(name);
    if shared.is_dir() {
        dirs.push(shared);
    }
    dirs
}

/// The trace names (`.jsonl` stems) of `dir`, sorted.
pub fn trace_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "jsonl")
                .then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

/// Whether `s` is a version-4 UUID as Go's `uuid.New()` prints it.
fn is_uuid(s: &[u8]) -> bool {
    s.len() == 36
        && s.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            14 => c == b'4',
            19 => matches!(c, b'8' | b'9' | b'a' | b'b'),
            _ => c.is_ascii_digit() || (b'a'..=b'f').contains(&c),
        })
}

/// `text` with every UUID replaced by `uuid-N`, N counted in order of first appearance
/// across calls sharing `seen`.
pub fn rename_uuids(text: &str, seen: &mut HashMap<String, usize>) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i + 36 <= b.len() {
        if is_uuid(&b[i..i + 36]) {
            out.push_str(&text[copied..i]);
            let next = seen.len() + 1;
            let n = *seen.entry(text[i..i + 36].to_owned()).or_insert(next);
            out.push_str(&format!("uuid-{n}"));
            i += 36;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// Output lines as JSON values, UUIDs renamed and `why` dropped. The writes of one loop
/// pass (same `i` and `tick`) are ordered by namespace and renamed name: the harness prints
/// them by name, and random UUID names sort differently in every run (a pass's order is
/// Go's random map order in client-go itself).
pub fn normalise(lines: &str) -> Vec<Value> {
    let mut seen = HashMap::new();
    let mut rows: Vec<Value> = lines
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut v: Value = serde_json::from_str(&rename_uuids(l, &mut seen)).unwrap();
            if let Value::Object(m) = &mut v {
                m.remove("why");
            }
            v
        })
        .collect();
    let pass = |v: &Value| v.get("tick").map(|t| (v["i"].clone(), t.clone()));
    let mut start = 0;
    while start < rows.len() {
        let key = pass(&rows[start]);
        let mut end = start + 1;
        while end < rows.len() && key.is_some() && pass(&rows[end]) == key {
            end += 1;
        }
        // Stable: a PATCH answered 404 stays before its CREATE.
        rows[start..end].sort_by(|a, b| {
            let k = |v: &Value| (v["namespace"].to_string(), v["name"].to_string());
            k(a).cmp(&k(b))
        });
        start = end;
    }
    rows
}

/// The first difference between two outputs, or `None` when they agree.
pub fn first_difference(expected: &str, actual: &str) -> Option<String> {
    let (e, a) = (normalise(expected), normalise(actual));
    for (i, (e, a)) in e.iter().zip(&a).enumerate() {
        if e != a {
            return Some(format!("line {i}:\n  want {e}\n  got  {a}"));
        }
    }
    (e.len() != a.len()).then(|| format!("length differs: want {} lines, got {}", e.len(), a.len()))
}

#[test]
fn uuids_are_renamed_in_order_of_first_appearance() {
    let mut seen = HashMap::new();
    let a = "0b8e6d3a-2f6c-4c1e-9d4e-0a1b2c3d4e5f";
    let b = "ffffffff-ffff-4fff-bfff-ffffffffffff";
    let text = format!("{b} x {a} {b} 0b8e6d3a-2f6c-5c1e-9d4e-0a1b2c3d4e5f");
    assert_eq!(
        rename_uuids(&text, &mut seen),
        "uuid-1 x uuid-2 uuid-1 0b8e6d3a-2f6c-5c1e-9d4e-0a1b2c3d4e5f"
    );
    assert!(first_difference("{\"a\":1,\"why\":\"x\"}", "{\"why\":\"y\",\"a\":1}").is_none());
    assert!(first_difference("{\"a\":1}", "{\"a\":2}").is_some());
}
