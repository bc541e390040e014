//! The one place that defines the range of every numeric command-line flag: clap parses each
//! with [`Bound::parse_u64`] / [`Bound::parse_usize`] (a value outside the range, a negative
//! or a non-number is a usage error, exit code 2, whose message names the range), and
//! `docs/cli-bounds.md` lists them. `kevents replay`'s correlator flags keep their ranges in
//! `kevents_sim::replay` (its library checks them too) and are listed here as well, so the
//! flag walk (`tests` below) finds a range for every numeric flag of every subcommand.

/// The range of one numeric flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The subcommand path, e.g. `bench pipeline`.
    pub command: &'static str,
    /// The flag as typed, e.g. `--watcher-capacity`.
    pub flag: &'static str,
    /// The smallest value accepted.
    pub min: u64,
    /// The largest value accepted.
    pub max: u64,
    /// Why these limits (for the docs table).
    pub why: &'static str,
}

/// Most occurrences a benchmark run may generate: the workloads keep their events in
/// memory, so 10 million (about 1.5 GB) is the ceiling (`--n 1000000000000` reached 6.7 GB).
const MAX_BENCH_N: u64 = 10_000_000;
/// Most runs of a benchmark in one process.
const MAX_RUNS: u64 = 1_000;
/// Largest queue or overflow table a benchmark may ask for (slots are not allocated up
/// front, but each held event is).
const MAX_CAPACITY: u64 = 10_000_000;

/// `kevents demo --pace-ms`.
pub const DEMO_PACE_MS: Bound = Bound {
    command: "demo",
    flag: "--pace-ms",
    min: 0,
    max: 60_000,
    why: "0 runs as fast as the pipeline goes; a simulated minute takes at most a real one",
};
/// `kevents demo --width`.
pub const DEMO_WIDTH: Bound = Bound {
    command: "demo",
    flag: "--width",
    min: 10,
    max: 10_000,
    why: "a message column narrower than 10 characters shows nothing useful",
};
/// `kevents bench correlator --runs`.
pub const CORRELATOR_RUNS: Bound = runs("bench correlator");
/// `kevents bench correlator --n`.
pub const CORRELATOR_N: Bound = bench_n("bench correlator");
/// `kevents bench pipeline --runs`.
pub const PIPELINE_RUNS: Bound = runs("bench pipeline");
/// `kevents bench pipeline --n`.
pub const PIPELINE_N: Bound = bench_n("bench pipeline");
/// `kevents bench pipeline --intake-capacity`.
pub const PIPELINE_INTAKE_CAPACITY: Bound = Bound {
    command: "bench pipeline",
    flag: "--intake-capacity",
    min: 1,
    max: MAX_CAPACITY,
    why: "0 would drop (or merge) almost every occurrence: refused, not measured",
};
/// `kevents bench pipeline --overflow`.
pub const PIPELINE_OVERFLOW: Bound = Bound {
    command: "bench pipeline",
    flag: "--overflow",
    min: 1,
    max: MAX_CAPACITY,
    why: "an overflow table of 0 entries merges nothing",
};
/// `kevents bench pipeline --watcher-capacity`.
pub const PIPELINE_WATCHER_CAPACITY: Bound = Bound {
    command: "bench pipeline",
    flag: "--watcher-capacity",
    min: 1,
    max: MAX_CAPACITY,
    why: "0 would drop almost every event: refused, not measured",
};
/// `kevents bench emit --runs`.
pub const EMIT_RUNS: Bound = runs("bench emit");
/// `kevents bench emit --n`.
pub const EMIT_N: Bound = bench_n("bench emit");
/// `kevents bench apiserver --max-in-flight`.
pub const APISERVER_MAX_IN_FLIGHT: Bound = Bound {
    command: "bench apiserver",
    flag: "--max-in-flight",
    min: 1,
    max: 1_024,
    why: "0 writes nothing; an apiserver's max-requests-inflight is 400 by default",
};
/// `kevents bench apiserver --runs`.
pub const APISERVER_RUNS: Bound = runs("bench apiserver");
/// `kevents bench fleet --pipelines`.
pub const FLEET_PIPELINES: Bound = Bound {
    command: "bench fleet",
    flag: "--pipelines",
    min: 1,
    max: 10_000,
    why: "each pipeline holds its events and actors in this one process: 10 000 at most",
};
/// `kevents bench fleet --occurrences`.
pub const FLEET_OCCURRENCES: Bound = Bound {
    command: "bench fleet",
    flag: "--occurrences",
    min: 1,
    max: 3_000,
    why: "the first N occurrences of workload `api`, which has 3 000",
};
/// `kevents bench fleet --latency-ms`.
pub const FLEET_LATENCY_MS: Bound = Bound {
    command: "bench fleet",
    flag: "--latency-ms",
    min: 0,
    max: 60_000,
    why: "0 answers at once; a minute at most",
};
/// `kevents bench fleet --admission-latency-ms`.
pub const FLEET_ADMISSION_LATENCY_MS: Bound = Bound {
    command: "bench fleet",
    flag: "--admission-latency-ms",
    min: 0,
    max: 60_000,
    why: "0 decides at once; a minute at most (and never after the latency)",
};
/// `kevents bench fleet --stagger-ms`.
pub const FLEET_STAGGER_MS: Bound = Bound {
    command: "bench fleet",
    flag: "--stagger-ms",
    min: 0,
    max: 60_000,
    why: "0 starts every pipeline at once; a minute at most",
};
/// `kevents bench fleet --runs`.
pub const FLEET_RUNS: Bound = runs("bench fleet");
/// `kevents bench faults --outage-secs`.
pub const FAULTS_OUTAGE_SECS: Bound = Bound {
    command: "bench faults",
    flag: "--outage-secs",
    min: 1,
    max: 3_600,
    why: "an hour at most (u64::MAX seconds overflowed the clock and panicked)",
};
/// `kevents bench faults --baseline-secs`.
pub const FAULTS_BASELINE_SECS: Bound = Bound {
    command: "bench faults",
    flag: "--baseline-secs",
    min: 1,
    max: 3_600,
    why: "a baseline needs at least one second; an hour at most",
};
/// `kevents bench faults --rate`.
pub const FAULTS_RATE: Bound = Bound {
    command: "bench faults",
    flag: "--rate",
    min: 1,
    max: 100_000,
    why: "occurrences per second; the outage's backlog grows with it (u64::MAX grew without bound)",
};
/// `kevents bench export --events`.
pub const EXPORT_BENCH_EVENTS: Bound = Bound {
    command: "bench export",
    flag: "--events",
    min: 1,
    max: MAX_BENCH_N,
    why: "live events preloaded in the scale simulator (about 200 bytes each there): 10 million at most",
};
/// `kevents bench export --rate`.
pub const EXPORT_BENCH_RATE: Bound = Bound {
    command: "bench export",
    flag: "--rate",
    min: 0,
    max: 1_000_000,
    why: "occurrences per second of the steady phase (0: none); each is logged in memory",
};
/// `kevents bench export --duration`.
pub const EXPORT_BENCH_DURATION: Bound = Bound {
    command: "bench export",
    flag: "--duration",
    min: 0,
    max: 86_400,
    why: "seconds of the steady phase (0: none); a day at most",
};
/// `kevents bench export --writer-events`.
pub const EXPORT_BENCH_WRITER_EVENTS: Bound = Bound {
    command: "bench export",
    flag: "--writer-events",
    min: 1,
    max: MAX_BENCH_N,
    why: "the events the writer raises, round robin (the first N preloaded)",
};
/// `kevents bench export --namespaces`.
pub const EXPORT_BENCH_NAMESPACES: Bound = Bound {
    command: "bench export",
    flag: "--namespaces",
    min: 1,
    max: 1_000_000,
    why: "namespaces the preloaded events are spread over",
};
/// `kevents bench export --timeout`.
pub const EXPORT_BENCH_TIMEOUT: Bound = Bound {
    command: "bench export",
    flag: "--timeout",
    min: 1,
    max: 86_400,
    why: "seconds a phase may take before the run reports it incomplete; a day at most",
};
/// `kevents export --watch-timeout`.
pub const EXPORT_WATCH_TIMEOUT: Bound = Bound {
    command: "export",
    flag: "--watch-timeout",
    min: 1,
    max: 86_400,
    why: "a watch's timeoutSeconds: at least a second, a day at most (it is restarted anyway)",
};
/// `kevents export --progress`.
pub const EXPORT_PROGRESS: Bound = Bound {
    command: "export",
    flag: "--progress",
    min: 0,
    max: 86_400,
    why: "seconds between progress lines; 0 prints none",
};
/// `kevents export --lease-duration`.
pub const EXPORT_LEASE_DURATION: Bound = lease("--lease-duration");
/// `kevents export --shards` (and `kevents history --shards`).
pub const EXPORT_SHARDS: Bound = Bound {
    command: "export",
    flag: "--shards",
    min: 1,
    max: kevents_export::MAX_SHARDS as u64,
    why: "hash ranges of the events' uids, each its own stream and Lease",
};
/// `kevents export --nats-replicas`.
pub const EXPORT_NATS_REPLICAS: Bound = Bound {
    command: "export",
    flag: "--nats-replicas",
    min: 1,
    max: 5,
    why: "replicas of the stream and bucket it creates: JetStream allows 1 to 5",
};
/// `kevents export --renew-deadline`.
pub const EXPORT_RENEW_DEADLINE: Bound = lease("--renew-deadline");
/// `kevents export --retry-period`.
pub const EXPORT_RETRY_PERIOD: Bound = lease("--retry-period");
/// Every numeric flag (what the flag walk and the docs table check): `kevents replay`'s
/// correlator flags are parsed by `kevents_sim::replay`'s parsers with these ranges;
/// `replay --qps`, a float, by `kevents_sim::replay::parse_qps` (a finite number greater
/// than 0).
#[cfg(test)]
pub const ALL: [Bound; 42] = [
    EXPORT_BENCH_EVENTS,
    EXPORT_BENCH_RATE,
    EXPORT_BENCH_DURATION,
    EXPORT_BENCH_WRITER_EVENTS,
    EXPORT_BENCH_NAMESPACES,
    EXPORT_BENCH_TIMEOUT,
    DEMO_PACE_MS,
    DEMO_WIDTH,
    CORRELATOR_RUNS,
    CORRELATOR_N,
    PIPELINE_RUNS,
    PIPELINE_N,
    PIPELINE_INTAKE_CAPACITY,
    PIPELINE_OVERFLOW,
    PIPELINE_WATCHER_CAPACITY,
    EMIT_RUNS,
    EMIT_N,
    APISERVER_MAX_IN_FLIGHT,
    APISERVER_RUNS,
    FLEET_PIPELINES,
    FLEET_OCCURRENCES,
    FLEET_LATENCY_MS,
    FLEET_ADMISSION_LATENCY_MS,
    FLEET_STAGGER_MS,
    FLEET_RUNS,
    FAULTS_OUTAGE_SECS,
    FAULTS_BASELINE_SECS,
    FAULTS_RATE,
    EXPORT_WATCH_TIMEOUT,
    EXPORT_PROGRESS,
    EXPORT_LEASE_DURATION,
    EXPORT_RENEW_DEADLINE,
    EXPORT_RETRY_PERIOD,
    EXPORT_NATS_REPLICAS,
    EXPORT_SHARDS,
    replay("--burst", 1, i32::MAX as u64),
    replay("--max-events", 1, i64::MAX as u64),
    replay("--max-interval", 1, i64::MAX as u64),
    replay("--lru", 1, i64::MAX as u64),
    replay("--max-occurrences", 1, u64::MAX),
    replay(
        "--max-line-bytes",
        1,
        kevents_sim::replay::MAX_MAX_LINE_BYTES as u64,
    ),
    Bound {
        command: "replay",
        flag: "--qps",
        min: 0,
        max: 0,
        why: "a finite number greater than 0 (and at most 3.4e38), as client-go's float32",
    },
];

const fn runs(command: &'static str) -> Bound {
    Bound {
        command,
        flag: "--runs",
        min: 1,
        max: MAX_RUNS,
        why: "0 runs measures nothing",
    }
}

const fn lease(flag: &'static str) -> Bound {
    Bound {
        command: "export",
        flag,
        min: 1,
        max: 3_600,
        why: "seconds, as client-go's leader election takes them; the three are also checked \
              together (lease duration > renew deadline > 1.2 x retry period)",
    }
}

const fn bench_n(command: &'static str) -> Bound {
    Bound {
        command,
        flag: "--n",
        min: 1,
        max: MAX_BENCH_N,
        why: "the workload's events are generated in memory: 10 million at most",
    }
}

#[cfg(test)]
const fn replay(flag: &'static str, min: u64, max: u64) -> Bound {
    Bound {
        command: "replay",
        flag,
        min,
        max,
        why: "client-go's option range (kevents_sim::replay)",
    }
}

impl Bound {
    /// The accepted values, in words: `an integer from 1 to 1000`.
    pub fn accepts(&self) -> String {
        format!("an integer from {} to {}", self.min, self.max)
    }

    /// Parses a value of this flag: an integer within the range, else an error naming it.
    pub fn parse_u64(&self, s: &str) -> Result<u64, String> {
        s.trim()
            .parse::<u64>()
            .ok()
            .filter(|v| (self.min..=self.max).contains(v))
            .ok_or_else(|| {
                format!(
                    "{} must be {} (got {:?})",
                    self.flag,
                    self.accepts(),
                    s.chars().take(40).collect::<String>()
                )
            })
    }

    /// [`parse_u64`](Self::parse_u64) as a `usize` (every range here fits one).
    pub fn parse_usize(&self, s: &str) -> Result<usize, String> {
        let v = self.parse_u64(s)?;
        usize::try_from(v).map_err(|_| format!("{} must be {}", self.flag, self.accepts()))
    }
}

/// clap value parsers, one per flag (clap's derive takes a function path).
pub mod parse {
    use super::*;

    macro_rules! parsers {
        ($($name:ident: $bound:ident as $t:ident;)*) => {$(
            #[doc = concat!("Parses `", stringify!($bound), "`.")]
            pub fn $name(s: &str) -> Result<$t, String> {
                parsers!(@call $t, $bound, s)
            }
        )*};
        (@call u64, $bound:ident, $s:ident) => { $bound.parse_u64($s) };
        (@call usize, $bound:ident, $s:ident) => { $bound.parse_usize($s) };
    }

    parsers! {
        demo_pace_ms: DEMO_PACE_MS as u64;
        demo_width: DEMO_WIDTH as usize;
        correlator_runs: CORRELATOR_RUNS as usize;
        correlator_n: CORRELATOR_N as usize;
        pipeline_runs: PIPELINE_RUNS as usize;
        pipeline_n: PIPELINE_N as usize;
        pipeline_intake_capacity: PIPELINE_INTAKE_CAPACITY as usize;
        pipeline_overflow: PIPELINE_OVERFLOW as usize;
        pipeline_watcher_capacity: PIPELINE_WATCHER_CAPACITY as usize;
        emit_runs: EMIT_RUNS as usize;
        emit_n: EMIT_N as usize;
        apiserver_max_in_flight: APISERVER_MAX_IN_FLIGHT as usize;
        apiserver_runs: APISERVER_RUNS as usize;
        fleet_pipelines: FLEET_PIPELINES as usize;
        fleet_occurrences: FLEET_OCCURRENCES as usize;
        fleet_latency_ms: FLEET_LATENCY_MS as u64;
        fleet_admission_latency_ms: FLEET_ADMISSION_LATENCY_MS as u64;
        fleet_stagger_ms: FLEET_STAGGER_MS as u64;
        fleet_runs: FLEET_RUNS as usize;
        faults_outage_secs: FAULTS_OUTAGE_SECS as u64;
        faults_baseline_secs: FAULTS_BASELINE_SECS as u64;
        faults_rate: FAULTS_RATE as u64;
        export_bench_events: EXPORT_BENCH_EVENTS as usize;
        export_bench_rate: EXPORT_BENCH_RATE as u64;
        export_bench_duration: EXPORT_BENCH_DURATION as u64;
        export_bench_writer_events: EXPORT_BENCH_WRITER_EVENTS as usize;
        export_bench_namespaces: EXPORT_BENCH_NAMESPACES as usize;
        export_bench_timeout: EXPORT_BENCH_TIMEOUT as u64;
        export_watch_timeout: EXPORT_WATCH_TIMEOUT as u64;
        export_progress: EXPORT_PROGRESS as u64;
        export_lease_duration: EXPORT_LEASE_DURATION as u64;
        export_renew_deadline: EXPORT_RENEW_DEADLINE as u64;
        export_retry_period: EXPORT_RETRY_PERIOD as u64;
        export_nats_replicas: EXPORT_NATS_REPLICAS as u64;
        export_shards: EXPORT_SHARDS as u64;
    }
}
