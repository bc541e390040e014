//! A pipeline on a thread of its own: an actix `System` on a dedicated OS thread, for callers
//! that run no actix `System` (a `#[tokio::main]` application, plain synchronous code). The
//! thread builds the pipeline, hands its recorder handle back, then serves the [`Command`]s
//! of the [`Pipeline`](super::Pipeline) handle until it is shut down or dropped; the same way
//! kevents-kube's drop-in recorder runs its pipeline.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::{mpsc, oneshot};

use super::error::{PipelineError, StartError, WatcherHandle};
use super::local::Local;
use super::report::ShutdownReport;
use crate::core_v1::SinkSpec;
use crate::events_v1::SeriesSpec;
use crate::message::EventMessage;
use crate::policy::WatcherPolicy;
use crate::recorder::Recorder;
use crate::registry::Registry;

/// How long the answer to a shutdown may wait for the thread's runtime to be gone after the
/// pipeline's own shutdown, when that took the whole deadline.
const DROP_GRACE: Duration = Duration::from_millis(100);

/// What the thread's pipeline answers with.
type Reply<T> = oneshot::Sender<Result<T, PipelineError>>;

/// A request from the [`Pipeline`](super::Pipeline) handle to its thread.
pub(super) enum Command {
    Flush(Reply<()>),
    AddWatcher(
        String,
        Recipient<EventMessage>,
        WatcherPolicy,
        Reply<WatcherHandle>,
    ),
    AddSink(Box<SinkSpec>, Reply<WatcherHandle>),
    AddSinkV1(Box<SeriesSpec>, Reply<WatcherHandle>),
    RemoveWatcher(WatcherHandle, Reply<bool>),
    Shutdown(Duration, oneshot::Sender<ShutdownReport>),
}

/// What the caller keeps of a pipeline started on its own thread.
pub(super) struct Started {
    pub(super) recorder: Recorder,
    pub(super) registry: Arc<Registry>,
    pub(super) link: ThreadLink,
}

/// How much longer than the drop deadline a dropped handle waits for the thread: its runtime
/// is dropped after the drain, with the connections and blocking tasks (a DNS lookup) on it.
const DROP_WAIT_GRACE: Duration = Duration::from_secs(1);

/// The caller's end of a pipeline on its own thread: the command channel, and the signal
/// that the thread has ended.
///
/// Dropped without a shutdown (the last [`Pipeline`](super::Pipeline) handle went away: a
/// `?` out of `main`, a panic unwinding, a forgotten call), it closes the channel, which makes
/// the thread drain within the drop deadline, and **waits for that drain** on the dropping
/// thread ([`wait_for_end`]): a process that returns from `main` right after has every count
/// stored.
pub(super) struct ThreadLink {
    /// `None` once a shutdown was sent: the drop then waits for nothing.
    commands: Option<mpsc::UnboundedSender<Command>>,
    /// Disconnected when the thread has ended (pipeline drained, runtime gone).
    ended: std::sync::mpsc::Receiver<()>,
    drop_deadline: Duration,
}

impl ThreadLink {
    /// The command channel (`None` after [`take_for_shutdown`](Self::take_for_shutdown)).
    pub(super) fn commands(&self) -> Option<&mpsc::UnboundedSender<Command>> {
        self.commands.as_ref()
    }

    /// The command channel, for a shutdown: the drop no longer waits, the shutdown's answer
    /// does.
    pub(super) fn take_for_shutdown(&mut self) -> Option<mpsc::UnboundedSender<Command>> {
        self.commands.take()
    }
}

impl Drop for ThreadLink {
    fn drop(&mut self) {
        let Some(commands) = self.commands.take() else {
            return;
        };
        // Closing the channel starts the drain on the pipeline's thread (`serve`).
        drop(commands);
        let limit = self.drop_deadline.saturating_add(DROP_WAIT_GRACE);
        if !wait_for_end(&self.ended, limit) {
            let message = format!(
                "kevents: the pipeline dropped without shutdown had not finished writing its \
                 counts after {limit:?}; leaving it (what it had not written is lost if the \
                 process exits now)"
            );
            tracing::warn!("{message}");
            eprintln!("{message}");
        }
    }
}

/// Waits until the pipeline thread has ended, at most `limit`; whether it ended.
///
/// Wherever the drop happens: on a plain thread it blocks; on a worker (or the `block_on`
/// thread) of a multi-thread tokio runtime it blocks through `block_in_place`, so the
/// runtime's other tasks (a `kube::Client`'s connection tasks the sink's requests need) keep
/// running; on a current-thread runtime (an actix `System`, `#[tokio::test]`) it blocks that
/// runtime, which is right for sinks that run their requests on the pipeline's own thread
/// (the HTTP sink, the simulators) and documented for the others (`drop_deadline`).
fn wait_for_end(ended: &std::sync::mpsc::Receiver<()>, limit: Duration) -> bool {
    use std::sync::mpsc::RecvTimeoutError;
    let wait = || !matches!(ended.recv_timeout(limit), Err(RecvTimeoutError::Timeout));
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            // `block_in_place` refuses (panics) where it cannot hand the worker's tasks over
            // (a runtime shutting down, a `LocalSet` on this thread): block plainly there.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                tokio::task::block_in_place(wait)
            })) {
                Ok(ended) => ended,
                Err(_) => wait(),
            }
        }
        _ => wait(),
    }
}

/// Starts the thread and builds the pipeline on it with `build`; returns once it runs.
pub(super) fn spawn_pipeline_thread(
    build: impl FnOnce() -> (Recorder, Local) + Send + 'static,
    drop_deadline: Duration,
) -> Result<Started, StartError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
    let (tx, rx) = mpsc::unbounded_channel();
    let (ended_tx, ended) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("kevents-pipeline".into())
        .spawn(move || {
            let system = actix::System::new();
            match system.block_on(serve(build, ready_tx, rx, drop_deadline)) {
                Some((reply, report, until)) => answer_after(system, reply, report, until),
                None => drop(system),
            }
            // Last: a handle dropped without shutdown waits for this (the runtime is gone).
            drop(ended_tx);
        })
        .map_err(StartError::Thread)?;
    let (recorder, registry) = ready_rx.recv().map_err(|_| StartError::Stopped)?;
    Ok(Started {
        recorder,
        registry,
        link: ThreadLink {
            commands: Some(tx),
            ended,
            drop_deadline,
        },
    })
}

/// Serves the commands; returns the answer to a shutdown and the instant it may wait for
/// ([`answer_after`]).
async fn serve(
    build: impl FnOnce() -> (Recorder, Local),
    ready: std::sync::mpsc::SyncSender<(Recorder, Arc<Registry>)>,
    mut rx: mpsc::UnboundedReceiver<Command>,
    drop_deadline: Duration,
) -> Option<(oneshot::Sender<ShutdownReport>, ShutdownReport, Instant)> {
    let (recorder, mut local) = build();
    if ready
        .send((recorder, Arc::clone(&local.env.registry)))
        .is_err()
    {
        let _ = local.shutdown(Duration::ZERO).await;
        return None;
    }
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Command::Flush(reply) => {
                let _ = reply.send(local.flush().await);
            }
            Command::AddWatcher(name, recipient, policy, reply) => {
                let _ = reply.send(local.add_watcher(name, recipient, policy).await);
            }
            Command::AddSink(spec, reply) => {
                let _ = reply.send(local.add_sink(*spec).await);
            }
            Command::AddSinkV1(spec, reply) => {
                let _ = reply.send(local.add_sink_events_v1(*spec).await);
            }
            Command::RemoveWatcher(watcher, reply) => {
                let _ = reply.send(local.remove_watcher(&watcher).await);
            }
            Command::Shutdown(deadline, reply) => {
                let until = Instant::now() + deadline;
                let report = local.shutdown(deadline).await;
                return Some((reply, report, until.max(Instant::now() + DROP_GRACE)));
            }
        }
    }
    // The handle is gone without a shutdown (the dropping thread waits for this drain):
    // write what is left rather than drop it.
    let unwritten = local.env.registry.snapshot().unwritten();
    if unwritten > 0 {
        tracing::info!(
            unwritten,
            "kevents pipeline dropped without shutdown: writing its last {unwritten} \
             occurrences within the drop deadline ({drop_deadline:?})"
        );
    }
    let report = local.shutdown(drop_deadline).await;
    super::report::warn_of_losses(&report, "dropped without shutdown", drop_deadline);
    None
}

/// Drops the thread's runtime, then answers a shutdown with `value`; at `until` at the latest.
///
/// The runtime goes first, with every connection task the pipeline's requests spawned on it:
/// answered before, a request the caller makes right after `shutdown` with a client shared
/// with the sink could take a pooled connection whose task was being dropped, and never be
/// answered. Dropping a tokio runtime waits for its blocking tasks (a DNS lookup of the
/// apiserver's host name, say), so a second thread answers at `until` if the runtime is not
/// gone by then.
fn answer_after<T: Send + 'static>(
    system: actix::SystemRunner,
    reply: oneshot::Sender<T>,
    value: T,
    until: Instant,
) {
    type Slot<T> = Mutex<Option<(oneshot::Sender<T>, T)>>;
    fn send<T>(slot: &Slot<T>) -> bool {
        let taken = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        match taken {
            Some((reply, value)) => {
                let _ = reply.send(value);
                true
            }
            None => false,
        }
    }
    let slot: Arc<Slot<T>> = Arc::new(Mutex::new(Some((reply, value))));
    let (gone_tx, gone_rx) = std::sync::mpsc::channel::<()>();
    let late = Arc::clone(&slot);
    // Without this thread (the OS refused it), the answer waits for the runtime.
    let _ = std::thread::Builder::new()
        .name("kevents-pipeline-end".into())
        .spawn(move || {
            let wait = until.saturating_duration_since(Instant::now());
            // Woken when `gone_tx` is dropped (the runtime is gone), else at `until`.
            if gone_rx.recv_timeout(wait).is_err() && send(&late) {
                tracing::warn!(
                    "kevents pipeline: its thread's runtime was not gone by the shutdown \
                     deadline (a blocking task still runs); answered anyway"
                );
            }
        });
    drop(system);
    send(&slot);
    drop(gone_tx);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Set when dropped, slowly: an answer sent before the runtime's tasks are dropped would
    /// find it unset.
    struct SlowFlag(Arc<AtomicBool>);

    impl Drop for SlowFlag {
        fn drop(&mut self) {
            std::thread::sleep(Duration::from_millis(200));
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_answer_comes_once_the_runtime_is_gone() {
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = SlowFlag(Arc::clone(&dropped));
        let (tx, rx) = oneshot::channel();
        // The runtime is not `Send`: it is made and dropped on this thread, as on the
        // pipeline's.
        let t = std::thread::spawn(move || {
            let system = actix::System::new();
            system.block_on(async move {
                // A task left on the runtime, as a connection's task is.
                tokio::spawn(async move {
                    let _flag = flag;
                    std::future::pending::<()>().await;
                });
                tokio::task::yield_now().await;
            });
            answer_after(system, tx, 7u32, Instant::now() + Duration::from_secs(10));
        });
        assert_eq!(rx.blocking_recv(), Ok(7));
        assert!(
            dropped.load(Ordering::SeqCst),
            "answered before the runtime was gone"
        );
        t.join().expect("thread");
    }

    #[test]
    fn a_blocking_task_delays_the_answer_until_the_deadline_only() {
        let (tx, rx) = oneshot::channel();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<Instant>();
        let t = std::thread::spawn(move || {
            let system = actix::System::new();
            system.block_on(async move {
                tokio::task::spawn_blocking(move || {
                    let _ = started_tx.send(());
                    std::thread::sleep(Duration::from_secs(3));
                });
            });
            let Ok(until) = go_rx.recv() else { return };
            answer_after(system, tx, 7u32, until);
        });
        started_rx.recv().expect("the blocking task runs");
        let start = Instant::now();
        go_tx
            .send(start + Duration::from_millis(300))
            .expect("the thread waits");
        assert_eq!(rx.blocking_recv(), Ok(7));
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(250) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
        t.join().expect("thread");
    }
}
