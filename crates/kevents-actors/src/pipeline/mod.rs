//! The pipeline as users hold it: the [`PipelineBuilder`] that wires the actors, the running
//! [`Pipeline`] (handles, watchers, flush, shutdown) and its [`ShutdownReport`].

mod builder;
mod on_drop;
mod preflight;
mod report;
mod running;

pub use builder::PipelineBuilder;
pub use report::ShutdownReport;
pub use running::{Pipeline, PipelineError, WatcherHandle};
