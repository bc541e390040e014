//! The scale simulator's HTTP side: `GET` list and watch of events of both APIs, with
//! kube-apiserver's paging, `resourceVersion`/`resourceVersionMatch` semantics, continue
//! tokens, bookmarks and 410 Gone; `/version`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{Either, Full, channel::Channel};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::Shared;
use super::render;
use super::store::{Api, Scope};

pub(crate) type Body = Either<Full<Bytes>, Channel<Bytes>>;

/// Changes read from the history per lock taken by a watch.
const WATCH_BATCH: usize = 1000;
/// Events listed per lock taken for a watch's initial ADDED events.
const INITIAL_PAGE: usize = 500;
/// The watch timeout when the request gives none (kube-apiserver picks one between its
/// `--min-request-timeout` of 1800 s and twice that).
const DEFAULT_WATCH_TIMEOUT: u64 = 1800;

/// The accept loop, until `stop` fires.
pub(crate) async fn serve_scale(
    shared: Arc<Shared>,
    listener: TcpListener,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
        let stream = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => s,
                Err(_) => continue,
            },
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(shared, req)) }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn reply(code: u16, body: Vec<u8>) -> Response<Body> {
    let mut r = Response::new(Either::Left(Full::new(Bytes::from(body))));
    *r.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::OK);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

fn failure(code: u16, reason: &str, message: &str) -> Response<Body> {
    reply(code, render::status_body(code, reason, message))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query(q: Option<&str>) -> HashMap<String, String> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// The API and scope of an events path.
fn route(path: &str) -> Option<(Api, Scope)> {
    let (api, rest) = if let Some(r) = path.strip_prefix("/api/v1/") {
        (Api::Core, r)
    } else if let Some(r) = path.strip_prefix("/apis/events.k8s.io/v1/") {
        (Api::EventsV1, r)
    } else {
        return None;
    };
    let segs: Vec<&str> = rest.trim_end_matches('/').split('/').collect();
    match segs.as_slice() {
        ["events"] => Some((api, Scope::all())),
        ["namespaces", ns, "events"] if !ns.is_empty() => {
            Some((api, Scope::namespace(&percent_decode(ns))))
        }
        _ => None,
    }
}

fn handle(shared: Arc<Shared>, req: Request<hyper::body::Incoming>) -> Response<Body> {
    shared.stats.requests.fetch_add(1, Ordering::Relaxed);
    let path = req.uri().path().to_owned();
    if path == "/version" {
        return reply(
            200,
            br#"{"major":"1","minor":"37","gitVersion":"v1.37.0-kevents-scale-sim","platform":"linux/amd64"}"#.to_vec(),
        );
    }
    let Some((api, scope)) = route(&path) else {
        return failure(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    if req.method() != hyper::Method::GET {
        return failure(
            405,
            "MethodNotAllowed",
            "the scale simulator serves only list and watch of events",
        );
    }
    let q = query(req.uri().query());
    for selector in ["fieldSelector", "labelSelector"] {
        if q.get(selector).is_some_and(|s| !s.is_empty()) {
            return failure(
                400,
                "BadRequest",
                &format!("the scale simulator does not filter ({selector})"),
            );
        }
    }
    if q.get("watch").is_some_and(|w| w == "1" || w == "true") {
        watch(shared, api, scope, &q)
    } else {
        list(&shared, api, &scope, &q)
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: i64,
    start: String,
}

fn encode_continue(rv: u64, start: &str) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv: rv as i64,
        start: format!("{start}\u{0}"),
    };
    base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(&token).unwrap_or_default())
}

fn decode_continue(token: &str) -> Option<(u64, String)> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token)
        .ok()?;
    let t: ContinueToken = serde_json::from_slice(&raw).ok()?;
    if t.v != "meta.k8s.io/v1" || t.rv <= 0 {
        return None;
    }
    Some((t.rv as u64, t.start.trim_end_matches('\u{0}').to_owned()))
}

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

fn list(shared: &Shared, api: Api, scope: &Scope, q: &HashMap<String, String>) -> Response<Body> {
    shared.stats.list_pages.fetch_add(1, Ordering::Relaxed);
    let limit = match q.get("limit").map(|l| l.parse::<i64>()) {
        None => 0usize,
        Some(Ok(n)) if n >= 0 => n as usize,
        Some(_) => return failure(400, "BadRequest", "invalid limit"),
    };
    let rv_param = q.get("resourceVersion").map_or("", String::as_str);
    let rv_match = q.get("resourceVersionMatch").map_or("", String::as_str);
    let store = super::lock(&shared.store);
    let (at, after) = if let Some(token) = q.get("continue").filter(|c| !c.is_empty()) {
        if !rv_param.is_empty() {
            return failure(
                400,
                "BadRequest",
                "specifying resource version is not allowed when using continue",
            );
        }
        let Some((rv, start)) = decode_continue(token) else {
            return failure(400, "BadRequest", "continue key is not valid");
        };
        if rv < store.compacted {
            shared.stats.gone.fetch_add(1, Ordering::Relaxed);
            return failure(410, "Expired", CONTINUE_EXPIRED);
        }
        (rv, Some(format!("{}{start}", scope.prefix)))
    } else {
        let exact = match (rv_param, rv_match) {
            ("", "") => None,
            ("", _) => {
                return failure(
                    400,
                    "BadRequest",
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                );
            }
            ("0", "Exact") => {
                return failure(
                    400,
                    "BadRequest",
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                );
            }
            ("0", "" | "NotOlderThan") => None,
            (n, m) => {
                let Ok(n) = n.parse::<u64>() else {
                    return failure(
                        400,
                        "BadRequest",
                        &format!("invalid resource version: {n:?}"),
                    );
                };
                if n > store.rv {
                    return failure(
                        504,
                        "Timeout",
                        &format!("Too large resource version: {n}, current: {}", store.rv),
                    );
                }
                match m {
                    "Exact" => Some(n),
                    "NotOlderThan" => None,
                    // Legacy: a paged list from a resourceVersion reads exactly it.
                    "" if limit > 0 => Some(n),
                    "" => None,
                    other => {
                        return failure(
                            400,
                            "BadRequest",
                            &format!("unsupported resourceVersionMatch {other:?}"),
                        );
                    }
                }
            }
        };
        match exact {
            Some(n) if n < store.compacted => {
                shared.stats.gone.fetch_add(1, Ordering::Relaxed);
                return failure(
                    410,
                    "Expired",
                    "The resourceVersion for the provided list is too old.",
                );
            }
            Some(n) => (n, None),
            None => (store.rv, None),
        }
    };
    let page = store.page(
        scope,
        after.as_deref(),
        at,
        limit,
        |out, s, slot, ev, ver| render::write_event(out, s, slot, ev, ver, api, false),
    );
    drop(store);
    let cont = page
        .more_after
        .map(|k| encode_continue(at, &k[scope.prefix.len()..]));
    reply(
        200,
        render::write_list(api, at, cont.as_deref(), &page.json),
    )
}

fn watch(
    shared: Arc<Shared>,
    api: Api,
    scope: Scope,
    q: &HashMap<String, String>,
) -> Response<Body> {
    let rv_param = q.get("resourceVersion").cloned().unwrap_or_default();
    let from = match rv_param.as_str() {
        "" | "0" => None,
        n => match n.parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => {
                return failure(
                    400,
                    "BadRequest",
                    &format!("invalid resource version: {n:?}"),
                );
            }
        },
    };
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(DEFAULT_WATCH_TIMEOUT);
    let bookmarks = q
        .get("allowWatchBookmarks")
        .is_some_and(|b| b == "true" || b == "1");
    shared.stats.watches.fetch_add(1, Ordering::Relaxed);
    let (tx, body) = Channel::<Bytes>::new(4);
    tokio::spawn(stream_watch(
        shared,
        api,
        scope,
        from,
        Duration::from_secs(timeout),
        bookmarks,
        tx,
    ));
    let mut r = Response::new(Either::Right(body));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

async fn stream_watch(
    shared: Arc<Shared>,
    api: Api,
    scope: Scope,
    from: Option<u64>,
    timeout: Duration,
    bookmarks: bool,
    mut tx: http_body_util::channel::Sender<Bytes>,
) {
    let deadline = Instant::now() + timeout;
    let mut rv_rx = shared.rv_tx.subscribe();
    let gone = |shared: &Shared, rv: u64, compacted: u64| {
        shared.stats.gone.fetch_add(1, Ordering::Relaxed);
        Bytes::from(render::write_error_line(
            410,
            "Expired",
            &format!("too old resource version: {rv} ({})", compacted + 1),
        ))
    };
    // Where the watch starts: the given resourceVersion, or the current state as ADDED
    // events read page by page at the current resourceVersion.
    let mut pos = match from {
        Some(rv) => rv,
        None => {
            let at = super::lock(&shared.store).rv;
            let mut after: Option<String> = None;
            loop {
                let read = {
                    let store = super::lock(&shared.store);
                    if at < store.compacted {
                        Err(gone(&shared, at, store.compacted))
                    } else {
                        let page = store.page(
                            &scope,
                            after.as_deref(),
                            at,
                            INITIAL_PAGE,
                            |out, s, slot, ev, ver| {
                                render::write_event(out, s, slot, ev, ver, api, true)
                            },
                        );
                        Ok((page.items, page.json, page.more_after))
                    }
                };
                let (items, chunk, next) = match read {
                    Ok(r) => r,
                    Err(line) => {
                        let _ = tx.send_data(line).await;
                        return;
                    }
                };
                if items > 0 {
                    let lines = added_lines(&chunk);
                    if tx.send_data(Bytes::from(lines)).await.is_err() {
                        return;
                    }
                }
                match next {
                    Some(k) => after = Some(k.to_string()),
                    None => break,
                }
            }
            at
        }
    };
    let frequency = shared.bookmark_interval.filter(|_| bookmarks);
    let mut next_bookmark = frequency.and_then(|f| bookmark_due(Instant::now(), deadline, f));
    loop {
        // Everything after `pos`, in batches.
        loop {
            let mut out = Vec::new();
            let read = {
                let store = super::lock(&shared.store);
                match store.changes_after(pos, WATCH_BATCH) {
                    None => Err(gone(&shared, pos, store.compacted)),
                    Some(changes) => {
                        for c in &changes {
                            if scope.holds(store.key_of(c.slot)) {
                                store.watch_line(&mut out, c, |out, s, slot, ev, ver| {
                                    render::write_event(out, s, slot, ev, ver, api, true)
                                });
                            }
                        }
                        match changes.last() {
                            Some(c) => pos = c.rv,
                            None => pos = pos.max(store.rv),
                        }
                        Ok(changes.len())
                    }
                }
            };
            let read = match read {
                Ok(n) => n,
                Err(line) => {
                    let _ = tx.send_data(line).await;
                    return;
                }
            };
            if !out.is_empty() && tx.send_data(Bytes::from(out)).await.is_err() {
                return;
            }
            if read < WATCH_BATCH {
                break;
            }
        }
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        if next_bookmark.is_some_and(|at| at <= now) {
            if bookmarks {
                let mut line = Vec::new();
                render::write_bookmark(&mut line, api, pos);
                shared.stats.bookmarks.fetch_add(1, Ordering::Relaxed);
                if tx.send_data(Bytes::from(line)).await.is_err() {
                    return;
                }
            }
            next_bookmark = frequency.and_then(|f| bookmark_due(now, deadline, f));
        }
        let wake = next_bookmark.map_or(deadline, |b| b.min(deadline));
        tokio::select! {
            changed = rv_rx.changed() => if changed.is_err() { return },
            () = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// When the next bookmark is due: every `frequency`, and 2 s before the watch's deadline
/// (kube-apiserver's cacheWatcher.nextBookmarkTime); `None`: none is left.
fn bookmark_due(now: Instant, deadline: Instant, frequency: Duration) -> Option<Instant> {
    let heartbeat = now + frequency;
    let pre_timeout = deadline.checked_sub(Duration::from_secs(2))?;
    let at = heartbeat.min(pre_timeout);
    (at > now).then_some(at)
}

/// A page's items (objects, comma-separated at depth 0) as ADDED watch lines.
fn added_lines(items: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.len() + items.len() / 8);
    let (mut depth, mut in_str, mut esc, mut start) = (0i32, false, false, 0usize);
    for (i, &b) in items.iter().enumerate() {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    out.extend_from_slice(b"{\"type\":\"ADDED\",\"object\":");
                    out.extend_from_slice(&items[start..=i]);
                    out.extend_from_slice(b"}\n");
                }
            }
            b',' if depth == 0 => start = i + 1,
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_in_kube_apiservers_form() {
        let t = encode_continue(42, "ns/a.1");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&t)
            .unwrap();
        assert_eq!(
            String::from_utf8(raw).unwrap(),
            r#"{"v":"meta.k8s.io/v1","rv":42,"start":"ns/a.1\u0000"}"#
        );
        assert_eq!(decode_continue(&t), Some((42, "ns/a.1".to_owned())));
        assert_eq!(decode_continue("not base64!"), None);
    }

    #[test]
    fn queries_and_paths_decode() {
        let q = query(Some("continue=ab%2Bc%3D&limit=5&watch"));
        assert_eq!(q["continue"], "ab+c=");
        assert_eq!(q["limit"], "5");
        assert_eq!(q["watch"], "");
        assert_eq!(
            route("/apis/events.k8s.io/v1/namespaces/x/events"),
            Some((Api::EventsV1, Scope::namespace("x")))
        );
        assert_eq!(route("/api/v1/events"), Some((Api::Core, Scope::all())));
        assert_eq!(route("/api/v1/pods"), None);
    }

    #[test]
    fn items_become_added_lines() {
        let lines = added_lines(br#"{"a":"},{"},{"b":{"c":1}}"#);
        assert_eq!(
            String::from_utf8(lines).unwrap(),
            "{\"type\":\"ADDED\",\"object\":{\"a\":\"},{\"}}\n{\"type\":\"ADDED\",\"object\":{\"b\":{\"c\":1}}}\n"
        );
    }

    #[test]
    fn bookmarks_come_every_frequency_and_before_the_deadline() {
        let now = Instant::now();
        let f = Duration::from_secs(60);
        assert_eq!(
            bookmark_due(now, now + Duration::from_secs(300), f),
            Some(now + f)
        );
        assert_eq!(
            bookmark_due(now, now + Duration::from_secs(10), f),
            Some(now + Duration::from_secs(8))
        );
        assert_eq!(bookmark_due(now, now + Duration::from_secs(1), f), None);
    }
}
