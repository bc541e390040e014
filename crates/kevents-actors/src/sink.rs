//! The Sink actor: writes correlated events through an [`EventSink`], concurrently across
//! events and in order for each event, with retries, under an actix `Supervisor`.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use actix::WeakRecipient;
use actix::prelude::*;
use futures_util::FutureExt;
use kevents_core::{Disposition, Event, EventSink, SinkError, WriteKind, WriteOutcome};

use crate::message::DeliverySlot;
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

/// A correlated event to write (from a correlator actor).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Write {
    pub(crate) key: String,
    pub(crate) event: Event,
    pub(crate) patch: Option<Vec<u8>>,
    pub(crate) slot: DeliverySlot,
}

/// The end of a write, reported to the correlator: `stored` is the server's copy on success.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct WriteDone {
    pub(crate) key: String,
    pub(crate) stored: Option<Event>,
}

/// Drop everything queued (counted as abandoned) and cancel writes in flight.
#[derive(Message)]
#[rtype(result = "u64")]
pub(crate) struct Abandon;

struct Job {
    event: Arc<Event>,
    patch: Option<Arc<[u8]>>,
    _slot: DeliverySlot,
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
    keys: HashMap<String, KeyQueue>,
    ready: VecDeque<String>,
    active: usize,
    reply: Option<WeakRecipient<WriteDone>>,
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
        reply: Option<WeakRecipient<WriteDone>>,
        stats: Arc<SinkStats>,
        pstats: Arc<PipelineStats>,
    ) -> Self {
        SinkActor {
            sink,
            rebuild,
            retry,
            max_in_flight: max_in_flight.max(1),
            keys: HashMap::new(),
            ready: VecDeque::new(),
            active: 0,
            reply,
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
    }

    /// Runs the (active) head job of `key` until it is spawned or settled.
    fn drive(&mut self, key: String, ctx: &mut Context<Self>) {
        loop {
            let Some(job) = self.keys.get_mut(&key).and_then(|q| q.jobs.front_mut()) else {
                return;
            };
            job.attempts += 1;
            self.stats.attempts.add(1);
            let fut = attempt(
                Arc::clone(&self.sink),
                Arc::clone(&job.event),
                job.patch.clone(),
                job.delay.take(),
            );
            let mut fut = AssertUnwindSafe(fut)
                .catch_unwind()
                .map(|r| r.map_err(|p| panic_message(&*p)))
                .boxed();
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
    fn settle(&mut self, key: &str, res: AttemptResult, ctx: &mut Context<Self>) -> Settle {
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

    fn give_up(&mut self, key: &str, exhausted_log: bool) {
        self.stats.retry_exhausted.add(1);
        if exhausted_log {
            self.stats.retry_log.record(1);
        }
        self.finish(key, None);
    }

    /// Ends `key`'s head job: frees its slot, reports to the correlator, queues the key's
    /// next job.
    fn finish(&mut self, key: &str, stored: Option<Event>) {
        let Some(q) = self.keys.get_mut(key) else {
            return;
        };
        q.jobs.pop_front();
        q.active = false;
        self.active = self.active.saturating_sub(1);
        self.stats.queued.fetch_sub(1, Ordering::Relaxed);
        if q.jobs.is_empty() {
            self.keys.remove(key);
        } else {
            self.ready.push_back(key.to_owned());
        }
        if let Some(reply) = self.reply.as_ref().and_then(|r| r.upgrade()) {
            reply.do_send(WriteDone {
                key: key.to_owned(),
                stored,
            });
        }
    }

    fn restart(&mut self, ctx: &mut Context<Self>) {
        self.restarting = true;
        self.stats.restarts.add(1);
        ctx.stop();
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

impl Handler<Write> for SinkActor {
    type Result = ();

    fn handle(&mut self, w: Write, ctx: &mut Context<Self>) {
        if self.abandoned {
            self.stats.abandoned.add(1);
            return;
        }
        self.stats.queued.fetch_add(1, Ordering::Relaxed);
        let job = Job {
            event: Arc::new(w.event),
            patch: w.patch.map(Arc::from),
            _slot: w.slot,
            attempts: 0,
            delay: None,
        };
        match self.keys.get_mut(&w.key) {
            Some(q) => q.jobs.push_back(job),
            None => {
                let mut q = KeyQueue::default();
                q.jobs.push_back(job);
                self.keys.insert(w.key.clone(), q);
                self.ready.push_back(w.key);
            }
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
