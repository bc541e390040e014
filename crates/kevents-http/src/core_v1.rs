//! core/v1 over HTTP (client-go `tools/record`'s `EventSinkImpl`): [`EventSink`] for
//! [`HttpSink`] (`POST` and strategic-merge `PATCH` of `/api/v1/namespaces/{ns}/events`), and
//! `GET`, `DELETE` and paginated lists of core/v1 events, with the request building,
//! authentication and error decoding of [`crate::client`].

use http::Method;
use kevents_core::{Event, EventSink, SinkError, SinkFuture};
use reqwest::Url;

use crate::client::{Answer, Body, HttpSink, decode_event_of, status_error};
use crate::list::ListError;

/// Path segments of the core/v1 API.
const CORE_V1: &[&str] = &["api", "v1"];

impl HttpSink {
    /// `/api/v1/namespaces/{ns}/events[/{name}]` (`/api/v1/events` for an empty namespace,
    /// as client-go builds it).
    fn events_url(&self, namespace: &str, name: Option<&str>) -> Result<Url, SinkError> {
        self.events_url_at(CORE_V1, namespace, name)
    }

    /// The sink's own `create` with the event's namespace.
    fn create_fut(&self, event: &Event) -> SinkFuture {
        let meta = &event.metadata;
        self.create_at(CORE_V1, &meta.namespace, &meta.name, event, None)
    }

    fn patch_fut(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        let meta = &event.metadata;
        self.patch_at(CORE_V1, &meta.namespace, &meta.name, patch, None)
    }

    /// `GET` of one event.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_core::SinkError> {
    /// match sink.get_event("default", "web-1.17a0c2b5d9e5f3a1").await {
    ///     Ok(e) => println!("count {}", e.count),
    ///     Err(e) if e.is_not_found() => println!("gone"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_event(&self, namespace: &str, name: &str) -> Result<Event, SinkError> {
        let url = self.events_url(namespace, Some(name))?;
        decode_event(self.send(Method::GET, url, &Body::Empty).await?)
    }

    /// `DELETE` of one event (what the server's TTL does; used by tests).
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_core::SinkError> {
    /// sink.delete_event("default", "web-1.17a0c2b5d9e5f3a1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_event(&self, namespace: &str, name: &str) -> Result<(), SinkError> {
        let url = self.events_url(namespace, Some(name))?;
        let answer = self.send(Method::DELETE, url, &Body::Empty).await?;
        if answer.status.is_success() {
            Ok(())
        } else {
            Err(status_error(&answer))
        }
    }

    /// Every event of `namespace` (all namespaces for `""`), read in pages of
    /// [`LIST_PAGE_SIZE`](crate::config::LIST_PAGE_SIZE), within the list limits
    /// ([`HttpConfig::max_list_pages`](crate::HttpConfig::max_list_pages) and
    /// [`max_list_bytes`](crate::HttpConfig::max_list_bytes)); a server that repeats a
    /// `continue` token is an error ([`ListError::RepeatedContinue`]), not an endless loop.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_http::ListError> {
    /// for e in sink.list_events("default").await? {
    ///     println!("{} {} x{} {}", e.type_, e.reason, e.count, e.message);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_events(&self, namespace: &str) -> Result<Vec<Event>, ListError> {
        self.list_all(CORE_V1, namespace).await
    }
}

impl EventSink for HttpSink {
    fn create(&self, event: &Event) -> SinkFuture {
        self.create_fut(event)
    }

    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        self.patch_fut(event, patch)
    }
}

/// A 2xx answer must carry an Event; anything else is the server's error.
fn decode_event(answer: Answer) -> Result<Event, SinkError> {
    decode_event_of(answer, None)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use http::StatusCode;

    use super::*;

    fn answer(code: u16, body: &str, retry_after: Option<u64>) -> Answer {
        Answer {
            status: StatusCode::from_u16(code).unwrap(),
            retry_after: retry_after.map(Duration::from_secs),
            body: Bytes::copy_from_slice(body.as_bytes()),
            oversized: false,
        }
    }

    #[test]
    fn success_body_must_be_an_event() {
        assert!(matches!(
            decode_event(answer(200, r#"{"kind":"Status"}"#, None)),
            Err(SinkError::UnexpectedObject(_))
        ));
        assert!(matches!(
            decode_event(answer(201, "nope", None)),
            Err(SinkError::UnexpectedObject(_))
        ));
        let e = decode_event(answer(
            201,
            r#"{"kind":"Event","metadata":{"name":"a","resourceVersion":"5"},"count":1}"#,
            None,
        ))
        .unwrap();
        assert_eq!(e.metadata.resource_version, "5");
    }
}
