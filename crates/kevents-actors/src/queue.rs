//! The bounded queue in front of each watcher: flow control only. Its capacity is a
//! semaphore of slots; a slot travels with each [`EventMessage`](crate::EventMessage) and is
//! given back when the watcher is done with it, so the bound is exact whatever actix's
//! mailbox does. What the queue counts is in its [`WatcherCounters`].

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::policy::WatcherPolicy;
use crate::stats::WatcherSnapshot;
use crate::telemetry::WatcherCounters;

/// One watcher's queue: its name, policy, slots and counters.
#[derive(Debug)]
pub(crate) struct WatcherQueue {
    name: String,
    policy: WatcherPolicy,
    slots: Arc<Semaphore>,
    pub(crate) counters: WatcherCounters,
}

impl WatcherQueue {
    pub(crate) fn new(name: &str, policy: WatcherPolicy) -> Self {
        WatcherQueue {
            name: name.to_owned(),
            policy,
            slots: Arc::new(Semaphore::new(policy.capacity())),
            counters: WatcherCounters::new(name),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Whether a full queue drops (rather than makes the broadcaster wait).
    pub(crate) fn drops_when_full(&self) -> bool {
        matches!(self.policy, WatcherPolicy::DropIfFull { .. })
    }

    /// One free slot, if any.
    pub(crate) fn try_slot(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.slots).try_acquire_owned().ok()
    }

    /// Up to `wanted` free slots at once (at least 2, or `None`: take them one by one).
    pub(crate) fn try_slots(&self, wanted: usize) -> Option<OwnedSemaphorePermit> {
        let free = self.slots.available_permits().min(wanted);
        if free < 2 {
            return None;
        }
        let free = u32::try_from(free).ok()?;
        Arc::clone(&self.slots).try_acquire_many_owned(free).ok()
    }

    /// Waits for a free slot (backpressure). `None` only if the semaphore was closed, which
    /// never happens.
    pub(crate) async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.slots).acquire_owned().await.ok()
    }

    /// Events queued and not yet finished by the watcher.
    pub(crate) fn depth(&self) -> u64 {
        let cap = self.policy.capacity();
        (cap - self.slots.available_permits().min(cap)) as u64
    }

    /// Publishes the depth gauge.
    pub(crate) fn publish_depth(&self) {
        self.counters.depth(self.depth());
    }

    /// Waits until every slot is free again (the watcher finished everything queued).
    pub(crate) async fn wait_idle(&self) {
        let n = u32::try_from(self.policy.capacity()).unwrap_or(u32::MAX);
        if let Ok(permits) = self.slots.acquire_many(n).await {
            drop(permits);
        }
    }

    pub(crate) fn snapshot(&self) -> WatcherSnapshot {
        let [accepted, dropped_full, dropped_closed] = self.counters.values();
        WatcherSnapshot {
            name: self.name.clone(),
            policy: self.policy,
            accepted,
            dropped_full,
            dropped_closed,
            depth: self.depth(),
        }
    }
}
