//! A pipeline whose HTTP sink's token file blocks (a FIFO without a writer, as a hung network
//! mount; issue 27): the recorder keeps accepting, the writes fail like transport errors
//! (retried), and `shutdown(3 s)` keeps its deadline with every occurrence accounted for.
//! Before, the file was opened on the sink's arbiter thread, which froze: `shutdown(3 s)` had
//! not returned after 40 s.

use std::time::{Duration, Instant};

use kevents_actors::{Pipeline, SinkOptions};
use kevents_core::{EventSource, EventType, ObjectReference};
use kevents_http::{HttpConfig, HttpSink};

#[test]
fn shutdown_keeps_its_deadline_whatever_the_token_file_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("token");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let out = actix::System::new().block_on(async move {
            // Nothing listens there: no request may ever get that far.
            let config = HttpConfig::new("https://127.0.0.1:1")
                .expect("config")
                .with_token_file(&fifo, Duration::from_secs(60));
            let sink = HttpSink::new(config).expect("sink");
            let p = Pipeline::builder(EventSource::new("test", "node"))
                .sink("apiserver", sink, SinkOptions::default())
                .start();
            let r = p.recorder();
            for i in 0..3 {
                let pod = ObjectReference::new("v1", "Pod", "default", format!("p{i}"));
                r.event(&pod, EventType::Normal, "Started", "started")
                    .expect("queued");
            }
            actix_rt::time::sleep(Duration::from_millis(500)).await;
            let started = Instant::now();
            let report = p.shutdown(Duration::from_secs(3)).await;
            (started.elapsed(), report)
        });
        let _ = tx.send(out);
    });
    let (took, report) = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("shutdown(3 s) has not returned after 30 s: the sink's thread is blocked");
    assert!(took < Duration::from_millis(4500), "{took:?}");
    let k = &report.stats.sinks[0];
    assert_eq!(k.delivered(), 0, "{k:?}");
    // Every occurrence ends in a counted drop: the writes were abandoned at the deadline.
    assert_eq!(k.correlated, 3, "{k:?}");
    assert_eq!(k.abandoned + k.retry_exhausted + k.rejected, 3, "{k:?}");
}
