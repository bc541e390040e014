//! The leader election record as a coordination.k8s.io/v1 Lease holds it (client-go's
//! `LeaderElectionRecord` and `resourcelock.LeaseLock`'s conversions), read from and written
//! into the Lease's JSON.

use super::config::LeaseError;
use kevents_core::Time;
use serde_json::{Map, Value, json};

/// Path of the coordination.k8s.io/v1 API.
pub(crate) const COORDINATION_V1_PATH: &str = "/apis/coordination.k8s.io/v1";

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
}

impl LeaseRecord {
    /// The record in a Lease object's JSON (client-go's `LeaseSpecToLeaderElectionRecord`:
    /// absent fields are zero).
    pub(crate) fn from_lease(lease: &Value) -> Result<Self, String> {
        let Some(spec) = lease.get("spec") else {
            return Ok(LeaseRecord::default());
        };
        if spec.is_null() {
            return Ok(LeaseRecord::default());
        }
        let spec = spec
            .as_object()
            .ok_or_else(|| "spec is not an object".to_owned())?;
        let int = |k: &str| -> Result<i32, String> {
            match spec.get(k) {
                None | Some(Value::Null) => Ok(0),
                Some(v) => v
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| format!("spec.{k} is not a 32-bit integer")),
            }
        };
        let time = |k: &str| -> Result<Option<Time>, String> {
            match spec.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Time::parse_rfc3339(s)
                    .map(Some)
                    .map_err(|_| format!("spec.{k} is not an RFC 3339 time")),
                Some(_) => Err(format!("spec.{k} is not a string")),
            }
        };
        let holder_identity = match spec.get("holderIdentity") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err("spec.holderIdentity is not a string".into()),
        };
        Ok(LeaseRecord {
            holder_identity,
            lease_duration_seconds: int("leaseDurationSeconds")?,
            acquire_time: time("acquireTime")?,
            renew_time: time("renewTime")?,
            lease_transitions: int("leaseTransitions")?,
        })
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

/// The largest Lease answer read (256 KiB: a Lease is a few hundred bytes, with its
/// `managedFields` a few KiB).
pub const MAX_LEASE_BYTES: usize = 256 * 1024;

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
        };
        let spec = r.to_spec();
        assert_eq!(spec["acquireTime"], "2021-01-01T00:00:00.123456Z");
        assert_eq!(spec["renewTime"], "2021-01-01T00:00:01.000000Z");
        let back = LeaseRecord::from_lease(&json!({ "spec": spec })).unwrap();
        assert_eq!(back.holder_identity, "a");
        assert_eq!(back.lease_transitions, 3);
        assert_eq!(
            back.acquire_time,
            Some(Time::from_unix_nanos(1_609_459_200_123_456_000))
        );
    }

    #[test]
    fn absent_fields_are_zero_and_wrong_types_refused() {
        let r = LeaseRecord::from_lease(&json!({ "metadata": {} })).unwrap();
        assert_eq!(r, LeaseRecord::default());
        let r = LeaseRecord::from_lease(&json!({ "spec": {} })).unwrap();
        assert_eq!(r, LeaseRecord::default());
        assert!(LeaseRecord::from_lease(&json!({ "spec": { "holderIdentity": 3 } })).is_err());
        assert!(
            LeaseRecord::from_lease(&json!({ "spec": { "leaseDurationSeconds": "x" } })).is_err()
        );
        assert!(LeaseRecord::from_lease(&json!({ "spec": { "renewTime": "now" } })).is_err());
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
