//! The answers the handler and the routes share: JSON and text responses, the apiserver's
//! own errors (403, 405, 415), padding.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Response};
use serde_json::{Value, json};

use crate::store::{Reply, status};

pub(super) fn json_response(code: u16, body: &Value) -> Response<Full<Bytes>> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(bytes)));
    *resp.status_mut() =
        hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

pub(super) fn text_response(code: u16, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() =
        hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// `bytes` with trailing spaces (the same JSON or text) up to at least `to` bytes.
pub(super) fn padded(mut bytes: Vec<u8>, to: usize) -> Vec<u8> {
    if bytes.len() < to {
        bytes.resize(to, b' ');
    }
    bytes
}

/// The 403 the RBAC authorizer gives a user without rights.
pub(super) fn forbidden(user: &str, method: &Method, segs: &[&str]) -> Reply {
    let (ns, resource, name) = match segs {
        ["api", "v1", "namespaces", ns, resource] => (Some(*ns), *resource, None),
        ["api", "v1", "namespaces", ns, resource, name, ..] => (Some(*ns), *resource, Some(*name)),
        ["api", "v1", "namespaces", name] => (None, "namespaces", Some(*name)),
        ["api", "v1", resource] => (None, *resource, None),
        _ => (None, "", None),
    };
    let verb = match (method, name) {
        (&Method::POST, _) => "create",
        (&Method::PATCH, _) => "patch",
        (&Method::PUT, _) => "update",
        (&Method::DELETE, _) => "delete",
        (_, Some(_)) => "get",
        (_, None) => "list",
    };
    let subject = match name {
        Some(n) => format!("{resource} \"{n}\""),
        None => resource.to_owned(),
    };
    let scope = match ns {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_owned(),
    };
    let mut details = serde_json::Map::new();
    if let Some(n) = name {
        details.insert("name".into(), n.into());
    }
    details.insert("kind".into(), resource.into());
    (
        403,
        status(
            403,
            "Forbidden",
            &format!(
                "{subject} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"\" {scope}"
            ),
            Some(Value::Object(details)),
        ),
    )
}

pub(super) fn method_not_allowed() -> Reply {
    (
        405,
        status(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            Some(json!({})),
        ),
    )
}

/// The 415 of a PATCH whose content type is no patch type.
pub(super) fn unsupported_media_type() -> Reply {
    (
        415,
        status(
            415,
            "UnsupportedMediaType",
            "415: Unsupported Media Type",
            Some(json!({})),
        ),
    )
}
