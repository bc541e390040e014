//! [`JetStream`]: records into a NATS JetStream stream (a subject per event, every write
//! fenced by the stream's last sequence, `Nats-Msg-Id` = `uid:count`); the stream is the
//! resume point, the watch scopes' resourceVersions are in a JetStream key-value bucket.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::{self, consumer, kv, stream};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::time::Instant;

use crate::store::{RecordSink, ResumePoint, ResumeStore};
use crate::{Counts, ExportError, ExportRecord};

/// Where and how [`JetStream`] stores records and the resume point.
///
/// ```
/// let c = kevents_export::JetStreamConfig::new("export");
/// assert_eq!(c.subject_prefix, "export");
/// assert_eq!(c.bucket, "export-resume");
/// assert_eq!(c.replicas, 1);
/// ```
#[derive(Debug, Clone)]
pub struct JetStreamConfig {
    /// The stream's name (created if missing, with subjects `{subject_prefix}.>`).
    pub stream: String,
    /// Records of the event `uid` in namespace `ns` go to subject
    /// `{subject_prefix}.{ns}.{uid}` (a subject per event: its last message is its last
    /// exported count).
    pub subject_prefix: String,
    /// The key-value bucket of the watch scopes' resourceVersions (created if missing).
    pub bucket: String,
    /// A new stream's duplicate window: a second line of defence (the fence decides whether a
    /// record is stored, whatever the window).
    pub duplicate_window: Duration,
    /// Records older than this are not loaded back as live events' counts (their events have
    /// expired from the apiserver: its `--event-ttl` is 1 h by default).
    pub resume_ttl: Duration,
    /// Replicas of a stream and bucket this creates (a clustered JetStream: 3).
    pub replicas: usize,
    /// Who writes (in the fence's term markers, for people reading the stream).
    pub identity: String,
    /// How long a write is retried while the server cannot be reached (a restart, a
    /// failover) before the export fails.
    pub unreachable_deadline: Duration,
    /// At most this many records are sent before their acknowledgements are awaited (the
    /// in-flight window; 1 to 4 096). Each carries the next expected sequence, so the fence
    /// holds for every one; more in flight means fewer round trips per record, and more
    /// records read back from the stream when a window's answers are lost.
    pub max_in_flight: usize,
    /// At most this many payload bytes in flight (a window holds at least one record,
    /// whatever its size).
    pub max_in_flight_bytes: usize,
}

impl JetStreamConfig {
    /// Stream `stream`, subjects `{stream}.{namespace}.{uid}`, bucket `{stream}-resume`, a
    /// 10-minute duplicate window, a 3-hour resume TTL, one replica, 5 minutes of retries
    /// while the server is unreachable, up to 256 records (and 4 MiB) in flight.
    pub fn new(stream: &str) -> Self {
        JetStreamConfig {
            stream: stream.to_owned(),
            subject_prefix: stream.to_owned(),
            bucket: format!("{stream}-resume"),
            duplicate_window: Duration::from_secs(600),
            resume_ttl: Duration::from_secs(3 * 3600),
            replicas: 1,
            identity: format!(
                "{}_{}",
                kevents_core::events_v1::hostname(),
                std::process::id()
            ),
            unreachable_deadline: Duration::from_secs(300),
            max_in_flight: 256,
            max_in_flight_bytes: 4 << 20,
        }
    }

    /// Whether NATS can hold this stream, bucket and subjects ([`ExportError::Config`] says
    /// which name cannot): the stream and the bucket are 1 to 64 of `[A-Za-z0-9_-]` (NATS
    /// refuses `.`, `*`, `>`, spaces and path separators in their names), the subject prefix
    /// is such tokens joined by `.`, the replicas are 1 to 5, and the in-flight window is 1
    /// to 4 096 records (the JetStream client allows 5 000 unacknowledged publishes) and at
    /// least 1 byte.
    /// [`JetStream::open`] checks it first; a command checks it before it connects.
    ///
    /// ```
    /// use kevents_export::JetStreamConfig;
    /// assert!(JetStreamConfig::new("export").validate().is_ok());
    /// assert!(JetStreamConfig::new("a.b").validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), ExportError> {
        let token = |t: &str| {
            !t.is_empty()
                && t.len() <= 64
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        for (what, name) in [("stream", &self.stream), ("bucket", &self.bucket)] {
            if !token(name) {
                return Err(ExportError::Config(format!(
                    "the {what} name {name:?} is not 1 to 64 of [A-Za-z0-9_-]"
                )));
            }
        }
        if self.subject_prefix.len() > 128 || !self.subject_prefix.split('.').all(token) {
            return Err(ExportError::Config(format!(
                "the subject prefix {:?} is not dot-separated tokens of [A-Za-z0-9_-]",
                self.subject_prefix
            )));
        }
        if !(1..=5).contains(&self.replicas) {
            return Err(ExportError::Config(format!(
                "{} replicas: JetStream allows 1 to 5",
                self.replicas
            )));
        }
        if !(1..=MAX_IN_FLIGHT).contains(&self.max_in_flight) || self.max_in_flight_bytes == 0 {
            return Err(ExportError::Config(format!(
                "an in-flight window of {} records and {} bytes: 1 to {MAX_IN_FLIGHT} records and at least 1 byte",
                self.max_in_flight, self.max_in_flight_bytes
            )));
        }
        Ok(())
    }
}

/// The largest in-flight window: under the JetStream client's 5 000 unacknowledged publishes
/// (a window sends all its records before it awaits any acknowledgement).
const MAX_IN_FLIGHT: usize = 4096;

/// How long the load's requests may take (creating the consumer of every event's last record
/// makes the server read every subject of the stream).
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// The header naming the writer of each record and term marker (`JetStreamConfig::identity`):
/// with the fence, every record is written by the writer of the last marker before it.
pub const WRITER_HEADER: &str = "Kevents-Writer";

/// The subject token of a uid: itself when it is made of `[A-Za-z0-9_-]` (a UUID is), else
/// each other byte as `~xx` (subjects split on `.` and treat `*`, `>` and spaces specially).
fn uid_token(uid: &str) -> String {
    if !uid.is_empty()
        && uid
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return uid.to_owned();
    }
    let mut out = String::with_capacity(uid.len() + 8);
    if uid.is_empty() {
        out.push('~');
    }
    for b in uid.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(b as char);
        } else {
            out.push_str(&format!("~{b:02x}"));
        }
    }
    out
}

/// `{prefix}.{namespace or _}.{uid token}`: the subject of an event's records.
fn subject(prefix: &str, namespace: &str, uid: &str) -> String {
    format!(
        "{}.{}.{}",
        prefix,
        if namespace.is_empty() { "_" } else { namespace },
        uid_token(uid)
    )
}

/// What [`JetStream`] publishes for a record, before the fence's headers: its subject, its
/// `Nats-Msg-Id` (`uid:count`) and its JSON payload.
pub(crate) fn publication(
    config: &JetStreamConfig,
    record: &ExportRecord,
) -> Result<(String, String, Bytes), ExportError> {
    let payload = serde_json::to_vec(record).map_err(nats)?;
    let subject = subject(&config.subject_prefix, &record.namespace, &record.uid);
    Ok((subject, record.key(), Bytes::from(payload)))
}

/// Records into JetStream, fenced, and the watch scopes' resourceVersions in a JetStream
/// key-value bucket: both a [`RecordSink`] and a [`ResumeStore`].
///
/// **The stream is the resume point.** A record is published to its event's subject with
/// `Nats-Expected-Last-Sequence` set to the stream's last sequence as this writer knows it:
/// the server stores it only if nothing else was appended since. A writer begins its term
/// ([`ResumeStore::load`]) by appending a marker (`{subject_prefix}._fence`), which refuses
/// every later write of any earlier writer ([`ExportError::Fenced`]: a leader frozen past
/// its Lease lands nothing once the next one began), then reads each event's last record
/// (the stream's last message per subject) as the counts to continue from. A write whose
/// answer was lost (a timeout, a server restart) is resolved by reading the stream, never by
/// sending it blindly again: a record is stored once whatever the duplicate window
/// (`Nats-Msg-Id` = `uid:count` stays, as a second line of defence).
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
    /// The stream's last sequence as this writer knows it (`None`: no term begun). Shared
    /// by clones (the run uses one as sink, one as store).
    fence: Arc<Mutex<Option<u64>>>,
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

/// What became of writes whose answers did not all say ([`JetStream::resolve_batch`]).
struct Resolved {
    /// How many of the keys (from the first) are in the stream, in order, right after the
    /// sequence this writer knew.
    stored: usize,
    /// `Some(last)`: something else follows them (the stream's last sequence is `last`).
    fenced: Option<u64>,
}

/// Why an existing stream would not keep the history exactly (`None`: it would).
fn unfit_stream(config: &JetStreamConfig, have: &stream::Config) -> Option<String> {
    let want = format!("{}.>", config.subject_prefix);
    let mut wrong = Vec::new();
    if !have.subjects.iter().any(|s| *s == want || s == ">") {
        wrong.push(format!(
            "its subjects are {:?}, not {want:?}",
            have.subjects
        ));
    }
    if have.max_messages_per_subject > 0 {
        wrong.push(format!(
            "max_msgs_per_subject is {} (an event's earlier records would be dropped)",
            have.max_messages_per_subject
        ));
    }
    if (have.max_messages > 0 || have.max_bytes > 0) && have.discard == stream::DiscardPolicy::Old {
        wrong.push(format!(
            "max_msgs {} / max_bytes {} with discard old (records would be dropped silently)",
            have.max_messages, have.max_bytes
        ));
    }
    if !have.max_age.is_zero() && have.max_age < config.resume_ttl {
        wrong.push(format!(
            "max_age {:?} is shorter than the resume TTL {:?} (an event's last record could expire while the event lives)",
            have.max_age, config.resume_ttl
        ));
    }
    if have.storage == stream::StorageType::Memory {
        wrong.push("storage is memory (a server restart loses the history)".into());
    }
    if have.sealed {
        wrong.push("it is sealed".into());
    }
    if have.retention != stream::RetentionPolicy::Limits {
        wrong.push(format!(
            "its retention is {:?}, not limits (acknowledged records would be removed)",
            have.retention
        ));
    }
    (!wrong.is_empty()).then(|| {
        format!(
            "stream {:?} would not keep the history exactly: {}",
            config.stream,
            wrong.join("; ")
        )
    })
}

impl JetStream {
    /// Opens the stream and the bucket over a connected client, creating them if missing
    /// (with [`JetStreamConfig::replicas`]); an existing stream whose configuration would drop
    /// records (limits that discard, a per-subject limit, an age under the resume TTL, memory
    /// storage, other subjects) is refused with [`ExportError::Store`] naming what differs.
    pub async fn open(
        client: async_nats::Client,
        config: JetStreamConfig,
    ) -> Result<Self, ExportError> {
        config.validate()?;
        let context = jetstream::new(client);
        let mut existing = context.get_stream(&config.stream).await.ok();
        let info = match &mut existing {
            Some(s) => Some(s.info().await.map_err(nats)?.config.clone()),
            None => None,
        };
        match info {
            Some(have) => {
                if let Some(why) = unfit_stream(&config, &have) {
                    return Err(ExportError::Store(why));
                }
            }
            None => {
                context
                    .get_or_create_stream(stream::Config {
                        name: config.stream.clone(),
                        subjects: vec![format!("{}.>", config.subject_prefix)],
                        duplicate_window: config.duplicate_window,
                        storage: stream::StorageType::File,
                        num_replicas: config.replicas.max(1),
                        deny_delete: true,
                        ..Default::default()
                    })
                    .await
                    .map_err(nats)?;
            }
        }
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
                num_replicas: config.replicas.max(1),
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
            fence: Arc::new(Mutex::new(None)),
        })
    }

    /// The JetStream context (to read the stream back, e.g. in tests).
    pub fn context(&self) -> &jetstream::Context {
        &self.context
    }

    /// The key-value bucket of the resume point (`rv.*`: the watch scopes'
    /// resourceVersions; `feed.*`: the feeds' positions, [`crate::feed`]).
    pub fn key_value(&self) -> &kv::Store {
        &self.kv
    }

    /// The configuration it was opened with.
    pub fn config(&self) -> &JetStreamConfig {
        &self.config
    }

    /// The subject of an event's records.
    pub fn subject_of(&self, namespace: &str, uid: &str) -> String {
        subject(&self.config.subject_prefix, namespace, uid)
    }

    fn fence(&self) -> Option<u64> {
        *self.fence.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_fence(&self, seq: u64) {
        *self.fence.lock().unwrap_or_else(|p| p.into_inner()) = Some(seq);
    }

    /// The stream's last sequence, retried while the server cannot be reached (up to
    /// [`JetStreamConfig::unreachable_deadline`]).
    async fn last_sequence(&self) -> Result<u64, ExportError> {
        let deadline = Instant::now() + self.config.unreachable_deadline;
        let mut pause = Duration::from_millis(100);
        loop {
            let attempt = async {
                let mut s = self.context.get_stream(&self.config.stream).await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(
                    s.info().await?.state.last_sequence,
                )
            };
            match tokio::time::timeout(Duration::from_secs(5), attempt).await {
                Ok(Ok(last)) => return Ok(last),
                Ok(Err(e)) if e.to_string().contains("stream not found") => {
                    return Err(ExportError::Store(format!(
                        "stream {:?} was deleted",
                        self.config.stream
                    )));
                }
                Ok(Err(e)) if Instant::now() >= deadline => {
                    return Err(nats(format!("the stream could not be read: {e}")));
                }
                Err(_) if Instant::now() >= deadline => {
                    return Err(nats("the stream could not be read: timed out"));
                }
                _ => {
                    tracing::debug!(
                        retry_ms = pause.as_millis() as u64,
                        "NATS unreachable; reading the stream again"
                    );
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// How many of `keys` (in order, from the first) the stream holds right after sequence
    /// `expected`, and whether something else follows them: read back, one message at a
    /// time, from `expected + 1` to the stream's last sequence. With one writer per term,
    /// every record this writer sent carries the sequence it expects to follow: what lies
    /// after `expected` is this writer's records in their order, then (if it was deposed)
    /// another writer's term marker.
    async fn resolve_batch(&self, expected: u64, keys: &[&str]) -> Result<Resolved, ExportError> {
        let last = self.last_sequence().await?;
        if last < expected {
            return Err(ExportError::Store(format!(
                "stream {:?} holds {last} messages, fewer than the {expected} this writer saw (purged or recreated)",
                self.config.stream
            )));
        }
        let mut resolved = Resolved {
            stored: 0,
            fenced: None,
        };
        if last == expected {
            return Ok(resolved);
        }
        let s = self
            .context
            .get_stream(&self.config.stream)
            .await
            .map_err(nats)?;
        for seq in expected + 1..=last {
            let ours = match s.get_raw_message(seq).await {
                Ok(m) => {
                    let id = m
                        .headers
                        .get(async_nats::header::NATS_MESSAGE_ID)
                        .map(|v| v.as_str());
                    id.is_some() && id == keys.get(resolved.stored).copied()
                }
                Err(_) => false,
            };
            if !ours {
                resolved.fenced = Some(last);
                break;
            }
            resolved.stored += 1;
        }
        Ok(resolved)
    }

    /// Publishes `items` (subject, `Nats-Msg-Id`, payload) in their order under the fence:
    /// each stored once, or [`ExportError::Fenced`] (then a prefix of them is stored, and
    /// nothing after the next term's marker). Up to [`JetStreamConfig::max_in_flight`]
    /// records are sent back to back, the `i`-th of a window expecting the sequence `fence
    /// + i`, before their acknowledgements are awaited; when one is missing, a duplicate or
    /// at another sequence, the stream is read back from the first record not confirmed
    /// ([`JetStream::resolve_batch`]) and what it does not hold is sent again.
    async fn publish_batch(&self, items: &[(String, String, Bytes)]) -> Result<(), ExportError> {
        if items.is_empty() {
            return Ok(());
        }
        // A writer whose resume point is elsewhere (not loaded from this stream) begins its
        // term at its first write.
        let mut fence = match self.fence() {
            Some(seq) => seq,
            None => self.begin_term().await?,
        };
        let mut done = 0;
        let mut deadline = Instant::now() + self.config.unreachable_deadline;
        let mut pause = Duration::from_millis(100);
        while done < items.len() {
            let mut end = done;
            let mut bytes = 0;
            while let Some((_, _, payload)) = items.get(end) {
                if end > done
                    && (end - done >= self.config.max_in_flight
                        || bytes + payload.len() > self.config.max_in_flight_bytes)
                {
                    break;
                }
                bytes += payload.len();
                end += 1;
            }
            let window = items.get(done..end).unwrap_or_default();
            // Sent back to back on the one connection (core NATS keeps their order)...
            let mut acks = Vec::with_capacity(window.len());
            let mut error = None;
            let mut previous: Option<&str> = None;
            for (i, (subject, key, payload)) in window.iter().enumerate() {
                let mut headers = async_nats::HeaderMap::new();
                headers.insert(async_nats::header::NATS_MESSAGE_ID, key.as_str());
                headers.insert(
                    async_nats::header::NATS_EXPECTED_LAST_SEQUENCE,
                    (fence + i as u64).to_string().as_str(),
                );
                // A sequence says how many messages came before, not whose: after the first,
                // each record also expects the one before it in the window to be the
                // stream's last message, so that a record whose predecessor was refused
                // (another writer's term marker took its place) is refused too.
                if let Some(before) = previous {
                    headers.insert(async_nats::header::NATS_EXPECTED_LAST_MESSAGE_ID, before);
                }
                previous = Some(key.as_str());
                headers.insert(WRITER_HEADER, self.config.identity.as_str());
                match self
                    .context
                    .publish_with_headers(subject.clone(), headers, payload.clone())
                    .await
                {
                    Ok(ack) => acks.push(ack.into_future()),
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
            // ...then their acknowledgements, all at once (a lost one times out once).
            let mut confirmed = 0;
            let mut clean = error.is_none();
            for (i, ack) in futures_util::future::join_all(acks)
                .await
                .into_iter()
                .enumerate()
            {
                match ack {
                    Ok(ack) if clean && !ack.duplicate && ack.sequence == fence + i as u64 + 1 => {
                        confirmed += 1;
                    }
                    // A duplicate (an earlier send landed) or an unexpected sequence: read back.
                    Ok(_) => clean = false,
                    // "No responders" (a server restarting, a cluster electing its leader)
                    // reads as `StreamNotFound` too: reading the stream back tells them apart.
                    Err(e) => {
                        clean = false;
                        error.get_or_insert(e);
                    }
                }
            }
            fence += confirmed as u64;
            done += confirmed;
            self.set_fence(fence);
            if clean && confirmed == window.len() {
                deadline = Instant::now() + self.config.unreachable_deadline;
                pause = Duration::from_millis(100);
                continue;
            }
            let keys: Vec<&str> = items
                .get(done..)
                .unwrap_or_default()
                .iter()
                .map(|(_, key, _)| key.as_str())
                .collect();
            let resolved = self.resolve_batch(fence, &keys).await?;
            fence += resolved.stored as u64;
            done += resolved.stored;
            self.set_fence(fence);
            if let Some(last) = resolved.fenced {
                return Err(ExportError::Fenced(format!(
                    "stream {:?} was written by another writer (its last sequence is {last}, this writer's {fence}): this writer was deposed",
                    self.config.stream
                )));
            }
            if resolved.stored > 0 || confirmed > 0 {
                deadline = Instant::now() + self.config.unreachable_deadline;
                pause = Duration::from_millis(100);
                continue;
            }
            // Nothing of the window is stored. No responders while the stream answers: was
            // it reconfigured?
            if let Some(e) = &error
                && e.kind() == PublishErrorKind::StreamNotFound
                && let Ok(mut stream) = self.context.get_stream(&self.config.stream).await
                && let Ok(info) = stream.info().await
                && let Some(why) = unfit_stream(&self.config, &info.config)
            {
                return Err(ExportError::Store(why));
            }
            if let Some(e) = &error
                && Instant::now() >= deadline
            {
                return Err(nats(format!(
                    "no answer from NATS for {:?}: {e}",
                    self.config.unreachable_deadline
                )));
            }
            tracing::debug!(error = ?error.map(|e| e.to_string()), records = items.len() - done,
                "records' writes were not stored; sending them again");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
        Ok(())
    }

    /// Begins this writer's term: appends a marker after the stream's last message, so that
    /// every later write of an earlier writer is refused. Retried while the server cannot be
    /// reached (up to [`JetStreamConfig::unreachable_deadline`]).
    async fn begin_term(&self) -> Result<u64, ExportError> {
        let deadline = Instant::now() + self.config.unreachable_deadline;
        let mut pause = Duration::from_millis(100);
        let mut raced = 0;
        loop {
            let last = self.last_sequence().await?;
            let marker = serde_json::json!({
                "identity": self.config.identity,
                "after": last,
                "at": kevents_core::Clock::now(&kevents_core::SystemClock).to_rfc3339_micros(),
            });
            let mut headers = async_nats::HeaderMap::new();
            headers.insert(
                async_nats::header::NATS_EXPECTED_LAST_SEQUENCE,
                last.to_string().as_str(),
            );
            headers.insert(WRITER_HEADER, self.config.identity.as_str());
            // Its own message id, never a record's: a record that expects its predecessor
            // in a window to be the stream's last message is refused after a marker.
            headers.insert(
                async_nats::header::NATS_MESSAGE_ID,
                format!(
                    "_fence:{}:{last}:{}",
                    self.config.identity,
                    marker["at"].as_str().unwrap_or_default()
                )
                .as_str(),
            );
            let sent = async {
                self.context
                    .publish_with_headers(
                        format!("{}._fence", self.config.subject_prefix),
                        headers,
                        Bytes::from(marker.to_string()),
                    )
                    .await?
                    .await
            }
            .await;
            match sent {
                Ok(ack) => {
                    self.set_fence(ack.sequence);
                    return Ok(ack.sequence);
                }
                // Another writer appended meanwhile: read the end again.
                Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                    raced += 1;
                    if raced >= 10 {
                        return Err(ExportError::Fenced(format!(
                            "stream {:?}: another writer kept appending; this writer's term could not begin",
                            self.config.stream
                        )));
                    }
                }
                // No answer: the marker may be stored; a second one does no harm (the term
                // begins at the last one).
                Err(e) => {
                    if Instant::now() >= deadline {
                        return Err(nats(format!("the term's marker was not stored: {e}")));
                    }
                    tracing::debug!(error = %e, "the term's marker was not stored; again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Each event's last record in the stream (the last message of each record subject),
    /// those younger than the resume TTL, into `counts` as they are read (one record held at
    /// a time: a million events load into [`Counts`]' few bytes each).
    async fn last_counts(&self, counts: &mut Counts) -> Result<(), ExportError> {
        // The server finds each subject's last message when the consumer is created: over a
        // million subjects nats-server 2.9 takes longer than a request's 5 s.
        let mut context = self.context.clone();
        context.set_timeout(LOAD_TIMEOUT);
        let s = context
            .get_stream(&self.config.stream)
            .await
            .map_err(|e| resume(format!("reading the stream: {e}")))?;
        // A pull consumer: the client asks for a batch at a time. (A push consumer replaying
        // at once filled the client's subscription buffer: 75 MiB held for 100 000 events.)
        let consumer = s
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: format!("{}.*.*", self.config.subject_prefix),
                deliver_policy: consumer::DeliverPolicy::LastPerSubject,
                replay_policy: consumer::ReplayPolicy::Instant,
                ..Default::default()
            })
            .await
            .map_err(|e| {
                resume(format!(
                    "creating the consumer of every event's last record: {e}"
                ))
            })?;
        let pending = consumer.cached_info().num_pending;
        if pending == 0 {
            return Ok(());
        }
        // Room for them all at once: no table grown twice over (and its old one freed) on
        // the way.
        counts.reserve(usize::try_from(pending).unwrap_or(0));
        let oldest = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
            - self.config.resume_ttl.as_secs() as i64;
        let last =
            |e: &dyn std::fmt::Display| resume(format!("reading every event's last record: {e}"));
        let mut messages = consumer.messages().await.map_err(|e| last(&e))?;
        while let Some(m) = messages.next().await {
            let m = m.map_err(|e| last(&e))?;
            let info = m.info().map_err(resume)?;
            let (pending, published) = (info.pending, info.published.unix_timestamp());
            if published >= oldest {
                let record: ExportRecord = serde_json::from_slice(&m.payload).map_err(|e| {
                    ExportError::Resume(format!("a record at {} is not one: {e}", m.subject))
                })?;
                // A count no event can hold (a message someone else wrote) would silence
                // the event for good: refused, warned.
                if !counts.insert(&record.uid, record.count, &record.namespace) {
                    tracing::warn!(subject = %m.subject, count = record.count,
                        "the stream's last record of an event holds an impossible count: ignored");
                }
            }
            if pending == 0 {
                break;
            }
        }
        Ok(())
    }
}

impl JetStream {
    /// One reading of the resume point ([`ResumeStore::load`] retries it).
    async fn load_once(&mut self) -> Result<ResumePoint, ExportError> {
        let mut point = ResumePoint::default();
        self.begin_term().await?;
        self.last_counts(&mut point.counts).await?;
        let bucket =
            |e: &dyn std::fmt::Display| resume(format!("reading the saved resourceVersions: {e}"));
        let mut info = self
            .context
            .get_stream(format!("KV_{}", self.config.bucket))
            .await
            .map_err(|e| bucket(&e))?;
        if info.info().await.map_err(|e| bucket(&e))?.state.messages == 0 {
            return Ok(point);
        }
        let mut watch = self
            .kv
            .watch_with_history("rv.>")
            .await
            .map_err(|e| bucket(&e))?;
        while let Some(entry) = watch.next().await {
            let entry = entry.map_err(|e| bucket(&e))?;
            let last = entry.delta == 0;
            if entry.operation == kv::Operation::Put
                && let Some(scope) = entry.key.strip_prefix("rv.")
            {
                match readable_resource_version(&entry.value) {
                    Some(rv) => {
                        point.resource_versions.insert(scope.to_owned(), rv);
                    }
                    // Opaque to clients, but never empty, long or binary: a corrupt entry
                    // is named and left out (that scope lists afresh; the counts come from
                    // the stream, so nothing is exported twice).
                    None => tracing::warn!(bucket = %self.config.bucket, key = %entry.key,
                        bytes = entry.value.len(),
                        "a saved resourceVersion is not one (corrupt entry): ignored, the scope is listed afresh"),
                }
            }
            if last {
                break;
            }
        }
        Ok(point)
    }
}

impl RecordSink for JetStream {
    async fn deliver(&mut self, record: &ExportRecord) -> Result<(), ExportError> {
        self.publish_batch(&[publication(&self.config, record)?])
            .await
    }

    /// Up to [`JetStreamConfig::max_in_flight`] records in flight at once, each fenced.
    async fn deliver_batch(&mut self, records: &[ExportRecord]) -> Result<(), ExportError> {
        let items = records
            .iter()
            .map(|record| publication(&self.config, record))
            .collect::<Result<Vec<_>, _>>()?;
        self.publish_batch(&items).await
    }
}

/// The stream is the resume point: [`ResumeStore::load`] begins the term and reads each
/// event's last record; a record's delivery is its commit (`begin`, `commit` and `forget`
/// write nothing); the watch scopes' resourceVersions go to the bucket.
impl ResumeStore for JetStream {
    async fn load(&mut self) -> Result<ResumePoint, ExportError> {
        // A request that timed out (a cluster electing a stream's leader, a server
        // restarting) is no reason to stop: the load is begun again (a second term marker does
        // no harm: the term begins at the last one) while the server may still come back.
        let deadline = Instant::now() + self.config.unreachable_deadline;
        let mut pause = Duration::from_millis(200);
        loop {
            match self.load_once().await {
                Err(ExportError::Resume(why))
                    if why.contains("timed out") && Instant::now() < deadline =>
                {
                    tracing::warn!(error = %why, retry_ms = pause.as_millis() as u64,
                        "reading the resume point timed out; reading it again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                other => return other,
            }
        }
    }

    async fn begin(&mut self, _record: &ExportRecord, _previous: u64) -> Result<(), ExportError> {
        Ok(())
    }

    async fn commit(&mut self, _record: &ExportRecord) -> Result<(), ExportError> {
        Ok(())
    }

    async fn forget(&mut self, _uid: &str) -> Result<(), ExportError> {
        Ok(())
    }

    async fn save_resource_version(&mut self, scope: &str, rv: &str) -> Result<(), ExportError> {
        // Retried while the server cannot be reached, as a record's write is.
        let deadline = Instant::now() + self.config.unreachable_deadline;
        let mut pause = Duration::from_millis(100);
        loop {
            let put = self.kv.put(rv_key(scope), Bytes::from(rv.to_owned()));
            match tokio::time::timeout(Duration::from_secs(5), put).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) if Instant::now() >= deadline => return Err(resume(e)),
                Err(_) if Instant::now() >= deadline => {
                    return Err(resume("saving a resourceVersion timed out"));
                }
                _ => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
    }
}

/// A saved resourceVersion as the apiserver writes one: 1 to 64 printable ASCII characters
/// (it is opaque, but etcd's are decimal numbers).
fn readable_resource_version(value: &[u8]) -> Option<String> {
    let ok = !value.is_empty() && value.len() <= 64 && value.iter().all(|b| b.is_ascii_graphic());
    ok.then(|| String::from_utf8_lossy(value).into_owned())
}

/// Every record in `stream` (from its first message; the fence's term markers left out),
/// for checks and tests: subject, and the record.
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
                // The fence's term markers (`{prefix}._fence`) are not records.
                if m.subject.ends_with("._fence") {
                    continue;
                }
                let r: ExportRecord = serde_json::from_slice(&m.payload).map_err(nats)?;
                out.push((m.subject.to_string(), r));
            }
            Err(e) if e.to_string().contains("no message found") => continue,
            Err(e) => return Err(nats(e)),
        }
    }
    Ok(out)
}
