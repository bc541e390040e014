//! A structured fake recorder for users' unit tests.

use std::sync::{Arc, MutexGuard};

use kevents_core::{EventFactory, EventSource, SharedClock, SystemClock};

use super::fake_backend::{FakeEvent, FakeStore};
use super::handle::{Backend, Recorder};

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
    store: Arc<FakeStore>,
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
            store: Arc::new(FakeStore::new(factory, clock)),
        }
    }

    /// A recorder handle writing into this fake.
    pub fn recorder(&self) -> Recorder {
        Recorder::from_backend(Backend::Fake(Arc::clone(&self.store)))
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

    fn lock(&self) -> MutexGuard<'_, Vec<FakeEvent>> {
        self.store.lock()
    }
}
