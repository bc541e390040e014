//! Shared by kevents-cli's export tests: a free local port, and the export's stream read back.

#![allow(dead_code)] // each test binary uses part of it

use std::net::TcpListener;

use kevents_export::{ExportRecord, JetStream, JetStreamConfig};

/// A local TCP port free now (for a metrics listener).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Every record of the stream `export` on the nats-server at `nats`, read back.
pub async fn read_stream(nats: &str) -> Vec<(String, ExportRecord)> {
    let client = kevents_export::async_nats::connect(nats)
        .await
        .expect("NATS");
    let js = JetStream::open(client, JetStreamConfig::new("export"))
        .await
        .expect("stream");
    kevents_export::jetstream::read_all(js.context(), "export")
        .await
        .expect("reading the stream")
}
