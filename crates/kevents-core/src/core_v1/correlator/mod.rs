//! client-go's `EventCorrelator`: decides, for every occurrence, whether the apiserver gets a
//! CREATE, a PATCH (and with which body), or nothing.
//!
//! Three stages run in client-go's order on every occurrence (client-go
//! `EventCorrelator.EventCorrelate` in `tools/record/events_cache.go`):
//!
//! 1. **aggregate**: similar events (same object and reason, different messages) are
//!    counted per aggregate key; once `max_events` distinct messages were seen without a gap
//!    longer than `max_interval`, the occurrence is replaced by an aggregate event with the
//!    message `"(combined from similar events): <message>"`.
//! 2. **observe**: an event already seen (same full key) gets the cached name,
//!    resourceVersion and firstTimestamp, `count + 1`, and a strategic-merge patch
//!    `{"count","lastTimestamp","message"}`.
//! 3. **spam filter**: one token bucket per source and object; no token means skip. Stages
//!    1 and 2 have already counted the occurrence, so the next written one carries it.
//!
//! After every successful write, [`Correlator::update_state`] learns the stored event back.
//! The correlator is synchronous and single-owner (`&mut self`): no locks, no IO.
//!
//! ```
//! use kevents_core::core_v1::correlator::{Correlator, CorrelatorOptions};
//! use kevents_core::{Event, ObjectReference};
//!
//! let mut c = Correlator::new(CorrelatorOptions::default());
//! let mut e = Event::default();
//! e.involved_object = ObjectReference::new("v1", "Pod", "ns", "p");
//! e.message = "restarting".into();
//! e.count = 1;
//! let first = c.correlate(e.clone());
//! assert!(!first.skip && first.patch.is_none()); // CREATE
//! let mut stored = first.event;
//! stored.metadata.resource_version = "7".into();
//! c.update_state(&stored); // the apiserver's copy, learnt back
//! let second = c.correlate(e);
//! assert_eq!(second.event.count, 2); // PATCH, of the stored event
//! assert_eq!(second.event.metadata.resource_version, "7");
//! assert!(second.patch.is_some());
//! ```

mod aggregate;
mod cache;
pub(crate) mod fast;
mod hash;
mod keys;
mod observation;
mod options;
mod patch;
mod short;
mod spam;

pub use keys::{
    AGGREGATE_PREFIX, Key, KeyBuilder, aggregate_by_reason, aggregate_message, event_key, spam_key,
    spam_key_with_type,
};
pub use options::{
    AggregateKeyFn, AggregatePop, CorrelatorOptions, MessageFn, SpamKeyFn, defaults,
};

use crate::core_v1::model::Event;
use crate::name;
use crate::time::SharedClock;
use aggregate::{AggregateRecord, LocalKeys};
use cache::BoundedCache;
use fast::{Decision, StateHint};
use hash::{KeyHasher, Prefix};
use observation::Observation;
pub use patch::observation_patch;
use spam::SpamFilter;

/// What the correlator decided for one occurrence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Correlated {
    /// The event to write: the occurrence itself, or the aggregate event, with the
    /// observer's name, resourceVersion, firstTimestamp and count applied. For a skipped
    /// occurrence this is what would have been written.
    pub event: Event,
    /// The strategic-merge patch body when the event was seen before.
    pub patch: Option<Vec<u8>>,
    /// The spam filter had no token: write nothing.
    pub skip: bool,
    /// The occurrence was folded into an aggregate event.
    pub aggregated: bool,
}

impl Correlated {
    /// Whether the write is an update (PATCH first), as client-go decides: `count > 1`.
    pub fn is_update(&self) -> bool {
        self.event.count > 1
    }
}

/// Counters of a correlator's work (read them with [`Correlator::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CorrelatorStats {
    /// Occurrences correlated.
    pub correlated: u64,
    /// Occurrences replaced by an aggregate event.
    pub aggregated: u64,
    /// Occurrences that produced a patch.
    pub patched: u64,
    /// Occurrences the spam filter skipped.
    pub skipped: u64,
    /// Entries in the aggregation, observer and spam caches.
    pub cache_len: [usize; 3],
    /// Entries evicted from the aggregation, observer and spam caches.
    pub evictions: [u64; 3],
}

/// client-go's `EventCorrelator`, deterministic and collision-free.
///
/// ```
/// use kevents_core::core_v1::correlator::{Correlator, CorrelatorOptions};
/// use kevents_core::{Event, EventFactory, EventSource, EventType, ObjectReference, Occurrence,
///                    Time, VirtualClock};
/// use std::sync::Arc;
///
/// let clock = VirtualClock::new(Time::parse_rfc3339("2021-01-01T00:00:05Z").unwrap());
/// let mut c = Correlator::new(CorrelatorOptions {
///     clock: Some(Arc::new(clock.clone())), ..Default::default() });
/// let factory = EventFactory::new(EventSource::new("kubelet", "node1"));
/// let pod = ObjectReference::new("v1", "Pod", "ns", "web");
/// let occ = || Occurrence::new(pod.clone(), EventType::Warning, "BackOff", "restarting");
///
/// let first = c.correlate(factory.make(clock.now(), occ()).unwrap());
/// assert_eq!((first.event.count, first.patch.is_none()), (1, true));
/// c.update_state(&first.event);
///
/// clock.advance(std::time::Duration::from_secs(15));
/// let second = c.correlate(factory.make(clock.now(), occ()).unwrap());
/// assert_eq!(second.event.count, 2);
/// assert_eq!(second.event.metadata.name, first.event.metadata.name);
/// assert_eq!(second.patch.as_deref(),
///     Some(&br#"{"count":2,"lastTimestamp":"2021-01-01T00:00:20Z","message":"restarting"}"#[..]));
/// # use kevents_core::Clock;
/// ```
pub struct Correlator {
    clock: SharedClock,
    aggregates: BoundedCache<AggregateRecord>,
    observations: BoundedCache<Observation>,
    spam: SpamFilter,
    key_fn: Option<AggregateKeyFn>,
    message_fn: Option<MessageFn>,
    spam_key_fn: Option<SpamKeyFn>,
    /// The default spam key includes the event type (client-go 1.32+).
    spam_key_has_type: bool,
    max_events: u64,
    max_interval_nanos: i64,
    pop: AggregatePop,
    stats: CorrelatorStats,
    // Scratch key buffers, reused so a hit on every cache allocates nothing.
    kb_full: KeyBuilder,
    kb_agg: KeyBuilder,
    kb_local: KeyBuilder,
    kb_spam: KeyBuilder,
    /// The hash function of the three caches (the spam filter holds the same).
    hasher: KeyHasher,
    /// Where the default key functions' shared fields end in `kb_agg`, and their hash
    /// (`None` with custom ones).
    shared: Option<SharedPrefix>,
    /// The observer entry the last `correlate` read and wrote under the event's full key,
    /// the hint `update_state` uses (checked field by field before it is used).
    last_observed: Option<u32>,
}

/// How much of the aggregate key (default key functions) the other keys share: the spam key
/// is its first `spam` bytes, the full key starts with its first `type_reason` bytes.
/// Building the seven object fields once instead of three times: callgrind, `wide`
/// workload, 25% fewer instructions building keys; sharing type and reason too, 100 fewer
/// per occurrence. The spam key's hashing state serves the three keys' hashes (`hash.rs`).
#[derive(Clone)]
struct SharedPrefix {
    spam: usize,
    /// Where the event type ends (the 1.32+ spam key).
    typed: usize,
    type_reason: usize,
    hash: Prefix,
}

impl std::fmt::Debug for Correlator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Correlator")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Correlator {
    /// A correlator with `options` (zeros replaced by client-go's defaults).
    pub fn new(options: CorrelatorOptions) -> Self {
        let o = options.with_defaults();
        let hasher = KeyHasher::default();
        Correlator {
            clock: o
                .clock
                .unwrap_or_else(|| std::sync::Arc::new(crate::time::SystemClock)),
            aggregates: BoundedCache::new(o.lru_cache_size),
            observations: BoundedCache::new(o.lru_cache_size),
            spam: SpamFilter::new(
                o.burst_size,
                o.qps,
                o.lru_cache_size,
                hasher.clone(),
                o.token_bucket.unwrap_or(o.client_go.token_bucket()),
            ),
            spam_key_has_type: o.client_go.spam_key_has_type(),
            key_fn: o.key_fn,
            message_fn: o.message_fn,
            spam_key_fn: o.spam_key_fn,
            // Go converts the int option to uint: a negative value never aggregates.
            max_events: o.max_events as u64,
            max_interval_nanos: o.max_interval_in_seconds.saturating_mul(1_000_000_000),
            pop: o.aggregate_pop,
            stats: CorrelatorStats::default(),
            kb_full: KeyBuilder::default(),
            kb_agg: KeyBuilder::default(),
            kb_local: KeyBuilder::default(),
            kb_spam: KeyBuilder::default(),
            hasher,
            shared: None,
            last_observed: None,
        }
    }

    /// Runs aggregation, observation and the spam filter on one occurrence (client-go
    /// `EventCorrelate`). Reads the clock twice: once for aggregation, once for the spam
    /// filter.
    pub fn correlate(&mut self, event: Event) -> Correlated {
        let mut event = event;
        let d = self.correlate_decision(&mut event);
        Correlated {
            event,
            patch: d.patch,
            skip: d.skip,
            aggregated: d.aggregated,
        }
    }

    /// The pipeline's fast form of [`correlate`](Correlator::correlate) (not part of the
    /// public API; `kevents_core::__private`): on an event the caller keeps where it is, the
    /// event becomes what [`Correlated::event`] would be, and the rest of the decision is
    /// returned. An `Event` is several hundred bytes; moving it into and out of `correlate`
    /// costs two copies (callgrind: about 210 instructions of 2 130 per occurrence, `hot`).
    ///
    /// ```
    /// use kevents_core::{Correlator, CorrelatorOptions, Event, ObjectReference};
    /// let mut c = Correlator::new(CorrelatorOptions::default());
    /// let mut e = Event::default();
    /// e.involved_object = ObjectReference::new("v1", "Pod", "ns", "p");
    /// e.count = 1;
    /// let d = kevents_core::__private::correlate_in_place(&mut c, &mut e);
    /// assert!(d.patch.is_none() && !d.skip && !d.aggregated);
    /// assert_eq!(e.count, 1);
    /// ```
    pub(crate) fn correlate_decision(&mut self, event: &mut Event) -> Decision {
        self.stats.correlated += 1;
        self.last_observed = None;
        let aggregate_hash = self.aggregate(event);
        let aggregated = aggregate_hash.is_some();
        let patch = self.observe(event, aggregate_hash);
        let hint = self.last_observed.map(StateHint);
        let now = self.clock.now();
        let skip = match (&self.spam_key_fn, &self.shared) {
            (Some(f), _) => {
                self.kb_spam.clear();
                f(event, &mut self.kb_spam);
                self.spam.is_spam(self.kb_spam.as_bytes(), now)
            }
            // The aggregate event keeps the occurrence's source and object: same spam key.
            (None, Some(shared)) => {
                // With the type, the spam key is the aggregate key up to its type field.
                let end = if self.spam_key_has_type {
                    shared.typed
                } else {
                    shared.spam
                };
                let key = &self.kb_agg.as_bytes()[..end];
                let hash = shared.hash.hash(&key[shared.spam..]);
                self.spam.is_spam_hashed(hash, key, now)
            }
            (None, None) => {
                self.kb_spam.clear();
                self.default_spam_key(event);
                self.spam.is_spam(self.kb_spam.as_bytes(), now)
            }
        };
        if skip {
            self.stats.skipped += 1;
        } else if patch.is_some() {
            self.stats.patched += 1;
        }
        if aggregated {
            self.stats.aggregated += 1;
        }
        self.release_large_keys();
        Decision {
            patch,
            skip,
            aggregated,
            hint,
        }
    }

    /// Frees the key builders a long key (a message of megabytes) grew, so they do not
    /// hold a copy of it while the sink writes the event, nor after.
    #[inline]
    fn release_large_keys(&mut self) {
        self.kb_full.release_if_large();
        self.kb_agg.release_if_large();
        self.kb_local.release_if_large();
        self.kb_spam.release_if_large();
    }

    /// Whether the spam filter has a token for `event` now, taking it if so: what a deferred
    /// write (an occurrence the filter skipped, kept to be written once its object's bucket
    /// refills) asks before it is written. Same spam key and bucket as
    /// [`Correlator::correlate`].
    ///
    /// ```
    /// use kevents_core::{Correlator, CorrelatorOptions, Event, ObjectReference};
    /// let mut c = Correlator::new(CorrelatorOptions { burst_size: 1, ..Default::default() });
    /// let mut e = Event::default();
    /// e.involved_object = ObjectReference::new("v1", "Pod", "ns", "p");
    /// assert!(!c.correlate(e.clone()).skip); // the one token
    /// assert!(c.correlate(e.clone()).skip);
    /// assert!(!c.spam_allows(&e)); // no refill yet
    /// ```
    pub fn spam_allows(&mut self, event: &Event) -> bool {
        self.kb_spam.clear();
        match &self.spam_key_fn {
            Some(f) => f(event, &mut self.kb_spam),
            None => self.default_spam_key(event),
        }
        let now = self.clock.now();
        !self.spam.is_spam(self.kb_spam.as_bytes(), now)
    }

    /// The profile's spam key of `event` into `kb_spam`.
    fn default_spam_key(&mut self, event: &Event) {
        if self.spam_key_has_type {
            spam_key_with_type(event, &mut self.kb_spam);
        } else {
            spam_key(event, &mut self.kb_spam);
        }
    }

    /// Learns the event as stored by the server after a successful create or patch
    /// (client-go `UpdateState`): its firstTimestamp, name and resourceVersion are cached
    /// under its full key, and its count unless more occurrences were observed since the
    /// write was made (a pipeline correlates while writes are in flight: the cached count
    /// never goes below what was observed, so no occurrence is rolled back).
    pub fn update_state(&mut self, stored: &Event) {
        // Usually the event `correlate` just keyed.
        let hint = self.last_observed.map(StateHint);
        self.learn_with_hint(hint, stored);
    }

    /// The pipeline's fast form of [`update_state`](Correlator::update_state) (not part of
    /// the public API; `kevents_core::__private`): for an event whose `Correlated::hint` the
    /// caller kept (a pipeline learns its writes back in batches, after other
    /// correlations). The same result as `update_state` whatever the hint.
    ///
    /// ```
    /// use kevents_core::{Correlator, CorrelatorOptions, Event, ObjectReference};
    /// let mut c = Correlator::new(CorrelatorOptions::default());
    /// let mut e = Event::default();
    /// e.involved_object = ObjectReference::new("v1", "Pod", "ns", "p");
    /// e.count = 1;
    /// let mut first = e.clone();
    /// let decision = kevents_core::__private::correlate_in_place(&mut c, &mut first);
    /// let _other = c.correlate(Event::default());
    /// let mut stored = first.clone();
    /// stored.metadata.resource_version = "7".into();
    /// kevents_core::__private::update_state_with(&mut c, decision.hint, &stored);
    /// let again = c.correlate(e);
    /// assert_eq!(again.event.metadata.resource_version, "7");
    /// ```
    pub(crate) fn learn_with_hint(&mut self, hint: Option<StateHint>, stored: &Event) {
        // A negative count from a hostile server counts as none (0), so the observed count
        // stands ("never below what was observed"); as `u64` it was a huge count.
        let count = u64::try_from(stored.count).unwrap_or(0);
        // The hinted entry, if its key is the stored event's, is what the lookup below would
        // find (keys are unique), without building and hashing the key (callgrind, `wide`:
        // 830 instructions per written occurrence before). Entries are never removed, so
        // any index the cache once returned is in range.
        if let Some(StateHint(i)) = hint
            && keys::is_event_key(stored, self.observations.key_at(i))
        {
            self.observations.use_at(i).learn_stored(count, stored);
            return;
        }
        self.kb_full.clear();
        event_key(stored, &mut self.kb_full);
        let key = self.kb_full.as_bytes();
        let hash = self.hasher.hash(key);
        match self.observations.get_mut(hash, key) {
            // Usually a hit (correlate just stored this key): reuse the strings' buffers.
            Some(slot) => slot.learn_stored(count, stored),
            None => {
                self.observations.insert_with(
                    hash,
                    key,
                    || Observation::new(count, stored),
                    |slot| slot.learn(count, stored),
                );
            }
        }
        self.kb_full.release_if_large();
    }

    /// The server refused for good to create `refused` (a 403, a 422, ...): the observation
    /// kept under its key is forgotten if it still names that event, so the next occurrence
    /// is a CREATE of its own (count 1) rather than a PATCH of an event that does not exist.
    /// client-go keeps the observation (its next occurrence PATCHes, and on a 404 re-creates
    /// with the whole count); kevents counts the refused occurrences as not stored instead.
    /// An aggregate event's observation (kept under its aggregate key) is not found here.
    /// Returns whether an observation was forgotten.
    ///
    /// ```
    /// use kevents_core::{Correlator, CorrelatorOptions, Event, ObjectReference};
    /// let mut c = Correlator::new(CorrelatorOptions::default());
    /// let mut e = Event::default();
    /// e.involved_object = ObjectReference::new("v1", "Pod", "ns", "p");
    /// e.metadata.name = "p.1".into();
    /// e.count = 1;
    /// let first = c.correlate(e.clone());
    /// assert!(c.forget_refused(&first.event));
    /// e.metadata.name = "p.2".into();
    /// let again = c.correlate(e);
    /// assert!(again.patch.is_none());
    /// assert_eq!((again.event.count, again.event.metadata.name.as_str()), (1, "p.2"));
    /// ```
    pub fn forget_refused(&mut self, refused: &Event) -> bool {
        self.kb_full.clear();
        event_key(refused, &mut self.kb_full);
        let key = self.kb_full.as_bytes();
        let hash = self.hasher.hash(key);
        match self.observations.get_mut(hash, key) {
            Some(slot) if slot.name_and_version().0 == refused.metadata.name => {
                slot.count = 0;
                true
            }
            _ => false,
        }
    }

    /// Counters and cache sizes.
    pub fn stats(&self) -> CorrelatorStats {
        CorrelatorStats {
            cache_len: [
                self.aggregates.len(),
                self.observations.len(),
                self.spam.len(),
            ],
            evictions: [
                self.aggregates.evictions(),
                self.observations.evictions(),
                self.spam.evictions(),
            ],
            ..self.stats
        }
    }

    /// Step 1: replaces the occurrence by the aggregate event when aggregation triggers, and
    /// then returns the aggregate key's hash (the event is keyed by the aggregate key in
    /// `kb_agg`, not its full key). Works in place: an `Event` is large, and moving it
    /// through the stages costs.
    fn aggregate(&mut self, event: &mut Event) -> Option<u64> {
        let now = self.clock.now();
        self.kb_agg.clear();
        self.shared = None;
        let local: &[u8] = match &self.key_fn {
            Some(f) => {
                self.kb_local.clear();
                f(event, &mut self.kb_agg, &mut self.kb_local);
                self.kb_local.as_bytes()
            }
            // aggregate_by_reason, keeping where the fields the other keys share end. Its
            // local key is the message alone, so the message's bytes serve as the key in the
            // record's set (one field: equal keys exactly when the messages are equal).
            None => {
                spam_key(event, &mut self.kb_agg);
                let spam = self.kb_agg.len();
                self.kb_agg.push(&event.type_);
                let typed = self.kb_agg.len();
                self.kb_agg.push(&event.reason);
                self.shared = Some(SharedPrefix {
                    spam,
                    typed,
                    type_reason: self.kb_agg.len(),
                    hash: self.hasher.prefix(&self.kb_agg.as_bytes()[..spam]),
                });
                keys::aggregate_key_tail(event, &mut self.kb_agg);
                event.message.as_bytes()
            }
        };
        let max_interval = self.max_interval_nanos;
        let key = self.kb_agg.as_bytes();
        let hash = match &self.shared {
            Some(shared) => shared.hash.hash(&key[shared.spam..]),
            None => self.hasher.hash(key),
        };
        debug_assert_eq!(hash, self.hasher.hash(key));
        let record = match self.aggregates.get_mut(hash, key) {
            Some(record) => {
                if now.nanos_since(record.last_timestamp) > max_interval {
                    record.local_keys.clear();
                }
                record.local_keys.insert(local);
                record.last_timestamp = now;
                Some(record)
            }
            None => {
                self.aggregates.insert_with(
                    hash,
                    key,
                    || AggregateRecord {
                        local_keys: LocalKeys::new(local),
                        last_timestamp: now,
                    },
                    |record| {
                        record.local_keys.reset_to(local);
                        record.last_timestamp = now;
                    },
                );
                None
            }
        };
        // A new record holds one local key.
        let len = record.as_ref().map_or(1, |r| r.local_keys.len());
        if (len as u64) < self.max_events {
            return None;
        }
        // Keep the set below the threshold, deterministically (client-go: PopAny).
        match record {
            Some(record) => record.local_keys.pop(self.pop),
            // max_events <= 1: the record just added (unless the cache keeps nothing).
            None => {
                if let Some(record) = self.aggregates.get_mut(hash, key) {
                    record.local_keys.pop(self.pop);
                }
            }
        }
        let message = match &self.message_fn {
            Some(f) => f(event),
            None => aggregate_message(event),
        };
        let trigger = std::mem::take(event);
        *event = Event {
            metadata: crate::meta::ObjectMeta {
                name: name::event_name(&trigger.involved_object.name, now),
                namespace: trigger.metadata.namespace,
                ..Default::default()
            },
            count: 1,
            first_timestamp: Some(now),
            last_timestamp: Some(now),
            involved_object: trigger.involved_object,
            message,
            type_: trigger.type_,
            reason: trigger.reason,
            source: trigger.source,
            ..Default::default()
        };
        Some(hash)
    }

    /// Step 2: applies the last observation under the chosen key (the aggregate key, of
    /// hash `aggregate_hash`, for an aggregate event) and records this one.
    fn observe(&mut self, event: &mut Event, aggregate_hash: Option<u64>) -> Option<Vec<u8>> {
        let (key, hash): (&[u8], u64) = if let Some(hash) = aggregate_hash {
            (self.kb_agg.as_bytes(), hash)
        } else {
            match &self.shared {
                Some(shared) => {
                    self.kb_full.set_prefix(&self.kb_agg, shared.type_reason);
                    keys::event_key_tail(event, &mut self.kb_full);
                    let key = self.kb_full.as_bytes();
                    (key, shared.hash.hash(&key[shared.spam..]))
                }
                None => {
                    self.kb_full.clear();
                    event_key(event, &mut self.kb_full);
                    let key = self.kb_full.as_bytes();
                    (key, self.hasher.hash(key))
                }
            }
        };
        debug_assert_eq!(hash, self.hasher.hash(key));
        let mut patch = None;
        let entry = match self.observations.get_indexed(hash, key) {
            Some((i, last)) => {
                if last.count > 0 {
                    let (name, version) = last.name_and_version();
                    event.metadata.name.clear();
                    event.metadata.name.push_str(name);
                    event.metadata.resource_version.clear();
                    event.metadata.resource_version.push_str(version);
                    event.first_timestamp = last.first_timestamp;
                    // Saturating: a server that answered count 2147483647 (i32::MAX, the
                    // largest count it stores) must not make the next write wrap to
                    // i32::MIN.
                    event.count = i32::try_from(last.count)
                        .unwrap_or(i32::MAX)
                        .saturating_add(1);
                    patch = Some(observation_patch(event));
                }
                last.learn(event.count as i64 as u64, event);
                Some(i)
            }
            None => {
                let count = event.count as i64 as u64;
                self.observations.insert_with(
                    hash,
                    key,
                    || Observation::new(count, event),
                    |slot| slot.learn(count, event),
                )
            }
        };
        // The aggregate event is stored under its own full key, not the aggregate key.
        if aggregate_hash.is_none() {
            self.last_observed = entry;
        }
        patch
    }
}

#[cfg(test)]
mod tests;
