//! What a recorder call returns.

use kevents_core::InvalidEvent;
use thiserror::Error;

/// What happened to one accepted call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    /// The occurrence is in the intake.
    Queued,
    /// The occurrence was dropped (and counted).
    Dropped(DropReason),
}

impl Emit {
    /// Whether the occurrence was queued.
    pub fn is_queued(&self) -> bool {
        matches!(self, Emit::Queued)
    }
}

/// Why an occurrence was dropped at the recorder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropReason {
    /// The intake held its capacity.
    IntakeFull,
}

/// Why a call recorded nothing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    /// The occurrence failed a client-side check; nothing was emitted.
    #[error(transparent)]
    Invalid(#[from] InvalidEvent),
    /// An `events.k8s.io/v1` occurrence failed the apiserver's validation rules, checked
    /// client-side; nothing was emitted.
    #[error(transparent)]
    InvalidEventsV1(#[from] kevents_core::events_v1::InvalidEvent),
    /// The pipeline has been shut down (or its actors are gone).
    #[error("the event pipeline is shut down")]
    Shutdown,
}
