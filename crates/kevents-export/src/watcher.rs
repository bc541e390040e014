//! One watch scope (an API, a namespace or the whole cluster) read through kevents-runtime's
//! [`Watcher`] (list, watch with bookmarks from the list's resourceVersion, watch again from
//! the last one when a watch ends, list again after a 410 Gone, back off after failures).
//! Sends [`Item`]s, in order, to the run loop.

use std::time::Duration;

use kevents_core::request::StreamTransport;
use kevents_runtime::watcher::{WatchConfig, WatchEvent, Watcher};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::Api;

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
    /// The shard read (its selector asked of the server; the run loop filters anyway).
    pub shard: Option<crate::Shard>,
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
    /// An event was deleted (its last state).
    Deleted {
        scope: usize,
        object: Value,
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

/// The runtime watcher's configuration of a scope.
fn watch_config(cfg: &ScopeConfig) -> WatchConfig {
    let mut config = WatchConfig::new(path(cfg))
        .with_page_size(cfg.page_size)
        .with_watch_timeout(cfg.watch_timeout);
    config.idle_timeout = cfg.idle_timeout;
    config.max_line_bytes = cfg.max_line_bytes;
    config.max_page_bytes = cfg.max_page_bytes;
    // Each page is bounded (`max_page_bytes`) and handed on before the next is asked for (a
    // list is never held whole), so a whole list needs no bound of its own beyond its pages
    // (10 000: 5 000 000 events in pages of 500). The runtime's 256 MiB would stop a first
    // list near 300 000 events, and the list would be read again and again after each pause.
    config.max_list_bytes = usize::MAX;
    config.first_backoff = Duration::from_millis(200);
    config.max_backoff = Duration::from_secs(10);
    config.forbidden_backoff = Duration::from_secs(10);
    config.shard_selector = cfg.shard.map(|s| s.selector());
    config
}

/// The scope's task: runs until the run loop drops its receiver.
pub(crate) async fn run_scope<T: StreamTransport>(
    transport: T,
    cfg: ScopeConfig,
    scope: usize,
    start_rv: Option<String>,
    tx: mpsc::Sender<Item>,
) {
    let mut watcher = Watcher::new(transport, watch_config(&cfg), start_rv);
    let mut server_shards = None;
    loop {
        let event = watcher.next().await;
        if let Some(shard) = cfg.shard
            && matches!(event, WatchEvent::ListEnd { .. })
            && watcher.server_shards() != server_shards
        {
            // Said when it changes (the first list, or a server upgraded or rolled back).
            server_shards = watcher.server_shards();
            let by_server = server_shards == Some(true);
            tracing::info!(%shard, namespace = %cfg.namespace, by_server,
            "shard {shard}: {}", if by_server {
                "the apiserver filters the list and watch (KEP-5866 shardSelector echoed)"
            } else {
                "the apiserver did not echo the shardSelector: filtered here (every event is read)"
            });
            metrics::gauge!("kevents_export_shard_server_filtered", "shard" => shard.index().to_string())
                .set(if by_server { 1.0 } else { 0.0 });
        }
        let item = match event {
            WatchEvent::ListStart { relist } => Item::ListStart { scope, relist },
            WatchEvent::Listed(object) => Item::Upsert {
                scope,
                object,
                rv: None,
            },
            WatchEvent::ListEnd { rv } => Item::ListEnd { scope, rv },
            WatchEvent::Applied { object, rv } => Item::Upsert {
                scope,
                object,
                rv: Some(rv),
            },
            WatchEvent::Deleted { object, rv } => Item::Deleted { scope, object, rv },
            WatchEvent::Bookmark { rv } => Item::Bookmark { scope, rv },
            WatchEvent::Restarted => Item::WatchRestart,
            WatchEvent::Failed {
                error,
                verb,
                retry_in,
                failures,
                warn,
            } => {
                let error = error.to_string();
                let retry_ms = retry_in.as_millis() as u64;
                if warn {
                    tracing::warn!(scope, namespace = %cfg.namespace, verb, %error, retry_ms, failures,
                        "watch scope failed, retrying");
                } else {
                    tracing::debug!(scope, namespace = %cfg.namespace, verb, %error, retry_ms, failures,
                        "watch scope failed, retrying");
                }
                Item::Failed { error }
            }
        };
        if tx.send(item).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_list_of_a_large_cluster_is_within_the_bounds() {
        let run = crate::ExportConfig::default();
        let cfg = ScopeConfig {
            api: run.api,
            namespace: String::new(),
            watch_timeout: run.watch_timeout,
            idle_timeout: run.idle_timeout,
            page_size: run.page_size,
            max_line_bytes: run.max_line_bytes,
            shard: None,
            max_page_bytes: run.max_page_bytes,
        };
        let config = watch_config(&cfg);
        // A million live events of about 1 KiB each (perf-tests#1536: past 500 000 an
        // informer's first list times out), read with the default pages.
        let events = 1_000_000;
        let pages = events / config.page_size.expect("paged");
        assert!(pages <= config.max_list_pages, "{pages} pages");
        assert!(events * 1024 <= config.max_list_bytes, "{config:?}");
        assert_eq!(
            config.list_query(""),
            "/api/v1/events?limit=500",
            "the first page: no resourceVersion (a consistent read), pages of 500"
        );
        assert!(
            config
                .watch_query("7")
                .contains("resourceVersion=7&allowWatchBookmarks=true&timeoutSeconds=240")
        );
    }
}
