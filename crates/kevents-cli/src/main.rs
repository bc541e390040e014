//! `kevents`: replay event traces through client-go's correlation logic, run the benchmarks,
//! and run the demo pipeline.

mod bench_apiserver;
mod bench_correlator;
mod bench_faults;
mod bench_pipeline;
mod cluster;
mod demo;
mod replay_cmd;

use clap::{Parser, Subcommand};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Workload `api` (type Warning) through the pipeline and the HTTP sink to an apiserver.
    Apiserver(bench_apiserver::ApiserverArgs),
    /// An apiserver outage (the simulator refuses connections) during a steady stream.
    Faults(bench_faults::FaultsArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Replay(args) => replay_cmd::run(args),
        Command::Bench(BenchCommand::Correlator(args)) => bench_correlator::run(args),
        Command::Bench(BenchCommand::Pipeline(args)) => bench_pipeline::run(args),
        Command::Bench(BenchCommand::Apiserver(args)) => bench_apiserver::run(args),
        Command::Bench(BenchCommand::Faults(args)) => bench_faults::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kevents: {e:#}");
            std::process::ExitCode::from(cluster::exit_code(&e))
        }
    }
}
