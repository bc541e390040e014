//! The messages watchers receive.

use std::sync::Arc;

use actix::Message;
use kevents_core::{Event, Time, name};
use tokio::sync::OwnedSemaphorePermit;

use crate::overflow::{Identity, IdentityBuilder, Repeats, reference_fields, v1_identity};

/// One recorded event, as the broadcaster fans it out.
///
/// The enum is `#[non_exhaustive]` so that a second event API (events.k8s.io/v1) can add a
/// variant without breaking watchers: a watcher that only understands core/v1 events matches
/// [`Recorded::CoreV1`] and ignores the rest.
///
/// ```
/// use kevents_actors::Recorded;
/// use kevents_core::Event;
/// let r = Recorded::CoreV1(Event::default());
/// assert!(r.core_v1().is_some());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recorded {
    /// A core/v1 `Event` built by the recorder (client-go `tools/record`).
    CoreV1(Event),
    /// An `events.k8s.io/v1` event built and validated by the recorder (client-go
    /// `tools/events`), before any series bookkeeping (the series sink chain does that).
    EventsV1(kevents_core::events_v1::Event),
}

impl Recorded {
    /// The core/v1 event, if this is one.
    pub fn core_v1(&self) -> Option<&Event> {
        match self {
            Recorded::CoreV1(e) => Some(e),
            Recorded::EventsV1(_) => None,
        }
    }

    /// The `events.k8s.io/v1` event, if this is one.
    ///
    /// ```
    /// use kevents_actors::Recorded;
    /// use kevents_core::events_v1::Event;
    /// let r = Recorded::EventsV1(Event::default());
    /// assert!(r.events_v1().is_some() && r.core_v1().is_none());
    /// ```
    pub fn events_v1(&self) -> Option<&kevents_core::events_v1::Event> {
        match self {
            Recorded::EventsV1(e) => Some(e),
            Recorded::CoreV1(_) => None,
        }
    }

    /// What a coalescing watcher queue merges on: every field client-go's correlator keys
    /// on (object, type, reason, message, annotations, source; for v1 the regarding and
    /// related objects, action, note and reporter), not names or instants.
    pub(crate) fn identity(&self) -> Identity {
        let mut b = IdentityBuilder::with_capacity(256);
        match self {
            Recorded::CoreV1(e) => {
                b.tag(1);
                for f in reference_fields(&e.involved_object) {
                    b.field(f);
                }
                b.field(&e.type_)
                    .field(&e.reason)
                    .field(&e.message)
                    .field(&e.source.component)
                    .field(&e.source.host)
                    .field(&e.metadata.namespace);
                for (k, v) in &e.metadata.annotations {
                    b.field(k).field(v);
                }
            }
            Recorded::EventsV1(e) => {
                b.tag(2).field(&e.metadata.namespace);
                v1_identity(&mut b, e);
            }
        }
        b.finish()
    }

    /// When the event (its newest occurrence) was recorded.
    pub(crate) fn at(&self) -> Time {
        match self {
            Recorded::CoreV1(e) => e.last_timestamp.unwrap_or_default(),
            Recorded::EventsV1(e) => e.event_time.unwrap_or_default(),
        }
    }
}

/// A core/v1 event shared between the correlator actor and the sink actor instead of moved:
/// the broadcaster's `Arc<Recorded>`, which always holds a [`Recorded::CoreV1`]. An event is
/// built once into it and then correlated in place ([`SharedCore::make_mut`], a copy only
/// when another watcher holds it too), queued, written and retried without moving its 800
/// bytes again (before, four `memcpy`s per event between the stages).
#[derive(Debug, Clone)]
pub(crate) struct SharedCore(Arc<Recorded>);

impl SharedCore {
    /// Shares a new event.
    pub(crate) fn new(event: Event) -> Self {
        SharedCore(Arc::new(Recorded::CoreV1(event)))
    }

    /// The broadcaster's record, if it holds a core/v1 event.
    pub(crate) fn from_recorded(record: Arc<Recorded>) -> Option<Self> {
        record.core_v1().is_some().then_some(SharedCore(record))
    }

    /// The shared record (to give back to the pipeline's `EventPool`).
    pub(crate) fn into_record(self) -> Arc<Recorded> {
        self.0
    }

    /// The event, to change in place: copied first only if it is shared.
    pub(crate) fn make_mut(&mut self) -> &mut Event {
        match Arc::make_mut(&mut self.0) {
            Recorded::CoreV1(e) => e,
            // `new` and `from_recorded` only ever wrap core/v1 events.
            Recorded::EventsV1(_) => unreachable!("SharedCore holds a core/v1 event"),
        }
    }
}

impl std::ops::Deref for SharedCore {
    type Target = Event;

    fn deref(&self) -> &Event {
        match &*self.0 {
            Recorded::CoreV1(e) => e,
            Recorded::EventsV1(_) => unreachable!("SharedCore holds a core/v1 event"),
        }
    }
}

/// The core/v1 event of a repeat recorded at `at`, as the recorder would have built it: the
/// first occurrence's event with its timestamps at `at`, and its name too when the name was
/// made from the first instant (`<object>.<nanos>`; a UUID name is kept).
pub(crate) fn core_repeat(first: &Event, at: Time) -> Event {
    let mut e = first.clone();
    if let Some(t0) = first.first_timestamp
        && first.metadata.name == name::event_name(&first.involved_object.name, t0)
    {
        e.metadata.name = name::event_name(&first.involved_object.name, at);
    }
    e.first_timestamp = Some(at);
    e.last_timestamp = Some(at);
    e
}

/// The events.k8s.io/v1 event of a repeat recorded at `at` (as [`core_repeat`]).
pub(crate) fn v1_repeat(
    first: &kevents_core::events_v1::Event,
    at: Time,
) -> kevents_core::events_v1::Event {
    let mut e = first.clone();
    if let Some(t0) = first.event_time
        && first.metadata.name == name::event_name(&first.regarding.name, t0)
    {
        e.metadata.name = name::event_name(&first.regarding.name, at);
    }
    e.event_time = Some(at);
    e
}

/// Holds one slot of a watcher's bounded queue and the bytes the event counts against the
/// queue's byte bound. Both are given back when this value is dropped, so a watcher that
/// finishes its work asynchronously (like the sink chain) can keep the slot until the work is
/// done: the watcher's bounds then cover everything it has accepted and not finished.
///
/// ```
/// use kevents_actors::DeliverySlot;
/// let slot = DeliverySlot::detached();
/// drop(slot); // gives nothing back: it was not taken from a queue
/// ```
#[derive(Debug)]
pub struct DeliverySlot {
    _permit: Option<OwnedSemaphorePermit>,
    _bytes: Option<OwnedSemaphorePermit>,
}

impl DeliverySlot {
    pub(crate) fn new(permit: OwnedSemaphorePermit, bytes: OwnedSemaphorePermit) -> Self {
        DeliverySlot {
            _permit: Some(permit),
            _bytes: Some(bytes),
        }
    }

    /// A slot that belongs to no queue (for messages built by hand, e.g. in tests).
    pub fn detached() -> Self {
        DeliverySlot {
            _permit: None,
            _bytes: None,
        }
    }
}

/// One semaphore's finished permits, merged (a counter update) and given back at once.
#[derive(Debug, Default)]
struct Merged(Option<OwnedSemaphorePermit>);

impl Merged {
    fn push(&mut self, permit: Option<OwnedSemaphorePermit>) {
        let Some(permit) = permit else {
            return;
        };
        match &mut self.0 {
            Some(m) if Arc::ptr_eq(m.semaphore(), permit.semaphore()) => m.merge(permit),
            Some(_) => drop(permit),
            None => self.0 = Some(permit),
        }
    }
}

/// Slots finished by a watcher, given back together: merging permits of one semaphore is a
/// plain counter update, and the release (which takes the semaphore's lock) happens once,
/// in [`ReleasedSlots::release`] (or when this is dropped).
#[derive(Debug, Default)]
pub(crate) struct ReleasedSlots {
    slots: Merged,
    bytes: Merged,
}

impl ReleasedSlots {
    /// Adds a finished slot; it is given back at the next [`ReleasedSlots::release`].
    pub(crate) fn push(&mut self, slot: DeliverySlot) {
        self.slots.push(slot._permit);
        self.bytes.push(slot._bytes);
    }

    /// Gives every collected slot back.
    pub(crate) fn release(&mut self) {
        self.slots = Merged::default();
        self.bytes = Merged::default();
    }
}

/// Several events for one watcher, in intake order, each with its own slot: what the
/// broadcaster sends to the pipeline's own watchers (sink chains) instead of one
/// [`EventMessage`] per event, so that a burst costs one mailbox hand-off per batch.
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub(crate) struct EventBatch(pub(crate) Vec<EventMessage>);

/// What every watcher receives: one event, in intake order, with its sequence number.
///
/// The message occupies one slot of the watcher's queue until it is dropped (normally at the
/// end of the handler). A handler that wants to keep the event longer should keep
/// [`EventMessage::record`] (an `Arc`) and let the message go.
///
/// ```
/// use actix::prelude::*;
/// use kevents_actors::EventMessage;
///
/// /// A watcher that counts Warnings.
/// #[derive(Default)]
/// struct Warnings(u64);
/// impl Actor for Warnings { type Context = Context<Self>; }
/// impl Handler<EventMessage> for Warnings {
///     type Result = ();
///     fn handle(&mut self, msg: EventMessage, _: &mut Context<Self>) {
///         if msg.event().is_some_and(|e| e.type_ == "Warning") {
///             self.0 += 1;
///         }
///     }
/// }
/// ```
#[derive(Debug, Message)]
#[rtype(result = "()")]
pub struct EventMessage {
    seq: u64,
    record: Arc<Recorded>,
    slot: DeliverySlot,
    repeats: Option<Repeats>,
}

impl EventMessage {
    /// A message outside any pipeline (for unit tests of watcher actors).
    pub fn new(seq: u64, record: Recorded) -> Self {
        EventMessage {
            seq,
            record: Arc::new(record),
            slot: DeliverySlot::detached(),
            repeats: None,
        }
    }

    /// The same message standing for `repeats.more` more occurrences of the same event, the
    /// newest at `repeats.last` (what a coalescing queue delivers after merging).
    ///
    /// ```
    /// use kevents_actors::{EventMessage, Recorded, Repeats};
    /// use kevents_core::{Event, Time};
    /// let m = EventMessage::new(0, Recorded::CoreV1(Event::default()))
    ///     .with_repeats(Repeats { more: 4, last: Time::from_unix_nanos(5) });
    /// assert_eq!(m.occurrences(), 5);
    /// ```
    pub fn with_repeats(mut self, repeats: Repeats) -> Self {
        self.repeats = (repeats.more > 0).then_some(repeats);
        self
    }

    pub(crate) fn with_slot(
        seq: u64,
        record: Arc<Recorded>,
        slot: DeliverySlot,
        repeats: Option<Repeats>,
    ) -> Self {
        EventMessage {
            seq,
            record,
            slot,
            repeats,
        }
    }

    /// How many occurrences this message stands for: 1, or more when a coalesce-if-full
    /// queue merged repeats of the same event into it while the queue was full
    /// ([`WatcherPolicy::CoalesceIfFull`](crate::WatcherPolicy::CoalesceIfFull),
    /// [`IntakePolicy::CoalesceIfFull`](crate::IntakePolicy::CoalesceIfFull)). A watcher that
    /// counts events should add this, not 1.
    pub fn occurrences(&self) -> u64 {
        crate::overflow::stands_for(self.repeats)
    }

    /// The repeats merged into this message (`None` for a single occurrence): how many and
    /// when the newest was recorded. [`EventMessage::record`] is the first occurrence.
    pub fn repeats(&self) -> Option<Repeats> {
        self.repeats
    }

    /// Position in intake order (0 for the first event the broadcaster distributed). Every
    /// watcher sees increasing sequence numbers; gaps mean events dropped for this watcher
    /// (drop-if-full) or distributed before it was registered.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The recorded event, shared with every other watcher.
    pub fn record(&self) -> &Arc<Recorded> {
        &self.record
    }

    /// The core/v1 event, if this is one.
    pub fn event(&self) -> Option<&Event> {
        self.record.core_v1()
    }

    /// The `events.k8s.io/v1` event, if this is one.
    pub fn event_events_v1(&self) -> Option<&kevents_core::events_v1::Event> {
        self.record.events_v1()
    }

    /// Splits the message into the event and the queue slot it holds (see
    /// [`EventMessage::repeats`] first: the event is the first of them).
    pub fn into_parts(self) -> (Arc<Recorded>, DeliverySlot) {
        (self.record, self.slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str) -> Event {
        let mut e = Event::default();
        e.metadata.name = name.into();
        e.count = 1;
        e
    }

    /// The broadcaster's record is changed in place when the chain is its only holder, and
    /// copied (the other holder keeps the original) when it is shared.
    #[test]
    fn shared_core_changes_in_place_unless_shared() {
        let record = Arc::new(Recorded::CoreV1(event("a")));
        let at = Arc::as_ptr(&record);
        let mut only = SharedCore::from_recorded(record).expect("a core event");
        only.make_mut().count = 2;
        assert_eq!(Arc::as_ptr(&only.0), at, "not copied");
        assert_eq!(only.count, 2);

        let record = Arc::new(Recorded::CoreV1(event("b")));
        let other = Arc::clone(&record);
        let mut mine = SharedCore::from_recorded(record).expect("a core event");
        mine.make_mut().count = 5;
        assert_eq!(mine.count, 5);
        assert_eq!(
            other.core_v1().map(|e| e.count),
            Some(1),
            "the other holder's is unchanged"
        );
        assert!(!Arc::ptr_eq(&mine.0, &other));
    }

    #[test]
    fn shared_core_takes_only_core_events() {
        let v1 = Arc::new(Recorded::EventsV1(kevents_core::events_v1::Event::default()));
        assert!(SharedCore::from_recorded(v1).is_none());
        assert_eq!(SharedCore::new(event("c")).metadata.name, "c");
    }
}
