//! Both Event APIs from one recorder: route an `events.k8s.io/v1` style call to the new API
//! when the server serves it, else down to a core/v1 occurrence for the correlator path, as
//! client-go's `NewEventBroadcasterAdapter` (`tools/events/event_broadcaster.go`) and
//! `record.EventRecorderAdapter` do; and record a core/v1 style call into the new API.

use super::model::{API_VERSION, Event};

use crate::core_v1::Occurrence;
use crate::reference::ObjectReference;
use crate::time::Time;

/// Annotation carrying the dropped `action` on the core/v1 fallback path (only with
/// [`CoreFallback::KeepInAnnotations`]).
pub const ACTION_ANNOTATION: &str = "events.kevents.io/action";
/// Annotation carrying the dropped `related` reference (`<apiVersion>/<kind>/<namespace>/<name>`)
/// on the core/v1 fallback path (only with [`CoreFallback::KeepInAnnotations`]).
pub const RELATED_ANNOTATION: &str = "events.kevents.io/related";

/// Whether discovery lists `events.k8s.io/v1` among the served group versions (what
/// client-go's adapter probes).
///
/// ```
/// use kevents_core::events_v1::events_v1_served;
/// assert!(events_v1_served(["v1", "apps/v1", "events.k8s.io/v1"]));
/// assert!(!events_v1_served(["v1", "events.k8s.io/v1beta1"]));
/// ```
pub fn events_v1_served<'a>(group_versions: impl IntoIterator<Item = &'a str>) -> bool {
    group_versions.into_iter().any(|gv| gv == API_VERSION)
}

/// What happens to `action` and `related`, which core/v1 events of the recorder do not carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CoreFallback {
    /// Silently dropped, as client-go's `record.EventRecorderAdapter` does. The default.
    #[default]
    Drop,
    /// Kept in the annotations [`ACTION_ANNOTATION`] and [`RELATED_ANNOTATION`].
    /// Annotations are not part of the core correlator keys, so this changes no counting.
    KeepInAnnotations,
}

/// Where one call goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// events.k8s.io/v1 is served: the built, validated event, for the series cache.
    EventsV1(Box<Event>),
    /// Not served: a core/v1 occurrence, for `EventFactory` and the correlator path.
    CoreV1(Box<Occurrence>),
}

/// Routes calls between the two APIs.
///
/// ```
/// use kevents_core::events_v1::{EventFactory, ApiBridge, Reporter, Route};
/// use kevents_core::{occurrence_events_v1, EventType, ObjectReference, Time};
/// let factory = EventFactory::new(Reporter::with_instance("c", "c-1"));
/// let pod = ObjectReference::new("v1", "Pod", "ns", "p");
/// let node = ObjectReference::new("v1", "Node", "", "n1");
/// let call = occurrence_events_v1!(pod, Some(node), EventType::Normal, "Scheduled", "Binding", "on {}", "n1");
///
/// let old_server = ApiBridge { events_v1_served: false, ..Default::default() };
/// let Route::CoreV1(occ) = old_server.route(&factory, Time::UNIX_EPOCH, call.clone()).unwrap() else {
///     panic!("expected core/v1");
/// };
/// assert_eq!((occ.reason.as_str(), occ.message.as_str()), ("Scheduled", "on n1"));
///
/// let new_server = ApiBridge { events_v1_served: true, ..Default::default() };
/// assert!(matches!(new_server.route(&factory, Time::UNIX_EPOCH, call), Ok(Route::EventsV1(_))));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ApiBridge {
    /// Whether the server serves events.k8s.io/v1 (see [`events_v1_served`]).
    pub events_v1_served: bool,
    /// What happens to `action` and `related` on the core/v1 path.
    pub fallback: CoreFallback,
}

impl ApiBridge {
    /// Routes one `Eventf(regarding, related, type, reason, action, note)` call made at `now`.
    /// On the events.k8s.io path the event is built and validated by `factory`; on the core
    /// path the occurrence is converted by [`to_core_occurrence`] (the core `EventFactory`
    /// validates it).
    pub fn route(
        &self,
        factory: &crate::events_v1::EventFactory,
        now: Time,
        occ: crate::events_v1::Occurrence,
    ) -> Result<Route, crate::events_v1::InvalidEvent> {
        if self.events_v1_served {
            factory.make(now, occ).map(|e| Route::EventsV1(Box::new(e)))
        } else {
            Ok(Route::CoreV1(Box::new(to_core_occurrence(
                occ,
                self.fallback,
            ))))
        }
    }
}

/// client-go's `record.EventRecorderAdapter`: `regarding` becomes the involved object, `note`
/// the message; `action` and `related` are dropped or kept in annotations.
///
/// ```
/// use kevents_core::events_v1::{Occurrence, to_core_occurrence, CoreFallback, ACTION_ANNOTATION};
/// use kevents_core::{EventType, ObjectReference};
/// let o = Occurrence::new(ObjectReference::new("v1", "Pod", "ns", "p"), None,
///                           EventType::Warning, "Failed", "Pull", "boom");
/// let core = to_core_occurrence(o.clone(), CoreFallback::Drop);
/// assert!(core.annotations.is_empty());
/// let kept = to_core_occurrence(o, CoreFallback::KeepInAnnotations);
/// assert_eq!(kept.annotations[ACTION_ANNOTATION], "Pull");
/// ```
pub fn to_core_occurrence(occ: crate::events_v1::Occurrence, fallback: CoreFallback) -> Occurrence {
    let crate::events_v1::Occurrence {
        regarding,
        related,
        event_type,
        reason,
        action,
        note,
        mut annotations,
    } = occ;
    if fallback == CoreFallback::KeepInAnnotations {
        if !action.is_empty() {
            annotations.insert(ACTION_ANNOTATION.to_owned(), action);
        }
        if let Some(r) = related {
            annotations.insert(RELATED_ANNOTATION.to_owned(), reference_string(&r));
        }
    }
    Occurrence {
        object: regarding,
        event_type,
        reason,
        message: note,
        annotations,
    }
}

fn reference_string(r: &ObjectReference) -> String {
    format!("{}/{}/{}/{}", r.api_version, r.kind, r.namespace, r.name)
}

/// A core/v1 style call (`Event(object, type, reason, message)`) recorded into the new API:
/// the object becomes `regarding`, the message the `note`, no `related`, and `action` is
/// `action` when given, else the reason (the server requires a non-empty action, and the
/// reason is the closest machine-readable word the call has).
///
/// ```
/// use kevents_core::events_v1::from_core_occurrence;
/// use kevents_core::{EventType, ObjectReference, Occurrence};
/// let o = Occurrence::new(ObjectReference::new("v1", "Pod", "ns", "p"), EventType::Normal, "Pulled", "ok");
/// let v1 = from_core_occurrence(o.clone(), None);
/// assert_eq!((v1.action.as_str(), v1.note.as_str()), ("Pulled", "ok"));
/// assert_eq!(from_core_occurrence(o, Some("Pull".into())).action, "Pull");
/// ```
pub fn from_core_occurrence(
    occ: Occurrence,
    action: Option<String>,
) -> crate::events_v1::Occurrence {
    let Occurrence {
        object,
        event_type,
        reason,
        message,
        annotations,
    } = occ;
    crate::events_v1::Occurrence {
        regarding: object,
        related: None,
        event_type,
        action: action.unwrap_or_else(|| reason.clone()),
        reason,
        note: message,
        annotations,
    }
}
