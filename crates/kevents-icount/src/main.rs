//! `kevents-icount <measure>`: one fixed, deterministic piece of work on a hot path, for
//! `scripts/icount.py`, which runs it under `valgrind --tool=callgrind` and counts the
//! instructions of one function only (`--toggle-collect`): the function named by
//! [`MEASURES`] for that measure. Everything it needs (events, objects, JSON) is built
//! before that function is called, and nothing in it reads a clock that the work depends on
//! or waits on another thread, so its count is the same from run to run (up to the hash
//! seeds, which are random per process: see docs/benchmarks.md for the spread).
//!
//! It prints one JSON line saying what the work did (events created, series started,
//! records exported, ...): the guard checks that these did not change either, since a
//! count is only comparable for the same work.
//!
//! ```text
//! kevents-icount correlator-hot|correlator-wide|correlator-api|emit|emit-v1|series|export
//! ```

mod measured;
mod setup;

use std::process::ExitCode;

/// Every measure: its name on the command line and the function callgrind counts.
pub const MEASURES: [(&str, &str); 7] = [
    ("correlator-hot", "kevents_icount::measured::correlate"),
    ("correlator-wide", "kevents_icount::measured::correlate"),
    ("correlator-api", "kevents_icount::measured::correlate"),
    ("emit", "kevents_icount::measured::emit"),
    ("emit-v1", "kevents_icount::measured::emit_v1"),
    ("series", "kevents_icount::measured::series"),
    ("export", "kevents_icount::measured::export"),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [what] = args.as_slice() else {
        return usage();
    };
    if what == "--list" {
        for (name, function) in MEASURES {
            println!("{name} {function}");
        }
        return ExitCode::SUCCESS;
    }
    let Some(summary) = measure(what) else {
        return usage();
    };
    match summary {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kevents-icount {what}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs measure `what` and says what its work did; `None` for an unknown name.
fn measure(what: &str) -> Option<Result<serde_json::Value, String>> {
    Some(match what {
        "correlator-hot" => setup::correlator(setup::CORRELATOR_HOT, true),
        "correlator-wide" => setup::correlator(setup::CORRELATOR_WIDE, true),
        "correlator-api" => setup::correlator(setup::CORRELATOR_API, false),
        "emit" => setup::emit(false),
        "emit-v1" => setup::emit(true),
        "series" => setup::series(),
        "export" => setup::export(),
        _ => return None,
    })
}

fn usage() -> ExitCode {
    let names: Vec<&str> = MEASURES.iter().map(|(n, _)| *n).collect();
    eprintln!("usage: kevents-icount {}|--list", names.join("|"));
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(v: &serde_json::Value, key: &str) -> u64 {
        v[key].as_u64().unwrap_or(u64::MAX)
    }

    /// Every listed measure runs, does its whole work without a failure, and does what its
    /// inputs say it must (the guard compares counts only for the same work).
    #[test]
    fn every_measure_does_its_work() {
        for (name, function) in MEASURES {
            assert!(
                function.starts_with("kevents_icount::measured::"),
                "{function}"
            );
            let v = measure(name).expect("listed").expect("runs");
            assert_eq!(v["measure"], name);
            assert_eq!(field(&v, "failed"), 0, "{v}");
            let size = field(&v, "size");
            match name {
                // Every occurrence is written (created or patched) or skipped.
                n if n.starts_with("correlator-") => assert_eq!(
                    field(&v, "created") + field(&v, "patched") + field(&v, "skipped"),
                    size,
                    "{v}"
                ),
                // Every call is queued.
                "emit" | "emit-v1" => assert_eq!(field(&v, "accepted"), size, "{v}"),
                // 1 000 pods x 5 reasons: one CREATE each, a series start each, a finish each;
                // every other occurrence counted in memory.
                "series" => {
                    assert_eq!(field(&v, "created"), 5_000, "{v}");
                    assert_eq!(field(&v, "patched"), 10_000, "{v}");
                    assert_eq!(field(&v, "skipped"), size - 10_000, "{v}");
                }
                // The deltas sum to the last counts (2 000 events at count 8), and the
                // relisted rounds (every fourth) publish nothing.
                "export" => {
                    assert_eq!(field(&v, "accepted"), 2_000 * 8, "{v}");
                    assert_eq!(field(&v, "skipped"), 2_000 * 2, "{v}");
                    assert_eq!(field(&v, "created"), size - 2_000 * 2, "{v}");
                }
                other => panic!("no check for measure {other}"),
            }
        }
        assert!(measure("nothing").is_none());
    }
}
