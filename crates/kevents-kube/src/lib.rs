//! kube-rs interop for kevents.
//!
//! A kube-rs controller already holds a [`kube::Client`] (authentication, proxy, TLS,
//! middleware) and records events with `kube::runtime::events::Recorder`. This crate gives it
//! the kevents pipeline without a second client or a rewrite of its event code:
//!
//! * [`KubeSink`]: the sinks of both event APIs (core/v1 [`EventSink`](kevents_core::EventSink),
//!   `events.k8s.io/v1` [`events_v1::EventSink`](kevents_core::events_v1::EventSink)) over an
//!   existing `kube::Client`, with kevents-http's requests and error classification (404 →
//!   CREATE, 409 dropped quietly, 429/5xx and transport errors retried, `Retry-After`
//!   honoured), bounded response reads and sanitised server text. Use it with
//!   `Pipeline::builder(..).sink(..)` / `.sink_events_v1(..)` like kevents-http's `HttpSink`.
//! * [`Recorder`]: a drop-in for `kube::runtime::events::Recorder` (`Recorder::new(client,
//!   reporter)`, `publish(&Event, &ObjectReference)`, kube's own types) backed by the kevents
//!   pipeline: non-blocking, series counted exactly under concurrency, final counts written
//!   on [`Recorder::shutdown`]. It runs its actix `System` on its own thread, so a tokio
//!   application needs nothing else.
//!
//! Migration from kube-rs's recorder: `docs/kube-rs.md` (on docs.rs: `kevents::guide::kube_rs`).
//!
//! ## Getting started
//!
//! ```toml
//! [dependencies]
//! kevents-kube = { git = "https://example.invalid/kevents" } # or path = "../kevents/crates/kevents-kube"; once published: "0.1"
//! kube = { version = "5", features = ["runtime", "client", "rustls-tls"] }
//! k8s-openapi = { version = "0.29", features = ["latest"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kevents_kube::Recorder;
//! use kube::runtime::events::{Event, EventType, Reporter};
//! use kube::{Api, Client, Resource};
//! use std::time::Duration;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let client = Client::try_default().await?;
//!     let reporter = Reporter { controller: "example.com/my-controller".into(), instance: None };
//!     let recorder = Recorder::new(client.clone(), reporter); // one per controller; clone it
//!     let cm = Api::<ConfigMap>::namespaced(client, "default").get("kube-root-ca.crt").await?;
//!     let synced = Event { type_: EventType::Normal, reason: "Synced".into(),
//!         note: Some("configuration applied".into()), action: "Reconcile".into(), secondary: None };
//!     for _ in 0..3 {
//!         recorder.publish(&synced, &cm.object_ref(&())).await?; // queued: no request awaited
//!     }
//!     println!("{}", recorder.shutdown(Duration::from_secs(10)).await?); // the last counts
//!     Ok(())
//! }
//! ```
//!
//! The ConfigMap `kube-root-ca.crt` is in every namespace of a cluster (Kubernetes 1.21+
//! publishes it; 1.20 by default), so this runs on a fresh one. One event is stored about it
//! in `default`, its series count 3. In unit tests,
//! [`FakeRecorder`] gives the reconciler a `Recorder` that keeps every publish.
//!
//! Source layout: `sink.rs` ([`KubeSink`], a [`Transport`](kevents_core::request::Transport):
//! one request through the client, deadline, bounded read, error mapping; the two APIs'
//! sinks, lists, discovery and `KubeSink::preflight` are those of
//! [`kevents_core::request::Client`], the request layer kevents-http's sink shares, and
//! [`ListError`] is its), `recorder/` (the drop-in).
//!
//! `k8s-openapi` needs exactly one Kubernetes version feature in the final build; this
//! library enables none (add `k8s-openapi = { version = "0.29", features = ["latest"] }` or
//! your cluster's version to the application, as every kube-rs application does). kube's TLS
//! backend is the application's choice too (e.g. kube's `rustls-tls` feature).
//!
//! ## A pipeline of your own over the client
//!
//! ```no_run
//! use kevents_actors::Pipeline;
//! use kevents_core::events_v1::{Occurrence, Reporter};
//! use kevents_core::{EventSource, EventType, ObjectReference};
//! use kevents_kube::KubeSink;
//! use kevents_actors::events_v1::SinkOptions;
//!
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let sink = KubeSink::new(client);
//! let served = sink.requests().events_v1_served().await?;
//! // In a tokio application the pipeline runs on a thread of its own.
//! let pipeline = Pipeline::builder(EventSource::new("example.com/ctl", "node-1"))
//!     .events_v1(kevents_actors::EventsV1Config::new(Reporter::new("example.com/ctl")).served(served))
//!     .sink_events_v1("apiserver", sink.clone(), SinkOptions::default())
//!     .sink("apiserver", sink, Default::default())
//!     .start();
//! let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
//! pipeline.recorder().events_v1().emit(Occurrence::new(pod, None, EventType::Normal,
//!                                                "Scheduled", "Binding", "bound"))?;
//! pipeline.shutdown(std::time::Duration::from_secs(10)).await;
//! # Ok(()) }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod sink;
mod stream;
// Above the sink: the recorder built on it.
mod recorder;

/// Resolves on SIGTERM or Ctrl-C: await it, then [`Recorder::shutdown`] (kevents-actors'
/// `terminated`; `docs/kube-rs.md` has the pattern with kube-rs's `Controller`).
///
/// ```no_run
/// # async fn f(recorder: kevents_kube::Recorder) -> Result<(), Box<dyn std::error::Error>> {
/// kevents_kube::terminated().await?;
/// let report = recorder.shutdown(std::time::Duration::from_secs(20)).await?;
/// eprintln!("{report}");
/// # Ok(()) }
/// ```
pub use kevents_actors::terminated;

/// Leader election for kube-rs controllers over their own `kube::Client` (kevents-runtime's,
/// through [`KubeSink`]): client-go's Lease elector ([`LeaderElector`](leader::LeaderElector))
/// and the lead-or-stand-by loop ([`run_while_leading`](leader::run_while_leading)) that runs
/// a controller only while it leads. `docs/kube-rs.md` has the pattern with
/// `kube::runtime::Controller`.
///
/// ```no_run
/// use std::time::Duration;
/// use kevents_kube::KubeSink;
/// use kevents_kube::leader::{LeaderElector, LeaseConfig, run_while_leading};
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube::Client::try_default().await?;
/// let config = LeaseConfig::new("default", "my-controller", "pod-a");
/// let handle = LeaderElector::new(KubeSink::new(client).requests(), config)?.spawn();
/// let shutdown = async { let _ = kevents_kube::terminated().await; };
/// run_while_leading(&handle, shutdown, Duration::ZERO, |term| async move {
///     term.lost().await; // run the controller here
///     Ok::<(), kube::Error>(())
/// })
/// .await?;
/// handle.release().await?;
/// # Ok(()) }
/// ```
pub mod leader {
    pub use kevents_runtime::lead::{LeadError, Term, Terms, run_while_leading};
    pub use kevents_runtime::lease::{
        DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LeaderElector,
        LeaderHandle, LeaseConfig, LeaseError,
    };
}
/// Why a list of events failed: kevents-core's request layer's, the same type as
/// `kevents_http::ListError`.
///
/// ```
/// let e = kevents_kube::ListError::TooManyPages { limit: 3, items: 750 };
/// assert_eq!(e.code(), None);
/// ```
pub use kevents_core::request::ListError;
pub use recorder::{
    FakeRecorder, NoteLength, Notes, PublishError, Published, Recorder, RecorderOptions, SINK_NAME,
    StartError,
};
pub use sink::{
    DEFAULT_MAX_LIST_BYTES, DEFAULT_MAX_LIST_PAGES, DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_TIMEOUT, KubeSink, LIST_PAGE_SIZE, STRATEGIC_MERGE_PATCH,
};
