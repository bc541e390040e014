//! What travels through the intake: an accepted occurrence with the instant it was
//! recorded, and how it becomes the event watchers receive ([`build`], called by the
//! broadcaster the first time a watcher takes it).

use std::sync::Arc;

use kevents_core::__private::{self, OccurrenceRef};

use kevents_core::reference::ReferenceRef;
use kevents_core::{
    Event, EventFactory, EventType, InvalidEvent, ObjectMeta, ObjectReference, Occurrence, Time,
};

use super::events_v1::V1Intake;
use crate::event_pool::EventPool;
use crate::message::Recorded;
use crate::overflow::{
    Identity, IdentityBuilder, Repeats, reference_fields, stands_for, v1_identity,
};
use crate::telemetry::IntakeCounters;

/// What builds the events of accepted items: the core/v1 factory and the events.k8s.io/v1
/// configuration (shared by the Recorder actor and the broadcaster).
pub(crate) struct Factories {
    pub(crate) core: EventFactory,
    pub(crate) v1: V1Intake,
}

/// One accepted occurrence with the instant it was recorded.
// The hot path (`Recorder::event` on an `ObjectReference`) is the packed variant, whose
// strings live in one allocation; the general core/v1 occurrence and the v1 event are boxed,
// which keeps the intake's slots small (an unbounded intake holding a burst stays compact).
pub(crate) enum Item {
    Core(Time, Box<Occurrence>),
    /// A plain `event` call on an `ObjectReference`, packed on the caller's thread into one
    /// allocation (the Recorder actor unpacks it into the same [`Occurrence`]).
    Packed(Time, PackedCore),
    /// An `ObjectRecorder::event` call: the object read once and shared, reason and
    /// message packed per call (the same [`Occurrence`] as `Packed` once unpacked).
    Bound(Time, BoundCore),
    /// Built and validated at the call (boxed: keeps the intake's slots small).
    EventsV1(Box<kevents_core::events_v1::Event>),
    /// An events.k8s.io/v1 call on an `ObjectReference` without `related` or annotations:
    /// checked at the call (`events_v1::EventFactory::check`), strings packed into one allocation,
    /// the event built by the broadcaster (`events_v1::EventFactory::make`) off the caller's thread.
    PackedV1(Time, PackedV1),
    /// An entry of the intake's overflow table: its first occurrence and the repeats merged
    /// into it (never in the intake queue itself).
    Repeated(Box<Item>, Repeats),
}

fn reference_bytes(r: &ObjectReference) -> usize {
    r.kind.len()
        + r.namespace.len()
        + r.name.len()
        + r.uid.len()
        + r.api_version.len()
        + r.resource_version.len()
        + r.field_path.len()
}

fn meta_bytes(m: &ObjectMeta) -> usize {
    let map = |m: &std::collections::BTreeMap<String, String>| {
        m.iter().map(|(k, v)| k.len() + v.len() + 64).sum::<usize>()
    };
    m.name.len() + m.namespace.len() + m.uid.len() + m.resource_version.len() + map(&m.annotations)
}

impl Item {
    /// An estimate of the memory this occurrence holds once it is built into an event
    /// (strings plus fixed struct sizes): what the intake's and the watcher queues' byte
    /// bounds count. Deterministic: the intake adds and subtracts the same figure.
    pub(crate) fn approx_bytes(&self) -> usize {
        // The built event repeats the object's name and namespace in its metadata and
        // carries the source, timestamps and counters: a core/v1 `Event`'s fixed size.
        let built = std::mem::size_of::<Event>();
        match self {
            Item::Packed(_, p) => built + p.strings.buf.len() + p.strings.span(0, 2),
            // The same figure as the `Packed` form of the same call (whose first two strings
            // are the reference's first two fields).
            Item::Bound(_, b) => {
                let [first, second, ..] = reference_fields(&b.object);
                built
                    + reference_bytes(&b.object)
                    + b.strings.buf.len()
                    + first.len()
                    + second.len()
            }
            // The built event repeats name and namespace and adds the reporter: counted as
            // twice the strings, plus a v1 event's fixed size.
            Item::PackedV1(_, p) => {
                std::mem::size_of::<kevents_core::events_v1::Event>() + 2 * p.strings.buf.len()
            }
            Item::Repeated(first, _) => first.approx_bytes(),
            Item::Core(_, o) => {
                built
                    + 2 * reference_bytes(&o.object)
                    + o.reason.len()
                    + o.message.len()
                    + o.annotations
                        .iter()
                        .map(|(k, v)| k.len() + v.len() + 64)
                        .sum::<usize>()
            }
            Item::EventsV1(e) => {
                std::mem::size_of::<kevents_core::events_v1::Event>()
                    + meta_bytes(&e.metadata)
                    + reference_bytes(&e.regarding)
                    + e.related.as_ref().map_or(0, reference_bytes)
                    + e.reporting_controller.len()
                    + e.reporting_instance.len()
                    + e.action.len()
                    + e.reason.len()
                    + e.note.len()
                    + e.type_.len()
            }
        }
    }
}

impl Item {
    /// When the (first) occurrence was recorded.
    pub(crate) fn at(&self) -> Time {
        match self {
            Item::Core(at, _)
            | Item::Packed(at, _)
            | Item::Bound(at, _)
            | Item::PackedV1(at, _) => *at,
            Item::EventsV1(e) => e.event_time.unwrap_or_default(),
            Item::Repeated(first, _) => first.at(),
        }
    }

    /// The occurrences this item stands for (an overflow entry: its first and its repeats).
    pub(crate) fn stands_for(&self) -> u64 {
        stands_for(match self {
            Item::Repeated(_, r) => Some(*r),
            _ => None,
        })
    }

    /// The first occurrence and its repeats.
    pub(crate) fn split_repeats(self) -> (Item, Option<Repeats>) {
        match self {
            Item::Repeated(first, r) => (*first, Some(r)),
            other => (other, None),
        }
    }

    /// What the intake's overflow table merges on: every field of the call (client-go's
    /// correlation keys are all built from these), not the instant.
    pub(crate) fn identity(&self) -> Identity {
        let mut b = IdentityBuilder::with_capacity(self.approx_bytes() / 2);
        match self {
            Item::Core(_, o) => {
                b.tag(1);
                for f in reference_fields(&o.object) {
                    b.field(f);
                }
                b.field(&o.event_type).field(&o.reason).field(&o.message);
                for (k, v) in &o.annotations {
                    b.field(k).field(v);
                }
            }
            Item::Packed(_, p) => {
                b.tag(2).field(p.event_type.as_str()).field(&p.strings.buf);
                for end in p.strings.ends {
                    b.num(u64::from(end));
                }
            }
            // Exactly the identity of the `Packed` form of the same call (its nine strings
            // back to back, then where each ends), so both forms of one occurrence merge in
            // the overflow table.
            Item::Bound(_, bound) => {
                let [reason, message] = bound.strings.strings();
                let [a, c, d, e, f, g, h] = reference_fields(&bound.object);
                let parts = [a, c, d, e, f, g, h, reason, message];
                b.tag(2)
                    .field(bound.event_type.as_str())
                    .field_parts(&parts);
                let mut end = 0u64;
                for p in parts {
                    end += p.len() as u64;
                    b.num(end);
                }
            }
            Item::EventsV1(e) => {
                b.tag(3);
                v1_identity(&mut b, e);
            }
            Item::PackedV1(_, p) => {
                b.tag(4).field(p.event_type.as_str()).field(&p.strings.buf);
                for end in p.strings.ends {
                    b.num(u64::from(end));
                }
            }
            Item::Repeated(first, _) => return first.identity(),
        }
        b.finish()
    }
}

/// `N` strings back to back in one buffer (one allocation instead of one per string).
// Compact, because a burst waits in the intake as these (the queue's slot is an `Item`):
// an exact-size buffer (no capacity word) and 16-bit ends. `Item` went from 88 to 64 bytes,
// a queued plain call from about 136 to 112 bytes with the hot workload's strings, and
// first-touch page faults of a queued burst are most of a call's cost (docs/benchmarks.md).
pub(crate) struct Packed<const N: usize> {
    buf: Box<str>,
    ends: [u16; N],
}

impl<const N: usize> Packed<N> {
    /// `None` if the strings do not fit the offsets (over 64 KiB in all; the general path
    /// takes them).
    fn new(parts: [&str; N]) -> Option<Self> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        u16::try_from(total).ok()?;
        let mut buf = String::with_capacity(total);
        let mut ends = [0u16; N];
        for (end, part) in ends.iter_mut().zip(parts) {
            buf.push_str(part);
            // At most `total`, which fits.
            *end = buf.len() as u16;
        }
        Some(Packed {
            buf: buf.into_boxed_str(),
            ends,
        })
    }

    /// The strings, borrowed.
    fn strings(&self) -> [&str; N] {
        let mut start = 0;
        self.ends.map(|end| {
            let end = usize::from(end);
            let s = &self.buf[start..end];
            start = end;
            s
        })
    }

    /// Bytes of strings `from..to` (exclusive).
    fn span(&self, from: usize, to: usize) -> usize {
        let start = if from == 0 { 0 } else { self.ends[from - 1] };
        usize::from(self.ends[to - 1] - start)
    }
}

/// The strings of a core/v1 call without annotations, in one buffer: the reference's
/// fields, then the reason and the message.
pub(crate) struct PackedCore {
    strings: Packed<9>,
    event_type: EventType,
}

impl PackedCore {
    /// `None` if the strings do not fit the offsets (over 64 KiB; the general path takes them).
    pub(crate) fn new(
        r: ReferenceRef<'_>,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Option<Self> {
        let [a, b, c, d, e, f, g] = r.fields();
        Some(PackedCore {
            strings: Packed::new([a, b, c, d, e, f, g, reason, message])?,
            event_type,
        })
    }

    /// The occurrence, borrowed (to build its event in place).
    pub(crate) fn occurrence(&self) -> OccurrenceRef<'_> {
        let [a, b, c, d, e, f, g, reason, message] = self.strings.strings();
        OccurrenceRef {
            object: ReferenceRef::from([a, b, c, d, e, f, g]),
            event_type: self.event_type,
            reason,
            message,
        }
    }
}

/// An `ObjectRecorder::event` call: the bound object (shared by every call on it, not
/// copied), and reason and message in one buffer.
pub(crate) struct BoundCore {
    object: Arc<ObjectReference>,
    strings: Packed<2>,
    event_type: EventType,
}

impl BoundCore {
    /// `None` if reason and message do not fit the offsets (the general path takes it).
    pub(crate) fn new(
        object: &Arc<ObjectReference>,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Option<Self> {
        Some(BoundCore {
            object: Arc::clone(object),
            strings: Packed::new([reason, message])?,
            event_type,
        })
    }

    /// The occurrence, borrowed (to build its event in place).
    pub(crate) fn occurrence(&self) -> OccurrenceRef<'_> {
        let [reason, message] = self.strings.strings();
        OccurrenceRef {
            object: ReferenceRef::from(&*self.object),
            event_type: self.event_type,
            reason,
            message,
        }
    }
}

/// The strings of an events.k8s.io/v1 call without `related` or annotations, in one buffer:
/// the regarding reference's fields, then reason, action and note.
pub(crate) struct PackedV1 {
    strings: Packed<10>,
    event_type: EventType,
}

impl PackedV1 {
    /// `None` if the strings do not fit the offsets (the general path takes it).
    pub(crate) fn new(
        regarding: ReferenceRef<'_>,
        event_type: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Option<Self> {
        let [a, b, c, d, e, f, g] = regarding.fields();
        Some(PackedV1 {
            strings: Packed::new([a, b, c, d, e, f, g, reason, action, note])?,
            event_type,
        })
    }

    /// The occurrence the call described.
    pub(crate) fn unpack(self) -> kevents_core::events_v1::Occurrence {
        let [a, b, c, d, e, f, g, reason, action, note] = self.strings.strings();
        kevents_core::events_v1::Occurrence::new(
            ReferenceRef::from([a, b, c, d, e, f, g]).to_reference(),
            None,
            self.event_type,
            reason,
            action,
            note,
        )
    }
}

/// Builds the event of an accepted item (the broadcaster calls this for an event the first
/// time a watcher takes it, so an event every watcher drops is never built). A core/v1 event
/// of a plain or bound call is built into a record taken from `pool` (a written event given
/// back). `None` if the factory refuses it (it cannot: the same checks passed at the call),
/// counted as invalid in `intake`.
pub(crate) fn build(
    factories: &Factories,
    item: Item,
    pool: &EventPool,
    intake: &IntakeCounters,
) -> Option<Arc<Recorded>> {
    let factory = &factories.core;
    let made = match item {
        // Split by the broadcaster before building; built as its first occurrence.
        Item::Repeated(first, _) => return build(factories, *first, pool, intake),
        // The calls on the hot path: built in place into a recycled event.
        Item::Packed(at, p) => {
            return build_core(pool, intake, |e| {
                __private::make_into(factory, e, at, p.occurrence())
            });
        }
        Item::Bound(at, b) => {
            return build_core(pool, intake, |e| {
                __private::make_into(factory, e, at, b.occurrence())
            });
        }
        Item::Core(at, occ) => factory.make(at, *occ),
        Item::EventsV1(e) => return Some(Arc::new(Recorded::EventsV1(*e))),
        Item::PackedV1(at, p) => {
            return match factories.v1.factory().make(at, p.unpack()) {
                Ok(e) => Some(Arc::new(Recorded::EventsV1(e))),
                Err(_) => {
                    intake.built_invalid();
                    None
                }
            };
        }
    };
    match made {
        Ok(e) => Some(Arc::new(Recorded::CoreV1(e))),
        Err(_) => {
            intake.built_invalid();
            None
        }
    }
}

/// A core/v1 event built by `make` into a record from the pipeline's [`EventPool`]
/// (a recycled event, whose strings keep their buffers, or a new one).
fn build_core(
    pool: &EventPool,
    intake: &IntakeCounters,
    make: impl FnOnce(&mut Event) -> Result<(), InvalidEvent>,
) -> Option<Arc<Recorded>> {
    let mut record = pool.take();
    let made = match Arc::get_mut(&mut record) {
        Some(Recorded::CoreV1(e)) => make(e),
        // `take` hands out unshared core/v1 records only; build a new one otherwise.
        _ => {
            let mut e = Event::default();
            let made = make(&mut e);
            record = Arc::new(Recorded::CoreV1(e));
            made
        }
    };
    match made {
        Ok(()) => Some(record),
        Err(_) => {
            intake.built_invalid();
            pool.give(record);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevents_core::EventSource;

    fn reference() -> ObjectReference {
        ObjectReference::new("v1", "Pod", "ns", "web-1")
            .with_uid("u-1")
            .with_field_path("spec.containers{app}")
    }

    /// An `ObjectRecorder` call and a plain `event` call of the same occurrence are the same
    /// item in every respect the pipeline looks at: the overflow identity (so they merge),
    /// the byte estimate (so the queues count them alike) and the event they build.
    #[test]
    fn bound_and_packed_calls_are_the_same_occurrence() {
        let at = Time::from_unix_secs(1_700_000_000);
        let r = reference();
        let object = Arc::new(r.clone());
        let bound = || {
            Item::Bound(
                at,
                BoundCore::new(&object, EventType::Warning, "BackOff", "restarting").unwrap(),
            )
        };
        let packed = || {
            Item::Packed(
                at,
                PackedCore::new((&r).into(), EventType::Warning, "BackOff", "restarting").unwrap(),
            )
        };
        assert_eq!(bound().identity(), packed().identity());
        assert_eq!(bound().approx_bytes(), packed().approx_bytes());
        assert_eq!(bound().at(), packed().at());
        let factories = Factories {
            core: EventFactory::new(EventSource::new("c", "h")),
            v1: V1Intake::default(),
        };
        let (pool, intake) = (EventPool::default(), IntakeCounters::new());
        let built = |item| build(&factories, item, &pool, &intake).unwrap();
        assert_eq!(built(bound()).core_v1(), built(packed()).core_v1());
        // Another message is another identity.
        let other = Item::Bound(
            at,
            BoundCore::new(&object, EventType::Warning, "BackOff", "restarted").unwrap(),
        );
        assert_ne!(other.identity(), packed().identity());
    }

    /// An event built into a recycled record is the event built new: nothing of the event
    /// the record held before is left, and the record is the recycled one (no allocation).
    #[test]
    fn an_event_built_into_a_recycled_record_is_a_new_event() {
        let factories = Factories {
            core: EventFactory::new(EventSource::new("c", "h")),
            v1: V1Intake::default(),
        };
        let at = Time::from_unix_secs(1_700_000_000);
        let r = reference();
        let packed = || {
            Item::Packed(
                at,
                PackedCore::new((&r).into(), EventType::Warning, "BackOff", "restarting").unwrap(),
            )
        };
        let intake = IntakeCounters::new();
        let fresh = build(&factories, packed(), &EventPool::default(), &intake).unwrap();
        let pool = EventPool::default();
        let mut old = Event {
            involved_object: ObjectReference::new("apps/v1", "Deployment", "o", "d"),
            message: "an old message".into(),
            count: 12,
            action: "A".into(),
            ..Event::default()
        };
        old.metadata.resource_version = "9".into();
        old.metadata.annotations.insert("k".into(), "v".into());
        let old = Arc::new(Recorded::CoreV1(old));
        let at_old = Arc::as_ptr(&old);
        pool.give(old);
        let rebuilt = build(&factories, packed(), &pool, &intake).unwrap();
        assert_eq!(Arc::as_ptr(&rebuilt), at_old, "the recycled record");
        assert_eq!(rebuilt.core_v1(), fresh.core_v1());
        let bound = Item::Bound(
            at,
            BoundCore::new(
                &Arc::new(r.clone()),
                EventType::Warning,
                "BackOff",
                "restarting",
            )
            .unwrap(),
        );
        pool.give(rebuilt);
        assert_eq!(
            build(&factories, bound, &pool, &intake).unwrap().core_v1(),
            fresh.core_v1()
        );
    }

    /// The packing holds up to 64 KiB of strings (16-bit ends); beyond, the general path
    /// takes the call. Whatever fits unpacks to exactly the strings packed.
    #[test]
    fn packing_round_trips_up_to_its_bound_and_refuses_beyond() {
        let r = reference();
        let fixed: usize = reference_fields(&r).iter().map(|f| f.len()).sum::<usize>() + 1;
        let at_bound = "m".repeat(65_535 - fixed);
        let p = PackedCore::new((&r).into(), EventType::Normal, "R", &at_bound).expect("fits");
        let occ = p.occurrence();
        assert_eq!(occ.object, ReferenceRef::from(&r));
        assert_eq!((occ.reason, occ.message.len()), ("R", at_bound.len()));
        let over = "m".repeat(65_536 - fixed);
        assert!(PackedCore::new((&r).into(), EventType::Normal, "R", &over).is_none());
        let object = Arc::new(r.clone());
        assert!(BoundCore::new(&object, EventType::Normal, "R", &over).is_some());
        assert!(BoundCore::new(&object, EventType::Normal, "R", &"m".repeat(65_535)).is_none());
        assert!(PackedV1::new((&r).into(), EventType::Normal, "R", "A", &over).is_none());
        // Empty strings between non-empty ones keep their places.
        let mut sparse = ObjectReference::new("", "Pod", "", "n");
        sparse.field_path = "f".into();
        let p = PackedCore::new((&sparse).into(), EventType::Warning, "", "m").unwrap();
        let occ = p.occurrence();
        assert_eq!(
            (occ.object, occ.reason, occ.message),
            (ReferenceRef::from(&sparse), "", "m")
        );
    }

    /// A queued call's slot: what a burst held in the intake costs per call besides its
    /// strings (88 bytes before the compact packing).
    #[test]
    fn an_intake_slot_is_at_most_64_bytes() {
        assert!(
            std::mem::size_of::<Item>() <= 64,
            "{}",
            std::mem::size_of::<Item>()
        );
    }
}
