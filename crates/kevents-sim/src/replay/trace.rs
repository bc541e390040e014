//! What one line of a trace says: an occurrence or a server-side deletion.

use kevents_core::{EventSource, ObjectReference};
use serde::Deserialize;

/// One input line: an occurrence or a server-side deletion.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceLine {
    /// Unix time in nanoseconds.
    pub time: i64,
    /// Reporting source.
    #[serde(default)]
    pub source: EventSource,
    /// Involved object.
    #[serde(default)]
    pub object: Option<ObjectReference>,
    /// Event type.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Reason.
    #[serde(default)]
    pub reason: String,
    /// Message.
    #[serde(default)]
    pub message: String,
    /// Annotations (optional).
    #[serde(default)]
    pub annotations: std::collections::BTreeMap<String, String>,
    /// A deletion instead of an occurrence.
    #[serde(default)]
    pub delete: Option<DeleteLine>,
}

/// A server-side deletion.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteLine {
    /// Namespace of the event.
    pub namespace: String,
    /// Name of the event.
    pub name: String,
}
