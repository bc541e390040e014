//! The HTTP side of kevents: [`HttpSink`], an [`EventSink`](kevents_core::EventSink) that
//! writes core/v1 Events to a Kubernetes apiserver exactly as client-go's `EventSinkImpl`
//! does, and an [`events_v1::EventSink`](kevents_core::events_v1::EventSink) for
//! `events.k8s.io/v1`, over `reqwest` with rustls (crypto provider `ring`).
//!
//! Source layout: `client.rs` ([`HttpSink`], the transport both APIs share: URLs,
//! authentication, TLS via `tls.rs`, bounded body reads, `/version`; the requests of both
//! APIs, their classification, lists ([`ListError`]), discovery and preflight are
//! `kevents_core::request`'s, the request layer kevents-kube's sink shares),
//! `config/` ([`HttpConfig`], its checks and limits, [`ConfigError`]), `kubeconfig.rs`
//! (kubeconfig and in-cluster loading), `auth.rs` (the credential of each request, exec
//! plugin caching), `token_file.rs` (token files, read on a worker thread of their own),
//! `off_thread.rs` (file reads bounded in time, [`read_credential_file`]), `exec.rs` (exec
//! credential plugin configuration, [`ExecError`]) and `exec_plugin.rs` (running a plugin,
//! [`ExecCredential`]) and `watch.rs` (the sink as a
//! [`StreamTransport`](kevents_core::request::StreamTransport): a watch's lines, bounded).
//! Watching and leader election over this transport are kevents-runtime's.
//!
//! Configuration comes from a kubeconfig (read with `kube`'s kubeconfig types and parser,
//! feature `config` only) or the in-cluster service account, or is built by hand
//! ([`HttpConfig`]). Every file and answer is read with a size limit, credentials are only
//! sent over HTTPS, and no credential or raw server text reaches an error or a log line.
//! See `docs/http.md` for TLS, authentication, the limits, the security guarantees and how
//! errors are classified.
//!
//! `kube`'s config module depends on `k8s-openapi`, which needs exactly one Kubernetes
//! version feature enabled in the final build. This library enables none: a binary that
//! uses it adds `k8s-openapi = { version = "0.29", default-features = false, features =
//! ["latest"] }` to its own dependencies.
//!
//! ```no_run
//! use kevents_core::{write_event, Event};
//! use kevents_http::{HttpConfig, HttpSink};
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let sink = HttpSink::new(HttpConfig::infer().await?)?;
//! let mut event = Event::default();
//! event.metadata.name = "web-1.17a0c2b5d9e5f3a1".into();
//! event.metadata.namespace = "default".into();
//! event.involved_object.namespace = "default".into();
//! event.count = 1;
//! let outcome = write_event(&sink, &mut event, None).await;
//! match &outcome.result {
//!     Ok(_) => println!("{} stored", event.metadata.name),
//!     Err(e) => println!("{e}: {:?}", e.disposition()),
//! }
//! # Ok(()) }
//! ```

mod auth;
mod client;
pub mod config;
mod exec;
mod exec_plugin;
mod kubeconfig;
mod off_thread;
mod tls;
mod token_file;
mod watch;

pub use client::{HttpSink, STRATEGIC_MERGE_PATCH, ServerVersion};
pub use config::{Auth, ClientIdentity, ConfigError, HttpConfig, Impersonation};
pub use exec::{
    DEFAULT_EXEC_REFRESH_MARGIN, DEFAULT_EXEC_TIMEOUT, EXEC_API_V1, EXEC_API_V1BETA1,
    EXEC_CLUSTER_EXTENSION, EXEC_INFO_ENV, EXEC_INITIAL_BACKOFF, EXEC_MAX_BACKOFF, ExecApiVersion,
    ExecCluster, ExecConfig, ExecError, InteractiveMode, MAX_EXEC_OUTPUT_BYTES,
    MAX_EXEC_STDERR_BYTES,
};
pub use exec_plugin::ExecCredential;
/// Why a list of events failed: kevents-core's request layer's, the same type as
/// `kevents_kube::ListError`.
///
/// ```
/// let e = kevents_http::ListError::TooManyPages { limit: 3, items: 750 };
/// assert_eq!(e.code(), None);
/// ```
pub use kevents_core::request::ListError;
pub use kubeconfig::ALLOW_LOOPBACK_HTTP_ENV;
pub use off_thread::{CREDENTIAL_FILE_TIMEOUT, read_credential_file};
pub use secrecy;
