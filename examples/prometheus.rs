//! A pipeline whose metrics Prometheus scrapes on `/metrics`, served by
//! `metrics-exporter-prometheus`.
//!
//! ```sh
//! cargo run --example prometheus               # serves http://127.0.0.1:9898/metrics until Ctrl-C
//! curl -s http://127.0.0.1:9898/metrics | grep '^kevents_'
//! cargo run --example prometheus -- --once     # records 3 events, prints its own /metrics, exits
//! cargo run --example prometheus -- --addr 0.0.0.0:9898
//! ```
//!
//! The events go to the in-memory apiserver, so it runs anywhere. Every metric is described in
//! `docs/metrics.md`. With the facade's `prometheus` feature, `kevents::prometheus::install(addr)`
//! does what `serve_metrics` does here, from a thread of its own, and returns the handle.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use kevents::{EventSource, EventType, ObjectReference, Pipeline, SinkOptions};
use kevents_sim::MemoryApiServer;
use metrics_exporter_prometheus::PrometheusBuilder;

/// Installs the Prometheus recorder and its HTTP listener on `addr`. Must run before any
/// pipeline is built: a pipeline takes its metric handles from the recorder installed then.
fn serve_metrics(addr: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    // Outside a tokio runtime, `install` runs the listener on a thread of its own.
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()?;
    // `# HELP` lines for every kevents metric.
    kevents::actors::describe_metrics();
    Ok(())
}

/// `GET /metrics` on `addr`: the response body.
fn scrape(addr: SocketAddr) -> Result<String, Box<dyn std::error::Error>> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or("the response has no header/body separator")?;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("scrape failed: {}", head.lines().next().unwrap_or_default()).into());
    }
    Ok(body.to_owned())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut addr: SocketAddr = ([127, 0, 0, 1], 9898).into();
    let mut once = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--addr" => addr = args.next().ok_or("--addr needs HOST:PORT")?.parse()?,
            "--once" => once = true,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    serve_metrics(addr)?;

    actix::System::new().block_on(async move {
        let api = MemoryApiServer::new();
        let pipeline = Pipeline::builder(EventSource::new("prometheus-example", "node-1"))
            .sink("api", api.clone(), SinkOptions::default())
            .start();
        let recorder = pipeline.recorder();
        let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
        if once {
            // One CREATE, then two PATCHes of the count.
            for _ in 0..3 {
                recorder.event(&pod, EventType::Warning, "BackOff", "Back-off restarting")?;
            }
            pipeline.shutdown(Duration::from_secs(5)).await;
            for line in scrape(addr)?.lines().filter(|l| l.contains("kevents_")) {
                println!("{line}");
            }
            return Ok(());
        }
        println!("serving http://{addr}/metrics (Ctrl-C stops)");
        let ticker = recorder.clone();
        actix::spawn(async move {
            let mut tick = actix_rt::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                // A full intake is counted (kevents_dropped_total), never blocks.
                let _ = ticker.event(&pod, EventType::Warning, "BackOff", "Back-off restarting");
            }
        });
        actix_rt::signal::ctrl_c().await?;
        let report = pipeline.shutdown(Duration::from_secs(5)).await;
        println!(
            "{} events delivered, {} stored",
            report.delivered(),
            api.list().len()
        );
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
