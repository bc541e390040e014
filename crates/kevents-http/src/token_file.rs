//! A bearer token read from a file (kubeconfig `tokenFile`, the in-cluster service-account
//! token), read again when it may have rotated: when older than its refresh interval, when
//! the file's mtime changed, and at once after a 401. Every `stat` and read of the file runs
//! on the file's own worker thread (started with the first request, ended when the sink is
//! dropped) and a request waits for it at most [`CREDENTIAL_FILE_TIMEOUT`]: a file that blocks
//! (a FIFO without a writer, a hung network mount) fails that request like a transport error
//! and never freezes the thread that sends it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::time::{Duration, Instant, SystemTime};

use http::HeaderValue;

use crate::config::{ConfigError, MAX_TOKEN_FILE_BYTES, check_bearer_token, read_capped};
use crate::off_thread::CREDENTIAL_FILE_TIMEOUT;

/// Checks waiting for a blocked worker before more are refused at once.
const MAX_WAITING_CHECKS: usize = 64;

/// A sensitive header value (hidden from `http`'s and `reqwest`'s `Debug`).
pub(crate) fn sensitive(value: String) -> Option<HeaderValue> {
    let mut v = HeaderValue::try_from(value).ok()?;
    v.set_sensitive(true);
    Some(v)
}

/// `Bearer <token>` as a sensitive header value.
pub(crate) fn bearer_header(token: &str) -> Option<HeaderValue> {
    sensitive(format!("Bearer {token}"))
}

struct Cached {
    header: HeaderValue,
    read_at: Instant,
    modified: Option<SystemTime>,
}

/// What the worker found.
enum Found {
    /// The mtime is the one known: the cached token stands.
    Unchanged,
    /// The file was read.
    Read(HeaderValue, Option<SystemTime>),
}

/// One request to the worker: `known` is the mtime of the cached token (`None`: read it).
struct Check {
    known: Option<Option<SystemTime>>,
    reply: tokio::sync::oneshot::Sender<Result<Found, String>>,
}

pub(crate) struct TokenFile {
    path: PathBuf,
    refresh: Duration,
    cached: Mutex<Option<Cached>>,
    worker: Mutex<Option<SyncSender<Check>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain values; a panic elsewhere cannot leave them inconsistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The worker's side of a check (on its own thread: may block).
fn check(path: &Path, known: Option<Option<SystemTime>>) -> Result<Found, String> {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    if known.is_some_and(|k| k == modified) {
        return Ok(Found::Unchanged);
    }
    let err = |m: &str| format!("token file {}: {m}", path.display());
    // At most MAX_TOKEN_FILE_BYTES: an endless file (a device, a runaway writer) is
    // refused, not read until memory runs out.
    let bytes = read_capped("token file", path, MAX_TOKEN_FILE_BYTES).map_err(|e| match e {
        ConfigError::Read { source, .. } => err(&source.to_string()),
        other => other.to_string(),
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|_| err("not UTF-8 text"))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(err("empty"));
    }
    check_bearer_token(token, &format!("token file {}", path.display()))
        .map_err(|e| e.to_string())?;
    let header = bearer_header(token)
        .ok_or_else(|| err("invalid bearer token: not a valid header value"))?;
    tracing::debug!(path = %path.display(), "read bearer token file");
    Ok(Found::Read(header, modified))
}

impl TokenFile {
    pub(crate) fn new(path: PathBuf, refresh: Duration) -> Self {
        TokenFile {
            path,
            refresh,
            cached: Mutex::new(None),
            worker: Mutex::new(None),
        }
    }

    /// Asks the worker (started on first use) and waits at most [`CREDENTIAL_FILE_TIMEOUT`].
    async fn ask(&self, known: Option<Option<SystemTime>>) -> Result<Found, String> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = {
            let mut worker = lock(&self.worker);
            let tx = match worker.as_ref() {
                Some(tx) => tx.clone(),
                None => {
                    let (tx, rx) = std::sync::mpsc::sync_channel::<Check>(MAX_WAITING_CHECKS);
                    let path = self.path.clone();
                    std::thread::Builder::new()
                        .name("kevents-token-file".into())
                        .spawn(move || {
                            // Ends when the sink (the sender) is dropped.
                            for c in rx {
                                let _ = c.reply.send(check(&path, c.known));
                            }
                        })
                        .map_err(|e| format!("cannot start a thread to read it: {e}"))?;
                    *worker = Some(tx.clone());
                    tx
                }
            };
            tx.try_send(Check { known, reply })
        };
        let stalled = || {
            format!(
                "token file {}: reading it did not finish within {} s (a FIFO without a writer, or a hung mount?)",
                self.path.display(),
                CREDENTIAL_FILE_TIMEOUT.as_secs()
            )
        };
        match sent {
            Ok(()) => {}
            // The worker is stuck on the file and many requests wait for it already.
            Err(TrySendError::Full(_)) => return Err(stalled()),
            Err(TrySendError::Disconnected(_)) => {
                *lock(&self.worker) = None;
                return Err(format!(
                    "token file {}: its reader thread ended",
                    self.path.display()
                ));
            }
        }
        match tokio::time::timeout(CREDENTIAL_FILE_TIMEOUT, answer).await {
            Ok(Ok(found)) => found,
            Ok(Err(_)) => Err(format!(
                "token file {}: its reader thread ended",
                self.path.display()
            )),
            Err(_) => Err(stalled()),
        }
    }

    /// The token, read again when older than `refresh` or when the file's mtime changed.
    pub(crate) async fn current(&self) -> Result<HeaderValue, String> {
        let known = lock(&self.cached)
            .as_ref()
            .filter(|c| c.read_at.elapsed() < self.refresh)
            .map(|c| c.modified);
        match self.ask(known).await {
            Ok(found) => self
                .learn(found)
                .ok_or_else(|| format!("token file {}: nothing read yet", self.path.display())),
            // A file briefly missing during a rotation, or a slow mount: keep using the last
            // good token.
            Err(e) => match lock(&self.cached).as_ref() {
                Some(c) => {
                    tracing::warn!(error = %e, "using the previous bearer token");
                    Ok(c.header.clone())
                }
                None => Err(e),
            },
        }
    }

    /// Caches what the worker found; returns the token to use (`None` only for an unchanged
    /// file with nothing cached, which `current` never asks for).
    fn learn(&self, found: Found) -> Option<HeaderValue> {
        let mut cached = lock(&self.cached);
        match found {
            Found::Unchanged => cached.as_ref().map(|c| c.header.clone()),
            Found::Read(header, modified) => {
                *cached = Some(Cached {
                    header: header.clone(),
                    read_at: Instant::now(),
                    modified,
                });
                Some(header)
            }
        }
    }

    /// Reads the file now; returns the new header if it differs from `used`.
    pub(crate) async fn reload_if_changed(&self, used: &HeaderValue) -> Option<HeaderValue> {
        let found = self.ask(None).await.ok()?;
        let h = self.learn(found)?;
        (h.as_bytes() != used.as_bytes()).then_some(h)
    }
}
