//! `kevents replay`.

use std::io::{BufRead, BufWriter, Read, Write};

use anyhow::Context;
use clap::{Args, ValueEnum};
use kevents_core::core_v1::correlator::CorrelatorOptions;
use kevents_sim::replay::{Replayer, from_kubectl_json};

/// Options of `kevents replay`; absent flags take client-go's defaults.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Spam filter burst (default 25).
    #[arg(long)]
    burst: Option<i32>,
    /// Spam filter refill in tokens per second (default 1/300).
    #[arg(long)]
    qps: Option<f32>,
    /// Distinct messages that trigger aggregation (default 10).
    #[arg(long)]
    max_events: Option<i64>,
    /// Aggregation inactivity window in seconds (default 600).
    #[arg(long)]
    max_interval: Option<i64>,
    /// Size of each LRU cache (default 4096).
    #[arg(long)]
    lru: Option<i64>,
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
    fn options(&self) -> CorrelatorOptions {
        CorrelatorOptions {
            burst_size: self.burst.unwrap_or(0),
            qps: self.qps.unwrap_or(0.0),
            max_events: self.max_events.unwrap_or(0),
            max_interval_in_seconds: self.max_interval.unwrap_or(0),
            lru_cache_size: self.lru.unwrap_or(0),
            ..Default::default()
        }
    }
}

pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let mut replayer = Replayer::new(args.options());
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match args.from {
        InputFormat::Trace => {
            for line in std::io::stdin().lock().lines() {
                let line = line.context("reading stdin")?;
                if line.trim().is_empty() {
                    continue;
                }
                let decision = replayer.replay_line(&line)?;
                serde_json::to_writer(&mut out, &decision)?;
                out.write_all(b"\n")?;
            }
        }
        InputFormat::Kubectl => {
            let mut input = String::new();
            std::io::stdin()
                .read_to_string(&mut input)
                .context("reading stdin")?;
            let lines = from_kubectl_json(&input).context("parsing kubectl JSON")?;
            for line in lines {
                let decision = replayer.replay(line)?;
                serde_json::to_writer(&mut out, &decision)?;
                out.write_all(b"\n")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
