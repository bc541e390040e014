//! One request layer for every apiserver sink: the requests of both event APIs, their
//! answers' classification, bounded paginated lists, discovery and preflight, written once
//! ([`Client`]) over a [`Transport`] that sends one request and reads its bounded answer.
//! kevents-http's `HttpSink` (reqwest, its own authentication and TLS) and kevents-kube's
//! `KubeSink` (an application's `kube::Client`) are transports; so can a test double be.
//! No IO here: a trait and async logic over it, decoding by [`crate::answer`].
//!
//! Source layout: `transport.rs` ([`Transport`], [`Request`], [`Response`],
//! [`ResponseReader`], [`Limits`] and the default limits), `client.rs` ([`Client`], paths
//! and name checks, discovery, `GET`, `DELETE`), `write.rs` (creates and patches,
//! [`EventSink`](crate::EventSink) and [`events_v1::EventSink`](crate::events_v1::EventSink) for
//! [`Client`]), `list.rs` (lists, [`ListError`]), `preflight.rs`
//! ([`PreflightApi`](crate::preflight::PreflightApi) for [`Client`]), `stream.rs`
//! ([`StreamTransport`]: a `GET` held open, its answer read as bounded lines by [`LineStream`];
//! the one door for watches) and `forward.rs`
//! (`__request_sink!`, not public API: kevents' own sinks' trait implementations, forwarded
//! to [`Client`]). A sink's requests are its `requests()`, a [`Client`]: the one door to
//! them. A transport of your own is a sink through `Client::new(it)`.
//!
//! ```
//! use kevents_core::request::{Client, Limits, Request, Response, Transport, TransportFuture};
//! use kevents_core::{Event, EventSink, SinkError};
//!
//! /// Answers every request 429 with `Retry-After: 3`.
//! #[derive(Clone)]
//! struct Busy;
//! impl Transport for Busy {
//!     fn send(&self, request: Request) -> TransportFuture<'_> {
//!         assert_eq!(request.path, "/api/v1/namespaces/default/events");
//!         Box::pin(async {
//!             Ok(Response { code: 429, retry_after: Some(std::time::Duration::from_secs(3)),
//!                           ..Default::default() })
//!         })
//!     }
//!     fn limits(&self) -> Limits {
//!         Limits::default()
//!     }
//! }
//!
//! let mut event = Event::default();
//! event.metadata.namespace = "default".into();
//! event.metadata.name = "web-1.17a0c2b5d9e5f3a1".into();
//! let created = Client::new(Busy).create(&event);
//! # let mut created = std::pin::pin!(created);
//! # let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
//! # let std::task::Poll::Ready(result) = created.as_mut().poll(&mut cx) else { panic!() };
//! let err = result.unwrap_err();
//! assert_eq!(err.retry_after(), Some(std::time::Duration::from_secs(3)));
//! assert_eq!(err.disposition(), kevents_core::Disposition::Retry);
//! ```

mod client;
mod events_v1;
mod forward;
mod list;
mod preflight;
mod stream;
mod transport;
mod write;

pub use client::{
    CORE_V1_PATH, Client, EVENTS_V1_PATH, answer_too_large, check_path_names, encode_path,
    encode_segment, events_path,
};
pub use events_v1::EventsV1Client;
pub use list::ListError;
pub use stream::{
    ChunkFuture, ChunkSource, LineStream, StreamFuture, StreamRequest, StreamTransport,
};
pub use transport::{
    APISERVER_MAX_REQUEST_BYTES, APPLICATION_JSON, DEFAULT_MAX_LIST_BYTES, DEFAULT_MAX_LIST_PAGES,
    DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_REQUEST_TIMEOUT, LIST_PAGE_SIZE, Limits, Method, Request,
    Response, ResponseReader, STRATEGIC_MERGE_PATCH, Transport, TransportFuture, error_chain,
    log_exchange,
};

#[cfg(test)]
mod tests;
