//! [`EventsV1Recorder`]: the events.k8s.io/v1 calls of a [`Recorder`](crate::Recorder),
//! reached through [`Recorder::events_v1`](crate::Recorder::events_v1) and named as its
//! core/v1 calls.

use std::fmt;

use kevents_core::events_v1::{CoreFallback, Occurrence, to_core_occurrence};
use kevents_core::{EventType, Reference};

use super::format::with_formatted;
use super::handle::{Backend, Recorder as CoreRecorder};
use super::outcome::{Emit, RecordError};

/// The events.k8s.io/v1 calls of a recorder (client-go `tools/events`'s `EventRecorder`),
/// borrowed from it by [`Recorder::events_v1`](crate::Recorder::events_v1). Each call is the
/// twin of the core/v1 call of the same name on [`crate::Recorder`], with the event's
/// `related` object and `action`.
///
/// Never blocks. The event is built and checked against the server's rules at the call (an
/// invalid one returns [`RecordError::InvalidEventsV1`] and nothing is queued), stamped with
/// the recorder's clock and put into the same intake as core/v1 calls, with the same drop
/// accounting. When the pipeline was told that events.k8s.io/v1 is not served
/// ([`EventsV1Config::served`](crate::EventsV1Config::served)), the call goes down the
/// core/v1 correlator path instead, as client-go's adapter does. A
/// [`FakeRecorder`](crate::FakeRecorder) records the core/v1 form, with action and related
/// kept in annotations.
///
/// ```
/// use kevents_actors::{Pipeline, events_v1::SinkOptions};
/// use kevents_core::events_v1::Occurrence;
/// use kevents_core::{EventSource, EventType, ObjectReference};
/// use kevents_sim::MemoryApiServer;
/// use std::time::Duration;
///
/// # actix::System::new().block_on(async {
/// let api = MemoryApiServer::new();
/// let pipeline = Pipeline::builder(EventSource::new("example.com/ctl", "node-1"))
///     .sink_events_v1("apiserver", api.clone(), SinkOptions::default())
///     .start();
/// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
/// let occ = Occurrence::new(pod, None, EventType::Normal, "Scheduled", "Binding", "bound");
/// assert!(pipeline.recorder().events_v1().emit(occ).unwrap().is_queued());
/// pipeline.shutdown(Duration::from_secs(5)).await;
/// assert_eq!(api.list_events_v1()[0].action, "Binding");
/// # });
/// ```
#[derive(Clone, Copy)]
pub struct EventsV1Recorder<'a> {
    recorder: &'a CoreRecorder,
}

impl fmt::Debug for EventsV1Recorder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventsV1Recorder").finish_non_exhaustive()
    }
}

impl CoreRecorder {
    /// The events.k8s.io/v1 calls (client-go `tools/events`): the same `emit`, `emit_wait`,
    /// `event` and `eventf` as this handle's core/v1 ones, with `related` and `action`.
    ///
    /// ```
    /// use kevents_actors::FakeRecorder;
    /// use kevents_core::{EventType, ObjectReference};
    /// let fake = FakeRecorder::new();
    /// let pod = ObjectReference::new("v1", "Pod", "ns", "p");
    /// let recorder = fake.recorder();
    /// recorder.events_v1().event(&pod, None, EventType::Normal, "Scheduled", "Binding", "bound")?;
    /// assert_eq!(fake.events()[0].message, "bound");
    /// # Ok::<(), kevents_actors::RecordError>(())
    /// ```
    pub fn events_v1(&self) -> EventsV1Recorder<'_> {
        EventsV1Recorder::new(self)
    }
}

impl<'a> EventsV1Recorder<'a> {
    fn new(recorder: &'a CoreRecorder) -> Self {
        EventsV1Recorder { recorder }
    }

    /// Records an events.k8s.io/v1 occurrence: client-go `tools/events`
    /// `Eventf(regarding, related, type, reason, action, note)` in its general form (the twin
    /// of [`crate::Recorder::emit`]).
    pub fn emit(&self, occurrence: Occurrence) -> Result<Emit, RecordError> {
        match &self.recorder.backend {
            Backend::Intake(p) => p.submit_v1(occurrence),
            Backend::Fake(f) => f.submit(to_core_occurrence(
                occurrence,
                CoreFallback::KeepInAnnotations,
            )),
        }
    }

    /// [`emit`](Self::emit), waiting for room in the intake instead of dropping (the twin of
    /// [`crate::Recorder::emit_wait`]).
    pub async fn emit_wait(&self, occurrence: Occurrence) -> Result<(), RecordError> {
        match &self.recorder.backend {
            Backend::Intake(p) => p.submit_v1_wait(occurrence).await,
            Backend::Fake(_) => self.emit(occurrence).map(|_| ()),
        }
    }

    /// client-go `tools/events` `Eventf` with a plain note (the twin of
    /// [`crate::Recorder::event`]). On an `ObjectReference` without `related`, the event is
    /// built off the caller's thread.
    ///
    /// ```
    /// use kevents_actors::FakeRecorder;
    /// use kevents_core::{EventType, ObjectReference};
    /// let fake = FakeRecorder::new();
    /// let pod = ObjectReference::new("v1", "Pod", "ns", "p");
    /// let recorder = fake.recorder();
    /// recorder.events_v1().event(&pod, None, EventType::Normal, "Scheduled", "Binding", "bound")?;
    /// assert_eq!(fake.events()[0].message, "bound");
    /// # Ok::<(), kevents_actors::RecordError>(())
    /// ```
    pub fn event<R: Reference + ?Sized>(
        &self,
        regarding: &R,
        related: Option<&dyn Reference>,
        event_type: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) -> Result<Emit, RecordError> {
        if let Backend::Intake(p) = &self.recorder.backend
            && related.is_none()
            && let Some(r) = regarding.reference_ref()
            && let Some(res) = p.submit_v1_packed(r, event_type, reason, action, note)
        {
            return res;
        }
        let regarding = self.recorder.reference(regarding)?;
        let related = match related {
            Some(r) => Some(self.recorder.reference(r)?),
            None => None,
        };
        self.emit(Occurrence::new(
            regarding, related, event_type, reason, action, note,
        ))
    }

    /// client-go `tools/events` `Eventf(regarding, related, eventtype, reason, action,
    /// noteFmt, args...)` (the twin of [`crate::Recorder::eventf`]); use it through the
    /// [`eventf_events_v1!`](crate::eventf_events_v1) macro.
    pub fn eventf<R: Reference + ?Sized>(
        &self,
        regarding: &R,
        related: Option<&dyn Reference>,
        event_type: EventType,
        reason: &str,
        action: &str,
        note: fmt::Arguments<'_>,
    ) -> Result<Emit, RecordError> {
        with_formatted(note, |note| {
            self.event(regarding, related, event_type, reason, action, note)
        })
    }
}
