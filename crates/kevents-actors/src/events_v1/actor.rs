//! The series actor: owns the series cache, its timers and the writes.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures_util::future::BoxFuture;
use kevents_core::events_v1::{SeriesCache, Step, Write, WriteReason, write_once};
use kevents_core::{SharedClock, SinkError, Time, WriteKind};
use tokio::sync::oneshot;
use tracing::Instrument;

use crate::budget::{Health, Scoped, WriteBudget, object_hash};
use crate::message::{DeliverySlot, EventMessage, Recorded, v1_repeat};
use crate::policy::RetryPolicy;
use crate::registry::Registry;
use crate::telemetry::{SeriesCounters, SeriesWriteEnd, WriteRefusal};
use crate::writer::{Coalesce, Key, KeyedWriter, KeyedWrites, Panicked, Settle, pump};

/// Shortest time between two walks of the cache summing the occurrences the server lacks
/// ([`events_v1::SinkSnapshot::unwritten`](crate::events_v1::SinkSnapshot::unwritten)) after writes ended.
const UNWRITTEN_EVERY: Duration = Duration::from_millis(20);

/// Shortest sleep of the timer.
const MIN_TICK: Duration = Duration::from_millis(100);

/// Write the latest count of every open series, reply when every write has ended.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct FlushSeries;

/// Write the latest count of every open series the server lacks now, keeping the series
/// open (a best-effort flush when the pipeline is dropped without a shutdown).
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct RefreshSeries;

/// Stop the chain; replies with the number of writes abandoned.
#[derive(Message)]
#[rtype(result = "u64")]
pub(crate) struct StopSeries;

impl Scoped for Write {
    fn object_hash(&self) -> u64 {
        let e = self.event();
        let r = &e.regarding;
        object_hash([
            e.reporting_controller.as_str(),
            &e.reporting_instance,
            &r.kind,
            &r.namespace,
            &r.name,
            &r.uid,
            &r.api_version,
        ])
    }
}

impl Coalesce for Write {
    /// A newer write of the same event replaces this one (not started): a CREATE absorbs a
    /// series PATCH as the CREATE of the event with its newest series (client-go's re-create
    /// after 404); a PATCH is replaced by the newer PATCH. The write keeps a reason that is
    /// retried if either had one (heartbeats and finishes are tried once). A newer CREATE is
    /// queued behind.
    fn absorb(&mut self, newer: Self) -> Result<(), Self> {
        if newer.is_create() {
            return Err(newer);
        }
        let older = self.reason();
        let reason = if newer.reason().single_attempt() && !older.single_attempt() {
            older
        } else {
            newer.reason()
        };
        *self = match (self.is_create(), newer) {
            (true, newer) => match newer.recreate() {
                Write::Create { event, .. } => Write::Create { event, reason },
                other => other,
            },
            (false, Write::Patch { event, patch, .. }) => Write::Patch {
                event,
                patch,
                reason,
            },
            (false, other) => other,
        };
        Ok(())
    }
}

/// The series sink actor.
pub(crate) struct SeriesActor {
    cache: SeriesCache,
    sink: Arc<dyn kevents_core::events_v1::EventSink>,
    retry: RetryPolicy,
    clock: SharedClock,
    max_tick: Duration,
    writer: KeyedWriter<Write>,
    timer: Option<(Time, SpawnHandle)>,
    /// Live counts: the interval, and when the next series whose count grew is due.
    freshness: Option<Duration>,
    fresh_due: Option<Time>,
    /// A write ended or a series was evicted since `unwritten` was last summed; when
    /// that was.
    unwritten_changed: bool,
    unwritten_at: std::time::Instant,
    waiters: Vec<oneshot::Sender<()>>,
    /// Occurrences of open series the server is not known to have (a gauge, published by
    /// [`SeriesActor::export`]).
    unwritten: u64,
    /// The chain's counters: typed events, counted when they happen.
    counters: Arc<SeriesCounters>,
    registry: Arc<Registry>,
    /// The sink panicked: the actor stops and its supervisor restarts it (with its cache and
    /// its queue); nothing starts meanwhile.
    restarting: bool,
    /// Stopped for good (`StopSeries`): a restart keeps nothing.
    abandoned: bool,
}

impl SeriesActor {
    pub(crate) fn new(
        sink: Arc<dyn kevents_core::events_v1::EventSink>,
        options: crate::events_v1::SinkOptions,
        budget: WriteBudget,
        clock: SharedClock,
        counters: Arc<SeriesCounters>,
        registry: Arc<Registry>,
    ) -> Self {
        SeriesActor {
            cache: SeriesCache::new(options.series),
            sink,
            retry: options.retry,
            clock: options.clock.unwrap_or(clock),
            max_tick: options.max_tick.max(Duration::from_millis(1)),
            writer: KeyedWriter::new(options.max_in_flight, options.coalesce, budget),
            timer: None,
            freshness: options.freshness.filter(|d| !d.is_zero()),
            fresh_due: None,
            unwritten_changed: false,
            unwritten_at: std::time::Instant::now(),
            waiters: Vec::new(),
            unwritten: 0,
            counters,
            registry,
            restarting: false,
            abandoned: false,
        }
    }

    /// The sink panicked: stop, so that the supervisor restarts the actor, which keeps its
    /// series cache and its queue (the write the panic interrupted is tried again first), as
    /// a core/v1 sink actor does.
    fn restart(&mut self, ctx: &mut Context<Self>) {
        self.counters.restarted();
        self.restarting = true;
        self.export();
        ctx.stop();
    }

    fn enqueue(&mut self, write: Write, slot: Option<DeliverySlot>) {
        let e = write.event();
        let mut key = String::with_capacity(e.metadata.namespace.len() + 1 + e.metadata.name.len());
        key.push_str(&e.metadata.namespace);
        key.push('/');
        key.push_str(&e.metadata.name);
        if self.writer.push(Arc::from(key), write, slot) {
            self.counters.write_ended(SeriesWriteEnd::Superseded);
        }
    }

    /// Observes one occurrence; its writes are queued (the first takes `slot`).
    fn observe(&mut self, event: kevents_core::events_v1::Event, slot: &mut Option<DeliverySlot>) {
        let now = event.event_time.unwrap_or_else(|| self.clock.now());
        let observed = self.cache.observe(event, now);
        if observed.write.is_none() {
            // Counted in memory (one more occurrence the server lacks): written again within
            // `freshness` at the latest.
            self.unwritten += 1;
            self.stale_at(now);
        }
        if observed.evicted.is_some() {
            self.unwritten_changed = true;
        }
        for w in observed {
            self.enqueue(w, slot.take());
        }
    }

    /// Some series' count the server lacks since `at`: make sure a refresh runs by
    /// `at + freshness`.
    fn stale_at(&mut self, at: Time) {
        if let Some(every) = self.freshness {
            let due = at.saturating_add(every);
            self.fresh_due = Some(self.fresh_due.map_or(due, |d| d.min(due)));
        }
    }

    /// Makes sure the timer wakes up no later than the cache's next deadline (and at most
    /// `max_tick` from now).
    fn arm(&mut self, ctx: &mut Context<Self>) {
        let deadline = match (self.cache.next_deadline(), self.fresh_due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let Some(deadline) = deadline else {
            if let Some((_, h)) = self.timer.take() {
                ctx.cancel_future(h);
            }
            return;
        };
        let now = self.clock.now();
        // At least MIN_TICK: progress even if a deadline in the past has nothing to do.
        let wait = u64::try_from(deadline.nanos_since(now))
            .map(Duration::from_nanos)
            .unwrap_or(Duration::ZERO)
            .clamp(MIN_TICK, self.max_tick.max(MIN_TICK));
        let fire_at = now.saturating_add(wait);
        if let Some((at, h)) = &self.timer {
            if *at <= fire_at {
                return;
            }
            ctx.cancel_future(*h);
        }
        let h = ctx.run_later(wait, |act, ctx| {
            act.timer = None;
            act.on_tick(ctx);
        });
        self.timer = Some((fire_at, h));
    }

    fn on_tick(&mut self, ctx: &mut Context<Self>) {
        let now = self.clock.now();
        for w in self.cache.tick(now) {
            self.enqueue(w, None);
        }
        if let Some(every) = self.freshness
            && self.fresh_due.is_some_and(|d| d <= now)
        {
            let refreshed = self.cache.refresh(now, every);
            self.fresh_due = refreshed.next;
            self.counters.refreshed(refreshed.writes.len() as u64);
            for w in refreshed.writes {
                self.enqueue(w, None);
            }
        }
        self.refresh_unwritten();
        pump(self, ctx);
    }

    fn refresh_unwritten(&mut self) {
        self.unwritten = self.cache.unwritten();
        self.unwritten_changed = false;
        self.unwritten_at = std::time::Instant::now();
    }

    /// The server refused `sent`, `key`'s head write, for good: the occurrences it lacks
    /// are counted as not stored under `refusal`. After a refused CREATE nothing of the
    /// event exists, so the writes queued behind it (its series' PATCHes) are dropped
    /// (counted as rejected) and the cache forgets it: the next occurrence starts again
    /// with a CREATE.
    fn refused(&mut self, key: &Key, sent: &Write, refusal: &WriteRefusal) {
        let mut newest = 0;
        if sent.is_create() {
            for w in self.writer.drop_behind(key) {
                newest = newest.max(w.event().series.map_or(1, |s| s.count));
                self.counters.write_ended(SeriesWriteEnd::Rejected);
            }
        }
        let lost = self.cache.refused(sent, newest);
        self.counters.not_stored(refusal, lost);
    }

    fn export(&mut self) {
        self.counters.cache(&self.cache.stats());
        // Occurrences counted in memory are added as they come; what a write's end changes
        // (a failure makes a series' count unknown) needs a walk of the cache: at most every
        // UNWRITTEN_EVERY (and on every timer tick).
        if self.unwritten_changed && self.unwritten_at.elapsed() >= UNWRITTEN_EVERY {
            self.refresh_unwritten();
        }
        self.counters.gauges(self.writer.len(), self.unwritten);
    }
}

impl KeyedWrites for SeriesActor {
    type Write = Write;
    type Output = kevents_core::events_v1::WriteOutcome;
    type Attempt = BoxFuture<'static, kevents_core::events_v1::WriteOutcome>;

    fn writer(&mut self) -> &mut KeyedWriter<Write> {
        &mut self.writer
    }

    fn paused(&self) -> bool {
        self.restarting || self.abandoned
    }

    fn start(&mut self, key: &Key) -> Option<Self::Attempt> {
        let job = self.writer.head_mut(key)?;
        let write = job.write.clone();
        self.counters.attempt();
        job.span = tracing::debug_span!(
            "kevents.write",
            sink = %self.counters.name(),
            event = %key,
            verb = if write.is_create() { "create" } else { "patch" },
            reason = write.reason().as_str(),
            attempt = job.attempts,
            status = tracing::field::Empty,
        );
        let sink = Arc::clone(&self.sink);
        Some(Box::pin(
            async move { write_once(&*sink, write).await }.instrument(job.span.clone()),
        ))
    }

    fn settle(
        &mut self,
        key: &Key,
        out: Result<kevents_core::events_v1::WriteOutcome, Panicked>,
        ctx: &mut Context<Self>,
    ) -> Settle {
        if self.paused() {
            return Settle::Done;
        }
        let health = match &out {
            Ok(o) => Health::of(&o.result),
            Err(_) => Health::Failed,
        };
        let Some(attempt) = self.writer.observed(key, health) else {
            return Settle::Done;
        };
        let paced = self.writer.paced();
        let Some(job) = self.writer.head_mut(key) else {
            return Settle::Done;
        };
        // A panic is a failed attempt (the cache learns the series' count is unknown to the
        // server), then a restart of the actor that keeps its queue.
        let panicked = out.is_err();
        let out = out.unwrap_or_else(|Panicked(panic)| {
            tracing::error!(sink = %self.counters.name(), event = %key, panic = %panic,
                "events.k8s.io/v1 sink panicked; restarting it (queued writes are kept)");
            kevents_core::events_v1::WriteOutcome {
                sent: job.write.clone(),
                result: Err(SinkError::Transport(
                    "the events.k8s.io/v1 sink panicked".into(),
                )),
                recreated: false,
                step: Step::Retry,
            }
        });
        let step = self.cache.on_write_result(&out.sent, &out.result);
        let reason = out.sent.reason();
        let mut stale = false;
        let mut refused = None;
        let c = Arc::clone(&self.counters);
        let status = match step {
            Step::Stored => {
                let (kind, status) = if out.recreated {
                    (WriteKind::Recreate, "recreated")
                } else if out.sent.is_create() {
                    (WriteKind::Create, "created")
                } else {
                    (WriteKind::Patch, "patched")
                };
                let flush = reason == WriteReason::Flush;
                c.write_ended(SeriesWriteEnd::Stored { kind, flush });
                status
            }
            Step::Retry if attempt < self.retry.attempts() => {
                let delay = self
                    .retry
                    .delay(attempt + 1, out.result.as_ref().err(), paced);
                tracing::debug!(
                    event = %key, attempt, ?delay, reason = reason.as_str(),
                    error = ?out.result.as_ref().err(),
                    "events.k8s.io/v1 write failed; retrying"
                );
                job.write = out.sent.retry();
                if panicked {
                    // Tried again first once the actor has restarted.
                    job.span.record("status", "panicked");
                    self.restart(ctx);
                    return Settle::Done;
                }
                job.span.record("status", "retry");
                job.delay = (!delay.is_zero()).then_some(delay);
                return Settle::Again;
            }
            Step::Retry => {
                c.write_ended(SeriesWriteEnd::RetryExhausted);
                // Its count is unknown to the server now: the next refresh writes it again.
                stale = true;
                tracing::warn!(
                    event = %key, attempts = attempt, reason = reason.as_str(),
                    error = ?out.result.as_ref().err(),
                    "events.k8s.io/v1 write given up after the retry budget"
                );
                "retry_exhausted"
            }
            Step::Rescheduled => {
                c.write_ended(SeriesWriteEnd::Rescheduled);
                stale = true;
                "rescheduled"
            }
            Step::Recreate | Step::Dropped { .. } => {
                c.write_ended(SeriesWriteEnd::Rejected);
                if let (Step::Dropped { quiet }, Err(err)) = (step, &out.result) {
                    refused = WriteRefusal::of(
                        err,
                        kevents_core::Disposition::Drop { quiet },
                        if out.sent.is_create() {
                            "create"
                        } else {
                            "patch"
                        },
                        "events.k8s.io/v1",
                        &out.sent.event().metadata.namespace,
                    );
                }
                if step != (Step::Dropped { quiet: true }) {
                    tracing::warn!(
                        event = %key, reason = reason.as_str(),
                        error = ?out.result.as_ref().err(),
                        "events.k8s.io/v1 write rejected"
                    );
                }
                "rejected"
            }
        };
        job.span.record("status", status);
        if let Some(refusal) = refused {
            self.refused(key, &out.sent, &refusal);
        }
        self.writer.finish(key);
        if stale {
            let now = self.clock.now();
            self.stale_at(now);
        }
        self.unwritten_changed = true;
        if panicked {
            self.restart(ctx);
        }
        Settle::Done
    }

    fn pumped(&mut self, ctx: &mut Context<Self>) {
        self.arm(ctx);
        self.export();
        if self.writer.is_idle() {
            for w in self.waiters.drain(..) {
                let _ = w.send(());
            }
        }
    }
}

impl Actor for SeriesActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.registry.actor_started();
        // After a restart: the writes kept, and the timers, start again.
        if !self.abandoned {
            pump(self, ctx);
        }
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.registry.actor_stopped();
    }
}

impl Supervised for SeriesActor {
    fn restarting(&mut self, _: &mut Context<Self>) {
        // Spawned attempts and timers were discarded with the old context: every write in
        // flight goes back to the front, in its key's order, and is tried again; the timer is
        // armed again when the actor starts.
        self.restarting = false;
        self.timer = None;
        self.writer.requeue_in_flight();
        if self.abandoned {
            self.writer.clear();
        }
    }
}

impl Handler<EventMessage> for SeriesActor {
    type Result = ();

    fn handle(&mut self, msg: EventMessage, ctx: &mut Context<Self>) {
        if self.abandoned {
            return;
        }
        let repeats = msg.repeats();
        let (record, slot) = msg.into_parts();
        let mut slot = Some(slot);
        match repeats {
            None => {
                let event = match Arc::try_unwrap(record) {
                    Ok(Recorded::EventsV1(e)) => e,
                    Ok(_) => return,
                    Err(shared) => match shared.events_v1() {
                        Some(e) => e.clone(),
                        None => return,
                    },
                };
                self.observe(event, &mut slot);
            }
            // Repeats merged by a coalescing queue: observed one by one, as the recorder
            // would have built them (at the newest repeat's instant), so the series counts
            // every occurrence.
            Some(r) => {
                let Some(first) = record.events_v1() else {
                    return;
                };
                self.observe(first.clone(), &mut slot);
                let repeat = v1_repeat(first, r.last);
                for _ in 0..r.more {
                    self.observe(repeat.clone(), &mut slot);
                }
            }
        }
        drop(slot);
        pump(self, ctx);
    }
}

impl Handler<FlushSeries> for SeriesActor {
    type Result = ResponseFuture<()>;

    fn handle(&mut self, _: FlushSeries, ctx: &mut Context<Self>) -> Self::Result {
        if self.abandoned {
            return Box::pin(async {});
        }
        for w in self.cache.flush() {
            self.enqueue(w, None);
        }
        // Every series is forgotten: their counts are in the queued writes now.
        self.refresh_unwritten();
        pump(self, ctx);
        if self.writer.is_idle() {
            return Box::pin(async {});
        }
        let (tx, rx) = oneshot::channel();
        self.waiters.push(tx);
        Box::pin(async move {
            let _ = rx.await;
        })
    }
}

impl Handler<RefreshSeries> for SeriesActor {
    type Result = ();

    fn handle(&mut self, _: RefreshSeries, ctx: &mut Context<Self>) {
        if self.abandoned {
            return;
        }
        let refreshed = self.cache.refresh(self.clock.now(), Duration::ZERO);
        self.counters.refreshed(refreshed.writes.len() as u64);
        for w in refreshed.writes {
            self.enqueue(w, None);
        }
        self.refresh_unwritten();
        pump(self, ctx);
    }
}

impl Handler<StopSeries> for SeriesActor {
    type Result = u64;

    fn handle(&mut self, _: StopSeries, ctx: &mut Context<Self>) -> u64 {
        if self.abandoned {
            return 0;
        }
        self.abandoned = true;
        let abandoned = self.writer.clear();
        self.counters.abandoned(abandoned);
        self.refresh_unwritten();
        self.export();
        ctx.stop();
        abandoned
    }
}
