//! The running [`Pipeline`]: one handle, whether its actors run on the caller's actix arbiter
//! or on a thread of their own.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use kevents_core::EventSink;

use tokio::sync::oneshot;

pub use super::error::{PipelineError, WatcherHandle};
use super::local::Local;
use super::report::ShutdownReport;
use super::thread::{Command, ThreadLink};
use crate::core_v1::{SinkOptions, SinkSpec};
use crate::events_v1::SeriesSpec;
use crate::message::EventMessage;
use crate::policy::WatcherPolicy;
use crate::recorder::Recorder;
use crate::registry::Registry;
use crate::stats::StatsSnapshot;

/// A running pipeline: Recorder actor -> Broadcaster -> watchers (logging, sink chains:
/// Correlator -> supervised Sink, your own actors).
///
/// Started inside an actix `System` its actors run on the caller's arbiter; started anywhere
/// else (a `#[tokio::main]` application, synchronous code) they run in an actix `System` on
/// a thread of their own ([`PipelineBuilder::start`](crate::PipelineBuilder::start)). The
/// methods are the same either way, and their futures run on any executor.
///
/// **Dropping it without [`shutdown`](Pipeline::shutdown)** (a `?` out of `main`, a panic, a
/// forgotten call): a pipeline on its own thread is shut down there with the builder's
/// [`drop_deadline`](crate::PipelineBuilder::drop_deadline), and the drop **waits** for that
/// drain (on a multi-thread tokio runtime through `block_in_place`), so a process that returns
/// from `main` right after has every count stored; what could not be written by then is said
/// on stderr (and through `tracing`), once, in occurrences. A pipeline on the caller's actix
/// arbiter cannot be waited for there (its actors run on the dropping thread): it keeps
/// writing while the actix `System` runs, and says on stderr what a stop now would lose.
/// [`shutdown`](Pipeline::shutdown) is the way to choose the deadline and get the report;
/// [`terminated`](crate::terminated) ends an application on SIGTERM or Ctrl-C.
pub struct Pipeline {
    pub(super) recorder: Recorder,
    pub(super) registry: Arc<Registry>,
    pub(super) mode: Mode,
}

/// Where the pipeline's actors run.
pub(super) enum Mode {
    /// On the arbiter that started it.
    Local(Box<Local>),
    /// On its own thread, reached through its command channel.
    Thread(ThreadLink),
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("own_thread", &self.runs_on_own_thread())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Pipeline {
    /// A handle to record events with (cheap to clone, usable from any thread).
    pub fn recorder(&self) -> Recorder {
        self.recorder.clone()
    }

    /// Every counter, now.
    pub fn stats(&self) -> StatsSnapshot {
        self.registry.snapshot()
    }

    /// Whether the actors run on a thread of their own (the pipeline was started outside an
    /// actix `System`, or with [`start_thread`](crate::PipelineBuilder::start_thread)).
    pub fn runs_on_own_thread(&self) -> bool {
        matches!(self.mode, Mode::Thread(_))
    }

    /// Sends `make`'s command to the pipeline's thread and waits for the answer.
    async fn ask<T>(
        link: &ThreadLink,
        make: impl FnOnce(oneshot::Sender<Result<T, PipelineError>>) -> Command,
    ) -> Result<T, PipelineError> {
        let (tx, rx) = oneshot::channel();
        link.commands()
            .ok_or(PipelineError::Shutdown)?
            .send(make(tx))
            .map_err(|_| PipelineError::Shutdown)?;
        rx.await.map_err(|_| PipelineError::Shutdown)?
    }

    /// Registers a watcher actor. It sees every event the broadcaster distributes after the
    /// registration (in intake order).
    pub async fn add_watcher(
        &self,
        name: impl Into<String>,
        recipient: Recipient<EventMessage>,
        policy: WatcherPolicy,
    ) -> Result<WatcherHandle, PipelineError> {
        let name = name.into();
        policy.check().map_err(|source| PipelineError::Policy {
            queue: name.clone(),
            source,
        })?;
        match &self.mode {
            Mode::Local(local) => local.add_watcher(name, recipient, policy).await,
            Mode::Thread(tx) => {
                Self::ask(tx, |r| Command::AddWatcher(name, recipient, policy, r)).await
            }
        }
    }

    /// Adds a sink chain (its own correlator, as client-go's second `StartRecordingToSink`)
    /// registered as watcher `sink:<name>`; it sees every event distributed after this call.
    pub async fn add_sink(
        &mut self,
        name: impl Into<String>,
        sink: impl EventSink,
        options: SinkOptions,
    ) -> Result<WatcherHandle, PipelineError> {
        let name = name.into();
        options
            .delivery
            .check()
            .map_err(|source| PipelineError::Policy {
                queue: format!("sink:{name}"),
                source,
            })?;
        let spec = SinkSpec {
            name,
            sink: Arc::new(sink),
            options,
        };
        match &mut self.mode {
            Mode::Local(local) => local.add_sink(spec).await,
            Mode::Thread(tx) => Self::ask(tx, |r| Command::AddSink(Box::new(spec), r)).await,
        }
    }

    /// Adds an events.k8s.io/v1 series chain (its own series cache, timers and writer, as
    /// [`PipelineBuilder::sink_events_v1`](crate::PipelineBuilder::sink_events_v1) adds one)
    /// registered as watcher `series:<name>`; it sees every event distributed after this
    /// call. On [`shutdown`](Pipeline::shutdown) it writes the latest count of its open
    /// series like the chains the pipeline started with.
    ///
    /// ```
    /// use kevents_actors::{EventsV1Config, Pipeline};
    /// use kevents_core::events_v1::{Occurrence, Reporter};
    /// use kevents_core::{EventSource, EventType, ObjectReference};
    /// use kevents_sim::MemoryApiServer;
    /// use std::time::Duration;
    /// use kevents_actors::events_v1::SinkOptions;
    ///
    /// # actix::System::new().block_on(async {
    /// let mut pipeline = Pipeline::builder(EventSource::new("example.com/ctl", "node-1"))
    ///     .events_v1(EventsV1Config::new(Reporter::with_instance("example.com/ctl", "ctl-0")))
    ///     .start();
    /// let api = MemoryApiServer::new();
    /// let watcher = pipeline
    ///     .add_sink_events_v1("apiserver", api.clone(), SinkOptions::default())
    ///     .await
    ///     .unwrap();
    /// assert_eq!(watcher.name(), "series:apiserver");
    /// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
    /// let backoff = || {
    ///     Occurrence::new(pod.clone(), None, EventType::Warning, "BackOff", "Restart", "crash")
    /// };
    /// pipeline.recorder().events_v1().emit(backoff()).unwrap();
    /// pipeline.recorder().events_v1().emit(backoff()).unwrap();
    /// let report = pipeline.shutdown(Duration::from_secs(5)).await;
    /// assert!(report.completed);
    /// assert_eq!(api.list_events_v1()[0].series.map(|s| s.count), Some(2));
    /// # });
    /// ```
    pub async fn add_sink_events_v1(
        &mut self,
        name: impl Into<String>,
        sink: impl kevents_core::events_v1::EventSink,
        options: crate::events_v1::SinkOptions,
    ) -> Result<WatcherHandle, PipelineError> {
        let name = name.into();
        options
            .delivery
            .check()
            .map_err(|source| PipelineError::Policy {
                queue: format!("series:{name}"),
                source,
            })?;
        let spec = SeriesSpec {
            name,
            sink: Arc::new(sink),
            options,
        };
        match &mut self.mode {
            Mode::Local(local) => local.add_sink_events_v1(spec).await,
            Mode::Thread(tx) => Self::ask(tx, |r| Command::AddSinkV1(Box::new(spec), r)).await,
        }
    }

    /// Unregisters a watcher; events already queued for it are still delivered. Returns
    /// whether it was registered.
    pub async fn remove_watcher(&self, watcher: &WatcherHandle) -> Result<bool, PipelineError> {
        match &self.mode {
            Mode::Local(local) => local.remove_watcher(watcher).await,
            Mode::Thread(tx) => {
                let watcher = watcher.clone();
                Self::ask(tx, |r| Command::RemoveWatcher(watcher, r)).await
            }
        }
    }

    /// Waits until everything recorded so far has been distributed and every watcher has
    /// finished it (sink chains: written or given up). Recording goes on meanwhile.
    pub async fn flush(&self) -> Result<(), PipelineError> {
        match &self.mode {
            Mode::Local(local) => local.flush().await,
            Mode::Thread(tx) => Self::ask(tx, Command::Flush).await,
        }
    }

    /// Shuts the pipeline down: refuses new occurrences, drains the intake, the
    /// broadcaster, every watcher and every sink (writes and their retries) until `deadline`,
    /// then stops every actor and reports what was delivered, dropped and still pending.
    /// Never panics.
    ///
    /// A pipeline on its own thread answers once that thread's runtime is gone, with the
    /// connections its requests opened (a blocking task there, such as a DNS lookup, is
    /// waited for until `deadline` only).
    pub async fn shutdown(self, deadline: Duration) -> ShutdownReport {
        let Pipeline { registry, mode, .. } = self;
        match mode {
            Mode::Local(local) => local.shutdown(deadline).await,
            Mode::Thread(mut link) => {
                let (reply, rx) = oneshot::channel();
                if let Some(tx) = link.take_for_shutdown()
                    && tx.send(Command::Shutdown(deadline, reply)).is_ok()
                    && let Ok(report) = rx.await
                {
                    return report;
                }
                // The thread is gone (it panicked, or its System was stopped): report what
                // the counters say.
                ShutdownReport {
                    completed: false,
                    pending_intake: registry.intake.undistributed(),
                    pending_watchers: Vec::new(),
                    live_actors: registry.live_actors(),
                    stats: registry.snapshot(),
                }
            }
        }
    }

    /// [`shutdown`](Pipeline::shutdown) for synchronous code: blocks the calling thread
    /// until the report is there. Refused with [`PipelineError::InsideRuntime`] on a thread
    /// that runs an async runtime (it would block that runtime; await
    /// [`shutdown`](Pipeline::shutdown) there).
    ///
    /// ```
    /// use kevents_actors::{Pipeline, SinkOptions};
    /// use kevents_core::{EventSource, EventType, ObjectReference};
    /// use kevents_sim::MemoryApiServer;
    /// use std::time::Duration;
    ///
    /// // No runtime here: the pipeline runs on a thread of its own.
    /// let api = MemoryApiServer::new();
    /// let pipeline = Pipeline::builder(EventSource::new("my-tool", "host-1"))
    ///     .sink("apiserver", api.clone(), SinkOptions::default())
    ///     .start();
    /// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
    /// pipeline.recorder().event(&pod, EventType::Normal, "Checked", "all good").unwrap();
    /// let report = pipeline.shutdown_blocking(Duration::from_secs(5)).unwrap();
    /// assert_eq!(report.delivered(), 1);
    /// assert_eq!(api.list().len(), 1);
    /// ```
    pub fn shutdown_blocking(self, deadline: Duration) -> Result<ShutdownReport, PipelineError> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(PipelineError::InsideRuntime);
        }
        // A runtime of this thread's own: a pipeline on its own thread only needs its answer
        // awaited, one on an arbiter elsewhere a timer for the drain. Building one fails only
        // when the OS refuses its resources; the pipeline is dropped then (drained on its own
        // thread if it has one).
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .map(|rt| rt.block_on(self.shutdown(deadline)))
            .map_err(|_| PipelineError::Shutdown)
    }
}
