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
}
