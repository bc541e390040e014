//! The benchmarks' sink: it only counts writes and answers with the event, as a server
//! would, so a benchmark measures the pipeline and not a server.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kevents_core::events_v1::{self, EventsV1Sink, V1SinkFuture};
use kevents_core::{Event, EventSink, SinkFuture};

/// A sink for both APIs that only counts (and answers with the event, as a server would).
#[derive(Clone, Default)]
pub(crate) struct CountingSink {
    /// Writes made (both APIs).
    pub(crate) writes: Arc<AtomicU64>,
}

impl EventSink for CountingSink {
    fn create(&self, event: &Event) -> SinkFuture {
        self.writes.fetch_add(1, Ordering::Relaxed);
        let e = event.clone();
        Box::pin(async move { Ok(e) })
    }
    fn patch(&self, event: &Event, _patch: &[u8]) -> SinkFuture {
        self.create(event)
    }
}

impl EventsV1Sink for CountingSink {
    fn create_v1(&self, event: &events_v1::Event) -> V1SinkFuture {
        self.writes.fetch_add(1, Ordering::Relaxed);
        let e = event.clone();
        Box::pin(async move { Ok(e) })
    }
    fn patch_v1(&self, event: &events_v1::Event, _patch: &[u8]) -> V1SinkFuture {
        self.create_v1(event)
    }
}
