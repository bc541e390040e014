//! Kubernetes apiserver simulators for kevents:
//!
//! * [`Simulator`]: an in-process apiserver for core/v1 and `events.k8s.io/v1` Events on
//!   loopback HTTP (or HTTPS with a generated self-signed certificate), with injectable
//!   faults (below);
//! * [`MemoryApiServer`] ([`memory`]): an in-memory apiserver called directly, without HTTP
//!   (an `EventSink` and an `events_v1::EventSink`), for tests, replay and benchmarks;
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
//!
//! Source layout: [`Simulator`] starts one (`simulator.rs`, its TLS material in `tls.rs`)
//! from a [`SimConfig`] (`config.rs`) and returns a [`SimHandle`] (`handle.rs`); the server
//! thread (`server/`, `access_review.rs`) answers from the object store (`store/`),
//! applying the [`Faults`] plan (`faults.rs`) and counting [`SimStats`] (`stats.rs`);
//! [`SimError`] (`error.rs`) says why it could not start. [`rate_limit`] is kube-apiserver's
//! `EventRateLimit` admission plugin, which both servers apply when configured
//! ([`SimConfig::event_rate_limits`], [`MemoryApiServer::with_event_rate_limits`]).
//! [`memory`], [`replay`] and [`workload`] are the other tools.

mod access_review;
mod config;
mod error;
mod faults;
pub mod fleet_lease;
pub mod flow_control;
mod handle;
pub mod memory;
pub mod rate_limit;
pub mod replay;
pub mod scale;
mod server;
mod simulator;
mod stats;
mod store;
mod tls;
pub mod workload;

pub use config::{SimAuth, SimConfig};
pub use error::SimError;
pub use faults::{ErrorFault, FaultBody, Faults, ListFault};
pub use flow_control::{ApfVersion, FlowControl, FlowController};
pub use handle::SimHandle;
pub use memory::MemoryApiServer;
pub use rate_limit::{EventRateLimits, LimitType, RateLimit};
pub use simulator::Simulator;
pub use stats::SimStats;
