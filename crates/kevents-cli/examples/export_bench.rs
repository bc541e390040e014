//! The `kevents export` benchmark (docs/benchmarks.md, Export): a real kube-apiserver and a
//! `nats-server -js` started here, `N` live events created (default 100 000), the exporter
//! (the `kevents` binary given as the first argument, a release build) started on them:
//! records per second of its first list, its resident memory with them all live; then a storm
//! of occurrences (events.k8s.io/v1 series raised, default 1 000 occurrences/s for 30 s):
//! occurrences per second, lag p50/p99 (the stream's storage time minus the occurrence's
//! `series.lastObservedTime`) and what an exporter that exports an event only when it first
//! sees it would have missed.
//!
//! ```text
//! cargo build --profile release -p kevents-cli --bin kevents --example export_bench
//! target/release/examples/export_bench target/release/kevents [LIVE] [OCC_PER_S] [SECS]
//! ```

use std::collections::HashMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kevents_core::request::{APPLICATION_JSON, Method, STRATEGIC_MERGE_PATCH};
use kevents_core::{Clock, SystemClock, Time};
use kevents_export::{ExportRecord, JetStream, JetStreamConfig};
use kevents_http::{HttpConfig, HttpSink};
use serde_json::json;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// The server, its URL and its store directory (removed when dropped, after the server).
struct Nats(Child, String, #[allow(dead_code)] tempfile::TempDir);

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn nats() -> Result<Nats, Error> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let dir = tempfile::tempdir()?;
    let child = Command::new("nats-server")
        .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Nats(child, format!("nats://127.0.0.1:{port}"), dir))
}

fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

async fn send(
    sink: &HttpSink,
    method: Method,
    path: String,
    ct: &'static str,
    body: serde_json::Value,
) -> Result<(), Error> {
    let a = sink
        .requests()
        .send(
            method,
            path.clone(),
            Some(ct),
            body.to_string().into_bytes(),
            1 << 20,
        )
        .await?;
    if !(200..300).contains(&a.code) {
        return Err(format!("{method} {path}: {}", a.code).into());
    }
    Ok(())
}

async fn stream_messages(js: &JetStream) -> Result<u64, Error> {
    let mut s = js.context().get_stream("export").await?;
    Ok(s.info().await?.state.messages)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let kevents = args
        .next()
        .ok_or("usage: export_bench KEVENTS_BINARY [LIVE] [OCC_PER_S] [SECS]")?;
    let live: usize = args.next().map_or(Ok(100_000), |a| a.parse())?;
    let rate: u64 = args.next().map_or(Ok(1000), |a| a.parse())?;
    let secs: u64 = args.next().map_or(Ok(30), |a| a.parse())?;
    let server =
        kevents_testkit::RealApiserver::start()?.ok_or("kube-apiserver is not provisioned")?;
    let nats = nats()?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let sink = HttpSink::new(HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None).await?)?;
        // N live events, 64 requests in flight.
        let started = Instant::now();
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..64 {
            let (sink, next) = (sink.clone(), next.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= live {
                        return Ok::<(), Error>(());
                    }
                    let t = SystemClock.now().to_rfc3339();
                    let body = json!({"apiVersion": "v1", "kind": "Event",
                        "metadata": {"name": format!("live-{i}"), "namespace": "default"},
                        "involvedObject": {"kind": "Pod", "namespace": "default", "name": format!("pod-{}", i % 5000)},
                        "reason": "Live", "message": "one of many", "type": "Normal", "count": 1,
                        "firstTimestamp": t, "lastTimestamp": t, "source": {"component": "bench"}});
                    send(&sink, Method::Post, "/api/v1/namespaces/default/events".into(), APPLICATION_JSON, body).await?;
                }
            }));
        }
        for t in tasks {
            t.await??;
        }
        eprintln!("created {live} events in {:.1} s", started.elapsed().as_secs_f64());
        let client = kevents_export::async_nats::connect(nats.1.as_str()).await?;
        let js = JetStream::open(client, JetStreamConfig::new("export")).await?;
        let started = Instant::now();
        let mut child = Command::new(&kevents)
            .args(["export", "--kubeconfig"])
            .arg(&server.admin_kubeconfig)
            .args(["--namespace", "default", "--nats", &nats.1, "--stream", "export", "--progress", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()?;
        while stream_messages(&js).await? < live as u64 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let initial = started.elapsed().as_secs_f64();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (rss, hwm) = rss_kib(child.id());
        println!(
            "{{\"phase\":\"live\",\"live_events\":{live},\"seconds\":{initial:.2},\"records_per_s\":{:.0},\"rss_mib\":{:.1},\"peak_rss_mib\":{:.1}}}",
            live as f64 / initial,
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        );
        // The storm: 200 events.k8s.io/v1 series, each PATCH raising one by 4, at `rate`
        // occurrences per second.
        let storm = 200usize;
        let before = stream_messages(&js).await?;
        for i in 0..storm {
            let body = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": format!("storm-{i}"), "namespace": "default"},
                "eventTime": SystemClock.now().to_rfc3339_micros(),
                "regarding": {"kind": "Pod", "namespace": "default", "name": format!("storm-pod-{i}")},
                "reason": "Storm", "note": "again", "type": "Warning", "action": "Probe",
                "reportingController": "example.com/bench", "reportingInstance": "bench-1"});
            send(&sink, Method::Post, "/apis/events.k8s.io/v1/namespaces/default/events".into(), APPLICATION_JSON, body).await?;
        }
        let per_patch = 4u64;
        let patches_per_s = (rate / per_patch).max(1);
        let counts = Arc::new(std::sync::Mutex::new(vec![1u64; storm]));
        let storm_started = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(10));
        let mut sent = 0u64;
        let mut inflight = tokio::task::JoinSet::new();
        while storm_started.elapsed() < Duration::from_secs(secs) {
            tick.tick().await;
            let due = (storm_started.elapsed().as_secs_f64() * patches_per_s as f64) as u64;
            while sent < due {
                let i = (sent as usize) % storm;
                sent += 1;
                let count = {
                    let mut c = counts.lock().map_err(|_| "poisoned")?;
                    c[i] += per_patch;
                    c[i]
                };
                let sink = sink.clone();
                inflight.spawn(async move {
                    let body = json!({"series": {"count": count, "lastObservedTime": SystemClock.now().to_rfc3339_micros()}});
                    send(&sink, Method::Patch, format!("/apis/events.k8s.io/v1/namespaces/default/events/storm-{i}"), STRATEGIC_MERGE_PATCH, body).await
                });
                while inflight.len() > 256 {
                    if let Some(r) = inflight.join_next().await {
                        r??;
                    }
                }
            }
        }
        while let Some(r) = inflight.join_next().await {
            r??;
        }
        let storm_secs = storm_started.elapsed().as_secs_f64();
        let total: u64 = counts.lock().map_err(|_| "poisoned")?.iter().sum();
        // Until the exporter has every occurrence.
        let deadline = Instant::now() + Duration::from_secs(120);
        let _records = loop {
            let all = kevents_export::jetstream::read_all(js.context(), "export").await?;
            let storm_sum: u64 = all.iter().filter(|(_, r)| r.reason == "Storm").map(|(_, r)| r.delta).sum();
            if storm_sum == total || Instant::now() > deadline {
                break all;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let (rss, hwm) = rss_kib(child.id());
        // Lag: the stream's storage time minus the occurrence's time, per storm record.
        let mut stream = js.context().get_stream("export").await?;
        // The stream's last sequence, not records.len(): the fence's term markers
        // (`{stream}._fence`) take sequences too and are not records.
        let last = stream.info().await?.state.last_sequence;
        let mut lags = Vec::new();
        let mut first_seen: HashMap<String, u64> = HashMap::new();
        let mut storm_records = 0u64;
        for seq in before + 1..=last {
            let Ok(m) = stream.get_raw_message(seq).await else { continue };
            if m.subject.ends_with("._fence") {
                continue;
            }
            let r: ExportRecord = serde_json::from_slice(&m.payload)?;
            if r.reason != "Storm" {
                continue;
            }
            storm_records += 1;
            first_seen.entry(r.uid.clone()).or_insert(r.count);
            let stored = Time::from_unix_nanos(m.time.unix_timestamp_nanos() as i64);
            lags.push(r.lag_secs(stored));
        }
        lags.sort_by(f64::total_cmp);
        let missed: u64 = total - first_seen.values().sum::<u64>();
        let occurrences = total - storm as u64;
        println!(
            "{{\"phase\":\"storm\",\"seconds\":{storm_secs:.1},\"occurrences_written\":{occurrences},\"occurrences_per_s\":{:.0},\"records\":{storm_records},\"records_per_s\":{:.0},\"lag_p50_s\":{:.3},\"lag_p99_s\":{:.3},\"first_seen_exports\":{},\"first_seen_misses\":{missed},\"first_seen_missed_fraction\":{:.4},\"rss_mib\":{:.1},\"peak_rss_mib\":{:.1}}}",
            occurrences as f64 / storm_secs,
            storm_records as f64 / storm_secs,
            percentile(&lags, 0.5),
            percentile(&lags, 0.99),
            first_seen.values().sum::<u64>(),
            missed as f64 / total as f64,
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        );
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM);
        let _ = child.wait();
        drop(server);
        Ok::<(), Error>(())
    })
}
