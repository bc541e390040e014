//! The kevents actor pipeline: client-go's `tools/record` event recording rebuilt as actix
//! actors with explicit, tested flow control.
//!
//! ```text
//!  Recorder handle ──try_push──▶ [intake: bounded queue]   ──▶ Recorder actor
//!                  full: coalesce-if-full (merge repeats)          │ Publish(batch), waits
//!                        | drop-if-full                            ▼
//!                                                             Broadcaster ──▶ per watcher: queue of
//!                                                                  │          `capacity` slots
//!           ┌──────────────────┬───────────────────┬───────────────┤ (coalesce-if-full |
//!           │                  │                   │               │  drop-if-full | backpressure)
//!           ▼                  ▼                   ▼               ▼
//!    LoggingWatcher       your actors      core/v1 chain:     events.k8s.io/v1 chain:
//!                                          CorrelatorActor    SeriesActor (Supervisor;
//!                                           │WriteBatch ▲      series cache, timers,
//!                                           ▼           │      shutdown flush)
//!                                          SinkActor ───┘ WriteDone  │
//!                                          (Supervisor)              │
//!                                           └── keyed writer engine ─┘── EventSink / events_v1::EventSink
//! ```
//!
//! * [`Recorder`]: the handle users call (`event`, [`eventf!`], `annotated_event`); it never
//!   blocks: a full intake merges the occurrence into its overflow table as a repeat
//!   (coalesce-if-full, the default) or, with drop-if-full or a full table, drops it, counts
//!   it and says so ([`Emit::Dropped`]).
//! * [`Pipeline`]: built with [`Pipeline::builder`]; [`Pipeline::shutdown`] drains everything
//!   within a deadline and returns a [`ShutdownReport`].
//! * Watchers are any actix actor handling [`EventMessage`], registered with a
//!   [`WatcherPolicy`]; a core/v1 sink chain ([`PipelineBuilder::sink`],
//!   [`Pipeline::add_sink`]) and an events.k8s.io/v1 series chain
//!   ([`PipelineBuilder::sink_events_v1`], [`Pipeline::add_sink_events_v1`]) are watchers too,
//!   peers: spawned the same way, counted the same way, and a panicking sink of either
//!   restarts its supervised actor, which keeps its queue.
//! * Every drop is counted ([`StatsSnapshot`], and the `metrics` facade, see [`describe_metrics`] and `docs/metrics.md`).
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
//!     assert_eq!(api.list()[0].count, 3); // one event; repeats coalesced into 1 to 3 writes
//! }
//! ```

// Bottom: vocabulary and messages every stage shares.
mod clock;
mod event_pool;
mod fast_map;
mod message;
mod overflow;
mod policy;
mod stats;
mod telemetry;
// Flow control and the registry of what exists.
mod budget;
mod queue;
mod registry;
// What the intake carries and how the broadcaster builds its event (below both).
mod intake_item;
// The stages, in the order an event passes them.
mod broadcaster;
mod chain;
mod core_v1;
pub mod events_v1;
mod logging;
mod recorder;
mod writer;
// Top: the builder and the running pipeline.
mod pipeline;

pub use broadcaster::WatcherId;
pub use budget::{
    BreakerOptions, BudgetMember, BudgetOptions, DEFAULT_BUDGET_BURST, DEFAULT_BUDGET_QPS,
    WriteBudget,
};
pub use clock::TokioClock;
pub use core_v1::{SinkFactory, SinkOptions, TAIL_CHECK};
pub use intake_item::{CoreCalls, EventsV1Config};
pub use logging::{LogStyle, LoggingWatcher, client_go_line};
pub use message::{DeliverySlot, EventMessage, Recorded};
pub use overflow::Repeats;
pub use pipeline::{
    DEFAULT_DROP_DEADLINE, Pipeline, PipelineBuilder, PipelineError, ShutdownReport, StartError,
    WatcherHandle, terminated,
};
pub use policy::{
    Classifier, DEFAULT_OVERFLOW_ENTRIES, FatalFn, IntakePolicy, PolicyError, RetryPolicy,
    WatcherPolicy,
};
pub use queue::{DEFAULT_INTAKE_MAX_BYTES, DEFAULT_QUEUE_MAX_BYTES};
pub use recorder::{
    DropReason, Emit, EventsV1Recorder, FakeEvent, FakeRecorder, ObjectRecorder, RecordError,
    Recorder,
};
pub use stats::{
    BudgetSnapshot, MAX_NOT_STORED_CAUSES, OTHER_CAUSES, SinkSnapshot, StatsSnapshot,
    WatcherSnapshot,
};
pub use telemetry::names::describe_metrics;
