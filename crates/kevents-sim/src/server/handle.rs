//! One request: authentication (bearer token or client certificate), authorisation, the
//! fault plan, the route, the answer.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{Value, json};

use super::injected::{Injected, draw_fault, endless, with_message};
use super::replies::{forbidden, json_response, padded, text_response};
use super::route::{percent_decode, route};
use super::shared::{ConnCtl, Shared, User, lock};
use crate::access_review;
use crate::faults::FaultBody;
use crate::flow_control::{RETRY_AFTER_SECONDS, Seat, TOO_MANY_REQUESTS_BODY};
use crate::store::status;

/// Largest request body accepted (the apiserver's limit is 3 MiB).
const MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;

/// The seat of an event write when flow control is on (`None` for anything else, and for
/// an unknown token, which is answered 401 later); a refusal's 429 as the apiserver sends it.
async fn flow_seat(
    shared: &Shared,
    method: &Method,
    path: &str,
    auth: Option<&str>,
    cert_user: Option<&User>,
) -> Result<Option<Seat>, Response<Full<Bytes>>> {
    let Some(flow) = &shared.flow else {
        return Ok(None);
    };
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let event_write = matches!(
        (method, segs.as_slice()),
        (
            &Method::POST,
            ["api", "v1", "namespaces", _, "events"]
                | ["apis", "events.k8s.io", "v1", "namespaces", _, "events"]
        ) | (
            &Method::PATCH,
            ["api", "v1", "namespaces", _, "events", _]
                | ["apis", "events.k8s.io", "v1", "namespaces", _, "events", _]
        )
    );
    if !event_write {
        return Ok(None);
    }
    let user = match (&shared.tokens, cert_user) {
        (None, _) => String::new(),
        (Some(_), Some(u)) => u.name.clone(),
        (Some(tokens), None) => match auth.and_then(|a| a.strip_prefix("Bearer ")) {
            None => "system:anonymous".to_owned(),
            Some(token) => match lock(tokens).iter().find(|(t, _)| t == token.trim()) {
                Some((_, u)) => u.name.clone(),
                None => return Ok(None),
            },
        },
    };
    match flow.admit(&user).await {
        Ok(seat) => Ok(Some(seat)),
        Err(_) => {
            {
                let mut stats = lock(&shared.stats);
                stats.requests += 1;
                stats.throttled += 1;
            }
            let mut resp = text_response(429, TOO_MANY_REQUESTS_BODY);
            let headers = resp.headers_mut();
            headers.insert(
                hyper::header::RETRY_AFTER,
                hyper::header::HeaderValue::from(RETRY_AFTER_SECONDS),
            );
            headers.insert(
                hyper::header::CACHE_CONTROL,
                hyper::header::HeaderValue::from_static("no-cache, private"),
            );
            headers.insert(
                hyper::header::X_CONTENT_TYPE_OPTIONS,
                hyper::header::HeaderValue::from_static("nosniff"),
            );
            Err(resp)
        }
    }
}

pub(super) async fn handle(
    shared: Arc<Shared>,
    ctl: Arc<ConnCtl>,
    req: Request<Incoming>,
    cert_user: Option<User>,
) -> Response<Full<Bytes>> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let auth = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let content_type = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    // API Priority and Fairness sits after authentication and before the body is read: a
    // seat is held from here to the answer.
    let _seat = match flow_seat(&shared, &method, &path, auth.as_deref(), cert_user.as_ref()).await
    {
        Ok(seat) => seat,
        Err(reply) => return reply,
    };
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return json_response(
                413,
                &status(
                    413,
                    "RequestEntityTooLarge",
                    "the request body is too large",
                    None,
                ),
            );
        }
    };
    lock(&shared.stats).requests += 1;

    let (latency, injected, shaping) = draw_fault(&shared);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if lock(&shared.faults).unresponsive {
        return std::future::pending().await;
    }
    match injected {
        Injected::None => {}
        Injected::Reset => {
            lock(&shared.stats).resets += 1;
            ctl.reset();
            return std::future::pending().await;
        }
        Injected::Error(code, retry_after, body, headers) => {
            lock(&shared.stats).injected_errors += 1;
            let mut resp = match body {
                FaultBody::Status => {
                    let (reason, message) = match code {
                        429 => (
                            "TooManyRequests",
                            "too many requests, please try again later",
                        ),
                        500 => ("InternalError", "Internal error occurred: injected fault"),
                        503 => (
                            "ServiceUnavailable",
                            "the server is currently unable to handle the request",
                        ),
                        504 => (
                            "Timeout",
                            "the server was unable to return a response in the time allotted",
                        ),
                        _ => ("Unknown", "injected fault"),
                    };
                    let details = retry_after.map(|s| json!({"retryAfterSeconds": s}));
                    json_response(code, &status(code, reason, message, details))
                }
                FaultBody::Text(t) => text_response(code, t),
                FaultBody::Json(t) => {
                    let mut resp = text_response(code, t);
                    resp.headers_mut().insert(
                        hyper::header::CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static("application/json"),
                    );
                    resp
                }
            };
            if let Some(s) = retry_after
                && let Ok(v) = hyper::header::HeaderValue::from_str(&s.to_string())
            {
                resp.headers_mut().insert(hyper::header::RETRY_AFTER, v);
            }
            for (k, v) in headers {
                if let (Ok(k), Ok(v)) = (
                    hyper::header::HeaderName::try_from(k.as_str()),
                    hyper::header::HeaderValue::try_from(v.as_str()),
                ) {
                    resp.headers_mut().insert(k, v);
                }
            }
            return resp;
        }
    }

    if matches!(path.as_str(), "/healthz" | "/readyz" | "/livez") {
        return text_response(200, "ok");
    }
    let decoded: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let discovery = matches!(segs.first(), Some(&"version"))
        || matches!(
            segs.as_slice(),
            ["api"] | ["api", "v1"] | ["apis"] | ["apis", _, _]
        );

    // Authentication and authorisation.
    // As kube-apiserver's union authenticator: a client certificate first, then a token.
    // Any authenticated user may ask what it may do (a SelfSubjectAccessReview).
    let review = method == Method::POST && access_review::is_review(&segs);
    let mut authorized = true;
    // Who the `EventRateLimit` plugin's `User` limit sees (no user without authentication).
    let mut user_name = String::new();
    if let Some(tokens) = &shared.tokens {
        let bearer = auth.as_deref().and_then(|a| a.strip_prefix("Bearer "));
        let user = match (cert_user, bearer) {
            (Some(u), _) => u,
            (None, None) => User {
                name: "system:anonymous".into(),
                authorized: false,
            },
            (None, Some(token)) => match lock(tokens).iter().find(|(t, _)| t == token.trim()) {
                Some((_, u)) => u.clone(),
                None => {
                    return json_response(401, &status(401, "Unauthorized", "Unauthorized", None));
                }
            },
        };
        authorized = user.authorized;
        user_name.clone_from(&user.name);
        // A SelfSubjectAccessReview needs an authenticated user, not rights.
        let may_review = review && user.name != "system:anonymous";
        if !user.authorized && !discovery && !may_review {
            let (code, body) = forbidden(&user.name, &method, &segs);
            return json_response(code, &body);
        }
    }

    if review {
        let (code, body) = access_review::answer(authorized, &body);
        return json_response(code, &body);
    }

    let request_number = lock(&shared.stats).requests;
    let body = match (&shaping.stored_message, &method, segs.as_slice()) {
        (Some(m), &Method::POST, ["api", "v1", "namespaces", _, "events"]) => {
            Bytes::from(with_message(&body, "message", m))
        }
        (Some(m), &Method::POST, ["apis", "events.k8s.io", "v1", "namespaces", _, "events"]) => {
            Bytes::from(with_message(&body, "note", m))
        }
        _ => body,
    };
    // An endless list ignores the `continue` it is sent (it made it up).
    let query = match shaping.list {
        Some(_) => query
            .split('&')
            .filter(|p| !p.starts_with("continue="))
            .collect::<Vec<_>>()
            .join("&"),
        None => query,
    };
    let (code, body) = route(
        &shared,
        &method,
        &segs,
        &query,
        &content_type,
        &body,
        &user_name,
    );
    let (code, body) = match shaping.list {
        Some(kind) if method == Method::GET && segs.last() == Some(&"events") => {
            endless((code, body), kind, request_number)
        }
        _ => (code, body),
    };
    if (200..300).contains(&code) {
        let mut stats = lock(&shared.stats);
        match method {
            Method::POST => stats.creates += 1,
            Method::PATCH => stats.patches += 1,
            _ => {}
        }
    } else if code == 429 {
        lock(&shared.stats).throttled += 1;
    }
    let pad_to = if (200..300).contains(&code) {
        shaping.pad_success_to
    } else {
        0
    };
    match body {
        Value::String(text) => text_response(code, padded(text.into_bytes(), pad_to)),
        body => {
            let bytes = padded(serde_json::to_vec(&body).unwrap_or_default(), pad_to);
            let mut resp = text_response(code, bytes);
            resp.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            resp
        }
    }
}
