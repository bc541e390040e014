//! Kubernetes apiserver simulators for kevents:
//!
//! * [`Simulator`]: an in-process apiserver for core/v1 and `events.k8s.io/v1` Events on
//!   loopback HTTP (or HTTPS with a generated self-signed certificate), with injectable
//!   faults (below);
//! * [`MemoryApiServer`] ([`memory`]): an in-memory apiserver called directly, without HTTP
//!   (an `EventSink` and an `EventsV1Sink`), for tests, replay and benchmarks;
//! * [`replay`]: replaying recorded occurrences through the core/v1 correlation path (the
//!   `kevents replay` command);
//! * [`workload`]: the benchmark workloads of `docs/benchmarks.md`.
//!
//! The HTTP simulator:
//!
//! It answers `POST /api/v1/namespaces/{ns}/events`, `PATCH`/`GET`/`DELETE
//! .../events/{name}`, event lists, namespace creation, `/version` and discovery with the
//! same status codes and `Status` bodies as kube-apiserver 1.20 (checked by the conformance
//! suite in `kevents-testkit`, which runs the same scenarios against a real apiserver):
//! 201 on create, 200 on patch, 404 `NotFound` on a patch of a missing event, 409
//! `AlreadyExists`, 422 `Invalid` with causes (legacy validation), 400 `BadRequest` for a
//! namespace mismatch, 404 for a missing namespace (when namespaces are enforced), 401 for an
//! unknown token and 403 `Forbidden` for a token without rights. resourceVersions increase on
//! every write; PATCH is a strategic merge (maps merged key by key, `null` deletes).
//!
//! Faults ([`Faults`]): added latency, an error status (429 with `Retry-After`, 5xx, any
//! code, Status or plain-text body) for the next N requests, TCP resets in the middle of
//! the next N requests, and refusing connections for a while (the listener is closed, open
//! connections are reset, and the same port is bound again later). Hostile-server modes:
//! event lists that never end ([`ListFault`]), success answers padded past a client's size
//! limit, events stored with a message of the test's choosing (escapes, CR/LF), raw JSON
//! error bodies ([`FaultBody::Json`], e.g. a `Status` whose message carries escapes), and a
//! server that accepts connections but never answers.
//!
//! The server runs on its own thread with its own tokio runtime, so it works from any caller:
//! an actix `System`, a current-thread or multi-thread tokio runtime, or plain threads
//! ([`Simulator::start_blocking`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kevents_sim::SimError> {
//! use kevents_sim::{Faults, SimConfig, Simulator};
//! let sim = Simulator::start(SimConfig::default()).await?;
//! println!("apiserver at {}", sim.url());
//! sim.set_faults(Faults::error(503, 3)); // the next 3 requests get 503
//! assert!(sim.events().is_empty());
//! sim.shutdown().await;
//! # Ok(()) }
//! ```

mod access_review;
pub mod memory;
pub mod replay;
mod server;
mod store;
pub mod workload;

pub use memory::MemoryApiServer;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use kevents_core::Event;
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};

use server::{Command, Shared, User, lock};

/// Why the simulator could not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SimError {
    /// Binding the listening socket failed.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The IO error.
        source: std::io::Error,
    },
    /// The server thread or its runtime could not be started.
    #[error("cannot start the simulator thread: {0}")]
    Thread(String),
    /// Generating or loading the TLS certificate failed.
    #[error("TLS setup: {0}")]
    Tls(String),
}

/// The body of an injected error answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FaultBody {
    /// A `metav1.Status` with the code, a matching reason and `retryAfterSeconds`.
    #[default]
    Status,
    /// Plain text, as a proxy or load balancer in front of the apiserver would send.
    Text(String),
    /// This JSON text as it is (`Content-Type: application/json`), e.g. a `Status` with a
    /// hostile message ([`Faults::error_status`]).
    Json(String),
}

/// Event lists that never end (`GET` of the events of either API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListFault {
    /// Every list answer is the first page with the same `continue` token.
    RepeatContinue,
    /// Every list answer is the first page with a fresh `continue` token, forever.
    EndlessContinue,
}

/// An error answer injected instead of handling the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFault {
    /// HTTP status code (429, 500, 503, ... or even 200 or 307).
    pub code: u16,
    /// `Retry-After` header (seconds), also put in the Status' `retryAfterSeconds`.
    pub retry_after: Option<u32>,
    /// How many more requests get this answer (`u64::MAX`: until changed).
    pub times: u64,
    /// The body.
    pub body: FaultBody,
    /// Extra headers (e.g. `Location` for a redirect).
    pub headers: Vec<(String, String)>,
}

/// The fault plan, applied to every request in order: latency, then a reset (if any are
/// left), then an error answer (if any are left). Counters count down as requests arrive.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Faults {
    /// Delay before every request is handled.
    pub latency: Duration,
    /// Reset the TCP connection (RST, no response) in the middle of this many requests.
    pub resets: u64,
    /// Answer requests with an error instead of handling them.
    pub error: Option<ErrorFault>,
    /// Event lists never end.
    pub list: Option<ListFault>,
    /// Successful answers (2xx) are padded with trailing spaces to at least this many bytes
    /// (0: off), as an echo larger than a client's response size limit. The request itself
    /// is handled normally (the event is stored).
    pub pad_success_to: usize,
    /// Events created while this is set are stored (and echoed) with this message (core/v1
    /// `message`, events.k8s.io/v1 `note`) instead of the one sent, e.g. text with escapes,
    /// CR or LF.
    pub stored_message: Option<String>,
    /// Accept connections but never answer: no TLS handshake and no HTTP answer on new
    /// connections, no answer to requests on open ones, until the connection is closed or the
    /// fault is removed (requests already waiting stay unanswered).
    pub unresponsive: bool,
}

impl Faults {
    /// No faults.
    pub fn none() -> Self {
        Faults::default()
    }

    /// The next `times` requests are answered `code` with a Status body.
    ///
    /// ```
    /// let f = kevents_sim::Faults::error(500, 2);
    /// assert_eq!(f.error.unwrap().times, 2);
    /// ```
    pub fn error(code: u16, times: u64) -> Self {
        Faults {
            error: Some(ErrorFault {
                code,
                retry_after: None,
                times,
                body: FaultBody::Status,
                headers: Vec::new(),
            }),
            ..Faults::default()
        }
    }

    /// The next `times` requests are answered 429 with `Retry-After: retry_after_secs`.
    ///
    /// ```
    /// let f = kevents_sim::Faults::too_many_requests(1, 10);
    /// assert_eq!(f.error.unwrap().retry_after, Some(1));
    /// ```
    pub fn too_many_requests(retry_after_secs: u32, times: u64) -> Self {
        let mut f = Faults::error(429, times);
        if let Some(e) = f.error.as_mut() {
            e.retry_after = Some(retry_after_secs);
        }
        f
    }

    /// Every request is delayed by `latency`.
    ///
    /// ```
    /// let f = kevents_sim::Faults::latency(std::time::Duration::from_millis(50));
    /// assert!(f.error.is_none());
    /// ```
    pub fn latency(latency: Duration) -> Self {
        Faults {
            latency,
            ..Faults::default()
        }
    }

    /// The next `times` requests are answered `code` with a `Status` of this reason and
    /// message (any text: escapes, CR/LF, ...).
    ///
    /// ```
    /// let f = kevents_sim::Faults::error_status(500, 1, "InternalError", "\u{1b}[2Jboom\r\n");
    /// assert!(matches!(f.error.unwrap().body, kevents_sim::FaultBody::Json(_)));
    /// ```
    pub fn error_status(code: u16, times: u64, reason: &str, message: &str) -> Self {
        let body = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code,
            "details": {"causes": [{"reason": reason, "message": message, "field": message}]},
        });
        let mut f = Faults::error(code, times);
        if let Some(e) = f.error.as_mut() {
            e.body = FaultBody::Json(body.to_string());
        }
        f
    }

    /// Event lists never end (see [`ListFault`]).
    ///
    /// ```
    /// use kevents_sim::{Faults, ListFault};
    /// assert_eq!(Faults::endless_list(ListFault::RepeatContinue).list, Some(ListFault::RepeatContinue));
    /// ```
    pub fn endless_list(kind: ListFault) -> Self {
        Faults {
            list: Some(kind),
            ..Faults::default()
        }
    }

    /// Accept connections, never answer.
    ///
    /// ```
    /// assert!(kevents_sim::Faults::unresponsive().unresponsive);
    /// ```
    pub fn unresponsive() -> Self {
        Faults {
            unresponsive: true,
            ..Faults::default()
        }
    }

    /// The next `times` requests have their connection reset after the request was read.
    ///
    /// ```
    /// assert_eq!(kevents_sim::Faults::resets(3).resets, 3);
    /// ```
    pub fn resets(times: u64) -> Self {
        Faults {
            resets: times,
            ..Faults::default()
        }
    }
}

/// Counters of what the simulator saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SimStats {
    /// TCP connections accepted.
    pub connections: u64,
    /// HTTP requests received (including faulted ones).
    pub requests: u64,
    /// Successful POSTs (events and namespaces).
    pub creates: u64,
    /// Successful PATCHes.
    pub patches: u64,
    /// Requests answered with an injected error.
    pub injected_errors: u64,
    /// Requests whose connection was reset.
    pub resets: u64,
}

/// Bearer-token authentication: one token with every right, one with none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimAuth {
    /// A token allowed everything (like group `system:masters`).
    pub admin_token: String,
    /// A token that authenticates as user `nobody` and is refused everything but discovery.
    pub nobody_token: String,
}

impl SimAuth {
    /// Fresh random tokens.
    ///
    /// ```
    /// let a = kevents_sim::SimAuth::random();
    /// assert_ne!(a.admin_token, a.nobody_token);
    /// ```
    pub fn random() -> Self {
        SimAuth {
            admin_token: format!("admin-{}", uuid::Uuid::new_v4().simple()),
            nobody_token: format!("nobody-{}", uuid::Uuid::new_v4().simple()),
        }
    }
}

/// How to start the simulator. The default: `127.0.0.1`, a free port, plain HTTP, no
/// authentication, every namespace exists, events.k8s.io/v1 not served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Listening address (port 0: a free one).
    pub bind: SocketAddr,
    /// Serve HTTPS with a freshly generated self-signed certificate for `127.0.0.1` and
    /// `localhost` (see [`SimHandle::ca_pem`]).
    pub tls: bool,
    /// Require bearer tokens.
    pub auth: Option<SimAuth>,
    /// `Some`: only these namespaces exist (more can be created with `POST
    /// /api/v1/namespaces` or [`SimHandle::create_namespace`]); creating an event elsewhere
    /// is 404. `None`: every namespace exists.
    pub namespaces: Option<Vec<String>>,
    /// Serve `events.k8s.io/v1`: discovery (`GET /apis`, `GET /apis/events.k8s.io/v1`) and
    /// `/apis/events.k8s.io/v1/namespaces/{ns}/events[/{name}]` with kube-apiserver 1.20.2's
    /// behaviour (strict create validation, series merge on PATCH). Off: those paths answer
    /// 404, as a server without the API.
    pub events_v1_served: bool,
    /// resourceVersion before the first write.
    pub initial_resource_version: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            auth: None,
            namespaces: None,
            events_v1_served: false,
            initial_resource_version: 100,
        }
    }
}

impl SimConfig {
    /// Like a fresh kube-apiserver 1.20: HTTPS (a generated certificate, see
    /// [`SimHandle::ca_pem`]; bearer tokens are never sent over plain HTTP), random admin and
    /// nobody tokens, only the namespaces `default`, `kube-system`, `kube-public` and
    /// `kube-node-lease`, and `events.k8s.io/v1` served.
    ///
    /// ```
    /// let c = kevents_sim::SimConfig::like_apiserver();
    /// assert!(c.tls && c.auth.is_some() && c.namespaces.is_some() && c.events_v1_served);
    /// ```
    pub fn like_apiserver() -> Self {
        SimConfig {
            tls: true,
            auth: Some(SimAuth::random()),
            namespaces: Some(
                ["default", "kube-system", "kube-public", "kube-node-lease"]
                    .map(String::from)
                    .to_vec(),
            ),
            events_v1_served: true,
            ..SimConfig::default()
        }
    }
}

/// Starts simulators.
#[derive(Debug)]
pub struct Simulator;

struct TlsMaterial {
    ca_pem: String,
    acceptor: tokio_rustls::TlsAcceptor,
    client_ca: Arc<rcgen::Issuer<'static, rcgen::KeyPair>>,
}

fn tls_material() -> Result<TlsMaterial, SimError> {
    let tls = |e: &dyn std::fmt::Display| SimError::Tls(e.to_string());
    // The CA of client certificates (SimHandle::client_certificate): asked for, not required.
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(|e| tls(&e))?;
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kevents-sim-client-ca");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = rcgen::KeyPair::generate().map_err(|e| tls(&e))?;
    let client_ca = Arc::new(rcgen::Issuer::new(ca_params, ca_key));
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .map_err(|e| tls(&e))?;
    let cert_der = certified.cert.der().clone();
    let key_der = rustls_pki_types::PrivateKeyDer::Pkcs8(
        rustls_pki_types::PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()),
    );
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let verifier = Arc::new(server::AnyClientCert(provider.clone()));
    let mut config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(&e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![cert_der], key_der)
        .map_err(|e| tls(&e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsMaterial {
        ca_pem: certified.cert.pem(),
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        client_ca,
    })
}

impl Simulator {
    /// Starts a simulator on its own thread and returns once it accepts connections.
    /// Callable from any async runtime (it only awaits a channel).
    pub async fn start(config: SimConfig) -> Result<SimHandle, SimError> {
        let (tx, rx) = oneshot::channel();
        let pending = Self::spawn(config, tx)?;
        match rx.await {
            Ok(Ok(addr)) => Ok(pending.finish(addr)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(SimError::Thread("the simulator thread exited".into())),
        }
    }

    /// Like [`Simulator::start`], for synchronous callers. Must not be called from inside
    /// an async task (it blocks the thread until the server is up).
    ///
    /// ```
    /// let sim = kevents_sim::Simulator::start_blocking(Default::default()).unwrap();
    /// assert!(sim.url().starts_with("http://127.0.0.1:"));
    /// ```
    pub fn start_blocking(config: SimConfig) -> Result<SimHandle, SimError> {
        let (tx, rx) = oneshot::channel();
        let pending = Self::spawn(config, tx)?;
        match rx.blocking_recv() {
            Ok(Ok(addr)) => Ok(pending.finish(addr)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(SimError::Thread("the simulator thread exited".into())),
        }
    }

    fn spawn(
        config: SimConfig,
        ready: oneshot::Sender<Result<SocketAddr, SimError>>,
    ) -> Result<PendingHandle, SimError> {
        let tls = if config.tls {
            Some(tls_material()?)
        } else {
            None
        };
        let tokens = config.auth.as_ref().map(|a| {
            Mutex::new(vec![
                (
                    a.admin_token.clone(),
                    User {
                        name: "kevents-admin".into(),
                        authorized: true,
                    },
                ),
                (
                    a.nobody_token.clone(),
                    User {
                        name: "nobody".into(),
                        authorized: false,
                    },
                ),
            ])
        });
        let shared = Arc::new(Shared {
            store: Mutex::new(store::Store::new(
                config.namespaces.as_deref(),
                config.initial_resource_version,
            )),
            faults: Mutex::new(Faults::default()),
            stats: Mutex::new(SimStats::default()),
            tokens,
            cert_users: Mutex::new(Vec::new()),
            events_v1_served: config.events_v1_served,
        });
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let thread_shared = shared.clone();
        let acceptor = tls.as_ref().map(|t| t.acceptor.clone());
        let bind_addr = config.bind;
        std::thread::Builder::new()
            .name("kevents-sim".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready.send(Err(SimError::Thread(e.to_string())));
                        return;
                    }
                };
                rt.block_on(async move {
                    let listener = match server::bind(bind_addr) {
                        Ok(l) => l,
                        Err(source) => {
                            let _ = ready.send(Err(SimError::Bind {
                                addr: bind_addr,
                                source,
                            }));
                            return;
                        }
                    };
                    match listener.local_addr() {
                        Ok(a) => {
                            let _ = ready.send(Ok(a));
                        }
                        Err(source) => {
                            let _ = ready.send(Err(SimError::Bind {
                                addr: bind_addr,
                                source,
                            }));
                            return;
                        }
                    }
                    if let Some(done) = server::run(thread_shared, listener, acceptor, cmd_rx).await
                    {
                        let _ = done.send(());
                    }
                });
            })
            .map_err(|e| SimError::Thread(e.to_string()))?;
        Ok(PendingHandle {
            shared,
            commands: cmd_tx,
            auth: config.auth,
            client_ca: tls.as_ref().map(|t| t.client_ca.clone()),
            ca_pem: tls.map(|t| t.ca_pem),
        })
    }
}

struct PendingHandle {
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
    auth: Option<SimAuth>,
    ca_pem: Option<String>,
    client_ca: Option<Arc<rcgen::Issuer<'static, rcgen::KeyPair>>>,
}

impl PendingHandle {
    fn finish(self, addr: SocketAddr) -> SimHandle {
        SimHandle {
            shared: self.shared,
            commands: self.commands,
            addr,
            auth: self.auth,
            ca_pem: self.ca_pem,
            client_ca: self.client_ca,
        }
    }
}

/// A running simulator. Dropping it stops the server (without waiting); use
/// [`SimHandle::shutdown`] to wait.
pub struct SimHandle {
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
    addr: SocketAddr,
    auth: Option<SimAuth>,
    ca_pem: Option<String>,
    client_ca: Option<Arc<rcgen::Issuer<'static, rcgen::KeyPair>>>,
}

impl std::fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimHandle")
            .field("url", &self.url())
            .field("auth", &self.auth.is_some())
            .finish_non_exhaustive()
    }
}

impl SimHandle {
    /// `http://127.0.0.1:PORT` (or `https://`).
    pub fn url(&self) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token with every right, if authentication is on.
    pub fn admin_token(&self) -> Option<&str> {
        self.auth.as_ref().map(|a| a.admin_token.as_str())
    }

    /// The token without rights (403 on every event request), if authentication is on.
    pub fn nobody_token(&self) -> Option<&str> {
        self.auth.as_ref().map(|a| a.nobody_token.as_str())
    }

    /// Adds a bearer token while the simulator runs: `authorized` ones may do everything
    /// (like the admin token), the others are refused (403) but discovery, as user `user`.
    /// `false` when authentication is off (every request is allowed anyway).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let sim = kevents_sim::Simulator::start(kevents_sim::SimConfig::like_apiserver()).await.unwrap();
    /// assert!(sim.add_token("rotated-1", "rotator", true));
    /// assert!(sim.revoke_token("rotated-1"));
    /// assert!(!sim.revoke_token("rotated-1"));
    /// # }
    /// ```
    pub fn add_token(&self, token: &str, user: &str, authorized: bool) -> bool {
        let Some(tokens) = &self.shared.tokens else {
            return false;
        };
        lock(tokens).push((
            token.to_owned(),
            server::User {
                name: user.to_owned(),
                authorized,
            },
        ));
        true
    }

    /// Revokes a bearer token (the built-in ones too): requests with it get 401 from now on.
    /// `false` if it was not known.
    pub fn revoke_token(&self, token: &str) -> bool {
        let Some(tokens) = &self.shared.tokens else {
            return false;
        };
        let mut tokens = lock(tokens);
        let before = tokens.len();
        tokens.retain(|(t, _)| t != token);
        tokens.len() != before
    }

    /// A new TLS client certificate and its key (both PEM), signed by the simulator's client
    /// CA, that authenticates as `user` (with every right when `authorized`, else refused
    /// with 403 but discovery). HTTPS only (`None` over plain HTTP); with authentication off,
    /// every request is allowed anyway.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let sim = kevents_sim::Simulator::start(kevents_sim::SimConfig::like_apiserver()).await.unwrap();
    /// let (cert_pem, key_pem) = sim.client_certificate("cert-user", true).unwrap();
    /// assert!(cert_pem.contains("BEGIN CERTIFICATE") && key_pem.contains("PRIVATE KEY"));
    /// # }
    /// ```
    pub fn client_certificate(&self, user: &str, authorized: bool) -> Option<(String, String)> {
        let issuer = self.client_ca.as_ref()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).ok()?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, user);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().ok()?;
        let cert = params.signed_by(&key, issuer).ok()?;
        lock(&self.shared.cert_users).push((
            cert.der().to_vec(),
            server::User {
                name: user.to_owned(),
                authorized,
            },
        ));
        Some((cert.pem(), key.serialize_pem()))
    }

    /// The self-signed serving certificate (PEM) to trust, when serving HTTPS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// A kubeconfig (YAML) for this simulator, with `token` as the user's bearer token
    /// (the admin token when `None` and authentication is on) and context namespace
    /// `namespace`.
    ///
    /// ```
    /// let sim = kevents_sim::Simulator::start_blocking(Default::default()).unwrap();
    /// assert!(sim.kubeconfig(None, "default").contains(&sim.url()));
    /// ```
    pub fn kubeconfig(&self, token: Option<&str>, namespace: &str) -> String {
        let mut cluster = format!("    server: {}\n", self.url());
        if let Some(pem) = &self.ca_pem {
            let data = base64::engine::general_purpose::STANDARD.encode(pem.as_bytes());
            cluster.push_str(&format!("    certificate-authority-data: {data}\n"));
        }
        let token = token.or(self.admin_token());
        let user = match token {
            Some(t) => format!("    token: {t}\n"),
            None => "    {}\n".to_owned(),
        };
        let user = if token.is_some() {
            format!("- name: sim\n  user:\n{user}")
        } else {
            "- name: sim\n  user: {}\n".to_owned()
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n{cluster}users:\n{user}contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: sim\n    namespace: {namespace}\ncurrent-context: sim\n"
        )
    }

    /// Every stored event, ordered by namespace and name (events the store cannot read as
    /// a core/v1 Event are skipped).
    pub fn events(&self) -> Vec<Event> {
        lock(&self.shared.store)
            .events
            .values()
            .filter_map(|v| serde_json::from_value(v.clone()).ok())
            .collect()
    }

    /// One stored event.
    pub fn event(&self, namespace: &str, name: &str) -> Option<Event> {
        lock(&self.shared.store)
            .events
            .get(&(namespace.to_owned(), name.to_owned()))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// Deletes an event (as the server's TTL would). Returns whether it existed.
    pub fn delete_event(&self, namespace: &str, name: &str) -> bool {
        lock(&self.shared.store)
            .events
            .remove(&(namespace.to_owned(), name.to_owned()))
            .is_some()
    }

    /// Makes `name` exist (when namespaces are enforced).
    pub fn create_namespace(&self, name: &str) {
        lock(&self.shared.store).namespaces.insert(name.to_owned());
    }

    /// Replaces the fault plan.
    pub fn set_faults(&self, faults: Faults) {
        *lock(&self.shared.faults) = faults;
    }

    /// The current fault plan (with its counters as far as they have counted down).
    pub fn faults(&self) -> Faults {
        lock(&self.shared.faults).clone()
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.set_faults(Faults::none());
    }

    /// Counters.
    pub fn stats(&self) -> SimStats {
        *lock(&self.shared.stats)
    }

    /// Stops listening and resets every open connection, as a crashed apiserver would.
    /// With `Some(d)`, the same port is listened on again after `d`; with `None`, only
    /// [`SimHandle::accept_connections`] does. Returns once connections are refused.
    pub async fn refuse_connections(&self, duration: Option<Duration>) {
        let (done, rx) = oneshot::channel();
        if self
            .commands
            .send(Command::Refuse { duration, done })
            .is_ok()
        {
            let _ = rx.await;
        }
    }

    /// Listens again on the same port (after [`SimHandle::refuse_connections`]). Returns once
    /// connections are accepted.
    pub async fn accept_connections(&self) {
        let (done, rx) = oneshot::channel();
        if self.commands.send(Command::Accept { done }).is_ok() {
            let _ = rx.await;
        }
    }

    /// Stops the server and waits until the port is closed.
    pub async fn shutdown(self) {
        let (done, rx) = oneshot::channel();
        if self.commands.send(Command::Shutdown { done }).is_ok() {
            let _ = rx.await;
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        let (done, _rx) = oneshot::channel();
        let _ = self.commands.send(Command::Shutdown { done });
    }
}
