//! The Broadcaster actor: fans every event out to every registered watcher, in intake order,
//! honouring each watcher's queue policy (the distribution itself is in [`distribution`]).

mod distribution;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use actix::prelude::*;

use crate::event_pool::EventPool;
use crate::intake_item::{Factories, Item};
use crate::message::{EventBatch, EventMessage};
use crate::queue::WatcherQueue;
use crate::registry::Registry;
pub use distribution::WatcherId;
use distribution::{Distribution, WatcherEntry, drain_overflow};

/// Distribute these events (from the recorder actor).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Publish(pub(crate) Vec<Item>, pub(crate) Arc<Factories>);

/// Register a watcher; handled in order with `Publish`, so the watcher sees every event
/// published after this message.
#[derive(Message)]
#[rtype(result = "WatcherId")]
pub(crate) struct Register {
    pub(crate) recipient: Recipient<EventMessage>,
    /// The batched form of `recipient` (the pipeline's own sink chains).
    pub(crate) batch: Option<Recipient<EventBatch>>,
    pub(crate) queue: Arc<WatcherQueue>,
}

/// Remove a watcher; returns whether it was registered.
#[derive(Message)]
#[rtype(result = "bool")]
pub(crate) struct Unregister(pub(crate) WatcherId);

/// Replies once everything published before it has been distributed, with the current
/// watchers' counters.
#[derive(Message)]
#[rtype(result = "Vec<Arc<WatcherQueue>>")]
pub(crate) struct Drained;

/// Drop every watcher and stop.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct StopBroadcaster;

/// The Broadcaster actor.
pub(crate) struct Broadcaster {
    watchers: Vec<Arc<WatcherEntry>>,
    next_seq: u64,
    next_id: u64,
    /// Coalescing watchers whose overflow waits for room (one waiter each).
    waiting: HashSet<WatcherId>,
    /// Written core/v1 events, given back by the core/v1 chains, to build the next ones into.
    pool: Arc<EventPool>,
    registry: Arc<Registry>,
}

impl Broadcaster {
    /// A broadcaster building core/v1 events into the records of `pool`.
    pub(crate) fn new(registry: Arc<Registry>, pool: Arc<EventPool>) -> Self {
        Broadcaster {
            watchers: Vec::new(),
            next_seq: 0,
            next_id: 0,
            waiting: HashSet::new(),
            pool,
            registry,
        }
    }

    /// Registers a watcher; `batch` is its batched form (the pipeline's own sink chains,
    /// see [`EventBatch`]).
    pub(crate) fn add(
        &mut self,
        recipient: Recipient<EventMessage>,
        batch: Option<Recipient<EventBatch>>,
        queue: Arc<WatcherQueue>,
    ) -> WatcherId {
        let id = WatcherId(self.next_id);
        self.next_id += 1;
        self.registry.add_watcher(Arc::clone(&queue));
        let entry = WatcherEntry::new(id, recipient, batch, queue);
        self.watchers.push(Arc::new(entry));
        id
    }

    fn finish(&mut self, d: &mut Distribution, ctx: &mut Context<Self>) {
        d.release_held();
        self.next_seq = d.next_seq;
        self.registry.intake.distributed(d.distributed);
        for w in &d.watchers {
            w.queue.publish_depth();
        }
        self.drain(ctx);
        self.watchers.retain(|w| !w.closed.load(Ordering::Relaxed));
    }

    /// Delivers what fits of every coalescing watcher's overflow table; for what does not,
    /// waits (off the actor's message loop) for a slot and the oldest entry's bytes, then
    /// drains again. Overflow entries are all younger than anything delivered, and events
    /// merge behind them meanwhile, so order is kept.
    fn drain(&mut self, ctx: &mut Context<Self>) {
        let left: Vec<Arc<WatcherEntry>> = self
            .watchers
            .iter()
            .filter(|w| w.queue.overflow_active() && drain_overflow(w))
            .filter(|w| !self.waiting.contains(&w.id))
            .cloned()
            .collect();
        for w in left {
            self.waiting.insert(w.id);
            let room = async move {
                let q = &w.queue;
                if let Some(size) = q.overflow_head_size() {
                    let bytes = q.bytes(q.byte_cost(size)).await;
                    let slot = q.slot().await;
                    drop((bytes, slot));
                }
                w.id
            };
            ctx.spawn(room.into_actor(self).map(|id, act, ctx| {
                act.waiting.remove(&id);
                act.drain(ctx);
            }));
        }
    }
}

impl Actor for Broadcaster {
    type Context = Context<Self>;

    fn started(&mut self, _: &mut Context<Self>) {
        self.registry.actor_started();
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.registry.actor_stopped();
    }
}

impl Handler<Publish> for Broadcaster {
    type Result = AtomicResponse<Self, ()>;

    fn handle(&mut self, msg: Publish, ctx: &mut Context<Self>) -> Self::Result {
        let mut d = Distribution::new(
            self.watchers.clone(),
            msg.0,
            msg.1,
            Arc::clone(&self.pool),
            Arc::clone(&self.registry),
            self.next_seq,
        );
        if d.run().is_none() {
            self.finish(&mut d, ctx);
            return AtomicResponse::new(Box::pin(actix::fut::ready(())));
        }
        // A backpressure watcher is full: wait for its slots, holding everything else back
        // (the actor handles no other message meanwhile, so the order is kept).
        let wait = async move {
            while let Some((i, size)) = d.current.as_ref().map(|c| (c.watcher, c.size)) {
                let queue = Arc::clone(&d.watchers[i].queue);
                // Bytes first, then a slot: a slot waiter holds nothing the watcher needs.
                let bytes = queue.bytes(queue.byte_cost(size)).await;
                let slot = match bytes {
                    Some(_) => queue.slot().await,
                    None => None,
                };
                match (slot, bytes) {
                    (Some(slot), Some(bytes)) => d.resume((slot, bytes)),
                    // The semaphores are never closed; treat it as a closed watcher.
                    _ => d.skip_current(),
                }
                if d.run().is_none() {
                    break;
                }
            }
            d
        };
        AtomicResponse::new(Box::pin(
            wait.into_actor(self)
                .map(|mut d, act, ctx| act.finish(&mut d, ctx)),
        ))
    }
}

impl Handler<Register> for Broadcaster {
    type Result = MessageResult<Register>;

    fn handle(&mut self, msg: Register, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.add(msg.recipient, msg.batch, msg.queue))
    }
}

impl Handler<Unregister> for Broadcaster {
    type Result = bool;

    fn handle(&mut self, msg: Unregister, _: &mut Context<Self>) -> bool {
        let before = self.watchers.len();
        self.watchers.retain(|w| {
            if w.id != msg.0 {
                return true;
            }
            // What its overflow table still holds is dropped as `closed`.
            w.closed.store(true, Ordering::Relaxed);
            drain_overflow(w);
            false
        });
        before != self.watchers.len()
    }
}

impl Handler<Drained> for Broadcaster {
    type Result = MessageResult<Drained>;

    fn handle(&mut self, _: Drained, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.watchers.iter().map(|w| Arc::clone(&w.queue)).collect())
    }
}

impl Handler<StopBroadcaster> for Broadcaster {
    type Result = ();

    fn handle(&mut self, _: StopBroadcaster, ctx: &mut Context<Self>) {
        self.watchers.clear();
        ctx.stop();
    }
}
