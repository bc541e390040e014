//! [`feed`]: a destination ([`BatchSink`]: [`crate::Otlp`], [`crate::Webhook`]) fed from the
//! JetStream stream, which stays the history and the source of truth: the records are read
//! in the stream's order from the position saved in the export's key-value bucket
//! (`feed.{name}`: the last stream sequence the destination accepted), a batch at a time, and
//! the position moves only after the destination accepted a batch.

use std::future::Future;
use std::time::Duration;

use async_nats::jetstream::{consumer, kv};
use bytes::Bytes;
use futures_util::StreamExt as _;

use crate::{ExportError, ExportRecord, JetStream, Otlp, RecordSink, Webhook};

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
/// let c = kevents_export::FeedConfig::new("otlp");
/// assert_eq!((c.batch, c.key().as_str()), (512, "feed.otlp"));
/// ```
#[derive(Debug, Clone)]
pub struct FeedConfig {
    /// The feed's name (`[A-Za-z0-9_-]`): its position is the key `feed.{name}` of the
    /// export's key-value bucket.
    pub name: String,
    /// Records per batch, at most.
    pub batch: usize,
    /// How long a batch waits for more records once it has one.
    pub linger: Duration,
}

impl FeedConfig {
    /// The feed `name`, batches of at most 512 records, gathered for at most 50 ms.
    pub fn new(name: &str) -> Self {
        FeedConfig {
            name: name.to_owned(),
            batch: 512,
            linger: Duration::from_millis(50),
        }
    }

    /// Its position's key in the bucket: `feed.{name}`.
    pub fn key(&self) -> String {
        format!("feed.{}", self.name)
    }
}

/// What a [`feed`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeedStats {
    /// Batches accepted (the position saved after each).
    pub batches: u64,
    /// Records in them.
    pub records: u64,
    /// The stream sequence it started after.
    pub started_after: u64,
}

fn nats(e: impl std::fmt::Display) -> ExportError {
    ExportError::Sink(format!("feeding from the stream: {e}"))
}

/// The last stream sequence the feed `config` saved in `kv` (0: none).
///
/// ```no_run
/// # async fn f(js: kevents_export::JetStream) -> Result<(), kevents_export::ExportError> {
/// let seq = kevents_export::feed_position(js.key_value(), &kevents_export::FeedConfig::new("otlp")).await?;
/// # Ok(()) }
/// ```
pub async fn feed_position(kv: &kv::Store, config: &FeedConfig) -> Result<u64, ExportError> {
    match kv.get(config.key()).await.map_err(nats)? {
        None => Ok(0),
        Some(v) => std::str::from_utf8(&v)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| {
                ExportError::Resume(format!(
                    "the feed position {} is not a number",
                    config.key()
                ))
            }),
    }
}

/// Feeds `sink` from `js`'s stream (the records on `{prefix}.*.*`; the fence's markers are
/// not read) after the position saved in its bucket, until `shutdown`: the batch being
/// delivered is finished and its position saved first. The position is saved only after
/// `sink` accepted a batch, so a crash repeats at most the batch in flight, each record with
/// its `uid:count` key, and loses nothing. One feed per name at a time (run it where the
/// export runs: with `--leader-elect`, on the leader).
///
/// ```no_run
/// # async fn f(js: kevents_export::JetStream) -> Result<(), kevents_export::ExportError> {
/// let otlp = kevents_export::Otlp::new("http://127.0.0.1:4318", Default::default())?;
/// let config = kevents_export::FeedConfig::new("otlp");
/// kevents_export::feed(&js, config, otlp, std::future::pending()).await?;
/// # Ok(()) }
/// ```
pub async fn feed<S: BatchSink>(
    js: &JetStream,
    config: FeedConfig,
    mut sink: S,
    shutdown: impl Future<Output = ()>,
) -> Result<FeedStats, ExportError> {
    let context = js.context();
    let kv = js.key_value();
    let after = feed_position(kv, &config).await?;
    let mut stats = FeedStats {
        started_after: after,
        ..FeedStats::default()
    };
    let s = context
        .get_stream(&js.config().stream)
        .await
        .map_err(nats)?;
    let consumer = s
        .create_consumer(consumer::push::OrderedConfig {
            deliver_subject: context.client().new_inbox(),
            filter_subject: format!("{}.*.*", js.config().subject_prefix),
            deliver_policy: if after == 0 {
                consumer::DeliverPolicy::All
            } else {
                consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: after + 1,
                }
            },
            replay_policy: consumer::ReplayPolicy::Instant,
            ..Default::default()
        })
        .await
        .map_err(nats)?;
    let mut messages = consumer.messages().await.map_err(nats)?;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let first = tokio::select! {
            biased;
            () = &mut shutdown => return Ok(stats),
            m = messages.next() => m,
        };
        let Some(first) = first else {
            return Err(nats("the stream's consumer ended"));
        };
        let mut batch = vec![first.map_err(nats)?];
        let until = tokio::time::Instant::now() + config.linger;
        while batch.len() < config.batch.max(1) {
            match tokio::time::timeout_at(until, messages.next()).await {
                Ok(Some(m)) => batch.push(m.map_err(nats)?),
                Ok(None) | Err(_) => break,
            }
        }
        let mut records = Vec::with_capacity(batch.len());
        let mut last = after;
        for m in &batch {
            last = m.info().map_err(nats)?.stream_sequence;
            records.push(
                serde_json::from_slice::<ExportRecord>(&m.payload).map_err(|e| {
                    ExportError::Sink(format!("a message at {} is not a record: {e}", m.subject))
                })?,
            );
        }
        sink.deliver_batch(&records).await?;
        kv.put(config.key(), Bytes::from(last.to_string()))
            .await
            .map_err(nats)?;
        stats.batches += 1;
        stats.records += records.len() as u64;
        metrics::counter!("kevents_export_feed_records_total", "feed" => config.name.clone())
            .increment(records.len() as u64);
    }
}
