//! The intake: the bounded queue between the handles and the Recorder actor, and the
//! checks every call goes through before it is queued (closed pipeline, client-side
//! validation, v1 routing). Nothing here blocks unless the caller asked to wait.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use kevents_core::__private::{self, EventsV1OccurrenceRef, validate_namespace};
use kevents_core::core_v1::validate;
use kevents_core::events_v1::{Route, from_core_occurrence};
use kevents_core::{EventType, ObjectReference, Occurrence, ReferenceRef, SharedClock, Time};

use super::coalesce::{IntakeOverflow, Spilled};
use super::intake_queue::{IntakeQueue, PushError, Receiver};
use super::outcome::{DropReason, Emit, RecordError};
use crate::intake_item::{BoundCore, Item, PackedCore, PackedV1, V1Intake};
use crate::policy::IntakePolicy;
use crate::queue::IntakeBytes;
use crate::registry::Registry;
use crate::telemetry::Refusal;

/// How many occurrences the recorder actor takes from the intake at once.
pub(crate) const BATCH: usize = 256;

/// The receiving end, owned by the Recorder actor: batches of at most [`BATCH`] items.
pub(crate) type IntakeRx = Receiver<Item>;

/// The sending side every handle of one pipeline shares.
pub(crate) struct Intake {
    queue: Arc<IntakeQueue<Item>>,
    /// The byte bound of a bounded intake (`None` when unbounded).
    bytes: Option<Arc<IntakeBytes>>,
    /// The overflow table of a coalesce-if-full intake.
    overflow: Option<Arc<IntakeOverflow>>,
    closed: AtomicBool,
    clock: SharedClock,
    registry: Arc<Registry>,
    /// How `events.k8s.io/v1` calls are routed.
    v1: V1Intake,
}

impl Drop for Intake {
    /// The last handle is gone: the Recorder actor takes what is queued, then ends (as a
    /// channel's receiver does once every sender is dropped).
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// What the Recorder actor shares with the callers: the byte count it releases and the
/// overflow table it drains.
#[derive(Clone, Default)]
pub(crate) struct IntakeShared {
    pub(crate) bytes: Option<Arc<IntakeBytes>>,
    pub(crate) overflow: Option<Arc<IntakeOverflow>>,
}

/// Why an item could not be put into the intake.
enum SendFailure {
    Full(Item),
    Closed,
}

impl Intake {
    /// How events.k8s.io/v1 calls are routed (for the preflight).
    pub(crate) fn v1(&self) -> &V1Intake {
        &self.v1
    }

    /// An intake with `policy`'s bound (and, when bounded, `max_bytes`), and the receiving
    /// end for the Recorder actor with the byte count it must release and the overflow it
    /// drains.
    pub(crate) fn channel(
        policy: IntakePolicy,
        max_bytes: usize,
        clock: SharedClock,
        registry: Arc<Registry>,
        v1: V1Intake,
    ) -> (Self, IntakeRx, IntakeShared) {
        let bounded = |capacity: usize| {
            let bytes = Arc::new(IntakeBytes::new(max_bytes));
            (Some(capacity.max(1)), Some(bytes))
        };
        let mut overflow = None;
        let (capacity, bytes) = match policy {
            IntakePolicy::DropIfFull { capacity } => bounded(capacity),
            IntakePolicy::CoalesceIfFull {
                capacity,
                overflow: entries,
            } => {
                overflow = Some(Arc::new(IntakeOverflow::new(entries, max_bytes)));
                bounded(capacity)
            }
            IntakePolicy::Unbounded => (None, None),
        };
        let (queue, rx) = IntakeQueue::new(capacity, BATCH);
        let shared = IntakeShared {
            bytes: bytes.clone(),
            overflow: overflow.clone(),
        };
        let intake = Intake {
            queue,
            overflow,
            bytes: bytes.clone(),
            closed: AtomicBool::new(false),
            clock,
            registry,
            v1,
        };
        (intake, rx, shared)
    }

    /// Refuses every later call (they return [`RecordError::Shutdown`]).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        if let Some(b) = &self.bytes {
            b.wake_all();
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Counts a refusal and says why to the caller.
    fn refuse<T>(&self, why: Refusal, err: RecordError) -> Result<T, RecordError> {
        self.registry.intake.refused(why);
        Err(err)
    }

    /// Counts an invalid call (a reference that could not be read) and returns its error.
    pub(crate) fn invalid(&self, err: RecordError) -> RecordError {
        self.registry.intake.refused(Refusal::Invalid);
        err
    }

    fn check_open(&self) -> Result<(), RecordError> {
        if self.is_closed() {
            return self.refuse(Refusal::AfterShutdown, RecordError::Shutdown);
        }
        Ok(())
    }

    /// The intake item of a core/v1 call, or of its events.k8s.io/v1 form when core calls go
    /// to the new API.
    fn admit(&self, occ: Occurrence) -> Result<Item, RecordError> {
        if let Some(action) = self.v1.core_calls_action() {
            return self.admit_v1(from_core_occurrence(occ, action));
        }
        self.admit_core(occ)
    }

    /// The intake item of a core/v1 occurrence (never redirected to events.k8s.io/v1).
    fn admit_core(&self, occ: Occurrence) -> Result<Item, RecordError> {
        self.check_open()?;
        if let Err(e) = validate(&occ) {
            return self.refuse(Refusal::Invalid, e.into());
        }
        Ok(Item::Core(self.clock.now(), Box::new(occ)))
    }

    /// The intake item of an events.k8s.io/v1 call: built and validated here (the caller
    /// gets the error), or its core/v1 form when the API is not served.
    fn admit_v1(&self, occ: kevents_core::events_v1::Occurrence) -> Result<Item, RecordError> {
        self.check_open()?;
        match self.v1.route(self.clock.now(), occ) {
            Ok(Route::EventsV1(e)) => Ok(Item::EventsV1(e)),
            Ok(Route::CoreV1(core)) => self.admit_core(*core),
            Err(e) => self.refuse(Refusal::Invalid, e.into()),
        }
    }

    /// A core/v1 call; never waits.
    pub(crate) fn submit(&self, occ: Occurrence) -> Result<Emit, RecordError> {
        let item = self.admit(occ)?;
        self.send(item)
    }

    /// An events.k8s.io/v1 call; never waits.
    pub(crate) fn submit_v1(
        &self,
        occ: kevents_core::events_v1::Occurrence,
    ) -> Result<Emit, RecordError> {
        let item = self.admit_v1(occ)?;
        self.send(item)
    }

    /// A core/v1 call, waiting for room in the intake.
    pub(crate) async fn submit_wait(&self, occ: Occurrence) -> Result<(), RecordError> {
        let item = self.admit(occ)?;
        self.send_wait(item).await
    }

    /// An events.k8s.io/v1 call, waiting for room in the intake.
    pub(crate) async fn submit_v1_wait(
        &self,
        occ: kevents_core::events_v1::Occurrence,
    ) -> Result<(), RecordError> {
        let item = self.admit_v1(occ)?;
        self.send_wait(item).await
    }

    /// `event` on an `ObjectReference` without annotations: the same checks, clock reading
    /// and intake as [`Intake::submit`], with the strings copied into one allocation instead
    /// of one per field (`None`: take the general path).
    pub(crate) fn submit_packed(
        &self,
        r: ReferenceRef<'_>,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Option<Result<Emit, RecordError>> {
        self.submit_plain(Some(r.namespace), |at| {
            Some(Item::Packed(
                at,
                PackedCore::new(r, event_type, reason, message)?,
            ))
        })
    }

    /// An `ObjectRecorder::event` call: the same checks, clock reading and intake as
    /// [`Intake::submit_packed`], with the object's strings shared instead of copied; its
    /// namespace is checked only if `for_object` did not find it valid (`None`: take the
    /// general path).
    pub(crate) fn submit_bound(
        &self,
        object: &Arc<ObjectReference>,
        namespace_valid: bool,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Option<Result<Emit, RecordError>> {
        let unchecked = (!namespace_valid).then_some(object.namespace.as_str());
        self.submit_plain(unchecked, |at| {
            Some(Item::Bound(
                at,
                BoundCore::new(object, event_type, reason, message)?,
            ))
        })
    }

    /// A plain core/v1 `event` call (no annotations): `None` when core/v1 calls go to
    /// events.k8s.io/v1 (the general path converts them) or when `item` cannot pack the call;
    /// else refused (counted) on a closed pipeline or an invalid `namespace` (`None`: already
    /// checked), or the item `item` packs at the clock's reading, sent.
    fn submit_plain(
        &self,
        namespace: Option<&str>,
        item: impl FnOnce(Time) -> Option<Item>,
    ) -> Option<Result<Emit, RecordError>> {
        if self.v1.routes_core_calls() {
            return None;
        }
        if let Err(e) = self.check_open() {
            return Some(Err(e));
        }
        // The type is an `EventType` (always valid) and there are no annotations: of
        // `validate`'s checks only the namespace's is left.
        if let Some(ns) = namespace
            && let Err(e) = validate_namespace(ns)
        {
            return Some(self.refuse(Refusal::Invalid, e.into()));
        }
        Some(self.send(item(self.clock.now())?))
    }

    /// `events_v1().event` on an `ObjectReference` without `related` or annotations, with a plain
    /// note: checked here exactly as [`Intake::submit_v1`] would (the same errors), the
    /// strings copied into one allocation, the event built off the caller's thread (`None`:
    /// take the general path).
    pub(crate) fn submit_v1_packed(
        &self,
        regarding: ReferenceRef<'_>,
        event_type: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Option<Result<Emit, RecordError>> {
        if !self.v1.served() {
            return None;
        }
        if let Err(e) = self.check_open() {
            return Some(Err(e));
        }
        let now = self.clock.now();
        let call = EventsV1OccurrenceRef {
            regarding,
            event_type: event_type.as_str(),
            reason,
            action,
            note,
            annotations: &BTreeMap::new(),
        };
        if let Err(e) = __private::check_ref(self.v1.factory(), now, call) {
            return Some(self.refuse(Refusal::Invalid, e.into()));
        }
        let packed = PackedV1::new(regarding, event_type, reason, action, note)?;
        Some(self.send(Item::PackedV1(now, packed)))
    }

    /// Merges an item into the overflow table and counts the outcome.
    fn spill(&self, overflow: &IntakeOverflow, item: Item) -> Result<Emit, RecordError> {
        match overflow.merge(item) {
            Ok(spilled) => self.spilled(spilled).map(|()| Emit::Queued),
            Err(_full) => {
                self.registry.intake.refused(Refusal::IntakeFull);
                Ok(Emit::Dropped(DropReason::IntakeFull))
            }
        }
    }

    /// Counts an occurrence the overflow table took.
    fn spilled(&self, spilled: Spilled) -> Result<(), RecordError> {
        match spilled {
            Spilled::Added => self.registry.intake.overflowed(false),
            Spilled::Coalesced => self.registry.intake.overflowed(true),
            Spilled::Closed => {
                return self.refuse(Refusal::AfterShutdown, RecordError::Shutdown);
            }
        }
        Ok(())
    }

    /// Puts an item into the intake without waiting and counts the outcome. A bounded
    /// intake is full when it holds `capacity` items or its byte bound; a coalesce-if-full
    /// intake then merges the item into its overflow table (and keeps doing so while the
    /// table holds anything, so that occurrences stay in order).
    fn send(&self, item: Item) -> Result<Emit, RecordError> {
        if let Some(o) = &self.overflow
            && o.active()
        {
            return self.spill(o, item);
        }
        // The byte bound first (a bounded intake only), then the queue's count bound.
        let size = self.bytes.as_ref().map(|_| item.approx_bytes());
        let sent = match (&self.bytes, size) {
            (Some(b), Some(size)) if !b.reserve(size) => Err(SendFailure::Full(item)),
            _ => self.queue.try_push(item).map_err(|e| {
                if let (Some(b), Some(size)) = (&self.bytes, size) {
                    b.release(size);
                }
                match e {
                    PushError::Full(item) => SendFailure::Full(item),
                    PushError::Closed(_) => SendFailure::Closed,
                }
            }),
        };
        match sent {
            Ok(()) => {
                self.registry.intake.recorded();
                Ok(Emit::Queued)
            }
            Err(SendFailure::Full(item)) => {
                if let Some(o) = &self.overflow {
                    return self.spill(o, item);
                }
                self.registry.intake.refused(Refusal::IntakeFull);
                Ok(Emit::Dropped(DropReason::IntakeFull))
            }
            Err(SendFailure::Closed) => self.refuse(Refusal::AfterShutdown, RecordError::Shutdown),
        }
    }

    /// Puts an item into the intake, waiting for room (a free slot and room in the byte
    /// bound), and counts the outcome.
    async fn send_wait(&self, item: Item) -> Result<(), RecordError> {
        // Behind a non-empty overflow table, in order, if the table has room for it.
        let item = match &self.overflow {
            Some(o) if o.active() => match o.merge(item) {
                Ok(spilled) => return self.spilled(spilled),
                Err(item) => item,
            },
            _ => item,
        };
        let bytes = self.bytes.as_deref();
        let size = bytes.map(|_| item.approx_bytes());
        let room = match (bytes, size) {
            (Some(b), Some(size)) => b.reserve_wait(size, || self.is_closed()).await,
            _ => true,
        };
        let sent = room && {
            let pushed = self.queue.push(item).await.is_ok();
            if !pushed && let (Some(b), Some(size)) = (bytes, size) {
                b.release(size);
            }
            pushed
        };
        if sent {
            self.registry.intake.recorded();
            Ok(())
        } else {
            self.refuse(Refusal::AfterShutdown, RecordError::Shutdown)
        }
    }
}
