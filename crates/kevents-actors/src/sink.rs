//! The Sink actor: writes correlated events through an [`EventSink`], concurrently across
//! events and in order for each event, with retries, under an actix `Supervisor`.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use actix::WeakRecipient;
use actix::prelude::*;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use kevents_core::{Disposition, Event, EventSink, SinkError, WriteKind, WriteOutcome};

use crate::message::{DeliverySlot, ReleasedSlots};
use crate::stats::{PipelineStats, SinkStats};

/// Which errors are retried.
#[derive(Clone, Default)]
pub enum Classifier {
    /// kevents: transport errors, timeouts, unexpected objects, and 429/500/502/503/504
    /// ([`SinkError::disposition`]). The default.
    #[default]
    Kevents,
    /// client-go 1.20: every HTTP error status is dropped ([`SinkError::client_go_disposition`]).
    ClientGo,
    /// A function of your own.
    Custom(Arc<dyn Fn(&SinkError) -> Disposition + Send + Sync>),
}

impl fmt::Debug for Classifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Classifier::Kevents => f.write_str("Kevents"),
            Classifier::ClientGo => f.write_str("ClientGo"),
            Classifier::Custom(_) => f.write_str("Custom"),
        }
    }
}

impl Classifier {
    /// Classifies one error.
    pub fn classify(&self, e: &SinkError) -> Disposition {
        match self {
            Classifier::Kevents => e.disposition(),
            Classifier::ClientGo => e.client_go_disposition(),
            Classifier::Custom(f) => f(e),
        }
    }
}

/// Decides whether an error means the sink itself is broken (say, expired credentials): the
/// sink actor is then restarted (rebuilding the [`EventSink`] if a factory was given) and the
/// write is tried again.
pub type FatalFn = Arc<dyn Fn(&SinkError) -> bool + Send + Sync>;

/// Builds a fresh [`EventSink`] when the sink actor restarts.
pub type SinkFactory = Arc<dyn Fn() -> Arc<dyn EventSink> + Send + Sync>;

/// How a write is retried. The defaults are client-go's (reference A1-A3): 12 attempts in
/// total, the first sleep random in `[0, 10 s)`, then 10 s; but with kevents' error
/// classification (429 and 5xx are retried too) and the server's `Retry-After` honoured.
///
/// ```
/// use kevents_actors::RetryPolicy;
/// use std::time::Duration;
/// let p = RetryPolicy::default();
/// assert_eq!((p.max_attempts, p.sleep, p.randomize_first), (12, Duration::from_secs(10), true));
/// let fast = RetryPolicy { sleep: Duration::ZERO, ..RetryPolicy::default() };
/// # let _ = fast;
/// ```
#[derive(Clone)]
pub struct RetryPolicy {
    /// Attempts per write, the first included (at least 1).
    pub max_attempts: u32,
    /// Sleep between attempts.
    pub sleep: Duration,
    /// The first sleep is `sleep` times a random factor in `[0, 1)`, as client-go's.
    pub randomize_first: bool,
    /// Use the server's `Retry-After` instead of `sleep` when it sends one.
    pub honour_retry_after: bool,
    /// Upper bound on a `Retry-After` sleep.
    pub max_retry_after: Duration,
    /// Which errors are retried.
    pub classifier: Classifier,
    /// Which errors restart the sink (none by default).
    pub fatal: Option<FatalFn>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 12,
            sleep: Duration::from_secs(10),
            randomize_first: true,
            honour_retry_after: true,
            max_retry_after: Duration::from_secs(60),
            classifier: Classifier::Kevents,
            fatal: None,
        }
    }
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("max_attempts", &self.max_attempts)
            .field("sleep", &self.sleep)
            .field("randomize_first", &self.randomize_first)
            .field("honour_retry_after", &self.honour_retry_after)
            .field("max_retry_after", &self.max_retry_after)
            .field("classifier", &self.classifier)
            .field("fatal", &self.fatal.as_ref().map(|_| "custom"))
            .finish()
    }
}

impl RetryPolicy {
    /// The sleep before attempt `next` (2 for the first retry).
    fn delay(&self, next: u32, err: &SinkError) -> Duration {
        if self.honour_retry_after
            && let Some(d) = err.retry_after()
        {
            return d.min(self.max_retry_after);
        }
        if next == 2 && self.randomize_first {
            self.sleep.mul_f64(fastrand::f64())
        } else {
            self.sleep
        }
    }
}

/// A hash map keyed by short strings with a cheap (non-DoS-resistant) hash: keys are event
/// names built by the recorder, not attacker-controlled input.
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// The `FxHash` function (rustc's): a multiply-rotate per word.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(K);
        }
    }

    #[inline]
    fn write_u8(&mut self, b: u8) {
        self.write(&[b]);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A correlated event to write (from a correlator actor).
pub(crate) struct Write {
    pub(crate) key: Arc<str>,
    pub(crate) event: Event,
    pub(crate) patch: Option<Vec<u8>>,
    pub(crate) slot: DeliverySlot,
}

/// Writes in the order the correlator made them (one mailbox hand-off per batch).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct WriteBatch(pub(crate) Vec<Write>);

/// The end of a write, reported to the correlator: `stored` is the server's copy on success.
pub(crate) struct WriteDone {
    pub(crate) key: Arc<str>,
    pub(crate) stored: Option<Event>,
}

/// Ends of writes, in the order they happened, collected over one handler call of the sink.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct WriteDoneBatch(pub(crate) Vec<WriteDone>);

/// Drop everything queued (counted as abandoned) and cancel writes in flight.
#[derive(Message)]
#[rtype(result = "u64")]
pub(crate) struct Abandon;

struct Job {
    event: Arc<Event>,
    patch: Option<Arc<[u8]>>,
    slot: DeliverySlot,
    attempts: u32,
    delay: Option<Duration>,
}

#[derive(Default)]
struct KeyQueue {
    jobs: VecDeque<Job>,
    active: bool,
}

type AttemptResult = Result<WriteOutcome, String>;

enum Settle {
    /// Try the same key's head job again now.
    Again,
    /// The key is idle or waiting (timer, restart).
    Idle,
}

/// The Sink actor.
pub(crate) struct SinkActor {
    sink: Arc<dyn EventSink>,
    rebuild: Option<SinkFactory>,
    retry: RetryPolicy,
    max_in_flight: usize,
    keys: FastMap<Arc<str>, KeyQueue>,
    ready: VecDeque<Arc<str>>,
    active: usize,
    reply: Option<WeakRecipient<WriteDoneBatch>>,
    /// Ends of writes not yet reported (sent together at the end of each handler call).
    done: Vec<WriteDone>,
    /// Slots of finished writes, given back together at the end of each handler call.
    released: ReleasedSlots,
    stats: Arc<SinkStats>,
    pstats: Arc<PipelineStats>,
    abandoned: bool,
    restarting: bool,
}

impl SinkActor {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        sink: Arc<dyn EventSink>,
        rebuild: Option<SinkFactory>,
        retry: RetryPolicy,
        max_in_flight: usize,
        reply: Option<WeakRecipient<WriteDoneBatch>>,
        stats: Arc<SinkStats>,
        pstats: Arc<PipelineStats>,
    ) -> Self {
        SinkActor {
            sink,
            rebuild,
            retry,
            max_in_flight: max_in_flight.max(1),
            keys: FastMap::default(),
            ready: VecDeque::new(),
            active: 0,
            reply,
            done: Vec::new(),
            released: ReleasedSlots::default(),
            stats,
            pstats,
            abandoned: false,
            restarting: false,
        }
    }

    fn update_gauges(&self) {
        self.stats
            .in_flight
            .store(self.active as u64, Ordering::Relaxed);
        let queued = self.stats.queued.load(Ordering::Relaxed);
        self.stats.depth_gauge.set(queued as f64);
    }

    /// Starts head jobs of ready keys while slots are free.
    fn pump(&mut self, ctx: &mut Context<Self>) {
        while !self.restarting && self.active < self.max_in_flight {
            let Some(key) = self.ready.pop_front() else {
                break;
            };
            match self.keys.get_mut(&key) {
                Some(q) if !q.active && !q.jobs.is_empty() => q.active = true,
                _ => continue,
            }
            self.active += 1;
            self.drive(key, ctx);
        }
        self.update_gauges();
        self.report();
    }

    /// Reports the ends of writes to the correlator and gives their slots back (once per
    /// handler call rather than once per write).
    fn report(&mut self) {
        self.released.release();
        if self.done.is_empty() {
            return;
        }
        let done = std::mem::take(&mut self.done);
        if let Some(reply) = self.reply.as_ref().and_then(|r| r.upgrade()) {
            reply.do_send(WriteDoneBatch(done));
        }
    }

    /// Runs the (active) head job of `key` until it is spawned or settled.
    fn drive(&mut self, key: Arc<str>, ctx: &mut Context<Self>) {
        loop {
            let Some(job) = self.keys.get_mut(&key).and_then(|q| q.jobs.front_mut()) else {
                return;
            };
            job.attempts += 1;
            self.stats.attempts.add(1);
            let mut fut = match start_attempt(&self.sink, job) {
                Started::Done(res) => match self.settle(&key, res, ctx) {
                    Settle::Again => continue,
                    Settle::Idle => return,
                },
                Started::Pending(fut) => fut,
            };
            // In-memory sinks answer at once: settle without spawning.
            let res = match (&mut fut).now_or_never() {
                Some(res) => res,
                None => {
                    let k = key.clone();
                    ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| {
                        if let Settle::Again = act.settle(&k, res, ctx) {
                            act.drive(k, ctx);
                        }
                        act.pump(ctx);
                    }));
                    return;
                }
            };
            match self.settle(&key, res, ctx) {
                Settle::Again => continue,
                Settle::Idle => return,
            }
        }
    }

    /// Handles the result of one attempt of `key`'s head job.
    fn settle(&mut self, key: &Arc<str>, res: AttemptResult, ctx: &mut Context<Self>) -> Settle {
        if self.restarting || self.abandoned {
            return Settle::Idle;
        }
        let Some(job) = self.keys.get_mut(key).and_then(|q| q.jobs.front_mut()) else {
            return Settle::Idle;
        };
        let outcome = match res {
            Ok(o) => o,
            Err(panic) => {
                tracing::error!(sink = %self.stats.name, event = %key, panic = %panic,
                    "event sink panicked; restarting it (queued writes are kept)");
                if job.attempts >= self.retry.max_attempts.max(1) {
                    self.give_up(key, false);
                }
                self.restart(ctx);
                return Settle::Idle;
            }
        };
        match outcome.result {
            Ok(stored) => {
                match outcome.kind {
                    WriteKind::Create => self.stats.created.add(1),
                    WriteKind::Patch => self.stats.patched.add(1),
                    WriteKind::Recreate => self.stats.recreated.add(1),
                }
                self.finish(key, Some(stored));
                Settle::Idle
            }
            Err(err) => {
                if self.retry.fatal.as_ref().is_some_and(|f| f(&err)) {
                    tracing::error!(sink = %self.stats.name, event = %key, error = %err,
                        "fatal sink error; restarting the sink (queued writes are kept)");
                    if job.attempts >= self.retry.max_attempts.max(1) {
                        self.give_up(key, false);
                    }
                    self.restart(ctx);
                    return Settle::Idle;
                }
                match self.retry.classifier.classify(&err) {
                    Disposition::Retry if job.attempts < self.retry.max_attempts.max(1) => {
                        let d = self.retry.delay(job.attempts + 1, &err);
                        tracing::debug!(sink = %self.stats.name, event = %key, error = %err,
                            attempt = job.attempts, "unable to write event (may retry after sleeping)");
                        // The next attempt sleeps first (and so runs as a spawned future).
                        job.delay = (!d.is_zero()).then_some(d);
                        Settle::Again
                    }
                    Disposition::Retry => {
                        tracing::warn!(sink = %self.stats.name, event = %key, error = %err,
                            attempts = job.attempts, "unable to write event (retry limit exceeded)");
                        self.give_up(key, true);
                        Settle::Idle
                    }
                    Disposition::Drop { quiet } => {
                        if quiet {
                            tracing::debug!(sink = %self.stats.name, event = %key, error = %err,
                                "server rejected event (will not retry)");
                        } else {
                            tracing::warn!(sink = %self.stats.name, event = %key, error = %err,
                                "server rejected event (will not retry)");
                        }
                        self.stats.rejected.add(1);
                        self.finish(key, None);
                        Settle::Idle
                    }
                }
            }
        }
    }

    fn give_up(&mut self, key: &Arc<str>, exhausted_log: bool) {
        self.stats.retry_exhausted.add(1);
        if exhausted_log {
            self.stats.retry_log.record(1);
        }
        self.finish(key, None);
    }

    /// Ends `key`'s head job: frees its slot, reports to the correlator, queues the key's
    /// next job.
    fn finish(&mut self, key: &Arc<str>, stored: Option<Event>) {
        let Some(q) = self.keys.get_mut(key) else {
            return;
        };
        let key = Arc::clone(key);
        if let Some(job) = q.jobs.pop_front() {
            self.released.push(job.slot);
        }
        q.active = false;
        self.active = self.active.saturating_sub(1);
        self.stats.queued.fetch_sub(1, Ordering::Relaxed);
        if q.jobs.is_empty() {
            self.keys.remove(&key);
        } else {
            self.ready.push_back(Arc::clone(&key));
        }
        if self.reply.is_some() {
            self.done.push(WriteDone { key, stored });
        }
    }

    fn restart(&mut self, ctx: &mut Context<Self>) {
        self.restarting = true;
        self.stats.restarts.add(1);
        ctx.stop();
    }
}

/// An attempt that either ended at once or goes on as a future.
// A short-lived value on the stack: boxing the result would cost an allocation per write.
#[allow(clippy::large_enum_variant)]
enum Started {
    Done(AttemptResult),
    Pending(BoxFuture<'static, AttemptResult>),
}

/// Wraps an attempt's future so that a panic inside the sink becomes an error (a restart).
fn guarded(
    fut: impl Future<Output = WriteOutcome> + Send + 'static,
) -> BoxFuture<'static, AttemptResult> {
    AssertUnwindSafe(fut)
        .catch_unwind()
        .map(|r| r.map_err(|p| panic_message(&*p)))
        .boxed()
}

/// Starts one attempt of `job`. The common case (no sleep before it, nothing to strip from
/// the event) calls the sink right here and polls its future once: a sink that answers at
/// once (in-memory, a counting sink) costs no boxed future of ours. A panic in the call or
/// in the poll is caught as in [`attempt`].
fn start_attempt(sink: &Arc<dyn EventSink>, job: &mut Job) -> Started {
    let delay = job.delay.take();
    let is_patch = job.event.count > 1;
    if delay.is_some() || (!is_patch && !job.event.metadata.resource_version.is_empty()) {
        return Started::Pending(guarded(attempt(
            Arc::clone(sink),
            Arc::clone(&job.event),
            job.patch.clone(),
            delay,
        )));
    }
    let event = &job.event;
    let patch = job.patch.as_deref().unwrap_or_default();
    let polled = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let mut first = if is_patch {
            sink.patch(event, patch)
        } else {
            sink.create(event)
        };
        let ready = (&mut first).now_or_never();
        (first, ready)
    }));
    let kind = if is_patch {
        WriteKind::Patch
    } else {
        WriteKind::Create
    };
    match polled {
        Err(p) => Started::Done(Err(panic_message(&*p))),
        Ok((_, Some(Err(e)))) if is_patch && e.is_not_found() => {
            Started::Pending(guarded(recreate(Arc::clone(sink), Arc::clone(event))))
        }
        Ok((_, Some(result))) => Started::Done(Ok(WriteOutcome { kind, result })),
        Ok((first, None)) => {
            let sink = Arc::clone(sink);
            let event = Arc::clone(event);
            Started::Pending(guarded(async move {
                match first.await {
                    Err(e) if is_patch && e.is_not_found() => recreate(sink, event).await,
                    result => WriteOutcome { kind, result },
                }
            }))
        }
    }
}

/// The CREATE after a PATCH found nothing (client-go `recordEvent`).
async fn recreate(sink: Arc<dyn EventSink>, event: Arc<Event>) -> WriteOutcome {
    let mut e = (*event).clone();
    e.metadata.resource_version.clear();
    WriteOutcome {
        kind: WriteKind::Recreate,
        result: sink.create(&e).await,
    }
}

/// One write attempt of client-go's `recordEvent` ([`kevents_core::write_event`]), on a shared
/// event so retries need no copy.
async fn attempt(
    sink: Arc<dyn EventSink>,
    event: Arc<Event>,
    patch: Option<Arc<[u8]>>,
    delay: Option<Duration>,
) -> WriteOutcome {
    if let Some(d) = delay {
        actix_rt::time::sleep(d).await;
    }
    if event.count > 1 {
        let result = sink
            .patch(&event, patch.as_deref().unwrap_or_default())
            .await;
        match result {
            Err(e) if e.is_not_found() => {}
            result => {
                return WriteOutcome {
                    kind: WriteKind::Patch,
                    result,
                };
            }
        }
        let mut e = (*event).clone();
        e.metadata.resource_version.clear();
        return WriteOutcome {
            kind: WriteKind::Recreate,
            result: sink.create(&e).await,
        };
    }
    let result = if event.metadata.resource_version.is_empty() {
        sink.create(&event).await
    } else {
        let mut e = (*event).clone();
        e.metadata.resource_version.clear();
        sink.create(&e).await
    };
    WriteOutcome {
        kind: WriteKind::Create,
        result,
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

impl Actor for SinkActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.pstats.actor_started();
        self.pump(ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.pstats.actor_stopped();
    }
}

impl Supervised for SinkActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        // Spawned attempts were discarded with the old context: every active head job goes
        // back to the front of the ready queue, in its key's order, and is tried again.
        self.restarting = false;
        self.active = 0;
        let mut requeue = Vec::new();
        for (k, q) in &mut self.keys {
            if q.active {
                q.active = false;
                requeue.push(k.clone());
            }
        }
        for k in requeue {
            self.ready.push_front(k);
        }
        if let Some(f) = &self.rebuild {
            self.sink = f();
        }
        if self.abandoned {
            self.keys.clear();
            self.ready.clear();
        }
    }
}

impl SinkActor {
    fn enqueue(&mut self, w: Write) {
        if self.abandoned {
            self.stats.abandoned.add(1);
            return;
        }
        self.stats.queued.fetch_add(1, Ordering::Relaxed);
        let job = Job {
            event: Arc::new(w.event),
            patch: w.patch.map(Arc::from),
            slot: w.slot,
            attempts: 0,
            delay: None,
        };
        match self.keys.get_mut(&w.key) {
            Some(q) => q.jobs.push_back(job),
            None => {
                let mut q = KeyQueue::default();
                q.jobs.push_back(job);
                self.keys.insert(Arc::clone(&w.key), q);
                self.ready.push_back(w.key);
            }
        }
    }
}

impl Handler<WriteBatch> for SinkActor {
    type Result = ();

    fn handle(&mut self, batch: WriteBatch, ctx: &mut Context<Self>) {
        if self.reply.is_some() {
            self.done.reserve(batch.0.len());
        }
        for w in batch.0 {
            self.enqueue(w);
        }
        self.pump(ctx);
    }
}

impl Handler<Abandon> for SinkActor {
    type Result = u64;

    fn handle(&mut self, _: Abandon, ctx: &mut Context<Self>) -> u64 {
        self.abandoned = true;
        let n: u64 = self.keys.values().map(|q| q.jobs.len() as u64).sum();
        self.stats.abandoned.add(n);
        self.stats.queued.fetch_sub(n, Ordering::Relaxed);
        self.keys.clear();
        self.ready.clear();
        self.active = 0;
        self.update_gauges();
        // Stopping drops the writes in flight; the supervisor restarts an empty actor that
        // ends once its last address is gone.
        ctx.stop();
        n
    }
}
