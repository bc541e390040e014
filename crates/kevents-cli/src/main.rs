//! `kevents`: replay event traces through client-go's correlation logic, run the benchmarks,
//! run the demo pipeline, and check before recording that events would be written
//! (`doctor`).

mod bench_apiserver;
mod bench_correlator;
mod bench_emit;
mod bench_export;
mod bench_faults;
mod bench_fleet;
mod bench_pipeline;
mod bounds;
mod cluster;
mod counting_sink;
mod demo;
mod doctor;
mod doctor_export;
mod doctor_rbac;
mod export_cmd;
mod export_feed;
mod export_metrics;
mod export_shards;
mod export_sinks;
mod history_cmd;
mod nats_conn;
mod replay_cmd;
mod sanitize;
mod verify;

use clap::{Parser, Subcommand};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Transparent huge pages off for this process, unless `KEVENTS_THP=1`: where the kernel's
/// THP mode is `always`, mimalloc's arenas get 2 MiB pages as soon as they are touched, which
/// doubled the peak RSS of a 200 000-event burst (111-115 MiB instead of 57-61) and made no
/// measurable difference to its throughput (docs/benchmarks.md, Memory). Only future page
/// faults are affected, so calling it first thing in `main` is early enough. A kernel that
/// refuses (no prctl) leaves things as they were.
fn no_huge_pages() {
    #[cfg(target_os = "linux")]
    if std::env::var_os("KEVENTS_THP").is_none_or(|v| v != "1") {
        let _ = nix::sys::prctl::set_thp_disable(true);
    }
}

#[derive(Parser)]
#[command(
    name = "kevents",
    version,
    about = "Kubernetes Event recording, the client-go way, on actix"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The main job: a realistic 30-minute story (crash loop, image pull back-off, scaling)
    /// through the whole pipeline to the embedded apiserver simulator or a real cluster,
    /// ending with a `kubectl get events`-style table and the pipeline's counters.
    Demo(demo::DemoArgs),
    /// Before recording: may this kubeconfig's identity write events where they will be
    /// written? (event API served, create/patch on events per namespace, reporting names;
    /// exit code 4 when events would be lost)
    Doctor(doctor::DoctorArgs),
    /// Watch the cluster's events and export every occurrence exactly once into NATS
    /// JetStream, OTLP logs (`--otlp`) or a webhook (`--webhook`) (resumable after a restart;
    /// SIGTERM ends it cleanly).
    Export(Box<export_cmd::ExportArgs>),
    /// Read the exported history back (the stream `export` writes), like `kubectl events`:
    /// a window's events with their occurrences in it, filtered by namespace, object and
    /// reason; `--follow` tails the stream.
    History(Box<history_cmd::HistoryArgs>),
    /// Read a trace (JSON Lines) on stdin and print the correlator's decision for every line.
    Replay(replay_cmd::ReplayArgs),
    /// Run a benchmark workload and print one JSON object per run.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// The correlator alone, one thread, virtual clock advancing 1 ms per occurrence.
    Correlator(bench_correlator::CorrelatorArgs),
    /// The whole pipeline: recorder -> broadcaster -> correlator -> a counting sink.
    Pipeline(bench_pipeline::PipelineArgs),
    /// Caller-side cost of `Recorder::event` and of the events.k8s.io/v1 call, pipeline running.
    Emit(bench_emit::EmitArgs),
    /// Workload `api` (type Warning) through the pipeline and the HTTP sink to an apiserver.
    Apiserver(bench_apiserver::ApiserverArgs),
    /// An apiserver outage (the simulator refuses connections) during a steady stream.
    Faults(bench_faults::FaultsArgs),
    /// N pipelines, each with its own write budget, sharing one in-memory apiserver throttled
    /// as kube-apiserver's EventRateLimit plugin does.
    Fleet(bench_fleet::FleetArgs),
    /// `kevents export` (a child) on N live events in the scale simulator and a local
    /// nats-server: first-export records/s, memory, lag at a steady write rate.
    Export(bench_export::ExportBenchArgs),
}

/// The log filter without `RUST_LOG`: warnings and errors of the kevents crates only.
const DEFAULT_LOG_FILTER: &str = "kevents=warn";

/// Logs (`tracing`) go to stderr, never stdout (which carries replay and bench output),
/// filtered by `RUST_LOG` (tracing-subscriber's `EnvFilter` syntax, e.g. `kevents=debug` or
/// `trace`). An unusable `RUST_LOG` is reported once and the default filter is used.
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let (filter, problem) = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => match EnvFilter::try_new(&v) {
            Ok(f) => (f, None),
            Err(e) => (EnvFilter::new(DEFAULT_LOG_FILTER), Some(e.to_string())),
        },
        Err(std::env::VarError::NotUnicode(_)) => (
            EnvFilter::new(DEFAULT_LOG_FILTER),
            Some("not valid UTF-8".to_owned()),
        ),
        _ => (EnvFilter::new(DEFAULT_LOG_FILTER), None),
    };
    let installed = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| cluster::RedactedStderr)
        .try_init()
        .is_ok();
    if let Some(problem) = problem {
        eprintln!(
            "kevents: ignoring RUST_LOG ({}); logging warnings and errors of kevents only",
            printable(&problem)
        );
    }
    if installed {
        tracing::debug!(version = env!("CARGO_PKG_VERSION"), "kevents starting");
    }
}

/// The error and its causes on one line, each text once: a cause whose text the message
/// already contains is not repeated.
fn error_text(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
    }
    printable(&text)
}

/// `s` with control characters other than newlines escaped (kevents-core's rule for server
/// text, line by line), so no error can drive the terminal.
fn printable(s: &str) -> String {
    s.split('\n')
        .map(|line| kevents_core::status::sanitize_server_text_to(line, usize::MAX))
        .collect::<Vec<_>>()
        .join("\n")
}

fn main() -> std::process::ExitCode {
    no_huge_pages();
    let matches = <Cli as clap::CommandFactory>::command().get_matches();
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // Whether NATS was asked for (`--nats` or NATS_URL), not only its default: an export to
    // OTLP or a webhook alone keeps its resume point in the cluster.
    if let Command::Export(args) = &mut cli.command {
        args.nats_given = matches.subcommand_matches("export").is_some_and(|m| {
            matches!(
                m.value_source("servers"),
                Some(
                    clap::parser::ValueSource::CommandLine | clap::parser::ValueSource::EnvVariable
                )
            )
        });
    }
    init_logging();
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Export(args) => export_cmd::run(*args),
        Command::History(args) => history_cmd::run(*args),
        Command::Replay(args) => replay_cmd::run(args),
        Command::Bench(BenchCommand::Correlator(args)) => bench_correlator::run(args),
        Command::Bench(BenchCommand::Pipeline(args)) => bench_pipeline::run(args),
        Command::Bench(BenchCommand::Emit(args)) => bench_emit::run(args),
        Command::Bench(BenchCommand::Apiserver(args)) => bench_apiserver::run(args),
        Command::Bench(BenchCommand::Faults(args)) => bench_faults::run(args),
        Command::Bench(BenchCommand::Fleet(args)) => bench_fleet::run(args),
        Command::Bench(BenchCommand::Export(args)) => bench_export::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kevents: {}", error_text(&e));
            std::process::ExitCode::from(cluster::exit_code(&e))
        }
    }
}

/// The flag walk (issue 36): every numeric flag of every subcommand, found through clap's
/// introspection (a new flag is walked without being listed), parsed with 0, 1, its maximum,
/// the maximum plus one, u64::MAX, a negative, a non-number and nothing: never a panic; a
/// value in its range parses, any other value is a usage error (exit code 2) whose message
/// names the range. Only the parse runs (a run with the maximum could take hours).
#[cfg(test)]
mod flag_walk {
    use super::Cli;
    use crate::bounds::{self, Bound};
    use clap::{CommandFactory as _, Parser as _};
    use std::any::TypeId;

    /// Every numeric flag: (subcommand path, long flag).
    fn numeric_flags() -> Vec<(Vec<String>, String, TypeId)> {
        fn walk(
            cmd: &clap::Command,
            path: &mut Vec<String>,
            out: &mut Vec<(Vec<String>, String, TypeId)>,
        ) {
            let numeric = [
                TypeId::of::<u8>(),
                TypeId::of::<u16>(),
                TypeId::of::<u32>(),
                TypeId::of::<u64>(),
                TypeId::of::<usize>(),
                TypeId::of::<i8>(),
                TypeId::of::<i16>(),
                TypeId::of::<i32>(),
                TypeId::of::<i64>(),
                TypeId::of::<isize>(),
                TypeId::of::<f32>(),
                TypeId::of::<f64>(),
            ];
            for arg in cmd.get_arguments() {
                let parser = arg.get_value_parser().type_id();
                if let (Some(long), Some(t)) =
                    (arg.get_long(), numeric.iter().find(|t| parser == **t))
                {
                    out.push((path.clone(), format!("--{long}"), *t));
                }
            }
            for sub in cmd.get_subcommands() {
                path.push(sub.get_name().to_owned());
                walk(sub, path, out);
                path.pop();
            }
        }
        let mut out = Vec::new();
        walk(&Cli::command(), &mut Vec::new(), &mut out);
        out
    }

    fn bound(path: &[String], flag: &str) -> Bound {
        let command = path.join(" ");
        *bounds::ALL
            .iter()
            .find(|b| b.command == command && b.flag == flag)
            .unwrap_or_else(|| {
                panic!("`kevents {command} {flag}` is numeric: give it a range in bounds.rs")
            })
    }

    fn parse(path: &[String], flag: &str, value: &str) -> Result<(), clap::Error> {
        let mut argv = vec!["kevents".to_owned()];
        argv.extend(path.iter().cloned());
        argv.push(format!("{flag}={value}"));
        let parsed = std::panic::catch_unwind(|| Cli::try_parse_from(&argv).map(drop));
        match parsed {
            Ok(result) => result,
            Err(_) => panic!("parsing {argv:?} panicked"),
        }
    }

    #[test]
    fn every_numeric_flag_of_every_subcommand_is_bounded() {
        let flags = numeric_flags();
        // The walk finds them through clap; a sanity floor, not the list.
        assert!(flags.len() >= 20, "{flags:?}");
        for (path, flag, ty) in &flags {
            let b = bound(path, flag);
            let float = *ty == TypeId::of::<f32>() || *ty == TypeId::of::<f64>();
            let max = b.max.to_string();
            let above = (u128::from(b.max) + 1).to_string();
            let cases: Vec<(&str, bool)> = if float {
                vec![
                    ("0", false),
                    ("1", true),
                    ("3.4e38", true),
                    ("1e39", false),
                    ("18446744073709551615", true),
                    ("-1", false),
                    ("NaN", false),
                    ("x", false),
                    ("", false),
                ]
            } else {
                vec![
                    ("0", b.min == 0),
                    ("1", b.min <= 1),
                    (max.as_str(), true),
                    (above.as_str(), false),
                    ("18446744073709551615", b.max == u64::MAX),
                    ("-1", false),
                    ("x", false),
                    ("", false),
                ]
            };
            for (value, valid) in cases {
                let what = format!("kevents {} {flag}={value:?}", path.join(" "));
                match parse(path, flag, value) {
                    Ok(()) => assert!(valid, "{what}: accepted, out of its range"),
                    Err(e) => {
                        assert!(!valid, "{what}: refused, in its range: {e}");
                        assert_eq!(e.exit_code(), 2, "{what}: {e}");
                        let text = e.to_string();
                        let range = if float {
                            "a finite number greater than 0".to_owned()
                        } else {
                            b.accepts()
                        };
                        assert!(
                            text.contains(&range),
                            "{what}: the message names no range: {text}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_bound_is_a_flag_that_exists() {
        let flags = numeric_flags();
        for b in bounds::ALL {
            assert!(
                flags
                    .iter()
                    .any(|(path, flag, _)| path.join(" ") == b.command && flag == b.flag),
                "bounds.rs lists `{} {}`, which is not a numeric flag",
                b.command,
                b.flag
            );
            assert!(b.min <= b.max || b.flag == "--qps", "{b:?}");
        }
    }
}

#[cfg(test)]
mod bounds_docs {
    /// docs/cli-bounds.md lists every range of `bounds.rs`, as it is.
    #[test]
    fn the_docs_table_lists_every_range() {
        let page = include_str!("../../../docs/cli-bounds.md");
        for b in crate::bounds::ALL.iter().filter(|b| b.flag != "--qps") {
            let row = format!(
                "| `kevents {} {}` | {} | {} |",
                b.command, b.flag, b.min, b.max
            );
            assert!(page.contains(&row), "docs/cli-bounds.md lacks {row}");
        }
    }
}
