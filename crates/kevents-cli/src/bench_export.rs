//! `kevents bench export`: `kevents export` at large-cluster volumes on one machine, without
//! etcd. The scale simulator (`kevents_sim::scale::ScaleSim`, in this process) is preloaded
//! with `--events` live events; a local `nats-server -js` is started; the release `kevents
//! export` binary (`--kevents`, default this executable) runs as a child against both.
//! Printed, one JSON object per line:
//!
//! * `"phase":"first_export"`: from the exporter's start until the stream holds a record
//!   of every live event (read from the stream), records per second; the exporter's VmRSS
//!   and VmHWM then;
//! * `"phase":"steady"`: the built-in writer raises counts at `--rate` occurrences per
//!   second over `--writer-events` events for `--duration` seconds; lag of every occurrence
//!   from its write in the simulator (the simulator's write log) to the stream's storage
//!   time of the record that carries it (each record's `count - delta + 1 ..= count`), p50,
//!   p99 and max, occurrences written and found in the stream; VmRSS and VmHWM at the end.
//!
//! Nothing is read from the exporter's own counters. See docs/benchmarks.md ("Export at
//! scale") and scripts/bench/export_scale.sh (medians of 5).

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use clap::Args;
use futures_util::StreamExt as _;
use kevents_core::Time;
use kevents_export::ExportRecord;
use kevents_export::async_nats::jetstream::{self, consumer};
use kevents_sim::scale::{ScaleConfig, ScaleSim, WriterConfig};
use serde_json::json;

/// Options of `kevents bench export`.
#[derive(Args, Debug, Clone)]
pub struct ExportBenchArgs {
    /// Live events preloaded in the simulator (the first export's size).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1_000_000, value_parser = crate::bounds::parse::export_bench_events)]
    pub events: usize,
    /// Occurrences per second written during the steady phase (0: no steady phase).
    #[arg(long, allow_negative_numbers = true, default_value_t = 5_000, value_parser = crate::bounds::parse::export_bench_rate)]
    pub rate: u64,
    /// Seconds of the steady phase (0: none).
    #[arg(long, allow_negative_numbers = true, default_value_t = 300, value_parser = crate::bounds::parse::export_bench_duration)]
    pub duration: u64,
    /// Events the writer raises, round robin (the first N preloaded).
    #[arg(long, allow_negative_numbers = true, default_value_t = 10_000, value_parser = crate::bounds::parse::export_bench_writer_events)]
    pub writer_events: usize,
    /// Namespaces the events are spread over (the exporter watches the whole cluster).
    #[arg(long, allow_negative_numbers = true, default_value_t = 100, value_parser = crate::bounds::parse::export_bench_namespaces)]
    pub namespaces: usize,
    /// Seconds the first export, or the steady phase's catching up, may take before the
    /// run reports it incomplete.
    #[arg(long, allow_negative_numbers = true, default_value_t = 1_800, value_parser = crate::bounds::parse::export_bench_timeout)]
    pub timeout: u64,
    /// The `kevents` binary whose `export` is measured (default: this one).
    #[arg(long)]
    pub kevents: Option<PathBuf>,
    /// The nats-server binary.
    #[arg(long, default_value = "nats-server")]
    pub nats_server: PathBuf,
    /// More arguments for `kevents export` (repeatable, e.g. `--export-arg=--api=events-v1`).
    #[arg(long = "export-arg", allow_hyphen_values = true)]
    pub export_args: Vec<String>,
}

/// A child process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// VmRSS and VmHWM of `pid`, in MiB.
fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(f64::NAN, |kib| kib / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn round(x: f64, digits: i32) -> serde_json::Value {
    if x.is_finite() {
        let m = 10f64.powi(digits);
        json!((x * m).round() / m)
    } else {
        serde_json::Value::Null
    }
}

fn start_nats(bin: &Path, dir: &Path) -> anyhow::Result<(Killed, String)> {
    let port = free_port()?;
    let child = Command::new(bin)
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let child = Killed(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("nats-server did not listen on port {port} within 20 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((child, format!("nats://127.0.0.1:{port}")))
}

/// The stream's message count and last sequence (0, 0 before the exporter made it).
async fn stream_state(js: &jetstream::Context) -> (u64, u64) {
    match js.get_stream("export").await {
        Ok(mut s) => match s.info().await {
            Ok(i) => (i.state.messages, i.state.last_sequence),
            Err(_) => (0, 0),
        },
        Err(_) => (0, 0),
    }
}

/// Reads the stream from sequence `from` to `to`: each record (not a fence marker) with the
/// stream's storage time to `each`; the number of fence markers read.
async fn read_records(
    js: &jetstream::Context,
    from: u64,
    to: u64,
    mut each: impl FnMut(ExportRecord, Time),
) -> anyhow::Result<u64> {
    let mut markers = 0;
    if from > to {
        return Ok(markers);
    }
    let stream = js.get_stream("export").await?;
    let consumer = stream
        .create_consumer(consumer::pull::OrderedConfig {
            deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                start_sequence: from.max(1),
            },
            replay_policy: consumer::ReplayPolicy::Instant,
            ..Default::default()
        })
        .await?;
    let mut messages = consumer.messages().await?;
    while let Some(m) = messages.next().await {
        let m = m.map_err(|e| anyhow::anyhow!("reading the stream: {e}"))?;
        let info = m.info().map_err(|e| anyhow::anyhow!("{e}"))?;
        let (seq, stored) = (info.stream_sequence, info.published);
        if m.subject.ends_with("._fence") {
            markers += 1;
        } else {
            let r: ExportRecord = serde_json::from_slice(&m.payload)?;
            each(
                r,
                Time::from_unix_nanos(stored.unix_timestamp_nanos() as i64),
            );
        }
        if seq >= to {
            break;
        }
    }
    Ok(markers)
}

/// Runs it; prints the JSON lines.
pub fn run(args: ExportBenchArgs) -> anyhow::Result<()> {
    let kevents = match &args.kevents {
        Some(p) => p.clone(),
        None => std::env::current_exe().context("finding this executable")?,
    };
    let dir = TempDir(std::env::temp_dir().join(format!(
        "kevents-bench-export-{}-{}",
        std::process::id(),
        free_port()?
    )));
    std::fs::create_dir_all(&dir.0).context("creating the run's directory")?;
    // The history window holds a minute of the steady phase's writes at least.
    let window = (args.rate as usize)
        .saturating_mul(120)
        .max(ScaleConfig::default().window);
    let sim = ScaleSim::start(ScaleConfig::default().with_window(window))?;
    let loaded = Instant::now();
    let ids = sim.preload(args.events, args.namespaces);
    let preload_secs = loaded.elapsed().as_secs_f64();
    eprintln!(
        "bench export: {} live events preloaded in {:.1} s; simulator at {}",
        args.events,
        loaded.elapsed().as_secs_f64(),
        sim.url()
    );
    let kubeconfig = dir.0.join("sim.kubeconfig");
    std::fs::write(&kubeconfig, sim.kubeconfig("default"))?;
    let (_nats, nats_url) = start_nats(&args.nats_server, &dir.0.join("nats"))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = kevents_export::async_nats::connect(nats_url.as_str()).await?;
        let js = jetstream::new(client);
        let started = Instant::now();
        let mut exporter = Killed(
            Command::new(&kevents)
                .arg("export")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["--nats", &nats_url, "--stream", "export", "--progress", "0"])
                .args(&args.export_args)
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("starting {} export", kevents.display()))?,
        );
        let pid = exporter.0.id();
        // The first export: until the stream holds a record of every live event (polling
        // its message count; then read back: fence markers are not records).
        let deadline = started + Duration::from_secs(args.timeout);
        let mut first_record = None;
        let mut want = args.events as u64;
        let mut distinct = std::collections::HashSet::new();
        let mut records = 0u64;
        let mut read_to = 0u64;
        // When the stream last grew (an incomplete export: where it stalled).
        let (mut last_count, mut last_growth) = (0u64, Duration::ZERO);
        let (complete, first_secs, rss, hwm) = loop {
            let (messages, last_seq) = stream_state(&js).await;
            if messages > 0 && first_record.is_none() {
                first_record = Some(started.elapsed());
            }
            if messages > last_count {
                (last_count, last_growth) = (messages, started.elapsed());
            }
            if messages >= want {
                let secs = started.elapsed().as_secs_f64();
                let (rss, hwm) = memory_mib(pid);
                let markers = read_records(&js, read_to + 1, last_seq, |r, _| {
                    records += 1;
                    distinct.insert(r.uid);
                })
                .await?;
                read_to = last_seq;
                want += markers;
                if distinct.len() >= args.events {
                    break (true, secs, rss, hwm);
                }
            }
            let failed = if Instant::now() > deadline {
                Some("timed out".to_owned())
            } else if let Ok(Some(status)) = exporter.0.try_wait() {
                Some(format!("exited ({status})"))
            } else {
                None
            };
            if let Some(why) = failed {
                eprintln!("bench export: the first export is incomplete: the exporter {why}");
                let (rss, hwm) = memory_mib(pid);
                let markers = read_records(&js, read_to + 1, last_seq, |r, _| {
                    records += 1;
                    distinct.insert(r.uid);
                })
                .await?;
                let _ = markers;
                break (false, started.elapsed().as_secs_f64(), rss, hwm);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        println!(
            "{}",
            json!({
                "phase": "first_export",
                "events": args.events,
                "complete": complete,
                "records": records,
                "events_in_stream": distinct.len(),
                "seconds": round(first_secs, 2),
                "records_per_s": round(records as f64 / first_secs, 0),
                "first_record_s": first_record.map(|d| round(d.as_secs_f64(), 2)),
                "stream_last_grew_s": round(last_growth.as_secs_f64(), 2),
                "records_per_s_until_last_growth": round(records as f64 / last_growth.as_secs_f64(), 0),
                "rss_mib": round(rss, 1),
                "hwm_mib": round(hwm, 1),
                "sim_process_rss_mib": round(memory_mib(std::process::id()).0, 1),
                "preload_s": round(preload_secs, 2),
            })
        );
        drop(distinct);
        if !complete || args.rate == 0 || args.duration == 0 {
            return Ok::<(), anyhow::Error>(());
        }
        // The steady phase.
        let before = stream_state(&js).await.1;
        let writer_ids = ids[..args.writer_events.min(ids.len())].to_vec();
        let writer = sim.start_writer(WriterConfig::new(args.rate, writer_ids));
        tokio::time::sleep(Duration::from_secs(args.duration)).await;
        let report = writer.stop();
        // Until every occurrence written is in the stream (or the timeout), reading the
        // records from where the first export ended: (event, count, delta, stored).
        let mut last: HashMap<u32, u32> = HashMap::new();
        for w in &report.log {
            let e = last.entry(w.id.index()).or_insert(0);
            *e = (*e).max(w.count);
        }
        let mut seen: HashMap<u32, u64> = HashMap::new();
        let mut steady: Vec<(u32, u64, u64, Time)> = Vec::with_capacity(report.log.len());
        let mut read_to = before;
        let caught_up = Instant::now() + Duration::from_secs(args.timeout);
        loop {
            let end = stream_state(&js).await.1;
            read_records(&js, read_to + 1, end, |r, stored| {
                if let Some(id) = sim.id_of_uid(&r.uid) {
                    let e = seen.entry(id.index()).or_insert(0);
                    *e = (*e).max(r.count);
                    steady.push((id.index(), r.count, r.delta, stored));
                }
            })
            .await?;
            read_to = read_to.max(end);
            let done = last
                .iter()
                .all(|(id, &count)| seen.get(id).is_some_and(|&c| c >= u64::from(count)));
            if done || Instant::now() > caught_up {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let (rss_end, hwm_end) = memory_mib(pid);
        // Lag per occurrence: the storage time of the record carrying it minus its write.
        let mut written: HashMap<(u32, u32), Time> = HashMap::with_capacity(report.log.len());
        for w in &report.log {
            written.insert((w.id.index(), w.count), w.at);
        }
        let mut lags = Vec::with_capacity(report.log.len());
        for &(id, count, delta, stored) in &steady {
            let low = count.saturating_sub(delta) + 1;
            for c in low..=count {
                let Ok(c) = u32::try_from(c) else { continue };
                if let Some(at) = written.get(&(id, c)) {
                    lags.push(stored.nanos_since(*at) as f64 / 1e9);
                }
            }
        }
        lags.sort_by(f64::total_cmp);
        let secs = report.elapsed.as_secs_f64();
        println!(
            "{}",
            json!({
                "phase": "steady",
                "rate": args.rate,
                "seconds": round(secs, 1),
                "occurrences_written": report.written,
                "occurrences_per_s": round(report.written as f64 / secs, 0),
                "occurrences_in_stream": lags.len(),
                "records": steady.len(),
                "lag_p50_s": round(percentile(&lags, 0.5), 3),
                "lag_p99_s": round(percentile(&lags, 0.99), 3),
                "lag_max_s": round(lags.last().copied().unwrap_or(f64::NAN), 3),
                "rss_mib": round(rss_end, 1),
                "hwm_mib": round(hwm_end, 1),
                "sim": {
                    "list_pages": sim.stats().list_pages,
                    "watches": sim.stats().watches,
                    "gone": sim.stats().gone,
                },
            })
        );
        drop(exporter);
        Ok(())
    })
}
