//! [`Watcher`]: one list-then-watch loop over any [`StreamTransport`], client-go's reflector
//! in small: list every page (bounded), watch with bookmarks from the list's
//! `resourceVersion`, watch again from the last one when the server ends a watch, list again
//! after 410 Gone, and back off after failures, a watch that ends at once included. The
//! export's watch scopes and the fleet's Lease link both read through it.
//!
//! It is pulled ([`Watcher::next`]) and keeps its state between calls: dropping the future
//! of `next` (a `select!` that took another branch) loses nothing, the request in flight is
//! sent again at the next call.

use std::collections::VecDeque;
use std::time::Duration;

use kevents_core::SinkError;
use kevents_core::request::{
    Client, LineStream, Method, StreamRequest, StreamTransport, answer_too_large, encode_segment,
};
use serde_json::Value;
use thiserror::Error;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};

use crate::backoff::Backoff;

/// Default longest watch line: 4 MiB (above the 3 MiB the apiserver accepts for an object).
pub const DEFAULT_MAX_LINE_BYTES: usize = 4 << 20;

/// What one [`Watcher`] lists and watches, and its bounds.
///
/// ```
/// use std::time::Duration;
/// use kevents_runtime::watcher::WatchConfig;
/// let config = WatchConfig::new("/api/v1/namespaces/default/events")
///     .with_page_size(500)
///     .with_watch_timeout(Duration::from_secs(240));
/// assert_eq!(config.list_query(""), "/api/v1/namespaces/default/events?limit=500");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct WatchConfig {
    /// The collection's path from the apiserver's root, without a query
    /// (`/api/v1/namespaces/default/events`, `/apis/coordination.k8s.io/v1/namespaces/x/leases`).
    pub path: String,
    /// A field selector (`metadata.name=x`), sent with the list and the watch.
    pub field_selector: Option<String>,
    /// A KEP-5866 shard selector (`shardRange(object.metadata.uid,'0x…','0x…')`), sent with
    /// the list, and with the watch unless the last list's answer did not echo it in
    /// `metadata.shardInfo` (a server without the `ShardedListAndWatch` feature ignores it:
    /// the caller filters what it reads itself; [`Watcher::server_shards`]).
    pub shard_selector: Option<String>,
    /// Items per list page (`limit`); `None`: one unpaged list.
    pub page_size: Option<usize>,
    /// A watch's `timeoutSeconds` (whole seconds, at least 1): the server ends the watch then
    /// and it is started again from the last `resourceVersion`.
    pub watch_timeout: Duration,
    /// How long a watch may outlast its `timeoutSeconds` before it is taken for a half-open
    /// connection and dropped (a failure): the whole watch request is bounded by
    /// `watch_timeout` plus this, whatever lines came before.
    pub idle_timeout: Duration,
    /// The longest watch line ([`DEFAULT_MAX_LINE_BYTES`]).
    pub max_line_bytes: usize,
    /// The largest list page read.
    pub max_page_bytes: usize,
    /// Most pages of one list.
    pub max_list_pages: usize,
    /// Most bytes of one list, all pages together.
    pub max_list_bytes: usize,
    /// A watch that ends sooner than this (or half its `timeoutSeconds`) without a line is a
    /// failure, as client-go's reflector takes a "very short watch": no tight loop against a
    /// server or proxy that closes watches at once.
    pub short_watch: Duration,
    /// The first pause after a failure (doubling, jittered).
    pub first_backoff: Duration,
    /// The longest pause after failures.
    pub max_backoff: Duration,
    /// The pause after a 401/403.
    pub forbidden_backoff: Duration,
}

impl WatchConfig {
    /// A watch of `path` with the defaults: pages of 500, `timeoutSeconds` 240, 30 s idle,
    /// lines of 4 MiB, pages of 64 MiB, lists of at most 10 000 pages and 256 MiB, a short
    /// watch under 1 s, back-off from 800 ms to 30 s (client-go's reflector), 60 s after a
    /// 401/403.
    pub fn new(path: impl Into<String>) -> Self {
        WatchConfig {
            path: path.into(),
            field_selector: None,
            shard_selector: None,
            page_size: Some(500),
            watch_timeout: Duration::from_secs(240),
            idle_timeout: Duration::from_secs(30),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_page_bytes: 64 << 20,
            max_list_pages: kevents_core::request::DEFAULT_MAX_LIST_PAGES,
            max_list_bytes: kevents_core::request::DEFAULT_MAX_LIST_BYTES,
            short_watch: Duration::from_secs(1),
            first_backoff: Duration::from_millis(800),
            max_backoff: Duration::from_secs(30),
            forbidden_backoff: Duration::from_secs(60),
        }
    }

    /// The same with a field selector.
    pub fn with_field_selector(mut self, selector: impl Into<String>) -> Self {
        self.field_selector = Some(selector.into());
        self
    }

    /// The same with a KEP-5866 shard selector ([`WatchConfig::shard_selector`]).
    ///
    /// ```
    /// let c = kevents_runtime::watcher::WatchConfig::new("/api/v1/events")
    ///     .with_shard_selector("shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')");
    /// assert!(c.list_query("").contains("&shardSelector=shardRange%28"));
    /// assert!(c.watch_query("7").contains("&shardSelector=shardRange%28"));
    /// ```
    pub fn with_shard_selector(mut self, selector: impl Into<String>) -> Self {
        self.shard_selector = Some(selector.into());
        self
    }

    /// The same with another page size (`0`: unpaged).
    pub fn with_page_size(mut self, items: usize) -> Self {
        self.page_size = (items > 0).then_some(items);
        self
    }

    /// The same with another watch `timeoutSeconds` (whole seconds, at least 1).
    pub fn with_watch_timeout(mut self, timeout: Duration) -> Self {
        self.watch_timeout = Duration::from_secs(timeout.as_secs().max(1));
        self
    }

    /// The path and query of a list page (`cont`: the continue token, empty for the first).
    pub fn list_query(&self, cont: &str) -> String {
        let mut q = Vec::new();
        if let Some(n) = self.page_size {
            q.push(format!("limit={n}"));
        }
        if let Some(s) = &self.field_selector {
            q.push(format!("fieldSelector={}", encode_segment(s)));
        }
        if let Some(s) = &self.shard_selector {
            q.push(format!("shardSelector={}", encode_segment(s)));
        }
        if !cont.is_empty() {
            q.push(format!("continue={}", encode_segment(cont)));
        }
        if q.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, q.join("&"))
        }
    }

    /// The path and query of a watch from `rv`.
    pub fn watch_query(&self, rv: &str) -> String {
        let mut q = format!("{}?watch=1", self.path);
        if let Some(s) = &self.field_selector {
            q.push_str("&fieldSelector=");
            q.push_str(&encode_segment(s));
        }
        if let Some(s) = &self.shard_selector {
            q.push_str("&shardSelector=");
            q.push_str(&encode_segment(s));
        }
        q.push_str(&format!(
            "&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={}",
            encode_segment(rv),
            self.watch_timeout.as_secs().max(1)
        ));
        q
    }
}

/// Why a list or a watch failed (the watcher backs off, then lists again or watches again).
#[derive(Debug, Clone, Error, PartialEq)]
#[non_exhaustive]
pub enum WatchError {
    /// The request got no answer, or the answer was not a success: the server's words
    /// ([`SinkError::code`] gives its status).
    #[error("{0}")]
    Request(SinkError),
    /// An answer or a watch line that is not what the API promises.
    #[error("{0}")]
    Decode(String),
    /// 410 Gone to a watch from the `resourceVersion` just listed.
    #[error("the watch answered 410 Gone to the resourceVersion just listed")]
    GoneAfterList,
    /// The watch ended within the short-watch time without a line.
    #[error("the watch ended after {0:?} without an event (a very short watch)")]
    ShortWatch(Duration),
    /// The watch outlasted its `timeoutSeconds` and the idle margin: a half-open connection.
    #[error("the watch did not end within {0:?}: taken for a half-open connection")]
    Idle(Duration),
    /// A list over its bounds ([`WatchConfig::max_list_pages`],
    /// [`WatchConfig::max_list_bytes`]), or repeating a continue token.
    #[error("the list was not read: {0}")]
    ListTooLong(String),
}

impl WatchError {
    /// Whether the apiserver refused this identity (401, 403).
    ///
    /// ```
    /// use kevents_core::SinkError;
    /// use kevents_runtime::watcher::WatchError;
    /// assert!(!WatchError::Decode("x".into()).is_forbidden());
    /// ```
    pub fn is_forbidden(&self) -> bool {
        matches!(self, WatchError::Request(e) if matches!(e.code(), Some(401 | 403)))
    }
}

/// What a [`Watcher`] saw, in the order the server gave it.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    /// A list begins; `relist`: not the first of this watcher (after 410 Gone, or a failure
    /// after a watch had started). A list whose later page failed goes on with that page (no
    /// new `ListStart`); one whose first page failed begins again (a relist only if a list had
    /// ended or a watch begun before).
    ListStart {
        /// Whether a list ended or a watch began before it.
        relist: bool,
    },
    /// An object of the list (no `resourceVersion` to resume from until [`WatchEvent::ListEnd`]).
    Listed(Value),
    /// The list ended at `rv`; the watch starts from it.
    ListEnd {
        /// The list's `resourceVersion`.
        rv: String,
    },
    /// An object added or modified, watched.
    Applied {
        /// The object.
        object: Value,
        /// Its `resourceVersion`.
        rv: String,
    },
    /// An object deleted, watched.
    Deleted {
        /// The object as last stored.
        object: Value,
        /// The `resourceVersion` of the deletion.
        rv: String,
    },
    /// A bookmark: everything up to `rv` was sent.
    Bookmark {
        /// The bookmark's `resourceVersion`.
        rv: String,
    },
    /// The server ended a watch; the next one starts from the last `resourceVersion`.
    Restarted,
    /// A list or watch failed; the watcher waits `retry_in`, then lists again (or watches
    /// again from a resourceVersion it may still use).
    Failed {
        /// Why.
        error: WatchError,
        /// What failed: `"list"` or `"watch"`.
        verb: &'static str,
        /// The pause before the next try.
        retry_in: Duration,
        /// Failures in a row, this one included.
        failures: u32,
        /// Whether to log it at warn: the first failure in a row and every tenth (debug
        /// otherwise), so a long outage is said, not repeated every pause.
        warn: bool,
    },
}

/// What a [`State::Due`] does when its instant comes.
#[derive(Clone)]
enum Then {
    /// Watch from `rv` (or list when there is none).
    Watch,
    /// List from the first page.
    List,
    /// Read the page of a list begun before (a page after the first failed): its continue
    /// token keeps the list's snapshot, the pages already read are not read again.
    Page {
        cont: String,
        pages: usize,
        bytes: usize,
    },
}

enum State {
    /// Waiting until the instant, then doing what `then` says.
    Due { at: Instant, then: Then },
    /// Listing: the next page's continue token, pages and bytes read so far.
    Listing {
        cont: String,
        pages: usize,
        bytes: usize,
    },
    /// Watching since `started`; `lines` seen so far.
    Watching {
        lines: Box<LineStream>,
        started: Instant,
        seen: bool,
    },
}

/// One list-then-watch loop (see the module): [`Watcher::next`] gives the next
/// [`WatchEvent`].
///
/// ```no_run
/// use kevents_runtime::watcher::{WatchConfig, WatchEvent, Watcher};
/// # async fn f<T: kevents_core::request::StreamTransport>(transport: T) {
/// let config = WatchConfig::new("/api/v1/namespaces/default/events");
/// let mut watcher = Watcher::new(transport, config, None);
/// loop {
///     match watcher.next().await {
///         WatchEvent::Listed(object) | WatchEvent::Applied { object, .. } => {
///             println!("{}", object["metadata"]["name"]);
///         }
///         WatchEvent::Failed { error, retry_in, .. } => eprintln!("{error}; again in {retry_in:?}"),
///         _ => {}
///     }
/// }
/// # }
/// ```
pub struct Watcher<T: StreamTransport> {
    client: Client<T>,
    config: WatchConfig,
    state: State,
    rv: String,
    /// The watch to start comes straight from a list (410 then is a failure, not old data).
    fresh_list: bool,
    /// Whether the last list's answer echoed the shard selector (`None`: no list yet).
    server_shards: Option<bool>,
    /// A list ended or a watch began before (the next list is a relist).
    started: bool,
    backoff: Backoff,
    pending: VecDeque<WatchEvent>,
}

impl<T: StreamTransport> std::fmt::Debug for Watcher<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("path", &self.config.path)
            .field("rv", &self.rv)
            .finish_non_exhaustive()
    }
}

impl<T: StreamTransport> Watcher<T> {
    /// A watcher of `config` over `transport`: it lists first, or with `start_rv` (a
    /// resourceVersion saved earlier) watches from it first (and lists if it is too old).
    pub fn new(transport: T, config: WatchConfig, start_rv: Option<String>) -> Self {
        let backoff = Backoff::new(config.first_backoff, config.max_backoff)
            .with_forbidden(config.forbidden_backoff);
        let (rv, then, started) = match start_rv {
            Some(rv) if !rv.is_empty() => (rv, Then::Watch, true),
            _ => (String::new(), Then::List, false),
        };
        Watcher {
            client: Client::new(transport),
            config,
            state: State::Due {
                at: Instant::now(),
                then,
            },
            rv,
            fresh_list: false,
            server_shards: None,
            started,
            backoff,
            pending: VecDeque::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &WatchConfig {
        &self.config
    }

    /// With a [`WatchConfig::shard_selector`]: whether the server filtered the last list by
    /// it (its answer echoed `metadata.shardInfo`); `None` before the first list, or without
    /// a selector.
    pub fn server_shards(&self) -> Option<bool> {
        self.config.shard_selector.as_ref().and(self.server_shards)
    }

    /// The last `resourceVersion` seen (a list's, a watched object's, a bookmark's).
    pub fn resource_version(&self) -> &str {
        &self.rv
    }

    /// The next event. Never ends: failures are events ([`WatchEvent::Failed`]) and are
    /// retried after their pause.
    pub async fn next(&mut self) -> WatchEvent {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return event;
            }
            match &mut self.state {
                State::Due { at, then } => {
                    let (at, then) = (*at, then.clone());
                    sleep_until(at).await;
                    if let Then::Page { cont, pages, bytes } = then {
                        // The list goes on where it failed: no new ListStart.
                        self.state = State::Listing { cont, pages, bytes };
                        continue;
                    }
                    if matches!(then, Then::List) || self.rv.is_empty() {
                        self.state = State::Listing {
                            cont: String::new(),
                            pages: 0,
                            bytes: 0,
                        };
                        // A relist when a list ended or a watch began before (a first list
                        // whose first page failed is still the first).
                        return WatchEvent::ListStart {
                            relist: self.started,
                        };
                    }
                    match self.open_watch().await {
                        Ok(Some(lines)) => {
                            self.started = true;
                            self.state = State::Watching {
                                lines: Box::new(lines),
                                started: Instant::now(),
                                seen: false,
                            };
                        }
                        Ok(None) => {
                            // 410 Gone to an older resourceVersion: list again at once.
                            self.state = State::Due {
                                at: Instant::now(),
                                then: Then::List,
                            };
                        }
                        Err(e) => return self.failed(e),
                    }
                }
                State::Listing { cont, pages, bytes } => {
                    let (cont, pages, bytes) = (cont.clone(), *pages, *bytes);
                    match self.list_page(&cont, pages, bytes).await {
                        Ok(()) => {}
                        Err(e) => return self.failed(e),
                    }
                }
                State::Watching {
                    lines,
                    started,
                    seen,
                } => {
                    // The server ends a watch at its timeoutSeconds: silence past that and
                    // the idle margin is a half-open connection. (A quiet scope may send no
                    // line at all before then: kube-apiserver 1.20 sends bookmarks rarely.)
                    let limit = self.config.watch_timeout + self.config.idle_timeout;
                    let line = match timeout_at(*started + limit, lines.next_line()).await {
                        Err(_) => return self.failed(WatchError::Idle(limit)),
                        Ok(Err(e)) => return self.failed(WatchError::Request(e)),
                        Ok(Ok(line)) => line,
                    };
                    let Some(line) = line else {
                        let short = self.config.short_watch.min(self.config.watch_timeout / 2);
                        let lasted = started.elapsed();
                        if !*seen && lasted < short {
                            return self.failed(WatchError::ShortWatch(lasted));
                        }
                        // A watch that ran until the server ended it is a success, and its
                        // resourceVersion was good: a 410 to the next one (a quiet scope
                        // whose version the server compacted away since, events having no
                        // watch cache and so no bookmarks by default) is the ordinary expiry,
                        // a relist at once, not a failure of the list just read.
                        self.fresh_list = false;
                        self.backoff.reset();
                        self.state = State::Due {
                            at: Instant::now(),
                            then: Then::Watch,
                        };
                        return WatchEvent::Restarted;
                    };
                    *seen = true;
                    match self.watch_line(&line) {
                        Ok(Some(event)) => {
                            self.backoff.reset();
                            self.fresh_list = false;
                            return event;
                        }
                        Ok(None) => {
                            // 410 Gone in the stream: list again at once.
                            self.state = State::Due {
                                at: Instant::now(),
                                then: Then::List,
                            };
                        }
                        Err(e) => return self.failed(e),
                    }
                }
            }
        }
    }

    /// A failure: the pause, the state to come back to, the event.
    fn failed(&mut self, error: WatchError) -> WatchEvent {
        let (retry_in, warn) = if error.is_forbidden() {
            self.backoff.forbidden()
        } else {
            self.backoff.failed()
        };
        // A page after the first that failed is asked for again with its continue token (the
        // list's snapshot, valid until the server compacts it: then 410 and a list from the
        // start), so a failure late in a long list does not read it all again. A list that
        // failed otherwise lists again (the resourceVersion it had, if any, is the expired
        // one it lists for). A watch that failed watches again from the last resourceVersion
        // (still good unless the server says 410), except right after a list.
        let then = match &self.state {
            State::Listing { cont, pages, bytes }
                if !cont.is_empty()
                    && matches!(&error, WatchError::Request(e) if e.code() != Some(410)) =>
            {
                Then::Page {
                    cont: cont.clone(),
                    pages: *pages,
                    bytes: *bytes,
                }
            }
            State::Listing { .. } => Then::List,
            _ if self.rv.is_empty() || matches!(error, WatchError::GoneAfterList) => Then::List,
            _ => Then::Watch,
        };
        let verb = match self.state {
            State::Listing { .. } => "list",
            _ => "watch",
        };
        self.pending.clear();
        self.state = State::Due {
            at: Instant::now() + retry_in,
            then,
        };
        WatchEvent::Failed {
            error,
            verb,
            retry_in,
            failures: self.backoff.failures(),
            warn,
        }
    }

    /// Reads one page; queues its objects (and the list's end).
    async fn list_page(
        &mut self,
        cont: &str,
        pages: usize,
        bytes: usize,
    ) -> Result<(), WatchError> {
        if pages >= self.config.max_list_pages {
            return Err(WatchError::ListTooLong(format!(
                "more than {} pages",
                self.config.max_list_pages
            )));
        }
        let answer = self
            .client
            .send(
                Method::Get,
                self.config.list_query(cont),
                None,
                Vec::new(),
                self.config.max_page_bytes,
            )
            .await
            .map_err(WatchError::Request)?;
        if !answer.answer().is_success() {
            return Err(WatchError::Request(answer.answer().status_error()));
        }
        if answer.oversized {
            return Err(WatchError::Request(answer_too_large(
                self.config.max_page_bytes,
            )));
        }
        let bytes = bytes.saturating_add(answer.body.len());
        if bytes > self.config.max_list_bytes {
            return Err(WatchError::ListTooLong(format!(
                "more than {} bytes",
                self.config.max_list_bytes
            )));
        }
        let mut page: Value = serde_json::from_slice(&answer.body)
            .map_err(|e| WatchError::Decode(format!("a list page is not JSON: {e}")))?;
        let rv = page["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if cont.is_empty() {
            self.server_shards = Some(page["metadata"]["shardInfo"]["selector"].is_string());
        }
        let next = page["metadata"]["continue"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        match page.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => {
                self.pending
                    .extend(items.into_iter().map(WatchEvent::Listed));
            }
            None | Some(Value::Null) => {}
            Some(_) => return Err(WatchError::Decode("a list's items is not an array".into())),
        }
        if next.is_empty() {
            if rv.is_empty() {
                self.pending.clear();
                return Err(WatchError::Decode("a list without resourceVersion".into()));
            }
            self.rv = rv.clone();
            self.fresh_list = true;
            self.started = true;
            self.pending.push_back(WatchEvent::ListEnd { rv });
            self.state = State::Due {
                at: Instant::now(),
                then: Then::Watch,
            };
            return Ok(());
        }
        if next == cont {
            self.pending.clear();
            return Err(WatchError::ListTooLong(
                "the list repeats its continue token".into(),
            ));
        }
        self.state = State::Listing {
            cont: next,
            pages: pages + 1,
            bytes,
        };
        Ok(())
    }

    /// Opens a watch from the last resourceVersion: `None` on 410 Gone to an older one.
    async fn open_watch(&mut self) -> Result<Option<LineStream>, WatchError> {
        let request = StreamRequest {
            path: if self.server_shards == Some(false) {
                WatchConfig {
                    shard_selector: None,
                    ..self.config.clone()
                }
                .watch_query(&self.rv)
            } else {
                self.config.watch_query(&self.rv)
            },
            timeout: self.config.watch_timeout + self.config.idle_timeout,
            max_line_bytes: self.config.max_line_bytes,
        };
        let mut lines = self
            .client
            .transport()
            .open_lines(request)
            .await
            .map_err(WatchError::Request)?;
        match lines.status() {
            200 => Ok(Some(lines)),
            410 if self.fresh_list => Err(WatchError::GoneAfterList),
            410 => Ok(None),
            code => {
                // The server's Status, as the first line of the answer.
                let body = timeout(Duration::from_secs(5), lines.next_line())
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .flatten()
                    .unwrap_or_default();
                let answer = kevents_core::request::Response {
                    code,
                    body,
                    ..Default::default()
                };
                Err(WatchError::Request(answer.answer().status_error()))
            }
        }
    }

    /// One watch line as an event; `None` for 410 Gone in the stream.
    fn watch_line(&mut self, line: &[u8]) -> Result<Option<WatchEvent>, WatchError> {
        let mut event: Value = serde_json::from_slice(line)
            .map_err(|e| WatchError::Decode(format!("a watch event is not JSON: {e}")))?;
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        let object = event.get_mut("object").map(Value::take).unwrap_or_default();
        if kind == "ERROR" {
            if object["code"].as_u64() == Some(410) {
                if self.fresh_list {
                    return Err(WatchError::GoneAfterList);
                }
                return Ok(None);
            }
            let answer = kevents_core::request::Response {
                code: object["code"]
                    .as_u64()
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(500),
                body: serde_json::to_vec(&object).unwrap_or_default(),
                ..Default::default()
            };
            return Err(WatchError::Request(answer.answer().status_error()));
        }
        if !object.is_object() {
            return Err(WatchError::Decode(format!(
                "a watch event of type {:?} without an object",
                kevents_core::status::sanitize_server_text(&kind)
            )));
        }
        let rv = object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let event = match kind.as_str() {
            "ADDED" | "MODIFIED" => WatchEvent::Applied {
                object,
                rv: rv.clone(),
            },
            "DELETED" => WatchEvent::Deleted {
                object,
                rv: rv.clone(),
            },
            "BOOKMARK" => WatchEvent::Bookmark { rv: rv.clone() },
            other => {
                return Err(WatchError::Decode(format!(
                    "a watch event of type {:?}",
                    kevents_core::status::sanitize_server_text(other)
                )));
            }
        };
        if !rv.is_empty() {
            self.rv = rv;
        }
        Ok(Some(event))
    }
}

#[cfg(test)]
mod tests;
