//! The core/v1 `Event` API, as client-go's `tools/record` uses it: the wire model, recorder-side
//! construction and validation (`makeEvent`), the [`EventSink`] trait, one write of a
//! correlated event ([`write_event`], `recordEvent`), and client-go's `EventCorrelator`
//! ([`correlator`]).
//!
//! ```
//! use kevents_core::core_v1::correlator::{Correlator, CorrelatorOptions};
//! use kevents_core::core_v1::{EventFactory, EventSource, EventType, Occurrence};
//! use kevents_core::{Clock, ObjectReference, SystemClock};
//!
//! let mut correlator = Correlator::new(CorrelatorOptions::default());
//! let factory = EventFactory::new(EventSource::new("my-controller", "node-1"));
//! let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
//! let event = factory
//!     .make(SystemClock.now(), Occurrence::new(pod, EventType::Normal, "Started", "started"))
//!     .expect("valid occurrence");
//! let correlated = correlator.correlate(event);
//! assert_eq!(correlated.event.count, 1);
//! // After the apiserver stored it: learn the stored event back.
//! correlator.update_state(&correlated.event);
//! ```

pub mod correlator;
pub(crate) mod make;
mod model;
mod sink;
pub(crate) mod write;

pub use make::{EventFactory, InvalidEvent, MAX_ANNOTATIONS_BYTES, Naming, Occurrence, validate};
pub use model::{Event, EventSeries, EventSource, EventType};
pub use sink::{EventSink, SinkFuture};
pub use write::{WriteKind, WriteOutcome, write_event};
