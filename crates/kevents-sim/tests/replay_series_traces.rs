//! Every events.k8s.io/v1 series trace replays to client-go 1.36's and 1.37's `tools/events`
//! sink calls (the harnesses' `-mode series`), JSON value for JSON value, UUID names by
//! pattern.

mod common;

use kevents_sim::replay::series::{SeriesReplayOptions, SeriesReplayer, Ticks};

fn options(flags: &str) -> SeriesReplayOptions {
    let mut o = SeriesReplayOptions::default();
    let mut words = flags.split_whitespace();
    while let Some(flag) = words.next() {
        match flag {
            "--ticks" => {
                o.ticks = match words.next() {
                    Some("auto") => Ticks::Auto,
                    Some("manual") => Ticks::Manual,
                    other => panic!("--ticks {other:?}"),
                }
            }
            "--all" => o.all = true,
            "--hostname" => o.hostname = words.next().unwrap().to_owned(),
            f => panic!("unknown flag {f}"),
        }
    }
    o
}

fn replay(dir: &std::path::Path, name: &str) -> (String, String) {
    let flags = std::fs::read_to_string(dir.join(format!("{name}.flags"))).unwrap_or_default();
    let input = std::fs::read(dir.join(format!("{name}.jsonl"))).unwrap();
    let expected = std::fs::read_to_string(dir.join(format!("{name}.expected"))).unwrap();
    let mut out = Vec::new();
    SeriesReplayer::new(options(&flags))
        .replay_trace(&input[..], &mut out, 1 << 20)
        .unwrap();
    (expected, String::from_utf8(out).unwrap())
}

fn replay_dir(dir: &std::path::Path, at_least: usize) {
    let names = common::trace_names(dir);
    assert!(names.len() >= at_least, "series traces missing: {names:?}");
    let mut failures = Vec::new();
    for name in &names {
        let (expected, got) = replay(dir, name);
        match common::first_difference(&expected, &got) {
            Some(d) => failures.push(format!("{}/{name}: {d}", dir.display())),
            None => eprintln!(
                "{}/{name}: {} lines agree",
                dir.display(),
                expected.lines().count()
            ),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The 13 samples of `../shared/traces-v1`.
#[test]
fn every_shared_series_trace_matches_client_go_1_36() {
    for dir in common::trace_dirs("traces-v1") {
        replay_dir(&dir, 13);
    }
}

/// Traces written for kevents (heartbeats after a delete, a series finishing while a
/// refresh is due, shutdown with open series, related objects, notes with `%`, ...), with
/// the harness's answers recorded (tests/fixtures/traces-v1-kevents/README.md).
#[test]
fn every_kevents_series_trace_matches_client_go_1_36() {
    for dir in common::trace_dirs("traces-v1-kevents") {
        replay_dir(&dir, 6);
    }
}

/// client-go v0.37.2's answers (`tests/fixtures/traces-v1-1.37`: the 13 shared samples and
/// the 6 kevents traces through the harness of `scripts/oracle/client-go-0.37`).
#[test]
fn every_series_trace_matches_client_go_1_37() {
    for dir in common::trace_dirs("traces-v1-1.37") {
        replay_dir(&dir, 19);
    }
}
