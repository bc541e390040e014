//! The two primitives every stage counts with: a [`Counter`] kept in-process and mirrored to
//! the `metrics` facade, and a [`DropLog`] that logs drops without flooding.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A counter kept in-process (read by snapshots) and mirrored to the `metrics` facade.
#[derive(Debug)]
pub(crate) struct Counter {
    value: AtomicU64,
    handle: metrics::Counter,
}

impl Counter {
    pub(crate) fn new(handle: metrics::Counter) -> Self {
        Counter {
            value: AtomicU64::new(0),
            handle,
        }
    }

    pub(crate) fn add(&self, n: u64) {
        if n > 0 {
            self.value.fetch_add(n, Ordering::Relaxed);
            self.handle.increment(n);
        }
    }

    pub(crate) fn get(&self) -> u64 {
        self.value.load(Ordering::Relaxed)
    }
}

/// Minimum time between two summary lines of one kind of drop.
pub(crate) const DROP_LOG_INTERVAL: Duration = Duration::from_secs(10);

fn process_millis() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Logs drops without flooding: the first drop of a kind is logged at once, later ones as a
/// summary at most once per [`DROP_LOG_INTERVAL`].
#[derive(Debug)]
pub(crate) struct DropLog {
    what: String,
    first_logged: AtomicBool,
    unlogged: AtomicU64,
    last_ms: AtomicU64,
}

impl DropLog {
    pub(crate) fn new(what: impl Into<String>) -> Self {
        DropLog {
            what: what.into(),
            first_logged: AtomicBool::new(false),
            unlogged: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
        }
    }

    pub(crate) fn record(&self, n: u64) {
        if !self.first_logged.swap(true, Ordering::Relaxed) {
            self.last_ms.store(process_millis(), Ordering::Relaxed);
            tracing::warn!(
                target: "kevents::drops",
                what = %self.what,
                dropped = n,
                "kevents dropped events (further drops of this kind are summarised at most every {}s)",
                DROP_LOG_INTERVAL.as_secs()
            );
            return;
        }
        self.unlogged.fetch_add(n, Ordering::Relaxed);
        let now = process_millis();
        let last = self.last_ms.load(Ordering::Relaxed);
        let interval = u64::try_from(DROP_LOG_INTERVAL.as_millis()).unwrap_or(u64::MAX);
        if now.saturating_sub(last) >= interval
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            let dropped = self.unlogged.swap(0, Ordering::Relaxed);
            tracing::warn!(
                target: "kevents::drops",
                what = %self.what,
                dropped,
                since_secs = now.saturating_sub(last) / 1000,
                "kevents dropped events"
            );
        }
    }
}
