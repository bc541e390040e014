//! Leader election on a coordination.k8s.io/v1 Lease, with client-go's `tools/leaderelection`
//! semantics and its `LeaseLock` (docs/leader-election.md), over kevents-core's request
//! layer: [`LeaderElector`] works over any [`Transport`](kevents_core::request::Transport)'s
//! [`Client`](kevents_core::request::Client) (kevents-http's `HttpSink::requests()`,
//! kevents-kube's `KubeSink::requests()`); [`crate::lead`] runs work only while it leads.
//!
//! Files: `config.rs` ([`LeaseConfig`], client-go's defaults and validation, [`LeaseError`]),
//! `record.rs` (the election record in the Lease's JSON), `decide.rs` (the decisions, no I/O,
//! the time given), `elector.rs` ([`LeaderElector`]'s requests and loop, [`LeaderHandle`]).
//!
//! ```no_run
//! use kevents_core::request::{Client, Transport};
//! use kevents_runtime::lease::{LeaderElector, LeaseConfig};
//! # async fn f<T: Transport>(requests: Client<T>) -> Result<(), Box<dyn std::error::Error>> {
//! // `requests`: kevents_http::HttpSink::requests() or kevents_kube::KubeSink::requests().
//! let config = LeaseConfig::new("default", "kevents-export", "pod-a");
//! let handle = LeaderElector::new(requests, config)?.spawn();
//! handle.changes().wait_for(|leading| *leading).await?;
//! // ... lead while handle.is_leader() ...
//! handle.release().await?;
//! # Ok(()) }
//! ```

mod config;
mod decide;
mod elector;
pub(crate) mod record;

pub use config::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, JITTER_FACTOR,
    LeaseConfig, LeaseError,
};
pub use elector::{LeaderElector, LeaderHandle, MAX_LEASE_BYTES};
