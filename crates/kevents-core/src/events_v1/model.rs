//! The `events.k8s.io/v1` `Event` as the apiserver sees it on the wire, the series patch, and
//! the field mapping to and from the core/v1 `Event` (the apiserver's
//! `pkg/apis/events/v1/conversion.go`).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::core_v1::{self, EventSource};
use crate::meta::{ObjectMeta, serde_time};
use crate::reference::ObjectReference;
use crate::time::Time;

/// `apiVersion` of every `events.k8s.io/v1` object.
pub const API_VERSION: &str = "events.k8s.io/v1";

/// `events.k8s.io/v1` `EventSeries`: how often the event happened and when it last did.
///
/// Unlike core/v1's series, `count` is always on the wire (Go has no `omitempty` on it).
///
/// ```
/// use kevents_core::{events_v1::EventSeries, Time};
/// let s = EventSeries::new(2, Time::parse_rfc3339("2021-01-01T00:05:00.987654Z").unwrap());
/// assert_eq!(
///     serde_json::to_string(&s).unwrap(),
///     r#"{"count":2,"lastObservedTime":"2021-01-01T00:05:00.987654Z"}"#
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EventSeries {
    /// Occurrences so far, including the first (at least 2 for a valid series).
    pub count: i32,
    /// Time of the latest occurrence (`MicroTime`).
    #[serde(with = "serde_time::micros")]
    pub last_observed_time: Option<Time>,
}

impl EventSeries {
    /// A series of `count` occurrences, the last one at `last_observed`.
    pub fn new(count: i32, last_observed: Time) -> Self {
        EventSeries {
            count,
            last_observed_time: Some(last_observed),
        }
    }
}

/// An `events.k8s.io/v1` `Event`, the object `tools/events` creates and patches.
///
/// Serialises exactly like client-go (Go field order, `MicroTime` with six fractional digits,
/// `deprecatedSource` as `{}`, the deprecated timestamps as `null`, `deprecatedCount` omitted
/// when 0):
///
/// ```
/// use kevents_core::{events_v1::Event, ObjectReference, Time};
/// let mut e = Event::default();
/// e.metadata.name = "foo.1655f29dd1e42f00".into();
/// e.metadata.namespace = "baz".into();
/// e.event_time = Some(Time::parse_rfc3339("2021-01-01T00:00:01.123456Z").unwrap());
/// e.reporting_controller = "ctl".into();
/// e.reporting_instance = "ctl-node1".into();
/// e.action = "Started".into();
/// e.reason = "Started".into();
/// e.regarding = ObjectReference::new("v1", "Pod", "baz", "foo").with_uid("bar");
/// e.note = "hello".into();
/// e.type_ = "Normal".into();
/// assert_eq!(
///     String::from_utf8(kevents_core::json::to_vec(&e).unwrap()).unwrap(),
///     concat!(
///         r#"{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"foo.1655f29dd1e42f00","#,
///         r#""namespace":"baz","creationTimestamp":null},"eventTime":"2021-01-01T00:00:01.123456Z","#,
///         r#""reportingController":"ctl","reportingInstance":"ctl-node1","action":"Started","#,
///         r#""reason":"Started","regarding":{"kind":"Pod","namespace":"baz","name":"foo","uid":"bar","#,
///         r#""apiVersion":"v1"},"note":"hello","type":"Normal","deprecatedSource":{},"#,
///         r#""deprecatedFirstTimestamp":null,"deprecatedLastTimestamp":null}"#
///     )
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Event {
    /// Always `Event` (borrowed, so building an event does not allocate it).
    #[serde(skip_serializing_if = "str::is_empty")]
    pub kind: Cow<'static, str>,
    /// Always `events.k8s.io/v1`.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub api_version: Cow<'static, str>,
    /// Name, namespace, resourceVersion, annotations.
    pub metadata: ObjectMeta,
    /// When the event was first observed (`MicroTime`); required by the server.
    #[serde(with = "serde_time::micros")]
    pub event_time: Option<Time>,
    /// Present once the event happened at least twice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series: Option<EventSeries>,
    /// The controller that emitted the event, a qualified name such as `example.com/ctl`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reporting_controller: String,
    /// The controller instance, e.g. `ctl-<hostname>` (at most 128 bytes).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reporting_instance: String,
    /// What was done, or failed to be done (at most 128 bytes).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub action: String,
    /// Why the action was taken (at most 128 bytes).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The object acted upon (always on the wire, `{}` when empty).
    pub regarding: ObjectReference,
    /// A second object, e.g. the Node a Pod was scheduled to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub related: Option<ObjectReference>,
    /// Human-readable description (at most 1024 bytes).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// core/v1 `source`; must be empty on `events.k8s.io/v1` creates.
    pub deprecated_source: EventSource,
    /// core/v1 `firstTimestamp`; must be unset on `events.k8s.io/v1` creates.
    #[serde(with = "serde_time::secs")]
    pub deprecated_first_timestamp: Option<Time>,
    /// core/v1 `lastTimestamp`; must be unset on `events.k8s.io/v1` creates.
    #[serde(with = "serde_time::secs")]
    pub deprecated_last_timestamp: Option<Time>,
    /// core/v1 `count`; must be 0 on `events.k8s.io/v1` creates.
    #[serde(skip_serializing_if = "is_zero")]
    pub deprecated_count: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

impl Default for Event {
    fn default() -> Self {
        Event {
            kind: Cow::Borrowed("Event"),
            api_version: Cow::Borrowed(API_VERSION),
            metadata: ObjectMeta::default(),
            event_time: None,
            series: None,
            reporting_controller: String::new(),
            reporting_instance: String::new(),
            action: String::new(),
            reason: String::new(),
            regarding: ObjectReference::default(),
            related: None,
            note: String::new(),
            type_: String::new(),
            deprecated_source: EventSource::default(),
            deprecated_first_timestamp: None,
            deprecated_last_timestamp: None,
            deprecated_count: 0,
        }
    }
}

/// The strategic-merge patch client-go's `tools/events` `recordEvent` sends for a series: the
/// two-way diff between the event with `series = nil` and the event, i.e. only the `series`
/// key.
///
/// ```
/// use kevents_core::{events_v1::{series_patch, EventSeries}, Time};
/// let t = Time::parse_rfc3339("2021-01-01T00:05:00.987654Z").unwrap();
/// assert_eq!(
///     series_patch(&EventSeries::new(2, t)),
///     br#"{"series":{"count":2,"lastObservedTime":"2021-01-01T00:05:00.987654Z"}}"#
/// );
/// ```
pub fn series_patch(series: &EventSeries) -> Vec<u8> {
    let time = match series.last_observed_time {
        Some(t) => format!("\"{}\"", t.to_rfc3339_micros()),
        None => "null".to_owned(),
    };
    format!(
        "{{\"series\":{{\"count\":{},\"lastObservedTime\":{time}}}}}",
        series.count
    )
    .into_bytes()
}

/// core/v1 → `events.k8s.io/v1` with the apiserver's field mapping
/// (`pkg/apis/events/v1/conversion.go`):
/// involvedObject → regarding, message → note, source → deprecatedSource,
/// firstTimestamp/lastTimestamp/count → deprecated*, reportingComponent →
/// reportingController; the other fields are shared.
///
/// ```
/// use kevents_core::{events_v1, Event, EventSource, ObjectReference};
/// let mut core = Event::default();
/// core.involved_object = ObjectReference::new("v1", "Pod", "ns", "p");
/// core.message = "hi".into();
/// core.source = EventSource::new("kubelet", "node1");
/// core.count = 3;
/// let v1 = events_v1::Event::from(core.clone());
/// assert_eq!((v1.note.as_str(), v1.deprecated_count), ("hi", 3));
/// assert_eq!(v1.api_version, "events.k8s.io/v1");
/// assert_eq!(Event::from(v1), core);
/// ```
impl From<core_v1::Event> for Event {
    fn from(e: core_v1::Event) -> Self {
        Event {
            kind: Cow::Borrowed("Event"),
            api_version: Cow::Borrowed(API_VERSION),
            metadata: e.metadata,
            event_time: e.event_time,
            series: e.series.map(|s| EventSeries {
                count: s.count,
                last_observed_time: s.last_observed_time,
            }),
            reporting_controller: e.reporting_component,
            reporting_instance: e.reporting_instance,
            action: e.action,
            reason: e.reason,
            regarding: e.involved_object,
            related: e.related,
            note: e.message,
            type_: e.type_,
            deprecated_source: e.source,
            deprecated_first_timestamp: e.first_timestamp,
            deprecated_last_timestamp: e.last_timestamp,
            deprecated_count: e.count,
        }
    }
}

/// `events.k8s.io/v1` → core/v1, the inverse of the mapping above (lossless both ways).
///
/// ```
/// use kevents_core::{events_v1, ObjectReference};
/// let mut v1 = events_v1::Event::default();
/// v1.regarding = ObjectReference::new("v1", "Node", "", "n1");
/// v1.reporting_controller = "ctl".into();
/// let core = kevents_core::Event::from(v1);
/// assert_eq!((core.involved_object.name.as_str(), core.reporting_component.as_str()), ("n1", "ctl"));
/// assert_eq!(core.api_version, "v1");
/// ```
impl From<Event> for core_v1::Event {
    fn from(e: Event) -> Self {
        core_v1::Event {
            kind: Cow::Borrowed("Event"),
            api_version: Cow::Borrowed("v1"),
            metadata: e.metadata,
            involved_object: e.regarding,
            reason: e.reason,
            message: e.note,
            source: e.deprecated_source,
            first_timestamp: e.deprecated_first_timestamp,
            last_timestamp: e.deprecated_last_timestamp,
            count: e.deprecated_count,
            type_: e.type_,
            event_time: e.event_time,
            series: e.series.map(|s| core_v1::EventSeries {
                count: s.count,
                last_observed_time: s.last_observed_time,
            }),
            action: e.action,
            related: e.related,
            reporting_component: e.reporting_controller,
            reporting_instance: e.reporting_instance,
        }
    }
}
