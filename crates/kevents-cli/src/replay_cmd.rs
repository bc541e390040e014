//! `kevents replay`.

use std::io::{BufWriter, Write};

use clap::{Args, ValueEnum};
use kevents_core::ClientGoVersion;
use kevents_sim::replay::series::{SeriesReplayOptions, SeriesReplayer, Ticks};
use kevents_sim::replay::{self, ReplayOptions, Replayer};

use crate::cluster::{Failure, FailureKind};

/// A combination of flags that cannot be used together: a usage error (exit code 2).
fn usage(message: String) -> anyhow::Error {
    Failure::new(FailureKind::Config, message).into()
}

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
    /// The client-go release to behave like: 1.37 or 1.36 (the same behaviour: spam key with
    /// the event type, UUID names for invalid ones, x/time 0.16's token bucket) or 1.20.
    #[arg(long, value_name = "VERSION", default_value = "1.37", value_parser = parse_client_go)]
    client_go: ClientGoVersion,
    /// The API replayed: core/v1 (tools/record's correlator, one decision per line) or
    /// events.k8s.io/v1 (tools/events' series, one line per sink call; docs/replay-format.md).
    #[arg(long, value_enum, default_value_t = Api::CoreV1)]
    api: Api,
    /// events.k8s.io/v1: when the refresh (30 min) and finish (6 min) loops run: only on
    /// `tick` lines (manual) or also on client-go's schedule from the first line's time (auto).
    #[arg(long, value_enum, default_value_t = TickMode::Manual)]
    ticks: TickMode,
    /// events.k8s.io/v1: also print the lines that wrote nothing, with a `why`.
    #[arg(long)]
    all: bool,
    /// events.k8s.io/v1: the host part of the default reportingInstance
    /// (`<reportingController>-<hostname>`).
    #[arg(long, value_name = "H", default_value = "oracle-host")]
    hostname: String,
}

fn parse_client_go(s: &str) -> Result<ClientGoVersion, String> {
    s.parse()
        .map_err(|e: kevents_core::profile::UnknownClientGoVersion| e.to_string())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Api {
    /// core/v1 Events (client-go tools/record).
    #[value(name = "core/v1")]
    CoreV1,
    /// events.k8s.io/v1 Events (client-go tools/events).
    #[value(name = "events.k8s.io/v1")]
    EventsV1,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum TickMode {
    /// Only `tick` lines run the loops.
    Manual,
    /// Also client-go's schedule.
    Auto,
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
            client_go: self.client_go,
        }
    }

    /// The flags that only one of the two APIs reads, given with the other.
    fn check_api_flags(&self) -> anyhow::Result<()> {
        let core_only = [
            ("--burst", self.burst.is_some()),
            ("--qps", self.qps.is_some()),
            ("--max-events", self.max_events.is_some()),
            ("--max-interval", self.max_interval.is_some()),
            ("--lru", self.lru.is_some()),
            ("--from kubectl", matches!(self.from, InputFormat::Kubectl)),
        ];
        let v1_only = [
            ("--ticks auto", self.ticks == TickMode::Auto),
            ("--all", self.all),
            ("--hostname", self.hostname != "oracle-host"),
        ];
        match self.api {
            Api::EventsV1 => {
                if let Some((flag, _)) = core_only.iter().find(|(_, given)| *given) {
                    return Err(usage(format!("{flag} applies to --api core/v1 only")));
                }
                if self.client_go.behaviour() != ClientGoVersion::V1_36 {
                    return Err(usage(
                        "--api events.k8s.io/v1 replays the tools/events of client-go 1.37 and 1.36 only"
                            .to_owned(),
                    ));
                }
            }
            Api::CoreV1 => {
                if let Some((flag, _)) = v1_only.iter().find(|(_, given)| *given) {
                    return Err(usage(format!(
                        "{flag} applies to --api events.k8s.io/v1 only"
                    )));
                }
            }
        }
        Ok(())
    }
}

pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    args.check_api_flags()?;
    if args.api == Api::EventsV1 {
        return run_series(&args);
    }
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

fn run_series(args: &ReplayArgs) -> anyhow::Result<()> {
    let options = args.options();
    options.validate()?;
    let mut replayer = SeriesReplayer::new(SeriesReplayOptions {
        ticks: match args.ticks {
            TickMode::Manual => Ticks::Manual,
            TickMode::Auto => Ticks::Auto,
        },
        all: args.all,
        hostname: args.hostname.clone(),
    });
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    replayer.replay_trace(std::io::stdin().lock(), &mut out, options.max_line_bytes)?;
    out.flush()?;
    Ok(())
}
