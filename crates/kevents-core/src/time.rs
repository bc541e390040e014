//! Instants and clocks.
//!
//! Everything in kevents that reads time does it through a [`Clock`], so tests and the replay
//! tool can drive time by hand ([`VirtualClock`], [`IntervalClock`]) while production code
//! uses [`SystemClock`].
//!
//! A [`Time`] is a count of nanoseconds since the Unix epoch. Go's *zero* `metav1.Time`
//! (year 1, serialised as `null`) is not representable as a `Time`; fields that can hold it
//! are `Option<Time>` and `None` is the zero value.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use thiserror::Error;

/// An instant: nanoseconds since 1970-01-01T00:00:00Z (negative before it).
///
/// ```
/// use kevents_core::Time;
/// let t = Time::from_unix_nanos(1_609_459_345_000_000_000);
/// assert_eq!(t.to_rfc3339(), "2021-01-01T00:02:25Z");
/// assert_eq!(format!("{:x}", t.unix_nanos()), "1655f2bf3b286a00");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(i64);

/// The error returned when a timestamp string is not RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid RFC 3339 timestamp {0:?}")]
pub struct ParseTimeError(pub String);

impl Time {
    /// The Unix epoch, 1970-01-01T00:00:00Z.
    pub const UNIX_EPOCH: Time = Time(0);

    /// An instant from nanoseconds since the Unix epoch.
    pub const fn from_unix_nanos(nanos: i64) -> Self {
        Time(nanos)
    }

    /// An instant from whole seconds since the Unix epoch (saturating).
    pub const fn from_unix_secs(secs: i64) -> Self {
        Time(secs.saturating_mul(1_000_000_000))
    }

    /// Nanoseconds since the Unix epoch (Go's `UnixNano`).
    pub const fn unix_nanos(self) -> i64 {
        self.0
    }

    /// Whole seconds since the Unix epoch, rounded towards negative infinity.
    pub const fn unix_secs(self) -> i64 {
        self.0.div_euclid(1_000_000_000)
    }

    /// This instant truncated to whole seconds, as `metav1.Time` is on the wire.
    pub const fn truncate_to_secs(self) -> Self {
        Time(self.unix_secs() * 1_000_000_000)
    }

    /// This instant plus `d` (saturating).
    pub fn saturating_add(self, d: Duration) -> Self {
        Time(
            self.0
                .saturating_add(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
        )
    }

    /// Signed nanoseconds from `earlier` to `self` (saturating, like Go's `Time.Sub`).
    pub const fn nanos_since(self, earlier: Time) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    /// RFC 3339 in UTC with whole seconds, e.g. `2021-01-01T00:00:20Z` (the fraction is
    /// truncated), exactly as `metav1.Time` is serialised.
    pub fn to_rfc3339(self) -> String {
        let mut s = String::with_capacity(20);
        self.write_rfc3339(&mut s, 0);
        s
    }

    /// RFC 3339 in UTC with exactly six fractional digits (truncated), as `metav1.MicroTime`
    /// is serialised, e.g. `2021-01-01T00:05:00.987654Z`.
    pub fn to_rfc3339_micros(self) -> String {
        let mut s = String::with_capacity(27);
        self.write_rfc3339(&mut s, 6);
        s
    }

    fn write_rfc3339(self, out: &mut String, frac_digits: u32) {
        use std::fmt::Write;
        let secs = self.unix_secs();
        let nanos = self.0.rem_euclid(1_000_000_000);
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        let _ = write!(
            out,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
            sod / 3600,
            (sod / 60) % 60,
            sod % 60
        );
        if frac_digits == 6 {
            let _ = write!(out, ".{:06}", nanos / 1000);
        }
        out.push('Z');
    }

    /// Parses RFC 3339 (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`), as the apiserver writes
    /// `metav1.Time` and `metav1.MicroTime`.
    ///
    /// ```
    /// use kevents_core::Time;
    /// let t = Time::parse_rfc3339("2021-01-01T01:00:20.5+01:00").unwrap();
    /// assert_eq!(t.to_rfc3339_micros(), "2021-01-01T00:00:20.500000Z");
    /// assert!(Time::parse_rfc3339("yesterday").is_err());
    /// ```
    pub fn parse_rfc3339(s: &str) -> Result<Self, ParseTimeError> {
        parse_rfc3339(s).ok_or_else(|| ParseTimeError(s.to_owned()))
    }
}

fn parse_rfc3339(s: &str) -> Option<Time> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 60
    {
        return None;
    }
    let mut i = 19;
    let mut nanos: i64 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 9 {
                nanos = nanos * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start).min(9)..9 {
            nanos *= 10;
        }
    }
    let offset_secs = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let off = oh * 3600 + om * 60;
            if *sign == b'+' { off } else { -off }
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_secs;
    secs.checked_mul(1_000_000_000)?
        .checked_add(nanos)
        .map(Time)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

// Howard Hinnant's civil-from-days and days-from-civil algorithms (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

impl fmt::Debug for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339_micros())
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl From<SystemTime> for Time {
    fn from(t: SystemTime) -> Self {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Time(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
            Err(e) => Time(-(i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX))),
        }
    }
}

/// A source of the current time.
///
/// The correlator reads its clock exactly as client-go's does (once in the aggregator, once
/// in the spam filter, never in the observer), so a clock that moves on every read
/// ([`IntervalClock`]) reproduces client-go's unit-test timings.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Time;
}

/// A shared, type-erased clock.
pub type SharedClock = Arc<dyn Clock>;

/// The wall clock (`CLOCK_REALTIME`, what `SystemTime::now` reads).
///
/// On Unix it reads the real clock once a millisecond per thread and extrapolates in between
/// with the CPU's time-stamp counter (about 10 ns a reading against 24 for `clock_gettime`
/// on the machines of docs/benchmarks.md), always within microseconds of the real clock. The
/// first reading in a process calibrates the counter (about 0.6 ms); a pipeline reads the
/// clock once when it starts, so that a record call never pays for it.
///
/// ```
/// use kevents_core::{Clock, SystemClock};
/// assert!(SystemClock.now().unix_secs() > 1_600_000_000);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Time {
        system_now()
    }
}

/// On Unix the clock is `CLOCK_REALTIME` extrapolated with the CPU's time-stamp counter
/// ([`fast_realtime`]): a record call reads the clock, and reading the counter takes about
/// 10 ns on these machines where `clock_gettime` takes 24 (through the vDSO), which was a
/// tenth of a `Recorder::event` call.
#[cfg(unix)]
fn system_now() -> Time {
    fast_realtime::now()
}

/// `CLOCK_REALTIME` with nix's safe `clock_gettime` (the workspace forbids `unsafe`), straight
/// into nanoseconds: 38 instructions around the call where `SystemTime::now` (the same call,
/// then a checked `Timespec`, a `Duration` and a 128-bit conversion) took 103.
#[cfg(unix)]
// `time_t` and the nanoseconds' type are not `i64` on every Unix target.
#[allow(clippy::useless_conversion)]
fn realtime_now() -> Time {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME) {
        Ok(t) => Time(
            i64::from(t.tv_sec())
                .saturating_mul(1_000_000_000)
                .saturating_add(i64::from(t.tv_nsec())),
        ),
        // CLOCK_REALTIME always exists; should a sandbox refuse the call, read it as std does.
        Err(_) => Time::from(SystemTime::now()),
    }
}

#[cfg(not(unix))]
fn system_now() -> Time {
    Time::from(SystemTime::now())
}

/// `CLOCK_REALTIME` read once a millisecond per thread, and in between extrapolated with the
/// time-stamp counter as `quanta` reads and calibrates it (the counter where the CPU's is
/// invariant and the kernel uses it too, otherwise the OS's monotonic clock).
///
/// Each thread keeps an anchor: a reading of the real clock and of the counter taken
/// together. A reading is the anchor's time plus the counter's progress since, scaled to
/// nanoseconds. The anchor is taken again when it is over [`REANCHOR_NANOS`] old (so a step
/// of the real clock, or NTP slewing it, shows within a millisecond; the scale's error over a
/// millisecond is well under a microsecond), when the counter went backwards (another core),
/// and at a thread's first reading. An anchor is only kept if the counter moved less than
/// [`ANCHOR_SLACK_NANOS`] around the real clock's reading (the thread was not preempted in
/// between); otherwise that reading is returned as it is and the next one tries again.
#[cfg(unix)]
mod fast_realtime {
    use std::cell::Cell;
    use std::sync::OnceLock;

    use super::{Time, realtime_now};

    /// Age after which a thread's anchor is taken again.
    const REANCHOR_NANOS: u64 = 1_000_000;
    /// Largest counter progress around the real clock's reading for an anchor to be kept.
    const ANCHOR_SLACK_NANOS: u64 = 2_000;

    /// The calibrated counter (calibrated once per process, on first use).
    fn counter() -> &'static quanta::Clock {
        static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
        CLOCK.get_or_init(quanta::Clock::new)
    }

    thread_local! {
        /// (counter, nanoseconds since the epoch) read together; `None` before the first.
        static ANCHOR: Cell<Option<(u64, i64)>> = const { Cell::new(None) };
    }

    pub(super) fn now() -> Time {
        let clock = counter();
        let raw = clock.raw();
        if let Ok(Some((raw0, unix0))) = ANCHOR.try_with(Cell::get)
            && raw >= raw0
        {
            let since = clock.delta_as_nanos(raw0, raw);
            if since < REANCHOR_NANOS {
                // `since` is under a millisecond: the sum cannot overflow for any real time.
                return Time(unix0.saturating_add(since as i64));
            }
        }
        anchor(clock)
    }

    /// Reads the real clock between two counter readings and keeps the pair as this thread's
    /// anchor if they are close; returns the real clock's reading.
    fn anchor(clock: &quanta::Clock) -> Time {
        let before = clock.raw();
        let t = realtime_now();
        let after = clock.raw();
        let anchor = (after >= before && clock.delta_as_nanos(before, after) <= ANCHOR_SLACK_NANOS)
            .then_some((before + (after - before) / 2, t.0));
        // A thread being torn down has no anchor: every reading reads the real clock.
        let _ = ANCHOR.try_with(|a| a.set(anchor));
        t
    }
}

/// A clock that only moves when told to. Clones share the same time.
///
/// ```
/// use kevents_core::{Clock, Time, VirtualClock};
/// use std::time::Duration;
/// let clock = VirtualClock::new(Time::from_unix_secs(100));
/// let view = clock.clone();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(view.now(), Time::from_unix_secs(105));
/// ```
#[derive(Debug, Clone, Default)]
pub struct VirtualClock(Arc<AtomicI64>);

impl VirtualClock {
    /// A clock standing at `t`.
    pub fn new(t: Time) -> Self {
        VirtualClock(Arc::new(AtomicI64::new(t.0)))
    }
    /// Moves the clock to `t` (it may go backwards; the correlator tolerates that).
    pub fn set(&self, t: Time) {
        self.0.store(t.0, Ordering::Relaxed);
    }
    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let d = i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_add(d))
            });
    }
}

impl Clock for VirtualClock {
    fn now(&self) -> Time {
        Time(self.0.load(Ordering::Relaxed))
    }
}

/// A clock that advances by a fixed interval on every read: client-go's `IntervalClock`,
/// used by its correlator unit tests (every `now()` returns the previous value plus the
/// interval).
///
/// ```
/// use kevents_core::{Clock, IntervalClock, Time};
/// use std::time::Duration;
/// let c = IntervalClock::new(Time::from_unix_secs(0), Duration::from_secs(5));
/// assert_eq!(c.now(), Time::from_unix_secs(5));
/// assert_eq!(c.now(), Time::from_unix_secs(10));
/// ```
#[derive(Debug, Clone)]
pub struct IntervalClock {
    now: Arc<AtomicI64>,
    interval: i64,
}

impl IntervalClock {
    /// A clock whose first read returns `start + interval`.
    pub fn new(start: Time, interval: Duration) -> Self {
        IntervalClock {
            now: Arc::new(AtomicI64::new(start.0)),
            interval: i64::try_from(interval.as_nanos()).unwrap_or(i64::MAX),
        }
    }
}

impl Clock for IntervalClock {
    fn now(&self) -> Time {
        let prev = self.now.fetch_add(self.interval, Ordering::Relaxed);
        Time(prev.saturating_add(self.interval))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Readings for `millis` of wall time, each between two `SystemTime` readings to within
    /// 50 µs: the real clock, not seconds, not microseconds, not a monotonic clock, and
    /// between the real clock's readings (a millisecond apart per thread) the counter's
    /// extrapolation stays on it (a scale off by a few percent is tens of microseconds off at
    /// the end of a millisecond).
    fn reads_the_real_clock_for(millis: u64) {
        let slack = 50_000;
        let start = std::time::Instant::now();
        let mut readings = 0u64;
        while start.elapsed() < Duration::from_millis(millis) {
            let before = Time::from(SystemTime::now());
            let now = SystemClock.now();
            let after = Time::from(SystemTime::now());
            readings += 1;
            assert!(
                before.unix_nanos() - slack <= now.unix_nanos()
                    && now.unix_nanos() <= after.unix_nanos() + slack,
                "reading {readings}: {before:?} {now:?} {after:?}"
            );
        }
    }

    #[test]
    fn the_system_clock_reads_what_system_time_reads() {
        reads_the_real_clock_for(30);
    }

    /// The same on several threads at once (each with its own anchor, on any core).
    #[test]
    fn the_system_clock_reads_the_real_clock_on_every_thread() {
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| reads_the_real_clock_for(30)))
            .collect();
        for t in threads {
            t.join().expect("a thread's readings were off");
        }
    }

    #[test]
    fn formats_whole_seconds_and_micros_truncating() {
        let t = Time::from_unix_nanos(1_609_459_201_987_654_321);
        assert_eq!(t.to_rfc3339(), "2021-01-01T00:00:01Z");
        assert_eq!(t.to_rfc3339_micros(), "2021-01-01T00:00:01.987654Z");
        assert_eq!(Time::UNIX_EPOCH.to_rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(
            Time::from_unix_nanos(-1).to_rfc3339(),
            "1969-12-31T23:59:59Z"
        );
    }

    #[test]
    fn parse_round_trips_and_rejects_garbage() {
        for s in [
            "2023-11-14T22:13:20Z",
            "2000-02-29T23:59:59Z",
            "1969-07-20T20:17:40Z",
        ] {
            assert_eq!(Time::parse_rfc3339(s).unwrap().to_rfc3339(), s);
        }
        for s in [
            "2023-02-29T00:00:00Z",
            "2023-11-14 22:13:20",
            "2023-11-14T22:13:20+0100",
            "",
        ] {
            assert!(Time::parse_rfc3339(s).is_err(), "{s}");
        }
    }
}
