//! `/apis/events.k8s.io/v1/namespaces/{ns}/events[/{name}]` as kube-apiserver 1.20.2 answers
//! it: strict validation on create (`ValidateEventCreate`, including 1.20's rule that an event about
//! a cluster-scoped object must be in `kube-system`), 409 `AlreadyExists`, 404 on a PATCH of a
//! missing event, strategic merge of the series on PATCH with 1.20's update validation (`ValidateEventUpdate`:
//! the new object is compared with itself, so nothing is refused for being changed).
//!
//! The events live in their own map (a real apiserver stores both APIs together; the
//! simulator does not convert between them).

use kevents_core::events_v1::{self, ClusterScopedRule, validate_create};
use serde_json::{Value, json};

use super::{
    FieldError, ListQuery, MISMATCH, Reply, Store, bad_request, check_patched, decode_event_body,
    decode_patch, go_quote, invalid, list_reply, merge, not_found, stamp_created, status, str_at,
};

/// The field error the apiserver reports for a client-side validation error.
fn field_error(e: &kevents_core::events_v1::InvalidEvent) -> FieldError {
    use kevents_core::events_v1::InvalidEvent as I;
    match e {
        I::Type(t) => FieldError::invalid("type", t, "has invalid value"),
        I::ReasonMissing => FieldError::required("reason", ""),
        I::ReasonTooLong(_) => FieldError::too_long("reason", 128),
        I::ActionMissing => FieldError::required("action", ""),
        I::ActionTooLong(_) => FieldError::too_long("action", 128),
        I::NoteTooLong(_) => FieldError::too_long("note", 1024),
        I::ReportingController(c) if c.is_empty() => {
            FieldError::required("reportingController", "")
        }
        I::ReportingController(c) => FieldError::invalid(
            "reportingController",
            c,
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        ),
        I::ReportingInstanceMissing => FieldError::required("reportingInstance", ""),
        I::ReportingInstanceTooLong(_) => FieldError::too_long("reportingInstance", 128),
        I::Name(n) if n.is_empty() => {
            FieldError::required("metadata.name", "name or generateName is required")
        }
        I::Name(n) => FieldError::invalid(
            "metadata.name",
            n,
            "a DNS-1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        ),
        I::Namespace(n) if n.is_empty() => FieldError::required("metadata.namespace", ""),
        I::Namespace(n) => FieldError::invalid(
            "metadata.namespace",
            n,
            "a DNS-1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        ),
        I::ClusterScopedNamespace { namespace, .. } => FieldError::invalid(
            "involvedObject.namespace",
            namespace,
            "does not match event.namespace",
        ),
        I::EventTimeMissing => FieldError::required("eventTime", ""),
        I::SeriesCount(c) => {
            FieldError::invalid("series.count", &c.to_string(), "should be at least 2")
        }
        I::SeriesLastObservedTime => FieldError::required("series.lastObservedTime", ""),
        I::Deprecated(f) => FieldError::invalid(f, "", "needs to be unset"),
        I::AnnotationKey(k) => FieldError::invalid(
            "metadata.annotations",
            k,
            "name part must consist of alphanumeric characters, '-', '_' or '.'",
        ),
        I::AnnotationsTooLarge(_) => FieldError::too_long("metadata.annotations", 262_144),
        I::Immutable(f) => FieldError::invalid(f, "", "field is immutable"),
    }
}

fn typed(v: &Value) -> Result<events_v1::Event, Reply> {
    serde_json::from_value(v.clone()).map_err(|e| {
        bad_request(&format!(
            "the object provided is unrecognized (must be of type Event): {e}"
        ))
    })
}

impl Store {
    /// `POST /apis/events.k8s.io/v1/namespaces/{ns}/events`.
    pub(crate) fn create_event_v1(&mut self, url_ns: &str, body: &[u8], now: &str) -> Reply {
        let mut ev = match decode_event_body(body) {
            Ok(v) => v,
            Err(r) => return r,
        };
        if !self.namespace_exists(url_ns) {
            return not_found("namespaces", url_ns);
        }
        if let Value::Object(m) = &mut ev {
            let meta = m
                .entry("metadata")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Value::Object(meta) = meta {
                match meta.get("namespace").and_then(Value::as_str) {
                    None | Some("") => {
                        meta.insert("namespace".into(), url_ns.into());
                    }
                    Some(ns) if ns != url_ns => return bad_request(MISMATCH),
                    Some(_) => {}
                }
            } else {
                return bad_request("metadata is not an object");
            }
        }
        let event = match typed(&ev) {
            Ok(e) => e,
            Err(r) => return r,
        };
        let name = event.metadata.name.clone();
        if let Err(e) = validate_create(&event, ClusterScopedRule::KubeSystemOnly) {
            return invalid(&name, &[field_error(&e)]);
        }
        let key = (url_ns.to_owned(), name.clone());
        if self.events_v1.contains_key(&key) {
            return (
                409,
                status(
                    409,
                    "AlreadyExists",
                    &format!("events.events.k8s.io \"{name}\" already exists"),
                    Some(json!({"name": name, "group": "events.k8s.io", "kind": "events"})),
                ),
            );
        }
        let rv = self.next_rv();
        stamp_created(&mut ev, rv, now, events_v1::API_VERSION);
        self.events_v1.insert(key, ev.clone());
        (201, ev)
    }

    /// `PATCH /apis/events.k8s.io/v1/namespaces/{ns}/events/{name}`: strategic merge (the
    /// series map merges key by key); 1.20 validates the result against itself, so only a
    /// body that is no Event any more is refused.
    pub(crate) fn patch_event_v1(&mut self, ns: &str, name: &str, patch: &[u8]) -> Reply {
        let key = (ns.to_owned(), name.to_owned());
        let Some(current) = self.events_v1.get(&key) else {
            return (
                404,
                status(
                    404,
                    "NotFound",
                    &format!("events.events.k8s.io \"{name}\" not found"),
                    Some(json!({"name": name, "group": "events.k8s.io", "kind": "events"})),
                ),
            );
        };
        let patch = match decode_patch(patch) {
            Ok(v) => v,
            Err(r) => return r,
        };
        let mut updated = current.clone();
        merge(&mut updated, &patch);
        if let Err(r) = check_patched(current, &patch, &updated, ns, name, "events.events.k8s.io") {
            return r;
        }
        if let Err(e) = serde_json::from_value::<events_v1::Event>(updated.clone()) {
            let patch_text = patch.to_string();
            return (
                422,
                status(
                    422,
                    "Invalid",
                    &format!(
                        " \"\" is invalid: patch: Invalid value: {}: {e}",
                        go_quote(&patch_text)
                    ),
                    None,
                ),
            );
        }
        let rv = self.next_rv();
        if let Some(Value::Object(meta)) = updated.get_mut("metadata") {
            meta.insert("resourceVersion".into(), rv.into());
        }
        self.events_v1.insert(key, updated.clone());
        (200, updated)
    }

    /// `GET .../events/{name}`.
    pub(crate) fn get_event_v1(&self, ns: &str, name: &str) -> Reply {
        match self.events_v1.get(&(ns.to_owned(), name.to_owned())) {
            Some(e) => (200, e.clone()),
            None => not_found("events.events.k8s.io", name),
        }
    }

    /// `DELETE .../events/{name}`.
    pub(crate) fn delete_event_v1(&mut self, ns: &str, name: &str) -> Reply {
        match self.events_v1.remove(&(ns.to_owned(), name.to_owned())) {
            Some(e) => (
                200,
                json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": name, "group": "events.k8s.io", "kind": "events",
                                "uid": str_at(&e, &["metadata", "uid"])},
                }),
            ),
            None => not_found("events.events.k8s.io", name),
        }
    }

    /// `GET .../events` (all namespaces for `None`), paginated by `limit` and `continue`.
    pub(crate) fn list_events_v1(&self, ns: Option<&str>, query: &ListQuery) -> Reply {
        list_reply(
            &self.events_v1,
            ns,
            events_v1::API_VERSION,
            self.resource_version,
            query,
        )
    }
}
