//! [`feed`]: a destination ([`BatchSink`]: [`crate::Otlp`], [`crate::Webhook`]) fed from the
//! JetStream stream, which stays the history and the source of truth: a durable pull
//! consumer reads the records in order from where it last acknowledged, a batch at a time,
//! and acknowledges a batch once the destination accepted it.

use std::future::Future;
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt as _;

use crate::{ExportError, ExportRecord, Otlp, RecordSink, Webhook};

/// A destination that takes records a batch at a time, returning once it accepted them all.
pub trait BatchSink {
    /// Delivers `records` (in the stream's order).
    fn deliver_batch(
        &mut self,
        records: &[ExportRecord],
    ) -> impl Future<Output = Result<(), ExportError>>;
}

impl BatchSink for Otlp {
    async fn deliver_batch(&mut self, records: &[ExportRecord]) -> Result<(), ExportError> {
        self.export(records).await
    }
}

impl BatchSink for Webhook {
    async fn deliver_batch(&mut self, records: &[ExportRecord]) -> Result<(), ExportError> {
        for r in records {
            self.deliver(r).await?;
        }
        Ok(())
    }
}

/// How a [`feed`] reads the stream.
///
/// ```
/// let c = kevents_export::FeedConfig::new("export-otlp");
/// assert_eq!(c.batch, 512);
/// ```
#[derive(Debug, Clone)]
pub struct FeedConfig {
    /// The durable consumer's name: its acknowledged position is the feed's resume point
    /// (kept by the NATS server, shared by every replica that feeds the same destination).
    pub durable: String,
    /// Records per batch, at most.
    pub batch: usize,
    /// How long a fetch waits for the first record of a batch.
    pub wait: Duration,
    /// How long the server waits for a batch's acknowledgement before it hands the batch out
    /// again (longer than the destination's retries).
    pub ack_wait: Duration,
}

impl FeedConfig {
    /// The durable consumer `durable`, batches of 512, fetches of 1 s, 6 minutes to
    /// acknowledge (the OTLP sink retries for 5).
    pub fn new(durable: &str) -> Self {
        FeedConfig {
            durable: durable.to_owned(),
            batch: 512,
            wait: Duration::from_secs(1),
            ack_wait: Duration::from_secs(360),
        }
    }
}

/// What a [`feed`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeedStats {
    /// Batches accepted and acknowledged.
    pub batches: u64,
    /// Records in them.
    pub records: u64,
    /// Records handed out again by the server (a batch not acknowledged in time, or
    /// before a crash): delivered again with the same key.
    pub redelivered: u64,
}

fn nats(e: impl std::fmt::Display) -> ExportError {
    ExportError::Sink(format!("reading the stream: {e}"))
}

/// Feeds `sink` from the stream `stream` (records on `{subject_prefix}.*.*`; the fence's
/// markers are not read) through the durable pull consumer of `config` (created at the
/// stream's first message if missing), until `shutdown`: the batch being delivered is
/// finished and acknowledged first. A batch is acknowledged (and the acknowledgement
/// confirmed by the server) only after `sink` accepted it, so a crash repeats at most the
/// batch in flight, each record with its `uid:count` key.
///
/// ```no_run
/// # async fn f(js: async_nats::jetstream::Context) -> Result<(), kevents_export::ExportError> {
/// let otlp = kevents_export::Otlp::new("http://127.0.0.1:4318", Default::default())?;
/// let config = kevents_export::FeedConfig::new("export-otlp");
/// kevents_export::feed(&js, "export", "export", config, otlp, std::future::pending()).await?;
/// # Ok(()) }
/// ```
pub async fn feed<S: BatchSink>(
    context: &jetstream::Context,
    stream: &str,
    subject_prefix: &str,
    config: FeedConfig,
    mut sink: S,
    shutdown: impl Future<Output = ()>,
) -> Result<FeedStats, ExportError> {
    let s = context.get_stream(stream).await.map_err(nats)?;
    let consumer: consumer::PullConsumer = s
        .get_or_create_consumer(
            &config.durable,
            consumer::pull::Config {
                durable_name: Some(config.durable.clone()),
                filter_subject: format!("{subject_prefix}.*.*"),
                deliver_policy: consumer::DeliverPolicy::All,
                ack_policy: consumer::AckPolicy::All,
                ack_wait: config.ack_wait,
                max_ack_pending: i64::try_from(config.batch.max(1) * 2).unwrap_or(i64::MAX),
                ..Default::default()
            },
        )
        .await
        .map_err(nats)?;
    let mut stats = FeedStats::default();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let fetched = tokio::select! {
            biased;
            () = &mut shutdown => return Ok(stats),
            b = consumer.fetch().max_messages(config.batch.max(1)).expires(config.wait).messages() => b,
        };
        let mut messages = fetched.map_err(nats)?;
        let mut records = Vec::new();
        let mut last = None;
        while let Some(m) = messages.next().await {
            let m = m.map_err(nats)?;
            if m.info().map_err(nats)?.delivered > 1 {
                stats.redelivered += 1;
            }
            let record: ExportRecord = serde_json::from_slice(&m.payload).map_err(|e| {
                ExportError::Sink(format!("a message at {} is not a record: {e}", m.subject))
            })?;
            records.push(record);
            last = Some(m);
        }
        let Some(last) = last else { continue };
        sink.deliver_batch(&records).await?;
        // AckPolicy::All: the last message acknowledges the batch; confirmed by the server.
        last.double_ack().await.map_err(nats)?;
        stats.batches += 1;
        stats.records += records.len() as u64;
        metrics::counter!("kevents_export_feed_records_total", "durable" => config.durable.clone())
            .increment(records.len() as u64);
    }
}
