//! The pipeline's actors as seen from the arbiter that started them: watcher registration,
//! flush and shutdown. [`Pipeline`](super::Pipeline) calls this directly when it was started
//! inside an actix `System`, and through its own thread's loop (`thread.rs`) otherwise.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::error::{PipelineError, WatcherHandle};
use super::report::ShutdownReport;
use crate::broadcaster::{Broadcaster, Drained, Register, StopBroadcaster, Unregister};
use crate::chain::{ChainEnv, ChainSpec, Spawned};
use crate::core_v1::{ReleaseTails, SinkChain, SinkSpec, StopCorrelator};
use crate::events_v1::{FlushSeries, SeriesChain, SeriesSpec, StopSeries};
use crate::message::{EventBatch, EventMessage};
use crate::policy::WatcherPolicy;
use crate::queue::WatcherQueue;
use crate::recorder::{CloseIntake, Intake, RecorderActor, StopRecorder};

/// The running actors of one pipeline and what is needed to add chains to it.
pub(super) struct Local {
    pub(super) intake: Arc<Intake>,
    pub(super) recorder_addr: Addr<RecorderActor>,
    pub(super) broadcaster: Addr<Broadcaster>,
    pub(super) sinks: Vec<SinkChain>,
    pub(super) series: Vec<SeriesChain>,
    /// What every chain is spawned with (budget, clock, event pool, placement, queue bound).
    pub(super) env: ChainEnv,
}

impl Local {
    pub(super) async fn add_watcher(
        &self,
        name: String,
        recipient: Recipient<EventMessage>,
        policy: WatcherPolicy,
    ) -> Result<WatcherHandle, PipelineError> {
        let queue = Arc::new(WatcherQueue::new(&name, policy, self.env.queue_max_bytes));
        self.register(recipient, None, queue).await
    }

    /// Registers a watcher and its queue with the broadcaster; the handle is named after
    /// the queue.
    async fn register(
        &self,
        recipient: Recipient<EventMessage>,
        batch: Option<Recipient<EventBatch>>,
        queue: Arc<WatcherQueue>,
    ) -> Result<WatcherHandle, PipelineError> {
        let name = queue.name().to_owned();
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

    /// Spawns a chain of either API (the same contract as at start) and registers its
    /// watcher; `keep` stores the running chain.
    async fn add_chain<S: ChainSpec>(
        &mut self,
        spec: S,
        keep: impl FnOnce(&mut Self, S::Chain),
    ) -> Result<WatcherHandle, PipelineError> {
        let Spawned {
            chain,
            recipient,
            batch,
            queue,
        } = spec.spawn(&self.env);
        keep(self, chain);
        self.register(recipient, batch, queue).await
    }

    pub(super) async fn add_sink(
        &mut self,
        spec: SinkSpec,
    ) -> Result<WatcherHandle, PipelineError> {
        self.add_chain(spec, |l, chain| l.sinks.push(chain)).await
    }

    pub(super) async fn add_sink_events_v1(
        &mut self,
        spec: SeriesSpec,
    ) -> Result<WatcherHandle, PipelineError> {
        self.add_chain(spec, |l, chain| l.series.push(chain)).await
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
        let target = self.env.registry.intake.recorded_total();
        // Everything recorded before this call must have left the intake first.
        while self.env.registry.intake.taken_total() < target {
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

        // What other watchers (not core/v1 sink chains) still hold: nothing counts it later.
        let pending_elsewhere: Vec<(String, u64)> = self
            .env
            .registry
            .watchers()
            .iter()
            .filter(|w| !is_core_chain(w.name()))
            .map(|w| (w.name().to_owned(), w.depth() + w.overflow_occurrences()))
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
        // After the teardown, so that each occurrence is in one outcome: a core/v1 chain's
        // queued writes are now `abandoned` (its `failed()`), so its pending part is only
        // what its overflow table still holds (occurrences no write carries); the intake's
        // rest went nowhere.
        let pending_intake = self.env.registry.intake.undistributed();
        let mut pending_watchers: Vec<(String, u64)> = Vec::new();
        for w in self.env.registry.watchers().iter() {
            let n = if is_core_chain(w.name()) {
                w.overflow_occurrences()
            } else {
                pending_elsewhere
                    .iter()
                    .find(|p| p.0 == w.name())
                    .map_or(0, |p| p.1)
            };
            if n > 0 {
                pending_watchers.push((w.name().to_owned(), n));
            }
        }
        let registry = Arc::clone(&self.env.registry);
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

/// Whether a watcher is the queue of a core/v1 sink chain (`sink:<name>`), whose queued
/// events end as writes (`abandoned` at a deadline).
fn is_core_chain(watcher: &str) -> bool {
    watcher.starts_with("sink:")
}

/// Waits until every slot of every watcher is free again.
async fn wait_idle(watchers: &[Arc<WatcherQueue>]) {
    for w in watchers {
        w.wait_idle().await;
    }
}
