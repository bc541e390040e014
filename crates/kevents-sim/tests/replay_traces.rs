//! Every sample trace replays to client-go's decisions, JSON value for JSON value.

mod common;

use kevents_core::ClientGoVersion;
use kevents_core::core_v1::correlator::CorrelatorOptions;
use kevents_sim::replay::Replayer;

/// Parses the replay flags of a `.flags` file into correlator options.
fn options(flags: &str, version: ClientGoVersion) -> CorrelatorOptions {
    let mut o = CorrelatorOptions::for_client_go(version);
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

/// client-go v1.20.2's answers (`../shared/traces`), with `--client-go 1.20`.
#[test]
fn every_sample_trace_matches_client_go_1_20() {
    for dir in common::trace_dirs("traces") {
        replay_dir(&dir, ClientGoVersion::V1_20, 14);
    }
}

/// client-go v0.36.4's answers (`../shared/traces-1.36`: the same 14 samples, UUID names of
/// invalid ones, token-bucket boundaries), with `--client-go 1.36`.
#[test]
fn every_1_36_trace_matches_client_go_1_36() {
    for dir in common::trace_dirs("traces-1.36") {
        replay_dir(&dir, ClientGoVersion::V1_36, 19);
    }
}

/// client-go v0.37.2's answers (`tests/fixtures/traces-1.37`: the 19 traces of
/// `traces-1.36` through the harness of `scripts/oracle/client-go-0.37`), with the default
/// profile, which is 1.37.
#[test]
fn every_1_37_trace_matches_client_go_1_37_with_the_default_profile() {
    assert_eq!(ClientGoVersion::default(), ClientGoVersion::V1_37);
    for dir in common::trace_dirs("traces-1.37") {
        replay_dir(&dir, ClientGoVersion::default(), 19);
    }
}

fn replay_dir(dir: &std::path::Path, version: ClientGoVersion, at_least: usize) {
    let names = common::trace_names(dir);
    assert!(names.len() >= at_least, "sample traces missing: {names:?}");
    let mut failures = Vec::new();
    for name in &names {
        let flags = std::fs::read_to_string(dir.join(format!("{name}.flags"))).unwrap_or_default();
        let input = std::fs::read(dir.join(format!("{name}.jsonl"))).unwrap();
        let expected = std::fs::read_to_string(dir.join(format!("{name}.expected"))).unwrap();
        let mut r = Replayer::new(options(&flags, version));
        let mut out = Vec::new();
        r.replay_trace(&input[..], &mut out, 1 << 20).unwrap();
        let got = String::from_utf8(out).unwrap();
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

/// The 1.20 and 1.36/1.37 answers differ on these samples (spam key with the type, UUID
/// names, token-bucket arithmetic): each profile agrees with its own release only, so neither
/// agreement above is vacuous.
#[test]
fn profiles_disagree_where_the_releases_do() {
    for (set, name, version) in [
        ("traces-1.36", "spam-1-005", ClientGoVersion::V1_20),
        ("traces-1.36", "spam-1-012", ClientGoVersion::V1_20),
        ("traces-1.36", "invalid-names", ClientGoVersion::V1_20),
        ("traces-1.36", "rate-minimal", ClientGoVersion::V1_20),
        ("traces-1.36", "rate-qps-0.1", ClientGoVersion::V1_20),
        ("traces-1.36", "rate-qps-0.1-burst3", ClientGoVersion::V1_20),
        ("traces-1.36", "rate-default-qps", ClientGoVersion::V1_20),
        ("traces-1.37", "spam-1-005", ClientGoVersion::V1_20),
        ("traces-1.37", "spam-1-012", ClientGoVersion::V1_20),
        ("traces-1.37", "invalid-names", ClientGoVersion::V1_20),
        ("traces-1.37", "rate-minimal", ClientGoVersion::V1_20),
        ("traces-1.37", "rate-qps-0.1", ClientGoVersion::V1_20),
        ("traces-1.37", "rate-qps-0.1-burst3", ClientGoVersion::V1_20),
        ("traces-1.37", "rate-default-qps", ClientGoVersion::V1_20),
        // 1.20's answers are not 1.37's either.
        ("traces", "spam-1-005", ClientGoVersion::V1_37),
        ("traces", "spam-1-012", ClientGoVersion::V1_37),
    ] {
        let dir = &common::trace_dirs(set)[0];
        let flags = std::fs::read_to_string(dir.join(format!("{name}.flags"))).unwrap_or_default();
        let input = std::fs::read(dir.join(format!("{name}.jsonl"))).unwrap();
        let expected = std::fs::read_to_string(dir.join(format!("{name}.expected"))).unwrap();
        let mut out = Vec::new();
        Replayer::new(options(&flags, version))
            .replay_trace(&input[..], &mut out, 1 << 20)
            .unwrap();
        let got = String::from_utf8(out).unwrap();
        assert!(
            common::first_difference(&expected, &got).is_some(),
            "{set}/{name} with {version} agrees with the other release"
        );
    }
}
