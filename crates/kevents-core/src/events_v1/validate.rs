//! The apiserver's rules for `events.k8s.io/v1` events (`ValidateEventCreate` and
//! `ValidateEventUpdate` in `pkg/apis/core/validation/events.go`, plus the generic object-metadata
//! rules), checked on the client so that nothing the server would reject is ever sent, and used by
//! `kevents_sim::MemoryApiServer` to reject what a real server rejects.

use thiserror::Error;

use super::model::Event;
use crate::core_v1::{EventSource, EventType, MAX_ANNOTATIONS_BYTES};
use crate::name;

/// Longest `note` the server accepts, in UTF-8 bytes.
pub const NOTE_LIMIT: usize = 1024;
/// Longest `reason` the server accepts, in bytes.
pub const REASON_LIMIT: usize = 128;
/// Longest `action` the server accepts, in bytes.
pub const ACTION_LIMIT: usize = 128;
/// Longest `reportingInstance` the server accepts, in bytes.
pub const REPORTING_INSTANCE_LIMIT: usize = 128;
/// The default marker appended to a truncated note.
pub const TRUNCATION_MARKER: &str = "...";

/// Why an `events.k8s.io/v1` event was refused before anything was sent.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidEvent {
    /// The type is not exactly `Normal` or `Warning`.
    #[error("unsupported event type {0:?}: must be \"Normal\" or \"Warning\"")]
    Type(String),
    /// `reason` is empty.
    #[error("reason is required")]
    ReasonMissing,
    /// `reason` is longer than 128 bytes.
    #[error("reason is {0} bytes, more than 128")]
    ReasonTooLong(usize),
    /// `action` is empty.
    #[error("action is required")]
    ActionMissing,
    /// `action` is longer than 128 bytes.
    #[error("action is {0} bytes, more than 128")]
    ActionTooLong(usize),
    /// `note` is longer than 1024 bytes and the policy is [`NotePolicy::Reject`].
    #[error("note is {0} bytes, more than 1024")]
    NoteTooLong(usize),
    /// `reportingController` is not a qualified name (or empty).
    #[error(
        "reportingController {0:?} is not a qualified name ([prefix/]name, name part 1-63 of [-A-Za-z0-9_.], alphanumeric at both ends)"
    )]
    ReportingController(String),
    /// `reportingInstance` is empty.
    #[error("reportingInstance is required")]
    ReportingInstanceMissing,
    /// `reportingInstance` is longer than 128 bytes.
    #[error("reportingInstance is {0} bytes, more than 128")]
    ReportingInstanceTooLong(usize),
    /// `metadata.name` is not a DNS-1123 subdomain.
    #[error("event name {0:?} is not a DNS-1123 subdomain")]
    Name(String),
    /// `metadata.namespace` is empty or not a DNS-1123 label.
    #[error("event namespace {0:?} is not a DNS-1123 label")]
    Namespace(String),
    /// The regarding object is cluster-scoped and the event namespace is not one the server
    /// accepts for that.
    #[error(
        "event about a cluster-scoped object is in namespace {namespace:?}; the server accepts only {allowed}"
    )]
    ClusterScopedNamespace {
        /// The event's namespace.
        namespace: String,
        /// What the server accepts.
        allowed: &'static str,
    },
    /// `eventTime` is unset.
    #[error("eventTime is required")]
    EventTimeMissing,
    /// `series.count` is below 2.
    #[error("series.count is {0}, the server requires at least 2")]
    SeriesCount(i32),
    /// `series.lastObservedTime` is unset.
    #[error("series.lastObservedTime is required")]
    SeriesLastObservedTime,
    /// A `deprecated*` field is set.
    #[error("{0} must not be set on events.k8s.io/v1 events")]
    Deprecated(&'static str),
    /// An annotation key is not a qualified name.
    #[error("invalid annotation key {0:?}: must be a qualified name")]
    AnnotationKey(String),
    /// Annotation keys and values together exceed 256 KiB.
    #[error("annotations are {0} bytes, more than the 262144 the apiserver accepts")]
    AnnotationsTooLarge(usize),
    /// A field the server treats as immutable changed in an update.
    #[error("field {0} is immutable")]
    Immutable(&'static str),
}

/// What to do with a note longer than 1024 bytes.
///
/// ```
/// use kevents_core::events_v1::NotePolicy;
/// let long = "é".repeat(600); // 1200 bytes
/// let short = NotePolicy::default().apply(long.clone()).unwrap();
/// assert!(short.len() <= 1024 && short.ends_with("..."));
/// assert!(NotePolicy::Reject.apply(long).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotePolicy {
    /// Cut the note on a UTF-8 character boundary so that, with `marker` appended, it is at
    /// most 1024 bytes. The default, with marker [`TRUNCATION_MARKER`].
    Truncate {
        /// Appended to a cut note (itself cut if longer than 1024 bytes).
        marker: String,
    },
    /// Refuse the event with [`events_v1::InvalidEvent::NoteTooLong`](crate::events_v1::InvalidEvent::NoteTooLong).
    Reject,
}

impl Default for NotePolicy {
    fn default() -> Self {
        NotePolicy::Truncate {
            marker: TRUNCATION_MARKER.to_owned(),
        }
    }
}

impl NotePolicy {
    /// The length [`apply`](Self::apply) would give `note`, or its error, without copying.
    pub(crate) fn applied_len(&self, note: &str) -> Result<usize, InvalidEvent> {
        if note.len() <= NOTE_LIMIT {
            return Ok(note.len());
        }
        match self {
            NotePolicy::Reject => Err(InvalidEvent::NoteTooLong(note.len())),
            NotePolicy::Truncate { marker } => {
                let marker = &marker[..floor_char_boundary(marker, NOTE_LIMIT)];
                Ok(floor_char_boundary(note, NOTE_LIMIT - marker.len()) + marker.len())
            }
        }
    }

    /// Applies the policy: the note unchanged when it fits, else truncated or refused.
    pub fn apply(&self, note: String) -> Result<String, InvalidEvent> {
        if note.len() <= NOTE_LIMIT {
            return Ok(note);
        }
        match self {
            NotePolicy::Reject => Err(InvalidEvent::NoteTooLong(note.len())),
            NotePolicy::Truncate { marker } => {
                let marker = &marker[..floor_char_boundary(marker, NOTE_LIMIT)];
                let cut = floor_char_boundary(&note, NOTE_LIMIT - marker.len());
                let mut out = note;
                out.truncate(cut);
                out.push_str(marker);
                Ok(out)
            }
        }
    }
}

fn floor_char_boundary(s: &str, max: usize) -> usize {
    if max >= s.len() {
        return s.len();
    }
    (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0)
}

/// Which namespaces the server accepts for events about cluster-scoped objects
/// (`pkg/apis/core/validation/events.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClusterScopedRule {
    /// `default` or `kube-system` (kubernetes PR #100125, current servers). The default.
    #[default]
    DefaultOrKubeSystem,
    /// Only `kube-system`, as a 1.20 apiserver demands.
    KubeSystemOnly,
}

impl ClusterScopedRule {
    pub(crate) fn allows(self, ns: &str) -> bool {
        match self {
            ClusterScopedRule::DefaultOrKubeSystem => ns == "default" || ns == "kube-system",
            ClusterScopedRule::KubeSystemOnly => ns == "kube-system",
        }
    }
    pub(crate) fn describe(self) -> &'static str {
        match self {
            ClusterScopedRule::DefaultOrKubeSystem => "\"default\" or \"kube-system\"",
            ClusterScopedRule::KubeSystemOnly => "\"kube-system\" (1.20 apiserver)",
        }
    }
}

/// Checks everything a current apiserver checks on an `events.k8s.io/v1` create (the generic
/// object-metadata rules and `ValidateEventCreate` in `pkg/apis/core/validation/events.go`)
/// and returns the first violation. Lengths are UTF-8 byte counts.
///
/// ```
/// use kevents_core::events_v1::{InvalidEvent, validate_create, ClusterScopedRule, Event};
/// let e = Event::default();
/// assert_eq!(validate_create(&e, ClusterScopedRule::default()), Err(InvalidEvent::Name(String::new())));
/// ```
pub fn validate_create(e: &Event, rule: ClusterScopedRule) -> Result<(), InvalidEvent> {
    if !name::is_dns1123_subdomain(&e.metadata.name) {
        return Err(InvalidEvent::Name(e.metadata.name.clone()));
    }
    let ns = &e.metadata.namespace;
    if !name::is_dns1123_label(ns) {
        return Err(InvalidEvent::Namespace(ns.clone()));
    }
    if e.regarding.namespace.is_empty() && !rule.allows(ns) {
        return Err(InvalidEvent::ClusterScopedNamespace {
            namespace: ns.clone(),
            allowed: rule.describe(),
        });
    }
    if e.event_time.is_none() {
        return Err(InvalidEvent::EventTimeMissing);
    }
    validate_fields(e)?;
    if let Some(s) = &e.series {
        validate_series(s)?;
    }
    if e.deprecated_source != EventSource::default() {
        return Err(InvalidEvent::Deprecated("deprecatedSource"));
    }
    if e.deprecated_first_timestamp.is_some() {
        return Err(InvalidEvent::Deprecated("deprecatedFirstTimestamp"));
    }
    if e.deprecated_last_timestamp.is_some() {
        return Err(InvalidEvent::Deprecated("deprecatedLastTimestamp"));
    }
    if e.deprecated_count != 0 {
        return Err(InvalidEvent::Deprecated("deprecatedCount"));
    }
    validate_annotations(&e.metadata.annotations)
}

/// The annotation checks of [`validate_create`].
pub(crate) fn validate_annotations(
    annotations: &std::collections::BTreeMap<String, String>,
) -> Result<(), InvalidEvent> {
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

fn validate_fields(e: &Event) -> Result<(), InvalidEvent> {
    validate_field_parts(
        &e.type_,
        &e.reason,
        &e.action,
        e.note.len(),
        &e.reporting_controller,
        &e.reporting_instance,
    )
}

/// The field checks of [`validate_create`] (type, reason, action, note length, reporter), on
/// borrowed parts.
pub(crate) fn validate_field_parts(
    type_: &str,
    reason: &str,
    action: &str,
    note_len: usize,
    reporting_controller: &str,
    reporting_instance: &str,
) -> Result<(), InvalidEvent> {
    if EventType::parse(type_).is_none() {
        return Err(InvalidEvent::Type(type_.to_owned()));
    }
    match reason.len() {
        0 => return Err(InvalidEvent::ReasonMissing),
        n if n > REASON_LIMIT => return Err(InvalidEvent::ReasonTooLong(n)),
        _ => {}
    }
    match action.len() {
        0 => return Err(InvalidEvent::ActionMissing),
        n if n > ACTION_LIMIT => return Err(InvalidEvent::ActionTooLong(n)),
        _ => {}
    }
    if note_len > NOTE_LIMIT {
        return Err(InvalidEvent::NoteTooLong(note_len));
    }
    if !name::is_qualified_name(reporting_controller) {
        return Err(InvalidEvent::ReportingController(
            reporting_controller.to_owned(),
        ));
    }
    match reporting_instance.len() {
        0 => Err(InvalidEvent::ReportingInstanceMissing),
        n if n > REPORTING_INSTANCE_LIMIT => Err(InvalidEvent::ReportingInstanceTooLong(n)),
        _ => Ok(()),
    }
}

fn validate_series(s: &super::model::EventSeries) -> Result<(), InvalidEvent> {
    if s.count < 2 {
        return Err(InvalidEvent::SeriesCount(s.count));
    }
    if s.last_observed_time.is_none() {
        return Err(InvalidEvent::SeriesLastObservedTime);
    }
    Ok(())
}

/// Checks an update (PATCH result) the way a current apiserver does
/// (`ValidateEventUpdate` in `pkg/apis/core/validation/events.go`, as fixed by kubernetes
/// PR #108047): the series is validated if it changed, and every other field
/// except metadata is immutable.
///
/// ```
/// use kevents_core::events_v1::{InvalidEvent, validate_update, Event, EventSeries};
/// use kevents_core::Time;
/// let old = Event::default();
/// let mut new = old.clone();
/// new.series = Some(EventSeries::new(1, Time::UNIX_EPOCH));
/// assert_eq!(validate_update(&old, &new), Err(InvalidEvent::SeriesCount(1)));
/// new.series = Some(EventSeries::new(2, Time::UNIX_EPOCH));
/// assert_eq!(validate_update(&old, &new), Ok(()));
/// new.note = "changed".into();
/// assert_eq!(validate_update(&old, &new), Err(InvalidEvent::Immutable("note")));
/// ```
pub fn validate_update(old: &Event, new: &Event) -> Result<(), InvalidEvent> {
    if old.series != new.series
        && let Some(s) = &new.series
    {
        validate_series(s)?;
    }
    let checks: [(&'static str, bool); 14] = [
        ("regarding", old.regarding == new.regarding),
        ("related", old.related == new.related),
        ("reason", old.reason == new.reason),
        ("note", old.note == new.note),
        ("type", old.type_ == new.type_),
        ("action", old.action == new.action),
        ("eventTime", old.event_time == new.event_time),
        (
            "reportingController",
            old.reporting_controller == new.reporting_controller,
        ),
        (
            "reportingInstance",
            old.reporting_instance == new.reporting_instance,
        ),
        (
            "deprecatedSource",
            old.deprecated_source == new.deprecated_source,
        ),
        (
            "deprecatedFirstTimestamp",
            old.deprecated_first_timestamp == new.deprecated_first_timestamp,
        ),
        (
            "deprecatedLastTimestamp",
            old.deprecated_last_timestamp == new.deprecated_last_timestamp,
        ),
        (
            "deprecatedCount",
            old.deprecated_count == new.deprecated_count,
        ),
        ("metadata.name", old.metadata.name == new.metadata.name),
    ];
    match checks.iter().find(|(_, same)| !same) {
        Some((field, _)) => Err(InvalidEvent::Immutable(field)),
        None => Ok(()),
    }
}
