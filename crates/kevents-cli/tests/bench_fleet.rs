//! `kevents bench fleet` end to end with a small fleet: every pipeline's counts read back
//! exact, and the `FLEET` line's figures consistent with each other and with the limit.

use std::process::Command;

use serde_json::Value;

fn fleet(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .args(["bench", "fleet"])
        .args(args)
        .output()
        .expect("kevents binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("FLEET "))
        .expect("a FLEET line");
    serde_json::from_str(line).expect("JSON")
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("{k} is not a number: {v}"))
}

/// Three pipelines of 400 occurrences under `Server:40:60` (the fleet's 1 200 occurrences
/// need a few hundred writes, several times the burst: the limit refuses some).
#[test]
fn a_small_fleet_stores_every_count_and_reports_consistent_figures() {
    let (pipelines, occurrences, qps, burst) = (3u64, 400u64, 40.0, 60.0);
    let v = fleet(&[
        "--pipelines",
        "3",
        "--occurrences",
        "400",
        "--limit",
        "Server:40:60",
        "--latency-ms",
        "1",
    ]);
    assert_eq!(v["limit"], "Server:40:60", "{v}");
    assert_eq!(v["processes"], pipelines, "{v}");
    assert_eq!(v["exact"], "3 of 3", "{v}");
    assert_eq!(v["all_exact"], true, "{v}");
    // Read back from the simulator: every occurrence in a stored count.
    assert_eq!(v["sum_count"], pipelines * occurrences, "{v}");
    assert_eq!(v["sum_count"], v["expected_sum_count"], "{v}");
    // The server's writes are the pipelines' requests; its 429s the budgets' throttled.
    let (writes, throttled) = (f(&v, "writes"), f(&v, "throttled"));
    assert_eq!(f(&v, "requests"), writes, "{v}");
    assert_eq!(f(&v, "pipelines_throttled"), throttled, "{v}");
    assert!(throttled > 0.0, "the limit refused nothing: {v}");
    // The descent from 200/s to the limit's share is in the first 5 s.
    let early = f(&v, "throttled_first_5s");
    assert!(early > 0.0 && early <= throttled, "{v}");
    assert!(
        (f(&v, "throttled_share") - throttled / writes).abs() < 1e-3,
        "{v}"
    );
    let bound = (writes - throttled - burst) / qps;
    assert!((f(&v, "bound") - bound).abs() < 0.01, "{v}");
    let (slowest, fastest) = (f(&v, "slowest"), f(&v, "fastest"));
    assert!(fastest <= slowest && fastest > 0.0, "{v}");
    assert!(
        (f(&v, "slowest_over_bound") - slowest / bound).abs() < 0.01,
        "{v}"
    );
    // Nobody finishes before the limit lets the fleet's accepted writes through.
    assert!(slowest >= bound * 0.95, "{v}");
    let jain = f(&v, "jain");
    assert!(jain > 1.0 / pipelines as f64 && jain <= 1.0, "{v}");
}

/// The same fleet sharing its write law through one (in-memory) Lease: exact, the law
/// written at its epochs (each a decrease after a 429) and nobody far behind.
#[test]
fn a_small_fleet_sharing_its_law_stores_every_count() {
    let v = fleet(&[
        "--pipelines",
        "3",
        "--occurrences",
        "400",
        "--limit",
        "Server:40:60",
        "--latency-ms",
        "1",
        "--share-law",
    ]);
    assert_eq!(v["share_law"], true, "{v}");
    assert_eq!(v["all_exact"], true, "{v}");
    assert_eq!(v["sum_count"], 1200, "{v}");
    assert!(f(&v, "throttled") > 0.0, "the limit refused nothing: {v}");
    assert!(f(&v, "lease_writes") >= 1.0, "no law written: {v}");
    assert!(f(&v, "fastest_over_slowest") >= 0.5, "{v}");
}

/// A malformed limit is a usage error.
#[test]
fn a_bad_limit_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .args(["bench", "fleet", "--limit", "Pods:1:2"])
        .output()
        .expect("kevents binary runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown event rate limit type"));
}
