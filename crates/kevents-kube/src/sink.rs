//! [`KubeSink`]: the event sinks of both APIs over an existing [`kube::Client`]. This file is
//! the transport half: request building, the per-request deadline, bounded body reads and
//! the mapping of `kube::Error` to [`SinkError`]; answers are decoded by
//! [`kevents_core::answer`], exactly as the HTTP sink of `kevents-http` decodes them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{Method, Request};
use http_body_util::BodyExt;
use kevents_core::answer::{self, Answer};
use kevents_core::status::sanitize_server_text_to;
use kevents_core::{SinkError, Stored};

/// Content type of the record package's patches.
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";

/// Default deadline of one request (connect, send, whole answer): 10 s, as kevents-http's.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default limit of one response body: 4 MiB (above the largest request kube-apiserver
/// accepts, 3 MiB, so the echo of any stored event can be read), as kevents-http's.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;
/// Events per list page (`limit`), as kubectl and kevents-http.
pub const LIST_PAGE_SIZE: usize = 250;
/// Default limit of pages one list reads.
pub const DEFAULT_MAX_LIST_PAGES: usize = 10_000;
/// Default limit of response bytes one list reads, all pages together: 256 MiB.
pub const DEFAULT_MAX_LIST_BYTES: usize = 256 * 1024 * 1024;

/// An [`EventSink`](kevents_core::EventSink) (core/v1) and
/// [`EventsV1Sink`](kevents_core::events_v1::EventsV1Sink) (`events.k8s.io/v1`) that sends its
/// requests through an existing [`kube::Client`]: the application's authentication (including
/// exec plugins and token refresh), proxy, TLS and tower middleware are used as they are.
///
/// Requests and their classification are those of kevents-http's `HttpSink` (see
/// `docs/http.md`, "Error classification"): `POST` of the event's Go-identical JSON, `PATCH`
/// with strategic-merge-patch bytes, a 2xx must carry an Event, any other answer becomes a
/// sanitised [`SinkError::Status`] (`Retry-After` kept), bodies are read up to
/// [`max_response_bytes`](KubeSink::with_max_response_bytes), every request has a deadline
/// ([`with_request_timeout`](KubeSink::with_request_timeout), [`SinkError::Timeout`]), and a
/// request the client cannot deliver is [`SinkError::Transport`] (retried by the pipeline).
///
/// kube's client retries 429, 503 and 504 itself unless its `Config::default_retry` is off;
/// those retries happen inside one kevents attempt (within its deadline), and what is left is
/// classified and retried by the pipeline.
///
/// Cheap to clone. Needs a tokio runtime (actix's is one). `Debug` shows no credential.
///
/// ```no_run
/// use kevents_core::{Event, EventSink};
/// use kevents_kube::KubeSink;
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube::Client::try_default().await?; // the application's own client
/// let sink = KubeSink::new(client);
/// let mut event = Event::default();
/// event.metadata.name = "web-1.17a0c2b5d9e5f3a1".into();
/// event.metadata.namespace = "default".into();
/// event.involved_object.namespace = "default".into();
/// event.count = 1;
/// // The server's copy (`Stored::AsSent` only when its echo was over the response limit).
/// if let Some(stored) = sink.create(&event).await?.returned() {
///     println!("stored with resourceVersion {}", stored.metadata.resource_version);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct KubeSink {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) client: kube::Client,
    pub(crate) timeout: Duration,
    pub(crate) max_body: usize,
    pub(crate) max_list_pages: usize,
    pub(crate) max_list_bytes: usize,
}

impl std::fmt::Debug for KubeSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSink")
            .field("default_namespace", &self.inner.client.default_namespace())
            .field("timeout", &self.inner.timeout)
            .field("max_body", &self.inner.max_body)
            .finish_non_exhaustive()
    }
}

/// A request body.
pub(crate) enum Body {
    Empty,
    Json(Bytes),
    Patch(Bytes),
}

/// An answer as read: status, `Retry-After`, body up to the cap.
pub(crate) struct Read {
    pub(crate) code: u16,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) body: Bytes,
    pub(crate) oversized: bool,
}

impl Read {
    pub(crate) fn view(&self) -> Answer<'_> {
        Answer {
            code: self.code,
            retry_after: self.retry_after,
            body: &self.body,
            oversized: self.oversized,
        }
    }
}

/// An error and its sources as one line, sanitised (it can carry server-provided text).
fn error_chain(e: &dyn std::error::Error) -> String {
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

/// `kube::Error` of a request that got no answer, as a [`SinkError`]. Authentication errors
/// are reported without their text: an exec plugin's failure message quotes its output.
fn kube_error(e: &kube::Error) -> SinkError {
    match e {
        kube::Error::Auth(_) => SinkError::Transport(
            "the kube client could not authenticate the request (details withheld: they may quote credential plugin output)".into(),
        ),
        kube::Error::HttpError(_) | kube::Error::BuildRequest(_) => {
            SinkError::Construction(error_chain(e))
        }
        _ => SinkError::Transport(error_chain(e)),
    }
}

/// Percent-encodes one path segment (everything but RFC 3986's unreserved characters).
fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-encodes a query value.
/// Every namespace and name a write puts into a URL: a namespace is a DNS-1123 label (or
/// empty), a name a DNS-1123 subdomain, as the apiserver accepts for events (and as
/// kevents-http checks): no `.`, `..`, empty or escaped segment reaches a path; anything else
/// is [`SinkError::Construction`] and nothing is sent.
fn check_path_names(namespace: &str, name: Option<&str>) -> Result<(), SinkError> {
    use kevents_core::name::{is_dns1123_label, is_dns1123_subdomain};
    let shown = |s: &str| {
        s.chars()
            .take(100)
            .collect::<String>()
            .escape_debug()
            .to_string()
    };
    if !namespace.is_empty() && !is_dns1123_label(namespace) {
        return Err(SinkError::Construction(format!(
            "namespace \"{}\" is not a DNS-1123 label",
            shown(namespace)
        )));
    }
    match name {
        Some(n) if !is_dns1123_subdomain(n) => Err(SinkError::Construction(format!(
            "event name \"{}\" is not a DNS-1123 subdomain",
            shown(n)
        ))),
        _ => Ok(()),
    }
}

pub(crate) fn query_value(s: &str) -> String {
    segment(s)
}

impl KubeSink {
    /// A sink over `client`, with kevents-http's defaults: 10 s per request, 4 MiB per answer,
    /// lists of at most 10 000 pages and 256 MiB.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), kube::Error> {
    /// let sink = kevents_kube::KubeSink::new(kube::Client::try_default().await?);
    /// # Ok(()) }
    /// ```
    pub fn new(client: kube::Client) -> Self {
        KubeSink {
            inner: Arc::new(Inner {
                client,
                timeout: DEFAULT_REQUEST_TIMEOUT,
                max_body: DEFAULT_MAX_RESPONSE_BYTES,
                max_list_pages: DEFAULT_MAX_LIST_PAGES,
                max_list_bytes: DEFAULT_MAX_LIST_BYTES,
            }),
        }
    }

    fn with_inner(self, f: impl FnOnce(&mut Inner)) -> Self {
        let mut inner = Inner {
            client: self.inner.client.clone(),
            timeout: self.inner.timeout,
            max_body: self.inner.max_body,
            max_list_pages: self.inner.max_list_pages,
            max_list_bytes: self.inner.max_list_bytes,
        };
        f(&mut inner);
        KubeSink {
            inner: Arc::new(inner),
        }
    }

    /// The deadline of one request: connect, send, kube's own retries and the whole answer
    /// (default [`DEFAULT_REQUEST_TIMEOUT`]). Past it the result is [`SinkError::Timeout`].
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) {
    /// let sink = kevents_kube::KubeSink::new(client)
    ///     .with_request_timeout(std::time::Duration::from_secs(5));
    /// # }
    /// ```
    pub fn with_request_timeout(self, timeout: Duration) -> Self {
        self.with_inner(|i| i.timeout = timeout)
    }

    /// The largest response body read (default [`DEFAULT_MAX_RESPONSE_BYTES`]); a larger
    /// answer is treated as kevents-http treats it (`docs/http.md`).
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) {
    /// let sink = kevents_kube::KubeSink::new(client).with_max_response_bytes(1 << 20);
    /// # }
    /// ```
    pub fn with_max_response_bytes(self, bytes: usize) -> Self {
        self.with_inner(|i| i.max_body = bytes)
    }

    /// The list limits: most pages and most response bytes of one list, all pages together
    /// (defaults [`DEFAULT_MAX_LIST_PAGES`], [`DEFAULT_MAX_LIST_BYTES`]).
    ///
    /// ```no_run
    /// # async fn f(client: kube::Client) {
    /// let sink = kevents_kube::KubeSink::new(client).with_list_limits(100, 16 << 20);
    /// # }
    /// ```
    pub fn with_list_limits(self, pages: usize, bytes: usize) -> Self {
        self.with_inner(|i| {
            i.max_list_pages = pages;
            i.max_list_bytes = bytes;
        })
    }

    /// The client requests go through.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_kube::KubeSink) -> Result<(), kube::Error> {
    /// let version = sink.client().apiserver_version().await?;
    /// # Ok(()) }
    /// ```
    pub fn client(&self) -> &kube::Client {
        &self.inner.client
    }

    /// The client's default namespace (kubeconfig context or the pod's).
    ///
    /// ```no_run
    /// # fn f(sink: kevents_kube::KubeSink) {
    /// println!("events go to {} unless the object says otherwise", sink.default_namespace());
    /// # }
    /// ```
    pub fn default_namespace(&self) -> &str {
        self.inner.client.default_namespace()
    }

    /// `{prefix}/namespaces/{ns}/events[/{name}]` (`{prefix}/events` for an empty namespace,
    /// as client-go builds it), segments percent-encoded.
    pub(crate) fn events_path(prefix: &str, namespace: &str, name: Option<&str>) -> String {
        let mut p = String::from(prefix);
        if !namespace.is_empty() {
            p.push_str("/namespaces/");
            p.push_str(&segment(namespace));
        }
        p.push_str("/events");
        if let Some(n) = name {
            p.push('/');
            p.push_str(&segment(n));
        }
        p
    }

    /// One request to `path` (with its query), the answer read up to the response limit.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        body: Body,
    ) -> Result<Read, SinkError> {
        self.send_capped(method, path, body, self.inner.max_body)
            .await
    }

    /// One request, its answer read up to `cap` bytes, within the request deadline.
    pub(crate) async fn send_capped(
        &self,
        method: Method,
        path: &str,
        body: Body,
        cap: usize,
    ) -> Result<Read, SinkError> {
        let started = Instant::now();
        let mut req = Request::builder()
            .method(method.clone())
            .uri(path)
            .header(ACCEPT, "application/json");
        let body = match body {
            Body::Empty => kube::client::Body::empty(),
            Body::Json(b) => {
                req = req.header(CONTENT_TYPE, "application/json");
                kube::client::Body::from(b)
            }
            Body::Patch(b) => {
                req = req.header(CONTENT_TYPE, STRATEGIC_MERGE_PATCH);
                kube::client::Body::from(b)
            }
        };
        let req = req
            .body(body)
            .map_err(|e| SinkError::Construction(error_chain(&e)))?;
        let timeout = self.inner.timeout;
        let client = self.inner.client.clone();
        let exchange = async move {
            let resp = client.send(req).await.map_err(|e| kube_error(&e))?;
            let code = resp.status().as_u16();
            let headers = resp.headers();
            let retry_after = headers
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(answer::retry_after_header);
            let declared = headers
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            let mut oversized = declared.is_some_and(|n| n > cap as u64);
            let mut buf = BytesMut::new();
            if !oversized {
                let mut body = resp.into_body();
                while let Some(frame) = body.frame().await {
                    let frame = frame.map_err(|e| kube_error(&e))?;
                    if let Ok(chunk) = frame.into_data() {
                        if buf.len() + chunk.len() > cap {
                            oversized = true;
                            break;
                        }
                        buf.extend_from_slice(&chunk);
                    }
                }
            }
            Ok(Read {
                code,
                retry_after,
                body: buf.freeze(),
                oversized,
            })
        };
        let result = match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(SinkError::Timeout(timeout)),
        };
        let path_only = path.split('?').next().unwrap_or(path);
        match &result {
            Ok(a) => tracing::debug!(
                method = %method,
                path = path_only,
                status = a.code,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "apiserver request (kube client)"
            ),
            Err(e) => tracing::debug!(
                method = %method,
                path = path_only,
                error = %e,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "apiserver request failed (kube client)"
            ),
        }
        result
    }

    /// `POST` of `event`'s JSON to `{prefix}/namespaces/{ns}/events`, decoded with
    /// `api_version`; a 2xx whose echo is over the limit counts as stored as sent (as
    /// kevents-http).
    pub(crate) fn create_at<T, R>(
        &self,
        prefix: &'static str,
        namespace: &str,
        name: &str,
        event: &T,
        api_version: Option<&'static str>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Stored<R>, SinkError>> + Send + 'static>,
    >
    where
        T: serde::Serialize + ?Sized,
        R: serde::de::DeserializeOwned + 'static,
    {
        let this = self.clone();
        let checked = check_path_names(namespace, Some(name));
        let path = Self::events_path(prefix, namespace, None);
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        let encoded = kevents_core::json::to_vec(event)
            .map(Bytes::from)
            .map_err(|e| SinkError::Construction(e.to_string()));
        Box::pin(async move {
            checked?;
            let sent = encoded?;
            let read = this.send(Method::POST, &path, Body::Json(sent)).await?;
            if read.view().is_success() && read.oversized {
                return Ok(stored_as_sent(&read, "create", this.inner.max_body));
            }
            read.view()
                .decode_written::<R>(api_version, &namespace, &name)
                .map(Stored::from)
        })
    }

    /// `PATCH {prefix}/namespaces/{ns}/events/{name}` with strategic-merge-patch bytes; a
    /// 2xx whose echo is over the limit counts as stored as sent.
    pub(crate) fn patch_at<R>(
        &self,
        prefix: &'static str,
        namespace: &str,
        name: &str,
        patch: &[u8],
        api_version: Option<&'static str>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Stored<R>, SinkError>> + Send + 'static>,
    >
    where
        R: serde::de::DeserializeOwned + 'static,
    {
        let this = self.clone();
        let checked = check_path_names(namespace, Some(name));
        let path = Self::events_path(prefix, namespace, Some(name));
        let (namespace, name) = (namespace.to_owned(), name.to_owned());
        let body = Bytes::copy_from_slice(patch);
        Box::pin(async move {
            checked?;
            let read = this.send(Method::PATCH, &path, Body::Patch(body)).await?;
            if read.view().is_success() && read.oversized {
                return Ok(stored_as_sent(&read, "patch", this.inner.max_body));
            }
            read.view()
                .decode_written::<R>(api_version, &namespace, &name)
                .map(Stored::from)
        })
    }

    /// Whether the apiserver serves an API group version: `GET path` answered 2xx (`true`)
    /// or 404 (`false`); any other answer is an error.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_kube::KubeSink) -> Result<(), kevents_core::SinkError> {
    /// let served = sink.api_served("/apis/events.k8s.io/v1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn api_served(&self, path: &str) -> Result<bool, SinkError> {
        let segs: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(segment)
            .collect();
        let path = format!("/{}", segs.join("/"));
        let read = self.send(Method::GET, &path, Body::Empty).await?;
        match read.code {
            200..=299 => Ok(true),
            404 => Ok(false),
            _ => Err(read.view().status_error()),
        }
    }
}

/// A 2xx answer to a create or patch whose body is over the size limit: stored (the 2xx says
/// so), answered [`Stored::AsSent`] (see kevents-http's `docs/http.md`).
fn stored_as_sent<R>(read: &Read, verb: &str, limit: usize) -> Stored<R> {
    tracing::warn!(
        status = read.code,
        limit,
        verb,
        "apiserver answer larger than the response size limit: the event counts as stored, as sent"
    );
    Stored::AsSent
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_encoded() {
        assert_eq!(
            KubeSink::events_path("/api/v1", "default", Some("a.b")),
            "/api/v1/namespaces/default/events/a.b"
        );
        assert_eq!(KubeSink::events_path("/api/v1", "", None), "/api/v1/events");
        assert_eq!(
            KubeSink::events_path("/api/v1", "x/y", Some("a b?")),
            "/api/v1/namespaces/x%2Fy/events/a%20b%3F"
        );
    }
}
