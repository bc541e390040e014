//! A hash map for the pipeline's own keys (event names it built, `namespace/name`), with
//! rustc's `FxHash`: a multiply-rotate per word, several times cheaper than SipHash on short
//! strings. Not DoS-resistant, which is why it is never keyed by untrusted input.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with [`FxHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// The `FxHash` function (rustc's).
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        let rest = chunks.remainder();
        if rest.is_empty() {
            return;
        }
        // The keys here are event names (`namespace/name`, 20-60 bytes): their last 1-7
        // bytes are mixed as the input's last 8 bytes, one round instead of one per byte.
        if let Some(tail) = bytes.last_chunk::<8>() {
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(*tail)).wrapping_mul(K);
            return;
        }
        for &b in rest {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    #[inline]
    fn write_u8(&mut self, b: u8) {
        self.write(&[b]);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn hash(s: &str) -> u64 {
        BuildHasherDefault::<FxHasher>::default().hash_one(s)
    }

    /// Every byte of a key counts, at every length (the last 1-7 bytes are mixed as one
    /// overlapping word when the key has 8 or more).
    #[test]
    fn every_byte_changes_the_hash() {
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
