//! Watching and leading over any kevents transport, as kube-runtime sits above kube-client:
//! kevents-core's request layer ([`Client`](kevents_core::request::Client) over a
//! [`Transport`](kevents_core::request::Transport)) and its stream trait
//! ([`StreamTransport`](kevents_core::request::StreamTransport)) are all it talks through,
//! so it runs over kevents-http's `HttpSink` (reqwest), kevents-kube's `KubeSink` (an
//! application's own `kube::Client`) or a test double alike. No reqwest, no kube here.
//!
//! Source layout, one concept a module:
//! - `watcher.rs` ([`watcher::Watcher`]): one list-then-watch loop, with bookmarks, 410
//!   relists, back-off, idle deadlines and bounded lines and lists;
//! - `lease/` ([`lease::LeaderElector`]): client-go's leader election on a
//!   coordination.k8s.io/v1 Lease (`config.rs`, `record.rs`, `decide.rs` without I/O,
//!   `elector.rs`);
//! - `lead.rs` ([`lead::run_while_leading`]): lead or stand by, work run only while leading;
//! - `fleet/` ([`fleet::FleetLease`]): the link that keeps a fleet's shared write law in a
//!   Lease (its law's types and constants: [`kevents_core::fleet`]);
//! - `backoff.rs` (`Backoff`, inside the crate): the pause after failures in a row.
//!
//! ```no_run
//! use std::time::Duration;
//! use kevents_core::request::StreamTransport;
//! use kevents_runtime::lead::run_while_leading;
//! use kevents_runtime::lease::{LeaderElector, LeaseConfig};
//! use kevents_runtime::watcher::{WatchConfig, WatchEvent, Watcher};
//! # async fn f<T: StreamTransport>(transport: T) -> Result<(), Box<dyn std::error::Error>> {
//! // `transport`: kevents_http::HttpSink, or kevents_kube::KubeSink over a kube::Client.
//! let requests = kevents_core::request::Client::new(transport.clone());
//! let elector = LeaderElector::new(requests, LeaseConfig::new("default", "watcher", "pod-a"))?;
//! let handle = elector.spawn();
//! run_while_leading(&handle, std::future::pending(), Duration::ZERO, |_term| {
//!     let transport = transport.clone();
//!     async move {
//!         let mut watcher = Watcher::new(transport, WatchConfig::new("/api/v1/events"), None);
//!         loop {
//!             if let WatchEvent::Applied { object, .. } = watcher.next().await {
//!                 println!("{}", object["metadata"]["name"]);
//!             }
//!         }
//!     }
//! })
//! .await
//! .map_err(|e: kevents_runtime::lead::LeadError<std::io::Error>| e.to_string())?;
//! # Ok(()) }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod backoff;
pub mod fleet;
pub mod lead;
pub mod lease;
pub mod watcher;
