//! `kevents replay --api events.k8s.io/v1`: a trace of `events.k8s.io/v1` occurrences and
//! control lines (the format of the client-go 1.36 harness's `-mode series`,
//! docs/replay-format.md) driven through kevents' own [`SeriesCache`], the state machine the
//! pipeline's series chain uses, on a virtual clock, writing to the in-memory apiserver.
//! Prints one line per sink call (`i`, `verb`, `namespace`, `name`, `body`, `series`,
//! `result`, `tick`).

use std::io::{BufRead, Write as IoWrite};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use kevents_core::events_v1::{
    ClusterScopedNamespace, Event, NotePolicy, Reporter, SeriesCache, SeriesOptions, Step, Write,
    WriteReason,
};
use kevents_core::{ObjectReference, SinkError, Stored, Time};

use super::{ReplayError, drive, parse_line, write_decision};
use crate::memory::MemoryApiServer;

pub use super::gofmt::go_sprintf_no_args;

/// client-go's `finishTime` loop period (6 min), in nanoseconds.
const FINISH_PERIOD: i64 = 6 * 60 * 1_000_000_000;
/// client-go's `refreshTime` loop period (30 min), in nanoseconds.
const REFRESH_PERIOD: i64 = 30 * 60 * 1_000_000_000;

/// When the refresh and finish loops run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ticks {
    /// Only `tick` lines run them (the default).
    #[default]
    Manual,
    /// Also on client-go's schedule: both at the first line's time `T0`, then every 30 min
    /// (refresh) and 6 min (finish) after it; due runs come before the line that reaches
    /// them, finish before refresh at the same instant.
    Auto,
}

/// Options of a series replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesReplayOptions {
    /// When the loops run.
    pub ticks: Ticks,
    /// Also print input lines (and automatic loop runs) that wrote nothing, with a `why`.
    pub all: bool,
    /// Host part of the default `reportingInstance` (`<controller>-<hostname>`).
    pub hostname: String,
}

impl Default for SeriesReplayOptions {
    fn default() -> Self {
        SeriesReplayOptions {
            ticks: Ticks::Manual,
            all: false,
            hostname: "oracle-host".to_owned(),
        }
    }
}

/// One input line (an occurrence or a control line).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SeriesLine {
    time: Option<i64>,
    regarding: Option<ObjectReference>,
    related: Option<ObjectReference>,
    #[serde(rename = "type")]
    type_: Option<String>,
    reason: Option<String>,
    action: Option<String>,
    note: Option<String>,
    reporting_controller: Option<String>,
    reporting_instance: Option<String>,
    tick: Option<TickKind>,
    delete: Option<Delete>,
    shutdown: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum TickKind {
    Refresh,
    Finish,
}

impl TickKind {
    fn as_str(self) -> &'static str {
        match self {
            TickKind::Refresh => "refresh",
            TickKind::Finish => "finish",
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Delete {
    namespace: String,
    name: String,
}

/// What a line asks for, once its shape is checked.
enum Kind {
    Occurrence,
    Tick(TickKind),
    Delete(Delete),
    Shutdown,
    ClockMove,
}

impl SeriesLine {
    fn kind(&self, line: usize) -> Result<Kind, ReplayError> {
        let bad = |message: &str| ReplayError::Series {
            line,
            message: message.to_owned(),
        };
        let occurrence_fields = self.related.is_some()
            || self.type_.is_some()
            || self.reason.is_some()
            || self.action.is_some()
            || self.note.is_some()
            || self.reporting_controller.is_some()
            || self.reporting_instance.is_some();
        let controls = [
            self.regarding.is_some(),
            self.tick.is_some(),
            self.delete.is_some(),
            self.shutdown.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count();
        if controls > 1 {
            return Err(bad(
                "a line is one of an occurrence (\"regarding\"), \"tick\", \"delete\" or \"shutdown\", not several",
            ));
        }
        if occurrence_fields && self.regarding.is_none() {
            return Err(bad("an occurrence needs \"regarding\""));
        }
        if self.regarding.is_some() {
            if self.time.is_none() {
                return Err(bad("an occurrence needs \"time\""));
            }
            return Ok(Kind::Occurrence);
        }
        if let Some(t) = self.tick {
            return Ok(Kind::Tick(t));
        }
        if let Some(d) = &self.delete {
            return Ok(Kind::Delete(d.clone()));
        }
        match self.shutdown {
            Some(true) => Ok(Kind::Shutdown),
            Some(false) => Err(bad("\"shutdown\" must be true")),
            None if self.time.is_some() => Ok(Kind::ClockMove),
            None => Err(bad(
                "needs \"regarding\", \"tick\", \"delete\", \"shutdown\" or at least \"time\"",
            )),
        }
    }
}

/// Replays series traces: see the module docs.
///
/// ```
/// use kevents_sim::replay::series::{SeriesReplayOptions, SeriesReplayer};
/// let trace = br#"{"time": 1700000000000000000, "regarding": {"kind": "Pod", "namespace": "ns", "name": "p"}, "type": "Normal", "reason": "R", "action": "A", "note": "n", "reportingController": "c"}
/// {"time": 1700000001000000000, "regarding": {"kind": "Pod", "namespace": "ns", "name": "p"}, "type": "Normal", "reason": "R", "action": "A", "note": "n", "reportingController": "c"}
/// "#;
/// let mut out = Vec::new();
/// SeriesReplayer::new(SeriesReplayOptions::default()).replay_trace(&trace[..], &mut out, 1 << 20).unwrap();
/// let lines: Vec<serde_json::Value> = out.split(|b| *b == b'\n').filter(|l| !l.is_empty())
///     .map(|l| serde_json::from_slice(l).unwrap()).collect();
/// assert_eq!(lines[0]["verb"], "create");
/// assert_eq!(lines[0]["body"]["reportingInstance"], "c-oracle-host");
/// assert_eq!(lines[1]["verb"], "patch");
/// assert_eq!(lines[1]["body"]["series"]["count"], 2);
/// ```
#[derive(Debug)]
pub struct SeriesReplayer {
    opts: SeriesReplayOptions,
    cache: SeriesCache,
    api: MemoryApiServer,
    /// Index of the current input line (0-based, blank lines not counted).
    index: usize,
    now: Option<i64>,
    /// Next automatic runs of the finish and refresh loops (`Ticks::Auto`).
    next_finish: Option<i64>,
    next_refresh: Option<i64>,
    shut_down: bool,
}

impl SeriesReplayer {
    /// A replayer with an empty series cache (client-go's: unbounded, final PATCH of every
    /// idle series) and an empty in-memory apiserver.
    pub fn new(opts: SeriesReplayOptions) -> Self {
        let cache = SeriesCache::new(SeriesOptions {
            max_entries: usize::MAX,
            rewrite_on_finish: true,
            ..SeriesOptions::default()
        });
        SeriesReplayer {
            opts,
            cache,
            api: MemoryApiServer::new(),
            index: 0,
            now: None,
            next_finish: None,
            next_refresh: None,
            shut_down: false,
        }
    }

    /// The in-memory apiserver the replay writes to.
    pub fn apiserver(&self) -> &MemoryApiServer {
        &self.api
    }

    /// Reads a series trace from `input` and writes one line per sink call to `out`
    /// (input handling and errors as [`Replayer::replay_trace`](super::Replayer::replay_trace)).
    /// Returns the number of lines written.
    pub fn replay_trace<R: BufRead, W: IoWrite>(
        &mut self,
        input: R,
        out: W,
        max_line_bytes: usize,
    ) -> Result<u64, ReplayError> {
        drive(
            input,
            out,
            max_line_bytes,
            |number, line: SeriesLine, out| {
                let rows = self.replay_parsed(number, line)?;
                for row in &rows {
                    write_decision(out, row)?;
                }
                Ok(rows.len() as u64)
            },
        )
    }

    /// Replays one line that is line `number` (1-based) of the input; returns its output
    /// lines (those of automatic loop runs it reached first included).
    pub fn replay_numbered(
        &mut self,
        number: usize,
        text: &str,
    ) -> Result<Vec<Value>, ReplayError> {
        self.replay_parsed(number, parse_line(number, text)?)
    }

    /// Replays line `number`, parsed.
    fn replay_parsed(
        &mut self,
        number: usize,
        line: SeriesLine,
    ) -> Result<Vec<Value>, ReplayError> {
        let kind = line.kind(number)?;
        if let (Some(t), Some(previous)) = (line.time, self.now)
            && t < previous
        {
            return Err(ReplayError::TimeWentBack {
                line: number,
                time: t,
                previous,
            });
        }
        let mut rows = Vec::new();
        if let Some(t) = line.time {
            self.auto_ticks_until(t, &mut rows);
            self.now = Some(t);
        }
        let now = Time::from_unix_nanos(self.now.unwrap_or(0));
        match kind {
            Kind::Occurrence => self.occurrence(line, now, &mut rows),
            Kind::Tick(tick) => {
                if self.shut_down {
                    self.none(&mut rows, "after shutdown: the loops are stopped");
                } else {
                    self.run_tick(tick, now, &mut rows);
                }
            }
            Kind::Delete(d) => {
                let existed = self.api.delete(&d.namespace, &d.name);
                let why = format!(
                    "deleted {}/{} on the server ({})",
                    d.namespace,
                    d.name,
                    if existed {
                        "it existed"
                    } else {
                        "it did not exist"
                    }
                );
                self.none(&mut rows, &why);
            }
            Kind::Shutdown => {
                // client-go's Shutdown writes nothing; the pipeline's flush is an improvement
                // (docs/compatibility.md).
                self.shut_down = true;
                self.none(
                    &mut rows,
                    "shutdown: later occurrences refused, loops stopped",
                );
            }
            Kind::ClockMove => self.none(&mut rows, "clock moved"),
        }
        self.index += 1;
        Ok(rows)
    }

    /// Runs the automatic loop passes due at or before `t` (client-go's
    /// `wait.UntilWithContext` schedule in virtual time).
    fn auto_ticks_until(&mut self, t: i64, rows: &mut Vec<Value>) {
        if self.opts.ticks != Ticks::Auto || self.shut_down {
            return;
        }
        if self.next_finish.is_none() {
            self.next_finish = Some(t);
            self.next_refresh = Some(t);
        }
        loop {
            let (Some(f), Some(r)) = (self.next_finish, self.next_refresh) else {
                return;
            };
            let (at, tick) = if f <= r {
                (f, TickKind::Finish)
            } else {
                (r, TickKind::Refresh)
            };
            if at > t {
                return;
            }
            self.now = Some(at);
            self.run_tick(tick, Time::from_unix_nanos(at), rows);
            match tick {
                TickKind::Finish => self.next_finish = Some(f.saturating_add(FINISH_PERIOD)),
                TickKind::Refresh => self.next_refresh = Some(r.saturating_add(REFRESH_PERIOD)),
            }
        }
    }

    fn run_tick(&mut self, tick: TickKind, now: Time, rows: &mut Vec<Value>) {
        let before = self.cache.len();
        let mut writes = match tick {
            TickKind::Refresh => self.cache.heartbeat_all(now),
            TickKind::Finish => self.cache.finish_idle(now),
        };
        let dropped = before - self.cache.len();
        if writes.is_empty() {
            let why = format!(
                "{}: nothing to write, {dropped} entries dropped from the cache",
                tick.as_str()
            );
            self.none(rows, &why);
            return;
        }
        // client-go walks its cache in Go's random map order; the harness prints a pass's
        // writes by namespace and name.
        writes.sort_by(|a, b| {
            let (a, b) = (&a.event().metadata, &b.event().metadata);
            (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name))
        });
        for w in writes {
            self.send(w, Some(tick), rows);
        }
    }

    fn occurrence(&mut self, line: SeriesLine, now: Time, rows: &mut Vec<Value>) {
        if self.shut_down {
            self.none(rows, "after shutdown: refused by the broadcaster");
            return;
        }
        let controller = line.reporting_controller.unwrap_or_default();
        let instance = line
            .reporting_instance
            .unwrap_or_else(|| format!("{controller}-{}", self.opts.hostname));
        let factory = kevents_core::events_v1::EventFactory {
            reporter: Reporter::with_instance(controller, instance),
            cluster_scoped_namespace: ClusterScopedNamespace::Default,
            note_policy: NotePolicy::Reject,
            ..kevents_core::events_v1::EventFactory::default()
        };
        let event_type = line.type_.unwrap_or_default();
        if event_type != "Normal" && event_type != "Warning" {
            // client-go's Eventf logs and drops an unsupported type.
            self.none(rows, "invalid type: not Normal or Warning, dropped");
            return;
        }
        let occ = kevents_core::events_v1::Occurrence {
            regarding: line.regarding.unwrap_or_default(),
            related: line.related,
            event_type,
            reason: line.reason.unwrap_or_default(),
            action: line.action.unwrap_or_default(),
            note: go_sprintf_no_args(&line.note.unwrap_or_default()),
            annotations: Default::default(),
        };
        let event = match factory.make(now, occ) {
            Ok(e) => e,
            Err(e) => {
                let why = format!("refused by kevents before sending: {e}");
                self.none(rows, &why);
                return;
            }
        };
        let probe = event.clone();
        let observed = self.cache.observe(event, now);
        if observed.write.is_none() && observed.evicted.is_none() {
            let count = self.cache.series_of(&probe).map_or(0, |s| s.count);
            let why = format!(
                "series count {} -> {count} in the cache, not written",
                count - 1
            );
            self.none(rows, &why);
            return;
        }
        for w in observed {
            self.send(w, None, rows);
        }
    }

    /// Sends one write (and the CREATE a PATCH answered 404 leads to), one row each.
    fn send(&mut self, write: Write, tick: Option<TickKind>, rows: &mut Vec<Value>) {
        let result = self.api.send_now_events_v1(&write);
        rows.push(self.row(&write, &result, tick));
        if self.cache.on_write_result(&write, &result) == Step::Recreate {
            let create = write.recreate();
            let result = self.api.send_now_events_v1(&create);
            rows.push(self.row(&create, &result, tick));
            self.cache.on_write_result(&create, &result);
        }
    }

    fn row(
        &self,
        write: &Write,
        result: &Result<Stored<Event>, SinkError>,
        tick: Option<TickKind>,
    ) -> Value {
        let event = write.event();
        let (verb, body) = match write {
            Write::Create { event, .. } => ("create", body_of(event)),
            Write::Patch { patch, .. } => (
                "patch",
                serde_json::from_slice(patch).unwrap_or(Value::Null),
            ),
        };
        let series = event
            .series
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or(Value::Null);
        let result = match result {
            Ok(_) => "ok".to_owned(),
            Err(e) if e.is_not_found() => "notfound".to_owned(),
            Err(e) if e.is_already_exists() => "conflict".to_owned(),
            Err(e) => format!("error: {e}"),
        };
        let mut m = Map::new();
        m.insert("i".into(), json!(self.index));
        m.insert("verb".into(), json!(verb));
        m.insert("namespace".into(), json!(event.metadata.namespace));
        m.insert("name".into(), json!(event.metadata.name));
        m.insert("body".into(), body);
        m.insert("series".into(), series);
        m.insert("result".into(), json!(result));
        if let Some(t) = tick {
            m.insert("tick".into(), json!(t.as_str()));
        }
        if write.reason() == WriteReason::Evicted {
            m.insert("evicted".into(), json!(true));
        }
        Value::Object(m)
    }

    fn none(&self, rows: &mut Vec<Value>, why: &str) {
        if self.opts.all {
            rows.push(json!({"i": self.index, "verb": "none", "series": null, "why": why}));
        }
    }
}

/// The event as the typed client's Create receives it, as JSON (no `apiVersion`/`kind`,
/// which the client adds on the wire).
///
/// A zero `creationTimestamp` is left out, as client-go 1.36 marshals it (apimachinery's
/// `omitzero`); kevents' wire JSON keeps 1.20's `"creationTimestamp":null`, which the
/// apiserver reads the same (docs/compatibility.md).
fn body_of(event: &Event) -> Value {
    let mut v = serde_json::to_value(event).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.remove("kind");
        m.remove("apiVersion");
        if let Some(Value::Object(meta)) = m.get_mut("metadata")
            && meta.get("creationTimestamp") == Some(&Value::Null)
        {
            meta.remove("creationTimestamp");
        }
    }
    v
}
