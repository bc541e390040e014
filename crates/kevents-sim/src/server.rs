//! The HTTP side: accept loop with refusable listener, per-connection reset control,
//! authentication/authorisation, fault injection and routing.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use crate::access_review;
use crate::faults::{FaultBody, Faults, ListFault};
use crate::stats::SimStats;
use crate::store::{self, ListQuery, Reply, Store, status};

/// Largest request body accepted (the apiserver's limit is 3 MiB).
const MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;

/// Client certificates are asked for, not required, and any is accepted by the TLS layer
/// (its handshake signature is still checked); authentication then looks it up among the
/// certificates the simulator issued. Like kube-apiserver (`tls.RequestClientCert`, the x509
/// authenticator later), an unknown certificate does not fail the handshake.
#[derive(Debug)]
pub(crate) struct AnyClientCert(pub(crate) Arc<tokio_rustls::rustls::crypto::CryptoProvider>);

impl tokio_rustls::rustls::server::danger::ClientCertVerifier for AnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[tokio_rustls::rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<tokio_rustls::rustls::server::danger::ClientCertVerified, tokio_rustls::rustls::Error>
    {
        Ok(tokio_rustls::rustls::server::danger::ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<
        tokio_rustls::rustls::client::danger::HandshakeSignatureValid,
        tokio_rustls::rustls::Error,
    > {
        tokio_rustls::rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &tokio_rustls::rustls::DigitallySignedStruct,
    ) -> Result<
        tokio_rustls::rustls::client::danger::HandshakeSignatureValid,
        tokio_rustls::rustls::Error,
    > {
        tokio_rustls::rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<tokio_rustls::rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A known bearer token.
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) authorized: bool,
}

pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    pub(crate) faults: Mutex<Faults>,
    pub(crate) stats: Mutex<SimStats>,
    /// `None`: no authentication, everyone may do everything. Tokens can be added and
    /// revoked while it runs.
    pub(crate) tokens: Option<Mutex<Vec<(String, User)>>>,
    /// Client certificates (DER) issued by [`crate::SimHandle::client_certificate`] and whom
    /// they authenticate (HTTPS only; the TLS layer checks they were signed by the
    /// simulator's client CA).
    pub(crate) cert_users: Mutex<Vec<(Vec<u8>, User)>>,
    pub(crate) events_v1_served: bool,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the data consistent, so a poisoned lock is usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Commands from the handle to the server thread.
pub(crate) enum Command {
    Refuse {
        duration: Option<Duration>,
        done: oneshot::Sender<()>,
    },
    Accept {
        done: oneshot::Sender<()>,
    },
    Shutdown {
        done: oneshot::Sender<()>,
    },
}

/// One connection's kill switch. `sock` is a duplicate of the connection's descriptor, so
/// setting `SO_LINGER` 0 on it makes the final close send a TCP RST.
struct ConnCtl {
    sock: std::net::TcpStream,
    kill: Notify,
}

impl ConnCtl {
    fn reset(&self) {
        let _ = socket2::SockRef::from(&self.sock).set_linger(Some(Duration::ZERO));
        self.kill.notify_one();
    }
}

pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// The accept loop; returns when told to shut down.
pub(crate) async fn run(
    shared: Arc<Shared>,
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) -> Option<oneshot::Sender<()>> {
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(_) => return None,
    };
    let mut listener = Some(listener);
    let mut rebind_at: Option<tokio::time::Instant> = None;
    let (kill_all, _) = watch::channel(0u64);
    loop {
        enum Step {
            Accepted(std::io::Result<(TcpStream, SocketAddr)>),
            Rebind,
            Cmd(Option<Command>),
        }
        let step = tokio::select! {
            r = async {
                match &listener {
                    Some(l) => l.accept().await,
                    None => std::future::pending().await,
                }
            } => Step::Accepted(r),
            () = async {
                match rebind_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => Step::Rebind,
            c = commands.recv() => Step::Cmd(c),
        };
        match step {
            Step::Accepted(Ok((stream, _))) => {
                lock(&shared.stats).connections += 1;
                tokio::spawn(serve_connection(
                    shared.clone(),
                    stream,
                    tls.clone(),
                    kill_all.subscribe(),
                ));
            }
            Step::Accepted(Err(e)) => {
                tracing::warn!(error = %e, "simulator accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Step::Rebind => match bind(addr) {
                Ok(l) => {
                    listener = Some(l);
                    rebind_at = None;
                }
                Err(e) => {
                    tracing::warn!(error = %e, %addr, "simulator cannot re-bind yet");
                    rebind_at = Some(tokio::time::Instant::now() + Duration::from_millis(100));
                }
            },
            Step::Cmd(Some(Command::Refuse { duration, done })) => {
                listener = None;
                kill_all.send_modify(|g| *g += 1);
                rebind_at = duration.map(|d| tokio::time::Instant::now() + d);
                let _ = done.send(());
            }
            Step::Cmd(Some(Command::Accept { done })) => {
                if listener.is_none() {
                    rebind_at = None;
                    loop {
                        match bind(addr) {
                            Ok(l) => {
                                listener = Some(l);
                                break;
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, %addr, "simulator cannot re-bind yet");
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        }
                    }
                }
                let _ = done.send(());
            }
            Step::Cmd(Some(Command::Shutdown { done })) => {
                drop(listener.take());
                kill_all.send_modify(|g| *g += 1);
                return Some(done);
            }
            Step::Cmd(None) => {
                kill_all.send_modify(|g| *g += 1);
                return None;
            }
        }
    }
}

async fn serve_connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut kill_all: watch::Receiver<u64>,
) {
    let Ok(std_stream) = stream.into_std() else {
        return;
    };
    let Ok(dup) = std_stream.try_clone() else {
        return;
    };
    let Ok(stream) = TcpStream::from_std(std_stream) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    if lock(&shared.faults).unresponsive {
        hold_unanswered(stream, &mut kill_all).await;
        return;
    }
    let ctl = Arc::new(ConnCtl {
        sock: dup,
        kill: Notify::new(),
    });
    let svc_ctl = ctl.clone();
    let cert_shared = shared.clone();
    let make_service = move |cert_user: Option<User>| {
        service_fn(move |req| {
            let shared = shared.clone();
            let ctl = svc_ctl.clone();
            let cert_user = cert_user.clone();
            async move { Ok::<_, Infallible>(handle(shared, ctl, req, cert_user).await) }
        })
    };
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let serve = async {
        match tls {
            Some(acceptor) => match acceptor.accept(stream).await {
                Ok(tls_stream) => {
                    let cert_user = tls_stream
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|der| {
                            lock(&cert_shared.cert_users)
                                .iter()
                                .find(|(d, _)| d.as_slice() == der.as_ref())
                                .map(|(_, u)| u.clone())
                        });
                    let service = make_service(cert_user);
                    let _ = builder
                        .serve_connection(TokioIo::new(tls_stream), service)
                        .await;
                }
                Err(e) => tracing::debug!(error = %e, "simulator TLS handshake failed"),
            },
            None => {
                let _ = builder
                    .serve_connection(TokioIo::new(stream), make_service(None))
                    .await;
            }
        }
    };
    tokio::select! {
        () = serve => {}
        () = ctl.kill.notified() => {}
        _ = kill_all.changed() => ctl.reset(),
    }
}

/// An accepted connection that is never answered: what the client sends is read and thrown
/// away (no TLS handshake, no HTTP) until it closes the connection or the server stops.
async fn hold_unanswered(mut stream: TcpStream, kill_all: &mut watch::Receiver<u64>) {
    use tokio::io::AsyncReadExt as _;
    let mut buf = [0u8; 4096];
    loop {
        tokio::select! {
            r = stream.read(&mut buf) => match r {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = kill_all.changed() => return,
        }
    }
}

fn json_response(code: u16, body: &Value) -> Response<Full<Bytes>> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut resp = Response::new(Full::new(Bytes::from(bytes)));
    *resp.status_mut() =
        hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn text_response(code: u16, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() =
        hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// What the fault plan says about one request.
enum Injected {
    None,
    Reset,
    Error(u16, Option<u32>, FaultBody, Vec<(String, String)>),
}

/// The faults that shape a handled request's answer.
#[derive(Default)]
struct Shaping {
    list: Option<ListFault>,
    pad_success_to: usize,
    stored_message: Option<String>,
}

fn draw_fault(shared: &Shared) -> (Duration, Injected, Shaping) {
    let mut f = lock(&shared.faults);
    let latency = f.latency;
    let shaping = Shaping {
        list: f.list,
        pad_success_to: f.pad_success_to,
        stored_message: f.stored_message.clone(),
    };
    if f.resets > 0 {
        f.resets -= 1;
        return (latency, Injected::Reset, shaping);
    }
    if let Some(e) = f.error.as_mut().filter(|e| e.times > 0) {
        e.times -= 1;
        return (
            latency,
            Injected::Error(e.code, e.retry_after, e.body.clone(), e.headers.clone()),
            shaping,
        );
    }
    (latency, Injected::None, shaping)
}

/// The request body of an event create with its message (`field`) replaced by `message`.
fn with_message(body: &[u8], field: &str, message: &str) -> Vec<u8> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut m)) => {
            m.insert(field.into(), message.into());
            serde_json::to_vec(&Value::Object(m)).unwrap_or_else(|_| body.to_vec())
        }
        _ => body.to_vec(),
    }
}

/// A list answer that never ends: the first page with a `continue` token that is always the
/// same ([`ListFault::RepeatContinue`]) or always new ([`ListFault::EndlessContinue`]).
fn endless(reply: Reply, kind: ListFault, request_number: u64) -> Reply {
    let (code, mut body) = reply;
    if code == 200
        && let Some(Value::Object(meta)) = body.get_mut("metadata")
    {
        let token = match kind {
            ListFault::RepeatContinue => "kevents-sim-repeated-continue".to_owned(),
            ListFault::EndlessContinue => format!("kevents-sim-endless-{request_number}"),
        };
        meta.insert("continue".into(), token.into());
    }
    (code, body)
}

fn now_rfc3339() -> String {
    kevents_core::SystemClock.now().to_rfc3339()
}

use kevents_core::Clock as _;

async fn handle(
    shared: Arc<Shared>,
    ctl: Arc<ConnCtl>,
    req: Request<Incoming>,
    cert_user: Option<User>,
) -> Response<Full<Bytes>> {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let auth = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let content_type = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return json_response(
                413,
                &status(
                    413,
                    "RequestEntityTooLarge",
                    "the request body is too large",
                    None,
                ),
            );
        }
    };
    lock(&shared.stats).requests += 1;

    let (latency, injected, shaping) = draw_fault(&shared);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if lock(&shared.faults).unresponsive {
        return std::future::pending().await;
    }
    match injected {
        Injected::None => {}
        Injected::Reset => {
            lock(&shared.stats).resets += 1;
            ctl.reset();
            return std::future::pending().await;
        }
        Injected::Error(code, retry_after, body, headers) => {
            lock(&shared.stats).injected_errors += 1;
            let mut resp = match body {
                FaultBody::Status => {
                    let (reason, message) = match code {
                        429 => (
                            "TooManyRequests",
                            "too many requests, please try again later",
                        ),
                        500 => ("InternalError", "Internal error occurred: injected fault"),
                        503 => (
                            "ServiceUnavailable",
                            "the server is currently unable to handle the request",
                        ),
                        504 => (
                            "Timeout",
                            "the server was unable to return a response in the time allotted",
                        ),
                        _ => ("Unknown", "injected fault"),
                    };
                    let details = retry_after.map(|s| json!({"retryAfterSeconds": s}));
                    json_response(code, &status(code, reason, message, details))
                }
                FaultBody::Text(t) => text_response(code, t),
                FaultBody::Json(t) => {
                    let mut resp = text_response(code, t);
                    resp.headers_mut().insert(
                        hyper::header::CONTENT_TYPE,
                        hyper::header::HeaderValue::from_static("application/json"),
                    );
                    resp
                }
            };
            if let Some(s) = retry_after
                && let Ok(v) = hyper::header::HeaderValue::from_str(&s.to_string())
            {
                resp.headers_mut().insert(hyper::header::RETRY_AFTER, v);
            }
            for (k, v) in headers {
                if let (Ok(k), Ok(v)) = (
                    hyper::header::HeaderName::try_from(k.as_str()),
                    hyper::header::HeaderValue::try_from(v.as_str()),
                ) {
                    resp.headers_mut().insert(k, v);
                }
            }
            return resp;
        }
    }

    if matches!(path.as_str(), "/healthz" | "/readyz" | "/livez") {
        return text_response(200, "ok");
    }
    let decoded: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let discovery = matches!(segs.first(), Some(&"version"))
        || matches!(
            segs.as_slice(),
            ["api"] | ["api", "v1"] | ["apis"] | ["apis", _, _]
        );

    // Authentication and authorisation.
    // As kube-apiserver's union authenticator: a client certificate first, then a token.
    // Any authenticated user may ask what it may do (a SelfSubjectAccessReview).
    let review = method == Method::POST && access_review::is_review(&segs);
    let mut authorized = true;
    if let Some(tokens) = &shared.tokens {
        let bearer = auth.as_deref().and_then(|a| a.strip_prefix("Bearer "));
        let user = match (cert_user, bearer) {
            (Some(u), _) => u,
            (None, None) => User {
                name: "system:anonymous".into(),
                authorized: false,
            },
            (None, Some(token)) => match lock(tokens).iter().find(|(t, _)| t == token.trim()) {
                Some((_, u)) => u.clone(),
                None => {
                    return json_response(401, &status(401, "Unauthorized", "Unauthorized", None));
                }
            },
        };
        authorized = user.authorized;
        // A SelfSubjectAccessReview needs an authenticated user, not rights.
        let may_review = review && user.name != "system:anonymous";
        if !user.authorized && !discovery && !may_review {
            let (code, body) = forbidden(&user.name, &method, &segs);
            return json_response(code, &body);
        }
    }

    if review {
        let (code, body) = access_review::answer(authorized, &body);
        return json_response(code, &body);
    }

    let request_number = lock(&shared.stats).requests;
    let body = match (&shaping.stored_message, &method, segs.as_slice()) {
        (Some(m), &Method::POST, ["api", "v1", "namespaces", _, "events"]) => {
            Bytes::from(with_message(&body, "message", m))
        }
        (Some(m), &Method::POST, ["apis", "events.k8s.io", "v1", "namespaces", _, "events"]) => {
            Bytes::from(with_message(&body, "note", m))
        }
        _ => body,
    };
    // An endless list ignores the `continue` it is sent (it made it up).
    let query = match shaping.list {
        Some(_) => query
            .split('&')
            .filter(|p| !p.starts_with("continue="))
            .collect::<Vec<_>>()
            .join("&"),
        None => query,
    };
    let (code, body) = route(&shared, &method, &segs, &query, &content_type, &body);
    let (code, body) = match shaping.list {
        Some(kind) if method == Method::GET && segs.last() == Some(&"events") => {
            endless((code, body), kind, request_number)
        }
        _ => (code, body),
    };
    if (200..300).contains(&code) {
        let mut stats = lock(&shared.stats);
        match method {
            Method::POST => stats.creates += 1,
            Method::PATCH => stats.patches += 1,
            _ => {}
        }
    }
    let pad_to = if (200..300).contains(&code) {
        shaping.pad_success_to
    } else {
        0
    };
    match body {
        Value::String(text) => text_response(code, padded(text.into_bytes(), pad_to)),
        body => {
            let bytes = padded(serde_json::to_vec(&body).unwrap_or_default(), pad_to);
            let mut resp = text_response(code, bytes);
            resp.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("application/json"),
            );
            resp
        }
    }
}

/// `bytes` with trailing spaces (the same JSON or text) up to at least `to` bytes.
fn padded(mut bytes: Vec<u8>, to: usize) -> Vec<u8> {
    if bytes.len() < to {
        bytes.resize(to, b' ');
    }
    bytes
}

/// Decodes `%XX` escapes of one path segment (invalid escapes are kept as they are).
fn percent_decode(seg: &str) -> String {
    let b = seg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The 403 the RBAC authorizer gives a user without rights.
fn forbidden(user: &str, method: &Method, segs: &[&str]) -> Reply {
    let (ns, resource, name) = match segs {
        ["api", "v1", "namespaces", ns, resource] => (Some(*ns), *resource, None),
        ["api", "v1", "namespaces", ns, resource, name, ..] => (Some(*ns), *resource, Some(*name)),
        ["api", "v1", "namespaces", name] => (None, "namespaces", Some(*name)),
        ["api", "v1", resource] => (None, *resource, None),
        _ => (None, "", None),
    };
    let verb = match (method, name) {
        (&Method::POST, _) => "create",
        (&Method::PATCH, _) => "patch",
        (&Method::PUT, _) => "update",
        (&Method::DELETE, _) => "delete",
        (_, Some(_)) => "get",
        (_, None) => "list",
    };
    let subject = match name {
        Some(n) => format!("{resource} \"{n}\""),
        None => resource.to_owned(),
    };
    let scope = match ns {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_owned(),
    };
    let mut details = serde_json::Map::new();
    if let Some(n) = name {
        details.insert("name".into(), n.into());
    }
    details.insert("kind".into(), resource.into());
    (
        403,
        status(
            403,
            "Forbidden",
            &format!(
                "{subject} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"\" {scope}"
            ),
            Some(Value::Object(details)),
        ),
    )
}

fn method_not_allowed() -> Reply {
    (
        405,
        status(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            Some(json!({})),
        ),
    )
}

/// The 415 of a PATCH whose content type is no patch type.
fn unsupported_media_type() -> Reply {
    (
        415,
        status(
            415,
            "UnsupportedMediaType",
            "415: Unsupported Media Type",
            Some(json!({})),
        ),
    )
}

fn is_patch_type(ct: &str) -> bool {
    let ct = ct.split(';').next().unwrap_or("").trim();
    matches!(
        ct,
        "application/strategic-merge-patch+json" | "application/merge-patch+json"
    )
}

fn route(
    shared: &Shared,
    method: &Method,
    segs: &[&str],
    query: &str,
    content_type: &str,
    body: &[u8],
) -> Reply {
    let now = now_rfc3339();
    let list_query = || ListQuery::parse(query);
    match (segs, method) {
        (["version"], &Method::GET) => (
            200,
            json!({"major": "1", "minor": "20", "gitVersion": "v1.20.2",
                   "gitCommit": "kevents-sim", "platform": "linux/amd64"}),
        ),
        (["api"], &Method::GET) => (
            200,
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        ),
        (["api", "v1"], &Method::GET) => (
            200,
            json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "events", "singularName": "", "namespaced": true, "kind": "Event",
                 "verbs": ["create", "delete", "get", "list", "patch"]},
                {"name": "namespaces", "singularName": "", "namespaced": false, "kind": "Namespace",
                 "verbs": ["create", "get"]}]}),
        ),
        (["apis"], &Method::GET) => {
            let groups: Vec<Value> = if shared.events_v1_served {
                vec![json!({"name": "events.k8s.io", "versions": [
                    {"groupVersion": "events.k8s.io/v1", "version": "v1"}],
                    "preferredVersion": {"groupVersion": "events.k8s.io/v1", "version": "v1"}})]
            } else {
                vec![]
            };
            (
                200,
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
            )
        }
        (["apis", "events.k8s.io", "v1"], &Method::GET) if shared.events_v1_served => (
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "events.k8s.io/v1",
                   "resources": [{"name": "events", "singularName": "", "namespaced": true,
                                  "kind": "Event", "verbs": ["create", "get", "list", "patch"]}]}),
        ),
        (["api", "v1", "namespaces"], &Method::POST) => {
            lock(&shared.store).create_namespace(body, &now)
        }
        (["api", "v1", "namespaces", ns], &Method::GET) => lock(&shared.store).get_namespace(ns),
        (["api", "v1", "namespaces", ns, "events"], &Method::POST) => {
            lock(&shared.store).create_event(ns, body, &now)
        }
        (["api", "v1", "namespaces", ns, "events"], &Method::GET) => match list_query() {
            Ok(q) => lock(&shared.store).list_events(Some(ns), &q),
            Err(r) => r,
        },
        (["api", "v1", "events"], &Method::GET) => match list_query() {
            Ok(q) => lock(&shared.store).list_events(None, &q),
            Err(r) => r,
        },
        (["api", "v1", "events"], _) => method_not_allowed(),
        (["api", "v1", "namespaces", ns, "events", name], &Method::GET) => {
            lock(&shared.store).get_event(ns, name)
        }
        (["api", "v1", "namespaces", ns, "events", name], &Method::DELETE) => {
            lock(&shared.store).delete_event(ns, name)
        }
        (["api", "v1", "namespaces", ns, "events", name], &Method::PATCH) => {
            if !is_patch_type(content_type) {
                return unsupported_media_type();
            }
            lock(&shared.store).patch_event(ns, name, body)
        }
        (["api", "v1", "namespaces", _, "events", ..], _) => method_not_allowed(),
        (["apis", "events.k8s.io", "v1", "namespaces", ns, "events"], &Method::POST)
            if shared.events_v1_served =>
        {
            lock(&shared.store).create_event_v1(ns, body, &now)
        }
        (["apis", "events.k8s.io", "v1", "namespaces", ns, "events"], &Method::GET)
            if shared.events_v1_served =>
        {
            match list_query() {
                Ok(q) => lock(&shared.store).list_events_v1(Some(ns), &q),
                Err(r) => r,
            }
        }
        (["apis", "events.k8s.io", "v1", "events"], &Method::GET) if shared.events_v1_served => {
            match list_query() {
                Ok(q) => lock(&shared.store).list_events_v1(None, &q),
                Err(r) => r,
            }
        }
        (
            [
                "apis",
                "events.k8s.io",
                "v1",
                "namespaces",
                ns,
                "events",
                name,
            ],
            &Method::GET,
        ) if shared.events_v1_served => lock(&shared.store).get_event_v1(ns, name),
        (
            [
                "apis",
                "events.k8s.io",
                "v1",
                "namespaces",
                ns,
                "events",
                name,
            ],
            &Method::DELETE,
        ) if shared.events_v1_served => lock(&shared.store).delete_event_v1(ns, name),
        (
            [
                "apis",
                "events.k8s.io",
                "v1",
                "namespaces",
                ns,
                "events",
                name,
            ],
            &Method::PATCH,
        ) if shared.events_v1_served => {
            if !is_patch_type(content_type) {
                return unsupported_media_type();
            }
            lock(&shared.store).patch_event_v1(ns, name, body)
        }
        (["apis", "events.k8s.io", "v1", "namespaces", _, "events", ..], _)
            if shared.events_v1_served =>
        {
            method_not_allowed()
        }
        (["api", ..], _) => store::no_route(),
        // Outside /api the apiserver's mux answers in plain text.
        _ => (404, Value::String("404 page not found\n".into())),
    }
}
