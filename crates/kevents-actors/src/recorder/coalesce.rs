//! The overflow of a coalesce-if-full intake: shared by the callers (who merge into it when
//! the intake is full, or while it holds anything, so that order is kept) and the Recorder
//! actor (which drains it once the intake queue is empty). The lock is held for one
//! hash-map update or one batch of pops, never across an await.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::intake_item::Item;
use crate::overflow::{Merge, Overflow};

/// What became of an occurrence offered to the overflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spilled {
    /// Merged into the entry of its identity.
    Coalesced,
    /// Held as a new entry.
    Added,
    /// The Recorder actor has finished: nothing is taken any more.
    Closed,
}

struct Table {
    overflow: Overflow<Item>,
    /// Set by the Recorder actor when it has drained everything and stops reading.
    closed: bool,
}

/// The intake's overflow table.
pub(crate) struct IntakeOverflow {
    table: Mutex<Table>,
    /// Whether the table holds anything (read without the lock on every call).
    active: AtomicBool,
    /// Wakes the Recorder actor when the table gets its first entry.
    wake: Notify,
}

impl IntakeOverflow {
    /// A table of at most `entries` entries and `max_bytes` estimated bytes.
    pub(crate) fn new(entries: usize, max_bytes: usize) -> Self {
        IntakeOverflow {
            table: Mutex::new(Table {
                overflow: Overflow::new(entries, max_bytes),
                closed: false,
            }),
            active: AtomicBool::new(false),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        // Nothing in the critical sections can leave the table half-updated.
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the table holds anything: a call then merges behind it instead of entering
    /// the intake queue, so occurrences stay in order.
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// Merges one occurrence; gives it back if the table holds its bound of entries.
    pub(crate) fn merge(&self, item: Item) -> Result<Spilled, Item> {
        let key = item.identity();
        let at = item.at();
        let size = item.approx_bytes();
        let mut t = self.lock();
        if t.closed {
            return Ok(Spilled::Closed);
        }
        match t.overflow.merge(key, item, size, None, at) {
            Merge::Coalesced => Ok(Spilled::Coalesced),
            Merge::Added => {
                self.active.store(true, Ordering::Release);
                drop(t);
                self.wake.notify_one();
                Ok(Spilled::Added)
            }
            Merge::Full(item) => Err(item),
        }
    }

    /// Takes up to `n` entries, oldest first, each as the occurrences it stands for.
    pub(crate) fn take(&self, n: usize) -> Vec<Item> {
        let mut out = Vec::new();
        let mut t = self.lock();
        while out.len() < n {
            let Some(d) = t.overflow.pop() else { break };
            out.push(match d.repeats {
                Some(r) => Item::Repeated(Box::new(d.value), r),
                None => d.value,
            });
        }
        if t.overflow.is_empty() {
            self.active.store(false, Ordering::Release);
        }
        out
    }

    /// Waits until the table may have entries.
    pub(crate) async fn filled(&self) {
        self.wake.notified().await;
    }

    /// Stops taking occurrences if the table is empty (the Recorder actor is done).
    pub(crate) fn close_if_empty(&self) -> bool {
        let mut t = self.lock();
        if t.overflow.is_empty() {
            t.closed = true;
        }
        t.closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevents_core::{EventType, ObjectReference, Time};

    use crate::intake_item::PackedCore;

    fn item(pod: &str, reason: &str, at: i64) -> Item {
        let r = ObjectReference::new("v1", "Pod", "ns", pod);
        Item::Packed(
            Time::from_unix_nanos(at),
            PackedCore::new((&r).into(), EventType::Normal, reason, "m").unwrap(),
        )
    }

    #[test]
    fn merges_repeats_and_drains_in_order_then_closes() {
        let o = IntakeOverflow::new(2, usize::MAX);
        assert!(!o.active());
        assert_eq!(o.merge(item("a", "R", 1)).ok(), Some(Spilled::Added));
        assert!(o.active());
        assert_eq!(o.merge(item("b", "R", 2)).ok(), Some(Spilled::Added));
        assert_eq!(o.merge(item("a", "R", 3)).ok(), Some(Spilled::Coalesced));
        assert!(o.merge(item("c", "R", 4)).is_err(), "full: given back");
        assert!(!o.close_if_empty(), "not closed while entries are held");
        let taken = o.take(10);
        assert_eq!(
            taken.iter().map(Item::stands_for).collect::<Vec<_>>(),
            [2, 1]
        );
        match &taken[0] {
            Item::Repeated(first, r) => {
                assert_eq!(first.at(), Time::from_unix_nanos(1));
                assert_eq!(r.last, Time::from_unix_nanos(3));
            }
            _ => panic!("the first entry carries its repeat"),
        }
        assert!(!o.active());
        assert!(o.close_if_empty());
        assert_eq!(o.merge(item("a", "R", 5)).ok(), Some(Spilled::Closed));
    }

    /// What a `hot` workload entry counts against the byte bound (docs/semantics.md 3b).
    #[test]
    fn a_hot_entry_costs_about_a_kilobyte() {
        let o = IntakeOverflow::new(8, usize::MAX);
        let r = ObjectReference::new("v1", "Pod", "bench", "pod-123").with_uid("uid-123");
        let it = Item::Packed(
            Time::from_unix_nanos(1),
            PackedCore::new(
                (&r).into(),
                EventType::Normal,
                "Reason3",
                "message variant 2",
            )
            .unwrap(),
        );
        let _ = o.merge(it);
        let cost = o.lock().overflow.bytes();
        eprintln!("hot entry: {cost} bytes");
        assert!((600..=1400).contains(&cost), "{cost}");
    }

    #[test]
    fn different_messages_are_different_identities() {
        let o = IntakeOverflow::new(8, usize::MAX);
        let r = ObjectReference::new("v1", "Pod", "ns", "a");
        for m in ["one", "two", "one"] {
            let _ = o.merge(Item::Packed(
                Time::from_unix_nanos(1),
                PackedCore::new((&r).into(), EventType::Normal, "R", m).unwrap(),
            ));
        }
        assert_eq!(
            o.take(10).iter().map(Item::stands_for).collect::<Vec<_>>(),
            [2, 1]
        );
    }
}
