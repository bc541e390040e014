//! Replaying recorded occurrences through the core/v1 correlation path with a virtual clock
//! and an in-memory apiserver (the `kevents replay` command; format in
//! `docs/replay-format.md`).

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use serde::Deserialize;
use serde_json::{Map, Value, json};
use thiserror::Error;

use kevents_core::core_v1::correlator::{Correlator, CorrelatorOptions};
use kevents_core::{
    Event, EventFactory, EventSource, InvalidEvent, Naming, ObjectReference, Occurrence, Time,
    VirtualClock, WriteKind, write_event,
};

use crate::memory::MemoryApiServer;

/// One input line: an occurrence or a server-side deletion.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceLine {
    /// Unix time in nanoseconds.
    pub time: i64,
    /// Reporting source.
    #[serde(default)]
    pub source: EventSource,
    /// Involved object.
    #[serde(default)]
    pub object: Option<ObjectReference>,
    /// Event type.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Reason.
    #[serde(default)]
    pub reason: String,
    /// Message.
    #[serde(default)]
    pub message: String,
    /// Annotations (optional).
    #[serde(default)]
    pub annotations: std::collections::BTreeMap<String, String>,
    /// A deletion instead of an occurrence.
    #[serde(default)]
    pub delete: Option<DeleteLine>,
}

/// A server-side deletion.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteLine {
    /// Namespace of the event.
    pub namespace: String,
    /// Name of the event.
    pub name: String,
}

/// A line that could not be replayed.
#[derive(Debug, Error)]
pub enum ReplayError {
    /// Not valid JSON or not a trace line.
    #[error("line {line}: {source}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// Neither `object` nor `delete` was given.
    #[error("line {0}: needs either \"object\" or \"delete\"")]
    Shape(usize),
    /// Time went backwards.
    #[error("line {line}: time {time} is before the previous line's {previous}")]
    TimeWentBack {
        /// 1-based line number.
        line: usize,
        /// This line's time.
        time: i64,
        /// The previous line's time.
        previous: i64,
    },
}

/// Replays trace lines one at a time and returns the decision for each.
///
/// ```
/// use kevents_sim::replay::Replayer;
/// use kevents_core::core_v1::correlator::CorrelatorOptions;
/// let mut r = Replayer::new(CorrelatorOptions::default());
/// let line = r#"{"time": 1700000000000000000, "source": {"component": "kubelet"},
///   "object": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "web-1"},
///   "type": "Warning", "reason": "BackOff", "message": "Back-off"}"#;
/// let out = r.replay_line(line).unwrap();
/// assert_eq!(out["action"], "create");
/// assert_eq!(out["name"], "web-1.17979cfe362a0000");
/// assert_eq!(out["firstTimestamp"], "2023-11-14T22:13:20Z");
/// ```
pub struct Replayer {
    clock: VirtualClock,
    correlator: Correlator,
    api: MemoryApiServer,
    line: usize,
    last_time: Option<i64>,
}

impl std::fmt::Debug for Replayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replayer")
            .field("line", &self.line)
            .finish_non_exhaustive()
    }
}

impl Replayer {
    /// A replayer with these correlator options (its clock is replaced by the virtual one).
    pub fn new(mut options: CorrelatorOptions) -> Self {
        let clock = VirtualClock::new(Time::UNIX_EPOCH);
        options.clock = Some(Arc::new(clock.clone()));
        Replayer {
            clock,
            correlator: Correlator::new(options),
            api: MemoryApiServer::new(),
            line: 0,
            last_time: None,
        }
    }

    /// The in-memory apiserver the replay writes to.
    pub fn apiserver(&self) -> &MemoryApiServer {
        &self.api
    }

    /// Parses and replays one JSON line, returning its output object.
    pub fn replay_line(&mut self, line: &str) -> Result<Value, ReplayError> {
        let n = self.line + 1;
        let parsed: TraceLine =
            serde_json::from_str(line).map_err(|source| ReplayError::Parse { line: n, source })?;
        self.replay(parsed)
    }

    /// Replays one parsed line.
    pub fn replay(&mut self, line: TraceLine) -> Result<Value, ReplayError> {
        let n = self.line + 1;
        if let Some(previous) = self.last_time
            && line.time < previous
        {
            return Err(ReplayError::TimeWentBack {
                line: n,
                time: line.time,
                previous,
            });
        }
        if line.delete.is_none() && line.object.is_none() {
            return Err(ReplayError::Shape(n));
        }
        let i = self.line;
        self.line += 1;
        self.last_time = Some(line.time);
        let now = Time::from_unix_nanos(line.time);
        self.clock.set(now);

        if let Some(d) = line.delete {
            self.api.delete(&d.namespace, &d.name);
            return Ok(
                json!({"i": i, "action": "deleted", "namespace": d.namespace, "name": d.name}),
            );
        }
        let factory = EventFactory {
            source: line.source,
            naming: Naming::Legacy,
            reporting_fields: false,
        };
        let occ = Occurrence {
            object: line.object.unwrap_or_default(),
            event_type: line.type_,
            reason: line.reason,
            message: line.message,
            annotations: line.annotations,
        };
        let event = match factory.make(now, occ) {
            Ok(e) => e,
            Err(InvalidEvent::Type(_)) => return Ok(json!({"i": i, "action": "invalid"})),
            Err(e) => return Ok(json!({"i": i, "action": "invalid", "error": e.to_string()})),
        };
        let result = self.correlator.correlate(event);
        if result.skip {
            return Ok(json!({"i": i, "action": "skip"}));
        }
        let mut event = result.event;
        let outcome = block_on(write_event(&self.api, &mut event, result.patch.as_deref()));
        let mut action = outcome.kind.as_str().to_owned();
        match &outcome.result {
            Ok(stored) => self.correlator.update_state(stored),
            Err(e) if e.is_already_exists() => action.push_str("-conflict"),
            Err(e) => action = format!("{action}-error: {e}"),
        }
        let mut out = describe(i, &action, &event);
        if outcome.kind != WriteKind::Create {
            let patch: Value = result
                .patch
                .as_deref()
                .and_then(|p| serde_json::from_slice(p).ok())
                .unwrap_or(Value::Null);
            out.insert("patch".into(), patch);
        }
        Ok(Value::Object(out))
    }
}

fn describe(i: usize, action: &str, e: &Event) -> Map<String, Value> {
    let ts = |t: Option<Time>| t.map_or(Value::Null, |t| Value::String(t.to_rfc3339()));
    let mut m = Map::new();
    m.insert("i".into(), json!(i));
    m.insert("action".into(), json!(action));
    m.insert("namespace".into(), json!(e.metadata.namespace));
    m.insert("name".into(), json!(e.metadata.name));
    m.insert("count".into(), json!(e.count));
    m.insert("type".into(), json!(e.type_));
    m.insert("reason".into(), json!(e.reason));
    m.insert("message".into(), json!(e.message));
    m.insert("firstTimestamp".into(), ts(e.first_timestamp));
    m.insert("lastTimestamp".into(), ts(e.last_timestamp));
    m
}

/// Converts `kubectl get events -o json` output (an `EventList`, or a single `Event`) into
/// trace lines: each stored event of count `n` becomes `n` occurrences, the first at its
/// firstTimestamp, the last at its lastTimestamp, the others spread evenly between them.
/// Lines are ordered by time (stable for equal times).
///
/// ```
/// let list = r#"{"kind":"EventList","items":[{"metadata":{"name":"p.1","namespace":"ns"},
///   "involvedObject":{"kind":"Pod","name":"p","namespace":"ns"},"reason":"BackOff",
///   "message":"m","source":{"component":"kubelet"},"count":3,"type":"Warning",
///   "firstTimestamp":"2023-11-14T22:13:20Z","lastTimestamp":"2023-11-14T22:13:40Z"}]}"#;
/// let lines = kevents_sim::replay::from_kubectl_json(list).unwrap();
/// assert_eq!(lines.len(), 3);
/// assert_eq!(lines[1].time, 1_700_000_010_000_000_000);
/// ```
pub fn from_kubectl_json(input: &str) -> Result<Vec<TraceLine>, serde_json::Error> {
    #[derive(Deserialize)]
    struct List {
        #[serde(default)]
        items: Option<Vec<Event>>,
    }
    let items = match serde_json::from_str::<List>(input)?.items {
        Some(items) => items,
        None => vec![serde_json::from_str::<Event>(input)?],
    };
    let mut lines = Vec::new();
    for e in items {
        let last = e.last_timestamp.or(e.event_time).or(e.first_timestamp);
        let first = e.first_timestamp.or(last);
        let (Some(first), Some(last)) = (first, last) else {
            continue;
        };
        let count = i64::from(e.count.max(1));
        let span = last.nanos_since(first).max(0);
        for k in 0..count {
            let offset = if count == 1 {
                0
            } else {
                (i128::from(span) * i128::from(k) / i128::from(count - 1)) as i64
            };
            lines.push(TraceLine {
                time: first.unix_nanos().saturating_add(offset),
                source: e.source.clone(),
                object: Some(e.involved_object.clone()),
                type_: e.type_.clone(),
                reason: e.reason.clone(),
                message: e.message.clone(),
                annotations: Default::default(),
                delete: None,
            });
        }
    }
    lines.sort_by_key(|l| l.time);
    Ok(lines)
}

/// Drives a future to completion on the current thread (the in-memory apiserver's futures are
/// always ready, so this returns at once for them).
pub fn block_on<F: Future>(fut: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park(),
        }
    }
}
