//! Counting, apart from flow control: each stage's counters as typed instrumentation events
//! (a method per thing that happens, which counts it in-process, mirrors it to the `metrics`
//! facade and, for drops, logs it rate-limited). Metric names are all in [`names`].

mod budget;
mod counter;
mod intake;
pub(crate) mod names;
pub(crate) mod not_stored;
mod series;
mod sink;
mod watcher;

pub(crate) use budget::{BudgetCounters, Deferral, Limit};
pub(crate) use intake::{IntakeCounters, Refusal};
pub(crate) use not_stored::WriteRefusal;
pub(crate) use series::{SeriesCounters, SeriesWriteEnd};
pub(crate) use sink::{Decisions, SinkCounters, WriteEnd};
pub(crate) use watcher::WatcherCounters;
