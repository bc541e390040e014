//! `kevents`: replay event traces through client-go's correlation logic, run the benchmarks,
//! and run the demo pipeline.

mod bench_correlator;
mod bench_pipeline;
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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Replay(args) => replay_cmd::run(args),
        Command::Bench(BenchCommand::Correlator(args)) => bench_correlator::run(args),
        Command::Bench(BenchCommand::Pipeline(args)) => bench_pipeline::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kevents: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
