//! [`EventsV1Client`]: the `events.k8s.io/v1` reads of a [`Client`], named as its core/v1
//! ones (`client.get_event(..)` / `client.events_v1().get_event(..)`).

use crate::events_v1::{API_VERSION, Event};
use crate::status::SinkError;

use super::client::{Client, EVENTS_V1_PATH, events_path};
use super::list::ListError;
use super::transport::{Method, Transport};

/// The `events.k8s.io/v1` reads of a [`Client`], borrowed from it by [`Client::events_v1`]:
/// each is the twin of the core/v1 read of the same name on the client. The writes are the
/// client's [`EventSink`](crate::events_v1::EventSink) implementation.
///
/// ```
/// use kevents_core::request::Client;
/// # use kevents_core::request::{Limits, Request, Transport, TransportFuture};
/// # #[derive(Clone)]
/// # struct Unreachable;
/// # impl Transport for Unreachable {
/// #     fn send(&self, _request: Request) -> TransportFuture<'_> {
/// #         Box::pin(async { Err(kevents_core::SinkError::Transport("unreachable".into())) })
/// #     }
/// #     fn limits(&self) -> Limits { Limits::default() }
/// # }
/// async fn count_both(client: &Client<impl Transport>) -> Result<usize, Box<dyn std::error::Error>> {
///     let core = client.list_events("default").await?;
///     let events_v1 = client.events_v1().list_events("default").await?;
///     Ok(core.len() + events_v1.len())
/// }
/// # let _ = count_both(&Client::new(Unreachable));
/// ```
#[derive(Debug)]
pub struct EventsV1Client<'a, T> {
    client: &'a Client<T>,
}

impl<T> Clone for EventsV1Client<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for EventsV1Client<'_, T> {}

impl<T: Transport> Client<T> {
    /// The `events.k8s.io/v1` reads, named as this client's core/v1 ones.
    pub fn events_v1(&self) -> EventsV1Client<'_, T> {
        EventsV1Client { client: self }
    }
}

impl<T: Transport> EventsV1Client<'_, T> {
    /// `GET` of one `events.k8s.io/v1` event (the twin of [`Client::get_event`]).
    pub async fn get_event(&self, namespace: &str, name: &str) -> Result<Event, SinkError> {
        let path = events_path(EVENTS_V1_PATH, namespace, Some(name))?;
        let answer = self.client.send_empty(Method::Get, path).await?;
        answer.answer().decode_event(Some(API_VERSION))
    }

    /// Every `events.k8s.io/v1` event of a namespace (all for `""`), paginated and bounded
    /// like [`Client::list_events`] (its twin).
    pub async fn list_events(&self, namespace: &str) -> Result<Vec<Event>, ListError> {
        self.client.list_all(EVENTS_V1_PATH, namespace).await
    }
}
