//! The keyed writer engine both sink chains write with: writes of one event (one key,
//! `namespace/name`) leave in order, one at a time; writes of different events run
//! concurrently up to a bound; a failed attempt sleeps as the chain's retry policy says and
//! is tried again; a panic in a sink becomes an error the chain handles; the queue slot a
//! write holds is given back (batched) when the write ends.
//!
//! The engine owns the queues ([`KeyedWriter`]) and the driving of attempts ([`pump`]); a
//! chain says how to start one attempt and what its result means ([`KeyedWrites`]).
//!
//! **Coalescing** (on unless the chain turns it off): per key at most one write has started
//! (in flight, or sleeping before a retry) and at most one waits behind it; a newer write of
//! the key is absorbed into the waiting one ([`Coalesce`]), whose slot is given back and
//! which the chain counts as superseded. Counts being absolute, only intermediate states are
//! skipped.
//!
//! **Budget**: before every attempt the engine asks the chain's [`WriteBudget`]; when it says
//! wait (its rate, the circuit, the writes in flight: every write waits), the key is parked
//! (it keeps its place among the writes in flight) and one timer per actor wakes the engine
//! up. When it says hold (a pause scoped to the write's namespace or object, after a
//! `Namespace` or `SourceAndObject` 429), the key gives its place among the writes in flight
//! up and waits aside until the pause ends, so writes to other namespaces and objects go on
//! at full speed: a throttled scope holds nobody else up. A parked or held write has not
//! started, so it keeps absorbing newer ones.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures_util::FutureExt;
use tokio::time::Instant;

use crate::budget::{Admit, Health, Permit, Scoped, WriteBudget, WriteScope};
use crate::fast_map::FastMap;
use crate::message::{DeliverySlot, ReleasedSlots};

/// A write's key: `namespace/name` of the event it writes.
pub(crate) type Key = Arc<str>;

/// One queued write with its retry state.
pub(crate) struct Job<W> {
    pub(crate) write: W,
    /// Attempts started so far.
    pub(crate) attempts: u32,
    /// Of those, attempts the server answered 429: throttling is "later", not "never", so
    /// they do not count against the retry policy ([`KeyedWriter::observed`]); the write
    /// waits under the budget instead, as long as the pipeline runs.
    throttled: u32,
    /// Sleep before the next attempt (set by the chain after a retryable failure).
    pub(crate) delay: Option<Duration>,
    /// The tracing span of the current attempt (set by the chain when it starts one).
    pub(crate) span: tracing::Span,
    /// The watcher queue slot this write holds, if any.
    slot: Option<DeliverySlot>,
    /// The budget's permit of the current attempt (until its answer is reported).
    permit: Option<Permit>,
    /// Waiting for the budget (counted once per wait).
    deferred: bool,
}

/// A write that can absorb a newer write of the same event before it starts.
pub(crate) trait Coalesce: Sized {
    /// Makes `self` (not started) write what `newer` would have, such that the server ends
    /// in the state the two writes in order would have left; `Err(newer)` if it cannot (the
    /// newer write is then queued behind).
    fn absorb(&mut self, newer: Self) -> Result<(), Self>;
}

struct KeyQueue<W> {
    jobs: VecDeque<Job<W>>,
    active: bool,
}

/// Where a write to `key` (`namespace/name`) goes, as the apiserver's limits see it.
fn scope<'a, W: Scoped>(key: &'a Key, write: &'a W) -> WriteScope<'a> {
    WriteScope {
        namespace: key.split_once('/').map_or("", |(ns, _)| ns),
        write,
    }
}

/// `key`'s head write in `keys`.
fn head<'a, W>(keys: &'a mut FastMap<Key, KeyQueue<W>>, key: &Key) -> Option<&'a mut Job<W>> {
    keys.get_mut(key).and_then(|q| q.jobs.front_mut())
}

/// Per-key FIFO queues with bounded concurrency across keys.
pub(crate) struct KeyedWriter<W> {
    keys: FastMap<Key, KeyQueue<W>>,
    ready: VecDeque<Key>,
    active: usize,
    max_in_flight: usize,
    len: usize,
    released: ReleasedSlots,
    coalesce: bool,
    budget: WriteBudget,
    /// Keys in flight whose next attempt waits for the budget, in the order they parked.
    parked: VecDeque<Key>,
    /// Keys whose head write waits for a pause scoped to its namespace or object, not in
    /// flight (their place among the writes in flight given up), earliest end first.
    held: BinaryHeap<Reverse<(Instant, Key)>>,
    /// The timer that wakes the engine for the budget: when it fires and its handle.
    wake: Option<(Instant, SpawnHandle)>,
}

impl<W: Coalesce> KeyedWriter<W> {
    /// At most `max_in_flight` (at least 1) keys have a write in flight at once; writes of a
    /// key coalesce if `coalesce`; every attempt draws from `budget`.
    pub(crate) fn new(max_in_flight: usize, coalesce: bool, budget: WriteBudget) -> Self {
        KeyedWriter {
            keys: FastMap::default(),
            ready: VecDeque::new(),
            active: 0,
            max_in_flight: max_in_flight.max(1),
            len: 0,
            released: ReleasedSlots::default(),
            coalesce,
            budget,
            parked: VecDeque::new(),
            held: BinaryHeap::new(),
            wake: None,
        }
    }

    /// Queues `write` behind the other writes of `key`, or (coalescing) lets the key's
    /// waiting write absorb it: then returns `true` (one write superseded; the older write's
    /// slot is given back, the absorbing write holds the newer slot).
    pub(crate) fn push(&mut self, key: Key, write: W, slot: Option<DeliverySlot>) -> bool {
        let mut write = write;
        if self.coalesce
            && let Some(last) = self.keys.get_mut(&key).and_then(|q| q.jobs.back_mut())
            && last.attempts == 0
        {
            match last.write.absorb(write) {
                Ok(()) => {
                    if let Some(old) = std::mem::replace(&mut last.slot, slot) {
                        self.released.push(old);
                    }
                    return true;
                }
                Err(w) => write = w,
            }
        }
        self.enqueue(key, write, slot);
        false
    }
}

impl<W> KeyedWriter<W> {
    fn enqueue(&mut self, key: Key, write: W, slot: Option<DeliverySlot>) {
        let job = Job {
            write,
            attempts: 0,
            throttled: 0,
            delay: None,
            span: tracing::Span::none(),
            slot,
            permit: None,
            deferred: false,
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

    /// The next key whose head write may start now (marked in flight), if any: a held key
    /// whose pause has ended first, then the ready keys in order.
    fn next(&mut self, now: Instant) -> Option<Key> {
        while self.active < self.max_in_flight {
            let due = self
                .held
                .peek()
                .is_some_and(|Reverse((until, _))| *until <= now);
            let key = if due {
                let Some(Reverse((_, key))) = self.held.pop() else {
                    continue;
                };
                key
            } else {
                self.ready.pop_front()?
            };
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
        head(&mut self.keys, key)
    }

    /// [`head_mut`](Self::head_mut) and the budget at once (different fields): one lookup
    /// for an attempt's delay, budget and count.
    fn head_and_budget(&mut self, key: &Key) -> Option<(&mut Job<W>, &mut WriteBudget)> {
        Some((head(&mut self.keys, key)?, &mut self.budget))
    }

    /// Takes `key` (in flight, its head write held by a scoped pause until `until`) out of
    /// the writes in flight: other keys may start in its place.
    fn hold(&mut self, key: Key, until: Instant) {
        if let Some(q) = self.keys.get_mut(&key)
            && std::mem::replace(&mut q.active, false)
        {
            self.active = self.active.saturating_sub(1);
        }
        self.held.push(Reverse((until, key)));
    }

    /// Ends `key`'s head write: its slot is given back at the end of the handler call and
    /// the key's next write becomes ready. Returns the job (the write and its span).
    pub(crate) fn finish(&mut self, key: &Key) -> Option<Job<W>> {
        let q = self.keys.get_mut(key)?;
        let mut job = q.jobs.pop_front()?;
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
        if let Some(slot) = job.slot.take() {
            self.released.push(slot);
        }
        Some(job)
    }

    /// Drops the writes of `key` queued behind its head write (which stays, to be ended by
    /// [`finish`](Self::finish)), giving their slots back; returns them, oldest first.
    pub(crate) fn drop_behind(&mut self, key: &Key) -> Vec<W> {
        let Some(q) = self.keys.get_mut(key) else {
            return Vec::new();
        };
        if q.jobs.len() <= 1 {
            return Vec::new();
        }
        let behind: Vec<Job<W>> = q.jobs.drain(1..).collect();
        self.len = self.len.saturating_sub(behind.len());
        behind
            .into_iter()
            .map(|mut job| {
                if let Some(slot) = job.slot.take() {
                    self.released.push(slot);
                }
                job.write
            })
            .collect()
    }

    /// Tells the budget what the answer to `key`'s current attempt says about the apiserver
    /// and returns the attempts the head write made that count against the retry policy
    /// (those answered 429 do not); `None` (nothing reported) if `key` has no write.
    pub(crate) fn observed(&mut self, key: &Key, health: Health) -> Option<u32>
    where
        W: Scoped,
    {
        let job = head(&mut self.keys, key)?;
        if matches!(health, Health::Throttled(..)) {
            job.throttled = job.throttled.saturating_add(1);
        }
        let attempts = job.attempts.saturating_sub(job.throttled);
        if let Some(permit) = job.permit.take() {
            self.budget.report(permit, health, scope(key, &job.write));
        }
        Some(attempts)
    }

    /// After a restart (the attempts in flight were dropped with the old actor context):
    /// every key that had a write in flight goes back to the front, to be tried again first.
    pub(crate) fn requeue_in_flight(&mut self) {
        self.parked.clear();
        self.wake = None;
        let mut requeue = Vec::new();
        for (k, q) in &mut self.keys {
            if q.active {
                q.active = false;
                if let Some(job) = q.jobs.front_mut() {
                    // Its attempt was dropped unanswered: no longer in flight.
                    job.permit = None;
                }
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
        self.parked.clear();
        self.held.clear();
        self.active = 0;
        self.len = 0;
        n
    }

    /// Whether an enabled budget paces the attempts (a 429 pauses them until it allows).
    pub(crate) fn paced(&self) -> bool {
        self.budget.is_enabled()
    }

    /// Writes queued or in flight.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Keys with a write in flight (sleeping before a retry included).
    pub(crate) fn in_flight(&self) -> usize {
        self.active
    }

    /// Nothing in flight, nothing ready to start and nothing held.
    pub(crate) fn is_idle(&self) -> bool {
        self.active == 0 && self.ready.is_empty() && self.held.is_empty()
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
    type Write: Scoped;
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

/// Starts head writes of parked keys (first), of held keys whose pause has ended and of
/// ready keys while the concurrency bound and the budget allow, then gives back the slots of
/// finished writes, makes sure the engine wakes up when the next held key's pause ends and
/// calls [`KeyedWrites::pumped`].
pub(crate) fn pump<A: KeyedWrites>(act: &mut A, ctx: &mut Context<A>) {
    // Whether nothing more may start now: paused, or the budget holds every write (its
    // timer is armed).
    let mut blocked = false;
    loop {
        if act.paused() {
            blocked = true;
            break;
        }
        let w = act.writer();
        let Some(key) = w.parked.pop_front().or_else(|| w.next(Instant::now())) else {
            break;
        };
        if !drive(act, key, ctx) {
            blocked = true;
            break;
        }
    }
    let w = act.writer();
    w.released.release();
    // The next held key's pause: a timer for it if it still runs; if it has just ended, a
    // wake-up now only if a place in flight is free (else the next write to end pumps, and a
    // timer due now would spin while every place is taken or the budget holds everything).
    let now = Instant::now();
    if let Some(Reverse((until, _))) = w.held.peek() {
        let wait = until.saturating_duration_since(now);
        if !wait.is_zero() || (!blocked && w.active < w.max_in_flight) {
            wake_within(act, wait, ctx);
        }
    }
    act.pumped(ctx);
}

/// Parks `key` (in flight, waiting for the budget) and makes sure the engine wakes up
/// within `wait`.
fn park<A: KeyedWrites>(act: &mut A, key: Key, wait: Duration, ctx: &mut Context<A>) {
    act.writer().parked.push_front(key);
    wake_within(act, wait, ctx);
}

/// Makes sure the engine's timer fires (and pumps) within `wait`.
fn wake_within<A: KeyedWrites>(act: &mut A, wait: Duration, ctx: &mut Context<A>) {
    let w = act.writer();
    let at = Instant::now() + wait;
    if let Some((when, h)) = w.wake {
        if when <= at {
            return;
        }
        ctx.cancel_future(h);
    }
    let h = ctx.run_later(wait, |act, ctx| {
        act.writer().wake = None;
        pump(act, ctx);
    });
    act.writer().wake = Some((at, h));
}

/// Runs `key`'s (in flight) head write until it is spawned, settled or parked; `false` if it
/// was parked (the budget says wait: nothing else may start now either).
fn drive<A: KeyedWrites>(act: &mut A, key: Key, ctx: &mut Context<A>) -> bool {
    loop {
        let Some((job, budget)) = act.writer().head_and_budget(&key) else {
            return true;
        };
        if let Some(d) = job.delay.take() {
            ctx.spawn(
                actix::fut::wrap_future::<_, A>(actix_rt::time::sleep(d)).map(
                    move |(), act, ctx| {
                        if !act.paused() {
                            let _ = drive(act, key, ctx);
                        }
                        pump(act, ctx);
                    },
                ),
            );
            return true;
        }
        match budget.admit(scope(&key, &job.write)) {
            Admit::Go(permit) => {
                job.permit = Some(permit);
                job.deferred = false;
            }
            Admit::Wait(wait, why) => {
                if !std::mem::replace(&mut job.deferred, true) {
                    budget.counters().deferred(why);
                    tracing::debug!(budget = %budget.name(), event = %key, ?wait, reason = ?why,
                        "write waits for the write budget");
                }
                park(act, key, wait, ctx);
                return false;
            }
            Admit::Hold(wait, why) => {
                if !std::mem::replace(&mut job.deferred, true) {
                    budget.counters().deferred(why);
                    tracing::debug!(budget = %budget.name(), event = %key, ?wait, reason = ?why,
                        "write waits for a pause of its namespace or object");
                }
                act.writer().hold(key, Instant::now() + wait);
                wake_within(act, wait, ctx);
                return true;
            }
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
            Ok(None) => return true,
            Ok(Some((_, Some(out)))) => Ok(out),
            Ok(Some((attempt, None))) => {
                let guarded = AssertUnwindSafe(attempt)
                    .catch_unwind()
                    .map(|r| r.map_err(|p| Panicked(panic_message(&*p))));
                ctx.spawn(guarded.into_actor(act).map(move |out, act, ctx| {
                    if let Settle::Again = act.settle(&key, out, ctx) {
                        let _ = drive(act, key, ctx);
                    }
                    pump(act, ctx);
                }));
                return true;
            }
        };
        match act.settle(&key, out, ctx) {
            Settle::Again => continue,
            Settle::Done => return true,
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
