//! The benchmarks' sink: it only counts writes and answers that they were stored as sent
//! (`Stored::AsSent`, as client-go's harness's sink returns its argument), so a benchmark
//! measures the pipeline and not a server.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kevents_core::events_v1::{self};
use kevents_core::{Event, EventSink, SinkFuture, Stored};

/// Event name (a 128-bit fingerprint: no string kept per event, and a collision among a few
/// million names has a probability below 10^-25) -> the count it was last written with.
type StoredCounts = HashMap<u128, i32, BuildHasherDefault<Fingerprinted>>;

/// The stored counts' hasher: a key is a fingerprint, already a hash, so its low 64 bits
/// (one of the two seeded hashes) serve as they are instead of being hashed again.
#[derive(Default)]
struct Fingerprinted(u64);

impl Hasher for Fingerprinted {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u128` is used (the map's keys are `u128`); any other input is mixed in.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64;
    }
}

/// Two independently seeded 64-bit hashes of `name`.
fn fingerprint(name: &str) -> u128 {
    use std::hash::BuildHasher;
    let a = foldhash::fast::FixedState::with_seed(0x9e37_79b9_7f4a_7c15).hash_one(name);
    let b = foldhash::fast::FixedState::with_seed(0xc2b2_ae3d_27d4_eb4f).hash_one(name);
    (u128::from(a) << 64) | u128::from(b)
}

/// A sink for both APIs that only counts (and answers `Stored::AsSent`).
#[derive(Clone, Default)]
pub(crate) struct CountingSink {
    /// Writes made (both APIs).
    pub(crate) writes: Arc<AtomicU64>,
    /// The count each core/v1 event was last written with, when tracked (`None`: not kept).
    stored: Option<Arc<Mutex<StoredCounts>>>,
}

impl CountingSink {
    /// A sink that also keeps the count each core/v1 event was last written with, as a
    /// server would store it (a hash-map update per write), sized for `events` events (a
    /// map that grows while the pipeline writes copies itself on the writer's thread).
    pub(crate) fn tracking(events: usize) -> Self {
        let counts = StoredCounts::with_capacity_and_hasher(events, Default::default());
        CountingSink {
            writes: Arc::default(),
            stored: Some(Arc::new(Mutex::new(counts))),
        }
    }

    /// The sum of the counts stored (0 when not tracked).
    pub(crate) fn stored_count_sum(&self) -> u64 {
        self.stored.as_ref().map_or(0, |m| {
            let m = m.lock().unwrap_or_else(|p| p.into_inner());
            m.values().map(|&c| u64::try_from(c).unwrap_or(0)).sum()
        })
    }

    /// Events stored (0 when not tracked).
    pub(crate) fn stored_events(&self) -> usize {
        self.stored
            .as_ref()
            .map_or(0, |m| m.lock().unwrap_or_else(|p| p.into_inner()).len())
    }
}

impl EventSink for CountingSink {
    fn create(&self, event: &Event) -> SinkFuture {
        self.writes.fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &self.stored {
            let mut m = m.lock().unwrap_or_else(|p| p.into_inner());
            // Writes of one event are in order: the last one is what the server keeps.
            m.insert(fingerprint(&event.metadata.name), event.count);
        }
        Box::pin(async { Ok(Stored::AsSent) })
    }
    fn patch(&self, event: &Event, _patch: &[u8]) -> SinkFuture {
        self.create(event)
    }
}

impl kevents_core::events_v1::EventSink for CountingSink {
    fn create_events_v1(&self, _: &events_v1::Event) -> kevents_core::events_v1::SinkFuture {
        self.writes.fetch_add(1, Ordering::Relaxed);
        Box::pin(async { Ok(Stored::AsSent) })
    }
    fn patch_events_v1(
        &self,
        event: &events_v1::Event,
        _patch: &[u8],
    ) -> kevents_core::events_v1::SinkFuture {
        self.create_events_v1(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, count: i32) -> Event {
        let mut e = Event::default();
        e.metadata.name = name.into();
        e.count = count;
        e
    }

    #[test]
    fn keeps_the_last_count_written_per_event() {
        let sink = CountingSink::tracking(2);
        for i in 0..1000 {
            drop(sink.create(&event(&format!("pod-{i}.17a"), 1)));
        }
        drop(sink.patch(&event("pod-7.17a", 5), b"{}"));
        drop(sink.patch(&event("pod-7.17a", 6), b"{}"));
        assert_eq!(sink.writes.load(Ordering::Relaxed), 1002);
        assert_eq!(sink.stored_events(), 1000);
        assert_eq!(sink.stored_count_sum(), 999 + 6);
    }
}
