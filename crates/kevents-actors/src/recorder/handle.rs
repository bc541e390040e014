//! The [`Recorder`] handle users record events with, and the `eventf!` / `eventf_events_v1!`
//! macros.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use kevents_core::__private::validate_namespace;
use kevents_core::{EventType, InvalidEvent, ObjectReference, Occurrence, Reference};

use super::fake_backend::FakeStore;
use super::format::with_formatted;
use super::intake::Intake;
use super::outcome::{Emit, RecordError};

/// What a handle records into.
#[derive(Clone)]
pub(crate) enum Backend {
    /// A running pipeline's intake.
    Intake(Arc<Intake>),
    /// A [`FakeRecorder`](crate::FakeRecorder)'s store.
    Fake(Arc<FakeStore>),
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
    pub(super) backend: Backend,
}

impl Recorder {
    /// The pipeline's intake (`None` for a fake).
    pub(crate) fn intake(&self) -> Option<&Arc<Intake>> {
        match &self.backend {
            Backend::Intake(i) => Some(i),
            Backend::Fake(_) => None,
        }
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.backend {
            Backend::Intake(_) => "pipeline",
            Backend::Fake(_) => "fake",
        };
        f.debug_struct("Recorder").field("backend", &kind).finish()
    }
}

impl Recorder {
    pub(crate) fn from_backend(backend: Backend) -> Self {
        Recorder { backend }
    }

    /// Records a prepared occurrence (the general form of the calls below).
    pub fn emit(&self, occurrence: Occurrence) -> Result<Emit, RecordError> {
        match &self.backend {
            Backend::Intake(p) => p.submit(occurrence),
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
            Backend::Intake(p) => p.submit_wait(occurrence).await,
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
        if let Backend::Intake(p) = &self.backend
            && let Some(r) = object.reference_ref()
            && let Some(res) = p.submit_packed(r, event_type, reason, message)
        {
            return res;
        }
        let object = self.reference(object)?;
        self.emit(Occurrence::new(object, event_type, reason, message))
    }

    /// client-go `Eventf(object, eventtype, reason, messageFmt, args...)`; use it with
    /// `format_args!` or through the [`eventf!`](crate::eventf) macro. The same as
    /// [`event`](Recorder::event) with the formatted message, which is formatted into a
    /// buffer the thread reuses (no allocation of its own).
    pub fn eventf<R: Reference + ?Sized>(
        &self,
        object: &R,
        event_type: EventType,
        reason: &str,
        message: fmt::Arguments<'_>,
    ) -> Result<Emit, RecordError> {
        with_formatted(message, |message| {
            self.event(object, event_type, reason, message)
        })
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

    /// A recorder bound to `object`: the object is read and checked once, and each of its
    /// calls copies only its reason and message (the object's strings are shared). What a
    /// controller holds while it reconciles one object; the events are exactly those of
    /// [`event`](Recorder::event) on the same object.
    ///
    /// ```
    /// use kevents_actors::FakeRecorder;
    /// use kevents_core::{EventType, ObjectReference};
    /// let fake = FakeRecorder::new();
    /// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
    /// let on_pod = fake.recorder().for_object(&pod)?;
    /// on_pod.event(EventType::Normal, "Pulled", "pulled nginx")?;
    /// on_pod.event(EventType::Warning, "BackOff", "restarting")?;
    /// assert_eq!(fake.strings(), ["Normal Pulled pulled nginx", "Warning BackOff restarting"]);
    /// # Ok::<(), kevents_actors::RecordError>(())
    /// ```
    pub fn for_object<R: Reference + ?Sized>(
        &self,
        object: &R,
    ) -> Result<ObjectRecorder, RecordError> {
        let object = self.reference(object)?;
        Ok(ObjectRecorder {
            recorder: self.clone(),
            namespace_valid: validate_namespace(&object.namespace).is_ok(),
            object: Arc::new(object),
        })
    }

    /// Whether the pipeline behind this handle has been shut down.
    pub fn is_shut_down(&self) -> bool {
        match &self.backend {
            Backend::Intake(p) => p.is_closed(),
            Backend::Fake(_) => false,
        }
    }

    pub(super) fn reference<R: Reference + ?Sized>(
        &self,
        object: &R,
    ) -> Result<ObjectReference, RecordError> {
        object.object_reference().map_err(|e| {
            let err = RecordError::Invalid(InvalidEvent::Reference(e));
            match &self.backend {
                Backend::Intake(p) => p.invalid(err),
                Backend::Fake(_) => err,
            }
        })
    }
}

/// A [`Recorder`] bound to one object ([`Recorder::for_object`]): cheap to clone, `Send +
/// Sync`, never blocks, like the recorder it came from.
///
/// A call on it costs less than [`Recorder::event`] because the object's strings were
/// copied once, when it was bound (`kevents bench emit`: `bound_emit_ns` against
/// `core_emit_ns`, docs/benchmarks.md).
#[derive(Clone, Debug)]
pub struct ObjectRecorder {
    recorder: Recorder,
    /// Shared by every call's intake item instead of copied into it.
    object: Arc<ObjectReference>,
    /// The object's namespace passed the check every call makes, so calls skip it; an
    /// invalid one is refused at every call, with the same error as `Recorder::event`.
    namespace_valid: bool,
}

impl ObjectRecorder {
    /// The object this recorder is bound to.
    pub fn object(&self) -> &ObjectReference {
        &self.object
    }

    /// The recorder this one was bound from.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// [`Recorder::event`] on the bound object.
    pub fn event(
        &self,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) -> Result<Emit, RecordError> {
        if let Backend::Intake(p) = &self.recorder.backend
            && let Some(res) = p.submit_bound(
                &self.object,
                self.namespace_valid,
                event_type,
                reason,
                message,
            )
        {
            return res;
        }
        self.recorder
            .event(&*self.object, event_type, reason, message)
    }

    /// [`Recorder::eventf`] on the bound object.
    ///
    /// ```
    /// use kevents_actors::FakeRecorder;
    /// use kevents_core::{EventType, ObjectReference};
    /// let fake = FakeRecorder::new();
    /// let on_pod = fake.recorder().for_object(&ObjectReference::new("v1", "Pod", "ns", "p"))?;
    /// on_pod.eventf(EventType::Normal, "Scaled", format_args!("{} replicas", 3))?;
    /// assert_eq!(fake.events()[0].message, "3 replicas");
    /// # Ok::<(), kevents_actors::RecordError>(())
    /// ```
    pub fn eventf(
        &self,
        event_type: EventType,
        reason: &str,
        message: fmt::Arguments<'_>,
    ) -> Result<Emit, RecordError> {
        with_formatted(message, |message| self.event(event_type, reason, message))
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

/// `eventf_events_v1!(recorder, regarding, related, type, reason, action, "note {}", args...)`:
/// client-go `tools/events` `Eventf`. `related` is an `Option<&dyn Reference>`.
///
/// ```
/// use kevents_actors::{eventf_events_v1, FakeRecorder};
/// use kevents_core::{EventType, ObjectReference, Reference};
/// let fake = FakeRecorder::new();
/// let r = fake.recorder();
/// let pod = ObjectReference::new("v1", "Pod", "ns", "p");
/// let node = ObjectReference::new("v1", "Node", "", "n1");
/// eventf_events_v1!(r, &pod, Some(&node as &dyn Reference), EventType::Normal, "Scheduled", "Binding",
///            "bound to {}", "n1").unwrap();
/// assert_eq!(fake.events()[0].message, "bound to n1");
/// ```
#[macro_export]
macro_rules! eventf_events_v1 {
    ($recorder:expr, $regarding:expr, $related:expr, $type:expr, $reason:expr, $action:expr, $($fmt:tt)+) => {
        $recorder.events_v1().eventf($regarding, $related, $type, $reason, $action, ::std::format_args!($($fmt)+))
    };
}
