//! Resident memory of the export with `N` live events (docs/benchmarks.md, "Export memory"):
//! [`kevents_export::run`] reads `N` events (default 1 000 000; 100 namespaces, uids in the
//! apiserver's form) from an apiserver simulated in process (a list in pages of 500, then a
//! watch that stays quiet) into a real `nats-server -js` started here (kevents-testkit's
//! `NatsServer`), in a process of its own: its first export until the stream holds them all,
//! then 10 s of steady state. A second process then restarts from the stream (the term's
//! marker, every event's last record loaded, the watch resumed from the saved
//! resourceVersion). Each phase prints one JSON line: seconds, records, and the process's
//! `VmRSS` and `VmHWM` (peak) from `/proc/self/status` when done and after the 10 s. A single-threaded runtime, as
//! `kevents export` runs.
//!
//! ```text
//! cargo build --release -p kevents-export --example memory_bench
//! target/release/examples/memory_bench [N] [--relist]
//! ```
//!
//! `--relist`: the restarted process's watch is answered 410 Gone once, so that it also lists
//! every event again (all known: nothing exported).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kevents_core::request::{
    ChunkFuture, ChunkSource, Limits, LineStream, Request, Response, StreamFuture, StreamRequest,
    StreamTransport, Transport, TransportFuture,
};
use kevents_export::{ExportConfig, JetStream, JetStreamConfig};

type Error = Box<dyn std::error::Error + Send + Sync>;

const PAGE: usize = 500;
const NAMESPACES: usize = 100;
const LIST_RV: u64 = 5_000_000;

/// `VmRSS` and `VmHWM` of this process, KiB.
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
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

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Event `i`'s uid: a version-4 UUID in the apiserver's (lowercase canonical) form.
fn uid(i: usize) -> String {
    let a = splitmix(i as u64);
    let b = splitmix(a ^ 0x5555);
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// The simulated apiserver: `events` core/v1 events listed in pages; a watch that sends
/// nothing (or, once when `gone` is set, 410 Gone).
#[derive(Clone)]
struct Sim {
    events: usize,
    watches: Arc<AtomicUsize>,
    gone: Arc<AtomicBool>,
}

impl Sim {
    fn page(&self, path: &str) -> Vec<u8> {
        let query = path.split_once('?').map_or("", |(_, q)| q);
        let mut from = 0usize;
        let mut limit = PAGE;
        for kv in query.split('&') {
            match kv.split_once('=') {
                Some(("continue", v)) => from = v.parse().unwrap_or(0),
                Some(("limit", v)) => limit = v.parse().unwrap_or(PAGE),
                _ => {}
            }
        }
        let to = (from + limit).min(self.events);
        let mut body = String::with_capacity((to - from) * 200 + 100);
        body.push_str("{\"kind\":\"EventList\",\"apiVersion\":\"v1\",\"metadata\":{");
        body.push_str(&format!("\"resourceVersion\":\"{LIST_RV}\""));
        if to < self.events {
            body.push_str(&format!(",\"continue\":\"{to}\""));
        }
        body.push_str("},\"items\":[");
        for i in from..to {
            if i > from {
                body.push(',');
            }
            body.push_str(&format!(
                "{{\"metadata\":{{\"uid\":\"{}\",\"namespace\":\"ns-{}\",\"name\":\"e-{i}\",\"resourceVersion\":\"{}\"}},\"involvedObject\":{{\"kind\":\"Pod\",\"name\":\"p-{i}\"}},\"reason\":\"Sim\",\"count\":{}}}",
                uid(i),
                i % NAMESPACES,
                i + 1,
                i % 7 + 1
            ));
        }
        body.push_str("]}");
        body.into_bytes()
    }
}

impl Transport for Sim {
    fn send(&self, request: Request) -> TransportFuture<'_> {
        let body = self.page(&request.path);
        Box::pin(async move {
            Ok(Response {
                code: 200,
                body,
                ..Default::default()
            })
        })
    }
    fn limits(&self) -> Limits {
        Limits::default()
    }
}

/// A watch's body: nothing, ever (the watch stays open and quiet).
struct Quiet;

impl ChunkSource for Quiet {
    fn next_chunk(&mut self) -> ChunkFuture<'_> {
        Box::pin(async {
            std::future::pending::<()>().await;
            Ok(None)
        })
    }
}

/// One 410 Gone line, then the end.
struct Gone(Option<Vec<u8>>);

impl ChunkSource for Gone {
    fn next_chunk(&mut self) -> ChunkFuture<'_> {
        let next = self.0.take();
        Box::pin(async move { Ok(next) })
    }
}

impl StreamTransport for Sim {
    fn open_lines(&self, request: StreamRequest) -> StreamFuture<'_> {
        self.watches.fetch_add(1, Ordering::SeqCst);
        let gone = self.gone.swap(false, Ordering::SeqCst);
        Box::pin(async move {
            if gone {
                let status = b"{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"Expired\",\"code\":410}\n";
                return Ok(LineStream::new(
                    410,
                    request.max_line_bytes,
                    Box::new(Gone(Some(status.to_vec()))),
                ));
            }
            Ok(LineStream::new(
                200,
                request.max_line_bytes,
                Box::new(Quiet),
            ))
        })
    }
}

/// One phase in this process: `first` (an empty stream) or `restart` (from the stream).
async fn phase(name: &str, url: &str, events: usize, relist: bool) -> Result<(), Error> {
    let started = Instant::now();
    let sim = Sim {
        events,
        watches: Arc::new(AtomicUsize::new(0)),
        gone: Arc::new(AtomicBool::new(relist)),
    };
    let nats = async_nats::connect(url).await?;
    let config = JetStreamConfig::new("membench");
    let js = JetStream::open(nats, config).await?;
    let context = js.context().clone();
    let export = ExportConfig {
        watch_timeout: Duration::from_secs(3600),
        ..ExportConfig::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let watches = sim.watches.clone();
    let run = kevents_export::run(sim, export, js.clone(), js, async {
        let _ = stopped.await;
    });
    let watch = async move {
        // Done: the stream holds every event (the first export), or nothing more comes (a
        // restart), and a watch is open after the last list. Then 10 s of steady state.
        let want = if relist { 2 } else { 1 };
        let mut done_at = None;
        let mut last_messages = 0;
        let mut report = String::new();
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let mut s = context.get_stream("membench").await?;
            let messages = s.info().await?.state.messages;
            let listed = watches.load(Ordering::SeqCst) >= want;
            let exported = match name {
                "first" => messages >= events as u64,
                _ => messages == last_messages,
            };
            last_messages = messages;
            match done_at {
                None if listed && exported => {
                    let (rss, hwm) = memory_kib();
                    report = format!(
                        "\"done_s\":{:.1},\"messages\":{messages},\"done_rss_mib\":{:.1},\"done_hwm_mib\":{:.1}",
                        started.elapsed().as_secs_f64(),
                        rss as f64 / 1024.0,
                        hwm as f64 / 1024.0
                    );
                    done_at = Some(Instant::now());
                }
                Some(at) if at.elapsed() >= Duration::from_secs(10) => {
                    let (rss, hwm) = memory_kib();
                    report.push_str(&format!(
                        ",\"steady_rss_mib\":{:.1},\"peak_rss_mib\":{:.1}",
                        rss as f64 / 1024.0,
                        hwm as f64 / 1024.0
                    ));
                    break;
                }
                _ => {}
            }
        }
        let _ = stop.send(());
        Ok::<_, Error>(report)
    };
    let (stats, report) = tokio::join!(run, watch);
    let stats = stats?;
    let report = report?;
    println!(
        "{{\"phase\":\"{name}\",\"events\":{events},{report},\"records\":{},\"live\":{}}}",
        stats.records, stats.live,
    );
    Ok(())
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let relist = args.iter().any(|a| a == "--relist");
    let plain: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    if plain.first().map(|s| s.as_str()) == Some("child") {
        let (name, url, events) = match plain.as_slice() {
            [_, name, url, events] => (name.as_str(), url.as_str(), events.parse()?),
            _ => return Err("usage: memory_bench child first|restart URL N".into()),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        return rt.block_on(phase(name, url, events, relist && name == "restart"));
    }
    let events: usize = match plain.first() {
        Some(n) => n.parse()?,
        None => 1_000_000,
    };
    let nats = kevents_testkit::nats::NatsServer::start()?;
    let me = std::env::current_exe()?;
    for name in ["first", "restart"] {
        let mut cmd = std::process::Command::new(&me);
        cmd.args(["child", name, &nats.url(), &events.to_string()]);
        if relist {
            cmd.arg("--relist");
        }
        let status = cmd.status()?;
        if !status.success() {
            return Err(format!("the {name} phase failed: {status}").into());
        }
    }
    Ok(())
}
