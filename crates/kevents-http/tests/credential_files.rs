//! Credential files that block (issue 27): a token file, a kubeconfig or a client key that is
//! a FIFO nobody writes to (as a hung network mount would behave). Each read is given up
//! after `CREDENTIAL_FILE_TIMEOUT` with an error naming the file, and the thread that asked
//! (a current-thread runtime, as an actix arbiter) keeps running other tasks meanwhile.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kevents_core::{Event, EventSink, SinkError};
use kevents_http::{CREDENTIAL_FILE_TIMEOUT, ConfigError, HttpConfig, HttpSink};

/// A FIFO in a fresh directory (kept alive by the returned guard); nothing ever writes to it.
fn fifo(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let ok = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo");
    (dir, path)
}

fn event(name: &str) -> Event {
    let mut e = Event::default();
    e.metadata.name = name.into();
    e.metadata.namespace = "default".into();
    e.involved_object.namespace = "default".into();
    e.count = 1;
    e
}

/// Runs `fut` on a current-thread runtime (on a thread of its own, given up after 20 s: a
/// blocked thread fails the test instead of hanging it) next to a ticker; returns its
/// output, how long it took and how many 50 ms ticks the ticker made meanwhile (the thread
/// was never blocked if they match the time).
fn on_one_thread<T: Send + 'static>(
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> (T, Duration, u32) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run_with_ticker(fut));
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the runtime's thread is blocked (20 s)")
}

fn run_with_ticker<T>(fut: impl std::future::Future<Output = T>) -> (T, Duration, u32) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ticker = tokio::spawn(async {
            let mut ticks = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                ticks += 1;
                if ticks >= 40 {
                    return ticks;
                }
            }
        });
        let started = Instant::now();
        let out = fut.await;
        let took = started.elapsed();
        let ticks = ticker.await.unwrap();
        (out, took, ticks)
    })
}

fn assert_bounded(took: Duration, ticks: u32) {
    assert!(
        took >= CREDENTIAL_FILE_TIMEOUT - Duration::from_millis(100)
            && took < CREDENTIAL_FILE_TIMEOUT + Duration::from_secs(3),
        "{took:?}"
    );
    assert_eq!(ticks, 40, "the runtime's thread was blocked");
}

#[test]
fn a_token_file_that_blocks_fails_the_request_like_a_transport_error() {
    common::logs();
    let (_dir, token) = fifo("token");
    // Nothing listens there: the request must never get that far.
    let config = HttpConfig::new("https://127.0.0.1:1")
        .unwrap()
        .with_token_file(&token, Duration::from_secs(60));
    let sink = HttpSink::new(config).unwrap();
    let (result, took, ticks) = on_one_thread(sink.create(&event("blocked.1")));
    assert_bounded(took, ticks);
    let err = result.unwrap_err();
    assert!(
        matches!(&err, SinkError::Transport(t) if t.contains("did not finish") && t.contains(&token.display().to_string())),
        "{err:?}"
    );
    assert_eq!(err.disposition(), kevents_core::Disposition::Retry);
    // `authenticate` says the same, typed.
    let (auth, _, _) = on_one_thread(async move { sink.authenticate().await });
    assert!(
        matches!(&auth, Err(ConfigError::Credential(m)) if m.contains("did not finish")),
        "{auth:?}"
    );
}

fn kubeconfig(dir: &Path, user: &str) -> PathBuf {
    let path = dir.join("config");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"https://127.0.0.1:1\"}}\nusers:\n- name: u\n  user:\n{user}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn a_kubeconfig_or_a_key_file_that_blocks_is_a_stalled_load() {
    common::logs();
    // The kubeconfig itself.
    let (_dir, config) = fifo("config");
    let c = config.clone();
    let (result, took, ticks) =
        on_one_thread(async move { HttpConfig::from_kubeconfig(Some(&c), None).await });
    assert_bounded(took, ticks);
    let err = result.unwrap_err();
    assert!(matches!(err, ConfigError::Stalled { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains(&format!("kubeconfig {}", config.display())),
        "{err}"
    );
    // A client key file it names.
    let (dir, key) = fifo("key.pem");
    std::fs::write(dir.path().join("cert.pem"), "x").unwrap();
    let path = kubeconfig(
        dir.path(),
        &format!(
            "    client-certificate: cert.pem\n    client-key: {}",
            key.display()
        ),
    );
    let (result, took, ticks) =
        on_one_thread(async move { HttpConfig::from_kubeconfig(Some(&path), None).await });
    assert_bounded(took, ticks);
    assert!(
        matches!(result, Err(ConfigError::Stalled { .. })),
        "{result:?}"
    );
}
