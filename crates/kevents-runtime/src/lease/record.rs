//! The leader election record as a coordination.k8s.io/v1 Lease holds it (client-go's
//! `LeaderElectionRecord` and `resourcelock.LeaseLock`'s conversions), read from and written
//! into the Lease's JSON.

use super::config::LeaseError;
use kevents_core::Time;
use serde_json::{Map, Value, json};

/// Path of the coordination.k8s.io/v1 API.
pub(crate) const COORDINATION_V1_PATH: &str = "/apis/coordination.k8s.io/v1";

/// The longest `holderIdentity` read as an identity (a pod name is at most 253 bytes; client-go
/// identities are a host name and a UUID). A longer one is still a holder, but it is shown
/// cut and warned about.
pub(crate) const MAX_IDENTITY_BYTES: usize = 1024;

/// The Lease's `spec` as the election reads and writes it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct LeaseRecord {
    /// `holderIdentity` (empty: nobody holds it).
    pub(crate) holder_identity: String,
    /// `leaseDurationSeconds`.
    pub(crate) lease_duration_seconds: i32,
    /// `acquireTime`.
    pub(crate) acquire_time: Option<Time>,
    /// `renewTime`.
    pub(crate) renew_time: Option<Time>,
    /// `leaseTransitions`.
    pub(crate) lease_transitions: i32,
    /// Why part of the record read could not be understood (`None`: all of it was). Such a
    /// record names nobody this candidate can be; it is taken over like any other once it
    /// has not changed for its lease duration.
    pub(crate) unreadable: Option<String>,
    /// The `spec` as read, as compact JSON (empty for a record this candidate wrote): a change
    /// of these bytes is what moves the observed time, as client-go compares the raw record,
    /// so a record whose fields cannot be read still has its changes seen.
    pub(crate) raw: String,
}

/// `holder` for a log line or an error: cut to 128 characters, its length said.
pub(crate) fn shown_holder(holder: &str) -> String {
    const SHOWN: usize = 128;
    if holder.len() <= SHOWN {
        return holder.to_owned();
    }
    let mut cut = SHOWN;
    while !holder.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... ({} bytes)", &holder[..cut], holder.len())
}

/// Why the time `s` in `spec.{key}` is unreadable: out of the range kevents' clock holds (a
/// valid RFC 3339 time such as year 9999), or not a time at all.
fn unreadable_time(key: &str, s: &str) -> String {
    let shown: String = s.chars().take(64).collect();
    let year = s
        .get(0..4)
        .filter(|y| y.bytes().all(|b| b.is_ascii_digit()));
    match year.and_then(|y| y.parse::<u32>().ok()) {
        Some(y) if !(1678..=2261).contains(&y) => {
            format!("spec.{key} {shown:?} is outside the years 1678-2261 that kevents' clock holds")
        }
        _ => format!("spec.{key} {shown:?} is not an RFC 3339 time"),
    }
}

impl LeaseRecord {
    /// The record in a Lease object's JSON (client-go's `LeaseSpecToLeaderElectionRecord`:
    /// absent fields are zero). Never fails: a field that cannot be read is left at zero and
    /// said in [`LeaseRecord::unreadable`]; a `leaseDurationSeconds` that cannot be read is
    /// taken as `fallback_seconds` (this candidate's own), so that the record is taken over
    /// once it has not changed for that long.
    pub(crate) fn from_lease(lease: &Value, fallback_seconds: i32) -> Self {
        let mut record = LeaseRecord::default();
        let mut problems: Vec<String> = Vec::new();
        let spec = match lease.get("spec") {
            None | Some(Value::Null) => return record,
            Some(Value::Object(spec)) => spec,
            Some(other) => {
                record.raw = other.to_string();
                record.holder_identity = "?".into();
                record.lease_duration_seconds = fallback_seconds;
                record.unreadable = Some("spec is not an object".into());
                return record;
            }
        };
        record.raw = Value::Object(spec.clone()).to_string();
        let mut int = |k: &str, fallback: i32| -> i32 {
            match spec.get(k) {
                None | Some(Value::Null) => 0,
                Some(v) => match v.as_i64().and_then(|n| i32::try_from(n).ok()) {
                    Some(n) => n,
                    None => {
                        problems.push(format!("spec.{k} is not a 32-bit integer"));
                        fallback
                    }
                },
            }
        };
        record.lease_duration_seconds = int("leaseDurationSeconds", fallback_seconds);
        record.lease_transitions = int("leaseTransitions", 0);
        let mut time = |k: &str| -> Option<Time> {
            match spec.get(k) {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => match Time::parse_rfc3339(s) {
                    Ok(t) => Some(t),
                    Err(_) => {
                        problems.push(unreadable_time(k, s));
                        None
                    }
                },
                Some(_) => {
                    problems.push(format!("spec.{k} is not a string"));
                    None
                }
            }
        };
        record.acquire_time = time("acquireTime");
        record.renew_time = time("renewTime");
        match spec.get("holderIdentity") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                if s.len() > MAX_IDENTITY_BYTES {
                    problems.push(format!(
                        "spec.holderIdentity is {} bytes (an identity is at most {MAX_IDENTITY_BYTES})",
                        s.len()
                    ));
                }
                record.holder_identity = s.clone();
            }
            Some(_) => {
                problems.push("spec.holderIdentity is not a string".into());
                record.holder_identity = "?".into();
            }
        }
        if !problems.is_empty() {
            record.unreadable = Some(problems.join("; "));
        }
        record
    }

    /// The Lease `spec` (client-go's `LeaderElectionRecordToLeaseSpec`: every field set,
    /// times as `MicroTime`).
    pub(crate) fn to_spec(&self) -> Value {
        let time =
            |t: Option<Time>| t.map_or(Value::Null, |t| Value::String(t.to_rfc3339_micros()));
        json!({
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": time(self.acquire_time),
            "renewTime": time(self.renew_time),
            "leaseTransitions": self.lease_transitions,
        })
    }
}

/// A new Lease object holding `record` (the body of a create).
pub(crate) fn new_lease(namespace: &str, name: &str, record: &LeaseRecord) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": { "name": name, "namespace": namespace },
        "spec": record.to_spec(),
    })
}

/// `lease` (as last read, its `metadata.resourceVersion` kept for optimistic concurrency)
/// with its spec replaced by `record` (the body of an update, as `LeaseLock.Update`).
pub(crate) fn updated_lease(lease: &Value, record: &LeaseRecord) -> Value {
    let mut object = match lease {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    object.insert("spec".into(), record.to_spec());
    Value::Object(object)
}

/// `/apis/coordination.k8s.io/v1/namespaces/{ns}/leases[/{name}]` (names checked by
/// [`LeaseConfig::validate`](super::LeaseConfig::validate) before).
pub(crate) fn lease_path(namespace: &str, name: Option<&str>) -> String {
    use kevents_core::request::encode_segment;
    let mut path = format!(
        "{COORDINATION_V1_PATH}/namespaces/{}/leases",
        encode_segment(namespace)
    );
    if let Some(name) = name {
        path.push('/');
        path.push_str(&encode_segment(name));
    }
    path
}

/// The largest Lease answer read (4 MiB: a Lease is a few hundred bytes, with its
/// `managedFields` a few KiB, but any object etcd stores, 1.5 MiB by default, must be
/// readable, or a Lease holding a huge `holderIdentity` could never be taken over).
pub const MAX_LEASE_BYTES: usize = 4 * 1024 * 1024;

/// A 2xx answer about Lease `namespace`/`name`: its JSON object (read at most
/// `MAX_LEASE_BYTES`); a 401/403 is [`LeaseError::Forbidden`] for `verb`, other answers the
/// server's error.
pub(crate) fn decode_lease(
    answer: kevents_core::request::Response,
    verb: &'static str,
    namespace: &str,
    name: &str,
) -> Result<serde_json::Value, LeaseError> {
    if !answer.answer().is_success() {
        let source = answer.answer().status_error();
        if matches!(answer.code, 401 | 403) {
            return Err(LeaseError::Forbidden {
                verb,
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            });
        }
        return Err(LeaseError::Request(source));
    }
    if answer.oversized {
        return Err(LeaseError::Request(
            kevents_core::request::answer_too_large(MAX_LEASE_BYTES),
        ));
    }
    let lease: serde_json::Value = serde_json::from_slice(&answer.body)
        .map_err(|e| LeaseError::Decode(format!("not JSON: {e}")))?;
    if !lease.is_object() {
        return Err(LeaseError::Decode("not an object".into()));
    }
    Ok(lease)
}

/// `GET` of Lease `namespace`/`name`: `None` when not found.
pub(crate) async fn get_lease<T: kevents_core::request::Transport>(
    client: &kevents_core::request::Client<T>,
    namespace: &str,
    name: &str,
) -> Result<Option<serde_json::Value>, LeaseError> {
    let answer = client
        .send(
            kevents_core::request::Method::Get,
            lease_path(namespace, Some(name)),
            None,
            Vec::new(),
            MAX_LEASE_BYTES,
        )
        .await
        .map_err(LeaseError::Request)?;
    if answer.code == 404 {
        return Ok(None);
    }
    decode_lease(answer, "get", namespace, name).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips_with_micro_times() {
        let r = LeaseRecord {
            holder_identity: "a".into(),
            lease_duration_seconds: 15,
            acquire_time: Some(Time::from_unix_nanos(1_609_459_200_123_456_789)),
            renew_time: Some(Time::from_unix_nanos(1_609_459_201_000_000_000)),
            lease_transitions: 3,
            ..Default::default()
        };
        let spec = r.to_spec();
        assert_eq!(spec["acquireTime"], "2021-01-01T00:00:00.123456Z");
        assert_eq!(spec["renewTime"], "2021-01-01T00:00:01.000000Z");
        let back = LeaseRecord::from_lease(&json!({ "spec": spec }), 15);
        assert_eq!(back.unreadable, None);
        assert_eq!(back.holder_identity, "a");
        assert_eq!(back.lease_transitions, 3);
        assert_eq!(
            back.acquire_time,
            Some(Time::from_unix_nanos(1_609_459_200_123_456_000))
        );
    }

    #[test]
    fn absent_fields_are_zero_and_wrong_types_unreadable() {
        let r = LeaseRecord::from_lease(&json!({ "metadata": {} }), 15);
        assert_eq!(r, LeaseRecord::default());
        let r = LeaseRecord::from_lease(&json!({ "spec": {} }), 15);
        assert_eq!(r.unreadable, None);
        assert_eq!(
            (r.holder_identity.as_str(), r.lease_duration_seconds),
            ("", 0)
        );
        let why = |spec: Value| LeaseRecord::from_lease(&json!({ "spec": spec }), 15).unreadable;
        assert_eq!(
            why(json!({ "holderIdentity": 3 })).as_deref(),
            Some("spec.holderIdentity is not a string")
        );
        let r = LeaseRecord::from_lease(&json!({ "spec": { "leaseDurationSeconds": "x" } }), 15);
        assert_eq!(
            r.lease_duration_seconds, 15,
            "this candidate's own duration"
        );
        assert!(r.unreadable.is_some());
        assert_eq!(
            why(json!({ "renewTime": "now" })).as_deref(),
            Some("spec.renewTime \"now\" is not an RFC 3339 time")
        );
        // Year 9999 is an RFC 3339 time: said as out of range, not as malformed.
        assert_eq!(
            why(json!({ "acquireTime": "9999-12-31T23:59:59.000000Z" })).as_deref(),
            Some(
                "spec.acquireTime \"9999-12-31T23:59:59.000000Z\" is outside the years 1678-2261 that kevents' clock holds"
            )
        );
        assert!(why(json!("x")).is_some_and(|w| w == "spec is not an object"));
        assert_eq!(shown_holder("short"), "short");
    }

    #[test]
    fn update_keeps_metadata_and_replaces_spec() {
        let lease = json!({
            "metadata": { "name": "l", "resourceVersion": "42" },
            "spec": { "holderIdentity": "old", "preferredHolder": "x" },
        });
        let r = LeaseRecord {
            holder_identity: "new".into(),
            ..Default::default()
        };
        let u = updated_lease(&lease, &r);
        assert_eq!(u["metadata"]["resourceVersion"], "42");
        assert_eq!(u["spec"]["holderIdentity"], "new");
        assert!(u["spec"].get("preferredHolder").is_none());
        assert_eq!(
            lease_path("kube-system", Some("a.b")),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/a.b"
        );
    }
}
