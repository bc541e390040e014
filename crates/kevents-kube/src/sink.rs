//! [`KubeSink`]: the event sinks of both APIs over an existing [`kube::Client`]. This file is
//! the transport ([`Transport`]): one request through the client, its deadline, its answer
//! read with a size limit, and the mapping of `kube::Error` to [`SinkError`]. The requests
//! themselves, their answers' classification, lists and preflight are
//! [`kevents_core::request`]'s, shared with kevents-http's sink
//! (`requests()`, the one door to them; the sink traits forward to it).

use std::sync::Arc;
use std::time::Instant;

use http::Request as HttpRequest;
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http_body_util::BodyExt;
use kevents_core::SinkError;
use kevents_core::request::{
    APPLICATION_JSON, Client, Limits, Request, Response, ResponseReader, Transport,
    TransportFuture, error_chain, log_exchange,
};

pub use kevents_core::request::{
    DEFAULT_MAX_LIST_BYTES, DEFAULT_MAX_LIST_PAGES, DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_TIMEOUT, LIST_PAGE_SIZE, STRATEGIC_MERGE_PATCH,
};

/// An [`EventSink`](kevents_core::EventSink) (core/v1) and
/// [`events_v1::EventSink`](kevents_core::events_v1::EventSink) (`events.k8s.io/v1`) that sends its
/// requests through an existing [`kube::Client`]: the application's authentication (including
/// exec plugins and token refresh), proxy, TLS and tower middleware are used as they are.
///
/// Requests and their classification are [`kevents_core::request::Client`]'s, the same as
/// kevents-http's `HttpSink` (see `docs/http.md`, "Error classification"): `POST` of the event's Go-identical JSON, `PATCH`
/// with strategic-merge-patch bytes, a 2xx must carry an Event, any other answer becomes a
/// sanitised [`SinkError::Status`] (`Retry-After` kept), bodies are read up to
/// [`max_response_bytes`](KubeSink::with_max_response_bytes), every request has a deadline
/// ([`with_request_timeout`](KubeSink::with_request_timeout), [`SinkError::Timeout`]), and a
/// request the client cannot deliver is [`SinkError::Transport`] (retried by the pipeline).
///
/// Its other requests are its [`requests`](KubeSink::requests), the request layer's:
///
/// ```no_run
/// # async fn f(sink: kevents_kube::KubeSink) -> Result<(), Box<dyn std::error::Error>> {
/// let requests = sink.requests();
/// let report = requests.preflight(&kevents_core::preflight::PreflightPlan::discover(["a"])).await?;
/// let (v1, any) = (requests.events_v1_served().await?, requests.api_served("/api/v1").await?);
/// let listed = (requests.list_events("a").await?.len(), requests.events_v1().list_events("a").await?.len());
/// let first = requests.get_event("a", "web.1").await?;
/// let series = requests.events_v1().get_event("a", "web.1").await?.series;
/// requests.delete_event("a", "web.1").await?;
/// # Ok(()) }
/// ```
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
    inner: Arc<Inner>,
}

struct Inner {
    client: kube::Client,
    limits: Limits,
}

impl std::fmt::Debug for KubeSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSink")
            .field("default_namespace", &self.inner.client.default_namespace())
            .field("timeout", &self.inner.limits.request_timeout)
            .field("max_body", &self.inner.limits.max_response_bytes)
            .finish_non_exhaustive()
    }
}

/// `kube::Error` of a request that got no answer, as a [`SinkError`]. Authentication errors
/// are reported without their text: an exec plugin's failure message quotes its output.
pub(crate) fn kube_error(e: &kube::Error) -> SinkError {
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
                limits: Limits::default(),
            }),
        }
    }

    fn with_limits(self, f: impl FnOnce(&mut Limits)) -> Self {
        let mut limits = self.inner.limits;
        f(&mut limits);
        KubeSink {
            inner: Arc::new(Inner {
                client: self.inner.client.clone(),
                limits,
            }),
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
    pub fn with_request_timeout(self, timeout: std::time::Duration) -> Self {
        self.with_limits(|l| l.request_timeout = timeout)
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
        self.with_limits(|l| l.max_response_bytes = bytes)
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
        self.with_limits(|l| {
            l.max_list_pages = pages;
            l.max_list_bytes = bytes;
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

    /// The requests of this sink, the one door to them: creates and patches of both event
    /// APIs (as the sink traits make them), gets, deletes, bounded lists, discovery and
    /// preflight ([`kevents_core::request::Client`] over this sink). A create whose event
    /// name is not a DNS-1123 subdomain is refused before it is sent, as a patch's is.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_kube::KubeSink) -> Result<(), kevents_kube::ListError> {
    /// let events = sink.requests().events_v1().list_events("default").await?;
    /// println!("{} events.k8s.io/v1 events in default", events.len());
    /// # Ok(()) }
    /// ```
    pub fn requests(&self) -> Client<KubeSink> {
        Client::new(self.clone()).check_created_names(true)
    }
}

// EventSink, events_v1::EventSink and PreflightApi: the request layer's, through `requests`.
kevents_core::__request_sink!(KubeSink);

/// One request through the kube client, its answer read up to the request's limit, within
/// its deadline.
impl Transport for KubeSink {
    fn send(&self, request: Request) -> TransportFuture<'_> {
        Box::pin(async move {
            let started = Instant::now();
            let method = request.method;
            let timeout = request.timeout;
            let cap = request.max_response_bytes;
            let path = request.path;
            let mut req = HttpRequest::builder()
                .method(method.as_str())
                .uri(path.as_str())
                .header(ACCEPT, APPLICATION_JSON);
            if let Some(content_type) = request.content_type {
                req = req.header(CONTENT_TYPE, content_type);
            }
            let body = match request.content_type {
                None => kube::client::Body::empty(),
                Some(_) => kube::client::Body::from(bytes::Bytes::from(request.body)),
            };
            let req = req
                .body(body)
                .map_err(|e| SinkError::Construction(error_chain(&e)))?;
            let client = self.inner.client.clone();
            let exchange = async move {
                let resp = client.send(req).await.map_err(|e| kube_error(&e))?;
                let code = resp.status().as_u16();
                let (retry_after, mut read) = {
                    let header = |name| resp.headers().get(name).and_then(|v| v.to_str().ok());
                    let read = ResponseReader::new(cap, header(CONTENT_LENGTH));
                    (header(RETRY_AFTER).map(str::to_owned), read)
                };
                let mut body = resp.into_body();
                while read.wants_more() {
                    let Some(frame) = body.frame().await else {
                        break;
                    };
                    let frame = frame.map_err(|e| kube_error(&e))?;
                    if let Ok(chunk) = frame.into_data() {
                        read.push(&chunk);
                    }
                }
                Ok::<Response, SinkError>(read.finish(code, retry_after.as_deref()))
            };
            let result = match tokio::time::timeout(timeout, exchange).await {
                Ok(r) => r,
                Err(_) => Err(SinkError::Timeout(timeout)),
            };
            log_exchange("kube", method, &path, started, &result);
            result
        })
    }

    fn limits(&self) -> Limits {
        self.inner.limits
    }
}
