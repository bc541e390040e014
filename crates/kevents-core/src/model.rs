//! The core/v1 `Event` as the apiserver sees it on the wire.
//!
//! These structs are hand-written rather than taken from `k8s-openapi` because the wire form
//! must match client-go byte for byte: `reportingComponent`/`reportingInstance` are always
//! present (`""`), zero timestamps are `null`, `metadata.creationTimestamp` is `null`, and
//! fields appear in Go's struct order (see `docs/dependencies.md`). Conversions from
//! `k8s-openapi` objects live in [`crate::reference`].

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::time::Time;

/// A reference to the object an event is about (`involvedObject`), as client-go's
/// `GetReference` builds it.
///
/// ```
/// use kevents_core::ObjectReference;
/// let r = ObjectReference::new("v1", "Pod", "default", "web-1").with_uid("u1");
/// assert_eq!(
///     serde_json::to_string(&r).unwrap(),
///     r#"{"kind":"Pod","namespace":"default","name":"web-1","uid":"u1","apiVersion":"v1"}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectReference {
    /// Kind of the referent, e.g. `Pod`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Namespace of the referent; empty for cluster-scoped objects.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the referent.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// UID of the referent.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// API version of the referent, `group/version` or `v1` for the core group.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The referent's resourceVersion when the event was recorded.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// A field inside the object, e.g. `spec.containers{app}`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field_path: String,
}

impl ObjectReference {
    /// A reference with api version, kind, namespace and name set.
    pub fn new(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        ObjectReference {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Default::default()
        }
    }
    /// Sets the UID.
    pub fn with_uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = uid.into();
        self
    }
    /// Sets the field path (what client-go's `GetPartialReference` does).
    pub fn with_field_path(mut self, field_path: impl Into<String>) -> Self {
        self.field_path = field_path.into();
        self
    }
    /// Sets the resourceVersion.
    pub fn with_resource_version(mut self, rv: impl Into<String>) -> Self {
        self.resource_version = rv.into();
        self
    }
}

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

/// The part of `metav1.ObjectMeta` an event uses. Unknown fields from the server are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    /// Object name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Object namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// UID assigned by the server.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// resourceVersion assigned by the server.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// Set by the server; clients send `null`.
    #[serde(with = "serde_time::secs")]
    pub creation_timestamp: Option<Time>,
    /// Annotations (sorted by key on the wire, as Go sorts map keys).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
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

/// `serde` adapters for `Option<Time>` in Kubernetes' two encodings.
pub mod serde_time {
    use super::Time;
    use serde::{Deserialize, Deserializer, Serializer};

    fn de<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(s) if s.is_empty() => Ok(None),
            Some(s) => Time::parse_rfc3339(&s)
                .map(Some)
                .map_err(serde::de::Error::custom),
        }
    }

    /// `metav1.Time`: whole seconds, `null` when zero.
    pub mod secs {
        use super::*;
        /// Serialises as `"2021-01-01T00:00:01Z"` or `null`.
        pub fn serialize<S: Serializer>(t: &Option<Time>, s: S) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.serialize_str(&t.to_rfc3339()),
                None => s.serialize_none(),
            }
        }
        /// Parses RFC 3339 or `null`.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
            de(d)
        }
    }

    /// `metav1.MicroTime`: six fractional digits, `null` when zero.
    pub mod micros {
        use super::*;
        /// Serialises as `"2021-01-01T00:00:01.123456Z"` or `null`.
        pub fn serialize<S: Serializer>(t: &Option<Time>, s: S) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.serialize_str(&t.to_rfc3339_micros()),
                None => s.serialize_none(),
            }
        }
        /// Parses RFC 3339 or `null`.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
            de(d)
        }
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
