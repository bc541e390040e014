//! The signal that ends a process in a rollout: [`terminated`].

/// Resolves when the process is asked to end: SIGTERM (what the kubelet sends a pod's
/// containers at a rollout, a scale-down or an eviction) or SIGINT (Ctrl-C); on other
/// platforms than Unix, Ctrl-C. Await it beside the application's work, then shut the
/// pipeline down with a deadline shorter than the pod's `terminationGracePeriodSeconds`
/// (30 s by default), so that the last counts are written before the kubelet's SIGKILL.
///
/// Runs on any tokio runtime with its I/O driver (`#[tokio::main]`, an actix `System`).
/// Returns an error when the signal handlers cannot be installed.
///
/// ```no_run
/// use kevents_actors::{Pipeline, SinkOptions, terminated};
/// use kevents_core::{EventSource, EventType, ObjectReference};
/// use kevents_sim::MemoryApiServer;
/// use std::time::Duration;
///
/// #[tokio::main]
/// async fn main() -> std::io::Result<()> {
///     let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
///         .sink("apiserver", MemoryApiServer::new(), SinkOptions::default())
///         .start();
///     let recorder = pipeline.recorder();
///     let work = async {
///         let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
///         loop {
///             let _ = recorder.event(&pod, EventType::Normal, "Synced", "in sync");
///             tokio::time::sleep(Duration::from_secs(1)).await;
///         }
///     };
///     tokio::select! {
///         () = work => {}
///         signal = terminated() => signal?,
///     }
///     // Within terminationGracePeriodSeconds (30 s by default), with room to spare.
///     let report = pipeline.shutdown(Duration::from_secs(20)).await;
///     eprintln!("{report}");
///     Ok(())
/// }
/// ```
pub async fn terminated() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}
