//! Recorder-side construction of an `events.k8s.io/v1` event (client-go `tools/events`
//! `Eventf`), with the server's rules checked before anything is built.

use std::collections::BTreeMap;

use super::model::Event;
use super::validate::{
    ClusterScopedRule, NotePolicy, validate_annotations, validate_create, validate_field_parts,
};
use crate::core_v1::{EventType, Naming};
use crate::name;
use crate::reference::{ObjectReference, Reference, ReferenceRef};
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
/// Build it with [`events_v1::Occurrence::new`](crate::events_v1::Occurrence::new) or, with format arguments, the
/// [`occurrence_events_v1!`](crate::occurrence_events_v1) macro.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Occurrence {
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

impl Occurrence {
    /// An occurrence without annotations.
    ///
    /// ```
    /// use kevents_core::{EventType, ObjectReference};
    /// use kevents_core::events_v1::Occurrence;
    /// let pod = ObjectReference::new("v1", "Pod", "ns", "p");
    /// let o = Occurrence::new(pod, None, EventType::Normal, "Scheduled", "Binding", "ok");
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
        Occurrence {
            regarding,
            related,
            event_type: event_type.as_str().to_owned(),
            reason: reason.into(),
            action: action.into(),
            note: note.into(),
            annotations: BTreeMap::new(),
        }
    }

    /// Like [`events_v1::Occurrence::new`](crate::events_v1::Occurrence::new) for any objects implementing [`Reference`].
    ///
    /// ```
    /// use kevents_core::{EventType, ObjectReference};
    /// use kevents_core::events_v1::Occurrence;
    /// let pod = ObjectReference::new("v1", "Pod", "ns", "p");
    /// let node = ObjectReference::new("v1", "Node", "", "n1");
    /// let o = Occurrence::from_objects(&pod, Some(&node), EventType::Normal, "Scheduled", "Binding", "")
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

/// Builds an [`events_v1::Occurrence`](crate::events_v1::Occurrence) with a `format!`-style note:
/// `occurrence_events_v1!(regarding, related, type, reason, action, "fmt", args...)`.
///
/// ```
/// use kevents_core::{occurrence_events_v1, EventType, ObjectReference};
/// let pod = ObjectReference::new("v1", "Pod", "ns1", "pod1");
/// let node = ObjectReference::new("v1", "Node", "", "node1");
/// let o = occurrence_events_v1!(pod, Some(node), EventType::Warning, "FailedScheduling", "Scheduling",
///                    "Pod failed to schedule on {}: {}", "node1", "not enough resources");
/// assert_eq!(o.note, "Pod failed to schedule on node1: not enough resources");
/// ```
#[macro_export]
macro_rules! occurrence_events_v1 {
    ($regarding:expr, $related:expr, $type:expr, $reason:expr, $action:expr, $($note:tt)+) => {
        $crate::events_v1::Occurrence::new(
            $regarding,
            $related,
            $type,
            $reason,
            $action,
            ::std::format!($($note)+),
        )
    };
}

/// A borrowed [`events_v1::Occurrence`](crate::events_v1::Occurrence) without `related`: what `events_v1::EventFactory::check_ref` (the
/// pipeline's fast form of [`events_v1::EventFactory::check`](crate::events_v1::EventFactory::check)) checks. Not part of the public API:
/// reached through `kevents_core::__private` only.
#[derive(Debug, Clone, Copy)]
pub struct EventsV1OccurrenceRef<'a> {
    /// The object acted upon.
    pub regarding: ReferenceRef<'a>,
    /// `Normal` or `Warning` (checked).
    pub event_type: &'a str,
    /// Why.
    pub reason: &'a str,
    /// What was done.
    pub action: &'a str,
    /// Human-readable note.
    pub note: &'a str,
    /// Annotations placed on the event object.
    pub annotations: &'a BTreeMap<String, String>,
}

/// Builds `events.k8s.io/v1` events the way client-go's `tools/events` recorder does, for one
/// reporter, and refuses (with a typed error, building nothing) anything the apiserver would
/// reject.
///
/// ```
/// use kevents_core::events_v1::{EventFactory, Reporter};
/// use kevents_core::{occurrence_events_v1, EventType, ObjectReference, Time};
/// let f = EventFactory::new(Reporter::with_instance("c1", "i1"));
/// let now = Time::parse_rfc3339("2023-01-01T12:00:00Z").unwrap();
/// let pod = ObjectReference::new("v1", "Pod", "ns1", "pod1").with_uid("12345");
/// let e = f.make(now, occurrence_events_v1!(pod, None, EventType::Normal, "Started", "Start", "n={}", 1)).unwrap();
/// assert_eq!(e.metadata.name, "pod1.17362d8e1c698000");
/// assert_eq!((e.metadata.namespace.as_str(), e.note.as_str()), ("ns1", "n=1"));
/// assert_eq!(e.event_time, Some(now));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EventFactory {
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

impl EventFactory {
    /// A factory for `reporter` with the defaults: UUID fallback names, cluster-scoped events
    /// in `kube-system`, notes truncated with `"..."`.
    pub fn new(reporter: Reporter) -> Self {
        EventFactory {
            reporter,
            ..Default::default()
        }
    }

    /// The checks of [`make`](Self::make) on a borrowed occurrence, in the same order and with
    /// the same errors, without building the event: the recorder refuses invalid input at
    /// the call this way and builds the event off the caller's thread. Cheaper than `make`
    /// (no allocation unless it fails).
    ///
    /// ```
    /// use kevents_core::events_v1::{InvalidEvent, Occurrence, EventFactory, Reporter};
    /// use kevents_core::{EventType, ObjectReference, Time};
    /// let f = EventFactory::new(Reporter::with_instance("c1", "i1"));
    /// let now = Time::from_unix_secs(1);
    /// let pod = ObjectReference::new("v1", "Pod", "ns1", "pod1");
    /// let ok = Occurrence::new(pod.clone(), None, EventType::Normal, "Started", "Start", "");
    /// assert_eq!(f.check(now, &ok), Ok(()));
    /// let bad = Occurrence::new(pod, None, EventType::Normal, "Started", "", "");
    /// assert_eq!(f.check(now, &bad), Err(InvalidEvent::ActionMissing));
    /// assert_eq!(f.make(now, bad).unwrap_err(), InvalidEvent::ActionMissing);
    /// ```
    pub fn check(&self, now: Time, occ: &Occurrence) -> Result<(), crate::events_v1::InvalidEvent> {
        self.check_borrowed(
            now,
            EventsV1OccurrenceRef {
                regarding: ReferenceRef::from(&occ.regarding),
                event_type: &occ.event_type,
                reason: &occ.reason,
                action: &occ.action,
                note: &occ.note,
                annotations: &occ.annotations,
            },
        )
    }

    /// The pipeline's fast form of [`check`](Self::check) (not part of the public API;
    /// `kevents_core::__private`): on borrowed strings (an occurrence without `related`,
    /// which no check reads).
    pub(crate) fn check_borrowed(
        &self,
        now: Time,
        occ: EventsV1OccurrenceRef<'_>,
    ) -> Result<(), crate::events_v1::InvalidEvent> {
        let note_len = self.note_policy.applied_len(occ.note)?;
        let object = occ.regarding.name;
        let name_ok = match self.naming {
            // Falls back to a UUID, always a valid name.
            Naming::UuidFallback => true,
            Naming::Legacy => legacy_name_is_valid(object, now),
        };
        if !name_ok {
            return Err(crate::events_v1::InvalidEvent::Name(name::event_name(
                object, now,
            )));
        }
        let ns = if occ.regarding.namespace.is_empty() {
            self.cluster_scoped_namespace.as_str()
        } else {
            occ.regarding.namespace
        };
        if !name::is_dns1123_label(ns) {
            return Err(crate::events_v1::InvalidEvent::Namespace(ns.to_owned()));
        }
        if occ.regarding.namespace.is_empty() && !self.cluster_scoped_rule.allows(ns) {
            return Err(crate::events_v1::InvalidEvent::ClusterScopedNamespace {
                namespace: ns.to_owned(),
                allowed: self.cluster_scoped_rule.describe(),
            });
        }
        // eventTime is set and series and deprecated fields are empty on a built event.
        validate_field_parts(
            occ.event_type,
            occ.reason,
            occ.action,
            note_len,
            &self.reporter.controller,
            &self.reporter.instance,
        )?;
        validate_annotations(occ.annotations)
    }

    /// Checks an occurrence and builds its event at instant `now` (used for both `eventTime`
    /// and the name). Nothing is built when a check fails.
    pub fn make(
        &self,
        now: Time,
        occ: Occurrence,
    ) -> Result<Event, crate::events_v1::InvalidEvent> {
        let Occurrence {
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

/// Whether [`name::event_name`]`(object, now)` is a DNS-1123 subdomain, without building it:
/// `<object>.<hex nanos>` is one when the object name is one, the time is not negative (a
/// `-` would start the last label) and the whole fits 253 bytes (hex digits are a valid
/// label).
fn legacy_name_is_valid(object: &str, now: Time) -> bool {
    let nanos = now.unix_nanos();
    let hex_digits = (64 - (nanos as u64 | 1).leading_zeros()).div_ceil(4) as usize;
    nanos >= 0 && object.len() + 1 + hex_digits <= 253 && name::is_dns1123_subdomain(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pick<T: Clone>(v: &[T], i: usize) -> T {
        v[i % v.len()].clone()
    }

    proptest! {
        /// `check` refuses exactly what `make` refuses, with the same error.
        #[test]
        fn check_agrees_with_make(
            name in "[a-zA-Z0-9.-]{0,8}", long_name in any::<bool>(), ns in "[a-z-]{0,4}",
            secs in -3i64..3_000_000_000, sel in prop::collection::vec(0usize..16, 12),
        ) {
            let name = if long_name { format!("{}{}", "a".repeat(240), name) } else { name };
            let f = EventFactory {
                reporter: Reporter::with_instance(
                    pick(&["c1", "-bad", "", "example.com/ctl"], sel[0]),
                    pick(&["i".to_owned(), String::new(), "i".repeat(129)], sel[1]),
                ),
                naming: pick(&[Naming::Legacy, Naming::UuidFallback], sel[2]),
                cluster_scoped_namespace: pick(&[ClusterScopedNamespace::KubeSystem, ClusterScopedNamespace::Default], sel[3]),
                cluster_scoped_rule: pick(&[ClusterScopedRule::default(), ClusterScopedRule::KubeSystemOnly], sel[4]),
                note_policy: pick(&[NotePolicy::Reject, NotePolicy::default()], sel[5]),
            };
            let mut annotations = BTreeMap::new();
            match sel[6] % 3 {
                1 => { annotations.insert("ok.io/k".to_owned(), "v".to_owned()); }
                2 => { annotations.insert("bad key".to_owned(), "v".to_owned()); }
                _ => {}
            }
            let occ = Occurrence {
                regarding: ObjectReference::new("v1", "Pod", ns, name),
                related: None,
                event_type: pick(&["Normal", "Warning", "Error"], sel[7]).to_owned(),
                reason: "r".repeat(pick(&[0, 1, 128, 129], sel[8])),
                action: "a".repeat(pick(&[0, 1, 128, 129], sel[9])),
                note: "é".repeat(pick(&[0, 5, 512, 513, 600], sel[10])),
                annotations,
            };
            let now = Time::from_unix_nanos(secs.saturating_mul(1_000_000_000) + sel[11] as i64);
            prop_assert_eq!(f.check(now, &occ).err(), f.make(now, occ).err());
        }
    }
}
