//! The core of kevents: the event models of the two Kubernetes event APIs, recorder-side
//! construction and validation, client-go's `EventCorrelator` (aggregation, observation and
//! the spam filter) and client-go 1.27+ event series, synchronous and with an injectable
//! clock; and the request layer every apiserver sink shares, async over a transport trait.
//! No actix, no IO.
//!
//! * [`core_v1`]: the core/v1 `Event` API of client-go's `tools/record` (model,
//!   [`EventFactory`], [`EventSink`], [`write_event`], [`core_v1::correlator`]).
//! * [`events_v1`]: the `events.k8s.io/v1` API of client-go's `tools/events` (model,
//!   `events_v1::EventFactory`, `SeriesCache`, `events_v1::EventSink`, the fallback bridge to core/v1).
//! * Shared by both: [`time`], [`name`], [`json`], [`reference`](mod@reference) ([`ObjectReference`],
//!   [`Reference`]), [`meta`] ([`ObjectMeta`]), [`status`] ([`SinkError`], [`Status`]) and [`stored`]
//!   ([`Stored`], a sink's answer), [`answer`] (an apiserver's answer decoded, as every sink
//!   does) and [`http_date`] (RFC 9110 dates, for `Retry-After`).
//! * [`request`]: the one request layer of every apiserver sink (writes, lists, discovery,
//!   preflight) over a [`request::Transport`] that sends one request (kevents-http's over
//!   reqwest, kevents-kube's over a `kube::Client`); a trait and async logic, no IO.
//!
//! The in-memory apiserver, the replay tool and the benchmark workloads live in `kevents-sim`.
//!
//! One door per operation: build an event with [`EventFactory::make`] (checked by
//! [`core_v1::validate`]; `events_v1::EventFactory::make`, checked by `check`), correlate it
//! with [`Correlator::correlate`], and after the apiserver stored it, learn it back with
//! [`Correlator::update_state`]:
//!
//! ```
//! use kevents_core::core_v1::correlator::{Correlator, CorrelatorOptions};
//! use kevents_core::{EventFactory, EventSource, EventType, ObjectReference, Occurrence, Clock,
//!                    SystemClock};
//!
//! let mut correlator = Correlator::new(CorrelatorOptions::default());
//! let factory = EventFactory::new(EventSource::new("my-controller", "node-1"));
//! let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
//! let occurrence = || Occurrence::new(pod.clone(), EventType::Warning, "BackOff", "restarting");
//!
//! let event = factory.make(SystemClock.now(), occurrence()).expect("valid occurrence");
//! let first = correlator.correlate(event);
//! assert!(!first.skip && first.patch.is_none()); // first sighting: CREATE
//!
//! // The apiserver stored it (here: as sent, with a resourceVersion); learn it back.
//! let mut stored = first.event.clone();
//! stored.metadata.resource_version = "1".into();
//! correlator.update_state(&stored);
//!
//! let event = factory.make(SystemClock.now(), occurrence()).expect("valid occurrence");
//! let again = correlator.correlate(event);
//! assert!(again.patch.is_some()); // seen before: PATCH the stored event, count 2
//! assert_eq!((again.event.count, again.event.metadata.resource_version.as_str()), (2, "1"));
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod answer;
pub mod core_v1;
pub mod events_v1;
pub mod fleet;
pub mod http_date;
pub mod json;
pub mod meta;
pub mod name;
pub mod preflight;
pub mod profile;
pub mod reference;
pub mod request;
pub mod status;
pub mod stored;
pub mod time;

#[doc(hidden)]
pub mod __private;

pub use core_v1::correlator::{Correlated, Correlator, CorrelatorOptions};
pub use core_v1::{
    Event, EventFactory, EventSeries, EventSink, EventSource, EventType, InvalidEvent, Naming,
    Occurrence, SinkFuture, WriteKind, WriteOutcome, write_event,
};
pub use meta::ObjectMeta;
pub use profile::ClientGoVersion;
pub use reference::{ObjectReference, Reference, ReferenceError, ReferenceRef};
pub use status::{Disposition, SinkError, Status};
pub use stored::Stored;
pub use time::{Clock, IntervalClock, SharedClock, SystemClock, Time, VirtualClock};
