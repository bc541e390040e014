//! Event series as client-go 1.27+ `tools/events` builds them (`recordToSink`,
//! `refreshExistingEventSeries`, `finishSeries`), as a pure, bounded state machine: the caller
//! passes the time in and performs the writes it returns.
//!
//! * first occurrence of an isomorphic event → [`Write::Create`];
//! * second → [`Write::Patch`] starting the series with `count: 2` (body
//!   `{"series":{"count":2,"lastObservedTime":...}}`, as client-go's);
//! * later repeats → counted in memory, nothing written;
//! * [`SeriesCache::tick`]: a heartbeat PATCH for every open series whose last write is
//!   30 min old, a final PATCH for every series idle for more than 6 min (then forgotten),
//!   singletons idle for more than 6 min forgotten without a write;
//! * [`SeriesCache::flush`]: the latest count of every open series, for graceful shutdown;
//! * a cap on tracked entries: the least recently observed singleton is forgotten first,
//!   else the least recently observed series is finished early (its final PATCH returned, so
//!   no count is lost).

use std::hash::BuildHasher;
use std::time::Duration;

use foldhash::fast::RandomState;
use lru::LruCache;

// Live counts: `SeriesCache::refresh` and `unwritten` (re-exported by the parent).
pub(super) mod fresh;

use super::model::{Event, EventSeries, series_patch};
use super::series_key::{KeyView, PackedKey, Probe};
use crate::status::{Disposition, SinkError};
use crate::stored::Stored;
use crate::time::Time;

/// client-go's `refreshTime`: heartbeat period of an open series
/// (`tools/events/event_broadcaster.go`).
pub const HEARTBEAT: Duration = Duration::from_secs(30 * 60);
/// client-go's `finishTime`: idle time after which a series is finished
/// (`tools/events/event_broadcaster.go`).
pub const FINISH_AFTER: Duration = Duration::from_secs(6 * 60);
/// Default cap on tracked entries (singletons plus series).
pub const DEFAULT_MAX_ENTRIES: usize = 16_384;

/// Tuning of a [`SeriesCache`].
///
/// ```
/// use kevents_core::events_v1::SeriesOptions;
/// let o = SeriesOptions { max_entries: 100, ..Default::default() };
/// assert!(!o.note_in_identity);
/// assert_eq!(o.heartbeat.as_secs(), 1800);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesOptions {
    /// Most entries tracked at once (at least 1). See the module docs for the eviction rule.
    pub max_entries: usize,
    /// Heartbeat period of an open series (30 min).
    pub heartbeat: Duration,
    /// A series or singleton idle for longer than this is finished/forgotten (6 min).
    pub finish_after: Duration,
    /// Make the note part of the isomorphism key, so a different note starts a new event
    /// instead of being merged into (and lost in) the first one. Off by default, as client-go.
    pub note_in_identity: bool,
    /// Send the final PATCH of an idle series even when the server already has its count,
    /// as client-go's `finishSeries` does. Off by default: kevents skips that write, which
    /// changes nothing stored (docs/compatibility.md); `kevents replay --api
    /// events.k8s.io/v1` turns it on to make client-go's calls.
    pub rewrite_on_finish: bool,
}

impl Default for SeriesOptions {
    fn default() -> Self {
        SeriesOptions {
            max_entries: DEFAULT_MAX_ENTRIES,
            heartbeat: HEARTBEAT,
            finish_after: FINISH_AFTER,
            note_in_identity: false,
            rewrite_on_finish: false,
        }
    }
}

/// Why a write was produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WriteReason {
    /// First occurrence: CREATE.
    First,
    /// Second occurrence: PATCH starting the series with count 2.
    SeriesStart,
    /// Periodic PATCH of an open series (every 30 min).
    Heartbeat,
    /// Final PATCH of a series idle for 6 min.
    Finish,
    /// Final PATCH of a series evicted because the cache was full.
    Evicted,
    /// PATCH of an open series on graceful shutdown.
    Flush,
    /// PATCH of an open series whose count grew since its last write, at most once per
    /// freshness interval ([`SeriesCache::refresh`]; kevents' live counts, not client-go's).
    Refresh,
}

impl WriteReason {
    /// `first`, `series_start`, `heartbeat`, `finish`, `evicted`, `flush` or `refresh`
    /// (metric label).
    pub const fn as_str(self) -> &'static str {
        match self {
            WriteReason::First => "first",
            WriteReason::SeriesStart => "series_start",
            WriteReason::Heartbeat => "heartbeat",
            WriteReason::Finish => "finish",
            WriteReason::Evicted => "evicted",
            WriteReason::Flush => "flush",
            WriteReason::Refresh => "refresh",
        }
    }

    /// Whether client-go makes a single attempt for this write (heartbeat and finish,
    /// `refreshExistingEventSeries` and `finishSeries`):
    /// a failure is not retried with back-off; the cache schedules it again instead.
    ///
    /// ```
    /// use kevents_core::events_v1::WriteReason;
    /// assert!(WriteReason::Heartbeat.single_attempt());
    /// assert!(!WriteReason::SeriesStart.single_attempt());
    /// ```
    pub const fn single_attempt(self) -> bool {
        matches!(self, WriteReason::Heartbeat | WriteReason::Finish)
    }
}

/// A request the caller must send to `/apis/events.k8s.io/v1/namespaces/{ns}/events`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// `POST` of `event` (a series event only after a PATCH answered 404, see
    /// [`Write::recreate`]).
    Create {
        /// The full event.
        event: Event,
        /// Why.
        reason: WriteReason,
    },
    /// `PATCH .../events/{event.name}` with the strategic-merge `patch` client-go's
    /// `recordEvent` sends for a series.
    Patch {
        /// The full event with its current series (sent in full if the PATCH finds nothing).
        event: Event,
        /// `{"series":{"count":N,"lastObservedTime":"..."}}`.
        patch: Vec<u8>,
        /// Why.
        reason: WriteReason,
    },
}

impl Write {
    fn series(event: Event, reason: WriteReason) -> Write {
        let patch = event.series.as_ref().map(series_patch).unwrap_or_default();
        Write::Patch {
            event,
            patch,
            reason,
        }
    }

    /// The event concerned.
    pub fn event(&self) -> &Event {
        match self {
            Write::Create { event, .. } | Write::Patch { event, .. } => event,
        }
    }

    /// Why the write was produced.
    pub fn reason(&self) -> WriteReason {
        match self {
            Write::Create { reason, .. } | Write::Patch { reason, .. } => *reason,
        }
    }

    /// The patch body, for a PATCH.
    pub fn patch(&self) -> Option<&[u8]> {
        match self {
            Write::Create { .. } => None,
            Write::Patch { patch, .. } => Some(patch),
        }
    }

    /// Whether this is a `POST`.
    pub fn is_create(&self) -> bool {
        matches!(self, Write::Create { .. })
    }

    /// The CREATE client-go sends when a series PATCH answered 404 (`tools/events`
    /// `recordEvent`): the full event with its series and an empty resourceVersion, same name.
    ///
    /// ```
    /// use kevents_core::events_v1::{Event, EventSeries, Write, WriteReason};
    /// use kevents_core::Time;
    /// let mut e = Event::default();
    /// e.series = Some(EventSeries::new(2, Time::UNIX_EPOCH));
    /// let w = Write::Patch { event: e, patch: b"{}".to_vec(), reason: WriteReason::SeriesStart };
    /// let c = w.recreate();
    /// assert!(c.is_create() && c.event().series.is_some());
    /// ```
    pub fn recreate(self) -> Write {
        let reason = self.reason();
        let mut event = self.into_event();
        event.metadata.resource_version.clear();
        Write::Create { event, reason }
    }

    /// The write to repeat after [`Step::Retry`]: an event with a series is always written
    /// PATCH first (client-go's `recordEvent`), so a CREATE of a series event that met
    /// AlreadyExists becomes its PATCH again; anything else is repeated as is.
    ///
    /// ```
    /// use kevents_core::events_v1::{Event, EventSeries, Write, WriteReason};
    /// use kevents_core::Time;
    /// let mut e = Event::default();
    /// e.series = Some(EventSeries::new(3, Time::UNIX_EPOCH));
    /// let w = Write::Create { event: e, reason: WriteReason::Heartbeat }.retry();
    /// assert!(w.patch().unwrap().starts_with(br#"{"series":{"count":3"#));
    /// ```
    pub fn retry(self) -> Write {
        match self {
            Write::Create { event, reason } if event.series.is_some() => {
                Write::series(event, reason)
            }
            other => other,
        }
    }

    /// The event, consuming the write.
    pub fn into_event(self) -> Event {
        match self {
            Write::Create { event, .. } | Write::Patch { event, .. } => event,
        }
    }
}

/// What the caller does next after a write's result (client-go `recordEvent` and
/// `attemptRecording` semantics, 1.27+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Stored; done.
    Stored,
    /// The PATCH answered 404 (the event expired or was deleted): send
    /// [`Write::recreate`] now, as part of the same attempt.
    Recreate,
    /// Retryable failure (transport, timeout, 429/5xx, or AlreadyExists on a series CREATE
    /// that raced with its own PATCH): send [`Write::retry`] after a back-off, unless the
    /// attempt budget is exhausted.
    Retry,
    /// A single-attempt write (heartbeat, finish) failed retryably; the cache keeps the
    /// series and writes it again on a later tick. Do not retry.
    Rescheduled,
    /// Permanent failure (or AlreadyExists of a singleton, `quiet`): drop it.
    Dropped {
        /// An expected outcome, log at debug level only.
        quiet: bool,
    },
}

/// Classifies one request's result, without any cache (client-go's `tools/events`
/// `recordEvent` plus kevents' retry of 429/5xx, [`SinkError::disposition`]). Only the error
/// matters: any success (a sink's [`Stored`] answer) is [`Step::Stored`].
///
/// ```
/// use kevents_core::events_v1::{classify, Event, Step, Write, WriteReason};
/// use kevents_core::{SinkError, Status};
/// let w = Write::Create { event: Event::default(), reason: WriteReason::First };
/// let dup = SinkError::Status(Box::new(Status::failure(409, "AlreadyExists", "dup")));
/// assert_eq!(classify(&w, &Err(dup)), Step::Dropped { quiet: true });
/// assert_eq!(classify(&w, &Ok(kevents_core::Stored::AsSent)), Step::Stored);
/// ```
pub fn classify(sent: &Write, result: &Result<Stored<Event>, SinkError>) -> Step {
    match result {
        Ok(_) => Step::Stored,
        Err(e) if e.is_not_found() && !sent.is_create() => Step::Recreate,
        Err(e) if e.is_already_exists() && sent.event().series.is_some() => Step::Retry,
        Err(e) => match e.disposition() {
            Disposition::Retry => Step::Retry,
            Disposition::Drop { quiet } => Step::Dropped { quiet },
        },
    }
}

/// Counters of a [`SeriesCache`] (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeriesStats {
    /// Occurrences observed.
    pub observed: u64,
    /// CREATEs returned (first occurrences).
    pub creates: u64,
    /// Series started (PATCH with count 2).
    pub series_started: u64,
    /// Repeats counted in memory without a write.
    pub counted_in_memory: u64,
    /// Heartbeat PATCHes returned.
    pub heartbeats: u64,
    /// Series finished after being idle (final PATCH returned, or not needed).
    pub finished: u64,
    /// Singletons forgotten after being idle.
    pub singletons_forgotten: u64,
    /// Singletons evicted because the cache was full.
    pub evicted_singletons: u64,
    /// Series evicted (finished early) because the cache was full.
    pub evicted_series: u64,
    /// Series written by [`SeriesCache::flush`].
    pub flushed: u64,
    /// Failed finishes kept for the next tick.
    pub rescheduled: u64,
    /// Write results reported as failures.
    pub write_failures: u64,
    /// Entries tracked now.
    pub entries: usize,
    /// Open series tracked now.
    pub open_series: usize,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Occurrences including the first.
    count: i32,
    /// The latest occurrence (eventTime for a singleton).
    last_observed: Time,
    /// When the series was last written (start, heartbeat).
    last_written: Time,
    /// The count the server is believed to have (0: unknown / last write failed).
    synced: i32,
    /// 32 bits of the hash of the event's name: tells a write result of this event from
    /// one of an earlier event with the same key without reading the key, which would
    /// promote it in the LRU (whose order [`SeriesCache::finish_idle`] relies on being
    /// the order of last occurrences).
    name: u32,
    /// The highest count the server is known to have stored, or that was counted as not
    /// stored after a refusal ([`SeriesCache::refused`]): what a refusal of a higher count
    /// loses is the difference, so no occurrence is counted twice.
    accounted: i32,
}

/// The result of [`SeriesCache::observe`]: the write for this occurrence, and the final
/// PATCH of a series evicted to make room. Send both (the order does not matter).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observed {
    /// CREATE (first occurrence), PATCH (series start) or nothing (counted in memory).
    pub write: Option<Write>,
    /// Final PATCH of a series evicted because the cache was full.
    pub evicted: Option<Write>,
}

impl IntoIterator for Observed {
    type Item = Write;
    type IntoIter = std::iter::Flatten<std::array::IntoIter<Option<Write>, 2>>;
    fn into_iter(self) -> Self::IntoIter {
        [self.write, self.evicted].into_iter().flatten()
    }
}

/// client-go 1.27+'s event series cache, bounded, with time passed in by the caller.
///
/// ```
/// use kevents_core::events_v1::{Event, SeriesCache, SeriesOptions, Write, WriteReason};
/// use kevents_core::Time;
/// use std::time::Duration;
///
/// let mut cache = SeriesCache::new(SeriesOptions::default());
/// let t0 = Time::from_unix_secs(1_609_459_200);
/// let mut e = Event::default();
/// e.metadata.name = "p.1".into();
/// e.reason = "BackOff".into();
/// assert!(cache.observe(e.clone(), t0).write.unwrap().is_create());
/// let start = cache.observe(e.clone(), t0.saturating_add(Duration::from_secs(1))).write.unwrap();
/// assert_eq!(start.reason(), WriteReason::SeriesStart);
/// assert_eq!(start.event().series.unwrap().count, 2);
/// assert!(cache.observe(e.clone(), t0.saturating_add(Duration::from_secs(2))).write.is_none());
/// // 6 minutes (and a bit) of silence: the final count is written and the series forgotten.
/// let done = cache.tick(t0.saturating_add(Duration::from_secs(2 + 361)));
/// assert_eq!(done.len(), 1);
/// assert_eq!(done[0].event().series.unwrap().count, 3);
/// assert_eq!(cache.len(), 0);
/// ```
#[derive(Debug)]
pub struct SeriesCache {
    opts: SeriesOptions,
    /// Keys are the isomorphism key of client-go 1.27+ (see `series_key`), each owning the
    /// first occurrence's event, packed, which is what every later write sends.
    singles: LruCache<PackedKey, Entry>,
    series: LruCache<PackedKey, Entry>,
    /// Hasher of the key fingerprints (random per cache).
    hasher: RandomState,
    /// No heartbeat is due before this instant (a lower bound; `None`: no series).
    heartbeat_floor: Option<Time>,
    stats: SeriesStats,
    /// For each final write (finish, flush, eviction) whose result has not come back: the
    /// count its series accounted for (`Entry::accounted`), by [`SeriesCache::final_key`].
    /// Bounded by `max_entries` (the least recent is forgotten first).
    finals: LruCache<u64, i32>,
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

fn minus(t: Time, d: Duration) -> Time {
    Time::from_unix_nanos(t.unix_nanos().saturating_sub(nanos(d)))
}

impl SeriesCache {
    /// An empty cache.
    pub fn new(mut opts: SeriesOptions) -> Self {
        opts.max_entries = opts.max_entries.max(1);
        SeriesCache {
            opts,
            singles: LruCache::unbounded(),
            series: LruCache::unbounded(),
            hasher: RandomState::default(),
            heartbeat_floor: None,
            stats: SeriesStats::default(),
            finals: LruCache::unbounded(),
        }
    }

    /// The options in use.
    pub fn options(&self) -> &SeriesOptions {
        &self.opts
    }

    /// Entries tracked (singletons plus open series); never more than `max_entries`.
    pub fn len(&self) -> usize {
        self.singles.len() + self.series.len()
    }

    /// Whether nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Open series tracked.
    pub fn open_series(&self) -> usize {
        self.series.len()
    }

    /// Counters.
    pub fn stats(&self) -> SeriesStats {
        SeriesStats {
            entries: self.len(),
            open_series: self.series.len(),
            ..self.stats
        }
    }

    /// The current series of the tracked event isomorphic to `event`, if it is an open
    /// series (`None` for a singleton or an unknown event).
    pub fn series_of(&self, event: &Event) -> Option<EventSeries> {
        let probe = Probe::new(event, self.opts.note_in_identity, &self.hasher);
        self.series
            .peek(probe.view())
            .map(|e| EventSeries::new(e.count, e.last_observed))
    }

    /// Records one occurrence at `now` (client-go's cache step in
    /// `recordToSink`, `tools/events/event_broadcaster.go`): CREATE for a new
    /// event, PATCH with count 2 for the second occurrence, nothing for later ones (the count
    /// grows in memory). When the cache is full, one entry is evicted first (see the module
    /// docs); an evicted series' final PATCH is returned in [`Observed::evicted`].
    pub fn observe(&mut self, event: Event, now: Time) -> Observed {
        self.stats.observed += 1;
        let note = self.opts.note_in_identity;
        let probe = Probe::new(&event, note, &self.hasher);
        if let Some(entry) = self.series.get_mut(probe.view()) {
            entry.count = entry.count.saturating_add(1);
            entry.last_observed = now;
            self.stats.counted_in_memory += 1;
            return Observed::default();
        }
        if let Some((key, mut entry)) = self.singles.pop_entry(probe.view()) {
            entry.count = 2;
            entry.last_observed = now;
            entry.last_written = now;
            entry.synced = 2;
            let write = Write::series(with_series(&key, &entry), WriteReason::SeriesStart);
            self.lower_floor(now.saturating_add(self.opts.heartbeat));
            self.series.push(key, entry);
            self.stats.series_started += 1;
            return Observed {
                write: Some(write),
                evicted: None,
            };
        }
        let evicted = if self.len() >= self.opts.max_entries {
            self.evict_one()
        } else {
            None
        };
        let key = PackedKey::new(&event, note, probe.fingerprint());
        let name_hash = self.name_hash(&event.metadata.name);
        let write = Write::Create {
            event,
            reason: WriteReason::First,
        };
        self.singles.push(
            key,
            Entry {
                count: 1,
                last_observed: now,
                last_written: now,
                synced: 1,
                name: name_hash,
                accounted: 0,
            },
        );
        self.stats.creates += 1;
        Observed {
            write: Some(write),
            evicted,
        }
    }

    fn name_hash(&self, name: &str) -> u32 {
        self.hasher.hash_one(name) as u32
    }

    fn lower_floor(&mut self, due: Time) {
        self.heartbeat_floor = Some(self.heartbeat_floor.map_or(due, |f| f.min(due)));
    }

    /// Eviction rule: the least recently observed singleton is forgotten (no write: it is
    /// already stored); if there is none, the least recently observed series is finished
    /// early and its final PATCH returned (unless the server already has its count).
    fn evict_one(&mut self) -> Option<Write> {
        if self.singles.pop_lru().is_some() {
            self.stats.evicted_singletons += 1;
            return None;
        }
        let (key, entry) = self.series.pop_lru()?;
        self.stats.evicted_series += 1;
        self.final_write(key, &entry, WriteReason::Evicted)
    }

    /// The timers, driven by the caller (call it every few seconds or at
    /// [`SeriesCache::next_deadline`]): [`SeriesCache::finish_idle`] followed by a heartbeat
    /// PATCH for every open series whose last write is at least `heartbeat` old.
    ///
    /// Unlike client-go (one loop patching every series every 30 min), each series gets its
    /// heartbeat 30 min after its own last write, which spreads the load and never leaves a
    /// series unwritten for longer.
    pub fn tick(&mut self, now: Time) -> Vec<Write> {
        let mut out = self.finish_idle(now);
        if self.heartbeat_floor.is_some_and(|f| f <= now) {
            let hb = self.opts.heartbeat;
            let mut floor: Option<Time> = None;
            for (key, entry) in self.series.iter_mut() {
                if entry.last_written.saturating_add(hb) <= now {
                    entry.last_written = now;
                    entry.synced = entry.count;
                    out.push(Write::series(
                        with_series(key, entry),
                        WriteReason::Heartbeat,
                    ));
                    self.stats.heartbeats += 1;
                }
                let due = entry.last_written.saturating_add(hb);
                floor = Some(floor.map_or(due, |f| f.min(due)));
            }
            self.heartbeat_floor = floor;
        }
        out
    }

    /// client-go's `finishSeries` at `now`: every series whose last occurrence is
    /// strictly older than `now - finish_after` gets its final PATCH (with the cached
    /// `lastObservedTime`; skipped when the server already has this count) and is removed;
    /// every such singleton is removed without a write.
    pub fn finish_idle(&mut self, now: Time) -> Vec<Write> {
        let cutoff = minus(now, self.opts.finish_after);
        let mut out = Vec::new();
        while self
            .singles
            .peek_lru()
            .is_some_and(|(_, e)| e.last_observed < cutoff)
        {
            self.singles.pop_lru();
            self.stats.singletons_forgotten += 1;
        }
        while self
            .series
            .peek_lru()
            .is_some_and(|(_, e)| e.last_observed < cutoff)
        {
            if let Some((key, mut entry)) = self.series.pop_lru() {
                self.stats.finished += 1;
                if self.opts.rewrite_on_finish {
                    entry.synced = 0;
                }
                out.extend(self.final_write(key, &entry, WriteReason::Finish));
            }
        }
        if self.series.is_empty() {
            self.heartbeat_floor = None;
        }
        out
    }

    /// client-go's `refreshExistingEventSeries`: a heartbeat PATCH for every open
    /// series now, whether due or not. Entries stay.
    pub fn heartbeat_all(&mut self, now: Time) -> Vec<Write> {
        let mut out = Vec::with_capacity(self.series.len());
        for (key, entry) in self.series.iter_mut() {
            entry.last_written = now;
            entry.synced = entry.count;
            out.push(Write::series(
                with_series(key, entry),
                WriteReason::Heartbeat,
            ));
            self.stats.heartbeats += 1;
        }
        if !self.series.is_empty() {
            self.heartbeat_floor = Some(now.saturating_add(self.opts.heartbeat));
        }
        out
    }

    /// Graceful shutdown: a PATCH with the latest count of every open series the server
    /// does not have yet, then everything is forgotten. Nobody else does this (client-go
    /// loses up to 30 min of counts).
    pub fn flush(&mut self) -> Vec<Write> {
        self.singles.clear();
        self.heartbeat_floor = None;
        let mut out = Vec::with_capacity(self.series.len());
        while let Some((key, entry)) = self.series.pop_lru() {
            self.stats.flushed += 1;
            out.extend(self.final_write(key, &entry, WriteReason::Flush));
        }
        out
    }

    /// The next instant at which [`SeriesCache::tick`] has something to do, so an actor can
    /// sleep until then (`None`: nothing tracked).
    pub fn next_deadline(&self) -> Option<Time> {
        let idle = |c: &LruCache<PackedKey, Entry>| {
            c.peek_lru().map(|(_, e)| {
                e.last_observed
                    .saturating_add(self.opts.finish_after)
                    .saturating_add(Duration::from_nanos(1))
            })
        };
        [
            idle(&self.singles),
            idle(&self.series),
            self.heartbeat_floor,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Reports the result of a write this cache returned (after [`Write::recreate`] or
    /// [`Write::retry`], pass the write actually sent). Returns what to do next
    /// ([`classify`]) and keeps the cache consistent:
    ///
    /// * success: the server's count is remembered (no redundant final PATCH later);
    /// * a failed finish that is retryable: the series is put back so the next tick tries
    ///   again ([`Step::Rescheduled`]; client-go keeps it for the next run), unless the
    ///   cache is full or a new event with the same key was started meanwhile;
    /// * any other failure: the server's count is marked unknown, so the finish or flush of
    ///   that series writes it again.
    ///
    /// The server's reply is not written back into the cache (1.27+).
    pub fn on_write_result(
        &mut self,
        sent: &Write,
        result: &Result<Stored<Event>, SinkError>,
    ) -> Step {
        let step = classify(sent, result);
        let event = sent.event();
        let sent_count = event.series.map_or(1, |s| s.count);
        let note = self.opts.note_in_identity;
        let probe = Probe::new(event, note, &self.hasher);
        let name = self.name_hash(&event.metadata.name);
        // peek_mut: a write result must not change the LRU order (last occurrences).
        if step == Step::Stored {
            if let Some(e) = self.series.peek_mut(probe.view())
                && e.name == name
            {
                e.synced = e.synced.max(sent_count);
                e.accounted = e.accounted.max(sent_count);
            } else if let Some(e) = self.singles.peek_mut(probe.view())
                && e.name == name
            {
                e.accounted = e.accounted.max(sent_count);
            } else if !self.finals.is_empty() {
                // The final write of a series no longer tracked: nothing to remember.
                let k = self.final_key(event);
                self.finals.pop(&k);
            }
            return step;
        }
        if step == Step::Recreate {
            return step;
        }
        self.stats.write_failures += 1;
        if let Some(e) = self.series.peek_mut(probe.view())
            && e.name == name
        {
            e.synced = 0;
        }
        if step != Step::Retry || !sent.reason().single_attempt() {
            return step;
        }
        if sent.reason() == WriteReason::Heartbeat {
            return Step::Rescheduled;
        }
        // A finish that failed retryably: keep it for the next tick, as client-go does.
        let exists = self.series.contains(probe.view()) || self.singles.contains(probe.view());
        let Some(series) = event.series else {
            return Step::Dropped { quiet: false };
        };
        if exists || self.len() >= self.opts.max_entries {
            return Step::Dropped { quiet: false };
        }
        let last = series.last_observed_time.unwrap_or(Time::UNIX_EPOCH);
        // The series and resourceVersion are not part of the identity: same fingerprint.
        let mut first = event.clone();
        first.series = None;
        first.metadata.resource_version.clear();
        let key = PackedKey::new(&first, note, probe.fingerprint());
        let name_hash = self.name_hash(&event.metadata.name);
        let final_key = self.final_key(event);
        let accounted = self.finals.pop(&final_key).unwrap_or(0);
        self.series.push(
            key,
            Entry {
                count: series.count,
                last_observed: last,
                last_written: last,
                synced: 0,
                name: name_hash,
                accounted,
            },
        );
        self.lower_floor(last.saturating_add(self.opts.heartbeat));
        self.stats.rescheduled += 1;
        Step::Rescheduled
    }

    /// The server refused `sent` for good: a 4xx that retrying cannot fix (403 Forbidden,
    /// 422 Invalid, 400, ...; not AlreadyExists, not a 404 that leads to a re-create), after
    /// [`SeriesCache::on_write_result`] returned [`Step::Dropped`]. Returns how many
    /// occurrences of its event the server therefore lacks that were not counted before:
    /// counts are absolute, so it is the highest count concerned minus the highest the
    /// server is known to have stored or that an earlier refusal counted. `dropped` is the
    /// highest count among the writes of the same event the caller drops with it (0: none).
    ///
    /// A refused CREATE forgets its event (singleton or series): the server has nothing a
    /// PATCH could update, and the next occurrence starts again with a CREATE (so a
    /// permission granted later recovers). A refused PATCH keeps its series; a later
    /// refusal of it counts only what grew since. The final write of a series no longer
    /// tracked (finished, flushed, evicted) is accounted for until its result comes back,
    /// for at most `max_entries` such writes; beyond that a refused PATCH counts every
    /// occurrence but the first.
    ///
    /// Nothing here changes what is sent after successful writes.
    ///
    /// ```
    /// use kevents_core::events_v1::{Event, SeriesCache, SeriesOptions};
    /// use kevents_core::{SinkError, Status, Time};
    /// let mut cache = SeriesCache::new(SeriesOptions::default());
    /// let t0 = Time::from_unix_secs(1_609_459_200);
    /// let mut e = Event::default();
    /// e.metadata.name = "p.1".into();
    /// let create = cache.observe(e.clone(), t0).write.unwrap();
    /// let start = cache.observe(e.clone(), t0).write.unwrap(); // PATCH, count 2
    /// assert!(cache.observe(e.clone(), t0).write.is_none()); // count 3, in memory
    /// let forbidden = SinkError::Status(Box::new(Status::failure(403, "Forbidden", "no")));
    /// cache.on_write_result(&create, &Err(forbidden));
    /// // The CREATE and the PATCH queued behind it: 3 occurrences the server lacks.
    /// assert_eq!(cache.refused(&create, start.event().series.unwrap().count), 3);
    /// assert!(cache.is_empty());
    /// assert!(cache.observe(e, t0).write.unwrap().is_create()); // starts again
    /// ```
    pub fn refused(&mut self, sent: &Write, dropped: i32) -> u64 {
        let event = sent.event();
        let count = event.series.map_or(1, |s| s.count).max(dropped);
        let probe = Probe::new(event, self.opts.note_in_identity, &self.hasher);
        let name = self.name_hash(&event.metadata.name);
        let final_key = self.final_key(event);
        let of_final = self.finals.pop(&final_key);
        let lost = |count: i32, accounted: i32| {
            u64::try_from(count.saturating_sub(accounted)).unwrap_or(0)
        };
        let in_series = self
            .series
            .peek(probe.view())
            .is_some_and(|e| e.name == name);
        let in_singles = !in_series
            && self
                .singles
                .peek(probe.view())
                .is_some_and(|e| e.name == name);
        if sent.is_create() {
            let entry = if in_series {
                self.series.pop(probe.view())
            } else if in_singles {
                self.singles.pop(probe.view())
            } else {
                None
            };
            if self.series.is_empty() {
                self.heartbeat_floor = None;
            }
            return match entry {
                Some(e) => lost(e.count.max(count), e.accounted),
                None => lost(count, of_final.unwrap_or(0)),
            };
        }
        let entry = if in_series {
            self.series.peek_mut(probe.view())
        } else if in_singles {
            self.singles.peek_mut(probe.view())
        } else {
            None
        };
        match entry {
            Some(e) => {
                let n = lost(count, e.accounted);
                e.accounted = e.accounted.max(count);
                n
            }
            None => lost(count, of_final.unwrap_or(1)),
        }
    }
}

fn with_series(first: &PackedKey, entry: &Entry) -> Event {
    let mut e = first.to_event();
    e.series = Some(EventSeries::new(entry.count, entry.last_observed));
    e
}

impl SeriesCache {
    /// The final PATCH of a series no longer tracked (finished, flushed, evicted), unless
    /// the server already has its count. What the series accounted for is kept in `finals`
    /// until the write's result comes back, so that a refusal of it counts only what the
    /// server lacks ([`SeriesCache::refused`]).
    fn final_write(&mut self, key: PackedKey, entry: &Entry, reason: WriteReason) -> Option<Write> {
        if entry.synced == entry.count {
            return None;
        }
        let mut event = key.to_event();
        event.series = Some(EventSeries::new(entry.count, entry.last_observed));
        let k = self.final_key(&event);
        if self.finals.len() >= self.opts.max_entries {
            self.finals.pop_lru();
        }
        self.finals.put(k, entry.accounted);
        Some(Write::series(event, reason))
    }

    /// The key of an event in `finals`: a hash of its namespace and name.
    fn final_key(&self, event: &Event) -> u64 {
        self.hasher
            .hash_one((&event.metadata.namespace, &event.metadata.name))
    }
}
