//! # kevents
//!
//! Kubernetes Event recording for Rust, the way client-go's `tools/record` does it (same
//! names, same aggregation, same spam filter, same patches), as an actix actor pipeline
//! that never blocks the caller, counts every drop, retries transient apiserver failures
//! and flushes on shutdown.
//!
//! This crate is the facade: it re-exports the pipeline ([`kevents_actors`]), the pure core
//! ([`core`], with the two event APIs as [`core_v1`] and [`events_v1`]), the HTTP sink
//! ([`http`], feature `http`, on by default), with the `sim` feature the apiserver
//! simulators (`kevents::sim`, and the in-memory apiserver as `kevents::MemoryApiServer`), with
//! the `kube-client` feature the kube-rs interop (`kevents::kube_client`: sinks over an existing
//! `kube::Client` and a drop-in for kube-rs's event `Recorder`) and,
//! with the `prometheus` feature, `kevents::prometheus::install`, which serves the pipeline's
//! metrics to Prometheus (`docs/metrics.md` lists them).
//!
//! ```
//! use kevents::{EventSource, EventType, ObjectReference, Pipeline, SinkOptions};
//! use kevents_sim::MemoryApiServer; // `kevents::MemoryApiServer` with the `sim` feature
//! use std::time::Duration;
//!
//! # actix::System::new().block_on(async {
//! let api = MemoryApiServer::new(); // an HttpSink in production
//! let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
//!     .sink("apiserver", api.clone(), SinkOptions::default())
//!     .start();
//! let recorder = pipeline.recorder(); // Clone + Send + Sync; never blocks
//! let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
//! recorder.event(&pod, EventType::Warning, "BackOff", "Back-off restarting failed container")?;
//! let report = pipeline.shutdown(Duration::from_secs(5)).await;
//! assert_eq!(report.delivered(), 1);
//! assert_eq!(api.list().len(), 1);
//! # Ok::<(), kevents::RecordError>(())
//! # }).unwrap();
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

pub use kevents_actors::*;
pub use kevents_core as core;
/// The core/v1 `Event` API (client-go `tools/record`): model, construction, sink, correlator.
pub use kevents_core::core_v1;
/// The `events.k8s.io/v1` API (client-go `tools/events`): model, construction, series, sink.
pub use kevents_core::events_v1;
pub use kevents_core::{
    Clock, Event, EventFactory, EventSink, EventSource, EventType, InvalidEvent, ObjectReference,
    Occurrence, Reference, ReferenceError, ReferenceRef, SinkError, Stored, SystemClock, Time,
    VirtualClock,
};

/// The in-memory apiserver (for tests and demos).
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub use kevents_sim::MemoryApiServer;

/// The apiserver sink and its configuration (kubeconfig, in-cluster, explicit).
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub use kevents_http as http;

/// kube-rs interop: [`KubeSink`](kevents_kube::KubeSink) (both event APIs over an existing
/// `kube::Client`) and [`Recorder`](kevents_kube::Recorder), a drop-in for
/// `kube::runtime::events::Recorder` backed by this pipeline (`docs/kube-rs.md`).
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

/// actix, re-exported so the version always matches the pipeline's.
pub use actix;
