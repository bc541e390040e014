//! Why a pipeline did not start, or an operation on it failed; the handle of a registered
//! watcher.

use thiserror::Error;

use crate::broadcaster::WatcherId;

/// Why [`PipelineBuilder::try_start`](crate::PipelineBuilder::try_start) or
/// [`PipelineBuilder::start_thread`](crate::PipelineBuilder::start_thread) returned no
/// pipeline.
///
/// ```
/// let e = kevents_actors::StartError::Stopped;
/// assert_eq!(e.to_string(), "the kevents pipeline thread stopped while starting");
/// ```
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StartError {
    /// The pipeline's own thread could not be spawned (the operating system refused it).
    #[error("cannot spawn the kevents pipeline thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The pipeline's own thread ended before the pipeline was running.
    #[error("the kevents pipeline thread stopped while starting")]
    Stopped,
    /// A queue's bound cannot work (a zero capacity or overflow table): nothing started.
    #[error("the {queue} policy is invalid: {source}")]
    Policy {
        /// The queue: `intake`, `logging`, `sink:<name>`, `series:<name>` or a watcher's name.
        queue: String,
        /// What is wrong with it.
        #[source]
        source: crate::policy::PolicyError,
    },
}

/// Why a pipeline operation failed.
///
/// ```
/// let e = kevents_actors::PipelineError::InsideRuntime;
/// assert!(e.to_string().contains("shutdown(deadline).await"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// The pipeline's actors have stopped (it was shut down).
    #[error("the event pipeline is shut down")]
    Shutdown,
    /// [`Pipeline::shutdown_blocking`](crate::Pipeline::shutdown_blocking) was called on a
    /// thread that runs an async runtime, which it would block. The pipeline was dropped,
    /// which drains it on its own thread if it has one.
    #[error(
        "shutdown_blocking called inside an async runtime, which it would block: use \
         `pipeline.shutdown(deadline).await` there"
    )]
    InsideRuntime,
    /// [`Pipeline::add_watcher`](crate::Pipeline::add_watcher),
    /// [`add_sink`](crate::Pipeline::add_sink) or [`add_sink_events_v1`](crate::Pipeline::add_sink_events_v1)
    /// with a queue bound that cannot work (a zero capacity or overflow table): nothing added.
    #[error("the {queue} policy is invalid: {source}")]
    Policy {
        /// The watcher's name (`sink:<name>`, `series:<name>` for chains).
        queue: String,
        /// What is wrong with it.
        #[source]
        source: crate::policy::PolicyError,
    },
}

/// A registered watcher: its id and a view of its counters.
#[derive(Debug, Clone)]
pub struct WatcherHandle {
    id: WatcherId,
    name: String,
}

impl WatcherHandle {
    pub(super) fn new(id: WatcherId, name: String) -> Self {
        WatcherHandle { id, name }
    }

    /// The watcher's id.
    pub fn id(&self) -> WatcherId {
        self.id
    }

    /// The name it was registered with (the key in
    /// [`StatsSnapshot::watchers`](crate::StatsSnapshot::watchers)).
    pub fn name(&self) -> &str {
        &self.name
    }
}
