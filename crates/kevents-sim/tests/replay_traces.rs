//! Every sample trace replays to client-go's decisions, JSON value for JSON value.

use std::path::PathBuf;

use kevents_core::core_v1::correlator::CorrelatorOptions;
use kevents_sim::replay::Replayer;
use serde_json::Value;

/// The traces copied into the repository, and `../shared/traces` beside the checkout when it
/// exists (CI has it; users do not), so a newer shared sample is replayed too.
fn trace_dirs() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs = vec![root.join("tests/fixtures/traces")];
    let shared = root.join("../shared/traces");
    if shared.is_dir() {
        dirs.push(shared);
    }
    dirs
}

/// Parses the replay flags of a `.flags` file into correlator options.
fn options(flags: &str) -> CorrelatorOptions {
    let mut o = CorrelatorOptions::default();
    let words: Vec<&str> = flags.split_whitespace().collect();
    for pair in words.chunks(2) {
        let v = pair[1];
        match pair[0] {
            "--burst" => o.burst_size = v.parse().unwrap(),
            "--qps" => o.qps = v.parse().unwrap(),
            "--max-events" => o.max_events = v.parse().unwrap(),
            "--max-interval" => o.max_interval_in_seconds = v.parse().unwrap(),
            "--lru" => o.lru_cache_size = v.parse().unwrap(),
            f => panic!("unknown flag {f}"),
        }
    }
    o
}

#[test]
fn every_sample_trace_matches_client_go() {
    for dir in trace_dirs() {
        replay_dir(&dir);
    }
}

fn replay_dir(dir: &std::path::Path) {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "jsonl")
                .then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    assert!(names.len() >= 14, "sample traces missing: {names:?}");
    let mut failures = Vec::new();
    for name in &names {
        let flags = std::fs::read_to_string(dir.join(format!("{name}.flags"))).unwrap_or_default();
        let input = std::fs::read_to_string(dir.join(format!("{name}.jsonl"))).unwrap();
        let expected = std::fs::read_to_string(dir.join(format!("{name}.expected"))).unwrap();
        let mut r = Replayer::new(options(&flags));
        let mut lines = 0;
        for (i, (inp, exp)) in input.lines().zip(expected.lines()).enumerate() {
            let got = r.replay_line(inp).unwrap();
            let want: Value = serde_json::from_str(exp).unwrap();
            if got != want {
                failures.push(format!("{name} line {i}:\n  got  {got}\n  want {want}"));
                break;
            }
            lines += 1;
        }
        assert_eq!(input.lines().count(), expected.lines().count(), "{name}");
        eprintln!("{}/{name}: {lines} lines agree", dir.display());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
