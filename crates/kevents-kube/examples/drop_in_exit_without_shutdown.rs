//! A `#[tokio::main]` controller's last moments: it publishes `N` events with the drop-in
//! recorder and returns from `main` without calling `shutdown` (a `?` out of `main`, a
//! forgotten call). The last handle's drop waits for the pipeline's drain, so every count is
//! stored before the process exits (kube-rs's own recorder, one request per `publish`, stores
//! them too; without the wait they would all be lost).
//!
//! ```sh
//! KUBECONFIG=/path/to/kubeconfig cargo run -p kevents-kube --example drop_in_exit_without_shutdown -- [NAMESPACE] [N] [OBJECT]
//! ```
//!
//! The events are about a Pod `OBJECT` (default `web-1`, need not exist) in `NAMESPACE`
//! (default `default`, must exist); `N` defaults to 10.

use k8s_openapi::api::core::v1::ObjectReference;
use kevents_kube::Recorder;
use kube::runtime::events::{Event, EventType, Reporter};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let namespace = args.next().unwrap_or_else(|| "default".into());
    let n: u32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(10);
    let object = args.next().unwrap_or_else(|| "web-1".into());

    let client = kube::Client::try_default().await?;
    let reporter = Reporter {
        controller: "example.com/exit-probe".into(),
        instance: None,
    };
    let recorder = Recorder::new(client, reporter);
    let pod = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(namespace),
        name: Some(object),
        ..Default::default()
    };
    let backoff = Event {
        type_: EventType::Warning,
        reason: "BackOff".into(),
        note: Some("Back-off restarting failed container".into()),
        action: "Restart".into(),
        secondary: None,
    };
    for _ in 0..n {
        recorder.publish(&backoff, &pod).await?;
    }
    // No `recorder.shutdown(..)`: `recorder` is dropped here, and its drop waits (up to
    // `RecorderOptions::drop_deadline`) until the counts are stored.
    Ok(())
}
