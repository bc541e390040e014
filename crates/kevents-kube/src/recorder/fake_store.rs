//! What a [`FakeRecorder`](crate::FakeRecorder) keeps: every publish, structured.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use k8s_openapi::api::core::v1::ObjectReference as K8sReference;
use kevents_actors::FakeRecorder as CoreFake;

use kevents_core::{Clock, SystemClock};
use kube::runtime::events::{Event, EventType};

use super::error::PublishError;

/// One [`Recorder::publish`](crate::Recorder::publish) a
/// [`FakeRecorder`](crate::FakeRecorder) recorded: the call's arguments (kube's `Event` is
/// neither `Clone` nor `Debug`, so its fields) and the `events.k8s.io/v1` event the pipeline
/// would have written first.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// `Event::type_`.
    pub type_: EventType,
    /// `Event::reason`.
    pub reason: String,
    /// `Event::note`, as given (the built event's note is truncated per
    /// [`NoteLength`](crate::NoteLength)).
    pub note: Option<String>,
    /// `Event::action`.
    pub action: String,
    /// `Event::secondary`, as given.
    pub secondary: Option<K8sReference>,
    /// The reference passed to `publish`, as given.
    pub regarding: K8sReference,
    /// The event as the recorder builds it: name, namespace (`kube-system` for a
    /// cluster-scoped object), reporting controller and instance, `eventTime`, the note
    /// after its length rule, the references without `resourceVersion` (unless kept).
    pub event: kevents_core::events_v1::Event,
}

impl Published {
    /// client-go's `tools/events` `FakeRecorder` string: `"<type> <reason> <note>"`.
    pub fn client_go_string(&self) -> String {
        let type_ = match self.type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        format!(
            "{type_} {} {}",
            self.reason,
            self.note.as_deref().unwrap_or_default()
        )
    }
}

/// The fake's state, shared by its recorder handles.
pub(crate) struct FakeStore {
    factory: kevents_core::events_v1::EventFactory,
    published: Mutex<Vec<Published>>,
    shut_down: AtomicBool,
    /// What the pipeline handle ([`Recorder::handle`](crate::Recorder::handle)) records into.
    pub(super) core: CoreFake,
}

impl FakeStore {
    pub(super) fn new(factory: kevents_core::events_v1::EventFactory) -> Self {
        FakeStore {
            factory,
            published: Mutex::new(Vec::new()),
            shut_down: AtomicBool::new(false),
            core: CoreFake::new(),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Vec<Published>> {
        self.published.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Checks and builds `occ` as the recorder would, and keeps it with the call's arguments.
    pub(super) fn publish(
        &self,
        ev: &Event,
        regarding: &K8sReference,
        occ: kevents_core::events_v1::Occurrence,
    ) -> Result<(), PublishError> {
        if self.is_shut_down() {
            return Err(PublishError::Shutdown);
        }
        let event = self.factory.make(SystemClock.now(), occ)?;
        self.lock().push(Published {
            type_: ev.type_,
            reason: ev.reason.clone(),
            note: ev.note.clone(),
            action: ev.action.clone(),
            secondary: ev.secondary.clone(),
            regarding: regarding.clone(),
            event,
        });
        Ok(())
    }

    pub(super) fn shut_down(&self) {
        self.shut_down.store(true, Ordering::SeqCst);
    }

    pub(super) fn is_shut_down(&self) -> bool {
        self.shut_down.load(Ordering::SeqCst)
    }
}
