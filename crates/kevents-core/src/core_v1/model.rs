//! The core/v1 `Event` as the apiserver sees it on the wire (`ObjectMeta` and
//! `ObjectReference`, which both APIs use, live in [`crate::meta`] and [`crate::reference`]).
//!
//! These structs are hand-written rather than taken from `k8s-openapi` because the wire form
//! must match client-go byte for byte: `reportingComponent`/`reportingInstance` are always
//! present (`""`), zero timestamps are `null`, `metadata.creationTimestamp` is `null`, and
//! fields appear in Go's struct order (see `docs/dependencies.md`). Conversions from
//! `k8s-openapi` objects live in [`crate::reference`].

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::meta::{ObjectMeta, serde_time};
use crate::reference::ObjectReference;
use crate::time::Time;

/// Who reported an event: `source.component` is what `kubectl describe` shows under "From".
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EventSource {
    /// The reporting component, e.g. `kubelet` or `my-controller`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub component: String,
    /// The host the component runs on.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
}

impl EventSource {
    /// A source with the given component and host.
    pub fn new(component: impl Into<String>, host: impl Into<String>) -> Self {
        EventSource {
            component: component.into(),
            host: host.into(),
        }
    }
}

/// `core/v1` `EventSeries`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EventSeries {
    /// Occurrences in the series.
    #[serde(skip_serializing_if = "is_zero")]
    pub count: i32,
    /// Time of the last occurrence (`MicroTime`).
    #[serde(with = "serde_time::micros")]
    pub last_observed_time: Option<Time>,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// A `core/v1` `Event`, the object `tools/record` creates and patches.
///
/// Serialises exactly like client-go (field order, `null`s, empty strings):
///
/// ```
/// use kevents_core::{Event, EventSource, ObjectReference, Time};
/// let t = Time::parse_rfc3339("2021-01-01T00:00:01Z").unwrap();
/// let mut e = Event::default();
/// e.metadata.name = "foo.1655f29dd1e42f00".into();
/// e.metadata.namespace = "baz".into();
/// e.involved_object = ObjectReference::new("v1", "Pod", "baz", "foo")
///     .with_uid("bar").with_resource_version("12").with_field_path("spec.containers{c}");
/// e.reason = "Started".into();
/// e.message = "hello".into();
/// e.source = EventSource::new("kubelet", "node1");
/// e.first_timestamp = Some(t);
/// e.last_timestamp = Some(t);
/// e.count = 1;
/// e.type_ = "Normal".into();
/// assert_eq!(
///     String::from_utf8(kevents_core::json::to_vec(&e).unwrap()).unwrap(),
///     concat!(
///         r#"{"kind":"Event","apiVersion":"v1","metadata":{"name":"foo.1655f29dd1e42f00","#,
///         r#""namespace":"baz","creationTimestamp":null},"involvedObject":{"kind":"Pod","#,
///         r#""namespace":"baz","name":"foo","uid":"bar","apiVersion":"v1","resourceVersion":"12","#,
///         r#""fieldPath":"spec.containers{c}"},"reason":"Started","message":"hello","#,
///         r#""source":{"component":"kubelet","host":"node1"},"firstTimestamp":"2021-01-01T00:00:01Z","#,
///         r#""lastTimestamp":"2021-01-01T00:00:01Z","count":1,"type":"Normal","eventTime":null,"#,
///         r#""reportingComponent":"","reportingInstance":""}"#
///     )
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Event {
    /// Always `Event` (borrowed, so building an event does not allocate it).
    #[serde(skip_serializing_if = "str::is_empty")]
    pub kind: Cow<'static, str>,
    /// Always `v1`.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub api_version: Cow<'static, str>,
    /// Name, namespace, resourceVersion, annotations.
    pub metadata: ObjectMeta,
    /// The object this event is about.
    pub involved_object: ObjectReference,
    /// Short, machine-understandable reason, e.g. `BackOff`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Reporting component and host.
    pub source: EventSource,
    /// First occurrence (whole seconds on the wire).
    #[serde(with = "serde_time::secs")]
    pub first_timestamp: Option<Time>,
    /// Latest occurrence (whole seconds on the wire).
    #[serde(with = "serde_time::secs")]
    pub last_timestamp: Option<Time>,
    /// Occurrences represented by this object.
    #[serde(skip_serializing_if = "is_zero")]
    pub count: i32,
    /// `Normal` or `Warning`.
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// `MicroTime` of the first observation; `null` for `tools/record` events.
    #[serde(with = "serde_time::micros")]
    pub event_time: Option<Time>,
    /// Series data (unused by `tools/record`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<EventSeries>,
    /// What was done (unused by `tools/record`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub action: String,
    /// A second object (unused by `tools/record`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related: Option<ObjectReference>,
    /// Reporting controller; always on the wire, `""` when unset.
    pub reporting_component: String,
    /// Reporting instance; always on the wire, `""` when unset.
    pub reporting_instance: String,
}

impl Event {
    /// Every field back to [`Event::default`], keeping the strings' buffers, so that an event
    /// can be built again in place without allocating: part of the pipeline's fast form of
    /// [`EventFactory::make`](crate::EventFactory::make) (not part of the public API).
    ///
    pub(crate) fn reset(&mut self) {
        // Destructured, so that a new field cannot be forgotten here.
        let Event {
            kind,
            api_version,
            metadata,
            involved_object,
            reason,
            message,
            source,
            first_timestamp,
            last_timestamp,
            count,
            type_,
            event_time,
            series,
            action,
            related,
            reporting_component,
            reporting_instance,
        } = self;
        *kind = Cow::Borrowed("Event");
        *api_version = Cow::Borrowed("v1");
        metadata.reset();
        crate::reference::ReferenceRef::default().copy_to(involved_object);
        let EventSource { component, host } = source;
        for s in [
            reason,
            message,
            component,
            host,
            type_,
            action,
            reporting_component,
            reporting_instance,
        ] {
            s.clear();
        }
        *first_timestamp = None;
        *last_timestamp = None;
        *count = 0;
        *event_time = None;
        *series = None;
        *related = None;
    }
}

impl Default for Event {
    fn default() -> Self {
        Event {
            kind: Cow::Borrowed("Event"),
            api_version: Cow::Borrowed("v1"),
            metadata: ObjectMeta::default(),
            involved_object: ObjectReference::default(),
            reason: String::new(),
            message: String::new(),
            source: EventSource::default(),
            first_timestamp: None,
            last_timestamp: None,
            count: 0,
            type_: String::new(),
            event_time: None,
            series: None,
            action: String::new(),
            related: None,
            reporting_component: String::new(),
            reporting_instance: String::new(),
        }
    }
}

/// The two event types the API accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Nothing to worry about.
    Normal,
    /// Something may be wrong.
    Warning,
}

impl EventType {
    /// `"Normal"` or `"Warning"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }

    /// Parses exactly `"Normal"` or `"Warning"` (case-sensitive, as client-go's
    /// `ValidateEventType`).
    ///
    /// ```
    /// use kevents_core::EventType;
    /// assert_eq!(EventType::parse("Warning"), Some(EventType::Warning));
    /// assert_eq!(EventType::parse("warning"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Normal" => Some(EventType::Normal),
            "Warning" => Some(EventType::Warning),
            _ => None,
        }
    }
}

impl std::fmt::Display for EventType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_reply_with_unknown_fields_parses() {
        let body = r#"{"kind":"Event","apiVersion":"v1","metadata":{"name":"a.1","namespace":"ns",
            "uid":"x","resourceVersion":"77","creationTimestamp":"2021-01-01T00:00:00Z",
            "managedFields":[{"manager":"m"}]},"involvedObject":{"kind":"Pod"},
            "firstTimestamp":"2021-01-01T00:00:01Z","lastTimestamp":null,"count":3,
            "eventTime":null,"reportingComponent":"","reportingInstance":""}"#;
        let e: Event = serde_json::from_str(body).unwrap();
        assert_eq!(e.metadata.resource_version, "77");
        assert_eq!(e.count, 3);
        assert_eq!(e.last_timestamp, None);
        assert_eq!(
            e.first_timestamp.unwrap().to_rfc3339(),
            "2021-01-01T00:00:01Z"
        );
    }

    #[test]
    fn empty_event_serialises_like_go() {
        let e = Event::default();
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"kind":"Event","apiVersion":"v1","metadata":{"creationTimestamp":null},"involvedObject":{},"source":{},"firstTimestamp":null,"lastTimestamp":null,"eventTime":null,"reportingComponent":"","reportingInstance":""}"#
        );
    }
}
