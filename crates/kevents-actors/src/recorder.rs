//! The user-facing [`Recorder`] handle, the bounded intake behind it, and the Recorder actor
//! that turns accepted occurrences into events and hands them to the broadcaster.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix::prelude::*;
use futures_util::stream;
use kevents_core::make::validate;
use kevents_core::{
    EventFactory, EventType, InvalidEvent, Occurrence, Reference, SharedClock, Time,
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
    /// The pipeline has been shut down (or its actors are gone).
    #[error("the event pipeline is shut down")]
    Shutdown,
}

/// One accepted occurrence with the instant it was recorded.
pub(crate) enum Item {
    Core(Time, Occurrence),
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
}

impl IntakeShared {
    pub(crate) fn new(tx: IntakeTxShared, clock: SharedClock, stats: Arc<PipelineStats>) -> Self {
        IntakeShared {
            tx,
            closed: AtomicBool::new(false),
            clock,
            stats,
        }
    }

    fn submit(&self, occ: Occurrence) -> Result<Emit, RecordError> {
        let s = &self.stats.intake;
        if self.closed.load(Ordering::Acquire) {
            s.after_shutdown.add(1);
            return Err(RecordError::Shutdown);
        }
        if let Err(e) = validate(&occ) {
            s.invalid.add(1);
            return Err(e.into());
        }
        let item = Item::Core(self.clock.now(), occ);
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
        let s = &self.stats.intake;
        if self.closed.load(Ordering::Acquire) {
            s.after_shutdown.add(1);
            return Err(RecordError::Shutdown);
        }
        if let Err(e) = validate(&occ) {
            s.invalid.add(1);
            return Err(e.into());
        }
        let item = Item::Core(self.clock.now(), occ);
        let sent = match &self.tx.0 {
            IntakeTx::Bounded(tx) => tx.send(item).await.is_ok(),
            IntakeTx::Unbounded(tx) => tx.send(item).is_ok(),
        };
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

    /// client-go `Event(object, eventtype, reason, message)`.
    pub fn event<R: Reference + ?Sized>(
        &self,
        object: &R,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Result<Emit, RecordError> {
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
    factory: EventFactory,
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
            factory,
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
        let mut records = Vec::with_capacity(items.len());
        for item in items {
            match item {
                Item::Core(at, occ) => match self.factory.make(at, occ) {
                    Ok(e) => records.push(Arc::new(Recorded::Core(e))),
                    // Checked at the call already; counted if the factory disagrees.
                    Err(_) => {
                        self.stats.intake.invalid.add(1);
                        self.stats
                            .intake
                            .made_invalid
                            .fetch_add(1, Ordering::Relaxed);
                    }
                },
            }
        }
        ctx.wait(
            self.broadcaster
                .send(Publish(records))
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
