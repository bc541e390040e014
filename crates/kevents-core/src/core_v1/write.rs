//! One write of a correlated event (client-go `tools/record/event.go`, `recordEvent`): PATCH
//! when the event was seen before, CREATE otherwise, and CREATE with the accumulated count
//! when the PATCH finds no object (404: the event expired or was deleted).
//!
//! The protocol is implemented once, as the `WriteEvent` future: [`write_event`] awaits it
//! on borrowed values; the actor pipeline holds it over shared ones (`Arc`), polls it once in
//! place (an in-memory sink answers at once) and spawns it only if it is still pending.

use std::borrow::Cow;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::model::Event;
use super::sink::{EventSink, SinkFuture};
use crate::status::SinkError;
use crate::stored::Stored;

/// Which request ended the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteKind {
    /// `POST` of a new event.
    Create,
    /// `PATCH` of an existing event.
    Patch,
    /// `POST` after a `PATCH` answered 404.
    Recreate,
}

impl WriteKind {
    /// `create`, `patch` or `recreate`.
    pub fn as_str(self) -> &'static str {
        match self {
            WriteKind::Create => "create",
            WriteKind::Patch => "patch",
            WriteKind::Recreate => "recreate",
        }
    }
}

/// The result of one write attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The last request made.
    pub kind: WriteKind,
    /// The sink's answer (feed [`WriteOutcome::stored_event`] to `Correlator::update_state`)
    /// or the error.
    pub result: Result<Stored<Event>, SinkError>,
}

// Here, not in `stored.rs`: the rule is core/v1's (a CREATE without its resourceVersion).
impl Stored<Event> {
    /// The core/v1 event a write stored, to learn back: the server's copy, or for
    /// [`Stored::AsSent`] `sent` (the event the write was made with) as the last request,
    /// of `kind`, sent it: a CREATE without its resourceVersion, as client-go learns from a
    /// sink that returns its argument. Copied only in that case, and only when `sent` has a
    /// resourceVersion.
    ///
    /// ```
    /// use kevents_core::{Event, Stored, WriteKind};
    /// let mut sent = Event::default();
    /// sent.metadata.resource_version = "9".into();
    /// let as_sent = Stored::AsSent;
    /// assert_eq!(as_sent.event(&sent, WriteKind::Patch).metadata.resource_version, "9");
    /// assert_eq!(as_sent.event(&sent, WriteKind::Recreate).metadata.resource_version, "");
    /// ```
    pub fn event<'a>(&'a self, sent: &'a Event, kind: WriteKind) -> Cow<'a, Event> {
        match self {
            Stored::Returned(e) => Cow::Borrowed(e),
            Stored::AsSent
                if kind == WriteKind::Patch || sent.metadata.resource_version.is_empty() =>
            {
                Cow::Borrowed(sent)
            }
            Stored::AsSent => {
                let mut e = sent.clone();
                e.metadata.resource_version.clear();
                Cow::Owned(e)
            }
        }
    }
}

impl WriteOutcome {
    /// The event the write stored, to learn back (`Correlator::update_state`):
    /// [`Stored::event`] of the answer and `sent` (the event the write was made with), or
    /// `None` when the write failed.
    ///
    /// ```
    /// use kevents_core::{Event, Stored, WriteKind, WriteOutcome};
    /// let mut sent = Event::default();
    /// sent.metadata.resource_version = "9".into();
    /// let patched = WriteOutcome { kind: WriteKind::Patch, result: Ok(Stored::AsSent) };
    /// assert_eq!(patched.stored_event(&sent).unwrap().metadata.resource_version, "9");
    /// let recreated = WriteOutcome { kind: WriteKind::Recreate, result: Ok(Stored::AsSent) };
    /// assert_eq!(recreated.stored_event(&sent).unwrap().metadata.resource_version, "");
    /// ```
    pub fn stored_event<'a>(&'a self, sent: &'a Event) -> Option<Cow<'a, Event>> {
        Some(self.result.as_ref().ok()?.event(sent, self.kind))
    }
}

/// One write attempt of `event` with `patch`, exactly as client-go's `recordEvent`:
/// `count > 1` means PATCH first (a missing patch is sent as an empty body, as client-go
/// sends nil); if the PATCH answered 404, the event is CREATEd with its resourceVersion
/// cleared (and its accumulated count). Any other PATCH result is the outcome. A CREATE never
/// carries a resourceVersion (client-go clears it on its copy; here the event is copied only
/// when it has one).
///
/// `S` is anything that derefs to an [`EventSink`] (`&S`, `Arc<dyn EventSink>`), `E` anything
/// that derefs to the [`Event`] (`&Event`, `Arc<Event>`). The requests are made by the sink
/// when the future is built (POST or PATCH) and when the PATCH answered 404 (POST).
///
/// ```
/// use kevents_core::__private::WriteEvent;
/// use kevents_core::{Event, EventSink, SinkError, SinkFuture, Stored, WriteKind};
/// use std::sync::Arc;
///
/// /// Answers every PATCH with 404 and stores every CREATE.
/// struct Forgetful;
/// impl EventSink for Forgetful {
///     fn create(&self, e: &Event) -> SinkFuture {
///         assert_eq!(e.metadata.resource_version, "", "a CREATE carries no resourceVersion");
///         Box::pin(async { Ok(Stored::AsSent) })
///     }
///     fn patch(&self, _: &Event, _: &[u8]) -> SinkFuture {
///         Box::pin(async { Err(SinkError::Status(Box::new(
///             kevents_core::Status::failure(404, "NotFound", "gone")))) })
///     }
/// }
/// let mut e = Event::default();
/// e.count = 3;
/// e.metadata.resource_version = "42".into();
/// let sink: Arc<dyn EventSink> = Arc::new(Forgetful);
/// let e = Arc::new(e);
/// let out = futures_executor_block_on(WriteEvent::new(sink, Arc::clone(&e), Some(b"{}")));
/// assert_eq!(out.kind, WriteKind::Recreate);
/// let stored = out.stored_event(&e).unwrap();
/// assert_eq!((stored.count, stored.metadata.resource_version.as_str()), (3, ""));
/// # fn futures_executor_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Waker};
/// #     let mut f = std::pin::pin!(f);
/// #     let mut cx = Context::from_waker(Waker::noop());
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// ```
pub struct WriteEvent<S, E> {
    sink: S,
    event: E,
    state: State,
}

enum State {
    Patch(SinkFuture),
    Create(SinkFuture, WriteKind),
    Done,
}

impl<S, E> std::fmt::Debug for WriteEvent<S, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::Patch(_) => "patch",
            State::Create(_, kind) => kind.as_str(),
            State::Done => "done",
        };
        f.debug_struct("WriteEvent").field("state", &state).finish()
    }
}

/// POST `event` without its resourceVersion (copied only when it has one).
fn create_fresh<T: EventSink + ?Sized>(sink: &T, event: &Event) -> SinkFuture {
    if event.metadata.resource_version.is_empty() {
        sink.create(event)
    } else {
        let mut e = event.clone();
        e.metadata.resource_version.clear();
        sink.create(&e)
    }
}

impl<S, E> WriteEvent<S, E>
where
    S: Deref,
    S::Target: EventSink,
    E: Deref<Target = Event>,
{
    /// Starts the attempt: the first request is made now.
    pub fn new(sink: S, event: E, patch: Option<&[u8]>) -> Self {
        let state = if event.count > 1 {
            State::Patch(sink.patch(&event, patch.unwrap_or_default()))
        } else {
            State::Create(create_fresh(&*sink, &event), WriteKind::Create)
        };
        WriteEvent { sink, event, state }
    }

    /// Starts a CREATE of `event` whatever its count (its resourceVersion cleared), as the
    /// re-create after a 404 does: what a writer sends when a CREATE that had not started yet
    /// absorbed newer results of the same event (their count, lastTimestamp and message).
    /// The outcome's kind is [`WriteKind::Create`].
    ///
    /// ```
    /// use kevents_core::__private::WriteEvent;
    /// use kevents_core::{Event, EventSink, SinkFuture, WriteKind};
    /// use std::sync::Arc;
    ///
    /// /// Answers with the server's copy of what it was sent.
    /// struct Store;
    /// impl EventSink for Store {
    ///     fn create(&self, e: &Event) -> SinkFuture {
    ///         let e = e.clone();
    ///         Box::pin(async move { Ok(e.into()) })
    ///     }
    ///     fn patch(&self, _: &Event, _: &[u8]) -> SinkFuture {
    ///         unreachable!("a create never patches")
    ///     }
    /// }
    /// let mut e = Event::default();
    /// e.count = 4;
    /// e.metadata.resource_version = "7".into();
    /// let sink: Arc<dyn EventSink> = Arc::new(Store);
    /// let mut w = std::pin::pin!(WriteEvent::create(sink, Arc::new(e)));
    /// let out = loop {
    ///     let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    ///     if let std::task::Poll::Ready(o) = w.as_mut().poll(&mut cx) { break o; }
    /// };
    /// assert_eq!(out.kind, WriteKind::Create);
    /// let stored = out.result.unwrap().into_returned().unwrap();
    /// assert_eq!((stored.count, stored.metadata.resource_version.as_str()), (4, ""));
    /// ```
    pub fn create(sink: S, event: E) -> Self {
        let state = State::Create(create_fresh(&*sink, &event), WriteKind::Create);
        WriteEvent { sink, event, state }
    }
}

impl<S, E> Future for WriteEvent<S, E>
where
    S: Deref + Unpin,
    S::Target: EventSink,
    E: Deref<Target = Event> + Unpin,
{
    type Output = WriteOutcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<WriteOutcome> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                State::Patch(f) => match f.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(e)) if e.is_not_found() => {
                        let create = create_fresh(&*this.sink, &this.event);
                        this.state = State::Create(create, WriteKind::Recreate);
                    }
                    Poll::Ready(result) => {
                        this.state = State::Done;
                        return Poll::Ready(WriteOutcome {
                            kind: WriteKind::Patch,
                            result,
                        });
                    }
                },
                State::Create(f, kind) => {
                    let kind = *kind;
                    let Poll::Ready(result) = f.as_mut().poll(cx) else {
                        return Poll::Pending;
                    };
                    this.state = State::Done;
                    return Poll::Ready(WriteOutcome { kind, result });
                }
                State::Done => panic!("WriteEvent polled after it completed"),
            }
        }
    }
}

/// Performs one write attempt of `event` with `patch` ([`WriteEvent`]) and, as client-go
/// modifies its copy, clears `event`'s resourceVersion when a CREATE was made, so a retry
/// reuses it.
pub async fn write_event<S: EventSink + ?Sized>(
    sink: &S,
    event: &mut Event,
    patch: Option<&[u8]>,
) -> WriteOutcome {
    let out = WriteEvent::new(sink, &*event, patch).await;
    if out.kind != WriteKind::Patch {
        event.metadata.resource_version.clear();
    }
    out
}
