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
        let mut n = field.len();
        // LEB128 length prefix; one byte for fields under 128 bytes (nearly all).
        self.buf.reserve(n + 10);
        while n >= 0x80 {
            self.buf.push((n & 0x7f) as u8 | 0x80);
            n >>= 7;
        }
        self.buf.push(n as u8);
        self.buf.extend_from_slice(field.as_bytes());
        self
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

    /// The key built so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// The "full" event key (client-go `getEventKey` in `tools/record/events_cache.go`): source
/// component and host, involved object kind, namespace, name, fieldPath, uid and apiVersion, type,
/// reason and message. Used by the observer cache and by `update_state`.
///
/// The fields are client-go's; their order here puts the [`spam_key`] fields first, so the
/// correlator builds that prefix once per occurrence and copies it into each key (any fixed
/// order keeps the key unambiguous).
pub fn event_key(e: &Event, kb: &mut KeyBuilder) {
    spam_key(e, kb);
    event_key_rest(e, kb);
}

/// The fields of [`event_key`] after its [`spam_key`] prefix.
pub(crate) fn event_key_rest(e: &Event, kb: &mut KeyBuilder) {
    kb.push(&e.involved_object.field_path)
        .push(&e.type_)
        .push(&e.reason)
        .push(&e.message);
}

/// The default aggregation key function (client-go `EventAggregatorByReasonFunc` in
/// `tools/record/events_cache.go`):
/// the aggregate key is source, object kind/namespace/name/uid/apiVersion (no fieldPath),
/// type, reason, reportingController and reportingInstance; the local key is the message.
pub fn aggregate_by_reason(e: &Event, aggregate: &mut KeyBuilder, local: &mut KeyBuilder) {
    spam_key(e, aggregate);
    aggregate_key_rest(e, aggregate);
    local.push(&e.message);
}

/// The fields of [`aggregate_by_reason`]'s aggregate key after its [`spam_key`] prefix.
pub(crate) fn aggregate_key_rest(e: &Event, kb: &mut KeyBuilder) {
    kb.push(&e.type_)
        .push(&e.reason)
        .push(&e.reporting_component)
        .push(&e.reporting_instance);
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
    let o = &e.involved_object;
    kb.push(&e.source.component)
        .push(&e.source.host)
        .push(&o.kind)
        .push(&o.namespace)
        .push(&o.name)
        .push(&o.uid)
        .push(&o.api_version);
}

/// client-go 1.32's spam key: [`spam_key`] plus the event type, so Warnings get a bucket of
/// their own and are not starved by Normal events about the same object.
pub fn spam_key_with_type(e: &Event, kb: &mut KeyBuilder) {
    spam_key(e, kb);
    kb.push(&e.type_);
}
