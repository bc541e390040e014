//! A `#[tokio::main]` program's last moments with the facade: it records `N` events through an
//! [`HttpSink`](kevents::HttpSink) pipeline and returns from `main` without calling
//! `shutdown`. Dropping the last `Pipeline` handle waits for its drain (up to
//! `PipelineBuilder::drop_deadline`), so every count is stored before the process exits.
//!
//! ```sh
//! KUBECONFIG=/path/to/kubeconfig cargo run --example exit_without_shutdown -- [NAMESPACE] [N] [OBJECT]
//! ```
//!
//! The events are about a Pod `OBJECT` (default `web-1`, need not exist) in `NAMESPACE`
//! (default `default`, must exist); `N` defaults to 10.

use kevents::{EventSource, EventType, HttpSink, ObjectReference, Pipeline, SinkOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let namespace = args.next().unwrap_or_else(|| "default".into());
    let n: u32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(10);
    let object = args.next().unwrap_or_else(|| "web-1".into());

    let sink = HttpSink::infer().await?;
    let pipeline = Pipeline::builder(EventSource::new("exit-probe", "node-1"))
        .sink("apiserver", sink, SinkOptions::default())
        .start();
    let recorder = pipeline.recorder();
    let pod = ObjectReference::new("v1", "Pod", &namespace, &object);
    for _ in 0..n {
        recorder.event(
            &pod,
            EventType::Warning,
            "BackOff",
            "Back-off restarting failed container",
        )?;
    }
    // No `pipeline.shutdown(..)`: the pipeline is dropped here, and its drop waits until the
    // counts are stored.
    Ok(())
}
