//! The user-facing [`Recorder`] handle, the bounded intake behind it, and the Recorder actor
//! that turns accepted occurrences into events and hands them to the broadcaster.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix::prelude::*;
use futures_util::stream;
use kevents_core::core_v1::{validate, validate_parts};
use kevents_core::{
    EventFactory, EventType, InvalidEvent, ObjectReference, Occurrence, Reference, SharedClock,
    Time,
};
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};

use crate::broadcaster::{Broadcaster, Publish};
use crate::fake::FakeShared;
use crate::message::Recorded;
use crate::stats::PipelineStats;

/// How many occurrences the recorder actor takes from the intake at once.
const BATCH: usize = 256;

/// The intake's bound.
///
/// ```
/// use kevents_actors::IntakePolicy;
/// assert_eq!(IntakePolicy::default(), IntakePolicy::DropIfFull { capacity: 1000 });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntakePolicy {
    /// At most `capacity` occurrences wait in the intake (exactly: a bounded channel, not the
    /// actix mailbox); a call that finds it full returns [`Emit::Dropped`] and is counted.
    DropIfFull {
        /// Slots in the intake (at least 1).
        capacity: usize,
    },
    /// No bound: nothing is ever dropped at the intake; memory grows with the backlog.
    Unbounded,
}

impl Default for IntakePolicy {
    /// Drop-if-full with 1000 slots (client-go 1.21+'s incoming queue size).
    fn default() -> Self {
        IntakePolicy::DropIfFull { capacity: 1000 }
    }
}

/// What happened to one accepted call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    /// The occurrence is in the intake.
    Queued,
    /// The occurrence was dropped (and counted).
    Dropped(DropReason),
}

impl Emit {
    /// Whether the occurrence was queued.
    pub fn is_queued(&self) -> bool {
        matches!(self, Emit::Queued)
    }
}

/// Why an occurrence was dropped at the recorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// The intake held its capacity.
    IntakeFull,
}

/// Why a call recorded nothing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// The occurrence failed a client-side check; nothing was emitted.
    #[error(transparent)]
    Invalid(#[from] InvalidEvent),
    /// An `events.k8s.io/v1` occurrence failed the server's rules, checked client-side
    /// (section F); nothing was emitted.
    #[error(transparent)]
    InvalidV1(#[from] kevents_core::events_v1::InvalidEventV1),
    /// The pipeline has been shut down (or its actors are gone).
    #[error("the event pipeline is shut down")]
    Shutdown,
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
    /// Built and validated at the call (boxed: keeps the intake's slots small).
    EventsV1(Box<kevents_core::events_v1::Event>),
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
    fn new(
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

    /// The occurrence the general path would have queued.
    fn unpack(self) -> Occurrence {
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

enum IntakeTx {
    Bounded(mpsc::Sender<Item>),
    Unbounded(mpsc::UnboundedSender<Item>),
}

pub(crate) enum IntakeRx {
    Bounded(mpsc::Receiver<Item>),
    Unbounded(mpsc::UnboundedReceiver<Item>),
}

impl IntakeRx {
    async fn recv_many(&mut self, buf: &mut Vec<Item>, n: usize) -> usize {
        match self {
            IntakeRx::Bounded(rx) => rx.recv_many(buf, n).await,
            IntakeRx::Unbounded(rx) => rx.recv_many(buf, n).await,
        }
    }

    fn close(&mut self) {
        match self {
            IntakeRx::Bounded(rx) => rx.close(),
            IntakeRx::Unbounded(rx) => rx.close(),
        }
    }
}

pub(crate) fn intake_channel(policy: IntakePolicy) -> (IntakeTxShared, IntakeRx) {
    match policy {
        IntakePolicy::DropIfFull { capacity } => {
            let (tx, rx) = mpsc::channel(capacity.clamp(1, tokio::sync::Semaphore::MAX_PERMITS));
            (IntakeTxShared(IntakeTx::Bounded(tx)), IntakeRx::Bounded(rx))
        }
        IntakePolicy::Unbounded => {
            let (tx, rx) = mpsc::unbounded_channel();
            (
                IntakeTxShared(IntakeTx::Unbounded(tx)),
                IntakeRx::Unbounded(rx),
            )
        }
    }
}

pub(crate) struct IntakeTxShared(IntakeTx);

/// What the handles of one pipeline share.
pub(crate) struct IntakeShared {
    tx: IntakeTxShared,
    pub(crate) closed: AtomicBool,
    clock: SharedClock,
    stats: Arc<PipelineStats>,
    /// How `events.k8s.io/v1` calls are routed (see `crate::series`).
    pub(crate) v1: crate::series::V1Intake,
}

impl IntakeShared {
    pub(crate) fn new(tx: IntakeTxShared, clock: SharedClock, stats: Arc<PipelineStats>) -> Self {
        IntakeShared {
            tx,
            closed: AtomicBool::new(false),
            clock,
            stats,
            v1: crate::series::V1Intake::default(),
        }
    }

    /// Sets how `events.k8s.io/v1` calls are routed.
    pub(crate) fn with_v1(mut self, v1: crate::series::V1Intake) -> Self {
        self.v1 = v1;
        self
    }

    /// An `events.k8s.io/v1` call: built and validated here (the caller gets the error),
    /// or routed to the core/v1 path when the API is not served.
    pub(crate) fn submit_v1(
        &self,
        occ: kevents_core::events_v1::OccurrenceV1,
    ) -> Result<Emit, RecordError> {
        let item = match self.v1_item(occ)? {
            Ok(item) => item,
            Err(core) => return self.submit_core(core),
        };
        self.send_item(item)
    }

    /// [`IntakeShared::submit_v1`], waiting for room in the intake.
    pub(crate) async fn submit_v1_wait(
        &self,
        occ: kevents_core::events_v1::OccurrenceV1,
    ) -> Result<(), RecordError> {
        let item = match self.v1_item(occ)? {
            Ok(item) => item,
            Err(core) => return Box::pin(self.submit_wait(core)).await,
        };
        self.send_item_wait(item).await
    }

    /// The intake item of a v1 call (`Ok`), or the core/v1 occurrence of the fallback
    /// (`Err`). Counts refusals.
    fn v1_item(
        &self,
        occ: kevents_core::events_v1::OccurrenceV1,
    ) -> Result<Result<Item, Occurrence>, RecordError> {
        let s = &self.stats.intake;
        if self.closed.load(Ordering::Acquire) {
            s.after_shutdown.add(1);
            return Err(RecordError::Shutdown);
        }
        match self.v1.route(self.clock.now(), occ) {
            Ok(kevents_core::events_v1::Route::EventsV1(e)) => Ok(Ok(Item::EventsV1(e))),
            Ok(kevents_core::events_v1::Route::CoreV1(core)) => Ok(Err(*core)),
            Err(e) => {
                s.invalid.add(1);
                Err(e.into())
            }
        }
    }

    /// The core/v1 path proper (never redirected to events.k8s.io/v1).
    fn submit_core(&self, occ: Occurrence) -> Result<Emit, RecordError> {
        self.submit_inner(occ)
    }

    fn submit(&self, occ: Occurrence) -> Result<Emit, RecordError> {
        if let Some(action) = self.v1.core_calls_action() {
            return self.submit_v1(kevents_core::events_v1::from_core_occurrence(occ, action));
        }
        self.submit_inner(occ)
    }

    fn submit_inner(&self, occ: Occurrence) -> Result<Emit, RecordError> {
        let s = &self.stats.intake;
        if self.closed.load(Ordering::Acquire) {
            s.after_shutdown.add(1);
            return Err(RecordError::Shutdown);
        }
        if let Err(e) = validate(&occ) {
            s.invalid.add(1);
            return Err(e.into());
        }
        let item = Item::Core(self.clock.now(), Box::new(occ));
        self.send_item(item)
    }

    /// `event` on an `ObjectReference` without annotations: the same checks, clock reading
    /// and intake as [`IntakeShared::submit`], with the strings copied into one allocation
    /// instead of one per field (`None`: take the general path).
    fn submit_packed(
        &self,
        r: &ObjectReference,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Option<Result<Emit, RecordError>> {
        if self.v1.core_calls_action().is_some() {
            return None;
        }
        let s = &self.stats.intake;
        if self.closed.load(Ordering::Acquire) {
            s.after_shutdown.add(1);
            return Some(Err(RecordError::Shutdown));
        }
        if let Err(e) = validate_parts(event_type.as_str(), &r.namespace, &BTreeMap::new()) {
            s.invalid.add(1);
            return Some(Err(e.into()));
        }
        let packed = PackedCore::new(r, event_type, reason, message)?;
        Some(self.send_item(Item::Packed(self.clock.now(), packed)))
    }

    /// Puts an item into the intake and counts the outcome.
    fn send_item(&self, item: Item) -> Result<Emit, RecordError> {
        let s = &self.stats.intake;
        let sent = match &self.tx.0 {
            IntakeTx::Bounded(tx) => match tx.try_send(item) {
                Ok(()) => Ok(()),
                Err(mpsc::error::TrySendError::Full(_)) => Err(true),
                Err(mpsc::error::TrySendError::Closed(_)) => Err(false),
            },
            IntakeTx::Unbounded(tx) => tx.send(item).map_err(|_| false),
        };
        match sent {
            Ok(()) => {
                s.recorded.add(1);
                Ok(Emit::Queued)
            }
            Err(true) => {
                s.intake_full.add(1);
                s.intake_full_log.record(1);
                Ok(Emit::Dropped(DropReason::IntakeFull))
            }
            Err(false) => {
                s.after_shutdown.add(1);
                Err(RecordError::Shutdown)
            }
        }
    }

    async fn submit_wait(&self, occ: Occurrence) -> Result<(), RecordError> {
        if let Some(action) = self.v1.core_calls_action() {
            let v1 = kevents_core::events_v1::from_core_occurrence(occ, action);
            return self.submit_v1_wait(v1).await;
        }
        let s = &self.stats.intake;
        if self.closed.load(Ordering::Acquire) {
            s.after_shutdown.add(1);
            return Err(RecordError::Shutdown);
        }
        if let Err(e) = validate(&occ) {
            s.invalid.add(1);
            return Err(e.into());
        }
        let item = Item::Core(self.clock.now(), Box::new(occ));
        self.send_item_wait(item).await
    }

    /// Puts an item into the intake, waiting for room, and counts the outcome.
    async fn send_item_wait(&self, item: Item) -> Result<(), RecordError> {
        let sent = match &self.tx.0 {
            IntakeTx::Bounded(tx) => tx.send(item).await.is_ok(),
            IntakeTx::Unbounded(tx) => tx.send(item).is_ok(),
        };
        let s = &self.stats.intake;
        if sent {
            s.recorded.add(1);
            Ok(())
        } else {
            s.after_shutdown.add(1);
            Err(RecordError::Shutdown)
        }
    }
}

#[derive(Clone)]
enum Backend {
    Pipeline(Arc<IntakeShared>),
    Fake(Arc<FakeShared>),
}

/// The handle users record events with: cheap to clone, `Send + Sync`, callable from any
/// thread (actix or not).
///
/// **A call never blocks and never awaits.** It checks the occurrence (an invalid one
/// returns [`RecordError::Invalid`] and nothing is emitted), stamps it with the recorder's
/// clock and puts it into the intake. When the intake is full the occurrence is dropped,
/// counted and [`Emit::Dropped`] is returned. After shutdown every call returns
/// [`RecordError::Shutdown`]; nothing panics.
///
/// ```
/// use kevents_actors::{Emit, FakeRecorder, RecordError};
/// use kevents_core::{EventType, ObjectReference};
///
/// // The same handle type is backed by a pipeline in production and by a fake in tests.
/// let fake = FakeRecorder::new();
/// let recorder = fake.recorder();
/// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
/// assert_eq!(recorder.event(&pod, EventType::Normal, "Started", "started")?, Emit::Queued);
/// kevents_actors::eventf!(recorder, &pod, EventType::Warning, "BackOff", "restarting {} time(s)", 3)?;
/// assert_eq!(fake.strings(), ["Normal Started started", "Warning BackOff restarting 3 time(s)"]);
/// # Ok::<(), RecordError>(())
/// ```
#[derive(Clone)]
pub struct Recorder {
    backend: Backend,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.backend {
            Backend::Pipeline(_) => "pipeline",
            Backend::Fake(_) => "fake",
        };
        f.debug_struct("Recorder").field("backend", &kind).finish()
    }
}

impl Recorder {
    pub(crate) fn pipeline(shared: Arc<IntakeShared>) -> Self {
        Recorder {
            backend: Backend::Pipeline(shared),
        }
    }

    pub(crate) fn fake(shared: Arc<FakeShared>) -> Self {
        Recorder {
            backend: Backend::Fake(shared),
        }
    }

    /// Records a prepared occurrence (the general form of the calls below).
    pub fn emit(&self, occurrence: Occurrence) -> Result<Emit, RecordError> {
        match &self.backend {
            Backend::Pipeline(p) => p.submit(occurrence),
            Backend::Fake(f) => f.submit(occurrence),
        }
    }

    /// Records an occurrence, waiting for room in the intake instead of dropping: opt-in
    /// backpressure for producers that can wait (batch jobs, benchmarks). The future needs
    /// no particular runtime. Invalid input and shutdown are reported as by [`emit`].
    ///
    /// [`emit`]: Recorder::emit
    pub async fn emit_wait(&self, occurrence: Occurrence) -> Result<(), RecordError> {
        match &self.backend {
            Backend::Pipeline(p) => p.submit_wait(occurrence).await,
            Backend::Fake(f) => f.submit(occurrence).map(|_| ()),
        }
    }

    /// Records an `events.k8s.io/v1` occurrence (the general form of
    /// [`eventf_v1`](Recorder::eventf_v1)): client-go `tools/events`
    /// `Eventf(regarding, related, type, reason, action, note)`.
    ///
    /// Never blocks. The event is built and checked against the server's rules here (an
    /// invalid one returns [`RecordError::InvalidV1`] and nothing is queued), stamped with the
    /// recorder's clock and put into the same intake as core/v1 calls, with the same drop
    /// accounting. When the pipeline was told that events.k8s.io/v1 is not served
    /// ([`EventsV1Config::served`](crate::EventsV1Config::served)), the call goes down the
    /// core/v1 correlator path instead, as client-go's adapter does. A
    /// [`FakeRecorder`](crate::FakeRecorder) records the core/v1 form, with action and
    /// related kept in annotations.
    ///
    /// ```
    /// use kevents_actors::{Pipeline, SeriesSinkOptions};
    /// use kevents_core::events_v1::OccurrenceV1;
    /// use kevents_core::{EventSource, EventType, ObjectReference};
    /// use kevents_sim::MemoryApiServer;
    /// use std::time::Duration;
    ///
    /// # actix::System::new().block_on(async {
    /// let api = MemoryApiServer::new();
    /// let pipeline = Pipeline::builder(EventSource::new("example.com/ctl", "node-1"))
    ///     .series_sink("apiserver", api.clone(), SeriesSinkOptions::default())
    ///     .start();
    /// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
    /// let occ = OccurrenceV1::new(pod, None, EventType::Normal, "Scheduled", "Binding", "bound");
    /// assert!(pipeline.recorder().event_v1(occ).unwrap().is_queued());
    /// pipeline.shutdown(Duration::from_secs(5)).await;
    /// assert_eq!(api.list_v1()[0].action, "Binding");
    /// # });
    /// ```
    pub fn event_v1(
        &self,
        occurrence: kevents_core::events_v1::OccurrenceV1,
    ) -> Result<Emit, RecordError> {
        match &self.backend {
            Backend::Pipeline(p) => p.submit_v1(occurrence),
            Backend::Fake(f) => f.submit(kevents_core::events_v1::to_core_occurrence(
                occurrence,
                kevents_core::events_v1::CoreFallback::KeepInAnnotations,
            )),
        }
    }

    /// [`event_v1`](Recorder::event_v1), waiting for room in the intake instead of dropping.
    pub async fn event_v1_wait(
        &self,
        occurrence: kevents_core::events_v1::OccurrenceV1,
    ) -> Result<(), RecordError> {
        match &self.backend {
            Backend::Pipeline(p) => p.submit_v1_wait(occurrence).await,
            Backend::Fake(_) => self.event_v1(occurrence).map(|_| ()),
        }
    }

    /// client-go `tools/events` `Eventf(regarding, related, eventtype, reason, action,
    /// noteFmt, args...)`; use it through the [`eventf_v1!`](crate::eventf_v1) macro.
    pub fn eventf_v1<R: Reference + ?Sized>(
        &self,
        regarding: &R,
        related: Option<&dyn Reference>,
        event_type: EventType,
        reason: &str,
        action: &str,
        note: fmt::Arguments<'_>,
    ) -> Result<Emit, RecordError> {
        let regarding = self.reference(regarding)?;
        let related = match related {
            Some(r) => Some(self.reference(r)?),
            None => None,
        };
        let note = match note.as_str() {
            Some(s) => s.to_owned(),
            None => fmt::format(note),
        };
        self.event_v1(kevents_core::events_v1::OccurrenceV1::new(
            regarding, related, event_type, reason, action, note,
        ))
    }

    /// client-go `Event(object, eventtype, reason, message)`.
    pub fn event<R: Reference + ?Sized>(
        &self,
        object: &R,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Result<Emit, RecordError> {
        if let Backend::Pipeline(p) = &self.backend
            && let Some(r) = object.as_object_reference()
            && let Some(res) = p.submit_packed(r, event_type, reason, message)
        {
            return res;
        }
        let object = self.reference(object)?;
        self.emit(Occurrence::new(object, event_type, reason, message))
    }

    /// client-go `Eventf(object, eventtype, reason, messageFmt, args...)`; use it with
    /// `format_args!` or through the [`eventf!`](crate::eventf) macro.
    pub fn eventf<R: Reference + ?Sized>(
        &self,
        object: &R,
        event_type: EventType,
        reason: &str,
        message: fmt::Arguments<'_>,
    ) -> Result<Emit, RecordError> {
        let object = self.reference(object)?;
        let message = match message.as_str() {
            Some(s) => s.to_owned(),
            None => fmt::format(message),
        };
        self.emit(Occurrence::new(object, event_type, reason, message))
    }

    /// client-go `AnnotatedEventf(object, annotations, eventtype, reason, ...)`: the event
    /// object carries `annotations`.
    pub fn annotated_event<R, I, K, V>(
        &self,
        object: &R,
        annotations: I,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Result<Emit, RecordError>
    where
        R: Reference + ?Sized,
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let object = self.reference(object)?;
        let mut occ = Occurrence::new(object, event_type, reason, message);
        occ.annotations = annotations
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect::<BTreeMap<_, _>>();
        self.emit(occ)
    }

    /// Whether the pipeline behind this handle has been shut down.
    pub fn is_shut_down(&self) -> bool {
        match &self.backend {
            Backend::Pipeline(p) => p.closed.load(Ordering::Acquire),
            Backend::Fake(_) => false,
        }
    }

    fn reference<R: Reference + ?Sized>(
        &self,
        object: &R,
    ) -> Result<kevents_core::ObjectReference, RecordError> {
        object.object_reference().map_err(|e| {
            if let Backend::Pipeline(p) = &self.backend {
                p.stats.intake.invalid.add(1);
            }
            RecordError::Invalid(InvalidEvent::Reference(e))
        })
    }
}

/// `eventf!(recorder, object, type, reason, "format {}", args...)`: client-go's `Eventf`.
///
/// ```
/// use kevents_actors::{eventf, FakeRecorder};
/// use kevents_core::{EventType, ObjectReference};
/// let fake = FakeRecorder::new();
/// let r = fake.recorder();
/// let pod = ObjectReference::new("v1", "Pod", "ns", "p");
/// eventf!(r, &pod, EventType::Normal, "Pulled", "pulled image {:?} in {}s", "nginx", 2).unwrap();
/// assert_eq!(fake.events()[0].message, "pulled image \"nginx\" in 2s");
/// ```
#[macro_export]
macro_rules! eventf {
    ($recorder:expr, $object:expr, $type:expr, $reason:expr, $($fmt:tt)+) => {
        $recorder.eventf($object, $type, $reason, ::std::format_args!($($fmt)+))
    };
}

/// `eventf_v1!(recorder, regarding, related, type, reason, action, "note {}", args...)`:
/// client-go `tools/events` `Eventf`. `related` is an `Option<&dyn Reference>`.
///
/// ```
/// use kevents_actors::{eventf_v1, FakeRecorder};
/// use kevents_core::{EventType, ObjectReference, Reference};
/// let fake = FakeRecorder::new();
/// let r = fake.recorder();
/// let pod = ObjectReference::new("v1", "Pod", "ns", "p");
/// let node = ObjectReference::new("v1", "Node", "", "n1");
/// eventf_v1!(r, &pod, Some(&node as &dyn Reference), EventType::Normal, "Scheduled", "Binding",
///            "bound to {}", "n1").unwrap();
/// assert_eq!(fake.events()[0].message, "bound to n1");
/// ```
#[macro_export]
macro_rules! eventf_v1 {
    ($recorder:expr, $regarding:expr, $related:expr, $type:expr, $reason:expr, $action:expr, $($fmt:tt)+) => {
        $recorder.eventf_v1($regarding, $related, $type, $reason, $action, ::std::format_args!($($fmt)+))
    };
}

/// Close the intake; replies once everything accepted before has been handed to the
/// broadcaster.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct CloseIntake;

/// Stop the recorder actor.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct StopRecorder;

/// The Recorder actor: owns the event factory (source, naming) and the intake's receiving
/// end; builds events in batches and publishes them, waiting for the broadcaster before
/// taking more (so broadcaster backpressure reaches the intake).
pub(crate) struct RecorderActor {
    factory: Arc<EventFactory>,
    broadcaster: Addr<Broadcaster>,
    rx: Option<(IntakeRx, oneshot::Receiver<()>)>,
    close: Option<oneshot::Sender<()>>,
    drained: bool,
    waiters: Vec<oneshot::Sender<()>>,
    stats: Arc<PipelineStats>,
}

impl RecorderActor {
    pub(crate) fn new(
        factory: EventFactory,
        broadcaster: Addr<Broadcaster>,
        rx: IntakeRx,
        stats: Arc<PipelineStats>,
    ) -> Self {
        let (close_tx, close_rx) = oneshot::channel();
        RecorderActor {
            factory: Arc::new(factory),
            broadcaster,
            rx: Some((rx, close_rx)),
            close: Some(close_tx),
            drained: false,
            waiters: Vec::new(),
            stats,
        }
    }
}

struct IntakeStream {
    rx: IntakeRx,
    close: Option<oneshot::Receiver<()>>,
}

impl IntakeStream {
    async fn next_batch(mut self) -> Option<(Vec<Item>, Self)> {
        loop {
            let mut buf = Vec::with_capacity(BATCH);
            let got = match self.close.as_mut() {
                Some(close) => tokio::select! {
                    biased;
                    _ = close => None,
                    n = self.rx.recv_many(&mut buf, BATCH) => Some(n),
                },
                None => Some(self.rx.recv_many(&mut buf, BATCH).await),
            };
            match got {
                // Closing keeps what is queued readable; later sends fail.
                None => {
                    self.rx.close();
                    self.close = None;
                }
                Some(n) => return (n > 0).then_some((buf, self)),
            }
        }
    }
}

impl Actor for RecorderActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.stats.actor_started();
        if let Some((rx, close)) = self.rx.take() {
            let state = IntakeStream {
                rx,
                close: Some(close),
            };
            ctx.add_stream(stream::unfold(state, IntakeStream::next_batch));
        }
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.stats.actor_stopped();
    }
}

/// Builds the event of an accepted item (the broadcaster calls this for an event the first
/// time a watcher takes it, so an event every watcher drops is never built). `None` if the
/// factory refuses it (it cannot: the same checks passed at the call), counted as invalid.
pub(crate) fn build(
    factory: &EventFactory,
    item: Item,
    stats: &PipelineStats,
) -> Option<Arc<Recorded>> {
    let made = match item {
        Item::Packed(at, p) => factory.make(at, p.unpack()),
        Item::Core(at, occ) => factory.make(at, *occ),
        Item::EventsV1(e) => return Some(Arc::new(Recorded::EventsV1(*e))),
    };
    match made {
        Ok(e) => Some(Arc::new(Recorded::Core(e))),
        Err(_) => {
            stats.intake.invalid.add(1);
            stats.intake.made_invalid.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

impl StreamHandler<Vec<Item>> for RecorderActor {
    fn handle(&mut self, items: Vec<Item>, ctx: &mut Context<Self>) {
        self.stats
            .intake
            .received
            .fetch_add(items.len() as u64, Ordering::Relaxed);
        self.stats
            .intake
            .intake_depth
            .set(self.stats.intake.intake_depth() as f64);
        ctx.wait(
            self.broadcaster
                .send(Publish(items, Arc::clone(&self.factory)))
                .into_actor(self)
                .map(|res, _, _| {
                    if res.is_err() {
                        tracing::debug!("broadcaster gone; events lost at shutdown");
                    }
                }),
        );
    }

    fn finished(&mut self, _: &mut Context<Self>) {
        self.drained = true;
        for w in self.waiters.drain(..) {
            let _ = w.send(());
        }
    }
}

impl Handler<CloseIntake> for RecorderActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: CloseIntake, _: &mut Context<Self>) -> Self::Result {
        if let Some(close) = self.close.take() {
            let _ = close.send(());
        }
        if self.drained {
            return Box::pin(async {});
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.push(tx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

impl Handler<StopRecorder> for RecorderActor {
    type Result = ();

    fn handle(&mut self, _: StopRecorder, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
