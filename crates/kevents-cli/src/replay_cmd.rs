//! `kevents replay`.

use std::io::{BufWriter, Write};

use clap::{Args, ValueEnum};
use kevents_sim::replay::{self, ReplayOptions, Replayer};

/// Options of `kevents replay`; absent correlator flags take client-go's defaults. Every
/// value is checked against its range when the command line is parsed (a usage error, exit
/// code 2), so a zero never silently becomes a default.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Spam filter burst, 1 to 2147483647 (default 25).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = replay::parse_burst)]
    burst: Option<i32>,
    /// Spam filter refill in tokens per second, a finite number > 0 (default 1/300).
    #[arg(long, value_name = "F", allow_negative_numbers = true, value_parser = replay::parse_qps)]
    qps: Option<f32>,
    /// Distinct messages that trigger aggregation, 1 or more (default 10).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = replay::parse_max_events)]
    max_events: Option<i64>,
    /// Aggregation inactivity window in seconds, 1 or more (default 600).
    #[arg(long, value_name = "S", allow_negative_numbers = true, value_parser = replay::parse_max_interval)]
    max_interval: Option<i64>,
    /// Size of each LRU cache, 1 or more (default 4096).
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = replay::parse_lru)]
    lru: Option<i64>,
    /// Most occurrences a `--from kubectl` document may expand to (the sum of its counts).
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = replay::parse_max_occurrences,
        default_value_t = replay::DEFAULT_MAX_OCCURRENCES
    )]
    max_occurrences: u64,
    /// Longest trace line in bytes, not counting its line terminator (at most 1 GiB).
    #[arg(
        long,
        value_name = "BYTES",
        allow_negative_numbers = true,
        value_parser = replay::parse_max_line_bytes,
        default_value_t = replay::DEFAULT_MAX_LINE_BYTES
    )]
    max_line_bytes: usize,
    /// Input format: a trace, or `kubectl get events -o json` output.
    #[arg(long, value_enum, default_value_t = InputFormat::Trace)]
    from: InputFormat,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum InputFormat {
    /// JSON Lines trace (docs/replay-format.md).
    Trace,
    /// An EventList as printed by `kubectl get events -o json`.
    Kubectl,
}

impl ReplayArgs {
    fn options(&self) -> ReplayOptions {
        ReplayOptions {
            burst: self.burst,
            qps: self.qps,
            max_events: self.max_events,
            max_interval: self.max_interval,
            lru: self.lru,
            max_occurrences: self.max_occurrences,
            max_line_bytes: self.max_line_bytes,
        }
    }
}

pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let options = args.options();
    let mut replayer = Replayer::new(options.correlator_options()?);
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let stdin = std::io::stdin();
    match args.from {
        InputFormat::Trace => {
            replayer.replay_trace(stdin.lock(), &mut out, options.max_line_bytes)?;
        }
        InputFormat::Kubectl => {
            replayer.replay_kubectl(stdin.lock(), &mut out, options.max_occurrences)?;
        }
    }
    out.flush()?;
    Ok(())
}
