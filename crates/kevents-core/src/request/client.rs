//! [`Client`]: the requests of both event APIs over a [`Transport`], their paths (names
//! checked, segments percent-encoded) and the simple ones: discovery, `GET`, `DELETE`.

use crate::core_v1::Event;
use crate::status::{SinkError, sanitize_server_text_to};

use super::transport::{Method, Request, Response, Transport};

/// Path of the core/v1 API.
pub const CORE_V1_PATH: &str = "/api/v1";
/// Path of the `events.k8s.io/v1` API.
pub const EVENTS_V1_PATH: &str = "/apis/events.k8s.io/v1";

/// Whether a discovery answer to `GET path` is an `APIResourceList` naming `events`
/// (kind absent or `APIResourceList`, a `resources` array); else an unexpected object.
fn names_events(path: &str, body: &[u8]) -> Result<bool, SinkError> {
    #[derive(serde::Deserialize)]
    struct Resource {
        name: String,
    }
    #[derive(serde::Deserialize)]
    struct ResourceList {
        #[serde(default)]
        kind: Option<String>,
        resources: Vec<Resource>,
    }
    let unexpected = |why: &str| {
        crate::answer::unexpected_object(format_args!(
            "GET {path} answered 2xx with {why}, not an APIResourceList: a proxy or a server that does not speak the Kubernetes API?"
        ))
    };
    let list: ResourceList = serde_json::from_slice(body).map_err(|_| {
        unexpected(if body.is_empty() {
            "an empty body"
        } else {
            "another body"
        })
    })?;
    match list.kind.as_deref() {
        None | Some("APIResourceList") => {}
        Some(_) => return Err(unexpected("another kind")),
    }
    Ok(list.resources.iter().any(|r| r.name == "events"))
}

/// The requests of both event APIs, written once over a [`Transport`]: the
/// [`EventSink`](crate::EventSink) (core/v1) and
/// [`events_v1::EventSink`](crate::events_v1::EventSink) writes (`POST` of the event's Go-identical
/// JSON, strategic-merge `PATCH`), `GET`, `DELETE`, bounded paginated lists, discovery and
/// [`PreflightApi`](crate::preflight::PreflightApi). kevents-http's `HttpSink` and
/// kevents-kube's `KubeSink` are transports and answer through it.
///
/// Classification (`docs/http.md`, "Error classification"): a 2xx must carry the event
/// written (its namespace and name, else [`SinkError::AnswerMismatch`]); a 2xx too large to
/// read is [`Stored::AsSent`](crate::Stored::AsSent) for a write; anything else is the
/// server's sanitised [`SinkError::Status`] (`Retry-After` kept), classified by
/// [`SinkError::disposition`]. Namespaces and names put into a path must be DNS-1123 labels
/// and subdomains ([`check_path_names`]); nothing is sent otherwise.
#[derive(Debug, Clone)]
pub struct Client<T> {
    transport: T,
    check_created_names: bool,
}

impl<T: Transport> Client<T> {
    /// The requests over `transport`.
    pub fn new(transport: T) -> Self {
        Client {
            transport,
            check_created_names: false,
        }
    }

    /// Refuses a create whose event name is not a DNS-1123 subdomain before sending
    /// ([`SinkError::Construction`]), as kevents-kube's sink does; by default the name of a
    /// create, which is not in its path, goes to the apiserver, which refuses it (422).
    pub fn check_created_names(mut self, check: bool) -> Self {
        self.check_created_names = check;
        self
    }

    pub(crate) fn checks_created_names(&self) -> bool {
        self.check_created_names
    }

    /// The transport.
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// One request, its answer read up to `max_response_bytes`, within the transport's
    /// deadline.
    pub async fn send(
        &self,
        method: Method,
        path: String,
        content_type: Option<&'static str>,
        body: Vec<u8>,
        max_response_bytes: usize,
    ) -> Result<Response, SinkError> {
        let request = Request {
            method,
            path,
            content_type,
            body,
            timeout: self.transport.limits().request_timeout,
            max_response_bytes,
        };
        self.transport.send(request).await
    }

    /// A request without a body, its answer read up to the response limit.
    pub(crate) async fn send_empty(
        &self,
        method: Method,
        path: String,
    ) -> Result<Response, SinkError> {
        let cap = self.transport.limits().max_response_bytes;
        self.send(method, path, None, Vec::new(), cap).await
    }

    /// `GET path` (segments percent-encoded): the body of a 2xx answer read up to `cap`
    /// bytes; another answer is the server's error, a larger body an error too.
    pub async fn get(&self, path: &str, cap: usize) -> Result<Vec<u8>, SinkError> {
        let answer = self
            .send(Method::Get, encode_path(path), None, Vec::new(), cap)
            .await?;
        success_body(answer, cap)
    }

    /// Whether the apiserver serves events in an API group version (`/api/v1`,
    /// `/apis/events.k8s.io/v1`): `GET path` answered 2xx with an `APIResourceList` that
    /// names the `events` resource (`true`), 404 or an `APIResourceList` without `events`
    /// (`false`). Another 2xx body (not JSON, another kind: a proxy's page, a lying server)
    /// is [`SinkError::UnexpectedObject`], any other answer the server's error.
    pub async fn api_served(&self, path: &str) -> Result<bool, SinkError> {
        let answer = self.send_empty(Method::Get, encode_path(path)).await?;
        match answer.code {
            200..=299 => names_events(path, &answer.body),
            404 => Ok(false),
            _ => Err(answer.answer().status_error()),
        }
    }

    /// Whether `events.k8s.io/v1` is served (`GET /apis/events.k8s.io/v1` answers 2xx);
    /// decides between the events.k8s.io/v1 API and the core/v1 fallback.
    pub async fn events_v1_served(&self) -> Result<bool, SinkError> {
        self.api_served(EVENTS_V1_PATH).await
    }

    /// `GET` of one core/v1 event.
    pub async fn get_event(&self, namespace: &str, name: &str) -> Result<Event, SinkError> {
        let path = events_path(CORE_V1_PATH, namespace, Some(name))?;
        let answer = self.send_empty(Method::Get, path).await?;
        answer.answer().decode_event(None)
    }

    /// `DELETE` of one core/v1 event (what the server's TTL does; used by tests).
    pub async fn delete_event(&self, namespace: &str, name: &str) -> Result<(), SinkError> {
        let path = events_path(CORE_V1_PATH, namespace, Some(name))?;
        let answer = self.send_empty(Method::Delete, path).await?;
        if answer.answer().is_success() {
            Ok(())
        } else {
            Err(answer.answer().status_error())
        }
    }
}

/// A 2xx answer too large to read (other than the echo of a create or patch).
///
/// ```
/// let e = kevents_core::request::answer_too_large(10);
/// assert_eq!(e.to_string(), "unexpected response object: response body larger than 10 bytes");
/// ```
pub fn answer_too_large(limit: usize) -> SinkError {
    SinkError::UnexpectedObject(format!("response body larger than {limit} bytes"))
}

/// The body of a 2xx answer read whole within `cap`; another answer is the server's error,
/// a body over `cap` [`answer_too_large`].
pub(crate) fn success_body(answer: Response, cap: usize) -> Result<Vec<u8>, SinkError> {
    if !answer.answer().is_success() {
        return Err(answer.answer().status_error());
    }
    if answer.oversized {
        return Err(answer_too_large(cap));
    }
    Ok(answer.body)
}

/// Percent-encodes one path segment or query value (everything but RFC 3986's unreserved
/// characters).
///
/// ```
/// assert_eq!(kevents_core::request::encode_segment("a b/c?"), "a%20b%2Fc%3F");
/// ```
pub fn encode_segment(s: &str) -> String {
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

/// `path`'s segments percent-encoded, empty ones dropped: `/apis/events.k8s.io/v1`.
///
/// ```
/// assert_eq!(kevents_core::request::encode_path("//version/"), "/version");
/// ```
pub fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1);
    for s in path.split('/').filter(|s| !s.is_empty()) {
        out.push('/');
        out.push_str(&encode_segment(s));
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// `{prefix}/namespaces/{ns}/events[/{name}]` (`{prefix}/events` for an empty namespace, as
/// client-go builds it), for the API at path `prefix`. The namespace must be a DNS-1123
/// label and the name a DNS-1123 subdomain ([`check_path_names`]).
///
/// ```
/// use kevents_core::request::events_path;
/// assert_eq!(events_path("/api/v1", "default", Some("a.b")).unwrap(),
///            "/api/v1/namespaces/default/events/a.b");
/// assert_eq!(events_path("/api/v1", "", None).unwrap(), "/api/v1/events");
/// assert!(events_path("/api/v1", "x/y", Some("a")).is_err());
/// ```
pub fn events_path(prefix: &str, namespace: &str, name: Option<&str>) -> Result<String, SinkError> {
    check_path_names(namespace, name)?;
    let mut p = String::from(prefix);
    if !namespace.is_empty() {
        p.push_str("/namespaces/");
        p.push_str(&encode_segment(namespace));
    }
    p.push_str("/events");
    if let Some(n) = name {
        p.push('/');
        p.push_str(&encode_segment(n));
    }
    Ok(p)
}

/// Every namespace and name put into an event path: a namespace is empty (all namespaces)
/// or a DNS-1123 label, a name a DNS-1123 subdomain (what the apiserver accepts for
/// events). So no `.`, `..`, empty or escaped segment can reach a URL path, whatever an
/// event or a caller holds; anything else is [`SinkError::Construction`] and nothing is
/// sent.
///
/// ```
/// use kevents_core::request::check_path_names;
/// assert!(check_path_names("default", Some("web-1.17a0")).is_ok());
/// assert!(check_path_names("", None).is_ok());
/// assert!(check_path_names("..", None).is_err());
/// assert!(check_path_names("default", Some("a/b")).is_err());
/// ```
pub fn check_path_names(namespace: &str, name: Option<&str>) -> Result<(), SinkError> {
    use crate::name::{is_dns1123_label, is_dns1123_subdomain};
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
