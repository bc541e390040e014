//! Options of a series sink chain.

use std::fmt;
use std::time::Duration;

use kevents_core::SharedClock;
use kevents_core::events_v1::SeriesOptions;

use crate::budget::WriteBudget;
use crate::policy::{RetryPolicy, WatcherPolicy};

/// Default of [`events_v1::SinkOptions::freshness`](crate::events_v1::SinkOptions::freshness): a series' stored count lags its occurrences by
/// at most a minute.
pub const DEFAULT_FRESHNESS: Duration = Duration::from_secs(60);

/// Options of a series sink chain ([`PipelineBuilder::sink_events_v1`]).
///
/// ```
/// use kevents_actors::events_v1::SinkOptions;
///
/// let o = SinkOptions::default();
/// assert_eq!(o.series.max_entries, 16_384);
/// assert!(o.flush_on_shutdown);
/// assert!(o.coalesce && o.budget.is_none());
/// assert_eq!(o.freshness, Some(std::time::Duration::from_secs(60))); // live counts
/// ```
///
/// [`PipelineBuilder::sink_events_v1`]: crate::PipelineBuilder::sink_events_v1
#[derive(Clone)]
pub struct SinkOptions {
    /// The cache: cap on tracked events (eviction rule in `docs/semantics.md`), heartbeat
    /// (30 min), finish (6 min idle), note in the identity (off).
    pub series: SeriesOptions,
    /// Retries of CREATEs, series starts, evictions and flushes (heartbeats and finishes are
    /// tried once, as client-go: the cache reschedules them). Attempts, sleeps and
    /// `Retry-After` are honoured; which errors are retried is
    /// [`events_v1::classify`](kevents_core::events_v1::classify) (kevents' classification, 429/5xx included).
    pub retry: RetryPolicy,
    /// Writes in flight at once across different events; writes of one event are always one
    /// after the other (a series PATCH after its CREATE).
    pub max_in_flight: usize,
    /// How events reach the chain ([`WatcherPolicy::sink_default`]: coalesce-if-full). The
    /// slot of an event is held until the write it caused (if any) is finished.
    pub delivery: WatcherPolicy,
    /// The clock of the timers (default: the pipeline's clock, the one events are stamped
    /// with). Use the same clock as the pipeline.
    pub clock: Option<SharedClock>,
    /// Longest sleep between two timer checks (the timer normally wakes at the cache's next
    /// deadline; this bound keeps it correct when the clock jumps). Default 60 s.
    pub max_tick: Duration,
    /// Write the latest count of every open series on [`Pipeline::shutdown`] (on by
    /// default; client-go loses them).
    ///
    /// [`Pipeline::shutdown`]: crate::Pipeline::shutdown
    pub flush_on_shutdown: bool,
    /// Coalescing (on by default): a write of an event that has not started absorbs a newer
    /// write of the same event (a waiting CREATE becomes the CREATE of the event with its
    /// newest `series`, as client-go's re-create after 404; a waiting PATCH is replaced by the
    /// newer `series.count`).
    pub coalesce: bool,
    /// The write budget of the apiserver; `None`: the pipeline's
    /// ([`PipelineBuilder::write_budget`](crate::PipelineBuilder::write_budget)).
    pub budget: Option<WriteBudget>,
    /// Live counts (on by default, 60 s; kevents, not client-go): an open series whose count
    /// grew since its last write is written again (`series.count`, one PATCH, coalesced with
    /// any waiting write of the event, within the write budget) once that write is this old,
    /// so a stored count lags by at most this interval. Series with nothing new still get
    /// only client-go's 30-minute heartbeat. `None`: client-go's behaviour, the count is
    /// written at the heartbeat, after 6 idle minutes or on shutdown. Counted in
    /// [`events_v1::SinkSnapshot::refreshed`](crate::events_v1::SinkSnapshot::refreshed).
    pub freshness: Option<Duration>,
}

impl Default for crate::events_v1::SinkOptions {
    fn default() -> Self {
        crate::events_v1::SinkOptions {
            series: SeriesOptions::default(),
            retry: RetryPolicy::default(),
            max_in_flight: 16,
            delivery: WatcherPolicy::sink_default(),
            clock: None,
            max_tick: Duration::from_secs(60),
            flush_on_shutdown: true,
            coalesce: true,
            budget: None,
            freshness: Some(DEFAULT_FRESHNESS),
        }
    }
}

impl fmt::Debug for crate::events_v1::SinkOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("crate::events_v1::SinkOptions")
            .field("series", &self.series)
            .field("retry", &self.retry)
            .field("max_in_flight", &self.max_in_flight)
            .field("delivery", &self.delivery)
            .field("clock", &self.clock)
            .field("max_tick", &self.max_tick)
            .field("flush_on_shutdown", &self.flush_on_shutdown)
            .field("coalesce", &self.coalesce)
            .field("budget", &self.budget)
            .field("freshness", &self.freshness)
            .finish()
    }
}
