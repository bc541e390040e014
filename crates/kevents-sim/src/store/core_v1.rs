//! `/api/v1/namespaces/{ns}/events[/{name}]` as kube-apiserver 1.20 answers it: legacy
//! validation on create and patch (the apiserver's `ValidateEvent`), 409 `AlreadyExists`, 404 on a PATCH of a
//! missing event, strategic merge on PATCH.

use serde_json::{Map, Value, json};

use super::{
    FieldError, ListQuery, MISMATCH, Reply, Store, bad_request, check_patched, decode_event_body,
    decode_patch, go_quote, invalid, list_reply, merge, name_details, not_found, stamp_created,
    status, str_at,
};

/// Legacy (core/v1) event validation (the apiserver's `ValidateEvent`).
fn validate_event(ev: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let name = str_at(ev, &["metadata", "name"]);
    let ns = str_at(ev, &["metadata", "namespace"]);
    if name.is_empty() {
        if str_at(ev, &["metadata", "generateName"]).is_empty() {
            errs.push(FieldError::required(
                "metadata.name",
                "name or generateName is required",
            ));
        }
    } else if name == "." || name == ".." {
        errs.push(FieldError::invalid(
            "metadata.name",
            name,
            &format!("may not be '{name}'"),
        ));
    } else {
        for bad in ["/", "%"] {
            if name.contains(bad) {
                errs.push(FieldError::invalid(
                    "metadata.name",
                    name,
                    &format!("may not contain '{bad}'"),
                ));
            }
        }
    }
    let annotations_len: usize = ev
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.as_object())
        .map(|a| {
            a.iter()
                .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
                .sum()
        })
        .unwrap_or(0);
    if annotations_len > 256 * 1024 {
        errs.push(FieldError::too_long("metadata.annotations", 256 * 1024));
    }
    let io_ns = str_at(ev, &["involvedObject", "namespace"]);
    let event_time_set = ev.get("eventTime").is_some_and(|t| !t.is_null());
    if !event_time_set {
        if io_ns.is_empty() {
            if !(ns.is_empty() || ns == "default") {
                errs.push(FieldError::invalid(
                    "involvedObject.namespace",
                    io_ns,
                    "does not match event.namespace",
                ));
            }
        } else if io_ns != ns {
            errs.push(FieldError::invalid(
                "involvedObject.namespace",
                io_ns,
                "does not match event.namespace",
            ));
        }
    } else {
        if io_ns.is_empty() {
            if ns != "kube-system" {
                errs.push(FieldError::invalid(
                    "involvedObject.namespace",
                    io_ns,
                    "does not match event.namespace",
                ));
            }
        } else if io_ns != ns {
            errs.push(FieldError::invalid(
                "involvedObject.namespace",
                io_ns,
                "does not match event.namespace",
            ));
        }
        let rc = str_at(ev, &["reportingComponent"]);
        if rc.is_empty() {
            errs.push(FieldError::required("reportingController", ""));
            errs.push(FieldError::invalid(
                "reportingController",
                rc,
                "name part must be non-empty",
            ));
        }
        let part = rc.rsplit('/').next().unwrap_or(rc);
        if !kevents_core::name::is_qualified_name_part(part) {
            errs.push(FieldError::invalid(
                "reportingController",
                rc,
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ));
        }
        for (field, json_name, max) in [
            ("reportingInstance", "reportingInstance", 128usize),
            ("action", "action", 128),
            ("reason", "reason", 128),
        ] {
            let v = str_at(ev, &[json_name]);
            if v.is_empty() {
                errs.push(FieldError::required(field, ""));
            } else if v.len() > max {
                errs.push(FieldError::too_long(field, max));
            }
        }
        if str_at(ev, &["message"]).len() > 1024 {
            errs.push(FieldError::too_long("message", 1024));
        }
    }
    errs
}

impl Store {
    /// `POST /api/v1/namespaces/{ns}/events`.
    pub(crate) fn create_event(
        &mut self,
        url_ns: &str,
        body: &[u8],
        now: &str,
        user: &str,
    ) -> Reply {
        let mut ev = match decode_event_body(body) {
            Ok(v) => v,
            Err(r) => return r,
        };
        if !self.namespace_exists(url_ns) {
            return not_found("namespaces", url_ns);
        }
        let meta = match ev.get_mut("metadata") {
            Some(Value::Object(m)) => m,
            _ => {
                if let Value::Object(m) = &mut ev {
                    m.insert("metadata".into(), Value::Object(Map::new()));
                }
                match ev.get_mut("metadata") {
                    Some(Value::Object(m)) => m,
                    _ => return bad_request("metadata is not an object"),
                }
            }
        };
        match meta.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("namespace".into(), url_ns.into());
            }
            Some(ns) if ns != url_ns => return bad_request(MISMATCH),
            Some(_) => {}
        }
        let errs = validate_event(&ev);
        let name = str_at(&ev, &["metadata", "name"]).to_owned();
        if !errs.is_empty() {
            return invalid(&name, &errs);
        }
        // Admission runs after validation and before storage.
        if let Err(r) = self.admit(url_ns, user, &ev) {
            return r;
        }
        let key = (url_ns.to_owned(), name.clone());
        if self.events.contains_key(&key) {
            return (
                409,
                status(
                    409,
                    "AlreadyExists",
                    &format!("events \"{name}\" already exists"),
                    Some(name_details(&name, "events")),
                ),
            );
        }
        let rv = self.next_rv();
        stamp_created(&mut ev, rv, now, "v1");
        self.events.insert(key, ev.clone());
        (201, ev)
    }

    /// `PATCH /api/v1/namespaces/{ns}/events/{name}` (strategic-merge or merge patch).
    pub(crate) fn patch_event(&mut self, ns: &str, name: &str, patch: &[u8], user: &str) -> Reply {
        let key = (ns.to_owned(), name.to_owned());
        let Some(current) = self.events.get(&key) else {
            return not_found("events", name);
        };
        let patch = match decode_patch(patch) {
            Ok(v) => v,
            Err(r) => return r,
        };
        let mut updated = current.clone();
        merge(&mut updated, &patch);
        if let Err(r) = check_patched(current, &patch, &updated, ns, name, "events") {
            return r;
        }
        if let Err(e) = serde_json::from_value::<kevents_core::Event>(updated.clone()) {
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
                    Some(json!({"causes": [{
                        "reason": "FieldValueInvalid",
                        "message": format!("Invalid value: {}: {e}", go_quote(&patch_text)),
                        "field": "patch",
                    }]})),
                ),
            );
        }
        let errs = validate_event(&updated);
        if !errs.is_empty() {
            return invalid(name, &errs);
        }
        // A PATCH is an update to the plugin, admitted on the patched event.
        if let Err(r) = self.admit(ns, user, &updated) {
            return r;
        }
        let rv = self.next_rv();
        if let Some(Value::Object(meta)) = updated.get_mut("metadata") {
            meta.insert("resourceVersion".into(), rv.into());
        }
        self.events.insert(key, updated.clone());
        (200, updated)
    }

    pub(crate) fn get_event(&self, ns: &str, name: &str) -> Reply {
        match self.events.get(&(ns.to_owned(), name.to_owned())) {
            Some(e) => (200, e.clone()),
            None => not_found("events", name),
        }
    }

    pub(crate) fn delete_event(&mut self, ns: &str, name: &str) -> Reply {
        match self.events.remove(&(ns.to_owned(), name.to_owned())) {
            Some(e) => (
                200,
                json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": name, "kind": "events",
                                "uid": str_at(&e, &["metadata", "uid"])},
                }),
            ),
            None => not_found("events", name),
        }
    }

    /// `GET .../events` (all namespaces for `None`), paginated by `limit` and `continue`.
    pub(crate) fn list_events(&self, ns: Option<&str>, query: &ListQuery) -> Reply {
        list_reply(&self.events, ns, "v1", self.resource_version, query)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "2021-01-01T00:00:00Z";

    fn ev(name: &str, ns: &str, io_ns: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "kind": "Event", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": null},
            "involvedObject": {"kind": "Pod", "namespace": io_ns, "name": "p"},
            "count": 1, "eventTime": null, "message": "m",
        }))
        .unwrap()
    }

    #[test]
    fn create_patch_and_errors() {
        let mut s = Store::new(Some(&["default".to_owned()]), 100);
        let (code, body) = s.create_event("default", &ev("a.1", "default", "default"), T, "");
        assert_eq!(code, 201);
        assert_eq!(body["metadata"]["resourceVersion"], "101");
        assert_eq!(
            s.create_event("default", &ev("a.1", "default", "default"), T, "")
                .0,
            409
        );
        assert_eq!(
            s.create_event("nope", &ev("a.2", "nope", "nope"), T, "").0,
            404
        );
        assert_eq!(
            s.create_event("default", &ev("a.3", "other", "x"), T, "").0,
            400
        );
        let (code, body) = s.create_event("default", &ev("a.4", "default", "other"), T, "");
        assert_eq!(code, 422);
        assert_eq!(
            body["details"]["causes"][0]["field"],
            "involvedObject.namespace"
        );
        let (code, body) = s.patch_event("default", "a.1", br#"{"count":2,"message":"x"}"#, "");
        assert_eq!(code, 200);
        assert_eq!(
            (body["count"].clone(), body["message"].clone()),
            (json!(2), json!("x"))
        );
        assert_eq!(body["metadata"]["resourceVersion"], "102");
        assert_eq!(s.patch_event("default", "gone", b"{}", "").0, 404);
        assert_eq!(s.patch_event("default", "a.1", b"[1]", "").0, 400);
        assert_eq!(
            s.patch_event("default", "a.1", br#"{"count":"x"}"#, "").0,
            422
        );
        assert_eq!(
            s.patch_event(
                "default",
                "a.1",
                br#"{"metadata":{"resourceVersion":"1"}}"#,
                ""
            )
            .0,
            409
        );
    }
}
