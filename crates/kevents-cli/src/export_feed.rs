//! With NATS, `--otlp` and `--webhook` are fed from the stream (kevents-export's [`feed`]),
//! not from a second watch: each destination's position (the last stream sequence it
//! accepted) is in the export's key-value bucket (`feed.otlp`, `feed.webhook`) and moves only
//! after the destination accepted a batch. The feeds run beside the export, in the same term
//! (with `--leader-elect`: on the leader only), and stop after it, finishing the batch in
//! flight.

use std::time::Duration;

use kevents_export::{BatchSink, FeedConfig, JetStream, Otlp, Webhook, feed};
use tokio::sync::watch;

use crate::export_sinks::Sinks;

/// The destinations fed from the stream.
pub struct Feeds {
    js: JetStream,
    otlp: Option<Otlp>,
    webhook: Option<Webhook>,
}

/// The feeds of the sinks asked for (none: the export alone).
pub fn feeds_from_stream(js: &JetStream, sinks: Sinks) -> Feeds {
    if let Some(otlp) = &sinks.otlp {
        eprintln!("export: feeding OTLP {} from the stream", otlp.shown());
    }
    if let Some(hook) = &sinks.webhook {
        eprintln!(
            "export: feeding the webhook {} from the stream",
            hook.shown()
        );
    }
    Feeds {
        js: js.clone(),
        otlp: sinks.otlp,
        webhook: sinks.webhook,
    }
}

/// One feed until `stopped` says so: started again 5 s after a failure (from its saved
/// position).
async fn feed_until<S: BatchSink + Clone>(
    js: &JetStream,
    what: &'static str,
    sink: S,
    stopped: watch::Receiver<bool>,
) {
    loop {
        let mut rx = stopped.clone();
        let shutdown = async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        match feed(js, FeedConfig::new(what), sink.clone(), shutdown).await {
            Ok(stats) => {
                eprintln!(
                    "export: the {what} feed stopped after {} records in {} batches (it began after stream sequence {})",
                    stats.records, stats.batches, stats.started_after
                );
                return;
            }
            Err(e) => {
                metrics::counter!("kevents_export_feed_failures_total", "feed" => what)
                    .increment(1);
                eprintln!("export: the {what} feed failed: {e}; again in 5s");
                let mut rx = stopped.clone();
                tokio::select! {
                    _ = rx.wait_for(|s| *s) => return,
                    () = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
            }
        }
    }
}

impl Feeds {
    /// Runs `run` (the export's term) with the feeds beside it; they stop once it ended.
    pub async fn alongside<T>(&self, run: impl std::future::Future<Output = T>) -> T {
        if self.otlp.is_none() && self.webhook.is_none() {
            return run.await;
        }
        let (stop, stopped) = watch::channel(false);
        let run = async {
            let out = run.await;
            let _ = stop.send(true);
            out
        };
        let otlp = async {
            if let Some(o) = &self.otlp {
                feed_until(&self.js, "otlp", o.clone(), stopped.clone()).await;
            }
        };
        let webhook = async {
            if let Some(w) = &self.webhook {
                feed_until(&self.js, "webhook", w.clone(), stopped.clone()).await;
            }
        };
        let (out, (), ()) = tokio::join!(run, otlp, webhook);
        out
    }
}
