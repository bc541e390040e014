//! [`ExportError`]: why exporting failed.

use thiserror::Error;

/// Why exporting failed.
///
/// ```
/// let e = kevents_export::ExportError::Sink("no ack".into());
/// assert_eq!(e.to_string(), "delivering a record: no ack");
/// ```
#[derive(Debug, Error)]
pub enum ExportError {
    /// The configuration cannot work (a name NATS refuses, replicas out of range): nothing
    /// was connected to or written.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A request to the apiserver (list or watch) failed.
    #[error("apiserver: {0}")]
    Apiserver(#[from] kevents_core::SinkError),
    /// The apiserver answered something that is not a list or watch event.
    #[error("undecodable answer from the apiserver: {0}")]
    Decode(String),
    /// A record could not be delivered.
    #[error("delivering a record: {0}")]
    Sink(String),
    /// The resume point could not be read or written.
    #[error("resume point: {0}")]
    Resume(String),
    /// The history's store refused a write because another writer appended since this one
    /// last did (a leader that was deposed while it could not tell: the fence, see
    /// docs/export.md). Nothing was lost: the writer that holds the stream now continues.
    #[error("fenced: {0}")]
    Fenced(String),
    /// The history's store is not what the export needs any more (the stream or its bucket
    /// was deleted, or reconfigured so that it would drop records).
    #[error("the history store: {0}")]
    Store(String),
    /// Reading the history back ([`crate::history`]) failed: the stream could not be read.
    #[error("reading the history: {0}")]
    Read(String),
}

impl ExportError {
    /// Whether another writer holds the history now ([`ExportError::Fenced`]): stand by.
    ///
    /// ```
    /// assert!(kevents_export::ExportError::Fenced("x".into()).is_fenced());
    /// ```
    pub fn is_fenced(&self) -> bool {
        matches!(self, ExportError::Fenced(_))
    }
}
