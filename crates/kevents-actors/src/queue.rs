//! The bounded queue in front of each watcher: flow control only. It has two bounds, each a
//! semaphore: `capacity` slots (one per event) and `max_bytes` (each event's estimated size).
//! A slot and the event's bytes travel with each [`EventMessage`](crate::EventMessage) and
//! are given back when the watcher is done with it, so the bounds are exact whatever actix's
//! mailbox does. What the queue counts is in its [`WatcherCounters`].

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::message::Recorded;
use crate::overflow::{Drained, Merge, Overflow, Repeats};
use crate::policy::WatcherPolicy;
use crate::stats::WatcherSnapshot;
use crate::telemetry::WatcherCounters;

/// The default byte bound of a drop-if-full intake: 64 MiB of queued occurrences.
pub const DEFAULT_INTAKE_MAX_BYTES: usize = 64 << 20;

/// The bytes held by a bounded intake (estimated size of what it holds), shared by
/// the senders (who add) and the Recorder actor (which subtracts what it takes).
#[derive(Debug)]
pub(crate) struct IntakeBytes {
    used: AtomicUsize,
    max: usize,
    /// Woken when bytes are given back (for callers that wait for room).
    freed: Notify,
}

impl IntakeBytes {
    pub(crate) fn new(max: usize) -> Self {
        IntakeBytes {
            used: AtomicUsize::new(0),
            max: max.max(1),
            freed: Notify::new(),
        }
    }

    /// Reserves `n` bytes; `false` (nothing reserved) if that would pass the bound. A lone
    /// item larger than the whole bound is admitted when the intake holds nothing, so that
    /// no occurrence is refused for ever.
    pub(crate) fn reserve(&self, n: usize) -> bool {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let next = used.saturating_add(n);
            if next > self.max && used > 0 {
                return false;
            }
            match self
                .used
                .compare_exchange_weak(used, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    /// Reserves `n` bytes, waiting until they fit; `false` if `closed` says to give up.
    pub(crate) async fn reserve_wait(&self, n: usize, closed: impl Fn() -> bool) -> bool {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.reserve(n) {
                return true;
            }
            if closed() {
                return false;
            }
            freed.await;
        }
    }

    /// Gives `n` bytes back (taken by the Recorder actor, or a send that failed).
    pub(crate) fn release(&self, n: usize) {
        if n > 0 {
            self.used.fetch_sub(n, Ordering::AcqRel);
            self.freed.notify_waiters();
        }
    }

    /// Wakes every caller waiting for room (the intake is closing).
    pub(crate) fn wake_all(&self) {
        self.freed.notify_waiters();
    }

    /// Bytes held now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
}

/// The default byte bound of every watcher queue: 64 MiB of events queued or being handled.
pub const DEFAULT_QUEUE_MAX_BYTES: usize = 64 << 20;

/// An event waiting in a watcher's overflow table: its sequence number (of its first
/// occurrence), the event, and its size.
pub(crate) struct Pending {
    pub(crate) seq: u64,
    pub(crate) record: Arc<Recorded>,
    pub(crate) size: usize,
}

/// What became of an event offered to a watcher's overflow table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spill {
    /// Held as a new entry.
    Added,
    /// Merged into the entry of its identity.
    Coalesced,
    /// The table holds its bound of entries (a counted drop).
    Full,
}

/// The overflow table of a coalesce-if-full watcher queue. Only the broadcaster adds to and
/// takes from it; the lock makes the queue shareable and is never contended in practice.
struct WatcherOverflow {
    table: Mutex<Overflow<Pending>>,
    /// Whether the table holds anything (checked for every event).
    active: AtomicBool,
    /// Woken when the table becomes empty (for flush and shutdown).
    emptied: Notify,
}

impl std::fmt::Debug for WatcherOverflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatcherOverflow")
            .field("active", &self.active)
            .finish_non_exhaustive()
    }
}

impl WatcherOverflow {
    fn lock(&self) -> MutexGuard<'_, Overflow<Pending>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One watcher's queue: its name, policy, slots, bytes and counters.
#[derive(Debug)]
pub(crate) struct WatcherQueue {
    name: String,
    policy: WatcherPolicy,
    slots: Arc<Semaphore>,
    bytes: Arc<Semaphore>,
    max_bytes: u32,
    overflow: Option<WatcherOverflow>,
    pub(crate) counters: WatcherCounters,
}

impl WatcherQueue {
    /// A queue with `policy`'s slots and `max_bytes` (at least 1, at most 4 GiB).
    pub(crate) fn new(name: &str, policy: WatcherPolicy, max_bytes: usize) -> Self {
        let max_bytes = u32::try_from(max_bytes.max(1)).unwrap_or(u32::MAX);
        WatcherQueue {
            name: name.to_owned(),
            policy,
            slots: Arc::new(Semaphore::new(policy.capacity())),
            bytes: Arc::new(Semaphore::new(max_bytes as usize)),
            max_bytes,
            overflow: policy.overflow().map(|entries| WatcherOverflow {
                table: Mutex::new(Overflow::new(entries, max_bytes as usize)),
                active: AtomicBool::new(false),
                emptied: Notify::new(),
            }),
            counters: WatcherCounters::new(name),
        }
    }

    /// Whether a full queue merges into an overflow table (coalesce-if-full).
    pub(crate) fn coalesces(&self) -> bool {
        self.overflow.is_some()
    }

    /// Whether the overflow table holds anything: later events then go behind it.
    pub(crate) fn overflow_active(&self) -> bool {
        self.overflow
            .as_ref()
            .is_some_and(|o| o.active.load(Ordering::Acquire))
    }

    /// Merges an event (and the repeats it already stands for) into the overflow table.
    pub(crate) fn spill(&self, p: Pending, repeats: Option<Repeats>) -> Spill {
        let Some(o) = &self.overflow else {
            return Spill::Full;
        };
        let key = p.record.identity();
        let last = repeats.map_or_else(|| p.record.at(), |r| r.last);
        let size = p.size;
        let mut t = o.lock();
        let merged = t.merge(key, p, size, repeats, last);
        self.counters.overflow(t.occurrences());
        match merged {
            Merge::Coalesced => Spill::Coalesced,
            Merge::Added => {
                o.active.store(true, Ordering::Release);
                Spill::Added
            }
            Merge::Full(p) => {
                drop(t);
                drop(p);
                Spill::Full
            }
        }
    }

    /// The size of the oldest entry of the overflow table.
    pub(crate) fn overflow_head_size(&self) -> Option<usize> {
        let o = self.overflow.as_ref()?;
        let t = o.lock();
        t.peek().map(|p| p.size)
    }

    /// Takes the oldest entry of the overflow table.
    pub(crate) fn pop_overflow(&self) -> Option<Drained<Pending>> {
        let o = self.overflow.as_ref()?;
        let mut t = o.lock();
        let d = t.pop();
        self.counters.overflow(t.occurrences());
        if t.is_empty() {
            o.active.store(false, Ordering::Release);
            drop(t);
            o.emptied.notify_waiters();
        }
        d
    }

    /// Occurrences held in the overflow table.
    pub(crate) fn overflow_occurrences(&self) -> u64 {
        self.overflow.as_ref().map_or(0, |o| o.lock().occurrences())
    }

    /// What an event of `size` bytes counts against the byte bound: an event larger than
    /// the whole bound counts as the whole bound (it is delivered alone).
    pub(crate) fn byte_cost(&self, size: usize) -> u32 {
        u32::try_from(size)
            .unwrap_or(u32::MAX)
            .clamp(1, self.max_bytes)
    }

    /// `n` bytes (with up to `extra` more, taken ahead for the next events) if free.
    pub(crate) fn try_bytes(&self, n: u32, extra: u32) -> Option<OwnedSemaphorePermit> {
        let free = u32::try_from(self.bytes.available_permits()).unwrap_or(u32::MAX);
        if free < n {
            return None;
        }
        let want = n.saturating_add(extra).min(free);
        Arc::clone(&self.bytes)
            .try_acquire_many_owned(want)
            .or_else(|_| Arc::clone(&self.bytes).try_acquire_many_owned(n))
            .ok()
    }

    /// Waits for `n` bytes (backpressure).
    pub(crate) async fn bytes(&self, n: u32) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.bytes).acquire_many_owned(n).await.ok()
    }

    /// Bytes of the events queued and not yet finished.
    pub(crate) fn bytes_used(&self) -> u64 {
        u64::from(self.max_bytes).saturating_sub(self.bytes.available_permits() as u64)
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

    /// Waits until the overflow table is empty and every slot is free again (the watcher
    /// finished everything queued). (Bytes are given back with the slots.)
    pub(crate) async fn wait_idle(&self) {
        if let Some(o) = &self.overflow {
            loop {
                let emptied = o.emptied.notified();
                tokio::pin!(emptied);
                emptied.as_mut().enable();
                if !o.active.load(Ordering::Acquire) {
                    break;
                }
                emptied.await;
            }
        }
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
            bytes: self.bytes_used(),
            coalesced: self.counters.coalesced_total(),
            overflow: self.overflow_occurrences(),
        }
    }
}
