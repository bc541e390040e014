//! The Sink actor of a core/v1 chain: writes correlated events through an [`EventSink`] with
//! the keyed writer engine (in order per event, concurrently across events, retried), under
//! an actix `Supervisor` that restarts it without losing what is queued. Each attempt is
//! core's `WriteEvent` (client-go's `recordEvent`: PATCH, CREATE after 404), run inside a
//! `kevents.write` debug span (`sink`, `event`, `verb`, `attempt`; `status` when it settles).

use std::sync::Arc;

use actix::WeakRecipient;
use actix::prelude::*;
use std::borrow::Cow;

use kevents_core::__private::WriteEvent;
use kevents_core::{Disposition, Event, EventSink, SinkError, Stored, WriteKind, WriteOutcome};
use tracing::Instrument;
use tracing::instrument::Instrumented;

use crate::budget::{Health, Scoped, WriteBudget, object_hash};
use crate::event_pool::EventPool;
use crate::fast_map::FastMap;
use crate::message::{DeliverySlot, SharedCore};
use crate::policy::RetryPolicy;
use crate::registry::Registry;
use crate::telemetry::{SinkCounters, WriteEnd, WriteRefusal};
use crate::writer::{Coalesce, Key, KeyedWriter, KeyedWrites, Panicked, Settle, pump};

/// Builds a fresh [`EventSink`] when the sink actor restarts.
pub type SinkFactory = Arc<dyn Fn() -> Arc<dyn EventSink> + Send + Sync>;

/// A correlated event to write (from the correlator actor).
pub(crate) struct CorrelatedWrite {
    pub(crate) key: Key,
    pub(crate) event: SharedCore,
    pub(crate) patch: Option<Vec<u8>>,
    pub(crate) slot: DeliverySlot,
}

/// Writes in the order the correlator made them (one mailbox hand-off per batch).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct WriteBatch(pub(crate) Vec<CorrelatedWrite>);

/// The end of a write, reported to the correlator: `stored` is what to learn on success
/// (`None` for a write given up, or superseded by a newer write of the same event: that
/// newer write, still counted in flight by the correlator, reports the server's state).
pub(crate) struct WriteDone {
    pub(crate) key: Key,
    pub(crate) stored: Option<Learned>,
    /// The event whose CREATE the server refused for good: the correlator forgets it, so
    /// that its next occurrence is a CREATE, never a PATCH of an event that does not exist.
    pub(crate) refused: Option<SharedCore>,
}

/// Most keys remembered as refused at once ([`SinkActor::refused_keys`]); when full they are
/// all forgotten (a write correlated before its event's refusal reached the correlator is
/// then sent, and refused again).
const MAX_REFUSED_KEYS: usize = 1024;

/// The event a stored write is learned back from (`Correlator::update_state_with`).
pub(crate) enum Learned {
    /// The server's copy, as the sink returned it.
    Returned(Box<Event>),
    /// The event as sent, for a sink that answered `Stored::AsSent`: shared with the write,
    /// not copied (copying the answer was 15% of `bench pipeline`'s instructions).
    Sent(SharedCore),
}

impl Learned {
    /// What a write of `sent` whose last request was `kind` stored, by the sink's answer. A
    /// sent event no longer needed (the server's copy is learnt from) goes to `pool`.
    fn of(kind: WriteKind, stored: Stored<Event>, sent: SharedCore, pool: &EventPool) -> Learned {
        let learned = match stored {
            Stored::Returned(e) => Learned::Returned(e),
            // A copy only for a CREATE whose event carried a resourceVersion.
            Stored::AsSent => match Stored::AsSent.event(&sent, kind) {
                Cow::Owned(e) => Learned::Returned(Box::new(e)),
                Cow::Borrowed(_) => return Learned::Sent(sent),
            },
        };
        pool.give(sent.into_record());
        learned
    }
}

impl std::ops::Deref for Learned {
    type Target = Event;

    fn deref(&self) -> &Event {
        match self {
            Learned::Returned(e) => e,
            Learned::Sent(e) => e,
        }
    }
}

/// Ends of writes, in the order they happened, collected over one handler call of the sink.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct WriteDoneBatch(pub(crate) Vec<WriteDone>);

/// Drop everything queued (counted as abandoned) and cancel writes in flight.
#[derive(Message)]
#[rtype(result = "u64")]
pub(crate) struct Abandon;

/// Replies once the sink holds no write (queued or in flight).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct WhenIdle;

/// A queued write: shared, so retries need no copy.
pub(crate) struct QueuedWrite {
    event: SharedCore,
    patch: Option<Arc<[u8]>>,
    /// CREATE whatever the count: a CREATE that absorbed newer results.
    create: bool,
    /// The count the event's previous write carried (its count minus the occurrences this
    /// write brings; a write that absorbed others keeps the oldest's): what a refusal of
    /// it loses is `count - base`, counts being absolute and a key's writes in order.
    base: i32,
}

impl QueuedWrite {
    /// Whether the write starts with a CREATE.
    fn is_create(&self) -> bool {
        self.create || self.event.count <= 1
    }

    /// A write of `event` (a CREATE, or the PATCH `patch`) as the correlator made it.
    fn new(event: SharedCore, patch: Option<Vec<u8>>) -> Self {
        let base = event.count.saturating_sub(1).max(0);
        QueuedWrite {
            event,
            patch: patch.map(Arc::from),
            create: false,
            base,
        }
    }

    /// The occurrences the server would lack if this write were refused for good.
    fn occurrences(&self) -> u64 {
        u64::try_from(self.event.count.max(1).saturating_sub(self.base)).unwrap_or(0)
    }
}

impl Scoped for QueuedWrite {
    /// EventRateLimit's `SourceAndObject` key: the source and the involved object.
    fn object_hash(&self) -> u64 {
        let e = &*self.event;
        let o = &e.involved_object;
        object_hash([
            e.source.component.as_str(),
            &e.source.host,
            &o.kind,
            &o.namespace,
            &o.name,
            &o.uid,
            &o.api_version,
        ])
    }
}

impl Coalesce for QueuedWrite {
    /// The newer result replaces this one: a PATCH is replaced by the newer PATCH (whose body
    /// the correlator computed for the newest state, as client-go would send it); a CREATE
    /// becomes a CREATE of the newer event (count, lastTimestamp, message), as client-go's
    /// re-create after 404.
    fn absorb(&mut self, newer: Self) -> Result<(), Self> {
        let create = self.is_create();
        *self = QueuedWrite {
            create: create || newer.create,
            base: self.base,
            ..newer
        };
        Ok(())
    }
}

/// The Sink actor.
pub(crate) struct SinkActor {
    sink: Arc<dyn EventSink>,
    rebuild: Option<SinkFactory>,
    retry: RetryPolicy,
    writer: KeyedWriter<QueuedWrite>,
    reply: Option<WeakRecipient<WriteDoneBatch>>,
    /// Ends of writes not yet reported (sent together at the end of each pump).
    done: Vec<WriteDone>,
    counters: Arc<SinkCounters>,
    /// Where the events its writes sent go back to once the server's copy is learnt from.
    pool: Arc<EventPool>,
    registry: Arc<Registry>,
    abandoned: bool,
    restarting: bool,
    /// Answered when the writer is empty ([`WhenIdle`]).
    idle_waiters: Vec<tokio::sync::oneshot::Sender<()>>,
    /// Events (keys) whose CREATE the server refused for good, with the refusal: a later
    /// write of one (a PATCH correlated before the correlator forgot the event) is dropped
    /// and its occurrences counted, not sent. At most [`MAX_REFUSED_KEYS`].
    refused_keys: FastMap<Key, Arc<WriteRefusal>>,
}

impl SinkActor {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        sink: Arc<dyn EventSink>,
        rebuild: Option<SinkFactory>,
        retry: RetryPolicy,
        max_in_flight: usize,
        coalesce: bool,
        budget: WriteBudget,
        reply: Option<WeakRecipient<WriteDoneBatch>>,
        counters: Arc<SinkCounters>,
        pool: Arc<EventPool>,
        registry: Arc<Registry>,
    ) -> Self {
        SinkActor {
            sink,
            rebuild,
            retry,
            writer: KeyedWriter::new(max_in_flight, coalesce, budget),
            reply,
            done: Vec::new(),
            counters,
            pool,
            registry,
            abandoned: false,
            restarting: false,
            idle_waiters: Vec::new(),
            refused_keys: FastMap::default(),
        }
    }

    /// Ends `key`'s head write and queues its report to the correlator.
    fn finish(&mut self, key: &Key, end: WriteEnd) {
        if self.writer.finish(key).is_some() {
            self.ended(key, end, None);
        }
    }

    /// Counts a write ended (taken off its queue) and queues its report to the correlator.
    fn ended(&mut self, key: &Key, end: WriteEnd, stored: Option<Learned>) {
        self.counters.write_ended(end);
        if self.reply.is_some() {
            self.done.push(WriteDone {
                key: Arc::clone(key),
                stored,
                refused: None,
            });
        }
    }

    /// `key`'s head write was answered `err`, which the chain does not retry: if the
    /// server refused it for good ([`WriteRefusal`]), counts the occurrences it lacks and
    /// ends the write (after a refused CREATE, with the writes queued behind it, and the
    /// correlator told to forget the event) and returns `true`.
    fn refused(&mut self, key: &Key, kind: WriteKind, err: &SinkError, quiet: bool) -> bool {
        let Some(job) = self.writer.head_mut(key) else {
            return false;
        };
        let create = kind != WriteKind::Patch;
        let Some(refusal) = WriteRefusal::of(
            err,
            Disposition::Drop { quiet },
            if create { "create" } else { "patch" },
            "core/v1",
            &job.write.event.metadata.namespace,
        ) else {
            return false;
        };
        let mut lost = 0;
        if create {
            // Nothing of the event exists: the writes behind the CREATE would PATCH nothing.
            for w in self.writer.drop_behind(key) {
                lost += w.occurrences();
                self.ended(key, WriteEnd::Rejected, None);
            }
        }
        if let Some(job) = self.writer.finish(key) {
            lost += job.write.occurrences();
            self.counters.write_ended(WriteEnd::Rejected);
            if self.reply.is_some() {
                self.done.push(WriteDone {
                    key: Arc::clone(key),
                    stored: None,
                    refused: create.then_some(job.write.event),
                });
            }
        }
        self.counters.not_stored(&refusal, lost);
        if create {
            if self.refused_keys.len() >= MAX_REFUSED_KEYS {
                self.refused_keys.clear();
            }
            self.refused_keys.insert(Arc::clone(key), Arc::new(refusal));
        }
        true
    }

    /// Records how the attempt of `key`'s head write ended on its span (`kevents.write`).
    fn traced(&mut self, key: &Key, status: &'static str) {
        if let Some(job) = self.writer.head_mut(key) {
            job.span.record("status", status);
        }
    }

    /// The sink is broken (a panic, a fatal error): restart it; the write is tried again
    /// unless it used up its attempts.
    fn restart(&mut self, key: &Key, attempts: u32, ctx: &mut Context<Self>) {
        if attempts >= self.retry.attempts() {
            self.finish(key, WriteEnd::RetryExhausted { log: false });
        }
        self.restarting = true;
        self.counters.restarted();
        ctx.stop();
    }
}

impl KeyedWrites for SinkActor {
    type Write = QueuedWrite;
    type Output = WriteOutcome;
    type Attempt = Instrumented<WriteEvent<Arc<dyn EventSink>, SharedCore>>;

    fn writer(&mut self) -> &mut KeyedWriter<QueuedWrite> {
        &mut self.writer
    }

    fn paused(&self) -> bool {
        self.restarting || self.abandoned
    }

    fn start(&mut self, key: &Key) -> Option<Self::Attempt> {
        let job = self.writer.head_mut(key)?;
        let w = &job.write;
        // Counted before the call: a sink that panics in it made an attempt too. The writer
        // engine counted this attempt in `job.attempts` already.
        self.counters.attempt(job.attempts);
        job.span = tracing::debug_span!(
            "kevents.write",
            sink = %self.counters.name(),
            event = %key,
            verb = if w.is_create() { "create" } else { "patch" },
            attempt = job.attempts,
            status = tracing::field::Empty,
        );
        let sink = Arc::clone(&self.sink);
        let event = w.event.clone();
        let attempt = if w.create {
            WriteEvent::create(sink, event)
        } else {
            WriteEvent::new(sink, event, w.patch.as_deref())
        };
        Some(attempt.instrument(job.span.clone()))
    }

    fn settle(
        &mut self,
        key: &Key,
        out: Result<WriteOutcome, Panicked>,
        ctx: &mut Context<Self>,
    ) -> Settle {
        if self.paused() {
            return Settle::Done;
        }
        let health = match &out {
            Ok(o) => Health::of(&o.result),
            Err(_) => Health::Failed,
        };
        let Some(attempts) = self.writer.observed(key, health) else {
            return Settle::Done;
        };
        let outcome = match out {
            Ok(o) => o,
            Err(Panicked(panic)) => {
                tracing::error!(sink = %self.counters.name(), event = %key, panic = %panic,
                    "event sink panicked; restarting it (queued writes are kept)");
                self.traced(key, "panicked");
                self.restart(key, attempts, ctx);
                return Settle::Done;
            }
        };
        let err = match outcome.result {
            Ok(stored) => {
                // One lookup: the job leaves its queue with its span and its event.
                if let Some(job) = self.writer.finish(key) {
                    job.span.record(
                        "status",
                        match outcome.kind {
                            WriteKind::Create => "created",
                            WriteKind::Patch => "patched",
                            WriteKind::Recreate => "recreated",
                        },
                    );
                    let learned = Learned::of(outcome.kind, stored, job.write.event, &self.pool);
                    self.ended(key, WriteEnd::Stored(outcome.kind), Some(learned));
                }
                return Settle::Done;
            }
            Err(err) => err,
        };
        let counters = Arc::clone(&self.counters);
        let name = counters.name();
        if self.retry.fatal.as_ref().is_some_and(|f| f(&err)) {
            tracing::error!(sink = %name, event = %key, error = %err,
                "fatal sink error; restarting the sink (queued writes are kept)");
            self.traced(key, "fatal");
            self.restart(key, attempts, ctx);
            return Settle::Done;
        }
        match self.retry.classifier.classify(&err) {
            Disposition::Retry if attempts < self.retry.attempts() => {
                let d = self
                    .retry
                    .delay(attempts + 1, Some(&err), self.writer.paced());
                tracing::debug!(sink = %name, event = %key, error = %err, attempt = attempts,
                    "unable to write event (may retry after sleeping)");
                if let Some(job) = self.writer.head_mut(key) {
                    job.span.record("status", "retry");
                    job.delay = (!d.is_zero()).then_some(d);
                }
                Settle::Again
            }
            Disposition::Retry => {
                tracing::warn!(sink = %name, event = %key, error = %err, attempts,
                    "unable to write event (retry limit exceeded)");
                self.traced(key, "retry_exhausted");
                self.finish(key, WriteEnd::RetryExhausted { log: true });
                Settle::Done
            }
            Disposition::Drop { quiet } => {
                if quiet {
                    tracing::debug!(sink = %name, event = %key, error = %err,
                        "server rejected event (will not retry)");
                } else {
                    tracing::warn!(sink = %name, event = %key, error = %err,
                        "server rejected event (will not retry)");
                }
                self.traced(key, "rejected");
                if !self.refused(key, outcome.kind, &err, quiet) {
                    self.finish(key, WriteEnd::Rejected);
                }
                Settle::Done
            }
        }
    }

    /// Publishes the gauges and reports the ends of writes to the correlator (once per
    /// handler call rather than once per write).
    fn pumped(&mut self, _: &mut Context<Self>) {
        self.counters.gauges(self.writer.in_flight());
        if self.writer.len() == 0 {
            for w in self.idle_waiters.drain(..) {
                let _ = w.send(());
            }
        }
        if self.done.is_empty() {
            return;
        }
        let done = std::mem::take(&mut self.done);
        if let Some(reply) = self.reply.as_ref().and_then(|r| r.upgrade()) {
            reply.do_send(WriteDoneBatch(done));
        }
    }
}

impl Actor for SinkActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.registry.actor_started();
        pump(self, ctx);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.registry.actor_stopped();
    }
}

impl Supervised for SinkActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        // Spawned attempts were discarded with the old context: every write in flight goes
        // back to the front, in its key's order, and is tried again.
        self.restarting = false;
        self.writer.requeue_in_flight();
        if let Some(f) = &self.rebuild {
            self.sink = f();
        }
        if self.abandoned {
            self.writer.clear();
        }
    }
}

impl Handler<WriteBatch> for SinkActor {
    type Result = ();

    fn handle(&mut self, batch: WriteBatch, ctx: &mut Context<Self>) {
        if self.abandoned {
            self.counters.abandoned_late(batch.0.len() as u64);
            return;
        }
        if self.reply.is_some() {
            self.done.reserve(batch.0.len());
        }
        self.counters.queued(batch.0.len() as u64);
        for w in batch.0 {
            let queued = QueuedWrite::new(w.event, w.patch);
            if let Some(refusal) = (!self.refused_keys.is_empty())
                .then(|| self.refused_keys.get(&w.key))
                .flatten()
            {
                // Its CREATE was refused: the server has no event to PATCH.
                self.counters.not_stored(refusal, queued.occurrences());
                self.counters.write_ended(WriteEnd::Rejected);
                if self.reply.is_some() {
                    self.done.push(WriteDone {
                        key: w.key,
                        stored: None,
                        refused: None,
                    });
                }
                continue;
            }
            if self.writer.push(Arc::clone(&w.key), queued, Some(w.slot)) {
                // The older write's occurrences are in the newer one's count.
                self.counters.write_ended(WriteEnd::Superseded);
                if self.reply.is_some() {
                    self.done.push(WriteDone {
                        key: w.key,
                        stored: None,
                        refused: None,
                    });
                }
            }
        }
        pump(self, ctx);
    }
}

impl Handler<WhenIdle> for SinkActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: WhenIdle, _: &mut Context<Self>) -> Self::Result {
        if self.writer.len() == 0 || self.abandoned {
            return Box::pin(async {});
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.idle_waiters.push(tx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

impl Handler<Abandon> for SinkActor {
    type Result = u64;

    fn handle(&mut self, _: Abandon, ctx: &mut Context<Self>) -> u64 {
        self.abandoned = true;
        let n = self.writer.clear();
        self.counters.abandoned_queued(n);
        self.counters.gauges(0);
        // Stopping drops the writes in flight; the supervisor restarts an empty actor that
        // ends once its last address is gone.
        ctx.stop();
        n
    }
}
