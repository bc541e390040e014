//! One watch scope (an API, a namespace or the whole cluster): list, then watch with
//! bookmarks from the list's resourceVersion, watch again from the last one when a watch
//! ends, list again after a 410 Gone. Sends [`Item`]s, in order, to the run loop.

use std::time::Duration;

use kevents_core::SinkError;
use kevents_core::request::Method;
use kevents_http::HttpSink;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::{Api, ExportError};

/// How a watch scope lists and watches.
#[derive(Debug, Clone)]
pub(crate) struct ScopeConfig {
    pub api: Api,
    /// Empty: the whole cluster.
    pub namespace: String,
    pub watch_timeout: Duration,
    pub idle_timeout: Duration,
    pub page_size: usize,
    pub max_line_bytes: usize,
    pub max_page_bytes: usize,
}

/// What a scope task tells the run loop.
#[derive(Debug)]
pub(crate) enum Item {
    /// A list begins (the first, or a relist after 410).
    ListStart { scope: usize, relist: bool },
    /// An event as listed (no resourceVersion to resume from) or watched (`rv`).
    Upsert {
        scope: usize,
        object: Value,
        rv: Option<String>,
    },
    /// An event was deleted.
    Deleted {
        scope: usize,
        uid: String,
        rv: String,
    },
    /// A list ended at `rv`.
    ListEnd { scope: usize, rv: String },
    /// A bookmark.
    Bookmark { scope: usize, rv: String },
    /// A watch ended and another starts.
    WatchRestart,
    /// A request failed (retried after a pause).
    Failed { error: String },
}

fn path(cfg: &ScopeConfig) -> String {
    if cfg.namespace.is_empty() {
        format!("{}/events", cfg.api.prefix())
    } else {
        format!(
            "{}/namespaces/{}/events",
            cfg.api.prefix(),
            kevents_core::request::encode_segment(&cfg.namespace)
        )
    }
}

fn decode(e: impl std::fmt::Display) -> ExportError {
    ExportError::Decode(e.to_string())
}

/// Lists every page; returns the list's resourceVersion. `None` when the run loop is gone.
async fn list(
    sink: &HttpSink,
    cfg: &ScopeConfig,
    scope: usize,
    tx: &mpsc::Sender<Item>,
    relist: bool,
) -> Result<Option<String>, ExportError> {
    if tx.send(Item::ListStart { scope, relist }).await.is_err() {
        return Ok(None);
    }
    let base = path(cfg);
    let client = sink.requests();
    let mut cont = String::new();
    loop {
        let mut url = format!("{base}?limit={}", cfg.page_size);
        if !cont.is_empty() {
            url.push_str("&continue=");
            url.push_str(&kevents_core::request::encode_segment(&cont));
        }
        let answer = client
            .send(Method::Get, url, None, Vec::new(), cfg.max_page_bytes)
            .await?;
        if !answer.answer().is_success() {
            return Err(ExportError::Apiserver(answer.answer().status_error()));
        }
        if answer.oversized {
            return Err(ExportError::Apiserver(
                kevents_core::request::answer_too_large(cfg.max_page_bytes),
            ));
        }
        let body = answer.body;
        let mut page: Value = serde_json::from_slice(&body).map_err(decode)?;
        let rv = page["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let next = page["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if let Some(Value::Array(items)) = page.get_mut("items").map(Value::take) {
            for object in items {
                let item = Item::Upsert {
                    scope,
                    object,
                    rv: None,
                };
                if tx.send(item).await.is_err() {
                    return Ok(None);
                }
            }
        }
        if next.is_empty() {
            if rv.is_empty() {
                return Err(ExportError::Decode("a list without resourceVersion".into()));
            }
            if tx
                .send(Item::ListEnd {
                    scope,
                    rv: rv.clone(),
                })
                .await
                .is_err()
            {
                return Ok(None);
            }
            return Ok(Some(rv));
        }
        if next == cont {
            return Err(ExportError::Decode(
                "the list repeats its continue token".into(),
            ));
        }
        cont = next;
    }
}

/// How one watch ended.
enum Ended {
    /// Watch again from the last resourceVersion.
    Again,
    /// 410 Gone: list again.
    Gone,
    /// The run loop is gone.
    Stop,
}

/// One watch from `rv` until it ends; updates `rv`.
async fn watch_once(
    sink: &HttpSink,
    cfg: &ScopeConfig,
    scope: usize,
    tx: &mpsc::Sender<Item>,
    rv: &mut String,
) -> Result<Ended, ExportError> {
    let url = format!(
        "{}?watch=1&allowWatchBookmarks=true&timeoutSeconds={}&resourceVersion={}",
        path(cfg),
        cfg.watch_timeout.as_secs().max(1),
        kevents_core::request::encode_segment(rv)
    );
    let mut lines = sink
        .watch_lines(
            &url,
            cfg.watch_timeout + cfg.idle_timeout,
            cfg.max_line_bytes,
        )
        .await?;
    match lines.status() {
        200 => {}
        410 => return Ok(Ended::Gone),
        code => {
            let body = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
                .await
                .ok()
                .and_then(Result::ok)
                .flatten()
                .unwrap_or_default();
            return Err(ExportError::Decode(format!(
                "watch answered {code}: {}",
                String::from_utf8_lossy(&body[..body.len().min(512)])
            )));
        }
    }
    loop {
        let line = match tokio::time::timeout(cfg.idle_timeout, lines.next_line()).await {
            Err(_) => {
                return Err(ExportError::Apiserver(SinkError::Timeout(cfg.idle_timeout)));
            }
            Ok(line) => line?,
        };
        let Some(line) = line else {
            return Ok(Ended::Again);
        };
        let mut event: Value = serde_json::from_slice(&line).map_err(decode)?;
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        let object = event.get_mut("object").map(Value::take).unwrap_or_default();
        let object_rv = object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let item = match kind.as_str() {
            "ADDED" | "MODIFIED" => Item::Upsert {
                scope,
                object,
                rv: Some(object_rv.clone()),
            },
            "DELETED" => Item::Deleted {
                scope,
                uid: object["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                rv: object_rv.clone(),
            },
            "BOOKMARK" => Item::Bookmark {
                scope,
                rv: object_rv.clone(),
            },
            "ERROR" => {
                if object["code"].as_u64() == Some(410) {
                    return Ok(Ended::Gone);
                }
                return Err(ExportError::Decode(format!("watch error: {object}")));
            }
            other => return Err(ExportError::Decode(format!("watch event type {other:?}"))),
        };
        if !object_rv.is_empty() {
            *rv = object_rv;
        }
        if tx.send(item).await.is_err() {
            return Ok(Ended::Stop);
        }
    }
}

/// The scope's task: runs until the run loop drops its receiver.
pub(crate) async fn run_scope(
    sink: HttpSink,
    cfg: ScopeConfig,
    scope: usize,
    start_rv: Option<String>,
    tx: mpsc::Sender<Item>,
) {
    let mut rv = start_rv;
    let mut relist = false;
    let mut pause = Duration::from_millis(200);
    loop {
        let current = match rv.take() {
            Some(rv) => rv,
            None => match list(&sink, &cfg, scope, &tx, relist).await {
                Ok(Some(rv)) => rv,
                Ok(None) => return,
                Err(e) => {
                    if fail(&tx, scope, e, &mut pause).await {
                        return;
                    }
                    continue;
                }
            },
        };
        let mut current = current;
        let ended = watch_once(&sink, &cfg, scope, &tx, &mut current).await;
        match ended {
            Ok(Ended::Again) => {
                pause = Duration::from_millis(200);
                rv = Some(current);
            }
            Ok(Ended::Gone) => relist = true,
            Ok(Ended::Stop) => return,
            Err(e) => {
                rv = Some(current);
                if fail(&tx, scope, e, &mut pause).await {
                    return;
                }
                continue;
            }
        }
        if tx.send(Item::WatchRestart).await.is_err() {
            return;
        }
    }
}

/// Reports a failure and pauses (doubling, at most 10 s); `true` when the run loop is gone.
async fn fail(tx: &mpsc::Sender<Item>, scope: usize, e: ExportError, pause: &mut Duration) -> bool {
    let error = e.to_string();
    tracing::warn!(scope, %error, "watch scope failed, retrying");
    if tx.send(Item::Failed { error }).await.is_err() {
        return true;
    }
    tokio::time::sleep(*pause).await;
    *pause = (*pause * 2).min(Duration::from_secs(10));
    false
}
