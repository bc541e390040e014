//! kevents facade
pub use kevents_core as core;
