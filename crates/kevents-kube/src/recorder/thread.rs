//! The pipeline's own thread: an actix `System` on a dedicated OS thread, so the recorder works
//! from a tokio application (every kube-rs controller) that never starts actix. The thread
//! builds the pipeline, hands its recorder handle back, and then serves flush, stats and
//! shutdown commands until shut down (or until every handle is gone).

use std::time::Duration;

use kevents_actors::{
    Pipeline, PipelineBuilder, PipelineError, Recorder, ShutdownReport, StatsSnapshot,
};
use tokio::sync::{mpsc, oneshot};

use super::error::StartError;

/// A request to the pipeline thread.
pub(crate) enum Command {
    Flush(oneshot::Sender<Result<(), PipelineError>>),
    Stats(oneshot::Sender<StatsSnapshot>),
    Shutdown(Duration, oneshot::Sender<ShutdownReport>),
}

/// Starts the thread; returns the pipeline's recorder handle and the command channel.
pub(crate) fn start_thread(
    builder: PipelineBuilder,
    drop_deadline: Duration,
) -> Result<(Recorder, mpsc::UnboundedSender<Command>), StartError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("kevents-recorder".into())
        .spawn(move || {
            let system = actix::System::new();
            let answer = system.block_on(serve(builder, ready_tx, rx, drop_deadline));
            // The runtime goes first, with every connection task the pipeline's requests
            // spawned on it: answered earlier, a request the caller makes right after
            // `shutdown` (on the same `kube::Client`) could take a pooled connection whose
            // task was about to be dropped, and never be answered (seen as a list timing out
            // in about 3% of tries under load, never with the answer sent here).
            drop(system);
            if let Some((reply, report)) = answer {
                let _ = reply.send(report);
            }
        })
        .map_err(StartError::Thread)?;
    let recorder = ready_rx.recv().map_err(|_| StartError::Stopped)?;
    Ok((recorder, tx))
}

/// Serves the commands; returns the answer to a shutdown, sent once the thread's runtime is
/// gone.
async fn serve(
    builder: PipelineBuilder,
    ready: std::sync::mpsc::SyncSender<Recorder>,
    mut rx: mpsc::UnboundedReceiver<Command>,
    drop_deadline: Duration,
) -> Option<(oneshot::Sender<ShutdownReport>, ShutdownReport)> {
    let pipeline: Pipeline = builder.start();
    if ready.send(pipeline.recorder()).is_err() {
        let _ = pipeline.shutdown(Duration::ZERO).await;
        return None;
    }
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Command::Flush(reply) => {
                let _ = reply.send(pipeline.flush().await);
            }
            Command::Stats(reply) => {
                let _ = reply.send(pipeline.stats());
            }
            Command::Shutdown(deadline, reply) => {
                return Some((reply, pipeline.shutdown(deadline).await));
            }
        }
    }
    // Every handle is gone without a shutdown: drain what is left (this needs the kube
    // client's runtime to be alive still).
    let report = pipeline.shutdown(drop_deadline).await;
    if !report.completed {
        tracing::warn!(
            pending = report.pending(),
            "kevents recorder dropped without shutdown: events still pending were abandoned"
        );
    }
    None
}
