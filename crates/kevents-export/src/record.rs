//! [`ExportRecord`], one record for both event APIs, built from a watched event's JSON
//! ([`ExportRecord::from_object`]), and [`Api`], which view of the stored event it came from.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The event API a watch reads (both show the same stored objects: an event exists once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Api {
    /// `/api/v1/events` (core/v1).
    #[serde(rename = "v1")]
    CoreV1,
    /// `/apis/events.k8s.io/v1/events`.
    #[serde(rename = "events.k8s.io/v1")]
    EventsV1,
}

impl Api {
    /// The API's path prefix (`/api/v1` or `/apis/events.k8s.io/v1`).
    ///
    /// ```
    /// assert_eq!(kevents_export::Api::CoreV1.prefix(), "/api/v1");
    /// ```
    pub fn prefix(self) -> &'static str {
        match self {
            Api::CoreV1 => "/api/v1",
            Api::EventsV1 => "/apis/events.k8s.io/v1",
        }
    }

    /// Its `apiVersion` (`v1` or `events.k8s.io/v1`).
    ///
    /// ```
    /// assert_eq!(kevents_export::Api::EventsV1.api_version(), "events.k8s.io/v1");
    /// ```
    pub fn api_version(self) -> &'static str {
        match self {
            Api::CoreV1 => "v1",
            Api::EventsV1 => "events.k8s.io/v1",
        }
    }
}

/// The object an event is about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Regarding {
    /// Its kind (`Pod`).
    pub kind: String,
    /// Its namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// The part of it the event is about (`spec.containers{app}`; may be empty).
    #[serde(
        default,
        rename = "fieldPath",
        skip_serializing_if = "String::is_empty"
    )]
    pub field_path: String,
    /// Its `apiVersion` (may be empty).
    #[serde(
        default,
        rename = "apiVersion",
        skip_serializing_if = "String::is_empty"
    )]
    pub api_version: String,
    /// Its resourceVersion when the event was made (may be empty).
    #[serde(
        default,
        rename = "resourceVersion",
        skip_serializing_if = "String::is_empty"
    )]
    pub resource_version: String,
}

/// One exported record of an event, the same for both APIs (JSON, camelCase; see
/// docs/export.md): the event's identity and fields as it is now, its occurrences now
/// (`count`) and how many of them no earlier record of this uid carried (`delta`). Over all
/// of an event's records, the deltas sum to its count.
///
/// ```
/// let object = serde_json::json!({
///     "metadata": {"uid": "u1", "namespace": "default", "name": "web.1", "resourceVersion": "7"},
///     "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web", "uid": "p1"},
///     "reason": "BackOff", "message": "Back-off restarting", "type": "Warning", "count": 4,
///     "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z",
///     "source": {"component": "kubelet"}
/// });
/// let r = kevents_export::ExportRecord::from_object(kevents_export::Api::CoreV1, &object).unwrap();
/// assert_eq!((r.count, r.reason.as_str(), r.reporting_controller.as_str()), (4, "BackOff", "kubelet"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportRecord {
    /// The event's uid.
    pub uid: String,
    /// The API that last wrote it (from its `managedFields`), when known.
    pub api: Option<String>,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The object it is about.
    pub regarding: Regarding,
    /// Why (`BackOff`).
    pub reason: String,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The message (core/v1 `message`, events.k8s.io/v1 `note`).
    pub note: String,
    /// What was done (may be empty).
    pub action: String,
    /// The reporting controller (core/v1 `reportingComponent`, else `source.component`).
    pub reporting_controller: String,
    /// The reporting instance (core/v1 `reportingInstance`, else `source.host`).
    pub reporting_instance: String,
    /// When it first happened (`firstTimestamp`, else `eventTime`), RFC 3339, if known.
    pub first_time: Option<String>,
    /// When it last happened (`series.lastObservedTime`, else `lastTimestamp`, else
    /// `eventTime`), RFC 3339, if known.
    pub last_time: Option<String>,
    /// Its occurrences now: `series.count` if it has a series, else `count` if above 0, else 1.
    pub count: u64,
    /// The occurrences no earlier record of this uid carried (the first record's: its count).
    pub delta: u64,
    /// The resource version of the object this record was made from.
    pub resource_version: String,
    /// The event object's `metadata.creationTimestamp`, RFC 3339, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
}

fn s(v: &Value, path: &[&str]) -> String {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(next) => cur = next,
            None => return String::new(),
        }
    }
    cur.as_str().unwrap_or_default().to_owned()
}

/// The largest count an event can hold (Kubernetes' `int32`).
pub const MAX_COUNT: u64 = i32::MAX as u64;

/// A count field: absent or `null` is 0; an integer in `0..=MAX_COUNT` is itself; anything
/// else (negative, fractional, larger, not a number) is malformed.
fn count_at(v: &Value, key: &str) -> Result<u64, Malformed> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(0),
        Some(n) => match n.as_u64() {
            Some(c) if c <= MAX_COUNT => Ok(c),
            _ => Err(Malformed::Count(
                kevents_core::status::sanitize_server_text(&n.to_string()),
            )),
        },
    }
}

/// Why a listed or watched object gives no record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// It has no `metadata.uid`.
    #[error("an event without metadata.uid")]
    NoUid,
    /// A count that is not an integer from 0 to 2^31-1 (what the apiserver stores).
    #[error("an event whose count {0} is not an integer from 0 to 2147483647")]
    Count(String),
}

impl Malformed {
    /// A short label for metrics: `no_uid`, `count`.
    pub fn label(&self) -> &'static str {
        match self {
            Malformed::NoUid => "no_uid",
            Malformed::Count(_) => "count",
        }
    }
}

fn first_nonempty(options: [String; 3]) -> Option<String> {
    options.into_iter().find(|o| !o.is_empty())
}

/// The API of the newest `managedFields` entry (by `time`; the last one on a tie).
fn last_writer(object: &Value) -> Option<String> {
    let fields = object.get("metadata")?.get("managedFields")?.as_array()?;
    let mut best: Option<(&str, &str)> = None;
    for f in fields {
        let api = f.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let time = f.get("time").and_then(Value::as_str).unwrap_or("");
        if api.is_empty() {
            continue;
        }
        // RFC 3339 in UTC with whole seconds (metav1.Time): ordered as strings.
        if best.is_none_or(|(_, t)| time >= t) {
            best = Some((api, time));
        }
    }
    best.map(|(api, _)| api.to_owned())
}

impl ExportRecord {
    /// The record of `object` (a watched or listed event of `api`'s view) with `delta` 0;
    /// `None` without a uid or with a malformed count ([`ExportRecord::read`] says which).
    pub fn from_object(api: Api, object: &Value) -> Option<Self> {
        Self::read(api, object).ok()
    }

    /// The record of `object`, or why it gives none: no uid, or a count that is not an
    /// integer from 0 to [`MAX_COUNT`] (a count of 0 or none is 1 occurrence).
    ///
    /// ```
    /// use kevents_export::{Api, ExportRecord, Malformed};
    /// let e = serde_json::json!({"metadata": {"uid": "u"}, "count": -5});
    /// assert!(matches!(ExportRecord::read(Api::CoreV1, &e), Err(Malformed::Count(_))));
    /// ```
    pub fn read(api: Api, object: &Value) -> Result<Self, Malformed> {
        let uid = s(object, &["metadata", "uid"]);
        if uid.is_empty() {
            return Err(Malformed::NoUid);
        }
        let series = object.get("series").filter(|v| v.is_object());
        let (regarding_key, note_key, count_key, first_key, last_key, source_key) = match api {
            Api::CoreV1 => (
                "involvedObject",
                "message",
                "count",
                "firstTimestamp",
                "lastTimestamp",
                "source",
            ),
            Api::EventsV1 => (
                "regarding",
                "note",
                "deprecatedCount",
                "deprecatedFirstTimestamp",
                "deprecatedLastTimestamp",
                "deprecatedSource",
            ),
        };
        let (controller_key, instance_key) = match api {
            Api::CoreV1 => ("reportingComponent", "reportingInstance"),
            Api::EventsV1 => ("reportingController", "reportingInstance"),
        };
        let series_count = match series {
            Some(series) => count_at(series, "count")?,
            None => 0,
        };
        let count = if series_count > 0 {
            series_count
        } else {
            count_at(object, count_key)?.max(1)
        };
        let event_time = s(object, &["eventTime"]);
        let first_time =
            first_nonempty([s(object, &[first_key]), event_time.clone(), String::new()]);
        let last_time = first_nonempty([
            series
                .map(|v| s(v, &["lastObservedTime"]))
                .unwrap_or_default(),
            s(object, &[last_key]),
            event_time,
        ]);
        let controller = first_nonempty([
            s(object, &[controller_key]),
            s(object, &[source_key, "component"]),
            String::new(),
        ]);
        let instance = first_nonempty([
            s(object, &[instance_key]),
            s(object, &[source_key, "host"]),
            String::new(),
        ]);
        Ok(ExportRecord {
            uid,
            api: last_writer(object),
            namespace: s(object, &["metadata", "namespace"]),
            name: s(object, &["metadata", "name"]),
            regarding: Regarding {
                kind: s(object, &[regarding_key, "kind"]),
                namespace: s(object, &[regarding_key, "namespace"]),
                name: s(object, &[regarding_key, "name"]),
                uid: s(object, &[regarding_key, "uid"]),
                field_path: s(object, &[regarding_key, "fieldPath"]),
                api_version: s(object, &[regarding_key, "apiVersion"]),
                resource_version: s(object, &[regarding_key, "resourceVersion"]),
            },
            reason: s(object, &["reason"]),
            type_: s(object, &["type"]),
            note: s(object, &[note_key]),
            action: s(object, &["action"]),
            reporting_controller: controller.unwrap_or_default(),
            reporting_instance: instance.unwrap_or_default(),
            first_time,
            last_time,
            count,
            delta: 0,
            resource_version: s(object, &["metadata", "resourceVersion"]),
            created: first_nonempty([
                s(object, &["metadata", "creationTimestamp"]),
                String::new(),
                String::new(),
            ]),
        })
    }

    /// The idempotency key of this record: `uid:count` (JetStream's `Nats-Msg-Id`, the
    /// webhook's `Idempotency-Key`).
    ///
    /// ```
    /// let r = kevents_export::ExportRecord { uid: "u1".into(), count: 3, ..Default::default() };
    /// assert_eq!(r.key(), "u1:3");
    /// ```
    pub fn key(&self) -> String {
        format!("{}:{}", self.uid, self.count)
    }

    /// Seconds from the record's last time to `now` (0 if unknown or in the future).
    pub fn lag_secs(&self, now: kevents_core::Time) -> f64 {
        let Some(last) = self
            .last_time
            .as_deref()
            .and_then(|t| kevents_core::Time::parse_rfc3339(t).ok())
        else {
            return 0.0;
        };
        (now.unix_nanos().saturating_sub(last.unix_nanos())).max(0) as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_views_of_one_series_event_give_the_same_record() {
        let core = json!({
            "metadata": {"uid": "u", "namespace": "ns", "name": "n", "resourceVersion": "5",
                "managedFields": [
                    {"apiVersion": "events.k8s.io/v1", "time": "2026-01-01T00:00:00Z"},
                    {"apiVersion": "v1", "time": "2026-01-01T00:00:09Z"}]},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "pu"},
            "reason": "R", "message": "m", "type": "Normal", "count": 0,
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 7, "lastObservedTime": "2026-01-01T00:00:09.000000Z"},
            "action": "A", "reportingComponent": "c", "reportingInstance": "i"
        });
        let v1 = json!({
            "metadata": core["metadata"].clone(),
            "regarding": core["involvedObject"].clone(),
            "reason": "R", "note": "m", "type": "Normal",
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": {"count": 7, "lastObservedTime": "2026-01-01T00:00:09.000000Z"},
            "action": "A", "reportingController": "c", "reportingInstance": "i"
        });
        let a = ExportRecord::from_object(Api::CoreV1, &core).unwrap();
        let b = ExportRecord::from_object(Api::EventsV1, &v1).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.count, 7);
        assert_eq!(a.api.as_deref(), Some("v1"));
        assert_eq!(a.last_time.as_deref(), Some("2026-01-01T00:00:09.000000Z"));
        assert_eq!(a.first_time.as_deref(), Some("2026-01-01T00:00:00.000000Z"));
    }

    #[test]
    fn impossible_counts_are_malformed() {
        for bad in [
            json!(-5),
            json!(1e300),
            json!(9_223_372_036_854_775_808u64),
            json!(u64::MAX),
            json!(2_147_483_648u64),
            json!("7"),
            json!(2.5),
        ] {
            let e = json!({"metadata": {"uid": "u"}, "count": bad});
            assert!(
                matches!(
                    ExportRecord::read(Api::CoreV1, &e),
                    Err(Malformed::Count(_))
                ),
                "{bad}"
            );
            let s = json!({"metadata": {"uid": "u"}, "series": {"count": bad}});
            assert!(
                ExportRecord::read(Api::EventsV1, &s).is_err(),
                "series {bad}"
            );
        }
        let top = json!({"metadata": {"uid": "u"}, "count": 2_147_483_647u64});
        assert_eq!(
            ExportRecord::read(Api::CoreV1, &top).unwrap().count,
            MAX_COUNT
        );
        let none = json!({"count": 3});
        assert_eq!(
            ExportRecord::read(Api::CoreV1, &none),
            Err(Malformed::NoUid)
        );
    }

    #[test]
    fn count_rule_and_missing_uid() {
        let mut e = json!({"metadata": {"uid": "u"}, "count": 0});
        assert_eq!(ExportRecord::from_object(Api::CoreV1, &e).unwrap().count, 1);
        e["count"] = json!(9);
        assert_eq!(ExportRecord::from_object(Api::CoreV1, &e).unwrap().count, 9);
        assert!(ExportRecord::from_object(Api::CoreV1, &json!({"metadata": {}})).is_none());
    }
}
