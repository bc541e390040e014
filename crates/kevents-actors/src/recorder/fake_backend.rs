//! The fake backend behind [`FakeRecorder`](crate::FakeRecorder): every call becomes a
//! [`FakeEvent`] kept in memory.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use kevents_core::{Event, EventFactory, ObjectReference, Occurrence, SharedClock};

use super::outcome::{Emit, RecordError};

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
    /// client-go's `FakeRecorder` string: `"<type> <reason> <message>"` (`tools/record/fake.go`).
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

/// The fake backend of a [`Recorder`](crate::Recorder): builds each event as the pipeline
/// would and keeps it.
pub(crate) struct FakeStore {
    factory: EventFactory,
    clock: SharedClock,
    events: Mutex<Vec<FakeEvent>>,
}

impl FakeStore {
    pub(crate) fn new(factory: EventFactory, clock: SharedClock) -> Self {
        FakeStore {
            factory,
            clock,
            events: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<FakeEvent>> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn submit(&self, occ: Occurrence) -> Result<Emit, RecordError> {
        let event = self.factory.make(self.clock.now(), occ.clone())?;
        let Occurrence {
            object,
            event_type,
            reason,
            message,
            annotations,
        } = occ;
        self.lock().push(FakeEvent {
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
