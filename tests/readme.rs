//! The README's getting-started examples are the crates' front-page doc examples, which
//! `cargo test` compiles: this keeps the two copies equal.

use std::path::Path;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The ```` ```rust ```` blocks of a markdown text.
fn markdown_rust_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```rust") => current = Some(Vec::new()),
            (Some(lines), "```") => {
                blocks.push(lines.join("\n"));
                current = None;
            }
            (Some(lines), l) => lines.push(l),
            (None, _) => {}
        }
    }
    blocks
}

/// The `no_run` doc example of a file's `//!` comment that starts with `first_line`.
fn doc_example(source: &str, first_line: &str) -> String {
    let docs: Vec<&str> = source
        .lines()
        .take_while(|l| l.starts_with("//!") || l.is_empty())
        .filter(|l| l.starts_with("//!"))
        .map(|l| l.strip_prefix("//! ").unwrap_or(&l[3..]))
        .collect();
    let start = docs
        .windows(2)
        .position(|w| w[0] == "```no_run" && w[1] == first_line)
        .unwrap_or_else(|| panic!("no doc example starting with {first_line}"));
    docs[start + 1..]
        .iter()
        .take_while(|l| **l != "```")
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_readme_examples_are_the_compiled_doc_examples() {
    let readme = markdown_rust_blocks(&read("README.md"));
    let drop_in = doc_example(
        &read("crates/kevents-kube/src/lib.rs"),
        "use k8s_openapi::api::core::v1::ConfigMap;",
    );
    let facade = doc_example(
        &read("src/lib.rs"),
        "use kevents::{EventSource, EventType, HttpSink, ObjectReference, Pipeline, SinkOptions};",
    );
    assert!(
        readme.contains(&drop_in),
        "README lacks kevents-kube's example:\n{drop_in}"
    );
    assert!(
        readme.contains(&facade),
        "README lacks the facade's example:\n{facade}"
    );
    for example in [&drop_in, &facade] {
        let lines = example.lines().count();
        assert!((15..=22).contains(&lines), "{lines} lines:\n{example}");
        assert!(
            !example.lines().any(|l| l.starts_with("# ")),
            "hidden lines"
        );
    }
}
