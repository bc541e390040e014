//! One write of a correlated event (client-go `recordEvent`, reference B17): PATCH when the
//! event was seen before, CREATE otherwise, and CREATE with the accumulated count when the
//! PATCH finds no object (404: the event expired or was deleted).

use super::model::Event;
use super::sink::EventSink;
use crate::status::SinkError;

/// Which request ended the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteKind {
    /// `POST` of a new event.
    Create,
    /// `PATCH` of an existing event.
    Patch,
    /// `POST` after a `PATCH` answered 404.
    Recreate,
}

impl WriteKind {
    /// `create`, `patch` or `recreate`.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteKind::Create => "create",
            WriteKind::Patch => "patch",
            WriteKind::Recreate => "recreate",
        }
    }
}

/// The result of one write attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The last request made.
    pub kind: WriteKind,
    /// The stored event (feed it to `Correlator::update_state`) or the error.
    pub result: Result<Event, SinkError>,
}

/// Performs one write attempt of `event` with `patch`, exactly as client-go's `recordEvent`:
/// `count > 1` means PATCH first (a missing patch is sent as an empty body, as client-go
/// sends nil); if that is not an update, or the PATCH answered 404, the event's
/// resourceVersion is cleared and it is CREATEd. Any other PATCH error is returned as is.
///
/// `event` is modified (resourceVersion cleared) exactly as client-go modifies its copy, so
/// a retry reuses it.
pub async fn write_event<S: EventSink + ?Sized>(
    sink: &S,
    event: &mut Event,
    patch: Option<&[u8]>,
) -> WriteOutcome {
    if event.count > 1 {
        let result = sink.patch(event, patch.unwrap_or_default()).await;
        match result {
            Err(e) if e.is_not_found() => {}
            result => {
                return WriteOutcome {
                    kind: WriteKind::Patch,
                    result,
                };
            }
        }
        event.metadata.resource_version.clear();
        let result = sink.create(event).await;
        return WriteOutcome {
            kind: WriteKind::Recreate,
            result,
        };
    }
    event.metadata.resource_version.clear();
    WriteOutcome {
        kind: WriteKind::Create,
        result: sink.create(event).await,
    }
}
