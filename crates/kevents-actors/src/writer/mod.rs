//! The keyed writer engine both sink chains write with: writes of one event (one key,
//! `namespace/name`) leave in order, one at a time; writes of different events run
//! concurrently up to a bound; a failed attempt sleeps as the chain's retry policy says and
//! is tried again; a panic in a sink becomes an error the chain handles; the queue slot a
//! write holds is given back (batched) when the write ends.
//!
//! The engine owns the queues ([`KeyedWriter`]) and the driving of attempts ([`pump`]); a
//! chain says how to start one attempt and what its result means ([`KeyedWrites`]).

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures_util::FutureExt;

use crate::fast_map::FastMap;
use crate::message::{DeliverySlot, ReleasedSlots};

/// A write's key: `namespace/name` of the event it writes.
pub(crate) type Key = Arc<str>;

/// One queued write with its retry state.
pub(crate) struct Job<W> {
    pub(crate) write: W,
    /// Attempts started so far.
    pub(crate) attempts: u32,
    /// Sleep before the next attempt (set by the chain after a retryable failure).
    pub(crate) delay: Option<Duration>,
    /// The tracing span of the current attempt (set by the chain when it starts one).
    pub(crate) span: tracing::Span,
    /// The watcher queue slot this write holds, if any.
    slot: Option<DeliverySlot>,
}

struct KeyQueue<W> {
    jobs: VecDeque<Job<W>>,
    active: bool,
}

/// Per-key FIFO queues with bounded concurrency across keys.
pub(crate) struct KeyedWriter<W> {
    keys: FastMap<Key, KeyQueue<W>>,
    ready: VecDeque<Key>,
    active: usize,
    max_in_flight: usize,
    len: usize,
    released: ReleasedSlots,
}

impl<W> KeyedWriter<W> {
    /// At most `max_in_flight` (at least 1) keys have a write in flight at once.
    pub(crate) fn new(max_in_flight: usize) -> Self {
        KeyedWriter {
            keys: FastMap::default(),
            ready: VecDeque::new(),
            active: 0,
            max_in_flight: max_in_flight.max(1),
            len: 0,
            released: ReleasedSlots::default(),
        }
    }

    /// Queues `write` behind the other writes of `key`.
    pub(crate) fn push(&mut self, key: Key, write: W, slot: Option<DeliverySlot>) {
        let job = Job {
            write,
            attempts: 0,
            delay: None,
            span: tracing::Span::none(),
            slot,
        };
        self.len += 1;
        match self.keys.get_mut(&key) {
            Some(q) => q.jobs.push_back(job),
            None => {
                let mut jobs = VecDeque::with_capacity(1);
                jobs.push_back(job);
                self.keys.insert(
                    Arc::clone(&key),
                    KeyQueue {
                        jobs,
                        active: false,
                    },
                );
                self.ready.push_back(key);
            }
        }
    }

    /// The next key whose head write may start now (marked in flight), if any.
    fn next(&mut self) -> Option<Key> {
        while self.active < self.max_in_flight {
            let key = self.ready.pop_front()?;
            match self.keys.get_mut(&key) {
                Some(q) if !q.active && !q.jobs.is_empty() => {
                    q.active = true;
                    self.active += 1;
                    return Some(key);
                }
                _ => continue,
            }
        }
        None
    }

    /// The write in flight (or next) for `key`.
    pub(crate) fn head_mut(&mut self, key: &Key) -> Option<&mut Job<W>> {
        self.keys.get_mut(key).and_then(|q| q.jobs.front_mut())
    }

    /// Ends `key`'s head write: its slot is given back at the end of the handler call and
    /// the key's next write becomes ready. Returns the write.
    pub(crate) fn finish(&mut self, key: &Key) -> Option<W> {
        let q = self.keys.get_mut(key)?;
        let job = q.jobs.pop_front()?;
        if q.active {
            q.active = false;
            self.active = self.active.saturating_sub(1);
        }
        self.len = self.len.saturating_sub(1);
        if q.jobs.is_empty() {
            self.keys.remove(key);
        } else {
            self.ready.push_back(Arc::clone(key));
        }
        if let Some(slot) = job.slot {
            self.released.push(slot);
        }
        Some(job.write)
    }

    /// After a restart (the attempts in flight were dropped with the old actor context):
    /// every key that had a write in flight goes back to the front, to be tried again first.
    pub(crate) fn requeue_in_flight(&mut self) {
        let mut requeue = Vec::new();
        for (k, q) in &mut self.keys {
            if q.active {
                q.active = false;
                requeue.push(Arc::clone(k));
            }
        }
        for k in requeue {
            self.ready.push_front(k);
        }
        self.active = 0;
    }

    /// Drops every write; returns how many there were.
    pub(crate) fn clear(&mut self) -> u64 {
        let n = self.len as u64;
        self.keys.clear();
        self.ready.clear();
        self.active = 0;
        self.len = 0;
        n
    }

    /// Writes queued or in flight.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Keys with a write in flight (sleeping before a retry included).
    pub(crate) fn in_flight(&self) -> usize {
        self.active
    }

    /// Nothing in flight and nothing ready to start.
    pub(crate) fn is_idle(&self) -> bool {
        self.active == 0 && self.ready.is_empty()
    }
}

/// A panic caught in a sink: its message.
#[derive(Debug)]
pub(crate) struct Panicked(pub(crate) String);

/// What the chain wants after an attempt's result.
pub(crate) enum Settle {
    /// Start the key's head write again now (after its `delay`, if the chain set one).
    Again,
    /// The key has no attempt to start now (the write ended, or the chain restarts).
    Done,
}

/// A sink chain driven by the engine.
pub(crate) trait KeyedWrites: Actor<Context = Context<Self>> {
    /// What is queued per key.
    type Write;
    /// The result of one attempt.
    type Output: 'static;
    /// One attempt in progress (`Unpin`: polled once in place, spawned only if pending).
    type Attempt: Future<Output = Self::Output> + Unpin + 'static;

    /// The chain's queues.
    fn writer(&mut self) -> &mut KeyedWriter<Self::Write>;

    /// Whether nothing may start now (restarting, abandoned).
    fn paused(&self) -> bool {
        false
    }

    /// Starts one attempt of `key`'s head write (its `attempts` already counts it); `None`
    /// if the key has no write (the attempt is then not made).
    fn start(&mut self, key: &Key) -> Option<Self::Attempt>;

    /// Handles the result of an attempt of `key`'s head write: finish it
    /// ([`KeyedWriter::finish`]), or set its `delay` and return [`Settle::Again`].
    fn settle(
        &mut self,
        key: &Key,
        out: Result<Self::Output, Panicked>,
        ctx: &mut Context<Self>,
    ) -> Settle;

    /// Called at the end of every [`pump`]: report, export counters, arm timers.
    fn pumped(&mut self, _ctx: &mut Context<Self>) {}
}

/// Starts head writes of ready keys while the concurrency bound allows, then gives back
/// the slots of finished writes and calls [`KeyedWrites::pumped`].
pub(crate) fn pump<A: KeyedWrites>(act: &mut A, ctx: &mut Context<A>) {
    while !act.paused() {
        let Some(key) = act.writer().next() else {
            break;
        };
        drive(act, key, ctx);
    }
    act.writer().released.release();
    act.pumped(ctx);
}

/// Runs `key`'s (in flight) head write until it is spawned or settled.
fn drive<A: KeyedWrites>(act: &mut A, key: Key, ctx: &mut Context<A>) {
    loop {
        let Some(job) = act.writer().head_mut(&key) else {
            return;
        };
        if let Some(d) = job.delay.take() {
            ctx.spawn(
                actix::fut::wrap_future::<_, A>(actix_rt::time::sleep(d)).map(
                    move |(), act, ctx| {
                        if !act.paused() {
                            drive(act, key, ctx);
                        }
                        pump(act, ctx);
                    },
                ),
            );
            return;
        }
        job.attempts += 1;
        // A sink that answers at once (in-memory, counting) is settled here, without
        // spawning; a panic in the call or the first poll is caught like one later on.
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
            act.start(&key).map(|mut attempt| {
                let ready = (&mut attempt).now_or_never();
                (attempt, ready)
            })
        }));
        let out = match polled {
            Err(p) => Err(Panicked(panic_message(&*p))),
            Ok(None) => return,
            Ok(Some((_, Some(out)))) => Ok(out),
            Ok(Some((attempt, None))) => {
                let guarded = AssertUnwindSafe(attempt)
                    .catch_unwind()
                    .map(|r| r.map_err(|p| Panicked(panic_message(&*p))));
                ctx.spawn(guarded.into_actor(act).map(move |out, act, ctx| {
                    if let Settle::Again = act.settle(&key, out, ctx) {
                        drive(act, key, ctx);
                    }
                    pump(act, ctx);
                }));
                return;
            }
        };
        match act.settle(&key, out, ctx) {
            Settle::Again => continue,
            Settle::Done => return,
        }
    }
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
