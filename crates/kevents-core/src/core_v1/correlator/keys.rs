//! Cache keys.
//!
//! client-go joins key fields with no separator, so distinct field tuples can collide
//! (`"Fail" + "ed x"` equals `"Failed" + " x"`). A [`KeyBuilder`] prefixes every
//! field with its length instead, which makes keys unambiguous while keeping exactly
//! client-go's choice and order of fields: on every input where client-go's keys do not
//! collide, the decisions are the same.

use crate::core_v1::model::Event;

/// An owned, unambiguous cache key.
pub type Key = Box<[u8]>;

/// The capacity a [`KeyBuilder`] keeps between keys; a longer key's buffer is freed once
/// used.
const RETAINED_KEY_BYTES: usize = 64 * 1024;

/// Builds a key from fields. Reused across events so the hot path does not allocate.
///
/// ```
/// use kevents_core::core_v1::correlator::KeyBuilder;
/// let mut a = KeyBuilder::default();
/// a.push("Fail").push("ed x");
/// let mut b = KeyBuilder::default();
/// b.push("Failed").push(" x");
/// assert_ne!(a.as_bytes(), b.as_bytes()); // client-go's keys would be equal here
/// ```
#[derive(Debug, Clone, Default)]
pub struct KeyBuilder {
    buf: Vec<u8>,
}

impl KeyBuilder {
    /// Appends one field.
    #[inline]
    pub fn push(&mut self, field: &str) -> &mut Self {
        let field = field.as_bytes();
        // LEB128 length prefix: one byte for fields under 128 bytes (nearly all).
        if field.len() < 0x80 {
            self.buf.push(field.len() as u8);
        } else {
            self.push_long_len(field.len());
        }
        super::short::extend(&mut self.buf, field);
        self
    }

    /// Appends several fields, growing the buffer at most once.
    #[inline]
    pub fn push_all(&mut self, fields: &[&str]) -> &mut Self {
        // Each field needs its bytes and at most 10 bytes of length prefix; a short field is
        // copied through a 16-byte window.
        let room: usize = fields.iter().map(|f| f.len() + 10).sum::<usize>() + 16;
        self.buf.reserve(room);
        for f in fields {
            self.push(f);
        }
        self
    }

    #[cold]
    fn push_long_len(&mut self, mut n: usize) {
        while n >= 0x80 {
            self.buf.push((n & 0x7f) as u8 | 0x80);
            n >>= 7;
        }
        self.buf.push(n as u8);
    }

    /// Bytes in the key so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether the key is empty.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Replaces the key with the first `len` bytes of `other` (a key prefix).
    pub(crate) fn set_prefix(&mut self, other: &KeyBuilder, len: usize) {
        self.buf.clear();
        self.buf.extend_from_slice(&other.buf[..len]);
    }

    /// Empties the builder, keeping its allocation.
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Frees the buffer if a long key (a message of megabytes) grew it past
    /// [`RETAINED_KEY_BYTES`]: a scratch buffer would otherwise keep a copy's worth of memory
    /// for good, and hold it while the caches and the sink copy the same message.
    /// The buffer's capacity (tests).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    #[inline]
    pub(crate) fn release_if_large(&mut self) {
        if self.buf.capacity() > RETAINED_KEY_BYTES {
            self.buf = Vec::new();
        }
    }

    /// The key built so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// The "full" event key (client-go `getEventKey` in `tools/record/events_cache.go`): source
/// component and host, involved object kind, namespace, name, fieldPath, uid and apiVersion, type,
/// reason and message. Used by the observer cache and by `update_state`.
///
/// The fields are client-go's; their order here puts the [`spam_key`] fields first, then type
/// and reason, which the aggregate key starts with too: the correlator builds that prefix
/// once per occurrence and copies it into the full key (any fixed order keeps the key
/// unambiguous).
pub fn event_key(e: &Event, kb: &mut KeyBuilder) {
    spam_key(e, kb);
    type_and_reason(e, kb);
    event_key_tail(e, kb);
}

/// The two fields both the full and the aggregate key have after the [`spam_key`] prefix.
pub(crate) fn type_and_reason(e: &Event, kb: &mut KeyBuilder) {
    kb.push_all(&[&e.type_, &e.reason]);
}

/// The fields of [`event_key`] after its spam key, type and reason.
pub(crate) fn event_key_tail(e: &Event, kb: &mut KeyBuilder) {
    kb.push_all(&[&e.involved_object.field_path, &e.message]);
}

/// Whether `key` is what [`event_key`] builds for `e`, read field by field without building
/// it (cheaper than building, hashing and looking it up: `update_state` checks the entry
/// `correlate` just wrote this way).
pub(crate) fn is_event_key(e: &Event, key: &[u8]) -> bool {
    let tail = [
        e.type_.as_str(),
        &e.reason,
        &e.involved_object.field_path,
        &e.message,
    ];
    strip_fields(key, &spam_key_fields(e))
        .and_then(|rest| strip_fields(rest, &tail))
        .is_some_and(<[u8]>::is_empty)
}

/// `key` after `fields`, if it starts with them.
fn strip_fields<'k>(key: &'k [u8], fields: &[&str]) -> Option<&'k [u8]> {
    fields
        .iter()
        .try_fold(key, |rest, f| strip_field(rest, f.as_bytes()))
}

/// `key` after its first field if that field is `field` (as [`KeyBuilder::push`] writes it).
fn strip_field<'k>(key: &'k [u8], field: &[u8]) -> Option<&'k [u8]> {
    let mut n = field.len();
    let mut rest = key;
    while n >= 0x80 {
        let (&b, r) = rest.split_first()?;
        if b != (n & 0x7f) as u8 | 0x80 {
            return None;
        }
        rest = r;
        n >>= 7;
    }
    let (&b, r) = rest.split_first()?;
    if b != n as u8 || r.len() < field.len() {
        return None;
    }
    let (head, tail) = r.split_at(field.len());
    super::short::eq(head, field).then_some(tail)
}

/// The default aggregation key function (client-go `EventAggregatorByReasonFunc` in
/// `tools/record/events_cache.go`):
/// the aggregate key is source, object kind/namespace/name/uid/apiVersion (no fieldPath),
/// type, reason, reportingController and reportingInstance; the local key is the message.
pub fn aggregate_by_reason(e: &Event, aggregate: &mut KeyBuilder, local: &mut KeyBuilder) {
    spam_key(e, aggregate);
    type_and_reason(e, aggregate);
    aggregate_key_tail(e, aggregate);
    local.push(&e.message);
}

/// The fields of [`aggregate_by_reason`]'s aggregate key after its spam key, type and reason.
pub(crate) fn aggregate_key_tail(e: &Event, kb: &mut KeyBuilder) {
    kb.push(&e.reporting_component).push(&e.reporting_instance);
}

/// The default aggregate message (client-go `EventAggregatorByReasonMessageFunc`).
///
/// ```
/// let mut e = kevents_core::Event::default();
/// e.message = "disk full".into();
/// assert_eq!(kevents_core::core_v1::correlator::aggregate_message(&e),
///            "(combined from similar events): disk full");
/// ```
pub fn aggregate_message(e: &Event) -> String {
    let mut s = String::with_capacity(AGGREGATE_PREFIX.len() + e.message.len());
    s.push_str(AGGREGATE_PREFIX);
    s.push_str(&e.message);
    s
}

/// The prefix of aggregated messages.
pub const AGGREGATE_PREFIX: &str = "(combined from similar events): ";

/// The default spam key (client-go 1.20 `getSpamKey` in `tools/record/events_cache.go`): source
/// component and host, involved object kind, namespace, name, uid and apiVersion. Every event about
/// one object from one source shares one token bucket.
pub fn spam_key(e: &Event, kb: &mut KeyBuilder) {
    kb.push_all(&spam_key_fields(e));
}

/// The fields of [`spam_key`], in its order (the start of every default key).
fn spam_key_fields(e: &Event) -> [&str; 7] {
    let o = &e.involved_object;
    [
        &e.source.component,
        &e.source.host,
        &o.kind,
        &o.namespace,
        &o.name,
        &o.uid,
        &o.api_version,
    ]
}

/// client-go 1.32's spam key: [`spam_key`] plus the event type, so Warnings get a bucket of
/// their own and are not starved by Normal events about the same object.
pub fn spam_key_with_type(e: &Event, kb: &mut KeyBuilder) {
    spam_key(e, kb);
    kb.push(&e.type_);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Events whose key fields come from tiny alphabets, so equal and near-equal keys are
    /// common, including fields that only differ by where one ends and the next starts, and
    /// fields of 128 bytes and more (two-byte length prefixes).
    fn event() -> impl Strategy<Value = Event> {
        let f = || {
            prop_oneof![
                4 => "[ab]{0,3}",
                1 => "a{126,130}",
            ]
        };
        (prop::collection::vec(f(), 11)).prop_map(|v| {
            let mut e = Event::default();
            let o = &mut e.involved_object;
            o.kind.clone_from(&v[0]);
            o.namespace.clone_from(&v[1]);
            o.name.clone_from(&v[2]);
            o.uid.clone_from(&v[3]);
            o.api_version.clone_from(&v[4]);
            o.field_path.clone_from(&v[5]);
            e.source.component.clone_from(&v[6]);
            e.source.host.clone_from(&v[7]);
            e.type_.clone_from(&v[8]);
            e.reason.clone_from(&v[9]);
            e.message.clone_from(&v[10]);
            e
        })
    }

    proptest! {
        /// `is_event_key(b, key of a)` exactly when the built keys are equal.
        #[test]
        fn is_event_key_agrees_with_building_the_key(a in event(), b in event()) {
            let (mut ka, mut kb) = (KeyBuilder::default(), KeyBuilder::default());
            event_key(&a, &mut ka);
            event_key(&b, &mut kb);
            prop_assert!(is_event_key(&a, ka.as_bytes()));
            prop_assert_eq!(is_event_key(&b, ka.as_bytes()), ka.as_bytes() == kb.as_bytes());
            // A truncated or extended key never matches.
            let k = ka.as_bytes();
            if !k.is_empty() {
                prop_assert!(!is_event_key(&a, &k[..k.len() - 1]));
            }
            let mut longer = k.to_vec();
            longer.push(0);
            prop_assert!(!is_event_key(&a, &longer));
        }
    }
}
