//! The running [`Pipeline`]: its handles, watcher registration, flush and shutdown.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use kevents_core::EventSink;
use thiserror::Error;

use super::report::ShutdownReport;
use crate::broadcaster::{Broadcaster, Drained, Register, StopBroadcaster, Unregister, WatcherId};
use crate::budget::WriteBudget;
use crate::core_v1::{
    Placement, ReleaseTails, SinkChain, SinkOptions, SinkSpec, StopCorrelator, spawn_chain,
};
use crate::events_v1::{FlushSeries, SeriesChain, StopSeries};
use crate::message::EventMessage;
use crate::policy::WatcherPolicy;
use crate::queue::WatcherQueue;
use crate::recorder::{CloseIntake, Intake, Recorder, RecorderActor, StopRecorder};
use crate::registry::Registry;
use crate::stats::StatsSnapshot;

/// A running pipeline: Recorder actor -> Broadcaster -> watchers (logging, sink chains:
/// Correlator -> supervised Sink, your own actors).
///
/// Dropping it without [`shutdown`](Pipeline::shutdown) leaves the actors running until the
/// actix `System` stops (which drops, not drains, what is queued); if counts are unwritten
/// then, it logs a warning and asks the chains to write them (best effort: only while their
/// arbiter runs; [`StatsSnapshot::unwritten`]).
pub struct Pipeline {
    pub(super) recorder: Recorder,
    pub(super) intake: Arc<Intake>,
    pub(super) recorder_addr: Addr<RecorderActor>,
    pub(super) broadcaster: Addr<Broadcaster>,
    pub(super) sinks: Vec<SinkChain>,
    pub(super) series: Vec<SeriesChain>,
    /// Where the sink chains' actors run (`PipelineBuilder::sink_arbiter`, `writer_arbiter`).
    pub(super) placement: Placement,
    pub(super) queue_max_bytes: usize,
    /// The budget of chains without their own.
    pub(super) budget: WriteBudget,
    pub(super) registry: Arc<Registry>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// Why a pipeline operation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PipelineError {
    /// The pipeline's actors have stopped (it was shut down).
    #[error("the event pipeline is shut down")]
    Shutdown,
}

/// A registered watcher: its id and a view of its counters.
#[derive(Debug, Clone)]
pub struct WatcherHandle {
    id: WatcherId,
    name: String,
}

impl WatcherHandle {
    /// The watcher's id.
    pub fn id(&self) -> WatcherId {
        self.id
    }

    /// The name it was registered with (the key in [`StatsSnapshot::watchers`]).
    pub fn name(&self) -> &str {
        &self.name
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

    /// Registers a watcher actor. It sees every event the broadcaster distributes after the
    /// registration (in intake order).
    pub async fn add_watcher(
        &self,
        name: impl Into<String>,
        recipient: Recipient<EventMessage>,
        policy: WatcherPolicy,
    ) -> Result<WatcherHandle, PipelineError> {
        let name = name.into();
        let queue = Arc::new(WatcherQueue::new(&name, policy, self.queue_max_bytes));
        let id = self
            .broadcaster
            .send(Register {
                recipient,
                batch: None,
                queue,
            })
            .await
            .map_err(|_| PipelineError::Shutdown)?;
        Ok(WatcherHandle { id, name })
    }

    /// Adds a sink chain (its own correlator, as client-go's second `StartRecordingToSink`)
    /// registered as watcher `sink:<name>`; it sees every event distributed after this call.
    pub async fn add_sink(
        &mut self,
        name: impl Into<String>,
        sink: impl EventSink,
        options: SinkOptions,
    ) -> Result<WatcherHandle, PipelineError> {
        let spec = SinkSpec {
            name: name.into(),
            sink: Arc::new(sink),
            options,
        };
        let (chain, recipient, queue) = spawn_chain(
            spec,
            &self.budget,
            &self.registry,
            self.queue_max_bytes,
            &self.placement,
        );
        let name = queue.name().to_owned();
        let batch = Some(chain.correlator.clone().recipient());
        self.sinks.push(chain);
        let id = self
            .broadcaster
            .send(Register {
                recipient,
                batch,
                queue,
            })
            .await
            .map_err(|_| PipelineError::Shutdown)?;
        Ok(WatcherHandle { id, name })
    }

    /// Unregisters a watcher; events already queued for it are still delivered. Returns
    /// whether it was registered.
    pub async fn remove_watcher(&self, watcher: &WatcherHandle) -> Result<bool, PipelineError> {
        self.broadcaster
            .send(Unregister(watcher.id))
            .await
            .map_err(|_| PipelineError::Shutdown)
    }

    /// Waits until everything recorded so far has been distributed and every watcher has
    /// finished it (sink chains: written or given up). Recording goes on meanwhile.
    pub async fn flush(&self) -> Result<(), PipelineError> {
        let target = self.registry.intake.recorded_total();
        // Everything recorded before this call must have left the intake first.
        while self.registry.intake.taken_total() < target {
            actix_rt::time::sleep(Duration::from_millis(1)).await;
        }
        let watchers = self
            .broadcaster
            .send(Drained)
            .await
            .map_err(|_| PipelineError::Shutdown)?;
        wait_idle(&watchers).await;
        Ok(())
    }

    /// Shuts the pipeline down: refuses new occurrences, drains the intake, the
    /// broadcaster, every watcher and every sink (writes and their retries) until `deadline`,
    /// then stops every actor and reports what was delivered, dropped and still pending.
    /// Never panics.
    pub async fn shutdown(self, deadline: Duration) -> ShutdownReport {
        self.intake.close();
        let recorder_addr = self.recorder_addr.clone();
        let broadcaster = self.broadcaster.clone();
        let tails: Vec<_> = self.sinks.iter().map(|c| c.correlator.clone()).collect();
        let flush: Vec<_> = self
            .series
            .iter()
            .filter(|c| c.flush_on_shutdown)
            .map(|c| c.addr.clone())
            .collect();
        let drain = async move {
            recorder_addr.send(CloseIntake).await.ok()?;
            let watchers = broadcaster.send(Drained).await.ok()?;
            wait_idle(&watchers).await;
            // Every event is observed: write the latest count of every open series, and every
            // deferred spam tail.
            for s in flush {
                s.send(FlushSeries).await.ok()?;
            }
            for c in tails {
                c.send(ReleaseTails).await.ok()?;
            }
            Some(())
        };
        let completed = matches!(actix_rt::time::timeout(deadline, drain).await, Ok(Some(())));

        let pending_intake = self.registry.intake.undistributed();
        let pending_watchers = self
            .registry
            .watchers()
            .iter()
            .map(|w| (w.name().to_owned(), w.depth() + w.overflow_occurrences()))
            .filter(|p| p.1 > 0)
            .collect();

        // Teardown: recorder, broadcaster (drops every watcher's address), sink chains.
        self.recorder_addr.do_send(StopRecorder);
        let _ = self.broadcaster.send(StopBroadcaster).await;
        for chain in &self.sinks {
            let _ = chain.correlator.send(StopCorrelator).await;
        }
        for chain in &self.series {
            let _ = chain.addr.send(StopSeries).await;
        }
        let registry = Arc::clone(&self.registry);
        // The intake is closed: the drop warns of nothing.
        drop(self);
        // Let the stopped actors (possibly on another arbiter) run their last poll.
        for round in 0..1_000 {
            if registry.live_actors() == 0 {
                break;
            }
            if round < 64 {
                actix_rt::task::yield_now().await;
            } else {
                actix_rt::time::sleep(Duration::from_millis(1)).await;
            }
        }
        ShutdownReport {
            completed,
            pending_intake,
            pending_watchers,
            live_actors: registry.live_actors(),
            stats: registry.snapshot(),
        }
    }
}

/// Waits until every slot of every watcher is free again.
async fn wait_idle(watchers: &[Arc<WatcherQueue>]) {
    for w in watchers {
        w.wait_idle().await;
    }
}
