//! Replaying recorded occurrences through the core/v1 correlation path with a virtual clock
//! and an in-memory apiserver (the `kevents replay` command; format in
//! `docs/replay-format.md`).
//!
//! Input is read as bytes and checked line by line: every error names the physical line of
//! the input (blank lines count), quotes at most a short sanitised excerpt of it, and memory
//! stays bounded by the longest accepted line, whatever the input.

mod excerpt;
mod gofmt;
pub mod kubectl;
mod lines;
mod options;
pub mod series;
mod shape;
mod trace;

use std::future::Future;
use std::io::{self, BufRead, Read, Write};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use serde::de::IgnoredAny;
use serde_json::{Map, Value, json};
use thiserror::Error;

use kevents_core::core_v1::correlator::{Correlator, CorrelatorOptions};
use kevents_core::{
    ClientGoVersion, Event, EventFactory, InvalidEvent, Occurrence, Time, VirtualClock, WriteKind,
    write_event,
};

use crate::memory::MemoryApiServer;

pub use kubectl::{KubectlError, Occurrences};
pub use options::{
    DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_OCCURRENCES, Flag, FlagError, MAX_MAX_LINE_BYTES,
    ReplayOptions, parse_burst, parse_lru, parse_max_events, parse_max_interval,
    parse_max_line_bytes, parse_max_occurrences, parse_qps,
};
pub use trace::{DeleteLine, TraceLine};

/// Input that could not be replayed. Every message names where (the physical 1-based line
/// of the input, blank lines included, or the item of a `kubectl` document) and quotes at most
/// a short sanitised excerpt of the input.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// Not valid JSON or not a trace line.
    #[error("line {line}, column {column}: {message}")]
    Parse {
        /// 1-based line number.
        line: usize,
        /// 1-based column (bytes) on that line.
        column: usize,
        /// The parser's message, sanitised.
        message: String,
    },
    /// Neither `object` nor `delete` was given.
    #[error("line {0}: needs either \"object\" or \"delete\"")]
    Shape(usize),
    /// Both `object` and `delete` were given.
    #[error(
        "line {0}: has both \"object\" and \"delete\"; a line is either an occurrence or a deletion"
    )]
    ObjectAndDelete(usize),
    /// The line is valid JSON but not a JSON object.
    #[error("line {line}: expected a JSON object, got {found}")]
    NotAnObject {
        /// 1-based line number.
        line: usize,
        /// What the line is instead (`an array`, `a string`, ...).
        found: &'static str,
    },
    /// A JSON array inside the line (the format has none).
    #[error(
        "line {line}, column {column}: unexpected array (every value of a line is an object, a string, a number or a boolean)"
    )]
    Array {
        /// 1-based line number.
        line: usize,
        /// 1-based column (bytes) of the `[`.
        column: usize,
    },
    /// A line of the events.k8s.io/v1 series format that cannot be replayed.
    #[error("line {line}: {message}")]
    Series {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
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
    /// A line that is not UTF-8.
    #[error("line {line}, column {column}: not valid UTF-8")]
    NotUtf8 {
        /// 1-based line number.
        line: usize,
        /// 1-based column (bytes) of the first invalid byte.
        column: usize,
    },
    /// The input starts with a UTF-16 byte-order mark.
    #[error(
        "line 1: the input is UTF-16 (it starts with a UTF-16 byte-order mark); replay reads UTF-8"
    )]
    Utf16,
    /// A UTF-8 byte-order mark after the first line.
    #[error("line {line}: a byte-order mark is only accepted at the start of the input")]
    MisplacedBom {
        /// 1-based line number.
        line: usize,
    },
    /// A line longer than the limit (not counting its `\n` or `\r\n`).
    #[error("line {line}: longer than {max} bytes (the limit set by --max-line-bytes)")]
    LineTooLong {
        /// 1-based line number.
        line: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// The input could not be read.
    #[error("reading line {line} of the input")]
    Read {
        /// 1-based line number being read (1 for a whole `kubectl` document).
        line: usize,
        /// The I/O error.
        source: io::Error,
    },
    /// The output could not be written.
    #[error("writing the output")]
    Write(#[source] io::Error),
    /// A `kubectl` document that cannot be replayed.
    #[error(transparent)]
    Kubectl(#[from] KubectlError),
}

impl ReplayError {
    /// The 1-based input line the error is about, when it is about one.
    pub fn line(&self) -> Option<usize> {
        match self {
            ReplayError::Parse { line, .. }
            | ReplayError::TimeWentBack { line, .. }
            | ReplayError::NotUtf8 { line, .. }
            | ReplayError::MisplacedBom { line }
            | ReplayError::LineTooLong { line, .. }
            | ReplayError::Read { line, .. } => Some(*line),
            ReplayError::Shape(line) | ReplayError::ObjectAndDelete(line) => Some(*line),
            ReplayError::NotAnObject { line, .. }
            | ReplayError::Array { line, .. }
            | ReplayError::Series { line, .. } => Some(*line),
            ReplayError::Utf16 => Some(1),
            ReplayError::Write(_) => None,
            ReplayError::Kubectl(e) => e.line(),
        }
    }
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
    client_go: ClientGoVersion,
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
    /// Events are built as the options' client-go release builds them
    /// ([`CorrelatorOptions::client_go`]: names, reporting fields).
    pub fn new(mut options: CorrelatorOptions) -> Self {
        let clock = VirtualClock::new(Time::UNIX_EPOCH);
        options.clock = Some(Arc::new(clock.clone()));
        Replayer {
            clock,
            client_go: options.client_go,
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

    /// Parses and replays one JSON line, returning its output object; errors name it as line
    /// "decisions so far + 1" (see [`replay_numbered`](Self::replay_numbered)).
    pub fn replay_line(&mut self, line: &str) -> Result<Value, ReplayError> {
        self.replay_numbered(self.line + 1, line)
    }

    /// Parses and replays one JSON line that is line `number` (1-based) of the input; errors
    /// name that number.
    pub fn replay_numbered(&mut self, number: usize, line: &str) -> Result<Value, ReplayError> {
        let parsed: TraceLine = parse_line(number, line)?;
        self.replay_at(number, parsed)
    }

    /// Replays one parsed line.
    pub fn replay(&mut self, line: TraceLine) -> Result<Value, ReplayError> {
        self.replay_at(self.line + 1, line)
    }

    /// Reads a trace (JSON Lines) from `input` and writes one decision per occurrence to `out`,
    /// stopping at the first bad line with an error naming its physical line number. Blank lines
    /// are skipped (and counted); a UTF-8 byte-order mark at the very start is skipped; a line
    /// may hold at most `max_line_bytes` bytes besides its `\n` or `\r\n`. Decisions for the
    /// lines before a bad one are written (and `out` flushed) before the error is returned.
    /// Returns the number of decisions written.
    ///
    /// ```
    /// use kevents_sim::replay::{ReplayError, Replayer};
    /// let trace = b"{\"time\": 1, \"object\": {\"name\": \"a\"}, \"type\": \"Normal\"}\n\n{oops\n";
    /// let mut out = Vec::new();
    /// let mut r = Replayer::new(Default::default());
    /// let err = r.replay_trace(&trace[..], &mut out, 1 << 20).unwrap_err();
    /// assert_eq!(err.line(), Some(3));
    /// assert_eq!(err.to_string(), "line 3, column 2: key must be a string");
    /// assert_eq!(out.iter().filter(|b| **b == b'\n').count(), 1);
    /// ```
    pub fn replay_trace<R: BufRead, W: Write>(
        &mut self,
        input: R,
        out: W,
        max_line_bytes: usize,
    ) -> Result<u64, ReplayError> {
        drive(
            input,
            out,
            max_line_bytes,
            |number, line: TraceLine, out| {
                let decision = self.replay_at(number, line)?;
                write_decision(out, &decision)?;
                Ok(1)
            },
        )
    }

    /// Reads `kubectl get events -o json` output from `input` (see [`kubectl::occurrences`]),
    /// checks all of it, then replays its occurrences in time order, writing one decision each
    /// to `out`. A document that fails a check replays nothing. Memory depends on the size of
    /// the document, not on the counts in it. Returns the number of decisions written.
    pub fn replay_kubectl<R: Read, W: Write>(
        &mut self,
        mut input: R,
        mut out: W,
        max_occurrences: u64,
    ) -> Result<u64, ReplayError> {
        let mut doc = Vec::new();
        input
            .read_to_end(&mut doc)
            .map_err(|source| ReplayError::Read { line: 1, source })?;
        let occurrences = kubectl::occurrences(&doc, max_occurrences)?;
        drop(doc);
        let mut written = 0u64;
        let mut result = Ok(());
        for line in occurrences {
            let decision = match self.replay(line) {
                Ok(d) => d,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            if let Err(e) = write_decision(&mut out, &decision) {
                result = Err(e);
                break;
            }
            written += 1;
        }
        finish(result, out, written)
    }

    fn replay_at(&mut self, n: usize, line: TraceLine) -> Result<Value, ReplayError> {
        if let Some(previous) = self.last_time
            && line.time < previous
        {
            return Err(ReplayError::TimeWentBack {
                line: n,
                time: line.time,
                previous,
            });
        }
        match (&line.delete, &line.object) {
            (None, None) => return Err(ReplayError::Shape(n)),
            (Some(_), Some(_)) => return Err(ReplayError::ObjectAndDelete(n)),
            _ => {}
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
        let factory = EventFactory::for_client_go(line.source, self.client_go);
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
        if let Some(stored) = outcome.stored_event(&event) {
            self.correlator.update_state(&stored);
        }
        match &outcome.result {
            Ok(_) => {}
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

/// Parses line `number` as a `T`, refusing anything that is not a JSON object of the
/// documented shape (serde alone would take a struct given as an array).
pub(crate) fn parse_line<T: serde::de::DeserializeOwned>(
    number: usize,
    line: &str,
) -> Result<T, ReplayError> {
    let parsed = serde_json::from_str(line).map_err(|e| ReplayError::Parse {
        line: number,
        column: e.column(),
        message: excerpt::json_message(&e),
    });
    // Valid JSON of the wrong shape gets the shape's message, not serde's.
    let wrong_shape = match shape::check(line) {
        Ok(()) => return parsed,
        Err(e) if parsed.is_ok() || serde_json::from_str::<IgnoredAny>(line).is_ok() => e,
        Err(_) => return parsed,
    };
    Err(match wrong_shape {
        shape::ShapeError::NotAnObject(found) => ReplayError::NotAnObject {
            line: number,
            found,
        },
        shape::ShapeError::Array(column) => ReplayError::Array {
            line: number,
            column,
        },
    })
}

/// A line buffer that grew past this is freed once its line is parsed, before the line is
/// replayed: a long line is not held twice (its bytes and its parsed strings) while the
/// correlator and the in-memory apiserver copy its message.
const RETAINED_LINE_BYTES: usize = 1 << 20;

/// Reads JSON Lines from `input`, parses each non-blank line as a `T` ([`parse_line`]) and
/// hands it (with its 1-based physical number) to `per_line`, which writes its output to
/// `out` and says how many lines it wrote; stops at the first bad line. Blank lines are skipped (and counted); a UTF-8
/// byte-order mark at the very start is skipped; a line may hold at most `max_line_bytes`
/// bytes besides its `\n` or `\r\n`. `out` is flushed also after an error, so the output of
/// the lines before a bad one is kept.
pub(crate) fn drive<T: serde::de::DeserializeOwned, R: BufRead, W: Write>(
    mut input: R,
    mut out: W,
    max_line_bytes: usize,
    mut per_line: impl FnMut(usize, T, &mut W) -> Result<u64, ReplayError>,
) -> Result<u64, ReplayError> {
    tracing::debug!(max_line_bytes, "replaying a trace");
    let mut buf = Vec::new();
    let mut number = 0usize;
    let mut written = 0u64;
    let result = loop {
        number += 1;
        match lines::read_line(&mut input, &mut buf, max_line_bytes) {
            Ok(lines::LineRead::Eof) => break Ok(()),
            Ok(lines::LineRead::Line) => {}
            Ok(lines::LineRead::TooLong) => {
                break Err(ReplayError::LineTooLong {
                    line: number,
                    max: max_line_bytes,
                });
            }
            Err(source) => {
                break Err(ReplayError::Read {
                    line: number,
                    source,
                });
            }
        }
        let mut bytes = buf.as_slice();
        if number == 1 {
            if bytes.starts_with(b"\xff\xfe") || bytes.starts_with(b"\xfe\xff") {
                break Err(ReplayError::Utf16);
            }
            bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
        } else if bytes.starts_with(b"\xef\xbb\xbf") {
            break Err(ReplayError::MisplacedBom { line: number });
        }
        let text = match std::str::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                break Err(ReplayError::NotUtf8 {
                    line: number,
                    column: e.valid_up_to() + 1,
                });
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let parsed = match parse_line::<T>(number, text) {
            Ok(p) => p,
            Err(e) => break Err(e),
        };
        if buf.capacity() > RETAINED_LINE_BYTES {
            buf = Vec::new();
        }
        match per_line(number, parsed, &mut out) {
            Ok(n) => written += n,
            Err(e) => break Err(e),
        }
    };
    finish(result, out, written)
}

pub(crate) fn write_decision<W: Write>(out: &mut W, decision: &Value) -> Result<(), ReplayError> {
    serde_json::to_writer(&mut *out, decision)
        .map_err(io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(ReplayError::Write)
}

/// Flushes `out` (also after an error, so the decisions before a bad line are kept) and
/// returns `written` or the first error.
fn finish<W: Write>(
    result: Result<(), ReplayError>,
    mut out: W,
    written: u64,
) -> Result<u64, ReplayError> {
    let flushed = out.flush().map_err(ReplayError::Write);
    result?;
    flushed?;
    tracing::debug!(decisions = written, "replay finished");
    Ok(written)
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
