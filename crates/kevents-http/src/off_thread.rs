//! File reads that cannot freeze an async thread: a credential or configuration file may be
//! a FIFO nobody writes to, a device, or sit on a hung network mount, and `open`, `stat` and
//! `read` on it block the calling thread in the kernel, where no timeout reaches. Such reads
//! run on a thread of their own and the caller waits for them only so long
//! ([`CREDENTIAL_FILE_TIMEOUT`]); a read that does not finish is given up (its thread ends
//! whenever the kernel lets it), so neither an actix arbiter nor a runtime's shutdown ever
//! waits for it.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::{ConfigError, read_capped};

/// Longest wait for one credential file (a token file, a client certificate or key, a CA
/// bundle) or for a kubeconfig and the files it names: a read that takes longer fails (for a
/// request: like a transport error, retried and counted).
pub const CREDENTIAL_FILE_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `work` on a new thread named `name` and waits at most `timeout` for its result
/// (`None`: it did not finish, or a thread could not be started, or it panicked). Never
/// blocks the calling thread, and needs no runtime timer (a second thread keeps the time and
/// ends as soon as the work does), so it works on any executor, timers enabled or not.
pub(crate) async fn off_thread<T, F>(name: &str, timeout: Duration, work: F) -> Option<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel::<Option<T>>();
    // Whoever comes first, the work or the timer, answers.
    let first = Arc::new(Mutex::new(Some(tx)));
    let answer = |first: &Mutex<Option<tokio::sync::oneshot::Sender<Option<T>>>>, v| {
        if let Some(tx) = first.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(v);
        }
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let for_work = Arc::clone(&first);
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let out = work();
            answer(&for_work, Some(out));
            let _ = done_tx.send(());
        })
        .ok()?;
    std::thread::Builder::new()
        .name(format!("{name}-timer"))
        .spawn(move || {
            // Woken early when the work ends (or its thread dies).
            let _ = done_rx.recv_timeout(timeout);
            answer(&first, None);
        })
        .ok()?;
    rx.await.ok().flatten()
}

/// Reads at most `limit` bytes of `path` (`what` names it in errors) on a thread of its
/// own, waiting at most [`CREDENTIAL_FILE_TIMEOUT`]: a file that cannot be read in time (a
/// FIFO without a writer, a hung mount) is [`ConfigError::Stalled`] instead of a frozen
/// caller. Needs a tokio runtime.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use kevents_http::{read_credential_file, ConfigError};
/// let dir = std::env::temp_dir().join(format!("kevents-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let token = dir.join("token");
/// std::fs::write(&token, "t0ken\n").unwrap();
/// assert_eq!(read_credential_file("token file", &token, 1024).await.unwrap(), b"t0ken\n");
/// let missing = read_credential_file("token file", &dir.join("none"), 1024).await;
/// assert!(matches!(missing, Err(ConfigError::Read { .. })));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # }
/// ```
pub async fn read_credential_file(
    what: &'static str,
    path: &Path,
    limit: u64,
) -> Result<Vec<u8>, ConfigError> {
    let owned = path.to_owned();
    off_thread("kevents-file-read", CREDENTIAL_FILE_TIMEOUT, move || {
        read_capped(what, &owned, limit)
    })
    .await
    .unwrap_or_else(|| {
        Err(ConfigError::Stalled {
            what: format!("{what} {}", path.display()),
            after: CREDENTIAL_FILE_TIMEOUT,
        })
    })
}
