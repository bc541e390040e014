//! What the request layer asks of a transport: one request ([`Request`]) sent, one bounded
//! answer ([`Response`]) read, within a deadline; the limits every sink shares ([`Limits`]
//! and the constants).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::answer::{Answer, retry_after_header};
use crate::status::{SinkError, sanitize_server_text_to};

/// Content type of JSON request bodies (creates, `SelfSubjectAccessReview`s).
pub const APPLICATION_JSON: &str = "application/json";
/// Content type of the record package's patches.
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";

/// Default deadline of one request (connect, send, and read the whole answer): 10 s.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request body kube-apiserver accepts (3 MiB): an event it stored can be this
/// large, and so can the echo of it.
pub const APISERVER_MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;
/// Default largest response body read (4 MiB, above [`APISERVER_MAX_REQUEST_BYTES`], so the
/// echo of anything the apiserver accepted fits); larger bodies are not read.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// Events asked for per page of a list (`limit`), as kubectl does.
pub const LIST_PAGE_SIZE: usize = 250;
/// Default most pages one list reads before it fails (`ListError::TooManyPages`): 10 000
/// pages of [`LIST_PAGE_SIZE`] are 2.5 million events.
pub const DEFAULT_MAX_LIST_PAGES: usize = 10_000;
/// Default most response bytes one list reads in total, all pages together (256 MiB); a
/// single page may use all of it.
pub const DEFAULT_MAX_LIST_BYTES: usize = 256 * 1024 * 1024;

/// The limits of a sink's requests.
///
/// ```
/// use kevents_core::request::{Limits, DEFAULT_MAX_RESPONSE_BYTES};
/// assert_eq!(Limits::default().max_response_bytes, DEFAULT_MAX_RESPONSE_BYTES);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The deadline of one request ([`DEFAULT_REQUEST_TIMEOUT`]).
    pub request_timeout: Duration,
    /// The largest response body read ([`DEFAULT_MAX_RESPONSE_BYTES`]).
    pub max_response_bytes: usize,
    /// Most pages one list reads ([`DEFAULT_MAX_LIST_PAGES`]).
    pub max_list_pages: usize,
    /// Most response bytes one list reads, all pages together ([`DEFAULT_MAX_LIST_BYTES`]).
    pub max_list_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_list_pages: DEFAULT_MAX_LIST_PAGES,
            max_list_bytes: DEFAULT_MAX_LIST_BYTES,
        }
    }
}

/// The HTTP method of a [`Request`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
    /// `PUT` (a whole object replaced, its `metadata.resourceVersion` checked: the
    /// optimistic concurrency of a Lease update).
    Put,
    /// `PATCH`.
    Patch,
    /// `DELETE`.
    Delete,
}

impl Method {
    /// The method's name: `GET`, `POST`, `PUT`, `PATCH`, `DELETE`.
    ///
    /// ```
    /// assert_eq!(kevents_core::request::Method::Patch.as_str(), "PATCH");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request to an apiserver, as the request layer hands it to a [`Transport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// Path and query from the apiserver's root, percent-encoded:
    /// `/api/v1/namespaces/default/events?limit=250`. A transport whose server URL has a
    /// path of its own puts this one after it.
    pub path: String,
    /// The body's content type ([`APPLICATION_JSON`], [`STRATEGIC_MERGE_PATCH`]); `None`
    /// without a body.
    pub content_type: Option<&'static str>,
    /// The body (empty for none).
    pub body: Vec<u8>,
    /// The deadline of the request: connect, send and the whole answer. Past it the
    /// transport answers [`SinkError::Timeout`] with it.
    pub timeout: Duration,
    /// The largest answer body read; a larger one is [`Response::oversized`]
    /// ([`ResponseReader`]).
    pub max_response_bytes: usize,
}

/// An answer as a transport read it: status, `Retry-After`, body up to the request's limit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Response {
    /// HTTP status code.
    pub code: u16,
    /// The `Retry-After` header ([`retry_after_header`]).
    pub retry_after: Option<Duration>,
    /// The body as read (at most [`Request::max_response_bytes`]).
    pub body: Vec<u8>,
    /// The body was larger than the limit and was not read (fully).
    pub oversized: bool,
}

impl Response {
    /// The answer as [`crate::answer`] decodes it.
    ///
    /// ```
    /// let r = kevents_core::request::Response { code: 503, ..Default::default() };
    /// assert_eq!(r.answer().status_error().code(), Some(503));
    /// ```
    pub fn answer(&self) -> Answer<'_> {
        Answer {
            code: self.code,
            retry_after: self.retry_after,
            body: &self.body,
            oversized: self.oversized,
        }
    }
}

/// Reads an answer body up to a limit, chunk by chunk, for a transport: a body whose
/// declared `Content-Length` is over the limit is not read at all, a chunk that would pass
/// the limit ends the reading (the body is [`Response::oversized`]).
///
/// ```
/// use kevents_core::request::ResponseReader;
/// let mut body = ResponseReader::new(8, Some("5"));
/// body.push(b"12345");
/// assert!(body.wants_more());
/// body.push(b"6789");
/// assert!(!body.wants_more());
/// let r = body.finish(200, Some("3"));
/// assert!(r.oversized);
/// assert_eq!(r.body, b"12345");
/// assert_eq!(r.retry_after, Some(std::time::Duration::from_secs(3)));
/// assert!(!ResponseReader::new(8, Some("9")).wants_more());
/// ```
#[derive(Debug)]
pub struct ResponseReader {
    buf: Vec<u8>,
    cap: usize,
    oversized: bool,
}

impl ResponseReader {
    /// A reader for at most `cap` bytes, given the answer's `Content-Length` header.
    pub fn new(cap: usize, content_length: Option<&str>) -> Self {
        let declared = content_length.and_then(|v| v.trim().parse::<u64>().ok());
        ResponseReader {
            buf: Vec::new(),
            cap,
            oversized: declared.is_some_and(|n| n > cap as u64),
        }
    }

    /// Whether the next chunk should be read (the limit is not passed yet).
    pub fn wants_more(&self) -> bool {
        !self.oversized
    }

    /// One chunk of the body; past the limit the body is oversized (the chunk is dropped).
    pub fn push(&mut self, chunk: &[u8]) {
        if self.oversized {
            return;
        }
        if self.buf.len() + chunk.len() > self.cap {
            self.oversized = true;
        } else {
            self.buf.extend_from_slice(chunk);
        }
    }

    /// The answer: status `code`, the `Retry-After` header value, the body read.
    pub fn finish(self, code: u16, retry_after: Option<&str>) -> Response {
        Response {
            code,
            retry_after: retry_after.and_then(retry_after_header),
            body: self.buf,
            oversized: self.oversized,
        }
    }
}

/// The future of [`Transport::send`].
pub type TransportFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Response, SinkError>> + Send + 'a>>;

/// Sends one request to an apiserver and reads its answer, bounded: all a sink differs in
/// (kevents-http's over reqwest with its own authentication and TLS, kevents-kube's over a
/// `kube::Client`). The requests, their answers' classification, lists, discovery and
/// preflight are [`Client`](super::Client)'s, written once over this trait.
///
/// A transport answers every status code as a [`Response`] (the request layer classifies
/// them); it fails only when no answer was read: [`SinkError::Timeout`] past
/// [`Request::timeout`], [`SinkError::Transport`] when the request could not be delivered
/// (retried), [`SinkError::Construction`] when it could not be built (not retried). Texts
/// it puts into an error are sanitised ([`error_chain`]). Cheap to clone.
///
/// ```
/// use kevents_core::request::{Client, Limits, Request, Response, Transport, TransportFuture};
/// use kevents_core::EventSink;
///
/// /// Answers every request with 404.
/// #[derive(Clone)]
/// struct Nothing;
/// impl Transport for Nothing {
///     fn send(&self, _request: Request) -> TransportFuture<'_> {
///         Box::pin(async { Ok(Response { code: 404, ..Default::default() }) })
///     }
///     fn limits(&self) -> Limits {
///         Limits::default()
///     }
/// }
/// fn takes_a_sink(_: impl EventSink) {}
/// takes_a_sink(Client::new(Nothing));
/// ```
pub trait Transport: Clone + Send + Sync + 'static {
    /// Sends `request`, reads its answer up to [`Request::max_response_bytes`] (a
    /// [`ResponseReader`] does it), all within [`Request::timeout`].
    fn send(&self, request: Request) -> TransportFuture<'_>;

    /// The limits of this transport's requests.
    fn limits(&self) -> Limits;
}

/// Logs one exchange of a transport at debug level: method, path without its query, status
/// or error, time taken, and which transport (`reqwest`, `kube`). Every transport calls it
/// once per request it sends.
pub fn log_exchange(
    transport: &'static str,
    method: Method,
    path: &str,
    started: std::time::Instant,
    result: &Result<Response, SinkError>,
) {
    // The path without its query (a list's `continue` token is the server's text).
    let path = path.split('?').next().unwrap_or("");
    let elapsed_ms = started.elapsed().as_millis() as u64;
    match result {
        Ok(a) => tracing::debug!(method = %method, path, status = a.code, elapsed_ms, transport,
            "apiserver request"),
        Err(e) => tracing::debug!(method = %method, path, error = %e, elapsed_ms, transport,
            "apiserver request failed"),
    }
}

/// An error and its sources as one line, sanitised: it can carry server-provided text (the
/// names in a certificate, a proxy's answer).
///
/// ```
/// let e = std::io::Error::other("reset \u{1b}[2J");
/// assert_eq!(kevents_core::request::error_chain(&e), "reset \\u{1b}[2J");
/// ```
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cur = c.source();
    }
    sanitize_server_text_to(&s, 1024)
}
