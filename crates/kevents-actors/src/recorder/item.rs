//! What travels through the intake: an accepted occurrence with the instant it was
//! recorded, and how it becomes the event watchers receive ([`build`], called by the
//! broadcaster the first time a watcher takes it).

use std::sync::Arc;

use kevents_core::{Event, EventFactory, EventType, ObjectMeta, ObjectReference, Occurrence, Time};

use crate::message::Recorded;
use crate::registry::Registry;

/// One accepted occurrence with the instant it was recorded.
// The hot path (`Recorder::event` on an `ObjectReference`) is the packed variant, whose
// strings live in one allocation; the general core/v1 occurrence and the v1 event are boxed,
// which keeps the intake's slots small (an unbounded intake holding a burst stays compact).
pub(crate) enum Item {
    Core(Time, Box<Occurrence>),
    /// A plain `event` call on an `ObjectReference`, packed on the caller's thread into one
    /// allocation (the Recorder actor unpacks it into the same [`Occurrence`]).
    Packed(Time, PackedCore),
    /// Built and validated at the call (boxed: keeps the intake's slots small).
    EventsV1(Box<kevents_core::events_v1::Event>),
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
            Item::Packed(_, p) => built + p.buf.len() + p.name_and_namespace_len(),
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

/// The strings of a core/v1 call without annotations, in one buffer: the reference's
/// fields, then the reason and the message.
pub(crate) struct PackedCore {
    buf: String,
    ends: [u32; 9],
    event_type: EventType,
}

impl PackedCore {
    /// `None` if the strings do not fit the offsets (over 4 GiB; the general path takes it).
    pub(crate) fn new(
        r: &ObjectReference,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Option<Self> {
        let parts: [&str; 9] = [
            &r.kind,
            &r.namespace,
            &r.name,
            &r.uid,
            &r.api_version,
            &r.resource_version,
            &r.field_path,
            reason,
            message,
        ];
        let total: usize = parts.iter().map(|p| p.len()).sum();
        u32::try_from(total).ok()?;
        let mut buf = String::with_capacity(total);
        let mut ends = [0u32; 9];
        for (end, part) in ends.iter_mut().zip(parts) {
            buf.push_str(part);
            *end = buf.len() as u32;
        }
        Some(PackedCore {
            buf,
            ends,
            event_type,
        })
    }

    /// Bytes of the object's namespace and name (fields 1 and 2).
    fn name_and_namespace_len(&self) -> usize {
        (self.ends[2] - self.ends[0]) as usize
    }

    /// The occurrence the general path would have queued.
    pub(crate) fn unpack(self) -> Occurrence {
        let mut start = 0;
        let mut next = |i: usize| {
            let end = self.ends[i] as usize;
            let s = self.buf[start..end].to_owned();
            start = end;
            s
        };
        let object = ObjectReference {
            kind: next(0),
            namespace: next(1),
            name: next(2),
            uid: next(3),
            api_version: next(4),
            resource_version: next(5),
            field_path: next(6),
        };
        let reason = next(7);
        let message = next(8);
        Occurrence::new(object, self.event_type, reason, message)
    }
}

/// Builds the event of an accepted item (the broadcaster calls this for an event the first
/// time a watcher takes it, so an event every watcher drops is never built). `None` if the
/// factory refuses it (it cannot: the same checks passed at the call), counted as invalid.
pub(crate) fn build(
    factory: &EventFactory,
    item: Item,
    registry: &Registry,
) -> Option<Arc<Recorded>> {
    let made = match item {
        Item::Packed(at, p) => factory.make(at, p.unpack()),
        Item::Core(at, occ) => factory.make(at, *occ),
        Item::EventsV1(e) => return Some(Arc::new(Recorded::EventsV1(*e))),
    };
    match made {
        Ok(e) => Some(Arc::new(Recorded::Core(e))),
        Err(_) => {
            registry.intake.built_invalid();
            None
        }
    }
}
