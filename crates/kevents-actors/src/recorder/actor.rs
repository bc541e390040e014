//! The Recorder actor: owns the event factories (source, naming) and the intake's receiving
//! end; takes accepted occurrences in batches and publishes them to the broadcaster, waiting
//! for it before taking more (so broadcaster backpressure reaches the intake).

use std::sync::Arc;

use actix::prelude::*;
use futures_util::stream;
use tokio::sync::oneshot;

use super::coalesce::IntakeOverflow;
use super::intake::{BATCH, IntakeRx, IntakeShared};
use crate::broadcaster::{Broadcaster, Publish};
use crate::intake_item::{Factories, Item};
use crate::registry::Registry;

/// Close the intake; replies once everything accepted before has been handed to the
/// broadcaster.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct CloseIntake;

/// Stop the recorder actor.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct StopRecorder;

/// The Recorder actor: owns the event factories (source, naming) and the intake's receiving
/// end; takes accepted items in batches (then the intake overflow's entries) and publishes
/// them with the factories, waiting for the broadcaster before taking more (so broadcaster
/// backpressure reaches the intake). The broadcaster builds the events.
pub(crate) struct RecorderActor {
    factory: Arc<Factories>,
    broadcaster: Addr<Broadcaster>,
    rx: Option<(IntakeRx, oneshot::Receiver<()>)>,
    close: Option<oneshot::Sender<()>>,
    drained: bool,
    waiters: Vec<oneshot::Sender<()>>,
    /// The bounded intake's byte count (released as items are taken) and its overflow.
    shared: IntakeShared,
    registry: Arc<Registry>,
}

impl RecorderActor {
    pub(crate) fn new(
        factory: Factories,
        broadcaster: Addr<Broadcaster>,
        rx: IntakeRx,
        shared: IntakeShared,
        registry: Arc<Registry>,
    ) -> Self {
        let (close_tx, close_rx) = oneshot::channel();
        RecorderActor {
            factory: Arc::new(factory),
            broadcaster,
            rx: Some((rx, close_rx)),
            close: Some(close_tx),
            drained: false,
            waiters: Vec::new(),
            shared,
            registry,
        }
    }
}

/// A batch taken from the intake.
enum Taken {
    /// From the intake queue: the items hold intake bytes.
    Queue(Vec<Item>),
    /// From the overflow table: no bytes held; entries may stand for several occurrences.
    Overflow(Vec<Item>),
}

struct IntakeStream {
    rx: IntakeRx,
    close: Option<oneshot::Receiver<()>>,
    overflow: Option<Arc<IntakeOverflow>>,
}

impl IntakeStream {
    /// The next batch: from the queue, or, once the queue is empty, from the overflow
    /// table (whose entries are all younger than anything in the queue: calls merge into
    /// the table while it holds anything). Ends when the intake is closed and both are empty.
    async fn next_batch(mut self) -> Option<(Taken, Self)> {
        loop {
            if let Some(o) = &self.overflow
                && self.rx.is_empty()
            {
                let taken = o.take(BATCH);
                if !taken.is_empty() {
                    return Some((Taken::Overflow(taken), self));
                }
            }
            let overflow = self.overflow.clone();
            let filled = async {
                match &overflow {
                    Some(o) => o.filled().await,
                    None => std::future::pending().await,
                }
            };
            let got = match self.close.as_mut() {
                Some(close) => tokio::select! {
                    biased;
                    _ = close => None,
                    batch = self.rx.recv() => Some(batch),
                    () = filled => continue,
                },
                None => tokio::select! {
                    biased;
                    batch = self.rx.recv() => Some(batch),
                    () = filled => continue,
                },
            };
            match got {
                // Closing keeps what is queued readable; later sends fail.
                None => {
                    self.rx.close();
                    self.close = None;
                }
                Some(None) => {
                    // Closed and empty: done once the overflow is empty too (a call that
                    // merged meanwhile is taken on the next round).
                    match &self.overflow {
                        Some(o) if !o.close_if_empty() => continue,
                        _ => return None,
                    }
                }
                Some(Some(batch)) => return Some((Taken::Queue(batch), self)),
            }
        }
    }
}

impl Actor for RecorderActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.registry.actor_started();
        if let Some((rx, close)) = self.rx.take() {
            let state = IntakeStream {
                rx,
                close: Some(close),
                overflow: self.shared.overflow.clone(),
            };
            ctx.add_stream(stream::unfold(state, IntakeStream::next_batch));
        }
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.registry.actor_stopped();
    }
}

impl StreamHandler<Taken> for RecorderActor {
    fn handle(&mut self, taken: Taken, ctx: &mut Context<Self>) {
        let items = match taken {
            Taken::Queue(items) => {
                if let Some(b) = &self.shared.bytes {
                    b.release(items.iter().map(Item::approx_bytes).sum());
                }
                self.registry.intake.taken(items.len() as u64);
                items
            }
            Taken::Overflow(items) => {
                self.registry
                    .intake
                    .taken_from_overflow(items.iter().map(Item::stands_for).sum());
                items
            }
        };
        ctx.wait(
            self.broadcaster
                .send(Publish(items, Arc::clone(&self.factory)))
                .into_actor(self)
                .map(|res, _, _| {
                    if res.is_err() {
                        tracing::debug!("broadcaster gone; events lost at shutdown");
                    }
                }),
        );
    }

    fn finished(&mut self, _: &mut Context<Self>) {
        self.drained = true;
        for w in self.waiters.drain(..) {
            let _ = w.send(());
        }
    }
}

impl Handler<CloseIntake> for RecorderActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: CloseIntake, _: &mut Context<Self>) -> Self::Result {
        if let Some(close) = self.close.take() {
            let _ = close.send(());
        }
        if self.drained {
            return Box::pin(async {});
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.push(tx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

impl Handler<StopRecorder> for RecorderActor {
    type Result = ();

    fn handle(&mut self, _: StopRecorder, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
