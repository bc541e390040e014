//! The write side of core/v1: the [`EventSink`] trait every sink implements (the HTTP sink,
//! the in-memory apiserver, test doubles). The errors a write can end in and how they are
//! classified are in [`crate::status`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::model::Event;
use crate::status::SinkError;
use crate::stored::Stored;

/// The future a sink call returns: the event as the server stored it ([`Stored::Returned`]),
/// [`Stored::AsSent`] for a sink with no server copy to return, or why not.
pub type SinkFuture =
    Pin<Box<dyn Future<Output = Result<Stored<Event>, SinkError>> + Send + 'static>>;

/// Writes events to an apiserver (client-go `EventSink`, without `Update`, which the
/// recorder never calls).
///
/// Methods take the event by reference and return a `'static` future, so an implementation
/// encodes the request up front (an encoding error surfaces before anything is sent) and the
/// caller can keep the event for retries.
///
/// ```
/// use kevents_core::{Event, EventSink, SinkFuture, Stored};
///
/// /// A sink that prints events: no server, so the events are stored as sent.
/// struct Print;
/// impl EventSink for Print {
///     fn create(&self, event: &Event) -> SinkFuture {
///         println!("{} {}: {}", event.type_, event.reason, event.message);
///         Box::pin(async { Ok(Stored::AsSent) })
///     }
///     fn patch(&self, event: &Event, _patch: &[u8]) -> SinkFuture {
///         println!("{} {} (x{}): {}", event.type_, event.reason, event.count, event.message);
///         Box::pin(async { Ok(Stored::AsSent) })
///     }
/// }
/// ```
pub trait EventSink: Send + Sync + 'static {
    /// `POST /api/v1/namespaces/{event.namespace}/events`.
    fn create(&self, event: &Event) -> SinkFuture;
    /// `PATCH /api/v1/namespaces/{event.namespace}/events/{event.name}` with a strategic
    /// merge patch.
    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture;
}

impl<S: EventSink + ?Sized> EventSink for Arc<S> {
    fn create(&self, event: &Event) -> SinkFuture {
        (**self).create(event)
    }
    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        (**self).patch(event, patch)
    }
}

impl<S: EventSink + ?Sized> EventSink for Box<S> {
    fn create(&self, event: &Event) -> SinkFuture {
        (**self).create(event)
    }
    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        (**self).patch(event, patch)
    }
}
