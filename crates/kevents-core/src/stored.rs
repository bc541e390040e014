//! What a sink answers for a write the server accepted ([`Stored`]), for both event APIs.

/// A sink's answer to a write that succeeded: the event as the server returned it, or
/// [`Stored::AsSent`] when there is no server copy to return.
///
/// The recorder learns each write back (client-go's `EventCorrelator.UpdateState` on the
/// sink's answer: the count, the name, the resourceVersion). An apiserver answers with the
/// object it stored, and the HTTP sinks return it as [`Stored::Returned`]. A sink with no
/// server answer (a log, a counter, a queue to another system, a test double) answers
/// [`Stored::AsSent`]: the recorder then learns from the event it sent, exactly as client-go
/// learns from a sink that returns its argument, and nobody copies the event to hand it back.
///
/// ```
/// use kevents_core::{Event, EventSink, SinkFuture, Stored};
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// /// Counts writes; nothing to answer with but "stored as sent".
/// #[derive(Default)]
/// struct Counter(AtomicU64);
/// impl EventSink for Counter {
///     fn create(&self, _: &Event) -> SinkFuture {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         Box::pin(async { Ok(Stored::AsSent) })
///     }
///     fn patch(&self, event: &Event, _patch: &[u8]) -> SinkFuture {
///         self.create(event)
///     }
/// }
///
/// // A sink that has the server's copy returns it (`From` builds `Stored::Returned`).
/// let answer: Stored<Event> = Event::default().into();
/// assert!(answer.returned().is_some());
/// assert_eq!(Stored::<Event>::AsSent.returned(), None);
/// ```
///
/// The server's copy is boxed: an answer is moved several times on its way back to the
/// correlator, and an inline event (about 800 bytes) made each move a `memcpy` (8% of the
/// pipeline's instructions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored<E> {
    /// The event as the server returned it (its resourceVersion, its count).
    Returned(Box<E>),
    /// Stored as it was sent: learn from the event the write sent.
    AsSent,
}

impl<E> Stored<E> {
    /// The server's copy, if the sink returned one.
    pub fn returned(&self) -> Option<&E> {
        match self {
            Stored::Returned(e) => Some(e),
            Stored::AsSent => None,
        }
    }

    /// The server's copy, if the sink returned one, by value.
    pub fn into_returned(self) -> Option<E> {
        match self {
            Stored::Returned(e) => Some(*e),
            Stored::AsSent => None,
        }
    }
}

impl<E> From<E> for Stored<E> {
    fn from(e: E) -> Self {
        Stored::Returned(Box::new(e))
    }
}
