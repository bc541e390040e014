//! The pipeline's actors as seen from the arbiter that started them: watcher registration,
//! flush and shutdown. [`Pipeline`](super::Pipeline) calls this directly when it was started
//! inside an actix `System`, and through its own thread's loop (`thread.rs`) otherwise.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use kevents_core::SharedClock;

use super::error::{PipelineError, WatcherHandle};
use super::report::ShutdownReport;
use crate::broadcaster::{Broadcaster, Drained, Register, StopBroadcaster, Unregister};
use crate::budget::WriteBudget;
use crate::core_v1::{Placement, ReleaseTails, SinkChain, SinkSpec, StopCorrelator, spawn_chain};
use crate::event_pool::EventPool;
use crate::events_v1::{FlushSeries, SeriesChain, SeriesSpec, StopSeries, spawn_series};
use crate::message::EventMessage;
use crate::policy::WatcherPolicy;
use crate::queue::WatcherQueue;
use crate::recorder::{CloseIntake, Intake, RecorderActor, StopRecorder};
use crate::registry::Registry;

/// The running actors of one pipeline and what is needed to add chains to it.
pub(super) struct Local {
    pub(super) intake: Arc<Intake>,
    pub(super) recorder_addr: Addr<RecorderActor>,
    pub(super) broadcaster: Addr<Broadcaster>,
    pub(super) sinks: Vec<SinkChain>,
    pub(super) series: Vec<SeriesChain>,
    /// Where the sink chains' actors run (`PipelineBuilder::sink_arbiter`, `writer_arbiter`).
    pub(super) placement: Placement,
    pub(super) queue_max_bytes: usize,
    /// The clock of series chains without their own (`PipelineBuilder::clock`).
    pub(super) clock: SharedClock,
    /// The budget of chains without their own.
    pub(super) budget: WriteBudget,
    /// Written core/v1 events: the broadcaster builds into them, the core/v1 chains give
    /// them back.
    pub(super) pool: Arc<EventPool>,
    pub(super) registry: Arc<Registry>,
}

impl Local {
    pub(super) async fn add_watcher(
        &self,
        name: String,
        recipient: Recipient<EventMessage>,
        policy: WatcherPolicy,
    ) -> Result<WatcherHandle, PipelineError> {
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
        Ok(WatcherHandle::new(id, name))
    }

    pub(super) async fn add_sink(
        &mut self,
        spec: SinkSpec,
    ) -> Result<WatcherHandle, PipelineError> {
        let (chain, recipient, queue) = spawn_chain(
            spec,
            &self.budget,
            &self.pool,
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
        Ok(WatcherHandle::new(id, name))
    }

    pub(super) async fn add_series_sink(
        &mut self,
        spec: SeriesSpec,
    ) -> Result<WatcherHandle, PipelineError> {
        let name = format!("series:{}", spec.name);
        let (chain, recipient, policy) = spawn_series(
            spec,
            &self.budget,
            &self.clock,
            &self.registry,
            self.placement.correlator.as_ref(),
        );
        let queue = Arc::new(WatcherQueue::new(&name, policy, self.queue_max_bytes));
        self.series.push(chain);
        let id = self
            .broadcaster
            .send(Register {
                recipient,
                batch: None,
                queue,
            })
            .await
            .map_err(|_| PipelineError::Shutdown)?;
        Ok(WatcherHandle::new(id, name))
    }

    pub(super) async fn remove_watcher(
        &self,
        watcher: &WatcherHandle,
    ) -> Result<bool, PipelineError> {
        self.broadcaster
            .send(Unregister(watcher.id()))
            .await
            .map_err(|_| PipelineError::Shutdown)
    }

    pub(super) async fn flush(&self) -> Result<(), PipelineError> {
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

    pub(super) async fn shutdown(self, deadline: Duration) -> ShutdownReport {
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
        // The intake is closed: the drop (`on_drop.rs`) warns of nothing.
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
