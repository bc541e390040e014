//! # kevents
//!
//! Kubernetes Event recording for Rust, the way client-go's `tools/record` does it (same
//! names, same aggregation, same spam filter, same patches), as an actix actor pipeline
//! that never blocks the caller, counts every drop, retries transient apiserver failures
//! and flushes on shutdown.
//!
//! ## Getting started
//!
//! **A kube-rs controller** that records with `kube::runtime::events::Recorder`: depend on
//! `kevents-kube` alone, whose `Recorder` is a drop-in for kube's (the
//! [kube-rs page](guide::kube_rs)); it adds no second HTTP client or kubeconfig loader.
//!
//! ```toml
//! [dependencies]
//! kevents-kube = { git = "https://example.invalid/kevents" } # or path = "../kevents/crates/kevents-kube"; once published: "0.1"
//! kube = { version = "5", features = ["runtime", "client", "rustls-tls"] }
//! k8s-openapi = { version = "0.29", features = ["latest"] }
//! ```
//!
//! **A standalone tokio or actix application** writing to the apiserver itself: this crate,
//! whose [`HttpSink`] reads `KUBECONFIG`, `~/.kube/config` or the in-cluster service account
//! with kube's kubeconfig types. Those need `k8s-openapi` with one Kubernetes version feature
//! in the final build, hence its line (without it the build stops with k8s-openapi's
//! "None of the v1_* features are enabled" and the line to add):
//!
//! ```toml
//! [dependencies]
//! kevents = { git = "https://example.invalid/kevents" } # or path = "../kevents"; once published: "0.1"
//! k8s-openapi = { version = "0.29", default-features = false, features = ["latest"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! Then, in a `#[tokio::main]` application (the pipeline runs on a thread of its own there;
//! inside an actix `System` on the caller's arbiter):
//!
//! ```no_run
//! use kevents::{EventSource, EventType, HttpSink, ObjectReference, Pipeline, SinkOptions};
//! use std::time::Duration;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // KUBECONFIG, ~/.kube/config or the in-cluster service account.
//!     let sink = HttpSink::infer().await?;
//!     let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
//!         .sink("apiserver", sink, SinkOptions::default())
//!         .start();
//!     let recorder = pipeline.recorder(); // Clone + Send + Sync; never blocks
//!     let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
//!     for _ in 0..3 {
//!         recorder.event(&pod, EventType::Warning, "BackOff", "Back-off restarting container")?;
//!     }
//!     let report = pipeline.shutdown(Duration::from_secs(10)).await; // writes the last counts
//!     println!("{report}");
//!     Ok(())
//! }
//! ```
//!
//! One event is stored, `count: 3`. The pipeline coalesces repeats still waiting for the
//! sink, so it takes at most three requests: usually one CREATE with `count: 3`, as the three
//! calls come before the first write leaves (client-go would send a CREATE and two PATCHes).
//! [`FakeRecorder`] stands in for the pipeline in unit tests; `Pipeline::builder(..)
//! .sink_events_v1(..)` adds the `events.k8s.io/v1` API ([`events_v1`]).
//!
//! ## What is where
//!
//! The root holds what an application needs: [`Pipeline`] (built with
//! [`Pipeline::builder`]), the [`Recorder`] handle, [`EventSource`], [`EventType`],
//! [`ObjectReference`], the sinks' options ([`SinkOptions`], [`events_v1::SinkOptions`]) and entry
//! points ([`HttpSink`], with the `kube-client` feature `KubeSink`), and the report and errors.
//! The rest is in modules:
//!
//! | module | what |
//! |---|---|
//! | [`actors`] | the whole pipeline API: policies, budgets, watchers, statistics, messages |
//! | [`core`], [`core_v1`], [`events_v1`] | the pure core and the two event APIs' models, factories, correlator, series |
//! | [`http`] | the HTTP sink's configuration (feature `http`, on by default) |
//! | `kube_client` | `kevents-kube`: `KubeSink` over a `kube::Client` and the drop-in recorder (feature `kube-client`) |
//! | `sim` | the apiserver simulators (feature `sim`) |
//! | `prometheus` | `install`, serving the metrics (feature `prometheus`) |
//! | [`guide`] | the documentation pages: architecture, semantics, kube-rs, HTTP, ... |
//!
//! ### Names shared with kube
//!
//! Four names are kube's too. In a module that uses both, rename one side:
//!
//! ```
//! use kevents::EventType as KeventsEventType; // kube::runtime::events::EventType
//! use kevents::ObjectReference as KeventsReference; // k8s_openapi::api::core::v1::ObjectReference
//! use kevents::Recorder as KeventsRecorder; // kube::runtime::events::Recorder
//! use kevents::events_v1::Reporter as KeventsReporter; // kube::runtime::events::Reporter
//! # let _ = (KeventsEventType::Normal, KeventsReference::default());
//! # fn f(_: Option<KeventsRecorder>, _: Option<KeventsReporter>) {}
//! ```
//!
//! (`kevents::core_v1::Event` and kube's `Event` live in modules on both sides.)
//! kevents' `ObjectReference` converts from k8s-openapi's (`From`), and every
//! `kube::Resource` can be recorded about directly (feature `kube`, on by default).

#![cfg_attr(docsrs, feature(doc_cfg))]

/// The pipeline crate (`kevents-actors`), whole: watchers, policies, budgets, statistics,
/// messages.
pub use kevents_actors as actors;
pub use kevents_core as core;
/// The core/v1 `Event` API (client-go `tools/record`): model, construction, sink, correlator.
pub use kevents_core::core_v1;
/// The `events.k8s.io/v1` API (client-go `tools/events`): model, construction, series and
/// sink (`kevents_core::events_v1`), and the pipeline's twins of the core/v1 items at the
/// root, named alike: [`events_v1::SinkOptions`], [`events_v1::SinkSnapshot`]; the
/// events.k8s.io/v1 calls are [`Recorder::events_v1`]'s.
pub mod events_v1 {
    pub use kevents_actors::events_v1::{DEFAULT_FRESHNESS, SinkOptions, SinkSnapshot};
    pub use kevents_core::events_v1::*;
}

// What an application needs.
/// With the facade's paths:
///
/// ```
/// use kevents::{EventType, FakeRecorder, ObjectReference, Recorder};
///
/// fn reconcile(recorder: &Recorder) {
///     let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
///     recorder.event(&pod, EventType::Warning, "BackOff", "restarting").unwrap();
/// }
///
/// let fake = FakeRecorder::new();
/// reconcile(&fake.recorder());
/// assert_eq!(fake.strings(), ["Warning BackOff restarting"]);
/// ```
pub use kevents_actors::FakeRecorder;
/// With the facade's paths, from plain synchronous code (no runtime: the pipeline runs on a
/// thread of its own; a logging watcher here, [`HttpSink`] in production):
///
/// ```
/// use kevents::actors::WatcherPolicy;
/// use kevents::{EventSource, EventType, ObjectReference, Pipeline};
/// use std::time::Duration;
///
/// let pipeline = Pipeline::builder(EventSource::new("my-tool", "host-1"))
///     .logging(WatcherPolicy::default())
///     .start();
/// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
/// pipeline.recorder().event(&pod, EventType::Normal, "Checked", "all good").unwrap();
/// let report = pipeline.shutdown_blocking(Duration::from_secs(5)).unwrap();
/// assert_eq!(report.stats.recorded, 1);
/// ```
pub use kevents_actors::Pipeline;
pub use kevents_actors::{
    Emit, EventsV1Config, EventsV1Recorder, ObjectRecorder, PipelineBuilder, PipelineError,
    RecordError, Recorder, ShutdownReport, SinkOptions, StartError, eventf, eventf_events_v1,
    terminated,
};
pub use kevents_core::{EventSource, EventType, ObjectReference, Reference};

/// The apiserver sink: `HttpSink::infer()` (kubeconfig or in-cluster), `HttpSink::new`;
/// from plain synchronous code (no runtime), `HttpSink::infer_blocking()`:
///
/// ```no_run
/// use kevents::{EventSource, EventType, HttpSink, ObjectReference, Pipeline, SinkOptions};
/// use std::time::Duration;
///
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let sink = HttpSink::infer_blocking()?; // KUBECONFIG, ~/.kube/config or in-cluster
///     let pipeline = Pipeline::builder(EventSource::new("my-tool", "host-1"))
///         .sink("apiserver", sink, SinkOptions::default())
///         .start(); // on a thread of its own
///     let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
///     pipeline.recorder().event(&pod, EventType::Normal, "Checked", "all good")?;
///     println!("{}", pipeline.shutdown_blocking(Duration::from_secs(10))?);
///     Ok(())
/// }
/// ```
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use kevents_http::HttpSink;

/// The sinks of both event APIs over an existing `kube::Client`.
#[cfg(feature = "kube-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "kube-client")))]
pub use kevents_kube::KubeSink;

/// The in-memory apiserver (for tests and demos).
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub use kevents_sim::MemoryApiServer;

/// The apiserver sink and its configuration (kubeconfig, in-cluster, explicit).
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use kevents_http as http;

/// kube-rs interop: [its sink `KubeSink`](kevents_kube::KubeSink) (both event APIs over an
/// existing `kube::Client`), leader election for controllers (`kube_client::leader`), [`Recorder`](kevents_kube::Recorder), a drop-in for
/// `kube::runtime::events::Recorder` backed by this pipeline, and its
/// [`FakeRecorder`](kevents_kube::FakeRecorder) ([the kube-rs page](guide::kube_rs)).
#[cfg(feature = "kube-client")]
#[cfg_attr(docsrs, doc(cfg(feature = "kube-client")))]
pub use kevents_kube as kube_client;

/// The apiserver simulators: in-process HTTP, in-memory, replay, benchmark workloads.
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub use kevents_sim as sim;

#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub mod prometheus;

// Rendered in the documentation, and read by the doc tests: the pages' Rust blocks are
// compiled (`cargo test -p kevents --all-features --doc`); no code of its own.
#[cfg(any(doc, doctest))]
pub mod guide;

/// actix, re-exported so the version always matches the pipeline's.
pub use actix;
