//! PLACEHOLDER: moves to kevents-core after the core layout lands.
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::task::{Context, Poll};

use kevents_core::{Event, EventSink, SinkFuture, WriteKind, WriteOutcome};

enum State {
    Patch(SinkFuture),
    Create(SinkFuture, WriteKind),
    Done,
}

/// One write attempt of client-go's `recordEvent` as a future.
pub struct WriteEvent<S, E> {
    sink: S,
    event: E,
    state: State,
}

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
    /// Starts the attempt.
    pub fn new(sink: S, event: E, patch: Option<&[u8]>) -> Self {
        let state = if event.count > 1 {
            State::Patch(sink.patch(&event, patch.unwrap_or_default()))
        } else {
            State::Create(create_fresh(&*sink, &event), WriteKind::Create)
        };
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
                        this.state = State::Create(
                            create_fresh(&*this.sink, &this.event),
                            WriteKind::Recreate,
                        );
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
                    return match f.as_mut().poll(cx) {
                        Poll::Pending => Poll::Pending,
                        Poll::Ready(result) => {
                            this.state = State::Done;
                            Poll::Ready(WriteOutcome { kind, result })
                        }
                    };
                }
                State::Done => panic!("WriteEvent polled after it completed"),
            }
        }
    }
}
