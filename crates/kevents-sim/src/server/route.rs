//! The routes: discovery, events of both APIs, namespaces, access reviews.

use hyper::Method;
use serde_json::{Value, json};

use super::replies::{method_not_allowed, unsupported_media_type};
use super::shared::{Shared, lock};
use crate::store::{self, ListQuery, Reply};

pub(super) fn now_rfc3339() -> String {
    kevents_core::SystemClock.now().to_rfc3339()
}

use kevents_core::Clock as _;

/// Decodes `%XX` escapes of one path segment (invalid escapes are kept as they are).
pub(super) fn percent_decode(seg: &str) -> String {
    let b = seg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn is_patch_type(ct: &str) -> bool {
    let ct = ct.split(';').next().unwrap_or("").trim();
    matches!(
        ct,
        "application/strategic-merge-patch+json" | "application/merge-patch+json"
    )
}

pub(super) fn route(
    shared: &Shared,
    method: &Method,
    segs: &[&str],
    query: &str,
    content_type: &str,
    body: &[u8],
    user: &str,
) -> Reply {
    let now = now_rfc3339();
    let list_query = || ListQuery::parse(query);
    match (segs, method) {
        (["version"], &Method::GET) => (
            200,
            json!({"major": "1", "minor": "20", "gitVersion": "v1.20.2",
                   "gitCommit": "kevents-sim", "platform": "linux/amd64"}),
        ),
        (["api"], &Method::GET) => (
            200,
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        ),
        (["api", "v1"], &Method::GET) => (
            200,
            json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "events", "singularName": "", "namespaced": true, "kind": "Event",
                 "verbs": ["create", "delete", "get", "list", "patch"]},
                {"name": "namespaces", "singularName": "", "namespaced": false, "kind": "Namespace",
                 "verbs": ["create", "get"]}]}),
        ),
        (["apis"], &Method::GET) => {
            let groups: Vec<Value> = if shared.events_v1_served {
                vec![json!({"name": "events.k8s.io", "versions": [
                    {"groupVersion": "events.k8s.io/v1", "version": "v1"}],
                    "preferredVersion": {"groupVersion": "events.k8s.io/v1", "version": "v1"}})]
            } else {
                vec![]
            };
            (
                200,
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            )
        }
        (["apis", "events.k8s.io", "v1"], &Method::GET) if shared.events_v1_served => (
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "events.k8s.io/v1",
                   "resources": [{"name": "events", "singularName": "", "namespaced": true,
                                  "kind": "Event", "verbs": ["create", "get", "list", "patch"]}]}),
        ),
        (["api", "v1", "namespaces"], &Method::POST) => {
            lock(&shared.store).create_namespace(body, &now)
        }
        (["api", "v1", "namespaces", ns], &Method::GET) => lock(&shared.store).get_namespace(ns),
        (["api", "v1", "namespaces", ns, "events"], &Method::POST) => {
            lock(&shared.store).create_event(ns, body, &now, user)
        }
        (["api", "v1", "namespaces", ns, "events"], &Method::GET) => match list_query() {
            Ok(q) => lock(&shared.store).list_events(Some(ns), &q),
            Err(r) => r,
        },
        (["api", "v1", "events"], &Method::GET) => match list_query() {
            Ok(q) => lock(&shared.store).list_events(None, &q),
            Err(r) => r,
        },
        (["api", "v1", "events"], _) => method_not_allowed(),
        (["api", "v1", "namespaces", ns, "events", name], &Method::GET) => {
            lock(&shared.store).get_event(ns, name)
        }
        (["api", "v1", "namespaces", ns, "events", name], &Method::DELETE) => {
            lock(&shared.store).delete_event(ns, name)
        }
        (["api", "v1", "namespaces", ns, "events", name], &Method::PATCH) => {
            if !is_patch_type(content_type) {
                return unsupported_media_type();
            }
            lock(&shared.store).patch_event(ns, name, body, user)
        }
        (["api", "v1", "namespaces", _, "events", ..], _) => method_not_allowed(),
        (["apis", "events.k8s.io", "v1", "namespaces", ns, "events"], &Method::POST)
            if shared.events_v1_served =>
        {
            lock(&shared.store).create_event_v1(ns, body, &now)
        }
        (["apis", "events.k8s.io", "v1", "namespaces", ns, "events"], &Method::GET)
            if shared.events_v1_served =>
        {
            match list_query() {
                Ok(q) => lock(&shared.store).list_events_v1(Some(ns), &q),
                Err(r) => r,
            }
        }
        (["apis", "events.k8s.io", "v1", "events"], &Method::GET) if shared.events_v1_served => {
            match list_query() {
                Ok(q) => lock(&shared.store).list_events_v1(None, &q),
                Err(r) => r,
            }
        }
        (
            [
                "apis",
                "events.k8s.io",
                "v1",
                "namespaces",
                ns,
                "events",
                name,
            ],
            &Method::GET,
        ) if shared.events_v1_served => lock(&shared.store).get_event_v1(ns, name),
        (
            [
                "apis",
                "events.k8s.io",
                "v1",
                "namespaces",
                ns,
                "events",
                name,
            ],
            &Method::DELETE,
        ) if shared.events_v1_served => lock(&shared.store).delete_event_v1(ns, name),
        (
            [
                "apis",
                "events.k8s.io",
                "v1",
                "namespaces",
                ns,
                "events",
                name,
            ],
            &Method::PATCH,
        ) if shared.events_v1_served => {
            if !is_patch_type(content_type) {
                return unsupported_media_type();
            }
            lock(&shared.store).patch_event_v1(ns, name, body)
        }
        (["apis", "events.k8s.io", "v1", "namespaces", _, "events", ..], _)
            if shared.events_v1_served =>
        {
            method_not_allowed()
        }
        (["api", ..], _) => store::no_route(),
        // Outside /api the apiserver's mux answers in plain text.
        _ => (404, Value::String("404 page not found\n".into())),
    }
}
