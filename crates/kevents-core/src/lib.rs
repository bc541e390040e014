//! The pure, synchronous core of kevents: the core/v1 `Event` model, recorder-side event
//! construction and validation, and client-go's `EventCorrelator` (aggregation, observation
//! and the spam filter), with an injectable clock. No actix, no IO.
//!
//! ```
//! use kevents_core::correlator::{Correlator, CorrelatorOptions};
//! use kevents_core::{EventFactory, EventSource, EventType, ObjectReference, Occurrence, Clock,
//!                    SystemClock};
//!
//! let mut correlator = Correlator::new(CorrelatorOptions::default());
//! let factory = EventFactory::new(EventSource::new("my-controller", "node-1"));
//! let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
//! let event = factory
//!     .make(SystemClock.now(), Occurrence::new(pod, EventType::Warning, "BackOff", "restarting"))
//!     .expect("valid occurrence");
//! let decision = correlator.correlate(event);
//! assert!(!decision.skip && decision.patch.is_none()); // first sighting: CREATE
//! ```

pub mod correlator;
pub mod events;
pub mod json;
pub mod make;
pub mod memory;
pub mod model;
pub mod name;
pub mod record;
pub mod reference;
pub mod replay;
pub mod sink;
pub mod time;
pub mod workload;

pub use correlator::{Correlated, Correlator, CorrelatorOptions};
pub use events::{
    Event as EventV1, EventFactoryV1, EventsV1Sink, InvalidEventV1, OccurrenceV1, SeriesCache,
    SeriesOptions,
};
pub use make::{EventFactory, InvalidEvent, Naming, Occurrence};
pub use memory::MemoryApiServer;
pub use model::{Event, EventSeries, EventSource, EventType, ObjectMeta, ObjectReference};
pub use record::{WriteKind, WriteOutcome, write_event};
pub use reference::{Reference, ReferenceError};
pub use sink::{Disposition, EventSink, SinkError, SinkFuture, Status};
pub use time::{Clock, IntervalClock, SharedClock, SystemClock, Time, VirtualClock};
pub use workload::Workload;
