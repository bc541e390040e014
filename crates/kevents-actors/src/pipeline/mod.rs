//! The pipeline as users hold it: the [`PipelineBuilder`] that wires the actors, the running
//! [`Pipeline`] (handles, watchers, flush, shutdown) and its [`ShutdownReport`].
//!
//! A pipeline runs on the actix arbiter that starts it (`local.rs`), or, started outside an
//! actix `System`, on a thread of its own (`thread.rs`); [`Pipeline`] is the same handle for
//! both (`running.rs`).

mod builder;
mod error;
mod local;
mod on_drop;
mod preflight;
mod report;
mod running;
mod signal;
mod thread;

pub use builder::{DEFAULT_DROP_DEADLINE, PipelineBuilder};
pub use error::StartError;
pub use report::ShutdownReport;
pub use running::{Pipeline, PipelineError, WatcherHandle};
pub use signal::terminated;
