//! `kevents bench pipeline --policy coalesce` end to end: a burst of the hot workload through
//! the library's default queues ends with every occurrence in a stored count; the bench
//! commands' bounds; `bench apiserver --start-on-input`.

use std::process::Command;

use serde_json::Value;

/// `kevents bench pipeline --workload hot --n N --policy P` with 50-slot queues.
fn hot_burst(policy: &str, n: u64) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .args([
            "bench",
            "pipeline",
            "--workload",
            "hot",
            "--policy",
            policy,
            "--n",
        ])
        .arg(n.to_string())
        .args(["--intake-capacity", "50", "--watcher-capacity", "50"])
        .output()
        .expect("kevents binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().expect("one JSON line")).unwrap()
}

/// Queues of 50 slots overflow at once; the overflow tables merge the repeats: nothing lost,
/// the stored counts sum to n, and fewer writes than occurrences.
#[test]
fn coalesce_policy_counts_every_occurrence_of_a_burst() {
    let n = 30_000u64;
    let v = hot_burst("coalesce", n);
    assert_eq!(v["policy"], "coalesce");
    assert_eq!(v["stored_count_sum"], n, "{v}");
    assert_eq!(v["pipeline_lost"], 0, "{v}");
    let writes = v["writes"].as_u64().unwrap();
    assert!(writes < n, "{writes} writes for {n} occurrences: {v}");
    // Every occurrence was one correlator result (spam filter off, no aggregation): written,
    // or superseded by a newer result of the same event before its write started.
    assert_eq!(writes + v["superseded_writes"].as_u64().unwrap(), n, "{v}");
    let merged = v["coalesced_intake"].as_u64().unwrap() + v["coalesced_watcher"].as_u64().unwrap();
    assert!(merged > 0, "the burst overflowed and was merged: {v}");
    assert_eq!(v["dropped_intake_full"], 0);
    assert_eq!(v["dropped_watcher_full"], 0);
}

/// The drop policy (client-go's) loses most of the same burst, and says so.
#[test]
fn drop_policy_reports_what_it_lost() {
    let v = hot_burst("drop", 30_000);
    let lost = v["pipeline_lost"].as_u64().unwrap();
    let dropped =
        v["dropped_intake_full"].as_u64().unwrap() + v["dropped_watcher_full"].as_u64().unwrap();
    assert_eq!(
        lost, dropped,
        "every lost occurrence is a counted drop: {v}"
    );
    assert_eq!(v["stored_count_sum"].as_u64().unwrap() + lost, 30_000);
}

/// Zero capacities are usage errors naming the range (issue 36: they were accepted and
/// dropped 66 700 and 132 458 of 200 000 occurrences with exit code 0); so are the numbers
/// that panicked or ran without end (`bench faults` u64::MAX durations and `--rate`,
/// `bench pipeline --n` u64::MAX).
#[test]
fn zero_capacities_and_huge_numbers_are_usage_errors() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["bench", "pipeline", "--watcher-capacity", "0"],
            "--watcher-capacity must be an integer from 1 to 10000000",
        ),
        (
            &["bench", "pipeline", "--intake-capacity", "0"],
            "--intake-capacity must be an integer from 1 to 10000000",
        ),
        (
            &["bench", "pipeline", "--n", "18446744073709551615"],
            "--n must be an integer from 1 to 10000000",
        ),
        (
            &["bench", "faults", "--outage-secs", "18446744073709551615"],
            "--outage-secs must be an integer from 1 to 3600",
        ),
        (
            &["bench", "faults", "--rate", "18446744073709551615"],
            "--rate must be an integer from 1 to 100000",
        ),
        (
            &["bench", "faults", "--baseline-secs", "-1"],
            "--baseline-secs must be an integer from 1 to 3600",
        ),
    ];
    for (args, message) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
            .args(args)
            .output()
            .expect("running kevents");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing run");
    }
}

/// `bench apiserver --start-on-input` (on the embedded simulator) builds everything, says
/// `READY`, and records nothing until a line arrives on standard input: its recording
/// begins after the line was sent, and its counts are exact.
#[test]
fn start_on_input_waits_for_the_line() {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .args(["bench", "apiserver", "--start-on-input"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "READY");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "it ran without the line"
    );
    let sent = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
    let r: Value = serde_json::from_str(rest.trim().lines().last().unwrap()).unwrap();
    assert_eq!(r["stored_counts_ok"], true, "{r}");
    assert!(
        r["began_unix_ms"].as_u64().unwrap() >= sent,
        "{r} before {sent}"
    );
}
