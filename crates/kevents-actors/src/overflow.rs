//! The overflow table of a coalesce-if-full queue: when the queue is full, an occurrence is
//! merged into the entry of its identity (the fields client-go correlates on) as one more
//! repeat, or added as a new entry; entries drain in the order their identity first
//! overflowed. Pure and synchronous: the intake keeps one behind a mutex (never held across
//! I/O), the broadcaster one per coalescing watcher.
//!
//! Memory: an entry holds its key (the identity's strings, about the size of the
//! occurrence's strings), the first occurrence itself, and about 100 bytes of bookkeeping
//! (hash slot, deque slot, counters). Two bounds: entries, and bytes (each entry's estimated
//! size, [`ENTRY_OVERHEAD`] included). Beyond either, a new identity is refused (the caller
//! drops and counts it) while repeats of identities already held are still merged: a repeat
//! costs nothing.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

use kevents_core::reference::ReferenceRef;
use kevents_core::{ObjectReference, Time};

/// The identity occurrences are merged on: the strings client-go's correlator keys on,
/// length-prefixed (so that no two different identities encode alike).
pub(crate) type Identity = Box<[u8]>;

/// Builds an [`Identity`] from fields.
#[derive(Default)]
pub(crate) struct IdentityBuilder(Vec<u8>);

impl IdentityBuilder {
    pub(crate) fn with_capacity(n: usize) -> Self {
        IdentityBuilder(Vec::with_capacity(n))
    }

    /// Appends one field.
    pub(crate) fn field(&mut self, s: &str) -> &mut Self {
        self.0.extend_from_slice(&(s.len() as u64).to_le_bytes());
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    /// Appends one field made of `parts` back to back (the same bytes as [`field`] of their
    /// concatenation).
    ///
    /// [`field`]: IdentityBuilder::field
    pub(crate) fn field_parts(&mut self, parts: &[&str]) -> &mut Self {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.0.extend_from_slice(&(len as u64).to_le_bytes());
        for p in parts {
            self.0.extend_from_slice(p.as_bytes());
        }
        self
    }

    /// Appends a number.
    pub(crate) fn num(&mut self, n: u64) -> &mut Self {
        self.0.extend_from_slice(&n.to_le_bytes());
        self
    }

    /// Appends a tag (which kind of occurrence).
    pub(crate) fn tag(&mut self, t: u8) -> &mut Self {
        self.0.push(t);
        self
    }

    pub(crate) fn finish(self) -> Identity {
        self.0.into_boxed_slice()
    }
}

/// The fields of an object reference, in a fixed order.
pub(crate) fn reference_fields(r: &ObjectReference) -> [&str; 7] {
    ReferenceRef::from(r).fields()
}

/// The identity fields of an events.k8s.io/v1 event (everything but names and times).
pub(crate) fn v1_identity(b: &mut IdentityBuilder, e: &kevents_core::events_v1::Event) {
    for f in reference_fields(&e.regarding) {
        b.field(f);
    }
    match &e.related {
        Some(r) => {
            b.tag(1);
            for f in reference_fields(r) {
                b.field(f);
            }
        }
        None => {
            b.tag(0);
        }
    }
    b.field(&e.type_)
        .field(&e.reason)
        .field(&e.action)
        .field(&e.note)
        .field(&e.reporting_controller)
        .field(&e.reporting_instance);
    for (k, v) in &e.metadata.annotations {
        b.field(k).field(v);
    }
}

/// What a merged entry stands for besides its first occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeats {
    /// Occurrences of the same identity after the first (at least 1).
    pub more: u64,
    /// When the newest of them was recorded.
    pub last: Time,
}

/// The occurrences a first occurrence with `repeats` stands for.
pub(crate) fn stands_for(repeats: Option<Repeats>) -> u64 {
    1 + repeats.map_or(0, |r| r.more)
}

impl Repeats {
    /// Adds `other`'s occurrences (`times` of them, the newest at `last`).
    pub(crate) fn add(this: Option<Repeats>, times: u64, last: Time) -> Option<Repeats> {
        match this {
            None => Some(Repeats { more: times, last }),
            Some(r) => Some(Repeats {
                more: r.more.saturating_add(times),
                last: r.last.max(last),
            }),
        }
    }
}

/// One entry as it leaves the table: the first occurrence and its repeats.
#[derive(Debug)]
pub(crate) struct Drained<V> {
    pub(crate) value: V,
    pub(crate) repeats: Option<Repeats>,
}

impl<V> Drained<V> {
    /// The occurrences this entry stands for.
    pub(crate) fn times(&self) -> u64 {
        stands_for(self.repeats)
    }
}

/// Bookkeeping bytes per entry besides its key and value: the hash-map slot, the deque
/// slot and the counters, rounded up.
pub(crate) const ENTRY_OVERHEAD: usize = 128;

struct Slot<V> {
    key: Identity,
    value: V,
    repeats: Option<Repeats>,
    /// What the entry counts against the byte bound.
    cost: usize,
}

/// The result of [`Overflow::merge`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Merge<V> {
    /// Counted as repeats of an entry already held.
    Coalesced,
    /// Held as a new entry.
    Added,
    /// The table holds its bound of entries: not held (the caller drops and counts it).
    Full(V),
}

/// A bounded table of overflowed occurrences, merged by identity, in first-arrival order.
pub(crate) struct Overflow<V> {
    /// Identity -> absolute position (`base` + index in `entries`). SipHash, not foldhash
    /// (`FastMap`): identities carry the caller's strings (object names, messages).
    index: HashMap<Identity, u64>,
    entries: VecDeque<Slot<V>>,
    base: u64,
    cap: usize,
    max_bytes: usize,
    bytes: usize,
    /// Occurrences held (entries and their repeats).
    occurrences: u64,
}

impl<V> Overflow<V> {
    /// A table of at most `cap` entries (at least 1) and `max_bytes` bytes (a lone entry
    /// larger than that is held when the table is empty, so that nothing is refused for
    /// ever).
    pub(crate) fn new(cap: usize, max_bytes: usize) -> Self {
        Overflow {
            index: HashMap::new(),
            entries: VecDeque::new(),
            base: 0,
            cap: cap.max(1),
            max_bytes,
            bytes: 0,
            occurrences: 0,
        }
    }

    /// Merges `value` of identity `key` (estimated at `size` bytes), which stands for itself
    /// and its own `repeats` (the newest of them at `last`), into the table.
    pub(crate) fn merge(
        &mut self,
        key: Identity,
        value: V,
        size: usize,
        repeats: Option<Repeats>,
        last: Time,
    ) -> Merge<V> {
        let times = stands_for(repeats);
        match self.index.entry(key) {
            Entry::Occupied(o) => {
                let i = (*o.get() - self.base) as usize;
                let slot = &mut self.entries[i];
                slot.repeats = Repeats::add(slot.repeats, times, last);
                self.occurrences += times;
                Merge::Coalesced
            }
            Entry::Vacant(v) => {
                let cost = size + 2 * v.key().len() + ENTRY_OVERHEAD;
                let over_bytes = self.bytes.saturating_add(cost) > self.max_bytes;
                if self.entries.len() >= self.cap || (over_bytes && !self.entries.is_empty()) {
                    return Merge::Full(value);
                }
                let key = v.key().clone();
                v.insert(self.base + self.entries.len() as u64);
                self.entries.push_back(Slot {
                    key,
                    value,
                    repeats,
                    cost,
                });
                self.bytes += cost;
                self.occurrences += times;
                Merge::Added
            }
        }
    }

    /// Takes the oldest entry.
    pub(crate) fn pop(&mut self) -> Option<Drained<V>> {
        let slot = self.entries.pop_front()?;
        self.base += 1;
        self.index.remove(&slot.key);
        self.bytes -= slot.cost;
        let d = Drained {
            value: slot.value,
            repeats: slot.repeats,
        };
        self.occurrences -= d.times();
        Some(d)
    }

    /// The oldest entry's first occurrence.
    pub(crate) fn peek(&self) -> Option<&V> {
        self.entries.front().map(|s| &s.value)
    }

    /// Entries held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Estimated bytes held.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Occurrences held (each entry's first and its repeats).
    pub(crate) fn occurrences(&self) -> u64 {
        self.occurrences
    }

    /// The bound on entries.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Identity {
        let mut b = IdentityBuilder::default();
        b.field(s);
        b.finish()
    }

    fn t(s: i64) -> Time {
        Time::from_unix_nanos(s * 1_000_000_000)
    }

    #[test]
    fn merges_by_identity_and_drains_in_first_arrival_order() {
        let mut o = Overflow::new(10, usize::MAX);
        assert_eq!(o.merge(key("a"), 1, 0, None, t(1)), Merge::Added);
        assert_eq!(o.merge(key("b"), 2, 0, None, t(2)), Merge::Added);
        assert_eq!(o.merge(key("a"), 3, 0, None, t(3)), Merge::Coalesced);
        assert_eq!(o.merge(key("a"), 4, 0, None, t(4)), Merge::Coalesced);
        assert_eq!((o.len(), o.occurrences()), (2, 4));
        let a = o.pop().unwrap();
        assert_eq!(a.value, 1, "the first occurrence is kept");
        assert_eq!(
            a.repeats,
            Some(Repeats {
                more: 2,
                last: t(4)
            })
        );
        assert_eq!(a.times(), 3);
        let b = o.pop().unwrap();
        assert_eq!((b.value, b.repeats), (2, None));
        assert!(o.pop().is_none());
        assert_eq!(o.occurrences(), 0);
        // A popped identity starts a new entry, behind what is held.
        assert_eq!(o.merge(key("c"), 5, 0, None, t(5)), Merge::Added);
        assert_eq!(o.merge(key("a"), 6, 0, None, t(6)), Merge::Added);
        assert_eq!(o.pop().unwrap().value, 5);
        assert_eq!(o.pop().unwrap().value, 6);
    }

    #[test]
    fn bound_refuses_new_identities_but_still_merges_repeats() {
        let mut o = Overflow::new(2, usize::MAX);
        o.merge(key("a"), 1, 0, None, t(1));
        o.merge(key("b"), 2, 0, None, t(1));
        assert_eq!(o.merge(key("c"), 3, 0, None, t(2)), Merge::Full(3));
        assert_eq!(o.merge(key("b"), 4, 0, None, t(3)), Merge::Coalesced);
        assert_eq!(o.len(), 2);
        assert_eq!(o.entries(), 2);
        o.pop();
        assert_eq!(o.merge(key("c"), 3, 0, None, t(4)), Merge::Added);
    }

    #[test]
    fn byte_bound_refuses_new_identities_but_admits_a_lone_big_one() {
        let mut o = Overflow::new(100, 1000);
        assert_eq!(
            o.merge(key("a"), 1, 5000, None, t(1)),
            Merge::Added,
            "alone"
        );
        assert_eq!(o.merge(key("b"), 2, 10, None, t(1)), Merge::Full(2));
        assert_eq!(o.merge(key("a"), 3, 5000, None, t(2)), Merge::Coalesced);
        o.pop();
        assert_eq!(o.bytes(), 0);
        assert_eq!(o.merge(key("b"), 2, 10, None, t(3)), Merge::Added);
        assert_eq!(o.bytes(), 10 + 2 * 9 + ENTRY_OVERHEAD);
    }

    #[test]
    fn merging_an_entry_with_repeats_adds_them_all() {
        let mut o = Overflow::new(4, usize::MAX);
        o.merge(
            key("a"),
            1,
            0,
            Some(Repeats {
                more: 4,
                last: t(9),
            }),
            t(9),
        );
        o.merge(
            key("a"),
            2,
            0,
            Some(Repeats {
                more: 1,
                last: t(5),
            }),
            t(5),
        );
        let d = o.pop().unwrap();
        assert_eq!(
            d.repeats,
            Some(Repeats {
                more: 6,
                last: t(9)
            })
        );
        assert_eq!(d.times(), 7);
    }

    #[test]
    fn identities_are_length_prefixed() {
        let mut ab = IdentityBuilder::default();
        ab.field("a").field("bc");
        let mut abc = IdentityBuilder::default();
        abc.field("ab").field("c");
        assert_ne!(ab.finish(), abc.finish());
    }
}
