//! `kevents`: replay event traces through client-go's correlation logic, run the benchmarks,
//! run the demo pipeline, and check before recording that events would be written
//! (`doctor`).

mod bench_apiserver;
mod bench_correlator;
mod bench_emit;
mod bench_faults;
mod bench_pipeline;
mod cluster;
mod counting_sink;
mod demo;
mod doctor;
mod doctor_rbac;
mod export_cmd;
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
    /// JetStream (resumable after a restart; SIGTERM ends it cleanly).
    Export(export_cmd::ExportArgs),
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
        .with_writer(std::io::stderr)
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
    let cli = Cli::parse();
    init_logging();
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Export(args) => export_cmd::run(args),
        Command::Replay(args) => replay_cmd::run(args),
        Command::Bench(BenchCommand::Correlator(args)) => bench_correlator::run(args),
        Command::Bench(BenchCommand::Pipeline(args)) => bench_pipeline::run(args),
        Command::Bench(BenchCommand::Emit(args)) => bench_emit::run(args),
        Command::Bench(BenchCommand::Apiserver(args)) => bench_apiserver::run(args),
        Command::Bench(BenchCommand::Faults(args)) => bench_faults::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kevents: {}", error_text(&e));
            std::process::ExitCode::from(cluster::exit_code(&e))
        }
    }
}
