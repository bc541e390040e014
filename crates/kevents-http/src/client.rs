//! The HTTP client half of [`HttpSink`], shared by both event APIs: building the client
//! (TLS, proxy, impersonation), request URLs, the authorization header (and one retry after a
//! 401 with a rotated token file), bounded body reads, answer decoding and `Status` errors,
//! discovery and `/version`. The APIs are in `core_v1.rs` (core/v1 events,
//! [`EventSink`](kevents_core::EventSink)) and `events_v1.rs` (`events.k8s.io/v1` events).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderName, HeaderValue, Method, StatusCode};
use kevents_core::status::sanitize_server_text_to;
use kevents_core::{SinkError, Stored};

use reqwest::Url;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::auth::{AuthHeader, Credential};
use crate::config::{ClientIdentity, ConfigError, HttpConfig, redact_url};

/// Content type of the record package's patches.
pub const STRATEGIC_MERGE_PATCH: &str = "application/strategic-merge-patch+json";

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
    timeout: Duration,
    pub(crate) max_body: usize,
    pub(crate) max_list_pages: usize,
    pub(crate) max_list_bytes: usize,
}

impl std::fmt::Debug for HttpSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpSink")
            .field("base", &redact_url(&self.inner.base))
            .field("auth", &self.inner.auth.kind())
            .field("timeout", &self.inner.timeout)
            .field("max_body", &self.inner.max_body)
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

pub(crate) enum Body {
    Empty,
    Json(Bytes),
    Patch(Bytes),
}

pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) body: Bytes,
    /// The body was larger than the limit and was not read (fully).
    pub(crate) oversized: bool,
}

/// An error and its sources as one line, sanitised: it can carry server-provided text (the
/// names in a certificate, a proxy's answer).
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

pub(crate) use kevents_core::answer::unexpected_object as unexpected;

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
                timeout: config.request_timeout,
                max_body: config.max_response_bytes,
                max_list_pages: config.max_list_pages,
                max_list_bytes: config.max_list_bytes,
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

    /// The apiserver URL.
    pub fn base_url(&self) -> &Url {
        &self.inner.base
    }

    /// The configuration's default namespace (kubeconfig context or the pod's).
    pub fn default_namespace(&self) -> &str {
        &self.inner.default_namespace
    }

    pub(crate) fn url(
        &self,
        segments: &[&str],
        query: Option<&[(&str, &str)]>,
    ) -> Result<Url, SinkError> {
        let mut url = self.inner.base.clone();
        {
            let mut path = url.path_segments_mut().map_err(|()| {
                SinkError::Construction("the cluster URL cannot have a path".into())
            })?;
            path.pop_if_empty();
            path.extend(segments);
        }
        if let Some(q) = query {
            url.query_pairs_mut().extend_pairs(q);
        }
        Ok(url)
    }

    /// `{prefix}/namespaces/{ns}/events[/{name}]` (`{prefix}/events` for an empty namespace,
    /// as client-go builds it), for the API at path segments `prefix`. The namespace must be
    /// a DNS-1123 label and the name a DNS-1123 subdomain ([`check_path_names`]).
    pub(crate) fn events_url_at(
        &self,
        prefix: &[&str],
        namespace: &str,
        name: Option<&str>,
    ) -> Result<Url, SinkError> {
        check_path_names(namespace, name)?;
        let mut segs = prefix.to_vec();
        if !namespace.is_empty() {
            segs.extend(["namespaces", namespace]);
        }
        segs.push("events");
        if let Some(n) = name {
            segs.push(n);
        }
        self.url(&segs, None)
    }

    /// `POST {prefix}/namespaces/{ns}/events` of `event`'s JSON, the answer decoded by
    /// [`decode_event_of`] with `api_version`.
    /// The answer must be the event sent, `name` in `namespace` ([`decode_written_of`]).
    pub(crate) fn create_at<T, R>(
        &self,
        prefix: &[&str],
        namespace: &str,
        name: &str,
        event: &T,
        api_version: Option<&'static str>,
    ) -> Pin<Box<dyn Future<Output = Result<Stored<R>, SinkError>> + Send + 'static>>
    where
        T: Serialize + ?Sized,
        R: DeserializeOwned + 'static,
    {
        let this = self.clone();
        let written = (namespace.to_owned(), name.to_owned());
        let prepared = self.events_url_at(prefix, namespace, None).and_then(|url| {
            kevents_core::json::to_vec(event)
                .map(|body| (url, Bytes::from(body)))
                .map_err(|e| SinkError::Construction(e.to_string()))
        });
        Box::pin(async move {
            let (url, sent) = prepared?;
            let answer = this
                .send(Method::POST, url, &Body::Json(sent.clone()))
                .await?;
            if answer.status.is_success() && answer.oversized {
                return Ok(this.stored_as_sent(&answer, "create"));
            }
            decode_written_of::<R>(answer, api_version, &written.0, &written.1).map(Stored::from)
        })
    }

    /// `PATCH {prefix}/namespaces/{ns}/events/{name}` with the strategic-merge-patch bytes,
    /// the answer decoded by [`decode_event_of`] with `api_version`; it must be the event
    /// patched ([`decode_written_of`]).
    pub(crate) fn patch_at<R>(
        &self,
        prefix: &[&str],
        namespace: &str,
        name: &str,
        patch: &[u8],
        api_version: Option<&'static str>,
    ) -> Pin<Box<dyn Future<Output = Result<Stored<R>, SinkError>> + Send + 'static>>
    where
        R: DeserializeOwned + 'static,
    {
        let this = self.clone();
        let written = (namespace.to_owned(), name.to_owned());
        let prepared = self.events_url_at(prefix, namespace, Some(name));
        let body = Bytes::copy_from_slice(patch);
        Box::pin(async move {
            let url = prepared?;
            let answer = this.send(Method::PATCH, url, &Body::Patch(body)).await?;
            if answer.status.is_success() && answer.oversized {
                return Ok(this.stored_as_sent(&answer, "patch"));
            }
            decode_written_of::<R>(answer, api_version, &written.0, &written.1).map(Stored::from)
        })
    }

    /// A 2xx answer to a create or patch whose body is over the size limit: the server stored
    /// the event (a 2xx says so), only its echo was not read. The result is
    /// [`Stored::AsSent`]: the recorder learns from the event as sent (without the fields the
    /// server sets: `resourceVersion` on a create, `uid`, `creationTimestamp`), and the write
    /// is not retried (a retried create would be refused with 409 `AlreadyExists` and
    /// counted as rejected).
    fn stored_as_sent<R>(&self, answer: &Answer, verb: &str) -> Stored<R> {
        tracing::warn!(
            status = answer.status.as_u16(),
            limit = self.inner.max_body,
            verb,
            "apiserver answer larger than the response size limit: the event counts as stored, as sent"
        );
        Stored::AsSent
    }

    /// Whether the apiserver serves an API group version: `GET path` answered 2xx (`true`)
    /// or 404 (`false`); any other answer is an error.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_core::SinkError> {
    /// let served = sink.api_served("/apis/events.k8s.io/v1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn api_served(&self, path: &str) -> Result<bool, SinkError> {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let url = self.url(&segs, None)?;
        let answer = self.send(Method::GET, url, &Body::Empty).await?;
        match answer.status.as_u16() {
            200..=299 => Ok(true),
            404 => Ok(false),
            _ => Err(status_error(&answer)),
        }
    }

    /// `GET /version`.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_core::SinkError> {
    /// println!("apiserver {}", sink.server_version().await?.git_version);
    /// # Ok(()) }
    /// ```
    pub async fn server_version(&self) -> Result<ServerVersion, SinkError> {
        let url = self.url(&["version"], None)?;
        let answer = self.send(Method::GET, url, &Body::Empty).await?;
        if !answer.status.is_success() {
            return Err(status_error(&answer));
        }
        if answer.oversized {
            return Err(oversized(self.inner.max_body));
        }
        serde_json::from_slice(&answer.body)
            .map_err(|e| unexpected(format_args!("not a version: {e}")))
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
        let url = self.url(&["metrics"], None)?;
        let answer = self
            .send_capped(Method::GET, url, &Body::Empty, CAP)
            .await?;
        if !answer.status.is_success() {
            return Err(status_error(&answer));
        }
        if answer.oversized {
            return Err(oversized(CAP));
        }
        String::from_utf8(answer.body.to_vec())
            .map_err(|e| unexpected(format_args!("metrics are not UTF-8: {e}")))
    }

    /// One request, its answer read up to `max_response_bytes`.
    pub(crate) async fn send(
        &self,
        method: Method,
        url: Url,
        body: &Body,
    ) -> Result<Answer, SinkError> {
        self.send_capped(method, url, body, self.inner.max_body)
            .await
    }

    /// One request, its answer read up to `cap` bytes.
    pub(crate) async fn send_capped(
        &self,
        method: Method,
        url: Url,
        body: &Body,
        cap: usize,
    ) -> Result<Answer, SinkError> {
        let credential = self
            .inner
            .auth
            .current()
            .await
            // A token file being rotated, an exec plugin that failed: worth a retry.
            .map_err(|e| SinkError::Transport(e.to_string()))?;
        let answer = self
            .send_once(&method, &url, body, &credential, cap)
            .await?;
        if answer.status == StatusCode::UNAUTHORIZED
            && let Some(fresh) = self.inner.auth.after_unauthorized(&credential).await
        {
            tracing::info!("401 with a credential that has changed since: trying once more");
            return self.send_once(&method, &url, body, &fresh, cap).await;
        }
        Ok(answer)
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

    async fn send_once(
        &self,
        method: &Method,
        url: &Url,
        body: &Body,
        credential: &Credential,
        cap: usize,
    ) -> Result<Answer, SinkError> {
        let inner = &self.inner;
        let started = Instant::now();
        let mut req = self
            .client_for(credential.identity.as_ref())?
            .request(method.clone(), url.clone())
            .header(ACCEPT, "application/json");
        if let Some(a) = &credential.header {
            req = req.header(AUTHORIZATION, a.clone());
        }
        for (k, v) in &inner.extra_headers {
            req = req.header(k.clone(), v.clone());
        }
        req = match body {
            Body::Empty => req,
            Body::Json(b) => req.header(CONTENT_TYPE, "application/json").body(b.clone()),
            Body::Patch(b) => req
                .header(CONTENT_TYPE, STRATEGIC_MERGE_PATCH)
                .body(b.clone()),
        };
        let map_err = |e: reqwest::Error| -> SinkError {
            if e.is_timeout() {
                SinkError::Timeout(inner.timeout)
            } else if e.is_builder() {
                SinkError::Construction(error_chain(&e))
            } else {
                SinkError::Transport(error_chain(&e))
            }
        };
        let result = async {
            let mut resp = req.send().await.map_err(map_err)?;
            let status = resp.status();
            let retry_after = resp
                .headers()
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(kevents_core::answer::retry_after_header);
            let declared = resp
                .headers()
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            let mut oversized = declared.is_some_and(|n| n > cap as u64);
            let mut buf = BytesMut::new();
            if !oversized {
                while let Some(chunk) = resp.chunk().await.map_err(map_err)? {
                    if buf.len() + chunk.len() > cap {
                        oversized = true;
                        break;
                    }
                    buf.extend_from_slice(&chunk);
                }
            }
            Ok(Answer {
                status,
                retry_after,
                body: buf.freeze(),
                oversized,
            })
        }
        .await;
        match &result {
            Ok(a) => tracing::debug!(
                method = %method,
                path = url.path(),
                status = a.status.as_u16(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "apiserver request"
            ),
            Err(e) => tracing::debug!(
                method = %method,
                path = url.path(),
                error = %e,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "apiserver request failed"
            ),
        }
        result
    }
}

impl Answer {
    /// The answer as kevents-core decodes it (shared with every other sink).
    fn view(&self) -> kevents_core::answer::Answer<'_> {
        kevents_core::answer::Answer {
            code: self.status.as_u16(),
            retry_after: self.retry_after,
            body: &self.body,
            oversized: self.oversized,
        }
    }
}

/// A 2xx answer must carry an Event (of `api_version` when given: its `apiVersion` is checked
/// too); anything else is the server's error ([`kevents_core::answer::Answer::decode_event`]).
pub(crate) fn decode_event_of<T: DeserializeOwned>(
    answer: Answer,
    api_version: Option<&str>,
) -> Result<T, SinkError> {
    answer.view().decode_event(api_version)
}

/// [`decode_event_of`] for the answer to a write of `namespace`/`name`: the event answered
/// must be that one ([`kevents_core::answer::Answer::decode_written`]; otherwise
/// [`SinkError::AnswerMismatch`], logged at debug level here: the write's caller reports it).
pub(crate) fn decode_written_of<T: DeserializeOwned>(
    answer: Answer,
    api_version: Option<&str>,
    namespace: &str,
    name: &str,
) -> Result<T, SinkError> {
    let r = answer.view().decode_written(api_version, namespace, name);
    if let Err(e @ SinkError::AnswerMismatch(_)) = &r {
        tracing::debug!(error = %e, "apiserver answered a write with another event; the answer is ignored");
    }
    r
}

/// Every namespace and name put into an event URL: a namespace is empty (all namespaces) or
/// a DNS-1123 label, a name a DNS-1123 subdomain (what the apiserver accepts for events).
/// So no `.`, `..`, empty or escaped segment can reach a URL path, whatever an event or a
/// caller holds; anything else is [`SinkError::Construction`] and nothing is sent.
pub(crate) fn check_path_names(namespace: &str, name: Option<&str>) -> Result<(), SinkError> {
    use kevents_core::name::{is_dns1123_label, is_dns1123_subdomain};
    if !namespace.is_empty() && !is_dns1123_label(namespace) {
        return Err(SinkError::Construction(format!(
            "namespace {:?} is not a DNS-1123 label",
            sanitize_server_text_to(namespace, 100)
        )));
    }
    if let Some(n) = name
        && !is_dns1123_subdomain(n)
    {
        return Err(SinkError::Construction(format!(
            "event name {:?} is not a DNS-1123 subdomain",
            sanitize_server_text_to(n, 100)
        )));
    }
    Ok(())
}

/// A 2xx answer too large to read (other than the echo of a create or patch).
pub(crate) fn oversized(limit: usize) -> SinkError {
    SinkError::UnexpectedObject(format!("response body larger than {limit} bytes"))
}

/// A non-2xx answer as a [`SinkError::Status`]: the server's `Status` if the body is one,
/// else a generic one built from the code (as client-go's REST client does), sanitised
/// ([`kevents_core::answer::Answer::status_error`]).
pub(crate) fn status_error(answer: &Answer) -> SinkError {
    answer.view().status_error()
}

#[cfg(test)]
mod tests {
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
    fn status_body_is_decoded() {
        let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
            "message":"events \"x\" already exists","reason":"AlreadyExists",
            "details":{"name":"x","kind":"events"},"code":409}"#;
        let e = status_error(&answer(409, body, None));
        assert!(e.is_already_exists());
        assert_eq!(e.code(), Some(409));
        let SinkError::Status(s) = e else { panic!() };
        assert_eq!(s.details.unwrap().name, "x");
    }

    #[test]
    fn non_status_body_becomes_generic_status() {
        let e = status_error(&answer(502, "<html>bad gateway</html>", Some(7)));
        assert_eq!(e.code(), Some(502));
        assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
        let SinkError::Status(s) = e else { panic!() };
        assert_eq!(s.reason, "Unknown");
        assert_eq!(
            s.details.unwrap().causes[0].message,
            "<html>bad gateway</html>"
        );
    }

    #[test]
    fn retry_after_from_details_when_no_header() {
        let body = r#"{"kind":"Status","status":"Failure","reason":"TooManyRequests",
            "details":{"retryAfterSeconds":3},"code":429}"#;
        let e = status_error(&answer(429, body, None));
        assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(e.disposition(), kevents_core::Disposition::Retry);
    }
}
