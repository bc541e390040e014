//! kube's event types as kevents': reporter, references, the occurrence of a publish and the
//! factory that checks and builds it. Shared by the pipeline-backed recorder and its fake, so
//! the fake refuses exactly what the real recorder refuses.

use k8s_openapi::api::core::v1::ObjectReference as K8sReference;
use kevents_core::events_v1::{NotePolicy, Reporter as V1Reporter};
use kevents_core::{EventType, ObjectReference};
use kube::runtime::events::{Event, EventType as KubeEventType, Reporter};

use super::options::{NoteLength, RecorderOptions};

/// kube's reporter as kevents': the instance defaults to the controller, as kube's recorder
/// fills `reportingInstance`.
pub(super) fn reporter(r: &Reporter) -> V1Reporter {
    let instance = r.instance.clone().unwrap_or_else(|| r.controller.clone());
    V1Reporter::with_instance(r.controller.clone(), instance)
}

/// The factory of a recorder for `reporter` with `options`' note length rule.
pub(super) fn factory(
    reporter: V1Reporter,
    options: &RecorderOptions,
) -> kevents_core::events_v1::EventFactory {
    let mut factory = kevents_core::events_v1::EventFactory::new(reporter);
    factory.note_policy = match options.note_length {
        NoteLength::Truncate => NotePolicy::default(),
        NoteLength::Reject => NotePolicy::Reject,
    };
    factory
}

fn reference(r: &K8sReference, keep_resource_version: bool) -> ObjectReference {
    let mut r = ObjectReference::from(r.clone());
    if !keep_resource_version {
        r.resource_version.clear();
    }
    r
}

/// The occurrence a `publish(ev, regarding)` records.
pub(super) fn occurrence(
    ev: &Event,
    regarding: &K8sReference,
    keep_resource_version: bool,
) -> kevents_core::events_v1::Occurrence {
    let keep = keep_resource_version;
    kevents_core::events_v1::Occurrence::new(
        reference(regarding, keep),
        ev.secondary.as_ref().map(|r| reference(r, keep)),
        event_type(ev.type_),
        ev.reason.clone(),
        ev.action.clone(),
        ev.note.clone().unwrap_or_default(),
    )
}

pub(super) fn event_type(t: KubeEventType) -> EventType {
    match t {
        KubeEventType::Normal => EventType::Normal,
        KubeEventType::Warning => EventType::Warning,
    }
}
