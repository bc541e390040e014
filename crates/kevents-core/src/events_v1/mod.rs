//! The `events.k8s.io/v1` API, pure and synchronous: the wire model and its conversion to and
//! from core/v1, recorder-side construction (`Eventf(regarding, related, type, reason, action,
//! note)`), client-side validation with the server's rules, client-go 1.27+ event series as
//! a bounded state machine ([`SeriesCache`]), the fallback bridge between the two APIs, and the
//! [`events_v1::EventSink`](crate::events_v1::EventSink) trait, and client-go's `GetFieldSelector` ([`field_selector`]). See
//! `docs/events-v1.md`.
//!
//! How a pipeline drives it:
//!
//! ```
//! use kevents_core::events_v1::{EventFactory, Reporter, SeriesCache, SeriesOptions, Step};
//! use kevents_core::{occurrence_events_v1, EventType, ObjectReference, Time};
//! use kevents_sim::MemoryApiServer;
//! use std::time::Duration;
//!
//! let api = MemoryApiServer::new();
//! let factory = EventFactory::new(Reporter::with_instance("example.com/ctl", "ctl-0"));
//! let mut cache = SeriesCache::new(SeriesOptions::default());
//! let pod = ObjectReference::new("v1", "Pod", "ns", "web-1");
//! let mut now = Time::parse_rfc3339("2021-01-01T00:00:00Z").unwrap();
//! for _ in 0..5 {
//!     let e = factory
//!         .make(now, occurrence_events_v1!(pod.clone(), None, EventType::Warning, "BackOff", "Restart", "crash"))
//!         .unwrap();
//!     for w in cache.observe(e, now) {
//!         // A real pipeline sends this through an `events_v1::EventSink`; the in-memory server answers now.
//!         let r = api.send_now_events_v1(&w);
//!         assert_eq!(cache.on_write_result(&w, &r), Step::Stored);
//!     }
//!     now = now.saturating_add(Duration::from_secs(10));
//! }
//! assert_eq!(api.request_counts(), (1, 1)); // one CREATE, one PATCH (count 2)
//! for w in cache.flush() {                 // graceful shutdown: the count 5 is not lost
//!     api.send_now_events_v1(&w).unwrap();
//! }
//! assert_eq!(api.list_events_v1()[0].series.unwrap().count, 5);
//! ```

mod bridge;
pub(crate) mod make;
mod model;
mod selector;
mod series;
mod series_key;
mod sink;
mod validate;

#[cfg(test)]
mod tests;

pub use bridge::{
    ACTION_ANNOTATION, ApiBridge, CoreFallback, RELATED_ANNOTATION, Route, events_v1_served,
    from_core_occurrence, to_core_occurrence,
};
pub use make::{ClusterScopedNamespace, EventFactory, Occurrence, Reporter, hostname};
pub use model::{API_VERSION, Event, EventSeries, series_patch};
pub use selector::{UnknownEventsVersion, field_selector};
pub use series::fresh::Refreshed;
pub use series::{
    DEFAULT_MAX_ENTRIES, FINISH_AFTER, HEARTBEAT, Observed, SeriesCache, SeriesOptions,
    SeriesStats, Step, Write, WriteReason, classify,
};
pub use sink::{EventSink, SinkFuture, WriteOutcome, send, write_once};

pub use validate::{
    ACTION_LIMIT, ClusterScopedRule, InvalidEvent, NOTE_LIMIT, NotePolicy, REASON_LIMIT,
    REPORTING_INSTANCE_LIMIT, TRUNCATION_MARKER, validate_create, validate_update,
};
