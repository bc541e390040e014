//! Built core/v1 events given back after their last use, to be built again in place.
//!
//! An `Event` owns about twenty strings. Building one from a packed call allocated each of
//! them and the correlator freed each of them again once the event was written: in `bench
//! pipeline` the thread that builds and correlates spent a fifth of its instructions in
//! `malloc`, `free` and the moves of a new event. The correlator gives a written event back
//! here when it held the last reference, and the broadcaster builds the next event into it
//! (`EventFactory::make_into`: every field overwritten, the buffers kept).
//!
//! Bounded: at most [`EventPool::CAPACITY`] events are kept, and only events whose strings
//! are small (a recycled event keeps its buffers, so one with a large message would pin that
//! memory). Anything else is freed as before.

use std::sync::{Arc, Mutex, PoisonError};

use kevents_core::Event;

use crate::message::Recorded;

/// Free core/v1 events, each in its own unshared `Arc<Recorded>` (the allocation the
/// broadcaster shares with the watchers is reused too).
#[derive(Debug, Default)]
pub(crate) struct EventPool {
    free: Mutex<Vec<Arc<Recorded>>>,
}

impl EventPool {
    /// Events kept at most (about 1 KiB each with their strings).
    pub(crate) const CAPACITY: usize = 1024;
    /// Largest string capacity of an event kept, in bytes (the message's, usually).
    const MAX_STRING: usize = 1024;

    /// An unshared record holding a core/v1 event to build into: a recycled one, or a new
    /// default event.
    pub(crate) fn take(&self) -> Arc<Recorded> {
        let recycled = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        recycled.unwrap_or_else(|| Arc::new(Recorded::CoreV1(Event::default())))
    }

    /// Keeps `record` for a later [`take`](Self::take) if nothing else holds it, it is a
    /// core/v1 event with small strings and the pool has room; otherwise drops it.
    pub(crate) fn give(&self, mut record: Arc<Recorded>) {
        let small = match Arc::get_mut(&mut record) {
            Some(Recorded::CoreV1(e)) => small(e),
            _ => false,
        };
        if small {
            let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
            if free.len() < Self::CAPACITY {
                free.push(record);
            }
        }
    }

    /// Events kept now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Whether every string a caller's input can make large is at most `MAX_STRING` bytes of
/// capacity (the rest come from the factory or the server: short). Annotations and the
/// optional parts are freed by `Event::reset` anyway.
fn small(e: &Event) -> bool {
    let o = &e.involved_object;
    [
        &e.message,
        &e.reason,
        &e.metadata.name,
        &e.metadata.namespace,
        &o.kind,
        &o.namespace,
        &o.name,
        &o.uid,
        &o.api_version,
        &o.resource_version,
        &o.field_path,
    ]
    .iter()
    .all(|s| s.capacity() <= EventPool::MAX_STRING)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(message: &str) -> Arc<Recorded> {
        Arc::new(Recorded::CoreV1(Event {
            message: message.into(),
            ..Event::default()
        }))
    }

    /// Only unshared core events with small strings are kept, at most `CAPACITY`, and
    /// `take` hands them back (or a new default event).
    #[test]
    fn keeps_only_what_it_may() {
        let pool = EventPool::default();
        let shared = core("m");
        pool.give(Arc::clone(&shared));
        assert_eq!(pool.len(), 0, "another holder still uses it");
        pool.give(core(&"x".repeat(EventPool::MAX_STRING + 1)));
        assert_eq!(pool.len(), 0, "a large message is not pinned");
        pool.give(Arc::new(Recorded::EventsV1(Default::default())));
        assert_eq!(pool.len(), 0, "only core/v1 events");
        drop(shared);
        for _ in 0..EventPool::CAPACITY + 10 {
            pool.give(core("m"));
        }
        assert_eq!(pool.len(), EventPool::CAPACITY);
        let mut taken = pool.take();
        assert_eq!(pool.len(), EventPool::CAPACITY - 1);
        assert_eq!(
            Arc::get_mut(&mut taken)
                .and_then(|r| r.core_v1())
                .map(|e| e.message.as_str()),
            Some("m")
        );
        let empty = EventPool::default();
        assert_eq!(*empty.take(), Recorded::CoreV1(Event::default()));
    }
}
