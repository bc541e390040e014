//! The kevents actor pipeline: client-go's `tools/record` event recording rebuilt as actix
//! actors with explicit, tested flow control.
//!
//! ```text
//!  Recorder handle ──try_send──▶ [intake: bounded channel] ──▶ Recorder actor
//!                                                                  │ Publish(batch), waits
//!                                                                  ▼
//!                                                             Broadcaster ──▶ per watcher: queue of
//!                                                                  │          `capacity` slots
//!                  ┌───────────────────────────┬───────────────────┤ (drop-if-full | backpressure)
//!                  ▼                           ▼                   ▼ EventBatch
//!           LoggingWatcher               your actors        Correlator actor ──WriteBatch──▶ Sink actor
//!         (one EventMessage          (one EventMessage             ▲                   (Supervisor;
//!          per event)                 per event)                   └──WriteDoneBatch──  concurrent per
//!                                                                                       event key)
//! ```
//!
//! * [`Recorder`]: the handle users call (`event`, [`eventf!`], `annotated_event`); it never
//!   blocks: a full intake drops the occurrence, counts it and says so ([`Emit::Dropped`]).
//! * [`Pipeline`]: built with [`Pipeline::builder`]; [`Pipeline::shutdown`] drains everything
//!   within a deadline and returns a [`ShutdownReport`].
//! * Watchers are any actix actor handling [`EventMessage`], registered with a
//!   [`WatcherPolicy`].
//! * Every drop is counted ([`StatsSnapshot`], and the `metrics` facade, see [`stats`]).
//! * [`FakeRecorder`] for users' unit tests.
//!
//! See `docs/semantics.md` for the delivery guarantees and `docs/architecture.md` for the actors
//! and messages.
//!
//! ```
//! use kevents_actors::{Pipeline, SinkOptions, WatcherPolicy, eventf};
//! use kevents_core::{EventSource, EventType, ObjectReference};
//! use kevents_sim::MemoryApiServer;
//! use std::time::Duration;
//!
//! #[actix::main]
//! async fn main() {
//!     let api = MemoryApiServer::new();
//!     let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
//!         .logging(WatcherPolicy::default())
//!         .sink("apiserver", api.clone(), SinkOptions::default())
//!         .start();
//!     let recorder = pipeline.recorder();
//!     let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
//!     for attempt in 1..=3 {
//!         eventf!(recorder, &pod, EventType::Warning, "BackOff", "restarting failed container").unwrap();
//!         let _ = attempt;
//!     }
//!     let report = pipeline.shutdown(Duration::from_secs(10)).await;
//!     assert!(report.completed);
//!     assert_eq!(api.list()[0].count, 3); // one CREATE, two PATCHes
//! }
//! ```

mod broadcaster;
mod correlator;
mod fake;
mod logging;
mod message;
mod pipeline;
mod recorder;
mod series;
mod sink;
pub mod stats;

pub use broadcaster::{WatcherId, WatcherPolicy};
pub use fake::{FakeEvent, FakeRecorder};
pub use logging::{LogStyle, LoggingWatcher, client_go_line};
pub use message::{DeliverySlot, EventMessage, Recorded};
pub use pipeline::{
    Pipeline, PipelineBuilder, PipelineError, ShutdownReport, SinkOptions, WatcherHandle,
};
pub use recorder::{DropReason, Emit, IntakePolicy, RecordError, Recorder};
pub use series::{CoreCalls, EventsV1Config, SeriesSinkOptions, SeriesSnapshot, TokioClock};
pub use sink::{Classifier, FatalFn, RetryPolicy, SinkFactory};
pub use stats::{SinkSnapshot, StatsSnapshot, WatcherSnapshot};
