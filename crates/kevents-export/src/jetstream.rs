//! [`JetStream`]: records into a NATS JetStream stream (a subject per namespace,
//! `Nats-Msg-Id` = `uid:count`) and the resume point in a JetStream key-value bucket.

use std::time::Duration;

use async_nats::jetstream::{self, kv, stream};
use bytes::Bytes;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};

use crate::store::{RecordSink, ResumePoint, ResumeStore};
use crate::{ExportError, ExportRecord};

/// Where and how [`JetStream`] stores records and the resume point.
///
/// ```
/// let c = kevents_export::JetStreamConfig::new("export");
/// assert_eq!(c.subject_prefix, "export");
/// assert_eq!(c.bucket, "export-resume");
/// ```
#[derive(Debug, Clone)]
pub struct JetStreamConfig {
    /// The stream's name (created if missing, with subjects `{subject_prefix}.>`).
    pub stream: String,
    /// Records of namespace `ns` go to subject `{subject_prefix}.{ns}`.
    pub subject_prefix: String,
    /// The key-value bucket of the resume point (created if missing).
    pub bucket: String,
    /// A new stream's duplicate window: a record delivered again within it is stored once.
    pub duplicate_window: Duration,
    /// How long a uid's resume entry outlives its last record: longer than the apiserver's
    /// `--event-ttl` (1 h by default), or a later occurrence of an event whose entry expired
    /// would be exported with its whole count again.
    pub resume_ttl: Duration,
}

impl JetStreamConfig {
    /// Stream `stream`, subjects `{stream}.{namespace}`, bucket `{stream}-resume`, a 10-minute
    /// duplicate window and a 3-hour resume TTL.
    pub fn new(stream: &str) -> Self {
        JetStreamConfig {
            stream: stream.to_owned(),
            subject_prefix: stream.to_owned(),
            bucket: format!("{stream}-resume"),
            duplicate_window: Duration::from_secs(600),
            resume_ttl: Duration::from_secs(3 * 3600),
        }
    }
}

/// A uid's resume entry in the bucket.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    /// Last exported count.
    c: u64,
    /// Namespace.
    n: String,
    /// A record begun and maybe not delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    p: Option<ExportRecord>,
}

/// Records into JetStream and the resume point in a JetStream key-value bucket: both a
/// [`RecordSink`] and a [`ResumeStore`]. A record is published with `Nats-Msg-Id` =
/// `uid:count` and returns when the stream acknowledged it.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let nats = async_nats::connect("nats://127.0.0.1:4222").await?;
/// let js = kevents_export::JetStream::open(nats, kevents_export::JetStreamConfig::new("export")).await?;
/// # drop(js);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct JetStream {
    context: jetstream::Context,
    kv: kv::Store,
    config: JetStreamConfig,
}

fn nats(e: impl std::fmt::Display) -> ExportError {
    ExportError::Sink(e.to_string())
}

fn resume(e: impl std::fmt::Display) -> ExportError {
    ExportError::Resume(e.to_string())
}

/// A resourceVersion's key in the bucket (namespace names cannot hold `_`).
fn rv_key(scope: &str) -> String {
    format!("rv.{scope}")
}

impl JetStream {
    /// Opens (creating if missing) the stream and the bucket over a connected client.
    pub async fn open(
        client: async_nats::Client,
        config: JetStreamConfig,
    ) -> Result<Self, ExportError> {
        let context = jetstream::new(client);
        context
            .get_or_create_stream(stream::Config {
                name: config.stream.clone(),
                subjects: vec![format!("{}.>", config.subject_prefix)],
                duplicate_window: config.duplicate_window,
                storage: stream::StorageType::File,
                ..Default::default()
            })
            .await
            .map_err(nats)?;
        // The bucket's stream as `create_key_value` makes it, created here: that call first
        // asks for the account's info, which nats-server 2.9 (Debian 12) answers in a shape
        // async-nats no longer decodes.
        context
            .get_or_create_stream(stream::Config {
                name: format!("KV_{}", config.bucket),
                subjects: vec![format!("$KV.{}.>", config.bucket)],
                max_messages_per_subject: 1,
                max_age: config.resume_ttl,
                storage: stream::StorageType::File,
                allow_rollup: true,
                deny_delete: true,
                allow_direct: true,
                discard: stream::DiscardPolicy::New,
                num_replicas: 1,
                ..Default::default()
            })
            .await
            .map_err(resume)?;
        let kv = context
            .get_key_value(config.bucket.clone())
            .await
            .map_err(resume)?;
        Ok(JetStream {
            context,
            kv,
            config,
        })
    }

    /// The JetStream context (to read the stream back, e.g. in tests).
    pub fn context(&self) -> &jetstream::Context {
        &self.context
    }

    async fn put(&self, key: &str, entry: &Entry) -> Result<(), ExportError> {
        let bytes = serde_json::to_vec(entry).map_err(resume)?;
        self.kv.put(key, Bytes::from(bytes)).await.map_err(resume)?;
        Ok(())
    }
}

impl RecordSink for JetStream {
    async fn deliver(&mut self, record: &ExportRecord) -> Result<(), ExportError> {
        let payload = serde_json::to_vec(record).map_err(nats)?;
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", record.key().as_str());
        let subject = format!(
            "{}.{}",
            self.config.subject_prefix,
            if record.namespace.is_empty() {
                "_"
            } else {
                &record.namespace
            }
        );
        self.context
            .publish_with_headers(subject, headers, Bytes::from(payload))
            .await
            .map_err(nats)?
            .await
            .map_err(nats)?;
        Ok(())
    }
}

impl ResumeStore for JetStream {
    async fn load(&mut self) -> Result<ResumePoint, ExportError> {
        let mut point = ResumePoint::default();
        let mut info = self
            .context
            .get_stream(format!("KV_{}", self.config.bucket))
            .await
            .map_err(resume)?;
        if info.info().await.map_err(resume)?.state.messages == 0 {
            return Ok(point);
        }
        let mut watch = self.kv.watch_with_history(">").await.map_err(resume)?;
        while let Some(entry) = watch.next().await {
            let entry = entry.map_err(resume)?;
            let last = entry.delta == 0;
            if entry.operation == kv::Operation::Put {
                if let Some(scope) = entry.key.strip_prefix("rv.") {
                    let rv = String::from_utf8_lossy(&entry.value).into_owned();
                    point.resource_versions.insert(scope.to_owned(), rv);
                } else {
                    let e: Entry = serde_json::from_slice(&entry.value).map_err(resume)?;
                    if let Some(p) = e.p {
                        point.pending.push(p);
                    }
                    point.counts.insert(entry.key, (e.c, e.n));
                }
            }
            if last {
                break;
            }
        }
        Ok(point)
    }

    async fn begin(&mut self, record: &ExportRecord, previous: u64) -> Result<(), ExportError> {
        let entry = Entry {
            c: previous,
            n: record.namespace.clone(),
            p: Some(record.clone()),
        };
        self.put(&record.uid, &entry).await
    }

    async fn commit(&mut self, record: &ExportRecord) -> Result<(), ExportError> {
        let entry = Entry {
            c: record.count,
            n: record.namespace.clone(),
            p: None,
        };
        self.put(&record.uid, &entry).await
    }

    async fn forget(&mut self, uid: &str) -> Result<(), ExportError> {
        self.kv.purge(uid).await.map_err(resume)
    }

    async fn save_resource_version(&mut self, scope: &str, rv: &str) -> Result<(), ExportError> {
        self.kv
            .put(rv_key(scope), Bytes::from(rv.to_owned()))
            .await
            .map_err(resume)?;
        Ok(())
    }
}

/// Every record in `stream` (from its first message), for checks and tests: subject, and
/// the record.
///
/// ```no_run
/// # async fn f(js: kevents_export::JetStream) -> Result<(), kevents_export::ExportError> {
/// let all = kevents_export::jetstream::read_all(js.context(), "export").await?;
/// let total: u64 = all.iter().map(|(_, r)| r.delta).sum();
/// # Ok(()) }
/// ```
pub async fn read_all(
    context: &jetstream::Context,
    stream: &str,
) -> Result<Vec<(String, ExportRecord)>, ExportError> {
    let mut s = context.get_stream(stream).await.map_err(nats)?;
    let info = s.info().await.map_err(nats)?;
    let (first, last) = (info.state.first_sequence, info.state.last_sequence);
    let mut out = Vec::new();
    if info.state.messages == 0 {
        return Ok(out);
    }
    for seq in first..=last {
        match s.get_raw_message(seq).await {
            Ok(m) => {
                let r: ExportRecord = serde_json::from_slice(&m.payload).map_err(nats)?;
                out.push((m.subject.to_string(), r));
            }
            Err(e) if e.to_string().contains("no message found") => continue,
            Err(e) => return Err(nats(e)),
        }
    }
    Ok(out)
}
