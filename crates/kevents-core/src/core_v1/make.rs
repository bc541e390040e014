//! Recorder-side construction of an `Event` from one occurrence (client-go's `makeEvent`),
//! with the client-side checks that keep bad input from ever being sent.

use std::collections::BTreeMap;

use thiserror::Error;

use super::model::{Event, EventSource, EventType};
use crate::name;
use crate::profile::ClientGoVersion;
use crate::reference::{ObjectReference, ReferenceError, ReferenceRef};
use crate::time::Time;

/// Largest total size of annotation keys plus values the apiserver accepts (256 KiB).
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// Why an occurrence was refused before anything was sent.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidEvent {
    /// The type is not exactly `Normal` or `Warning`.
    #[error("unsupported event type {0:?}: must be \"Normal\" or \"Warning\"")]
    Type(String),
    /// No reference could be built for the object.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// The object's namespace is not a DNS-1123 label, so the apiserver would reject the event.
    #[error(
        "invalid namespace {0:?}: must be a DNS-1123 label (lower-case alphanumerics and '-', at most 63)"
    )]
    Namespace(String),
    /// An annotation key is not a qualified name.
    #[error("invalid annotation key {0:?}: must be a qualified name")]
    AnnotationKey(String),
    /// Annotation keys and values together exceed 256 KiB.
    #[error("annotations are {0} bytes, more than the 262144 the apiserver accepts")]
    AnnotationsTooLarge(usize),
}

/// How event names are generated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Naming {
    /// `<object>.<nanos hex>`, or a random UUID when that is not a valid DNS-1123 subdomain
    /// (client-go 1.33+). The default.
    #[default]
    UuidFallback,
    /// Always `<object>.<nanos hex>` (client-go up to 1.32; deterministic, used by replay).
    Legacy,
}

/// One call of the recorder: what happened to which object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Occurrence {
    /// The involved object.
    pub object: ObjectReference,
    /// `Normal` or `Warning` (checked).
    pub event_type: String,
    /// Short reason, e.g. `BackOff`.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// Annotations placed on the event object.
    pub annotations: BTreeMap<String, String>,
}

impl Occurrence {
    /// An occurrence without annotations.
    pub fn new(
        object: ObjectReference,
        event_type: EventType,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Occurrence {
            object,
            event_type: event_type.as_str().to_owned(),
            reason: reason.into(),
            message: message.into(),
            annotations: BTreeMap::new(),
        }
    }
}

/// An occurrence without annotations, its strings borrowed: what `EventFactory::make_into`
/// (the pipeline's fast form of [`EventFactory::make`]) copies into an event. Not part of the
/// public API: reached through `kevents_core::__private` only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OccurrenceRef<'a> {
    /// The involved object.
    pub object: ReferenceRef<'a>,
    /// `Normal` or `Warning`.
    pub event_type: EventType,
    /// Short reason, e.g. `BackOff`.
    pub reason: &'a str,
    /// Human-readable message.
    pub message: &'a str,
}

/// Builds events the way client-go's recorder does, for one event source.
///
/// ```
/// use kevents_core::{EventFactory, EventSource, EventType, ObjectReference, Occurrence, Time};
/// let f = EventFactory::new(EventSource::new("kubelet", "node1"));
/// let pod = ObjectReference::new("v1", "Pod", "", "foo"); // cluster-less object
/// let now = Time::parse_rfc3339("2021-01-01T00:02:25Z").unwrap();
/// let e = f.make(now, Occurrence::new(pod, EventType::Normal, "Started", "hi")).unwrap();
/// assert_eq!(e.metadata.name, "foo.1655f2bf3b286a00");
/// assert_eq!(e.metadata.namespace, "default");
/// assert_eq!(e.count, 1);
///
/// let bad = Occurrence { event_type: "Error".into(), ..Default::default() };
/// assert!(f.make(now, bad).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFactory {
    /// `source` of every event.
    pub source: EventSource,
    /// Name generation rule.
    pub naming: Naming,
    /// Set `reportingComponent`/`reportingInstance` from the source, as client-go 1.28+
    /// does (the default); client-go 1.20 sends `""`.
    pub reporting_fields: bool,
}

impl Default for EventFactory {
    fn default() -> Self {
        EventFactory::for_client_go(EventSource::default(), ClientGoVersion::default())
    }
}

impl EventFactory {
    /// A factory for `source` with client-go's defaults (client-go 1.37's, the same as 1.36's;
    /// see [`ClientGoVersion`]).
    pub fn new(source: EventSource) -> Self {
        EventFactory::for_client_go(source, ClientGoVersion::default())
    }

    /// A factory for `source` that builds events as client-go release `version` does:
    /// its name generation and its reporting fields.
    ///
    /// ```
    /// use kevents_core::{ClientGoVersion, EventFactory, EventSource, Naming};
    /// let f = EventFactory::for_client_go(EventSource::new("c", "h"), ClientGoVersion::V1_20);
    /// assert_eq!((f.naming, f.reporting_fields), (Naming::Legacy, false));
    /// let f = EventFactory::new(EventSource::new("c", "h"));
    /// assert_eq!((f.naming, f.reporting_fields), (Naming::UuidFallback, true));
    /// ```
    pub fn for_client_go(source: EventSource, version: ClientGoVersion) -> Self {
        EventFactory {
            source,
            naming: if version.uuid_names() {
                Naming::UuidFallback
            } else {
                Naming::Legacy
            },
            reporting_fields: version.reporting_fields(),
        }
    }

    /// Checks an occurrence and builds its event at instant `now`. Nothing is built when a
    /// check fails.
    pub fn make(&self, now: Time, occ: Occurrence) -> Result<Event, InvalidEvent> {
        validate(&occ)?;
        let Occurrence {
            object,
            event_type,
            reason,
            message,
            annotations,
        } = occ;
        let mut e = Event::default();
        self.stamp(&mut e, now, &object.name, &object.namespace);
        e.metadata.annotations = annotations;
        e.involved_object = object;
        e.reason = reason;
        e.message = message;
        e.type_ = event_type;
        Ok(e)
    }

    /// What `make` and `make_into` both set on a new or reset event, from the factory, the
    /// instant and the object: the name, the namespace (`default` for a cluster-scoped
    /// object), the source, both timestamps, `count = 1` and the reporting fields. Into the
    /// event's own buffers.
    fn stamp(&self, e: &mut Event, now: Time, object_name: &str, object_namespace: &str) {
        match self.naming {
            Naming::UuidFallback => {
                name::push_generated_event_name(&mut e.metadata.name, object_name, now)
            }
            Naming::Legacy => name::push_event_name(&mut e.metadata.name, object_name, now),
        }
        e.metadata
            .namespace
            .push_str(if object_namespace.is_empty() {
                "default"
            } else {
                object_namespace
            });
        // Field by field: a derived `clone_from` would allocate new strings.
        e.source.component.clone_from(&self.source.component);
        e.source.host.clone_from(&self.source.host);
        e.first_timestamp = Some(now);
        e.last_timestamp = Some(now);
        e.count = 1;
        if self.reporting_fields {
            e.reporting_component.clone_from(&self.source.component);
            e.reporting_instance.clone_from(&self.source.host);
        }
    }

    /// The pipeline's fast form of [`make`](Self::make) (not part of the public API;
    /// `kevents_core::__private`): an occurrence without annotations, built into `event`:
    /// every field of `event` is overwritten (`Event::reset`) and its strings' buffers are
    /// reused, so an event built again in place allocates nothing. The same checks and the
    /// same event as `make`; on an error `event` is left as it was.
    ///
    /// ```
    /// use kevents_core::__private::OccurrenceRef;
    /// use kevents_core::{Event, EventFactory, EventSource, EventType, Naming, ObjectReference,
    ///                    Occurrence, Time};
    /// let f = EventFactory { naming: Naming::Legacy, ..EventFactory::new(EventSource::new("c", "h")) };
    /// let now = Time::from_unix_secs(1_600_000_000);
    /// let pod = ObjectReference::new("v1", "Pod", "ns", "web-1");
    /// let mut e = Event::default();
    /// e.message = "an older event's message".into();
    /// e.count = 7;
    /// let occ = OccurrenceRef { object: (&pod).into(), event_type: EventType::Warning,
    ///                           reason: "BackOff", message: "restarting" };
    /// kevents_core::__private::make_into(&f, &mut e, now, occ).unwrap();
    /// let made = f.make(now, Occurrence::new(pod, EventType::Warning, "BackOff", "restarting"));
    /// assert_eq!(e, made.unwrap());
    /// ```
    pub(crate) fn build_into(
        &self,
        event: &mut Event,
        now: Time,
        occ: OccurrenceRef<'_>,
    ) -> Result<(), InvalidEvent> {
        // A typed type and no annotations: the namespace is `validate`'s only check.
        validate_namespace(occ.object.namespace)?;
        event.reset();
        self.stamp(event, now, occ.object.name, occ.object.namespace);
        occ.object.copy_to(&mut event.involved_object);
        event.reason.push_str(occ.reason);
        event.message.push_str(occ.message);
        event.type_.push_str(occ.event_type.as_str());
        Ok(())
    }
}

/// The pipeline's fast form of [`validate`] (not part of the public API;
/// `kevents_core::__private`): the one check `validate` makes on a call with a typed
/// [`EventType`] (always valid) and no annotations: the namespace, empty or a DNS-1123 label
/// (the same error). The recorder's hot path calls this instead, skipping the type's string
/// comparison and the annotations' loop.
///
/// ```
/// use kevents_core::{InvalidEvent, __private::validate_namespace};
/// assert!(validate_namespace("").is_ok() && validate_namespace("kube-system").is_ok());
/// assert!(matches!(validate_namespace("Not_A_Label"), Err(InvalidEvent::Namespace(_))));
/// ```
#[inline]
pub fn validate_namespace(ns: &str) -> Result<(), InvalidEvent> {
    if !ns.is_empty() && !name::is_dns1123_label(ns) {
        return Err(InvalidEvent::Namespace(ns.to_owned()));
    }
    Ok(())
}

/// The client-side checks: type, namespace, annotations.
pub fn validate(occ: &Occurrence) -> Result<(), InvalidEvent> {
    validate_parts(&occ.event_type, &occ.object.namespace, &occ.annotations)
}

/// [`validate`] on the parts it checks (the same checks, in the same order, with the same
/// errors).
fn validate_parts(
    event_type: &str,
    ns: &str,
    annotations: &BTreeMap<String, String>,
) -> Result<(), InvalidEvent> {
    if EventType::parse(event_type).is_none() {
        return Err(InvalidEvent::Type(event_type.to_owned()));
    }
    validate_namespace(ns)?;
    let mut total = 0;
    for (k, v) in annotations {
        if !name::is_qualified_name(&k.to_ascii_lowercase()) {
            return Err(InvalidEvent::AnnotationKey(k.clone()));
        }
        total += k.len() + v.len();
    }
    if total > MAX_ANNOTATIONS_BYTES {
        return Err(InvalidEvent::AnnotationsTooLarge(total));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core_v1::model::EventSeries;
    use proptest::prelude::*;

    /// An event with every field set, as a recycled event may be.
    fn dirty() -> Event {
        let r = ObjectReference::new("apps/v1", "Deployment", "old-ns", "old-name")
            .with_uid("old-uid")
            .with_field_path("spec.old");
        let mut involved_object = r.clone();
        involved_object.resource_version = "7".into();
        Event {
            kind: "Other".to_owned().into(),
            api_version: "v9".to_owned().into(),
            metadata: crate::meta::ObjectMeta {
                name: "old.1".into(),
                namespace: "old-ns".into(),
                uid: "uid".into(),
                resource_version: "42".into(),
                creation_timestamp: Some(Time::from_unix_secs(5)),
                annotations: [("a".to_owned(), "b".to_owned())].into(),
            },
            involved_object,
            reason: "OldReason".into(),
            message: "an old, rather long message ".repeat(10),
            source: EventSource::new("old-component", "old-host"),
            first_timestamp: Some(Time::from_unix_secs(1)),
            last_timestamp: Some(Time::from_unix_secs(2)),
            count: 9,
            type_: "Warning".into(),
            event_time: Some(Time::from_unix_secs(3)),
            series: Some(EventSeries::default()),
            action: "Act".into(),
            related: Some(r),
            reporting_component: "rc".into(),
            reporting_instance: "ri".into(),
        }
    }

    fn field() -> impl Strategy<Value = String> {
        prop_oneof![Just(String::new()), "[a-z0-9.-]{1,12}", "[ -~]{0,40}"]
    }

    proptest! {
        /// Building into a used event gives exactly what `make` builds from scratch (every
        /// field overwritten, for either reporting rule), and the same refusal, leaving the
        /// event as it was.
        #[test]
        fn make_into_a_used_event_is_make(
            f in proptest::collection::vec(field(), 10),
            warning in any::<bool>(),
            reporting_fields in any::<bool>(),
            nanos in any::<i64>(),
        ) {
            let factory = EventFactory {
                source: EventSource::new("c", "h"),
                naming: Naming::Legacy,
                reporting_fields,
            };
            let object = ObjectReference {
                kind: f[0].clone(),
                namespace: f[1].clone(),
                name: f[2].clone(),
                uid: f[3].clone(),
                api_version: f[4].clone(),
                resource_version: f[5].clone(),
                field_path: f[6].clone(),
            };
            let t = if warning { EventType::Warning } else { EventType::Normal };
            let now = Time::from_unix_nanos(nanos);
            let made = factory.make(now, Occurrence::new(object.clone(), t, &*f[7], &*f[8]));
            let mut e = dirty();
            let occ = OccurrenceRef {
                object: (&object).into(),
                event_type: t,
                reason: &f[7],
                message: &f[8],
            };
            match (made, factory.build_into(&mut e, now, occ)) {
                (Ok(made), Ok(())) => prop_assert_eq!(e, made),
                (Err(a), Err(b)) => {
                    prop_assert_eq!(a, b);
                    prop_assert_eq!(e, dirty());
                }
                (a, b) => prop_assert!(false, "make {a:?}, make_into {b:?}"),
            }
        }
    }

    fn occ(t: &str) -> Occurrence {
        Occurrence {
            object: ObjectReference::new("v1", "Pod", "baz", "foo"),
            event_type: t.into(),
            reason: "r".into(),
            message: "m".into(),
            annotations: BTreeMap::new(),
        }
    }

    #[test]
    fn type_is_case_sensitive() {
        let f = EventFactory::default();
        for t in ["normal", "Error", "", "Info"] {
            assert_eq!(
                f.make(Time::UNIX_EPOCH, occ(t)),
                Err(InvalidEvent::Type(t.into()))
            );
        }
        assert!(f.make(Time::UNIX_EPOCH, occ("Warning")).is_ok());
    }

    #[test]
    fn d5_cluster_scoped_object_goes_to_default() {
        let f = EventFactory::default();
        let mut o = occ("Normal");
        o.object.namespace.clear();
        let e = f.make(Time::UNIX_EPOCH, o).unwrap();
        assert_eq!(e.metadata.namespace, "default");
        assert_eq!(e.involved_object.namespace, "");
    }

    #[test]
    fn bad_namespace_and_annotations_are_refused() {
        let f = EventFactory::default();
        let mut o = occ("Normal");
        o.object.namespace = "Team_A".into();
        assert!(matches!(
            f.make(Time::UNIX_EPOCH, o),
            Err(InvalidEvent::Namespace(_))
        ));
        let mut o = occ("Normal");
        o.annotations.insert("bad key".into(), "v".into());
        assert!(matches!(
            f.make(Time::UNIX_EPOCH, o),
            Err(InvalidEvent::AnnotationKey(_))
        ));
        let mut o = occ("Normal");
        o.annotations
            .insert("k".into(), "v".repeat(MAX_ANNOTATIONS_BYTES));
        assert!(matches!(
            f.make(Time::UNIX_EPOCH, o),
            Err(InvalidEvent::AnnotationsTooLarge(_))
        ));
    }

    #[test]
    fn reporting_fields_follow_the_source_when_enabled() {
        let mut f = EventFactory::new(EventSource::new("c", "h"));
        f.reporting_fields = true;
        let e = f.make(Time::UNIX_EPOCH, occ("Normal")).unwrap();
        assert_eq!(
            (
                e.reporting_component.as_str(),
                e.reporting_instance.as_str()
            ),
            ("c", "h")
        );
    }
}
