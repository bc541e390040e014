//! What a fleet's link writes, given the Lease as last read: the decision ([`write_step`]) and the
//! bodies of a create and an update; the law a Lease holds ([`law_of`]). No I/O.

use kevents_core::fleet::{FLEET_LAW_ANNOTATION, FleetLaw, FleetLawError};
use std::time::SystemTime;

use serde_json::{Map, Value, json};

use super::FleetLease;

/// What to do with a member's proposal, given the Lease as last read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum WriteStep {
    /// No Lease: create it with the proposal.
    Create,
    /// The Lease holds a law of the same or a higher epoch: write nothing, the member adopts
    /// that law.
    Keep(FleetLaw),
    /// The Lease holds an older law, none, or an invalid one: replace it.
    Update,
}

/// The decision for `proposal` given `lease`, the Lease as last read (`None`: there is none).
pub(super) fn write_step(
    lease: Option<&Value>,
    proposal: &FleetLaw,
    highest: u64,
    now: SystemTime,
) -> WriteStep {
    let Some(lease) = lease else {
        return WriteStep::Create;
    };
    // A stored law out of bounds is replaced, as an unreadable one is.
    match law_of(lease).map(|law| law.and_then(|law| law.bounded(highest, now))) {
        Some(Ok((stored, _))) if stored.epoch >= proposal.epoch => WriteStep::Keep(stored),
        _ => WriteStep::Update,
    }
}

/// The law in a Lease's annotation: `None` without one.
pub(super) fn law_of(lease: &Value) -> Option<Result<FleetLaw, FleetLawError>> {
    let text = lease
        .get("metadata")?
        .get("annotations")?
        .get(FLEET_LAW_ANNOTATION)?;
    Some(match text.as_str() {
        Some(text) => FleetLaw::from_annotation(text),
        None => Err(FleetLawError::Json("the annotation is not a string".into())),
    })
}

/// A new Lease holding `law`, written by `identity` (the body of a create).
pub(super) fn new_fleet_lease(lease: &FleetLease, law: &FleetLaw) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lease.name,
            "namespace": lease.namespace,
            "annotations": { FLEET_LAW_ANNOTATION: law.to_annotation() },
        },
        "spec": { "holderIdentity": lease.identity },
    })
}

/// `object` (the Lease as last read, its `resourceVersion` kept) with the law replaced by
/// `law` and `spec.holderIdentity` by `identity`, other fields kept (the body of an update).
pub(super) fn updated_fleet_lease(object: &Value, identity: &str, law: &FleetLaw) -> Value {
    let mut object = match object {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    object.insert("apiVersion".into(), "coordination.k8s.io/v1".into());
    object.insert("kind".into(), "Lease".into());
    let mut metadata = take_object(&mut object, "metadata");
    let mut annotations = take_object(&mut metadata, "annotations");
    annotations.insert(
        FLEET_LAW_ANNOTATION.into(),
        Value::String(law.to_annotation()),
    );
    metadata.insert("annotations".into(), Value::Object(annotations));
    object.insert("metadata".into(), Value::Object(metadata));
    let mut spec = take_object(&mut object, "spec");
    spec.insert("holderIdentity".into(), identity.into());
    object.insert("spec".into(), Value::Object(spec));
    Value::Object(object)
}

/// `map[key]` taken out as an object (an empty one if absent or not an object).
fn take_object(map: &mut Map<String, Value>, key: &str) -> Map<String, Value> {
    match map.remove(key) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// A Lease's `metadata.resourceVersion` (empty if absent).
pub(super) fn rv_of(object: &Value) -> &str {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
}

/// Whether `incoming` is older than `current` by their resourceVersions (when both are the
/// integers etcd gives; else it is not known to be older).
pub(super) fn is_older(current: Option<&Value>, incoming: &Value) -> bool {
    let Some(current) = current else {
        return false;
    };
    match (
        rv_of(current).parse::<u64>(),
        rv_of(incoming).parse::<u64>(),
    ) {
        (Ok(c), Ok(i)) => i < c,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use kevents_core::fleet::FleetPhase;

    use super::*;

    fn now() -> SystemTime {
        std::time::UNIX_EPOCH + std::time::Duration::from_micros(1_764_400_000_000_000)
    }

    #[test]
    fn a_stored_law_out_of_bounds_is_replaced() {
        let hostile = FleetLaw {
            epoch: u64::MAX,
            ..law(1, 1e-9)
        };
        let lease = lease_with(Some(&hostile.to_annotation()));
        assert_eq!(
            write_step(Some(&lease), &law(2, 5.0), 1, now()),
            WriteStep::Update
        );
        let ahead = FleetLaw {
            since_micros: 1_764_400_000_000_000 + 3_600_000_000,
            ..law(3, 5.0)
        };
        let lease = lease_with(Some(&ahead.to_annotation()));
        assert_eq!(
            write_step(Some(&lease), &law(2, 5.0), 1, now()),
            WriteStep::Update
        );
        // A slow but otherwise sound law is kept at the floor.
        let slow = law(3, 1e-9);
        let lease = lease_with(Some(&slow.to_annotation()));
        match write_step(Some(&lease), &law(2, 5.0), 1, now()) {
            WriteStep::Keep(kept) => assert_eq!(kept.from, kevents_core::fleet::FLEET_MIN_RATE),
            other => panic!("{other:?}"),
        }
    }

    fn law(epoch: u64, from: f64) -> FleetLaw {
        FleetLaw {
            epoch,
            phase: FleetPhase::Adapted,
            from,
            since_micros: 1_764_400_000_000_000,
        }
    }

    fn lease_with(annotation: Option<&str>) -> Value {
        let mut v = json!({
            "metadata": { "name": "f", "namespace": "default", "resourceVersion": "7" },
            "spec": { "holderIdentity": "b", "leaseDurationSeconds": 3 },
        });
        if let Some(a) = annotation {
            v["metadata"]["annotations"] = json!({ FLEET_LAW_ANNOTATION: a, "other": "x" });
        }
        v
    }

    #[test]
    fn no_lease_is_created() {
        assert_eq!(write_step(None, &law(1, 5.0), 0, now()), WriteStep::Create);
    }

    #[test]
    fn a_lease_of_the_same_or_a_higher_epoch_is_kept() {
        let stored = law(2, 8.0);
        let lease = lease_with(Some(&stored.to_annotation()));
        assert_eq!(
            write_step(Some(&lease), &law(2, 5.0), 0, now()),
            WriteStep::Keep(stored)
        );
        assert_eq!(
            write_step(Some(&lease), &law(1, 5.0), 0, now()),
            WriteStep::Keep(stored)
        );
        assert_eq!(
            write_step(Some(&lease), &law(3, 5.0), 0, now()),
            WriteStep::Update
        );
    }

    #[test]
    fn a_lease_without_a_valid_law_is_updated() {
        assert_eq!(
            write_step(Some(&lease_with(None)), &law(1, 5.0), 0, now()),
            WriteStep::Update
        );
        assert_eq!(
            write_step(Some(&lease_with(Some("garbage"))), &law(1, 5.0), 0, now()),
            WriteStep::Update
        );
        let negative = r#"{"epoch":9,"phase":"Adapted","from":-1,"sinceMicros":0}"#;
        assert_eq!(
            write_step(Some(&lease_with(Some(negative))), &law(1, 5.0), 0, now()),
            WriteStep::Update
        );
        let mut not_a_string = lease_with(None);
        not_a_string["metadata"]["annotations"] = json!({ FLEET_LAW_ANNOTATION: 3 });
        assert!(matches!(law_of(&not_a_string), Some(Err(_))));
        assert_eq!(
            write_step(Some(&not_a_string), &law(1, 5.0), 0, now()),
            WriteStep::Update
        );
    }

    #[test]
    fn bodies_hold_the_law_and_keep_the_rest() {
        let link = FleetLease::new("default", "f", "pod-a").expect("valid");
        let l = law(4, 2.5);
        let created = new_fleet_lease(&link, &l);
        assert_eq!(created["metadata"]["name"], "f");
        assert_eq!(created["spec"]["holderIdentity"], "pod-a");
        assert_eq!(law_of(&created), Some(Ok(l)));

        let updated = updated_fleet_lease(&lease_with(Some("garbage")), "pod-a", &l);
        assert_eq!(rv_of(&updated), "7");
        assert_eq!(updated["kind"], "Lease");
        assert_eq!(updated["spec"]["holderIdentity"], "pod-a");
        assert_eq!(updated["spec"]["leaseDurationSeconds"], 3);
        assert_eq!(updated["metadata"]["annotations"]["other"], "x");
        assert_eq!(law_of(&updated), Some(Ok(l)));

        // A Lease without annotations, or with a spec that is not an object.
        let mut bare = lease_with(None);
        bare["spec"] = Value::Null;
        let updated = updated_fleet_lease(&bare, "pod-a", &l);
        assert_eq!(law_of(&updated), Some(Ok(l)));
        assert_eq!(updated["spec"]["holderIdentity"], "pod-a");
    }

    #[test]
    fn older_objects_are_recognised_by_their_resource_version() {
        let current = lease_with(None);
        let mut older = current.clone();
        older["metadata"]["resourceVersion"] = "6".into();
        let mut newer = current.clone();
        newer["metadata"]["resourceVersion"] = "8".into();
        assert!(is_older(Some(&current), &older));
        assert!(!is_older(Some(&current), &newer));
        assert!(!is_older(None, &older));
        older["metadata"]["resourceVersion"] = "opaque".into();
        assert!(!is_older(Some(&current), &older));
    }
}
