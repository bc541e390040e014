//! The simulated apiserver's objects (events of both APIs, namespaces) and what the handlers
//! of both event APIs share (`Status` bodies, body decoding, strategic merge), answering with
//! the same status codes and `Status` bodies as kube-apiserver 1.20 (recorded against the real
//! one, see the conformance suite in `kevents-testkit`). The event handlers are in
//! [`core_v1`] (`/api/v1`) and [`events_v1`] (`/apis/events.k8s.io/v1`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::rate_limit::{EventRateLimiter, EventWrite, Throttled, source_and_object_key};

// The event handlers of each API, named by it (child modules: they share the Status plumbing).
mod core_v1;
mod events_v1;

/// An HTTP answer: code and JSON body.
pub(crate) type Reply = (u16, Value);

/// A `metav1.Status` failure body.
pub(crate) fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut s = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let (Some(d), Value::Object(m)) = (details, &mut s) {
        m.insert("details".into(), d);
    }
    s
}

fn name_details(name: &str, kind: &str) -> Value {
    json!({"name": name, "kind": kind})
}

pub(crate) fn not_found(kind: &str, name: &str) -> Reply {
    (
        404,
        status(
            404,
            "NotFound",
            &format!("{kind} \"{name}\" not found"),
            Some(name_details(name, kind)),
        ),
    )
}

/// The 404 of an unknown path.
pub(crate) fn no_route() -> Reply {
    (
        404,
        status(
            404,
            "NotFound",
            "the server could not find the requested resource",
            Some(json!({})),
        ),
    )
}

pub(crate) fn bad_request(message: &str) -> Reply {
    (400, status(400, "BadRequest", message, None))
}

const MISMATCH: &str =
    "the namespace of the provided object does not match the namespace sent on the request";

/// One field error, rendered as the apiserver's `field.Error`.
struct FieldError {
    field: &'static str,
    reason: &'static str,
    message: String,
}

impl FieldError {
    fn required(field: &'static str, detail: &str) -> Self {
        FieldError {
            field,
            reason: "FieldValueRequired",
            message: if detail.is_empty() {
                "Required value".into()
            } else {
                format!("Required value: {detail}")
            },
        }
    }
    fn invalid(field: &'static str, value: &str, detail: &str) -> Self {
        FieldError {
            field,
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {}: {detail}", go_quote(value)),
        }
    }
    fn too_long(field: &'static str, max: usize) -> Self {
        FieldError {
            field,
            reason: "FieldValueTooLong",
            message: format!("Too long: must have at most {max} bytes"),
        }
    }
}

fn go_quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// The 422 `Invalid` answer for `errors` on Event `name`.
fn invalid(name: &str, errors: &[FieldError]) -> Reply {
    let parts: Vec<String> = errors
        .iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect();
    let list = if parts.len() == 1 {
        parts[0].clone()
    } else {
        format!("[{}]", parts.join(", "))
    };
    let mut details = Map::new();
    if !name.is_empty() {
        details.insert("name".into(), name.into());
    }
    details.insert("kind".into(), "Event".into());
    details.insert(
        "causes".into(),
        errors
            .iter()
            .map(|e| json!({"reason": e.reason, "message": e.message, "field": e.field}))
            .collect(),
    );
    (
        422,
        status(
            422,
            "Invalid",
            &format!("Event {} is invalid: {list}", go_quote(name)),
            Some(Value::Object(details)),
        ),
    )
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(p) {
            Some(next) => cur = next,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

/// An Event body of a create: a JSON object, else the apiserver's 400.
fn decode_event_body(body: &[u8]) -> Result<Value, Reply> {
    match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(bad_request(
            "the object provided is unrecognized (must be of type Event): json: cannot unmarshal into Go value of type Event",
        )),
        Err(e) => Err(bad_request(&format!(
            "the object provided is unrecognized (must be of type Event): couldn't get version/kind; json parse error: {e}"
        ))),
    }
}

/// A patch body: a JSON object, else the apiserver's 400.
fn decode_patch(patch: &[u8]) -> Result<Value, Reply> {
    match serde_json::from_slice(patch) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(bad_request(
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        )),
        Err(e) => Err(bad_request(&e.to_string())),
    }
}

/// What the server sets on a created event: `uid`, `resourceVersion`, `creationTimestamp`,
/// `kind` and `apiVersion`.
fn stamp_created(ev: &mut Value, rv: String, now: &str, api_version: &str) {
    if let Some(Value::Object(meta)) = ev.get_mut("metadata") {
        meta.insert("uid".into(), uuid::Uuid::new_v4().to_string().into());
        meta.insert("resourceVersion".into(), rv.into());
        meta.insert("creationTimestamp".into(), now.into());
    }
    if let Value::Object(m) = ev {
        m.insert("kind".into(), "Event".into());
        m.insert("apiVersion".into(), api_version.into());
    }
}

/// The checks of a PATCH of `resource` `ns`/`name` before validation: a stale
/// `resourceVersion` in the patch (409 `Conflict`), a patched name or namespace (400).
fn check_patched(
    current: &Value,
    patch: &Value,
    updated: &Value,
    ns: &str,
    name: &str,
    resource: &str,
) -> Result<(), Reply> {
    let current_rv = str_at(current, &["metadata", "resourceVersion"]);
    let patch_rv = str_at(patch, &["metadata", "resourceVersion"]);
    if !patch_rv.is_empty() && patch_rv != current_rv {
        return Err((
            409,
            status(
                409,
                "Conflict",
                &format!(
                    "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
                ),
                Some(name_details(name, "events")),
            ),
        ));
    }
    let new_name = str_at(updated, &["metadata", "name"]);
    if new_name != name {
        return Err(bad_request(&format!(
            "the name of the object ({new_name}) does not match the name on the URL ({name})"
        )));
    }
    if str_at(updated, &["metadata", "namespace"]) != ns {
        return Err(bad_request(MISMATCH));
    }
    Ok(())
}

/// The paging parameters of a list request (`limit`, `continue`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ListQuery {
    /// At most this many items (`None` or 0: all).
    pub(crate) limit: Option<usize>,
    /// Start after this `(namespace, name)` (from a `continue` token).
    pub(crate) after: Option<(String, String)>,
}

/// Decodes one `application/x-www-form-urlencoded` component (`+` is a space, `%XX` a byte).
fn form_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                }
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A `continue` token for a list that goes on after `(namespace, name)`.
fn continue_token(key: &(String, String)) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(json!([key.0, key.1]).to_string())
}

impl ListQuery {
    /// `limit` and `continue` of a query string; a `continue` token this server did not
    /// make is the apiserver's 400.
    pub(crate) fn parse(query: &str) -> Result<Self, Reply> {
        use base64::Engine as _;
        let mut q = ListQuery::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match form_decode(k).as_str() {
                "limit" => q.limit = form_decode(v).parse().ok().filter(|n| *n > 0),
                "continue" => {
                    let token = form_decode(v);
                    if token.is_empty() {
                        continue;
                    }
                    let key = base64::engine::general_purpose::STANDARD
                        .decode(token.as_bytes())
                        .ok()
                        .and_then(|raw| serde_json::from_slice::<(String, String)>(&raw).ok())
                        .ok_or_else(|| bad_request("continue key is not valid"))?;
                    q.after = Some(key);
                }
                _ => {}
            }
        }
        Ok(q)
    }
}

/// The `EventList` (of `api_version`) of the events of `ns` in `events` (all for `None`), one
/// page of it as `query` asks (with a `continue` token when more are left).
fn list_reply(
    events: &BTreeMap<(String, String), Value>,
    ns: Option<&str>,
    api_version: &str,
    resource_version: u64,
    query: &ListQuery,
) -> Reply {
    let mut matching = events
        .iter()
        .filter(|((n, _), _)| ns.is_none_or(|want| want == n))
        .filter(|(k, _)| query.after.as_ref().is_none_or(|after| *k > after));
    let limit = query.limit.unwrap_or(usize::MAX);
    let mut items = Vec::new();
    let mut last = None;
    for (k, v) in matching.by_ref().take(limit) {
        items.push(v.clone());
        last = Some(k);
    }
    let mut metadata = json!({"resourceVersion": resource_version.to_string()});
    let remaining = matching.count();
    if let Some(last) = last.filter(|_| remaining > 0) {
        metadata["continue"] = continue_token(last).into();
        metadata["remainingItemCount"] = remaining.into();
    }
    (
        200,
        json!({
            "kind": "EventList", "apiVersion": api_version,
            "metadata": metadata,
            "items": items,
        }),
    )
}

/// Strategic merge for an Event: maps merge key by key, `null` deletes, anything else
/// (scalars, lists) replaces. Directives (`$patch`, `$retainKeys`) are not supported.
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    match t.get_mut(k) {
                        Some(existing) if existing.is_object() && v.is_object() => {
                            merge(existing, v)
                        }
                        _ => {
                            let mut fresh = Value::Object(Map::new());
                            if v.is_object() {
                                merge(&mut fresh, v);
                            } else {
                                fresh = v.clone();
                            }
                            t.insert(k.clone(), fresh);
                        }
                    }
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// The `Status` body of the plugin's 429, as kube-apiserver sends it (no `reason`, no
/// `details`).
fn throttled_status(t: &Throttled) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": t.message,
        "code": 429,
    })
}

/// All objects of one simulated apiserver.
#[derive(Debug)]
pub(crate) struct Store {
    pub(crate) events: BTreeMap<(String, String), Value>,
    /// `events.k8s.io/v1` events.
    pub(crate) events_v1: BTreeMap<(String, String), Value>,
    pub(crate) namespaces: BTreeSet<String>,
    pub(crate) require_namespaces: bool,
    pub(crate) resource_version: u64,
    /// The `EventRateLimit` admission plugin, when configured.
    pub(crate) rate_limiter: Option<EventRateLimiter>,
}

impl Store {
    /// Asks the `EventRateLimit` plugin (if configured) to admit a core/v1 event write by
    /// `user` in `namespace`; the 429 answer when it refuses.
    pub(crate) fn admit(
        &mut self,
        namespace: &str,
        user: &str,
        event: &Value,
    ) -> Result<(), Reply> {
        let Some(limiter) = &mut self.rate_limiter else {
            return Ok(());
        };
        let source_and_object = source_and_object_key(event);
        let write = EventWrite {
            namespace,
            user,
            source_and_object: &source_and_object,
        };
        limiter
            .admit(std::time::Instant::now(), write)
            .map_err(|t| (429, throttled_status(&t)))
    }

    pub(crate) fn new(namespaces: Option<&[String]>, start_rv: u64) -> Self {
        Store {
            events: BTreeMap::new(),
            events_v1: BTreeMap::new(),
            namespaces: namespaces
                .map(|n| n.iter().cloned().collect())
                .unwrap_or_default(),
            require_namespaces: namespaces.is_some(),
            resource_version: start_rv,
            rate_limiter: None,
        }
    }

    fn next_rv(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        !self.require_namespaces || self.namespaces.contains(ns)
    }

    pub(crate) fn create_namespace(&mut self, body: &[u8], now: &str) -> Reply {
        let v: Value = match serde_json::from_slice(body) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return bad_request(
                    "the object provided is unrecognized (must be of type Namespace)",
                );
            }
        };
        let name = str_at(&v, &["metadata", "name"]).to_owned();
        if name.is_empty() {
            return (
                422,
                status(
                    422,
                    "Invalid",
                    "Namespace \"\" is invalid: metadata.name: Required value: name or generateName is required",
                    Some(json!({"kind": "Namespace", "causes": [{
                        "reason": "FieldValueRequired",
                        "message": "Required value: name or generateName is required",
                        "field": "metadata.name"}]})),
                ),
            );
        }
        if self.namespaces.contains(&name) {
            return (
                409,
                status(
                    409,
                    "AlreadyExists",
                    &format!("namespaces \"{name}\" already exists"),
                    Some(name_details(&name, "namespaces")),
                ),
            );
        }
        self.namespaces.insert(name.clone());
        let rv = self.next_rv();
        (201, namespace_object(&name, &rv, now))
    }

    pub(crate) fn get_namespace(&self, name: &str) -> Reply {
        if self.namespaces.contains(name) || !self.require_namespaces {
            (
                200,
                namespace_object(name, &self.resource_version.to_string(), ""),
            )
        } else {
            not_found("namespaces", name)
        }
    }
}

fn namespace_object(name: &str, rv: &str, now: &str) -> Value {
    json!({
        "kind": "Namespace", "apiVersion": "v1",
        "metadata": {"name": name, "resourceVersion": rv,
                     "creationTimestamp": if now.is_empty() { Value::Null } else { now.into() }},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_paginated_with_continue_tokens() {
        let events: BTreeMap<(String, String), Value> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|n| (("ns".to_owned(), (*n).to_owned()), json!({"name": n})))
            .chain([(("other".to_owned(), "z".to_owned()), json!({"name": "z"}))])
            .collect();
        let mut query = ListQuery::parse("limit=2").unwrap();
        let mut names = Vec::new();
        loop {
            let (code, body) = list_reply(&events, Some("ns"), "v1", 7, &query);
            assert_eq!(code, 200);
            for item in body["items"].as_array().unwrap() {
                names.push(item["name"].as_str().unwrap().to_owned());
            }
            let Some(token) = body["metadata"]["continue"].as_str() else {
                break;
            };
            // As the client sends it: form-encoded.
            let encoded = token
                .replace('+', "%2B")
                .replace('=', "%3D")
                .replace('/', "%2F");
            query = ListQuery::parse(&format!("limit=2&continue={encoded}")).unwrap();
        }
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
        let all = list_reply(&events, None, "v1", 7, &ListQuery::default()).1;
        assert_eq!(all["items"].as_array().unwrap().len(), 6);
        assert!(all["metadata"].get("continue").is_none());
        assert_eq!(
            ListQuery::parse("continue=bm9wZQ%3D%3D").unwrap_err().0,
            400
        );
        assert_eq!(form_decode("a+b%2Fc%zz%4"), "a b/c%zz%4");
    }

    #[test]
    fn merge_is_recursive_and_null_deletes() {
        let mut t = json!({"source": {"component": "c"}, "lastTimestamp": "x", "count": 1});
        merge(
            &mut t,
            &json!({"source": {"host": "h"}, "lastTimestamp": null, "count": 2}),
        );
        assert_eq!(
            t,
            json!({"source": {"component": "c", "host": "h"}, "count": 2})
        );
    }
}
