//! Hashing keys, the shared object prefix once.
//!
//! Every default key starts with the same seven fields, the spam key (source and object).
//! A key's hash is defined as its first seven fields hashed, then the rest: a function of the
//! key's bytes alone, so any key (a custom key function's too) hashes the same whichever way
//! it is computed. The correlator hashes the prefix once per occurrence and continues that
//! state with the aggregate and the full key's tails: about half the bytes hashed three times
//! over before.

use std::hash::{BuildHasher, Hasher};

use foldhash::fast::{FoldHasher, RandomState};

/// Fields in the shared prefix: the default spam key's (`keys::spam_key_fields`).
const PREFIX_FIELDS: usize = 7;

/// The hash function of one correlator's caches (one random seed for all three, so a
/// [`Prefix`] serves each of them).
#[derive(Clone, Default)]
pub(crate) struct KeyHasher(RandomState);

impl KeyHasher {
    /// The hash of `key`, a sequence of fields as [`KeyBuilder`](super::KeyBuilder) writes
    /// them.
    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        let (prefix, rest) = key.split_at(prefix_len(key));
        self.prefix(prefix).hash(rest)
    }

    /// The hashing state after `prefix`, exactly a key's first seven fields (or the whole key
    /// if it has fewer), to finish with each key that starts with it.
    pub(crate) fn prefix(&self, prefix: &[u8]) -> Prefix {
        let mut h = self.0.build_hasher();
        h.write(prefix);
        Prefix(h)
    }
}

/// A hashing state after a key's first seven fields.
#[derive(Clone)]
pub(crate) struct Prefix(FoldHasher<'static>);

impl Prefix {
    /// The hash of the key made of the prefix and `rest`.
    pub(crate) fn hash(&self, rest: &[u8]) -> u64 {
        if rest.is_empty() {
            return self.0.finish();
        }
        let mut h = self.0.clone();
        h.write(rest);
        h.finish()
    }
}

/// Where `key`'s first [`PREFIX_FIELDS`] fields end (the key's length if it has fewer).
fn prefix_len(key: &[u8]) -> usize {
    let mut at = 0;
    for _ in 0..PREFIX_FIELDS {
        // A LEB128 length, then that many bytes.
        let (mut len, mut shift) = (0usize, 0u32);
        loop {
            let Some(&b) = key.get(at) else {
                return key.len();
            };
            at += 1;
            len |= usize::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        at = at.saturating_add(len);
        if at >= key.len() {
            return key.len();
        }
    }
    at
}

#[cfg(test)]
mod tests {
    use super::{KeyHasher, prefix_len};
    use crate::core_v1::correlator::KeyBuilder;
    use proptest::prelude::*;

    proptest! {
        /// `prefix_len` finds the end of the seventh field `KeyBuilder` wrote (fields of 128
        /// bytes and more have two-byte lengths), and a prefix state finishes every key that
        /// starts with those fields with the key's own hash.
        #[test]
        fn prefix_then_rest_is_the_keys_hash(
            fields in prop::collection::vec(prop_oneof![3 => "[ab]{0,3}", 1 => "a{126,300}"], 0..12)
        ) {
            let mut kb = KeyBuilder::default();
            let mut seventh = None;
            for (i, f) in fields.iter().enumerate() {
                kb.push(f);
                if i == 6 {
                    seventh = Some(kb.len());
                }
            }
            let key = kb.as_bytes();
            let at = seventh.unwrap_or(key.len());
            prop_assert_eq!(prefix_len(key), at);
            let h = KeyHasher::default();
            prop_assert_eq!(h.prefix(&key[..at]).hash(&key[at..]), h.hash(key));
        }
    }

    #[test]
    fn distinct_keys_sharing_a_prefix_hash_apart() {
        let h = KeyHasher::default();
        let mut a = KeyBuilder::default();
        a.push_all(&["c", "h", "Pod", "ns", "p", "u", "v1"]);
        let p = h.prefix(a.as_bytes());
        let mut b = a.clone();
        b.push("Normal");
        let mut c = a.clone();
        c.push("Warning");
        assert_eq!(p.hash(b""), h.hash(a.as_bytes()));
        assert_ne!(h.hash(b.as_bytes()), h.hash(c.as_bytes()));
        assert_ne!(h.hash(a.as_bytes()), h.hash(b.as_bytes()));
    }
}
