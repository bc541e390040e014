//! Recorder-side construction of an `events.k8s.io/v1` event (client-go `tools/events`
//! `Eventf`), with the server's rules checked before anything is built.

use std::collections::BTreeMap;

use super::model::Event;
use super::validate::{ClusterScopedRule, InvalidEventV1, NotePolicy, validate_create};
use crate::core_v1::{EventType, Naming};
use crate::name;
use crate::reference::{ObjectReference, Reference};
use crate::time::Time;

/// Who reports events: `reportingController` and `reportingInstance`.
///
/// ```
/// use kevents_core::events_v1::Reporter;
/// let r = Reporter::with_instance("example.com/ctl", "ctl-0");
/// assert_eq!((r.controller.as_str(), r.instance.as_str()), ("example.com/ctl", "ctl-0"));
/// let d = Reporter::new("ctl");
/// assert!(d.instance.starts_with("ctl-")); // "ctl-<hostname>", as client-go
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Reporter {
    /// `reportingController`, a qualified name.
    pub controller: String,
    /// `reportingInstance`, at most 128 bytes.
    pub instance: String,
}

impl Reporter {
    /// `controller` with instance `<controller>-<hostname>` (client-go's `NewRecorder` in
    /// `tools/events/event_broadcaster.go`; an unknown hostname gives `"<controller>-"`, as in
    /// client-go).
    pub fn new(controller: impl Into<String>) -> Self {
        let controller = controller.into();
        let instance = format!("{controller}-{}", hostname());
        Reporter {
            controller,
            instance,
        }
    }

    /// An explicit controller and instance (e.g. the pod name).
    pub fn with_instance(controller: impl Into<String>, instance: impl Into<String>) -> Self {
        Reporter {
            controller: controller.into(),
            instance: instance.into(),
        }
    }
}

/// The host name as Go's `os.Hostname` finds it on Linux (`/proc/sys/kernel/hostname`), then
/// `$HOSTNAME`; empty when neither is available.
///
/// ```
/// let h = kevents_core::events_v1::hostname();
/// assert!(!h.contains('\n'));
/// ```
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default()
}

/// Where events about cluster-scoped objects (empty `regarding.namespace`) are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClusterScopedNamespace {
    /// `kube-system`: accepted by every apiserver version, including 1.20 whose event
    /// validation (`pkg/apis/core/validation/events.go`) rejects `default` for an event with
    /// `eventTime` about a cluster-scoped object. The kevents default.
    #[default]
    KubeSystem,
    /// `default`: what client-go does; rejected by a 1.20 apiserver.
    Default,
}

impl ClusterScopedNamespace {
    /// `"kube-system"` or `"default"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ClusterScopedNamespace::KubeSystem => "kube-system",
            ClusterScopedNamespace::Default => "default",
        }
    }
}

/// One `Eventf(regarding, related, type, reason, action, note)` call.
///
/// Build it with [`OccurrenceV1::new`] or, with format arguments, the
/// [`occurrence_v1!`](crate::occurrence_v1) macro.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OccurrenceV1 {
    /// The object acted upon.
    pub regarding: ObjectReference,
    /// An optional second object.
    pub related: Option<ObjectReference>,
    /// `Normal` or `Warning` (checked).
    pub event_type: String,
    /// Why (at most 128 bytes).
    pub reason: String,
    /// What was done (at most 128 bytes).
    pub action: String,
    /// Human-readable note (at most 1024 bytes after the [`NotePolicy`]).
    pub note: String,
    /// Annotations placed on the event object.
    pub annotations: BTreeMap<String, String>,
}

impl OccurrenceV1 {
    /// An occurrence without annotations.
    ///
    /// ```
    /// use kevents_core::{events_v1::OccurrenceV1, EventType, ObjectReference};
    /// let pod = ObjectReference::new("v1", "Pod", "ns", "p");
    /// let o = OccurrenceV1::new(pod, None, EventType::Normal, "Scheduled", "Binding", "ok");
    /// assert_eq!(o.event_type, "Normal");
    /// ```
    pub fn new(
        regarding: ObjectReference,
        related: Option<ObjectReference>,
        event_type: EventType,
        reason: impl Into<String>,
        action: impl Into<String>,
        note: impl Into<String>,
    ) -> Self {
        OccurrenceV1 {
            regarding,
            related,
            event_type: event_type.as_str().to_owned(),
            reason: reason.into(),
            action: action.into(),
            note: note.into(),
            annotations: BTreeMap::new(),
        }
    }

    /// Like [`OccurrenceV1::new`] for any objects implementing [`Reference`].
    ///
    /// ```
    /// use kevents_core::{events_v1::OccurrenceV1, EventType, ObjectReference};
    /// let pod = ObjectReference::new("v1", "Pod", "ns", "p");
    /// let node = ObjectReference::new("v1", "Node", "", "n1");
    /// let o = OccurrenceV1::from_objects(&pod, Some(&node), EventType::Normal, "Scheduled", "Binding", "")
    ///     .unwrap();
    /// assert_eq!(o.related.unwrap().name, "n1");
    /// ```
    pub fn from_objects<R: Reference + ?Sized, Q: Reference + ?Sized>(
        regarding: &R,
        related: Option<&Q>,
        event_type: EventType,
        reason: impl Into<String>,
        action: impl Into<String>,
        note: impl Into<String>,
    ) -> Result<Self, crate::reference::ReferenceError> {
        let related = related.map(|r| r.object_reference()).transpose()?;
        Ok(Self::new(
            regarding.object_reference()?,
            related,
            event_type,
            reason,
            action,
            note,
        ))
    }

    /// Adds annotations.
    pub fn with_annotations(mut self, annotations: BTreeMap<String, String>) -> Self {
        self.annotations = annotations;
        self
    }
}

/// Builds an [`OccurrenceV1`] with a `format!`-style note:
/// `occurrence_v1!(regarding, related, type, reason, action, "fmt", args...)`.
///
/// ```
/// use kevents_core::{occurrence_v1, EventType, ObjectReference};
/// let pod = ObjectReference::new("v1", "Pod", "ns1", "pod1");
/// let node = ObjectReference::new("v1", "Node", "", "node1");
/// let o = occurrence_v1!(pod, Some(node), EventType::Warning, "FailedScheduling", "Scheduling",
///                    "Pod failed to schedule on {}: {}", "node1", "not enough resources");
/// assert_eq!(o.note, "Pod failed to schedule on node1: not enough resources");
/// ```
#[macro_export]
macro_rules! occurrence_v1 {
    ($regarding:expr, $related:expr, $type:expr, $reason:expr, $action:expr, $($note:tt)+) => {
        $crate::events_v1::OccurrenceV1::new(
            $regarding,
            $related,
            $type,
            $reason,
            $action,
            ::std::format!($($note)+),
        )
    };
}

/// Builds `events.k8s.io/v1` events the way client-go's `tools/events` recorder does, for one
/// reporter, and refuses (with a typed error, building nothing) anything the apiserver would
/// reject.
///
/// ```
/// use kevents_core::events_v1::{EventFactoryV1, Reporter};
/// use kevents_core::{occurrence_v1, EventType, ObjectReference, Time};
/// let f = EventFactoryV1::new(Reporter::with_instance("c1", "i1"));
/// let now = Time::parse_rfc3339("2023-01-01T12:00:00Z").unwrap();
/// let pod = ObjectReference::new("v1", "Pod", "ns1", "pod1").with_uid("12345");
/// let e = f.make(now, occurrence_v1!(pod, None, EventType::Normal, "Started", "Start", "n={}", 1)).unwrap();
/// assert_eq!(e.metadata.name, "pod1.17362d8e1c698000");
/// assert_eq!((e.metadata.namespace.as_str(), e.note.as_str()), ("ns1", "n=1"));
/// assert_eq!(e.event_time, Some(now));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventFactoryV1 {
    /// `reportingController` / `reportingInstance` of every event.
    pub reporter: Reporter,
    /// Name generation rule (UUID fallback by default, as client-go 1.33+).
    pub naming: Naming,
    /// Namespace for events about cluster-scoped objects.
    pub cluster_scoped_namespace: ClusterScopedNamespace,
    /// Which namespaces the target apiserver accepts for cluster-scoped objects.
    pub cluster_scoped_rule: ClusterScopedRule,
    /// What to do with notes over 1024 bytes.
    pub note_policy: NotePolicy,
}

impl EventFactoryV1 {
    /// A factory for `reporter` with the defaults: UUID fallback names, cluster-scoped events
    /// in `kube-system`, notes truncated with `"..."`.
    pub fn new(reporter: Reporter) -> Self {
        EventFactoryV1 {
            reporter,
            ..Default::default()
        }
    }

    /// Checks an occurrence and builds its event at instant `now` (used for both `eventTime`
    /// and the name). Nothing is built when a check fails.
    pub fn make(&self, now: Time, occ: OccurrenceV1) -> Result<Event, InvalidEventV1> {
        let OccurrenceV1 {
            regarding,
            related,
            event_type,
            reason,
            action,
            note,
            annotations,
        } = occ;
        let note = self.note_policy.apply(note)?;
        let name = match self.naming {
            Naming::UuidFallback => name::generate_event_name(&regarding.name, now),
            Naming::Legacy => name::event_name(&regarding.name, now),
        };
        let namespace = if regarding.namespace.is_empty() {
            self.cluster_scoped_namespace.as_str().to_owned()
        } else {
            regarding.namespace.clone()
        };
        let mut e = Event::default();
        e.metadata.name = name;
        e.metadata.namespace = namespace;
        e.metadata.annotations = annotations;
        e.event_time = Some(now);
        e.reporting_controller = self.reporter.controller.clone();
        e.reporting_instance = self.reporter.instance.clone();
        e.action = action;
        e.reason = reason;
        e.regarding = regarding;
        e.related = related;
        e.note = note;
        e.type_ = event_type;
        validate_create(&e, self.cluster_scoped_rule)?;
        Ok(e)
    }
}
