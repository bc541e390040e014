//! The bounded LRU caches of the correlator (client-go `groupcache/lru` semantics).

use std::num::NonZeroUsize;

use lru::LruCache;

use super::keys::Key;

/// An LRU cache sized like client-go's: `n > 0` holds at most `n` entries, `0` is unbounded,
/// a negative size keeps nothing (every add is evicted at once).
pub(crate) struct BoundedCache<V> {
    inner: Option<LruCache<Key, V>>,
    evictions: u64,
}

impl<V> BoundedCache<V> {
    pub(crate) fn new(size: i64) -> Self {
        let inner = match usize::try_from(size) {
            Ok(0) => Some(LruCache::unbounded()),
            // `sparse` avoids preallocating huge user-chosen capacities.
            Ok(n) => NonZeroUsize::new(n).map(LruCache::sparse),
            Err(_) => None,
        };
        BoundedCache {
            inner,
            evictions: 0,
        }
    }

    /// Looks `key` up and marks it most recently used.
    pub(crate) fn get_mut(&mut self, key: &[u8]) -> Option<&mut V> {
        self.inner.as_mut()?.get_mut(key)
    }

    /// Adds a key that is not present, evicting the least recently used entry when full.
    pub(crate) fn insert(&mut self, key: &[u8], value: V) {
        match self.inner.as_mut() {
            Some(c) => {
                if let Some((old, _)) = c.push(key.into(), value)
                    && *old != *key
                {
                    self.evictions += 1;
                }
            }
            None => self.evictions += 1,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.inner.as_ref().map_or(0, LruCache::len)
    }

    pub(crate) fn evictions(&self) -> u64 {
        self.evictions
    }
}
