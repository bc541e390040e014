//! With NATS, `--otlp` and `--webhook` are fed from the stream (kevents-export's [`feed`]),
//! not from a second watch: one durable consumer per destination (`{stream}-otlp`,
//! `{stream}-webhook`), acknowledged after the destination accepted a batch. The feeds run
//! beside the export on every replica (a standby too: the consumer is shared, each batch goes
//! to one of them) and stop after it, finishing the batch in flight.

use std::cell::RefCell;
use std::time::Duration;

use kevents_export::{BatchSink, FeedConfig, JetStream, feed};
use tokio::sync::watch;

use crate::export_sinks::Sinks;

/// The running feeds.
pub struct Feeds {
    stop: watch::Sender<bool>,
    tasks: RefCell<Vec<tokio::task::JoinHandle<()>>>,
}

/// Starts a feed for each sink asked for.
pub async fn start(js: &JetStream, stream: &str, sinks: Sinks) -> anyhow::Result<Feeds> {
    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    if let Some(otlp) = sinks.otlp {
        eprintln!("export: feeding OTLP {} from the stream", otlp.shown());
        tasks.push(spawn(js, stream, "otlp", otlp, stopped.clone()));
    }
    if let Some(hook) = sinks.webhook {
        eprintln!(
            "export: feeding the webhook {} from the stream",
            hook.shown()
        );
        tasks.push(spawn(js, stream, "webhook", hook, stopped.clone()));
    }
    Ok(Feeds {
        stop,
        tasks: RefCell::new(tasks),
    })
}

fn spawn<S: BatchSink + Clone + 'static>(
    js: &JetStream,
    stream: &str,
    what: &'static str,
    sink: S,
    stopped: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let context = js.context().clone();
    let stream = stream.to_owned();
    tokio::task::spawn_local(async move {
        let config = FeedConfig::new(&format!("{stream}-{what}"));
        loop {
            let mut rx = stopped.clone();
            let shutdown = async move {
                let _ = rx.wait_for(|s| *s).await;
            };
            match feed(
                &context,
                &stream,
                &stream,
                config.clone(),
                sink.clone(),
                shutdown,
            )
            .await
            {
                Ok(stats) => {
                    eprintln!(
                        "export: the {what} feed stopped after {} records in {} batches ({} handed out again)",
                        stats.records, stats.batches, stats.redelivered
                    );
                    return;
                }
                Err(e) => {
                    metrics::counter!("kevents_export_feed_failures_total", "sink" => what)
                        .increment(1);
                    tracing::warn!("the {what} feed failed: {e}; again in 5s");
                    let mut rx = stopped.clone();
                    tokio::select! {
                        _ = rx.wait_for(|s| *s) => return,
                        () = tokio::time::sleep(Duration::from_secs(5)) => {}
                    }
                }
            }
        }
    })
}

impl Feeds {
    /// Runs `run` (the export) while the feeds go on in their tasks.
    pub async fn alongside<T>(&self, run: impl std::future::Future<Output = T>) -> T {
        run.await
    }

    /// Stops the feeds, each after its batch in flight (at most 30 s).
    pub async fn finish(&self) {
        let _ = self.stop.send(true);
        let tasks: Vec<_> = self.tasks.borrow_mut().drain(..).collect();
        for t in tasks {
            let abort = t.abort_handle();
            if tokio::time::timeout(Duration::from_secs(30), t)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}
