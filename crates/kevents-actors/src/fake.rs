//! A structured fake recorder for users' unit tests.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kevents_core::{
    Event, EventFactory, EventSource, ObjectReference, Occurrence, SharedClock, SystemClock,
};

use crate::recorder::{Emit, RecordError, Recorder};

/// One event the fake recorded, with every field a test may want to assert on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeEvent {
    /// `Normal` or `Warning`.
    pub event_type: String,
    /// The reason.
    pub reason: String,
    /// The (formatted) message.
    pub message: String,
    /// The involved object.
    pub object: ObjectReference,
    /// The annotations.
    pub annotations: BTreeMap<String, String>,
    /// The full event as the pipeline would have built it.
    pub event: Event,
}

impl FakeEvent {
    /// client-go's `FakeRecorder` string: `"<type> <reason> <message>"` (reference A28).
    ///
    /// ```
    /// use kevents_actors::FakeRecorder;
    /// use kevents_core::{EventType, ObjectReference};
    /// let fake = FakeRecorder::new();
    /// let pod = ObjectReference::new("v1", "Pod", "ns", "p");
    /// fake.recorder().event(&pod, EventType::Warning, "Failed", "boom").unwrap();
    /// assert_eq!(fake.events()[0].client_go_string(), "Warning Failed boom");
    /// ```
    pub fn client_go_string(&self) -> String {
        format!("{} {} {}", self.event_type, self.reason, self.message)
    }

    /// client-go's string with `IncludeObject`:
    /// `"<type> <reason> <message> involvedObject{kind=<Kind>,apiVersion=<apiVersion>}"`.
    pub fn client_go_string_with_object(&self) -> String {
        format!(
            "{} involvedObject{{kind={},apiVersion={}}}",
            self.client_go_string(),
            self.object.kind,
            self.object.api_version
        )
    }
}

pub(crate) struct FakeShared {
    factory: EventFactory,
    clock: SharedClock,
    events: Mutex<Vec<FakeEvent>>,
}

impl FakeShared {
    pub(crate) fn submit(&self, occ: Occurrence) -> Result<Emit, RecordError> {
        let event = self.factory.make(self.clock.now(), occ.clone())?;
        let Occurrence {
            object,
            event_type,
            reason,
            message,
            annotations,
        } = occ;
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(FakeEvent {
                event_type,
                reason,
                message,
                object,
                annotations,
                event,
            });
        Ok(Emit::Queued)
    }
}

/// A recorder for unit tests: hand [`FakeRecorder::recorder`] to the code under test (it is
/// the same [`Recorder`] type the pipeline gives out), then assert on the structured events.
/// Unlike client-go's fake it never blocks and keeps every event; invalid input is refused
/// exactly as by the real recorder.
///
/// ```
/// use kevents_actors::FakeRecorder;
/// use kevents_core::{EventType, ObjectReference};
///
/// fn reconcile(recorder: &kevents_actors::Recorder) {
///     let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
///     recorder
///         .annotated_event(&pod, [("team", "a")], EventType::Warning, "BackOff", "restarting")
///         .unwrap();
/// }
///
/// let fake = FakeRecorder::new();
/// reconcile(&fake.recorder());
/// let events = fake.events();
/// assert_eq!(events.len(), 1);
/// assert_eq!(events[0].reason, "BackOff");
/// assert_eq!(events[0].object.name, "web-1");
/// assert_eq!(events[0].annotations["team"], "a");
/// assert_eq!(events[0].event.metadata.namespace, "default");
/// assert_eq!(fake.strings(), ["Warning BackOff restarting"]);
/// ```
#[derive(Clone)]
pub struct FakeRecorder {
    shared: Arc<FakeShared>,
}

impl std::fmt::Debug for FakeRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeRecorder")
            .field("events", &self.len())
            .finish()
    }
}

impl Default for FakeRecorder {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeRecorder {
    /// A fake with source component `fake` and the system clock.
    pub fn new() -> Self {
        Self::with_factory(
            EventFactory::new(EventSource::new("fake", "")),
            Arc::new(SystemClock),
        )
    }

    /// A fake building events with `factory` at the instants of `clock`.
    pub fn with_factory(factory: EventFactory, clock: SharedClock) -> Self {
        FakeRecorder {
            shared: Arc::new(FakeShared {
                factory,
                clock,
                events: Mutex::new(Vec::new()),
            }),
        }
    }

    /// A recorder handle writing into this fake.
    pub fn recorder(&self) -> Recorder {
        Recorder::fake(Arc::clone(&self.shared))
    }

    /// Every event recorded so far, in call order.
    pub fn events(&self) -> Vec<FakeEvent> {
        self.lock().clone()
    }

    /// Removes and returns every event recorded so far.
    pub fn take(&self) -> Vec<FakeEvent> {
        std::mem::take(&mut *self.lock())
    }

    /// client-go's strings (`"<type> <reason> <message>"`) of every event so far.
    pub fn strings(&self) -> Vec<String> {
        self.lock()
            .iter()
            .map(FakeEvent::client_go_string)
            .collect()
    }

    /// Number of events recorded.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<FakeEvent>> {
        self.shared.events.lock().unwrap_or_else(|p| p.into_inner())
    }
}
