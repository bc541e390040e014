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
    let summary = match what.as_str() {
        "--list" => {
            for (name, function) in MEASURES {
                println!("{name} {function}");
            }
            return ExitCode::SUCCESS;
        }
        "correlator-hot" => setup::correlator(setup::CORRELATOR_HOT, true),
        "correlator-wide" => setup::correlator(setup::CORRELATOR_WIDE, true),
        "correlator-api" => setup::correlator(setup::CORRELATOR_API, false),
        "emit" => setup::emit(false),
        "emit-v1" => setup::emit(true),
        "series" => setup::series(),
        "export" => setup::export(),
        _ => return usage(),
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

fn usage() -> ExitCode {
    let names: Vec<&str> = MEASURES.iter().map(|(n, _)| *n).collect();
    eprintln!("usage: kevents-icount {}|--list", names.join("|"));
    ExitCode::from(2)
}
