//! Reading the history back, for people: the records of a time window (and, to follow the
//! stream, every record after it), filtered by namespace, object and reason, and each
//! event's occurrences inside the window (the sum of its records' deltas there).
//!
//! **Bounded reads.** Nothing reads the whole stream. The first record that can be in the
//! window is found by a binary search over the stream's sequences (about 20 reads of one
//! message each, [`HistoryQuery::lag`] says why it is exact); from there an ordered pull
//! consumer (ephemeral, in memory on the server, batches of 500) reads forward, with the
//! subject filter `{prefix}.{namespace}.*` when a namespace is given, none otherwise:
//! nats-server 2.9 took 0.35 s to create a consumer filtered by `{prefix}.*.*` (0.24 s by
//! `{prefix}.>`) on a stream of 100 000 records, under 1 ms unfiltered and 5 ms filtered by
//! one namespace. The fence's markers (`{prefix}._fence`) are skipped by their subject. A record that cannot
//! be about the object of `--for` is skipped before it is decoded. A window's table keeps
//! one entry per event ([`HistoryTable`], at most [`HistoryQuery::max_events`]); following
//! keeps nothing.
//!
//! ```no_run
//! # async fn f() -> Result<(), kevents_export::ExportError> {
//! use kevents_export::history::{HistoryQuery, ObjectFilter, read_window};
//! let client = async_nats::connect("nats://127.0.0.1:4222").await.map_err(|e| kevents_export::ExportError::Read(e.to_string()))?;
//! let context = async_nats::jetstream::new(client);
//! let now = kevents_core::Clock::now(&kevents_core::SystemClock);
//! let mut query = HistoryQuery::new("export", kevents_core::Time::from_unix_secs(now.unix_secs() - 3600));
//! query.namespace = Some("web".into());
//! query.object = Some(ObjectFilter::parse("pod/web-1")?);
//! for event in read_window(&context, &query).await? {
//!     println!("{} {} x{} (count {})", event.reason, event.regarding.name, event.occurrences, event.count);
//! }
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt;
use kevents_core::Time;
use serde::Serialize;

use crate::{ExportError, ExportRecord, Regarding};

/// How far the clocks of the apiserver's writers, the exporter and the NATS server may
/// disagree: a record's `lastTime` may be this much later than its store time.
pub const CLOCK_SKEW: Duration = Duration::from_secs(120);

/// The largest number of events a window's table holds by default.
pub const MAX_EVENTS: usize = 100_000;

fn read(e: impl std::fmt::Display) -> ExportError {
    ExportError::Read(e.to_string())
}

/// The object whose events are wanted (`--for KIND/NAME`, as `kubectl events --for`).
///
/// ```
/// use kevents_export::{Regarding, history::ObjectFilter};
/// let f = ObjectFilter::parse("deploy/web").unwrap();
/// let web = Regarding { kind: "Deployment".into(), name: "web".into(), ..Default::default() };
/// assert!(f.matches(&web));
/// assert!(ObjectFilter::parse("Pod/web-1").unwrap().matches(
///     &Regarding { kind: "Pod".into(), name: "web-1".into(), ..Default::default() }));
/// assert!(ObjectFilter::parse("web").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectFilter {
    /// The kind as given, lowercased, its API group (`deployment.apps`) and plural taken off,
    /// kubectl's short names resolved (`po`, `deploy`, `rs`, `sts`, `svc`...).
    pub kind: String,
    /// The object's name.
    pub name: String,
}

/// kubectl's short names of the kinds events are most often about.
const SHORT_NAMES: &[(&str, &str)] = &[
    ("po", "pod"),
    ("deploy", "deployment"),
    ("rs", "replicaset"),
    ("sts", "statefulset"),
    ("ds", "daemonset"),
    ("svc", "service"),
    ("no", "node"),
    ("ns", "namespace"),
    ("cj", "cronjob"),
    ("pvc", "persistentvolumeclaim"),
    ("pv", "persistentvolume"),
    ("ing", "ingress"),
    ("cm", "configmap"),
    ("sa", "serviceaccount"),
    ("ep", "endpoints"),
    ("hpa", "horizontalpodautoscaler"),
    ("rc", "replicationcontroller"),
];

impl ObjectFilter {
    /// Parses `KIND/NAME` (`pod/web-1`, `Pod/web-1`, `pods/web-1`, `deployment.apps/web`,
    /// `deploy/web`); anything else is [`ExportError::Config`].
    pub fn parse(s: &str) -> Result<Self, ExportError> {
        let (kind, name) = s.split_once('/').ok_or_else(|| {
            ExportError::Config(format!("{s:?} is not KIND/NAME (e.g. pod/web-1)"))
        })?;
        let kind = kind
            .split('.')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if kind.is_empty() || name.is_empty() || name.contains('/') {
            return Err(ExportError::Config(format!(
                "{s:?} is not KIND/NAME (e.g. pod/web-1)"
            )));
        }
        let kind = SHORT_NAMES
            .iter()
            .find(|(short, _)| *short == kind)
            .map_or(kind, |(_, long)| (*long).to_owned());
        Ok(ObjectFilter {
            kind,
            name: name.to_owned(),
        })
    }

    /// Whether an event about `regarding` is about this object (its kind compared without
    /// case, singular or plural).
    pub fn matches(&self, regarding: &Regarding) -> bool {
        if regarding.name != self.name {
            return false;
        }
        let kind = regarding.kind.to_ascii_lowercase();
        kind == self.kind
            || self.kind.strip_suffix('s') == Some(kind.as_str())
            || self.kind.strip_suffix("es") == Some(kind.as_str())
    }
}

/// What to read: the stream, the window and the filters.
///
/// ```
/// use kevents_export::history::HistoryQuery;
/// let q = HistoryQuery::new("export", kevents_core::Time::from_unix_secs(1_700_000_000));
/// assert_eq!(q.filter_subject(), None);
/// let q = HistoryQuery { namespace: Some("web".into()), ..q };
/// assert_eq!(q.filter_subject().as_deref(), Some("export.web.*"));
/// ```
#[derive(Debug, Clone)]
pub struct HistoryQuery {
    /// The stream's name.
    pub stream: String,
    /// Its records' subject prefix (the stream's name, as [`crate::JetStreamConfig::new`]).
    pub subject_prefix: String,
    /// Only this namespace's events (read through the subject filter).
    pub namespace: Option<String>,
    /// Only the events about this object.
    pub object: Option<ObjectFilter>,
    /// Only the events with this reason.
    pub reason: Option<String>,
    /// The window's start: a record is in the window when its `lastTime` (its store time
    /// when it has none) is at or after it.
    pub from: Time,
    /// The window's end (inclusive; `None`: no end).
    pub to: Option<Time>,
    /// How much older than its store time a record's `lastTime` can be: an event is deleted
    /// by the apiserver `--event-ttl` (1 h by default) after its last change, so no export
    /// can read it, and write its record, later than that. The reads start and end with it
    /// as the margin: a record stored more than `lag` (and [`CLOCK_SKEW`]) before the
    /// window's start cannot be in it. Raise it for a cluster with a longer `--event-ttl`.
    pub lag: Duration,
    /// The largest number of events a window's table holds: beyond, the read fails, saying
    /// so (narrow the window or filter), rather than grow or drop events silently.
    pub max_events: usize,
}

impl HistoryQuery {
    /// Every event of stream `stream` (subject prefix the same) from `from` on; a lag of
    /// 1 h (the apiserver's default `--event-ttl`), at most [`MAX_EVENTS`] events.
    pub fn new(stream: &str, from: Time) -> Self {
        HistoryQuery {
            stream: stream.to_owned(),
            subject_prefix: stream.to_owned(),
            namespace: None,
            object: None,
            reason: None,
            from,
            to: None,
            lag: Duration::from_secs(3600),
            max_events: MAX_EVENTS,
        }
    }

    /// The consumer's subject filter: `{prefix}.{namespace}.*` with a namespace; none
    /// without (the stream holds only `{prefix}.>`; a filter such as `{prefix}.*.*` made
    /// nats-server count a large stream's pending messages subject by subject).
    pub fn filter_subject(&self) -> Option<String> {
        self.namespace
            .as_ref()
            .map(|ns| format!("{}.{ns}.*", self.subject_prefix))
    }

    /// Whether `record` passes the filters (namespace, object, reason; not the window).
    ///
    /// ```
    /// use kevents_export::{ExportRecord, history::HistoryQuery};
    /// let mut q = HistoryQuery::new("export", kevents_core::Time::UNIX_EPOCH);
    /// q.reason = Some("BackOff".into());
    /// let r = ExportRecord { reason: "BackOff".into(), ..Default::default() };
    /// assert!(q.selects(&r));
    /// assert!(!q.selects(&ExportRecord { reason: "Pulled".into(), ..r }));
    /// ```
    pub fn selects(&self, record: &ExportRecord) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| record.namespace == ns)
            && self
                .object
                .as_ref()
                .is_none_or(|o| o.matches(&record.regarding))
            && self.reason.as_deref().is_none_or(|r| record.reason == r)
    }

    /// The time a record is placed at: its `lastTime`, else its store time.
    pub fn time_of(record: &ExportRecord, stored: Time) -> Time {
        record
            .last_time
            .as_deref()
            .and_then(|t| Time::parse_rfc3339(t).ok())
            .unwrap_or(stored)
    }

    /// Whether a record placed at `at` ([`HistoryQuery::time_of`]) is in the window.
    pub fn in_window(&self, at: Time) -> bool {
        at >= self.from && self.to.is_none_or(|to| at <= to)
    }

    fn margin(&self) -> Duration {
        self.lag + CLOCK_SKEW + CLOCK_SKEW
    }

    /// Whether the message stored at `stored` (a record whose `lastTime` is `last`), and
    /// every message before it, is before the window.
    fn all_before(&self, stored: Time, last: Option<Time>) -> bool {
        // Every earlier message was stored no later; a record's lastTime is at most
        // CLOCK_SKEW after its store time, and its store time at most `lag` (+ skew) after
        // its lastTime.
        stored.saturating_add(CLOCK_SKEW) < self.from
            || last.is_some_and(|l| l.saturating_add(self.margin()) < self.from)
    }

    /// Whether a message stored at `stored`, and every later one, is after the window.
    fn all_after(&self, stored: Time) -> bool {
        self.to
            .is_some_and(|to| stored > to.saturating_add(self.margin()))
    }
}

/// One record read, with where and when the stream stored it.
#[derive(Debug, Clone)]
pub struct HistoryItem {
    /// Its stream sequence.
    pub sequence: u64,
    /// When the stream stored it.
    pub stored: Time,
    /// Where it is placed in time ([`HistoryQuery::time_of`]).
    pub at: Time,
    /// The record.
    pub record: ExportRecord,
}

/// What [`HistoryReader::next`] read.
#[derive(Debug, Clone)]
pub enum HistoryRead {
    /// A record in the window that passes the filters.
    Record(Box<HistoryItem>),
    /// Every record the stream held when the reader was opened has been read (once; when
    /// not following, the end).
    CaughtUp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Reading,
    /// Caught up; [`HistoryRead::CaughtUp`] not said yet.
    Say,
    CaughtUp,
}

/// Reads a window of the stream (and, following, every later record), bounded: see the
/// module's documentation.
pub struct HistoryReader {
    query: HistoryQuery,
    follow: bool,
    messages: consumer::pull::Ordered,
    /// The stream's last sequence when opened.
    end: u64,
    state: State,
    /// A message read past the end, kept for after [`HistoryRead::CaughtUp`].
    stash: Option<jetstream::Message>,
    /// The object's name as JSON, to skip records without it before decoding.
    needle: Option<Vec<u8>>,
    skipped: u64,
    first: u64,
    fence_subject: String,
}

impl std::fmt::Debug for HistoryReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryReader")
            .field("query", &self.query)
            .field("follow", &self.follow)
            .field("end", &self.end)
            .field("first", &self.first)
            .finish_non_exhaustive()
    }
}

impl HistoryReader {
    /// Opens a reader of `query`'s window; `follow`: go on reading records as they are
    /// stored, after [`HistoryRead::CaughtUp`]. A missing stream is [`ExportError::Store`].
    pub async fn open(
        context: &jetstream::Context,
        query: HistoryQuery,
        follow: bool,
    ) -> Result<Self, ExportError> {
        let mut stream = context.get_stream(&query.stream).await.map_err(|e| {
            ExportError::Store(format!("stream {:?} cannot be read: {e}", query.stream))
        })?;
        let state = stream.info().await.map_err(read)?.state.clone();
        let (first, end) = (state.first_sequence, state.last_sequence);
        let start = if state.messages == 0 {
            end + 1
        } else {
            first_in_window(&stream, &query, first, end).await?
        };
        let consumer = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: query.filter_subject().unwrap_or_default(),
                deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: start.max(1),
                },
                replay_policy: consumer::ReplayPolicy::Instant,
                ..Default::default()
            })
            .await
            .map_err(read)?;
        let nothing = start > end || consumer.cached_info().num_pending == 0;
        let messages = consumer.messages().await.map_err(read)?;
        let needle = query
            .object
            .as_ref()
            .and_then(|o| serde_json::to_vec(&o.name).ok());
        let fence_subject = format!("{}._fence", query.subject_prefix);
        Ok(HistoryReader {
            query,
            follow,
            messages,
            end,
            state: if nothing { State::Say } else { State::Reading },
            stash: None,
            needle,
            skipped: 0,
            first: start,
            fence_subject,
        })
    }

    /// The sequence the read began at (found by the binary search).
    pub fn start_sequence(&self) -> u64 {
        self.first
    }

    /// Messages on record subjects that are not records (someone else's), skipped.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The next record in the window that passes the filters, or [`HistoryRead::CaughtUp`]
    /// (once); `None` after that when not following.
    pub async fn next(&mut self) -> Result<Option<HistoryRead>, ExportError> {
        loop {
            match self.state {
                State::Say => {
                    self.state = State::CaughtUp;
                    return Ok(Some(HistoryRead::CaughtUp));
                }
                State::CaughtUp if !self.follow => return Ok(None),
                _ => {}
            }
            let m = match self.stash.take() {
                Some(m) => m,
                None => match self.messages.next().await {
                    Some(m) => m.map_err(read)?,
                    None => return Err(read("the stream's consumer ended")),
                },
            };
            let info = m.info().map_err(read)?;
            let (seq, pending) = (info.stream_sequence, info.pending);
            let stored = Time::from_unix_nanos(
                i64::try_from(info.published.unix_timestamp_nanos()).unwrap_or(i64::MAX),
            );
            if self.state == State::Reading {
                if seq > self.end || self.query.all_after(stored) {
                    self.state = State::Say;
                    if self.follow {
                        self.stash = Some(m);
                    }
                    continue;
                }
                if seq >= self.end || pending == 0 {
                    self.state = State::Say;
                }
            }
            // The fence's term markers are not records.
            if m.subject.as_str() == self.fence_subject {
                continue;
            }
            if let Some(item) = self.select(&m.payload, seq, stored) {
                return Ok(Some(HistoryRead::Record(Box::new(item))));
            }
        }
    }

    fn select(&mut self, payload: &[u8], sequence: u64, stored: Time) -> Option<HistoryItem> {
        if let Some(needle) = &self.needle
            && !payload
                .windows(needle.len())
                .any(|w| w == needle.as_slice())
        {
            return None;
        }
        let record: ExportRecord = match serde_json::from_slice(payload) {
            Ok(r) => r,
            Err(_) => {
                self.skipped += 1;
                return None;
            }
        };
        if !self.query.selects(&record) {
            return None;
        }
        let at = HistoryQuery::time_of(&record, stored);
        self.query.in_window(at).then_some(HistoryItem {
            sequence,
            stored,
            at,
            record,
        })
    }
}

/// Whether the message at `seq` and all before it are before the window (`false` when it
/// cannot be read: the search then starts earlier, never later).
async fn before_window(
    stream: &jetstream::stream::Stream,
    query: &HistoryQuery,
    seq: u64,
) -> Result<bool, ExportError> {
    match stream.get_raw_message(seq).await {
        Ok(m) => {
            let stored = Time::from_unix_nanos(
                i64::try_from(m.time.unix_timestamp_nanos()).unwrap_or(i64::MAX),
            );
            let last = serde_json::from_slice::<ExportRecord>(&m.payload)
                .ok()
                .and_then(|r| r.last_time)
                .and_then(|t| Time::parse_rfc3339(&t).ok());
            Ok(query.all_before(stored, last))
        }
        Err(e) if e.to_string().contains("no message found") => Ok(false),
        Err(e) => Err(read(e)),
    }
}

/// The first sequence that can hold a record of the window: a binary search whose every
/// step reads one message. Exact whatever the order of the records' times: it only moves
/// past a message when that message proves every earlier one is before the window.
async fn first_in_window(
    stream: &jetstream::stream::Stream,
    query: &HistoryQuery,
    first: u64,
    last: u64,
) -> Result<u64, ExportError> {
    let (mut lo, mut hi) = (first, last + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before_window(stream, query, mid).await? {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// One event's history inside a window: its last record's fields, its count then, and the
/// occurrences inside the window (`-o json` of `kevents history`, one a line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventHistory {
    /// The event's uid.
    pub uid: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The API that last wrote it, when known.
    pub api: Option<String>,
    /// The object it is about.
    pub regarding: Regarding,
    /// Why.
    pub reason: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Its message (of its last record in the window).
    pub note: String,
    /// Its reporting controller.
    pub reporting_controller: String,
    /// Its reporting instance.
    pub reporting_instance: String,
    /// When it first happened (the event's own first time, maybe before the window).
    pub first_time: Option<String>,
    /// When it last happened inside the window.
    pub last_time: Option<String>,
    /// Its count at its last record in the window.
    pub count: u64,
    /// Its occurrences inside the window: the sum of the deltas of its records there.
    pub occurrences: u64,
    /// Its records in the window.
    pub records: u64,
    /// Where its last record in the window is placed in time ([`HistoryQuery::time_of`]).
    #[serde(skip)]
    pub last_seen: Time,
}

impl EventHistory {
    /// One record's history: its delta as the occurrences (what `--follow` prints).
    ///
    /// ```
    /// use kevents_export::{ExportRecord, history::{EventHistory, HistoryItem}};
    /// let record = ExportRecord { uid: "u".into(), count: 7, delta: 2, ..Default::default() };
    /// let t = kevents_core::Time::from_unix_secs(1);
    /// let e = EventHistory::of(&HistoryItem { sequence: 3, stored: t, at: t, record });
    /// assert_eq!((e.count, e.occurrences, e.records), (7, 2, 1));
    /// ```
    pub fn of(item: &HistoryItem) -> Self {
        let r = &item.record;
        EventHistory {
            uid: r.uid.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            api: r.api.clone(),
            regarding: r.regarding.clone(),
            reason: r.reason.clone(),
            type_: r.type_.clone(),
            note: r.note.clone(),
            reporting_controller: r.reporting_controller.clone(),
            reporting_instance: r.reporting_instance.clone(),
            first_time: r.first_time.clone(),
            last_time: r.last_time.clone(),
            count: r.count,
            occurrences: r.delta,
            records: 1,
            last_seen: item.at,
        }
    }
}

/// A window's events, one entry per event (at most [`HistoryQuery::max_events`]).
///
/// ```
/// use kevents_export::{ExportRecord, history::{HistoryItem, HistoryTable}};
/// let mut table = HistoryTable::new(10);
/// for (count, delta, secs) in [(3, 3, 1), (5, 2, 2)] {
///     let record = ExportRecord { uid: "u".into(), count, delta, ..Default::default() };
///     let t = kevents_core::Time::from_unix_secs(secs);
///     table.add(HistoryItem { sequence: secs as u64, stored: t, at: t, record }).unwrap();
/// }
/// let events = table.into_events();
/// assert_eq!((events[0].count, events[0].occurrences), (5, 5));
/// ```
#[derive(Debug, Default)]
pub struct HistoryTable {
    events: HashMap<String, EventHistory>,
    max_events: usize,
}

impl HistoryTable {
    /// An empty table of at most `max_events` events.
    pub fn new(max_events: usize) -> Self {
        HistoryTable {
            events: HashMap::new(),
            max_events,
        }
    }

    /// Adds a record: its delta to its event's occurrences; its fields and count as the
    /// event's when it is the latest (records of an event are read in their order).
    pub fn add(&mut self, item: HistoryItem) -> Result<(), ExportError> {
        if let Some(e) = self.events.get_mut(&item.record.uid) {
            let occurrences = e.occurrences + item.record.delta;
            let records = e.records + 1;
            let (last_seen, last_time) = if item.at >= e.last_seen {
                (item.at, item.record.last_time.clone())
            } else {
                (e.last_seen, e.last_time.clone())
            };
            *e = EventHistory {
                occurrences,
                records,
                last_seen,
                last_time,
                ..EventHistory::of(&item)
            };
            return Ok(());
        }
        if self.events.len() >= self.max_events {
            return Err(ExportError::Read(format!(
                "more than {} events in the window: narrow it (a namespace, --for, --reason, a shorter window)",
                self.max_events
            )));
        }
        self.events
            .insert(item.record.uid.clone(), EventHistory::of(&item));
        Ok(())
    }

    /// How many events it holds.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The events, oldest last occurrence first (as `kubectl events` lists them).
    pub fn into_events(self) -> Vec<EventHistory> {
        let mut events: Vec<_> = self.events.into_values().collect();
        events.sort_by(|a, b| {
            (a.last_seen, &a.namespace, &a.uid).cmp(&(b.last_seen, &b.namespace, &b.uid))
        });
        events
    }
}

/// The window's events ([`HistoryReader`] into a [`HistoryTable`]).
pub async fn read_window(
    context: &jetstream::Context,
    query: &HistoryQuery,
) -> Result<Vec<EventHistory>, ExportError> {
    let mut table = HistoryTable::new(query.max_events);
    let mut reader = HistoryReader::open(context, query.clone(), false).await?;
    while let Some(read) = reader.next().await? {
        if let HistoryRead::Record(item) = read {
            table.add(*item)?;
        }
    }
    Ok(table.into_events())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Time {
        Time::from_unix_secs(secs)
    }

    #[test]
    fn a_message_proves_earlier_ones_out_only_with_the_margins() {
        let q = HistoryQuery::new("export", t(100_000));
        // Stored well before: out.
        assert!(q.all_before(t(100_000 - 121), None));
        // Stored within the skew: maybe in.
        assert!(!q.all_before(t(100_000 - 119), None));
        // Stored late, but its lastTime is more than lag + 2 skews before the window.
        assert!(q.all_before(t(200_000), Some(t(100_000 - 3600 - 241))));
        assert!(!q.all_before(t(200_000), Some(t(100_000 - 3600 - 239))));
        let q = HistoryQuery {
            to: Some(t(100_000)),
            ..q
        };
        assert!(q.all_after(t(100_000 + 3600 + 241)));
        assert!(!q.all_after(t(100_000 + 3600 + 239)));
    }

    #[test]
    fn kinds_match_as_kubectl_names_them() {
        let pod = Regarding {
            kind: "Pod".into(),
            name: "web-1".into(),
            ..Default::default()
        };
        for given in ["pod/web-1", "Pod/web-1", "pods/web-1", "po/web-1"] {
            assert!(ObjectFilter::parse(given).unwrap().matches(&pod), "{given}");
        }
        for given in ["pod/web-2", "node/web-1", "pod/web"] {
            assert!(
                !ObjectFilter::parse(given).unwrap().matches(&pod),
                "{given}"
            );
        }
        let ingress = Regarding {
            kind: "Ingress".into(),
            name: "i".into(),
            ..Default::default()
        };
        assert!(
            ObjectFilter::parse("ingresses/i")
                .unwrap()
                .matches(&ingress)
        );
        assert!(
            ObjectFilter::parse("ingress.networking.k8s.io/i")
                .unwrap()
                .matches(&ingress)
        );
        for bad in ["", "/", "pod/", "/web", "pod", "pod/a/b"] {
            assert!(ObjectFilter::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_table_sums_deltas_in_the_window_and_keeps_the_last_count() {
        let mut table = HistoryTable::new(2);
        let item = |uid: &str, count, delta, secs| HistoryItem {
            sequence: secs as u64,
            stored: t(secs),
            at: t(secs),
            record: ExportRecord {
                uid: uid.into(),
                count,
                delta,
                note: format!("n{count}"),
                ..Default::default()
            },
        };
        table.add(item("a", 4, 1, 10)).unwrap();
        table.add(item("b", 1, 1, 11)).unwrap();
        table.add(item("a", 9, 5, 12)).unwrap();
        assert!(table.add(item("c", 1, 1, 13)).is_err(), "a third event");
        let events = table.into_events();
        assert_eq!(events[0].uid, "b");
        let a = &events[1];
        assert_eq!((a.count, a.occurrences, a.records), (9, 6, 2));
        assert_eq!(a.note, "n9");
        assert_eq!(a.last_seen, t(12));
    }
}
