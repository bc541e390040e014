//! Leader election on a coordination.k8s.io/v1 Lease, with client-go's `tools/leaderelection`
//! semantics and its `LeaseLock` (docs/leader-election.md), over kevents-core's request
//! layer: [`LeaderElector`] works with [`HttpSink::requests`](crate::HttpSink::requests) and
//! with any [`Transport`](kevents_core::request::Transport).
//!
//! Files: `config.rs` ([`LeaseConfig`], client-go's defaults and validation, [`LeaseError`]),
//! `record.rs` (the election record in the Lease's JSON), `decide.rs` (the decisions, no I/O,
//! the time given), `elector.rs` ([`LeaderElector`]'s requests and loop, [`LeaderHandle`]),
//! `fleet.rs` ([`FleetLease`]: a fleet's shared write law kept in a Lease, its task and
//! [`FleetLeaseHandle`]).
//!
//! ```no_run
//! use kevents_http::lease::{LeaderElector, LeaseConfig};
//! use kevents_http::{HttpConfig, HttpSink};
//! # async fn f() -> Result<(), Box<dyn std::error::Error>> {
//! let sink = HttpSink::new(HttpConfig::infer().await?)?;
//! let config = LeaseConfig::new("default", "kevents-export", "pod-a");
//! let handle = LeaderElector::new(sink.requests(), config)?.spawn();
//! handle.changes().wait_for(|leading| *leading).await?;
//! // ... lead while handle.is_leader() ...
//! handle.release().await?;
//! # Ok(()) }
//! ```

mod config;
mod decide;
mod elector;
mod fleet;
mod record;

pub use config::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, JITTER_FACTOR,
    LeaseConfig, LeaseError,
};
pub use elector::{LeaderElector, LeaderHandle, MAX_LEASE_BYTES};
pub use fleet::{
    FLEET_WATCH_TIMEOUT_SECONDS, FLEET_WRITE_SPREAD, FleetLease, FleetLeaseHandle,
    MAX_WRITE_ATTEMPTS,
};
