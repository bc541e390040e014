//! `kevents demo` against the embedded simulator: the table read back from the server shows
//! the story, and every counter adds up.

use std::collections::BTreeMap;
use std::process::Command;

fn run_demo() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .args(["demo", "--pace-ms", "0", "--width", "200"])
        .output()
        .expect("running kevents demo");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "demo failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The counters block: `  name   value` lines after "pipeline counters".
fn counters(stdout: &str) -> BTreeMap<String, u64> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("pipeline counters"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| {
            let (name, value) = l.trim().rsplit_once(' ')?;
            Some((name.trim().to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// Table rows (between the header and the blank line before the counters).
fn rows(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("LAST SEEN"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn demo_shows_the_story_and_every_counter_adds_up() {
    let stdout = run_demo();
    let rows = rows(&stdout);
    assert!(!rows.is_empty(), "no table:\n{stdout}");

    assert!(
        rows.iter().any(|r| r.contains("SuccessfulCreate")
            && r.contains("(combined from similar events): Created pod")),
        "no aggregate event:\n{stdout}"
    );
    let backoff = rows
        .iter()
        .find(|r| {
            r.contains("BackOff") && r.contains("pod/web-") && r.contains("Back-off restarting")
        })
        .unwrap_or_else(|| panic!("no crash-loop BackOff row:\n{stdout}"));
    let count: u64 = backoff
        .split("(x")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("BackOff row without (xN over M): {backoff}"));
    assert!(count > 1, "{backoff}");
    assert!(
        rows.iter().any(|r| r.contains("ImagePullBackOff")),
        "{stdout}"
    );

    let c = counters(&stdout);
    let get = |k: &str| {
        *c.get(k)
            .unwrap_or_else(|| panic!("counter {k:?} missing: {c:?}"))
    };
    let refused =
        get("dropped: invalid") + get("dropped: intake full") + get("dropped: after shutdown");
    assert_eq!(get("emitted"), get("queued") + refused, "{c:?}");
    // Deferred spam tails (the default): a skipped repeat's state is held ("deferred"),
    // written at refill or shutdown, or replaced by a newer state of its event ("superseded").
    assert_eq!(
        get("queued"),
        get("spam-filtered")
            + get("deferred")
            + get("written")
            + get("failed")
            + get("superseded")
            + get("dropped: sink queue full")
            + get("dropped: sink stopped"),
        "{c:?}"
    );
    assert_eq!(
        get("deferred"),
        0,
        "every held tail written at shutdown: {c:?}"
    );
    assert_eq!(
        get("written"),
        get("created") + get("patched") + get("recreated"),
        "{c:?}"
    );
    assert_eq!(
        get("failed"),
        get("failed: rejected") + get("failed: retry budget") + get("failed: abandoned"),
        "{c:?}"
    );
    // The simulator never fails here: nothing lost, nothing retried.
    assert_eq!(
        get("failed") + refused + get("dropped: sink queue full"),
        0,
        "{c:?}"
    );
    assert_eq!(get("retries"), 0, "{c:?}");
    // The spam filter acted: its skipped repeats were held and replaced by newer states of
    // their events (deferred tails, the default); the last ones written at shutdown.
    assert!(get("superseded") > 0 && get("aggregated") > 0, "{c:?}");
    assert_eq!(get("spam-filtered"), 0, "{c:?}");
    // Each stored event is one CREATE. Counts carry every observed repeat, spam-filtered
    // ones included (client-go's observe runs before the filter), so their sum lies between
    // the writes and the occurrences; with deferred tails it is every occurrence.
    assert_eq!(get("stored events"), get("created"), "{c:?}");
    let sum = get("stored count sum");
    assert!(sum >= get("written") && sum <= get("queued"), "{c:?}");
    assert_eq!(
        sum,
        get("queued"),
        "no occurrence outside a stored count: {c:?}"
    );
    assert_eq!(get("stored events") as usize, rows.len(), "{c:?}");
    assert!(
        stdout.contains("accounting: every occurrence is accounted for"),
        "{stdout}"
    );
}

/// The side-by-side table: `  row   a   b   c` lines after "the same story".
fn side_by_side(stdout: &str) -> BTreeMap<String, [u64; 3]> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("the same story"))
        .skip(2)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let n = words.len();
            let v: Vec<u64> = words[n.checked_sub(3)?..]
                .iter()
                .filter_map(|w| w.parse().ok())
                .collect();
            Some((words[..n - 3].join(" "), v.try_into().ok()?))
        })
        .collect()
}

/// The story under client-go's policies, kevents' defaults (deferred tails included) and the
/// defaults without deferred tails: the same occurrences; with the defaults every one of
/// them ends in a stored count, while with client-go's policies, or without deferred tails,
/// the spam filter's tails never land.
#[test]
fn demo_ends_with_the_policies_side_by_side() {
    let stdout = run_demo();
    let t = side_by_side(&stdout);
    let row = |k: &str| {
        *t.get(k)
            .unwrap_or_else(|| panic!("row {k:?} missing:\n{stdout}"))
    };
    let [emitted, _, _] = row("occurrences emitted");
    assert_eq!(row("occurrences emitted"), [emitted; 3]);
    let c = counters(&stdout);
    assert_eq!(emitted, c["emitted"]);
    let [client_go, defaults, skipped] = row("sum of stored counts");
    assert_eq!(
        defaults, c["stored count sum"],
        "the defaults column is the run above"
    );
    assert!(client_go < emitted, "{t:?}");
    assert!(skipped < emitted, "{t:?}");
    assert_eq!(
        defaults, emitted,
        "defaults (deferred tails): every occurrence counted: {t:?}"
    );
    assert_eq!(row("occurrences not in a stored count")[1], 0);
    let [r_client_go, r_defaults, r_skipped] = row("requests sent");
    // Without deferred tails the queues and writes are client-go's here (the story settles
    // between instants); the tails cost a few more requests.
    assert!(r_skipped <= r_client_go, "{t:?}");
    assert!(
        r_defaults > r_skipped && r_defaults < r_skipped + 20,
        "{t:?}"
    );
    assert_eq!(row("events stored")[1], c["stored events"]);
}

#[test]
fn demo_is_deterministic() {
    let a = counters(&run_demo());
    let b = counters(&run_demo());
    assert_eq!(a, b);
}
