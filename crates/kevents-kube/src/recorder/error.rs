//! Why a publish call recorded nothing, and why a recorder did not start.

use kevents_core::InvalidEvent;

use thiserror::Error;

/// Why [`Recorder::publish`](crate::Recorder::publish) recorded nothing. Returned at the
/// call: nothing was queued. Server-side failures are not returned to the caller (the event
/// is written later, retried per the pipeline's policy and counted in the
/// [`ShutdownReport`](kevents_actors::ShutdownReport)).
///
/// ```
/// use kevents_kube::PublishError;
/// let e = PublishError::Shutdown;
/// assert_eq!(e.to_string(), "the kevents recorder is shut down");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PublishError {
    /// The event breaks a rule of the apiserver's `events.k8s.io/v1` validation (reason or
    /// action missing or over 128 bytes, a note over 1024 bytes with
    /// [`NoteLength::Reject`](crate::NoteLength::Reject), a reporting controller that is not a
    /// qualified name, ...), checked client-side.
    #[error(transparent)]
    Invalid(#[from] kevents_core::events_v1::InvalidEvent),
    /// The reference could not be used (the core/v1 fallback's checks).
    #[error(transparent)]
    InvalidReference(#[from] InvalidEvent),
    /// The recorder was shut down (or its pipeline thread is gone).
    #[error("the kevents recorder is shut down")]
    Shutdown,
}

impl From<kevents_actors::RecordError> for PublishError {
    fn from(e: kevents_actors::RecordError) -> Self {
        match e {
            kevents_actors::RecordError::InvalidEventsV1(e) => PublishError::Invalid(e),
            kevents_actors::RecordError::Invalid(e) => PublishError::InvalidReference(e),
            kevents_actors::RecordError::Shutdown => PublishError::Shutdown,
        }
    }
}

/// So that `recorder.publish(&ev, &reference).await?` keeps compiling in a function that
/// returns `kube::Error`, as kube's recorder's `publish` does: the error is carried as
/// `kube::Error::Service`. In a function whose error type has `From<kube::Error>`, `?` does
/// not chain two conversions: give that type a `Publish(#[from] PublishError)` variant, or
/// convert at the call with `.map_err(kube::Error::from)?` (`docs/kube-rs.md`, Errors).
///
/// ```
/// # use kevents_kube::PublishError;
/// #[derive(Debug, thiserror::Error)]
/// enum Error {
///     #[error(transparent)]
///     Kube(#[from] kube::Error),
///     #[error("event not recorded: {0}")]
///     Publish(#[from] PublishError),
/// }
/// fn reconcile(published: Result<(), PublishError>) -> Result<(), Error> {
///     published.clone()?; // through `Publish`
///     published.map_err(kube::Error::from)?; // or through `Kube`
///     Ok(())
/// }
/// assert!(matches!(reconcile(Err(PublishError::Shutdown)), Err(Error::Publish(_))));
/// ```
///
/// ```
/// let e: kube::Error = kevents_kube::PublishError::Shutdown.into();
/// assert!(matches!(e, kube::Error::Service(_)));
/// ```
impl From<PublishError> for kube::Error {
    fn from(e: PublishError) -> Self {
        kube::Error::Service(Box::new(e))
    }
}

/// Why a [`Recorder`](crate::Recorder) could not be started.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StartError {
    /// The pipeline thread could not be spawned.
    #[error("cannot spawn the kevents recorder thread: {0}")]
    Thread(#[source] std::io::Error),
    /// The pipeline thread ended before the pipeline was running.
    #[error("the kevents recorder thread stopped while starting")]
    Stopped,
}
