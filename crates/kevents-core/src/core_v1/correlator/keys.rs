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
    pub fn push(&mut self, field: &str) -> &mut Self {
        let mut n = field.len();
        // LEB128 length prefix.
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                self.buf.push(byte);
                break;
            }
            self.buf.push(byte | 0x80);
        }
        self.buf.extend_from_slice(field.as_bytes());
        self
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
pub fn event_key(e: &Event, kb: &mut KeyBuilder) {
    let o = &e.involved_object;
    kb.push(&e.source.component)
        .push(&e.source.host)
        .push(&o.kind)
        .push(&o.namespace)
        .push(&o.name)
        .push(&o.field_path)
        .push(&o.uid)
        .push(&o.api_version)
        .push(&e.type_)
        .push(&e.reason)
        .push(&e.message);
}

/// The default aggregation key function (client-go `EventAggregatorByReasonFunc` in
/// `tools/record/events_cache.go`):
/// the aggregate key is source, object kind/namespace/name/uid/apiVersion (no fieldPath),
/// type, reason, reportingController and reportingInstance; the local key is the message.
pub fn aggregate_by_reason(e: &Event, aggregate: &mut KeyBuilder, local: &mut KeyBuilder) {
    let o = &e.involved_object;
    aggregate
        .push(&e.source.component)
        .push(&e.source.host)
        .push(&o.kind)
        .push(&o.namespace)
        .push(&o.name)
        .push(&o.uid)
        .push(&o.api_version)
        .push(&e.type_)
        .push(&e.reason)
        .push(&e.reporting_component)
        .push(&e.reporting_instance);
    local.push(&e.message);
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
