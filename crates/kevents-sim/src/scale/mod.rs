//! [`ScaleSim`]: an apiserver simulator for a million events, serving list and watch of
//! events of both APIs (`/api/v1` and `/apis/events.k8s.io/v1`, cluster-wide or per
//! namespace) the way kube-apiserver does, for export benchmarks at large-cluster volumes on
//! one machine without etcd. See `docs/simulator.md`.
//!
//! * Lists: `limit` and `continue` pages in etcd key order (`namespace/name`), each page
//!   read at the first page's resourceVersion (a continue token holds it, in
//!   kube-apiserver's token form); `resourceVersion` `""` (the newest), `"0"` (any: served
//!   at the newest), `N` with `resourceVersionMatch` `Exact` or `NotOlderThan` (and, without
//!   it, `Exact` for a paged list, as kube-apiserver's legacy rule); 410 `Expired` for an
//!   exact resourceVersion or a continue token older than the history kept; 504 `Timeout`
//!   for a resourceVersion newer than the newest.
//! * Watches: `watch=1&resourceVersion=N&allowWatchBookmarks=true&timeoutSeconds=T`, one
//!   JSON line per change (`ADDED`, `MODIFIED`, `DELETED`; a deleted object carries the
//!   deletion's resourceVersion), `BOOKMARK`s when configured
//!   ([`ScaleConfig::bookmark_interval`]: then every interval and 2 s before the timeout, as
//!   kube-apiserver's watch cache sends them; by default none, as kube-apiserver serves
//!   events, from etcd), an `ERROR` line with a 410
//!   `Expired` Status when `N` is older than the history kept (as after an etcd compaction)
//!   or when the watcher falls that far behind; no resourceVersion or `"0"`: the current
//!   events as `ADDED` first.
//! * Storage: an event is a few interned string ids, its key and its versions as
//!   `(resourceVersion, count, lastTimestamp)` (about 200 bytes with the key index); JSON is
//!   written on the fly. The history of changes is a window of
//!   [`ScaleConfig::window`] changes; older ones are compacted.
//! * Writes come from the caller ([`ScaleSim::create`], [`ScaleSim::raise`],
//!   [`ScaleSim::delete`], [`ScaleSim::preload`]) or from the built-in [`Writer`], which
//!   raises counts at a set rate and can log each write's time (to measure an exporter's
//!   lag from the write).
//!
//! Not served: writes over HTTP (the [`Simulator`](crate::Simulator) serves those),
//! selectors (400), `remainingItemCount`, `sendInitialEvents`, authentication.
//!
//! ```
//! use kevents_sim::scale::{NewEvent, ScaleConfig, ScaleSim};
//! let sim = ScaleSim::start(ScaleConfig::default()).unwrap();
//! let ids = sim.preload(1000, 10);
//! assert_eq!(sim.live(), 1000);
//! assert_eq!(sim.raise(ids[0], 1), Ok(2));
//! let id = sim.create(&NewEvent::pod("default", "web-0", 1, "Pulled", "pulled")).unwrap();
//! sim.delete(id).unwrap();
//! assert!(sim.url().starts_with("http://127.0.0.1:"));
//! ```

mod http;
mod render;
mod store;
mod writer;

pub use store::{EventId, NewEvent, WriteError};
pub use writer::{Writer, WriterConfig, WriterReport, Written};

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kevents_core::{Clock as _, SystemClock};
use tokio::sync::{oneshot, watch};

use crate::error::SimError;
use store::ScaleStore;

/// How a [`ScaleSim`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScaleConfig {
    /// Where to listen (port 0: any free port).
    pub addr: SocketAddr,
    /// Changes kept for watches and past-resourceVersion lists; older ones are compacted
    /// (watches and continue tokens from before them get 410 Gone).
    pub window: usize,
    /// How often a watch with `allowWatchBookmarks=true` gets a bookmark (also 2 s before
    /// its timeout), as kube-apiserver's watch cache sends them for a cached resource;
    /// `None` (the default): never, as kube-apiserver v1.20.2 and v1.37.2 serve events
    /// (not cached by default: their watches read etcd, which sends none; measured: no
    /// bookmark in 75 s on either).
    pub bookmark_interval: Option<Duration>,
}

impl Default for ScaleConfig {
    fn default() -> Self {
        ScaleConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            window: 200_000,
            bookmark_interval: None,
        }
    }
}

impl ScaleConfig {
    /// The same with another history window.
    ///
    /// ```
    /// assert_eq!(kevents_sim::scale::ScaleConfig::default().with_window(10).window, 10);
    /// ```
    pub fn with_window(mut self, changes: usize) -> Self {
        self.window = changes.max(1);
        self
    }

    /// The same with another bookmark interval.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = kevents_sim::scale::ScaleConfig::default()
    ///     .with_bookmark_interval(Some(Duration::from_secs(60)));
    /// assert_eq!(c.bookmark_interval, Some(Duration::from_secs(60)));
    /// ```
    pub fn with_bookmark_interval(mut self, every: Option<Duration>) -> Self {
        self.bookmark_interval = every;
        self
    }
}

/// What a [`ScaleSim`] has served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScaleStats {
    /// HTTP requests.
    pub requests: u64,
    /// List pages served.
    pub list_pages: u64,
    /// Watches opened.
    pub watches: u64,
    /// 410 Gone answers and ERROR lines.
    pub gone: u64,
    /// Bookmarks sent.
    pub bookmarks: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub requests: AtomicU64,
    pub list_pages: AtomicU64,
    pub watches: AtomicU64,
    pub gone: AtomicU64,
    pub bookmarks: AtomicU64,
}

pub(crate) struct Shared {
    pub store: Mutex<ScaleStore>,
    /// The newest resourceVersion, for watches to wake on.
    pub rv_tx: watch::Sender<u64>,
    pub bookmark_interval: Option<Duration>,
    pub stats: Counters,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    fn notify(&self, rv: u64) {
        self.rv_tx.send_replace(rv);
    }
}

/// A running scale simulator (stopped when dropped).
pub struct ScaleSim {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ScaleSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScaleSim")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

fn now_secs() -> i64 {
    SystemClock.now().unix_secs()
}

impl ScaleSim {
    /// Starts one on its own thread (with its own tokio runtime); returns once it accepts
    /// connections. Callable from anywhere, blocking briefly.
    pub fn start(config: ScaleConfig) -> Result<ScaleSim, SimError> {
        let seed: u32 = uuid::Uuid::new_v4().as_u128() as u32;
        let shared = Arc::new(Shared {
            store: Mutex::new(ScaleStore::new(config.window, seed)),
            rv_tx: watch::channel(0).0,
            bookmark_interval: config.bookmark_interval,
            stats: Counters::default(),
        });
        let std_listener =
            std::net::TcpListener::bind(config.addr).map_err(|e| SimError::Bind {
                addr: config.addr,
                source: e,
            })?;
        let addr = std_listener.local_addr().map_err(|e| SimError::Bind {
            addr: config.addr,
            source: e,
        })?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| SimError::Bind { addr, source: e })?;
        let (stop, stopped) = oneshot::channel();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let server_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kevents-scale-sim".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(SimError::Thread(e.to_string())));
                        return;
                    }
                };
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = ready_tx.send(Err(SimError::Bind { addr, source: e }));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    http::serve_scale(server_shared, listener, stopped).await;
                });
            })
            .map_err(|e| SimError::Thread(e.to_string()))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(ScaleSim {
                shared,
                addr,
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(SimError::Thread("the scale simulator thread exited".into())),
        }
    }

    /// `http://ADDR`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig (YAML) for it (no credentials: it does not authenticate).
    ///
    /// ```
    /// let sim = kevents_sim::scale::ScaleSim::start(Default::default()).unwrap();
    /// assert!(sim.kubeconfig("default").contains(&sim.url()));
    /// ```
    pub fn kubeconfig(&self, namespace: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n    server: {}\nusers:\n- name: sim\n  user: {{}}\ncontexts:\n- name: sim\n  context:\n    cluster: sim\n    user: sim\n    namespace: {namespace}\ncurrent-context: sim\n",
            self.url()
        )
    }

    /// Creates `n` live events fast, as a past already compacted (no watch sees them
    /// created): Pod events `pod-I.{I in hex}` spread over namespaces `ns-0` ..
    /// `ns-{namespaces - 1}`, names continuing after earlier preloads.
    pub fn preload(&self, n: usize, namespaces: usize) -> Vec<EventId> {
        let namespaces = namespaces.max(1);
        let now = now_secs();
        let reasons = ["Scheduled", "Pulled", "Created", "Started"];
        let mut ids = Vec::with_capacity(n);
        let mut store = lock(&self.shared.store);
        let base = store.live() as u64;
        let mut i = base;
        while ids.len() < n {
            let e = NewEvent::pod(
                &format!("ns-{}", i % namespaces as u64),
                &format!("pod-{i}"),
                i,
                reasons[(i % 4) as usize],
                "a preloaded event",
            );
            if let Ok(slot) = store.create(&e, now, false) {
                ids.push(EventId(slot));
            }
            i += 1;
        }
        let rv = store.rv;
        drop(store);
        self.shared.notify(rv);
        ids
    }

    /// Creates an event (count 1, timestamps now).
    pub fn create(&self, event: &NewEvent) -> Result<EventId, WriteError> {
        let mut store = lock(&self.shared.store);
        let slot = store.create(event, now_secs(), true)?;
        let rv = store.rv;
        drop(store);
        self.shared.notify(rv);
        Ok(EventId(slot))
    }

    /// Raises a live event's count by `by` (lastTimestamp now); its new count.
    pub fn raise(&self, id: EventId, by: u32) -> Result<u32, WriteError> {
        let mut store = lock(&self.shared.store);
        let count = store.raise(id.0, by, now_secs())?;
        let rv = store.rv;
        drop(store);
        self.shared.notify(rv);
        Ok(count)
    }

    /// Deletes a live event.
    pub fn delete(&self, id: EventId) -> Result<(), WriteError> {
        let mut store = lock(&self.shared.store);
        store.delete(id.0)?;
        let rv = store.rv;
        drop(store);
        self.shared.notify(rv);
        Ok(())
    }

    /// The live event named `namespace`/`name`.
    pub fn find(&self, namespace: &str, name: &str) -> Option<EventId> {
        lock(&self.shared.store).find(namespace, name).map(EventId)
    }

    /// An event's uid (also after its deletion).
    pub fn uid(&self, id: EventId) -> String {
        lock(&self.shared.store).uid(id.0)
    }

    /// The event with uid `uid`.
    pub fn id_of_uid(&self, uid: &str) -> Option<EventId> {
        lock(&self.shared.store).slot_of_uid(uid).map(EventId)
    }

    /// A live event's count.
    pub fn count(&self, id: EventId) -> Option<u32> {
        lock(&self.shared.store).count(id.0)
    }

    /// Live events.
    pub fn live(&self) -> usize {
        lock(&self.shared.store).live()
    }

    /// The newest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.store).rv
    }

    /// The compacted resourceVersion: watches and continue tokens from before it get 410.
    pub fn compacted(&self) -> u64 {
        lock(&self.shared.store).compacted
    }

    /// Compacts the history up to `rv` (as `etcdctl compact`): watches from before it get
    /// 410 Gone, as do continue tokens and exact lists at older resourceVersions.
    pub fn compact(&self, rv: u64) {
        let mut store = lock(&self.shared.store);
        store.compact_to(rv);
        let now = store.rv;
        drop(store);
        self.shared.notify(now);
    }

    /// Starts the built-in writer (see [`Writer`]).
    pub fn start_writer(&self, config: WriterConfig) -> Writer {
        Writer::start(self.shared.clone(), config)
    }

    /// What it has served so far.
    pub fn stats(&self) -> ScaleStats {
        let c = &self.shared.stats;
        ScaleStats {
            requests: c.requests.load(Ordering::Relaxed),
            list_pages: c.list_pages.load(Ordering::Relaxed),
            watches: c.watches.load(Ordering::Relaxed),
            gone: c.gone.load(Ordering::Relaxed),
            bookmarks: c.bookmarks.load(Ordering::Relaxed),
        }
    }
}

impl Drop for ScaleSim {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
