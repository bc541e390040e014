//! The aggregation stage's cache entry: the distinct messages (local keys) seen for one
//! aggregate key and when it was last seen (client-go `aggregateRecord` in
//! `tools/record/events_cache.go`).

use indexmap::IndexSet;

use super::keys::Key;
use super::options::AggregatePop;
use crate::time::Time;

#[derive(Debug)]
pub(super) struct AggregateRecord {
    pub(super) local_keys: LocalKeys,
    pub(super) last_timestamp: Time,
}

/// The set of distinct local keys (messages) seen for one aggregate key, in insertion order.
/// While small (the default threshold is 10) the keys sit back to back in one buffer, which
/// a recycled cache entry keeps (no allocation per new aggregate key); a hashed set beyond.
#[derive(Debug)]
pub(super) enum LocalKeys {
    Small(FlatKeys),
    Large(IndexSet<Key>),
}

/// Byte strings back to back in one buffer; `ends[i]` is where key `i` ends.
#[derive(Debug, Default)]
pub(super) struct FlatKeys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl FlatKeys {
    fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let k = &self.bytes[start..end];
            start = end;
            k
        })
    }
    fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }
    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }
    fn remove_first(&mut self) {
        if let Some(&first) = self.ends.first() {
            self.bytes.drain(..first);
            self.ends.remove(0);
            for e in &mut self.ends {
                *e -= first;
            }
        }
    }
    fn remove_last(&mut self) {
        self.ends.pop();
        self.bytes.truncate(self.ends.last().copied().unwrap_or(0));
    }
}

const SMALL_SET: usize = 32;

impl LocalKeys {
    pub(super) fn new(first: &[u8]) -> Self {
        let mut keys = FlatKeys::default();
        keys.push(first);
        LocalKeys::Small(keys)
    }
    pub(super) fn clear(&mut self) {
        match self {
            LocalKeys::Small(v) => v.clear(),
            LocalKeys::Large(_) => *self = LocalKeys::Small(FlatKeys::default()),
        }
    }
    /// The set holding only `first` (a recycled cache entry's: keeps a small set's buffers).
    pub(super) fn reset_to(&mut self, first: &[u8]) {
        self.clear();
        self.insert(first);
    }
    pub(super) fn insert(&mut self, key: &[u8]) {
        match self {
            LocalKeys::Small(v) => {
                if v.iter().any(|k| k == key) {
                    return;
                }
                if v.ends.len() < SMALL_SET {
                    v.push(key);
                } else {
                    let mut set: IndexSet<Key> = v.iter().map(Key::from).collect();
                    set.insert(key.into());
                    *self = LocalKeys::Large(set);
                }
            }
            LocalKeys::Large(s) => {
                if !s.contains(key) {
                    s.insert(key.into());
                }
            }
        }
    }
    pub(super) fn len(&self) -> usize {
        match self {
            LocalKeys::Small(v) => v.ends.len(),
            LocalKeys::Large(s) => s.len(),
        }
    }
    pub(super) fn pop(&mut self, which: AggregatePop) {
        match (self, which) {
            (LocalKeys::Small(v), AggregatePop::Oldest) => v.remove_first(),
            (LocalKeys::Small(v), AggregatePop::Newest) => v.remove_last(),
            (LocalKeys::Large(s), AggregatePop::Oldest) => {
                s.shift_remove_index(0);
            }
            (LocalKeys::Large(s), AggregatePop::Newest) => {
                s.pop();
            }
        }
    }
}
