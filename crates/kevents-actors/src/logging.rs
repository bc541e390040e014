//! The built-in logging watcher: client-go's `StartLogging` / `StartStructuredLogging`
//! lines for core/v1 events, and the same for events.k8s.io/v1 events.

use std::fmt::Write as _;

use actix::prelude::*;
use kevents_core::Event;
use kevents_core::events_v1::Event as EventV1;

use crate::message::{EventMessage, core_repeat, v1_repeat};

/// Which lines the [`LoggingWatcher`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogStyle {
    /// client-go's `StartStructuredLogging`: message `Event occurred` with the fields
    /// `object` (namespace/name), `fieldPath`, `kind`, `apiVersion`, `type`, `reason`,
    /// `msg` (the message; `tracing` reserves the key `message` for the log line itself).
    /// The default.
    #[default]
    Structured,
    /// client-go's `StartLogging` line (see [`client_go_line`]).
    ClientGo,
    /// Both.
    Both,
}

/// A watcher that logs every event through `tracing` (target `kevents::events`, level INFO),
/// like client-go's logging watchers. It installs no subscriber: the application decides
/// where logs go.
///
/// ```
/// use actix::prelude::*;
/// use kevents_actors::{EventMessage, LogStyle, LoggingWatcher, Recorded};
/// use kevents_core::Event;
///
/// # actix::System::new().block_on(async {
/// let addr = LoggingWatcher::new(LogStyle::Both).start();
/// addr.send(EventMessage::new(0, Recorded::CoreV1(Event::default()))).await.unwrap();
/// # });
/// ```
#[derive(Debug, Clone, Default)]
pub struct LoggingWatcher {
    style: LogStyle,
}

impl LoggingWatcher {
    /// A logging watcher writing `style` lines.
    pub fn new(style: LogStyle) -> Self {
        LoggingWatcher { style }
    }

    /// Logs one event.
    pub fn log(&self, e: &Event) {
        if matches!(self.style, LogStyle::Structured | LogStyle::Both) {
            let o = &e.involved_object;
            tracing::info!(
                target: "kevents::events",
                object = ?format!("{}/{}", o.namespace, o.name),
                fieldPath = ?o.field_path,
                kind = ?o.kind,
                apiVersion = ?o.api_version,
                r#type = ?e.type_,
                reason = ?e.reason,
                msg = ?e.message,
                "Event occurred"
            );
        }
        if matches!(self.style, LogStyle::ClientGo | LogStyle::Both) {
            tracing::info!(target: "kevents::events", "{}", client_go_line(e));
        }
    }
}

impl Actor for LoggingWatcher {
    type Context = Context<Self>;
}

impl Handler<EventMessage> for LoggingWatcher {
    type Result = ();

    /// Logs the event, and each repeat a coalescing queue merged into it (one line per
    /// occurrence, as client-go).
    fn handle(&mut self, msg: EventMessage, _: &mut Context<Self>) {
        let repeats = msg.repeats();
        if let Some(e) = msg.event() {
            self.log(e);
            if let Some(r) = repeats {
                let repeat = core_repeat(e, r.last);
                for _ in 0..r.more {
                    self.log(&repeat);
                }
            }
        } else if let Some(e) = msg.event_events_v1() {
            log_v1(self.style, e);
            if let Some(r) = repeats {
                let repeat = v1_repeat(e, r.last);
                for _ in 0..r.more {
                    log_v1(self.style, &repeat);
                }
            }
        }
    }
}

/// Logs one `events.k8s.io/v1` event in `style`.
fn log_v1(style: LogStyle, e: &EventV1) {
    let r = &e.regarding;
    if matches!(style, LogStyle::Structured | LogStyle::Both) {
        let related = e
            .related
            .as_ref()
            .map(|o| format!("{}/{}/{}", o.kind, o.namespace, o.name))
            .unwrap_or_default();
        tracing::info!(
            target: "kevents::events",
            api = "events.k8s.io/v1",
            regarding = ?format!("{}/{}", r.namespace, r.name),
            kind = ?r.kind,
            related = ?related,
            r#type = ?e.type_,
            reason = ?e.reason,
            action = ?e.action,
            reportingController = ?e.reporting_controller,
            reportingInstance = ?e.reporting_instance,
            note = ?e.note,
            "Event occurred"
        );
    }
    if matches!(style, LogStyle::ClientGo | LogStyle::Both) {
        let mut s = String::with_capacity(128 + e.note.len());
        let _ = write!(
            s,
            "Event({}/{} {}/{}): type: '{}' reason: '{}' action: '{}' {}",
            r.api_version, r.kind, r.namespace, r.name, e.type_, e.reason, e.action, e.note
        );
        tracing::info!(target: "kevents::events", "{s}");
    }
}

/// client-go's `StartLogging` line (`tools/record/event.go`):
/// `Event(v1.ObjectReference{Kind:"Pod", ...}): type: 'Normal' reason: 'Started' <message>`.
///
/// ```
/// use kevents_actors::client_go_line;
/// use kevents_core::{Event, ObjectReference};
/// let mut e = Event::default();
/// e.involved_object = ObjectReference::new("v1", "Pod", "baz", "foo")
///     .with_uid("bar").with_field_path("spec.containers[2]");
/// e.type_ = "Normal".into();
/// e.reason = "Started".into();
/// e.message = "some verbose message: 1".into();
/// assert_eq!(client_go_line(&e), concat!(
///     r#"Event(v1.ObjectReference{Kind:"Pod", Namespace:"baz", Name:"foo", UID:"bar", "#,
///     r#"APIVersion:"v1", ResourceVersion:"", FieldPath:"spec.containers[2]"}): "#,
///     "type: 'Normal' reason: 'Started' some verbose message: 1"));
/// ```
pub fn client_go_line(e: &Event) -> String {
    let o = &e.involved_object;
    let mut s = String::with_capacity(160 + e.message.len());
    s.push_str("Event(v1.ObjectReference{Kind:");
    go_quote(&mut s, &o.kind);
    s.push_str(", Namespace:");
    go_quote(&mut s, &o.namespace);
    s.push_str(", Name:");
    go_quote(&mut s, &o.name);
    s.push_str(", UID:");
    go_quote(&mut s, &o.uid);
    s.push_str(", APIVersion:");
    go_quote(&mut s, &o.api_version);
    s.push_str(", ResourceVersion:");
    go_quote(&mut s, &o.resource_version);
    s.push_str(", FieldPath:");
    go_quote(&mut s, &o.field_path);
    let _ = write!(
        s,
        "}}): type: '{}' reason: '{}' {}",
        e.type_, e.reason, e.message
    );
    s
}

/// Go's `%#v` of a string (`strconv.Quote`), for the characters that occur in practice.
fn go_quote(out: &mut String, v: &str) {
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
