//! Live counts (kevents, not client-go): an open series whose count grew since its last
//! write is written again once that write is `every` old, so a stored count lags the
//! occurrences by at most `every` instead of up to the 30-minute heartbeat.

use std::time::Duration;

use super::{Entry, SeriesCache, Write, WriteReason, with_series};
use crate::time::Time;

/// What [`SeriesCache::refresh`] returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Refreshed {
    /// One PATCH with the latest count per open series that was due.
    pub writes: Vec<Write>,
    /// When the next series whose count the server lacks becomes due (`None`: every open
    /// series' count has been written or is being written).
    pub next: Option<Time>,
}

/// Whether the server lacks some of this series' occurrences (`synced` 0: the last write
/// failed, its count is unknown).
fn stale(e: &Entry) -> bool {
    e.synced != e.count
}

impl SeriesCache {
    /// A PATCH with the latest count of every open series whose count grew since its last
    /// write (series start, heartbeat, earlier refresh) and whose last write is at least
    /// `every` old at `now`. Each such series is then taken as written at `now` (its next
    /// heartbeat is 30 minutes later; a failed write marks its count unknown again, see
    /// [`SeriesCache::on_write_result`]). Series with nothing new are left to the heartbeat,
    /// as client-go's.
    ///
    /// ```
    /// use kevents_core::events_v1::{Event, SeriesCache, SeriesOptions, WriteReason};
    /// use kevents_core::Time;
    /// use std::time::Duration;
    ///
    /// let mut cache = SeriesCache::new(SeriesOptions::default());
    /// let t0 = Time::from_unix_secs(1_609_459_200);
    /// let at = |s| t0.saturating_add(Duration::from_secs(s));
    /// let mut e = Event::default();
    /// e.metadata.name = "p.1".into();
    /// for s in 0..5 {
    ///     let _ = cache.observe(e.clone(), at(s)); // CREATE, series start (2), then 3, 4, 5
    /// }
    /// let every = Duration::from_secs(60);
    /// assert!(cache.refresh(at(30), every).writes.is_empty()); // written 29 s ago
    /// let r = cache.refresh(at(61), every);
    /// assert_eq!(r.writes.len(), 1);
    /// assert_eq!(r.writes[0].reason(), WriteReason::Refresh);
    /// assert_eq!(r.writes[0].event().series.unwrap().count, 5);
    /// assert_eq!((r.next, cache.unwritten()), (None, 0));
    /// ```
    pub fn refresh(&mut self, now: Time, every: Duration) -> Refreshed {
        let mut out = Refreshed::default();
        for (key, entry) in self.series.iter_mut() {
            if !stale(entry) {
                continue;
            }
            let due = entry.last_written.saturating_add(every);
            if due <= now {
                entry.last_written = now;
                entry.synced = entry.count;
                out.writes
                    .push(Write::series(with_series(key, entry), WriteReason::Refresh));
            } else {
                out.next = Some(out.next.map_or(due, |n: Time| n.min(due)));
            }
        }
        out
    }

    /// Occurrences of open series the server is not known to have stored yet (those counted
    /// in memory since each series' last successful write, or its whole count when that
    /// write failed): what a crash would lose now.
    ///
    /// ```
    /// use kevents_core::events_v1::{Event, SeriesCache, SeriesOptions};
    /// use kevents_core::Time;
    /// let mut cache = SeriesCache::new(SeriesOptions::default());
    /// for _ in 0..4 {
    ///     let _ = cache.observe(Event::default(), Time::UNIX_EPOCH);
    /// }
    /// assert_eq!(cache.unwritten(), 2); // count 4, the series start wrote 2
    /// ```
    pub fn unwritten(&self) -> u64 {
        self.series
            .iter()
            .filter(|(_, e)| stale(e))
            .map(|(_, e)| {
                let count = u64::try_from(e.count).unwrap_or(0);
                count.saturating_sub(u64::try_from(e.synced).unwrap_or(0))
            })
            .sum()
    }
}
