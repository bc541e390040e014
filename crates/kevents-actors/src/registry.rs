//! What every actor of one pipeline shares: the intake's counters, every watcher queue,
//! every sink and series chain's counters, and the count of live actors. It assembles
//! [`StatsSnapshot`]s; it decides nothing and carries nothing between stages (the pipeline's
//! `EventPool` is handed to the broadcaster and the core/v1 chains themselves).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::budget::WriteBudget;
use crate::queue::{IntakeBytes, WatcherQueue};
use crate::stats::StatsSnapshot;
use crate::telemetry::{IntakeCounters, SeriesCounters, SinkCounters};

/// The pipeline's shared registry.
#[derive(Debug)]
pub(crate) struct Registry {
    pub(crate) intake: IntakeCounters,
    intake_bytes: OnceLock<Arc<IntakeBytes>>,
    watchers: Mutex<Vec<Arc<WatcherQueue>>>,
    sinks: Mutex<Vec<Arc<SinkCounters>>>,
    series: Mutex<Vec<Arc<SeriesCounters>>>,
    budgets: Mutex<Vec<WriteBudget>>,
    live_actors: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Registry {
    pub(crate) fn new() -> Self {
        Registry {
            intake: IntakeCounters::new(),
            intake_bytes: OnceLock::new(),
            watchers: Mutex::new(Vec::new()),
            sinks: Mutex::new(Vec::new()),
            series: Mutex::new(Vec::new()),
            budgets: Mutex::new(Vec::new()),
            live_actors: AtomicU64::new(0),
        }
    }

    /// The bounded intake's byte count (for snapshots).
    pub(crate) fn set_intake_bytes(&self, b: Arc<IntakeBytes>) {
        let _ = self.intake_bytes.set(b);
    }

    pub(crate) fn add_watcher(&self, w: Arc<WatcherQueue>) {
        lock(&self.watchers).push(w);
    }

    pub(crate) fn add_sink(&self, s: Arc<SinkCounters>) {
        lock(&self.sinks).push(s);
    }

    pub(crate) fn add_series(&self, s: Arc<SeriesCounters>) {
        lock(&self.series).push(s);
    }

    /// A budget some chain writes with (listed once, however many chains share it).
    pub(crate) fn add_budget(&self, b: &WriteBudget) {
        let mut budgets = lock(&self.budgets);
        if b.is_enabled() && !budgets.iter().any(|x| x.same(b)) {
            budgets.push(b.clone());
        }
    }

    /// Every watcher queue registered so far (removed ones included).
    pub(crate) fn watchers(&self) -> Vec<Arc<WatcherQueue>> {
        lock(&self.watchers).clone()
    }

    pub(crate) fn actor_started(&self) {
        self.live_actors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn actor_stopped(&self) {
        self.live_actors.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn live_actors(&self) -> u64 {
        self.live_actors.load(Ordering::Relaxed)
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let [
            recorded,
            dropped_invalid,
            dropped_intake_full,
            dropped_after_shutdown,
            broadcast,
            intake_depth,
        ] = self.intake.values();
        let [intake_coalesced, intake_overflow] = self.intake.overflow_values();
        StatsSnapshot {
            intake_coalesced,
            intake_overflow,
            recorded,
            dropped_invalid,
            dropped_intake_full,
            dropped_after_shutdown,
            broadcast,
            intake_depth,
            intake_bytes: self.intake_bytes.get().map_or(0, |b| b.used() as u64),
            watchers: lock(&self.watchers).iter().map(|w| w.snapshot()).collect(),
            sinks: lock(&self.sinks).iter().map(|s| s.snapshot()).collect(),
            sinks_events_v1: lock(&self.series).iter().map(|s| s.snapshot()).collect(),
            budgets: lock(&self.budgets).iter().map(|b| b.snapshot()).collect(),
        }
    }
}
