//! [`HttpSink`], the transport of both event APIs over HTTP(S): building the client (TLS,
//! proxy, impersonation), request URLs under the cluster URL, the authorization header (and
//! one retry after a 401 with a rotated token file), bounded body reads, `/version` and
//! `/metrics`. The requests themselves, their answers' classification, lists, discovery and
//! preflight are [`kevents_core::request`]'s ([`Client`]), shared with kevents-kube's sink.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderName, HeaderValue};
use kevents_core::SinkError;
use kevents_core::answer::unexpected_object as unexpected;
use kevents_core::request::{
    APPLICATION_JSON, Client, Limits, Request, Response, ResponseReader, Transport,
    TransportFuture, error_chain, log_exchange,
};

use reqwest::Url;
use serde::Deserialize;

use crate::auth::{AuthHeader, Credential};
use crate::config::{ClientIdentity, ConfigError, HttpConfig, redact_url};

pub use kevents_core::request::STRATEGIC_MERGE_PATCH;

/// An [`EventSink`](kevents_core::EventSink) over HTTP(S) to a Kubernetes apiserver, writing
/// core/v1 Events exactly as client-go's `EventSinkImpl` does:
/// `POST /api/v1/namespaces/{ns}/events` with the event's Go-identical JSON,
/// `PATCH /api/v1/namespaces/{ns}/events/{name}` with the given strategic-merge-patch bytes.
/// Errors are classified into [`SinkError`] (see
/// `docs/http.md`); retrying is the caller's job ([`SinkError::disposition`]).
///
/// Cheap to clone (one shared connection pool). Needs a tokio runtime (actix's is one).
/// `Debug` shows no credential.
///
/// ```no_run
/// use kevents_core::{write_event, Event, EventSink};
/// use kevents_http::{HttpConfig, HttpSink};
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let sink = HttpSink::new(HttpConfig::from_kubeconfig(None, None).await?)?;
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
///
/// Reads, discovery and preflight: its [`requests`](HttpSink::requests), the request layer's
/// `kevents_core::request::Client` over it:
///
/// ```no_run
/// use kevents_core::preflight::PreflightPlan;
/// # async fn f(sink: kevents_http::HttpSink) -> Result<(), Box<dyn std::error::Error>> {
/// let requests = sink.requests();
/// if !requests.events_v1_served().await? {
///     println!("falling back to core/v1 events");
/// }
/// for e in requests.list_events("default").await? {
///     println!("{} {} x{} {}", e.type_, e.reason, e.count, e.message);
/// }
/// match requests.get_event("default", "web-1.17a0c2b5d9e5f3a1").await {
///     Ok(e) => println!("count {}", e.count),
///     Err(e) if e.is_not_found() => println!("gone"),
///     Err(e) => return Err(e.into()),
/// }
/// requests.delete_event("default", "web-1.17a0c2b5d9e5f3a1").await?;
/// let v1 = requests.events_v1().list_events("").await?;
/// let one = requests.events_v1().get_event("default", "web-1.17a0c2b5d9e5f3a1").await?;
/// let served = requests.api_served("/apis/events.k8s.io/v1").await?;
/// let report = requests
///     .preflight(&PreflightPlan::discover(["team-a"]).reporter("example.com/ctl", "ctl-1"))
///     .await?;
/// # Ok(()) }
/// ```
///
/// `events.k8s.io/v1` ([`events_v1::EventSink`](kevents_core::events_v1::EventSink)):
/// `POST`/`PATCH /apis/events.k8s.io/v1/namespaces/{ns}/events[/{name}]`, the event's JSON
/// and the series patch as `application/strategic-merge-patch+json`, answers decoded as for
/// core/v1:
///
/// ```no_run
/// use kevents_core::events_v1::{Occurrence, EventFactory, write_once, Reporter, SeriesCache,
///                            SeriesOptions};
/// use kevents_core::{Clock, EventType, ObjectReference, SystemClock};
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let now = SystemClock.now();
/// let sink = kevents_http::HttpSink::infer().await?;
/// let factory = EventFactory::new(Reporter::new("example.com/ctl"));
/// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
/// let e = factory.make(now, Occurrence::new(pod, None, EventType::Normal,
///                      "Scheduled", "Binding", "bound"))?;
/// let mut cache = SeriesCache::new(SeriesOptions::default());
/// for w in cache.observe(e, now) {
///     let out = write_once(&sink, w).await;
///     cache.on_write_result(&out.sent, &out.result);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct HttpSink {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// The client with the configuration's TLS identity.
    client: reqwest::Client,
    /// The configuration, to build a client with another client certificate.
    config: HttpConfig,
    /// The client for the client certificate an exec plugin returned last.
    exec_client: std::sync::Mutex<Option<(Arc<ClientIdentity>, reqwest::Client)>>,
    base: Url,
    default_namespace: String,
    auth: AuthHeader,
    extra_headers: Vec<(HeaderName, HeaderValue)>,
    limits: Limits,
}

impl std::fmt::Debug for HttpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSink")
            .field("base", &redact_url(&self.inner.base))
            .field("auth", &self.inner.auth.kind())
            .field("timeout", &self.inner.limits.request_timeout)
            .field("max_body", &self.inner.limits.max_response_bytes)
            .finish_non_exhaustive()
    }
}

/// What `GET /version` answers.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServerVersion {
    /// `1`.
    pub major: String,
    /// `20`.
    pub minor: String,
    /// `v1.20.2`.
    pub git_version: String,
}

/// The reqwest client for `config`: its TLS configuration (CA, client certificate, server
/// name), proxy, timeouts, no redirects, no environment proxies.
fn build_client(config: &HttpConfig) -> Result<reqwest::Client, ConfigError> {
    let tls = crate::tls::client_config(config)?;
    let mut builder = reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(config.user_agent.clone())
        .connect_timeout(config.connect_timeout)
        .timeout(config.request_timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .tcp_keepalive(Duration::from_secs(30))
        .no_proxy();
    if let Some(proxy) = &config.proxy_url {
        builder = builder.proxy(reqwest::Proxy::all(proxy.clone()).map_err(|e| {
            ConfigError::Client(format!(
                "proxy-url {}: {}",
                redact_url(proxy),
                error_chain(&e.without_url())
            ))
        })?);
    }
    builder
        .build()
        .map_err(|e| ConfigError::Client(error_chain(&e)))
}

fn header_err(e: impl std::fmt::Display) -> ConfigError {
    ConfigError::Unsupported(format!("impersonation header: {e}"))
}

impl HttpSink {
    /// Builds the sink (HTTP client, TLS configuration, credentials) after
    /// [`HttpConfig::validate`]. Fails on unusable certificates or keys and on credentials
    /// for a plain `http://` server, never on network problems: nothing is sent yet.
    ///
    /// ```
    /// use kevents_http::{ConfigError, HttpConfig, HttpSink};
    /// let sink = HttpSink::new(HttpConfig::new("https://127.0.0.1:6443")?.with_token("t0ken"))?;
    /// assert!(!format!("{sink:?}").contains("t0ken"));
    /// let clear = HttpSink::new(HttpConfig::new("http://10.0.0.1:8080")?.with_token("t0ken"));
    /// assert!(matches!(clear, Err(ConfigError::CredentialsOverHttp { .. })));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn new(config: HttpConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let client = build_client(&config)?;
        let mut extra_headers = Vec::new();
        if let Some(imp) = &config.impersonation {
            let user = HeaderName::from_static("impersonate-user");
            extra_headers.push((user, HeaderValue::try_from(&imp.user).map_err(header_err)?));
            if let Some(uid) = &imp.uid {
                let name = HeaderName::from_static("impersonate-uid");
                extra_headers.push((name, HeaderValue::try_from(uid).map_err(header_err)?));
            }
            for g in &imp.groups {
                let name = HeaderName::from_static("impersonate-group");
                extra_headers.push((name, HeaderValue::try_from(g).map_err(header_err)?));
            }
        }
        Ok(HttpSink {
            inner: Arc::new(Inner {
                client,
                exec_client: std::sync::Mutex::new(None),
                base: config.cluster_url.clone(),
                default_namespace: config.default_namespace.clone(),
                auth: AuthHeader::new(&config.auth)?,
                extra_headers,
                limits: Limits {
                    request_timeout: config.request_timeout,
                    max_response_bytes: config.max_response_bytes,
                    max_list_pages: config.max_list_pages,
                    max_list_bytes: config.max_list_bytes,
                },
                config,
            }),
        })
    }

    /// Obtains the credential requests are sent with, now, without sending anything: reads
    /// the token file, runs the exec credential plugin (unless its credential is cached and
    /// fresh, or the plugin is backing off after a failure). A tool calls it before its first
    /// request so that a credential problem is reported as one (the plugin or file named),
    /// not as a failed request; requests obtain the credential by themselves anyway.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) {
    /// if let Err(e) = sink.authenticate().await {
    ///     eprintln!("cannot get a credential: {e}");
    /// }
    /// # }
    /// ```
    pub async fn authenticate(&self) -> Result<(), ConfigError> {
        self.inner
            .auth
            .current()
            .await
            .map(drop)
            .map_err(Into::into)
    }

    /// [`HttpConfig::infer`] then [`HttpSink::new`].
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), kevents_http::ConfigError> {
    /// let sink = kevents_http::HttpSink::infer().await?;
    /// # Ok(()) }
    /// ```
    pub async fn infer() -> Result<Self, ConfigError> {
        Self::new(HttpConfig::infer().await?)
    }

    /// [`HttpSink::infer`] for synchronous code: `KUBECONFIG`, `~/.kube/config` or the
    /// in-cluster service account, loaded without an executor of the caller's. The loading
    /// runs on a private current-thread tokio runtime on a helper thread, which this call
    /// waits for (at most [`CREDENTIAL_FILE_TIMEOUT`](crate::CREDENTIAL_FILE_TIMEOUT) for the
    /// files, as `infer`), so it works from plain `main` and, blocking its thread meanwhile,
    /// from inside a runtime too (it never panics there; in async code prefer `infer`).
    /// A helper thread or runtime that cannot be started is [`ConfigError::Blocking`].
    ///
    /// ```no_run
    /// fn main() -> Result<(), kevents_http::ConfigError> {
    ///     let sink = kevents_http::HttpSink::infer_blocking()?; // no runtime needed
    ///     println!("events go to {}", sink.base_url());
    ///     Ok(())
    /// }
    /// ```
    ///
    /// With a pipeline, from plain synchronous code: the facade's `kevents::HttpSink`.
    pub fn infer_blocking() -> Result<Self, ConfigError> {
        let load = std::thread::Builder::new()
            .name("kevents-infer".into())
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| ConfigError::Blocking(format!("cannot build a runtime: {e}")))?;
                runtime.block_on(HttpConfig::infer())
            })
            .map_err(|e| ConfigError::Blocking(format!("cannot start a thread: {e}")))?;
        let config = load
            .join()
            .map_err(|_| ConfigError::Blocking("the loading thread panicked".into()))??;
        Self::new(config)
    }

    /// The apiserver URL.
    pub fn base_url(&self) -> &Url {
        &self.inner.base
    }

    /// The configuration's default namespace (kubeconfig context or the pod's).
    pub fn default_namespace(&self) -> &str {
        &self.inner.default_namespace
    }

    /// The requests of this sink, the one door to them: creates and patches of both event
    /// APIs (as the sink traits make them), gets, deletes, bounded lists, discovery and
    /// preflight ([`kevents_core::request::Client`] over this sink).
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_http::ListError> {
    /// let events = sink.requests().list_events("default").await?;
    /// println!("{} core/v1 events in default", events.len());
    /// # Ok(()) }
    /// ```
    pub fn requests(&self) -> Client<HttpSink> {
        Client::new(self.clone())
    }

    /// The URL of `path_and_query` (from the apiserver's root, percent-encoded) under the
    /// cluster URL, whose own path (a proxy's prefix) comes first.
    fn url(&self, path_and_query: &str) -> Result<Url, SinkError> {
        let mut url = self.inner.base.clone();
        if url.cannot_be_a_base() {
            return Err(SinkError::Construction(
                "the cluster URL cannot have a path".into(),
            ));
        }
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_and_query, None),
        };
        let joined = format!("{}{path}", url.path().trim_end_matches('/'));
        url.set_path(&joined);
        url.set_query(query);
        Ok(url)
    }

    /// `GET /version`.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_core::SinkError> {
    /// println!("apiserver {}", sink.server_version().await?.git_version);
    /// # Ok(()) }
    /// ```
    pub async fn server_version(&self) -> Result<ServerVersion, SinkError> {
        let cap = self.inner.limits.max_response_bytes;
        let body = self.requests().get("/version", cap).await?;
        serde_json::from_slice(&body).map_err(|e| unexpected(format_args!("not a version: {e}")))
    }

    /// `GET /metrics`: the apiserver's own metrics in Prometheus' text format, read up to
    /// 32 MiB (a larger answer is an error). Needs the `get` verb on the non-resource URL
    /// `/metrics` (cluster admins have it).
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_core::SinkError> {
    /// let text = sink.server_metrics().await?;
    /// let lines = text.lines().filter(|l| l.starts_with("apiserver_request_total{")).count();
    /// # Ok(()) }
    /// ```
    pub async fn server_metrics(&self) -> Result<String, SinkError> {
        const CAP: usize = 32 << 20;
        let body = self.requests().get("/metrics", CAP).await?;
        String::from_utf8(body).map_err(|e| unexpected(format_args!("metrics are not UTF-8: {e}")))
    }

    /// Opens a streaming `GET` of `path_and_query` (a watch) with the sink's credential,
    /// `timeout` covering the whole response (a watch's `timeoutSeconds` plus a margin):
    /// the status code and the response whose body is read in chunks by kevents-core's `LineStream` (`watch.rs`).
    pub(crate) async fn open_stream(
        &self,
        path_and_query: &str,
        timeout: Duration,
    ) -> Result<(u16, reqwest::Response), SinkError> {
        let url = self.url(path_and_query)?;
        let credential = self
            .inner
            .auth
            .current()
            .await
            .map_err(|e| SinkError::Transport(e.to_string()))?;
        let mut req = self
            .client_for(credential.identity.as_ref())?
            .get(url)
            .timeout(timeout)
            .header(ACCEPT, APPLICATION_JSON);
        if let Some(a) = &credential.header {
            req = req.header(AUTHORIZATION, a.clone());
        }
        for (k, v) in &self.inner.extra_headers {
            req = req.header(k.clone(), v.clone());
        }
        let resp = req.send().await.map_err(|e| {
            if e.is_timeout() {
                SinkError::Timeout(timeout)
            } else {
                SinkError::Transport(error_chain(&e))
            }
        })?;
        Ok((resp.status().as_u16(), resp))
    }

    /// The client for `identity` (a client certificate from an exec plugin): built when the
    /// certificate changes (new connections, with the new certificate); without one, the
    /// configuration's client.
    fn client_for(
        &self,
        identity: Option<&Arc<ClientIdentity>>,
    ) -> Result<reqwest::Client, SinkError> {
        let Some(identity) = identity else {
            return Ok(self.inner.client.clone());
        };
        let mut slot = self
            .inner
            .exec_client
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some((current, client)) = slot.as_ref()
            && Arc::ptr_eq(current, identity)
        {
            return Ok(client.clone());
        }
        let mut config = self.inner.config.clone();
        config.client_identity = Some((**identity).clone());
        let client = build_client(&config).map_err(|e| {
            SinkError::Transport(format!(
                "the exec credential plugin's client certificate cannot be used: {e}"
            ))
        })?;
        tracing::debug!("new HTTP client for the exec credential plugin's client certificate");
        *slot = Some((identity.clone(), client.clone()));
        Ok(client)
    }

    /// One request with `credential`, its answer read up to the request's limit.
    async fn send_once(
        &self,
        request: &Request,
        url: &Url,
        body: &Bytes,
        credential: &Credential,
    ) -> Result<Response, SinkError> {
        let inner = &self.inner;
        let started = Instant::now();
        let method = http::Method::from_bytes(request.method.as_str().as_bytes())
            .map_err(|e| SinkError::Construction(error_chain(&e)))?;
        let mut req = self
            .client_for(credential.identity.as_ref())?
            .request(method, url.clone())
            .timeout(request.timeout)
            .header(ACCEPT, APPLICATION_JSON);
        if let Some(a) = &credential.header {
            req = req.header(AUTHORIZATION, a.clone());
        }
        for (k, v) in &inner.extra_headers {
            req = req.header(k.clone(), v.clone());
        }
        if let Some(content_type) = request.content_type {
            req = req.header(CONTENT_TYPE, content_type).body(body.clone());
        }
        let timeout = request.timeout;
        let map_err = |e: reqwest::Error| -> SinkError {
            if e.is_timeout() {
                SinkError::Timeout(timeout)
            } else if e.is_builder() {
                SinkError::Construction(error_chain(&e))
            } else {
                SinkError::Transport(error_chain(&e))
            }
        };
        let result = async {
            let mut resp = req.send().await.map_err(map_err)?;
            let code = resp.status().as_u16();
            let header = |name| resp.headers().get(name).and_then(|v| v.to_str().ok());
            let retry_after = header(RETRY_AFTER).map(str::to_owned);
            let mut read = ResponseReader::new(request.max_response_bytes, header(CONTENT_LENGTH));
            while read.wants_more() {
                match resp.chunk().await.map_err(map_err)? {
                    Some(chunk) => read.push(&chunk),
                    None => break,
                }
            }
            Ok(read.finish(code, retry_after.as_deref()))
        }
        .await;
        log_exchange("reqwest", request.method, url.path(), started, &result);
        result
    }
}

/// One request with the sink's credential (obtained first; once more after a 401 when the
/// credential has changed since), its answer read up to the request's limit.
impl Transport for HttpSink {
    fn send(&self, mut request: Request) -> TransportFuture<'_> {
        Box::pin(async move {
            let url = self.url(&request.path)?;
            let body = Bytes::from(std::mem::take(&mut request.body));
            let credential = self
                .inner
                .auth
                .current()
                .await
                // A token file being rotated, an exec plugin that failed: worth a retry.
                .map_err(|e| SinkError::Transport(e.to_string()))?;
            let answer = self.send_once(&request, &url, &body, &credential).await?;
            if answer.code == 401
                && let Some(fresh) = self.inner.auth.after_unauthorized(&credential).await
            {
                tracing::info!("401 with a credential that has changed since: trying once more");
                return self.send_once(&request, &url, &body, &fresh).await;
            }
            Ok(answer)
        })
    }

    fn limits(&self) -> Limits {
        self.inner.limits
    }
}

// EventSink, events_v1::EventSink and PreflightApi: the request layer's, through `requests`.
kevents_core::__request_sink!(HttpSink);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_paths_go_under_the_cluster_urls_own_path() {
        let url = |base: &str, path: &str| {
            let sink = HttpSink::new(HttpConfig::new(base).unwrap()).unwrap();
            sink.url(path).unwrap().to_string()
        };
        assert_eq!(
            url("https://127.0.0.1:6443", "/api/v1/events?limit=250"),
            "https://127.0.0.1:6443/api/v1/events?limit=250"
        );
        assert_eq!(
            url(
                "https://rancher.example/k8s/clusters/c-1/",
                "/api/v1/namespaces/default/events?limit=250&continue=a%2Bb%3D"
            ),
            "https://rancher.example/k8s/clusters/c-1/api/v1/namespaces/default/events?limit=250&continue=a%2Bb%3D"
        );
        assert_eq!(
            url("https://h/p", "/apis/x%20y/v1"),
            "https://h/p/apis/x%20y/v1"
        );
    }
}
