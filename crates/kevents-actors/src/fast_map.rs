//! A hash map for the pipeline's own keys (event names it built, `namespace/name`), with
//! foldhash (`foldhash::fast`, the hasher kevents-core's caches use, and `lru`'s default
//! through hashbrown): several times cheaper than SipHash on short strings, and seeded at
//! random per process and per map, so its collisions cannot be chosen in advance. Still not
//! a keyed cryptographic hash: maps keyed by strings the caller chooses keep SipHash.

use std::collections::HashMap;

/// A `HashMap` with foldhash's fast variant ([`foldhash::fast::RandomState`]).
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Every byte of a key counts, at every length.
    #[test]
    fn every_byte_changes_the_hash() {
        let state = foldhash::fast::RandomState::default();
        let hash = |s: &str| state.hash_one(s);
        for len in 1..=40 {
            let base: String = (0..len).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            for at in 0..len {
                let mut other = base.clone().into_bytes();
                other[at] = b'#';
                let other = String::from_utf8(other).unwrap();
                assert_ne!(hash(&base), hash(&other), "len {len}, byte {at}");
            }
            assert_eq!(hash(&base), hash(&base.clone()));
        }
    }

    #[test]
    fn a_map_of_event_keys_finds_each() {
        let mut m: FastMap<String, usize> = FastMap::default();
        let keys: Vec<String> = (0..5_000)
            .map(|i| format!("ns-{}/pod-{i}.{:x}", i % 7, i * 7919))
            .chain((0..50).map(|i| "x".repeat(i)))
            .collect();
        for (i, k) in keys.iter().enumerate() {
            m.insert(k.clone(), i);
        }
        assert_eq!(m.len(), keys.len());
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(m.get(k), Some(&i));
        }
    }
}
