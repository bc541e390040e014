//! The options of `kevents replay` and the range each accepts.

use std::fmt;

use kevents_core::ClientGoVersion;
use kevents_core::core_v1::correlator::CorrelatorOptions;
use thiserror::Error;

use super::excerpt;

/// Default of [`ReplayOptions::max_occurrences`]: one million.
pub const DEFAULT_MAX_OCCURRENCES: u64 = 1_000_000;
/// Default of [`ReplayOptions::max_line_bytes`]: 1 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;
/// Largest accepted [`ReplayOptions::max_line_bytes`]: 1 GiB.
pub const MAX_MAX_LINE_BYTES: usize = 1 << 30;

/// The options of a replay, as the `kevents replay` flags give them.
///
/// `None` takes client-go's default; every given value must be in the range its [`Flag`]
/// names (a zero is refused rather than read as "default").
///
/// ```
/// use kevents_sim::replay::ReplayOptions;
/// let o = ReplayOptions { burst: Some(3), qps: Some(0.1), ..Default::default() };
/// assert_eq!(o.correlator_options().unwrap().burst_size, 3);
/// let bad = ReplayOptions { lru: Some(0), ..Default::default() };
/// assert_eq!(
///     bad.validate().unwrap_err().to_string(),
///     r#"--lru must be an integer from 1 to 9223372036854775807 (got "0")"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayOptions {
    /// `--burst`: spam filter burst (default 25).
    pub burst: Option<i32>,
    /// `--qps`: spam filter refill in tokens per second (default 1/300).
    pub qps: Option<f32>,
    /// `--max-events`: distinct messages that trigger aggregation (default 10).
    pub max_events: Option<i64>,
    /// `--max-interval`: aggregation inactivity window in seconds (default 600).
    pub max_interval: Option<i64>,
    /// `--lru`: size of each LRU cache (default 4096).
    pub lru: Option<i64>,
    /// `--max-occurrences`: most occurrences a `kubectl` document may expand to.
    pub max_occurrences: u64,
    /// `--max-line-bytes`: longest trace line, not counting its `\n` or `\r\n`.
    pub max_line_bytes: usize,
    /// `--client-go`: the client-go release replayed (default 1.37).
    pub client_go: ClientGoVersion,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            burst: None,
            qps: None,
            max_events: None,
            max_interval: None,
            lru: None,
            max_occurrences: DEFAULT_MAX_OCCURRENCES,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            client_go: ClientGoVersion::default(),
        }
    }
}

impl ReplayOptions {
    /// Checks every option against the range of its flag.
    pub fn validate(&self) -> Result<(), FlagError> {
        fn check<T: ToString + Copy>(
            flag: Flag,
            value: Option<T>,
            ok: impl Fn(T) -> bool,
        ) -> Result<(), FlagError> {
            match value {
                Some(v) if !ok(v) => Err(flag.error(&v.to_string())),
                _ => Ok(()),
            }
        }
        check(Flag::Burst, self.burst, |v| v >= 1)?;
        check(Flag::Qps, self.qps, qps_ok)?;
        check(Flag::MaxEvents, self.max_events, |v| v >= 1)?;
        check(Flag::MaxInterval, self.max_interval, |v| v >= 1)?;
        check(Flag::Lru, self.lru, |v| v >= 1)?;
        check(Flag::MaxOccurrences, Some(self.max_occurrences), |v| v >= 1)?;
        check(Flag::MaxLineBytes, Some(self.max_line_bytes), |v| {
            (1..=MAX_MAX_LINE_BYTES).contains(&v)
        })?;
        Ok(())
    }

    /// The correlator options these replay options stand for, after [`validate`](Self::validate).
    pub fn correlator_options(&self) -> Result<CorrelatorOptions, FlagError> {
        self.validate()?;
        // Zero means "client-go's default" to the correlator; validated values are never zero.
        Ok(CorrelatorOptions {
            burst_size: self.burst.unwrap_or(0),
            qps: self.qps.unwrap_or(0.0),
            max_events: self.max_events.unwrap_or(0),
            max_interval_in_seconds: self.max_interval.unwrap_or(0),
            lru_cache_size: self.lru.unwrap_or(0),
            ..CorrelatorOptions::for_client_go(self.client_go)
        })
    }
}

fn qps_ok(v: f32) -> bool {
    v.is_finite() && v > 0.0
}

/// A `kevents replay` flag with a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Flag {
    /// `--burst`
    Burst,
    /// `--qps`
    Qps,
    /// `--max-events`
    MaxEvents,
    /// `--max-interval`
    MaxInterval,
    /// `--lru`
    Lru,
    /// `--max-occurrences`
    MaxOccurrences,
    /// `--max-line-bytes`
    MaxLineBytes,
}

impl Flag {
    /// The flag as typed, e.g. `--burst`.
    pub fn name(self) -> &'static str {
        match self {
            Flag::Burst => "--burst",
            Flag::Qps => "--qps",
            Flag::MaxEvents => "--max-events",
            Flag::MaxInterval => "--max-interval",
            Flag::Lru => "--lru",
            Flag::MaxOccurrences => "--max-occurrences",
            Flag::MaxLineBytes => "--max-line-bytes",
        }
    }

    /// The values the flag accepts, in words.
    pub fn accepts(self) -> &'static str {
        match self {
            Flag::Burst => "an integer from 1 to 2147483647",
            Flag::Qps => "a finite number greater than 0 (and at most 3.4e38)",
            Flag::MaxEvents | Flag::MaxInterval | Flag::Lru => {
                "an integer from 1 to 9223372036854775807"
            }
            Flag::MaxOccurrences => "an integer from 1 to 18446744073709551615",
            Flag::MaxLineBytes => "an integer from 1 to 1073741824 (1 GiB)",
        }
    }

    fn error(self, value: &str) -> FlagError {
        FlagError {
            flag: self,
            value: excerpt::quote(value),
        }
    }

    /// Parses a command-line value of this flag of type `T`, checking its range.
    fn parse_in<T: std::str::FromStr>(
        self,
        s: &str,
        ok: impl Fn(&T) -> bool,
    ) -> Result<T, FlagError> {
        s.trim()
            .parse::<T>()
            .ok()
            .filter(ok)
            .ok_or_else(|| self.error(s))
    }
}

impl fmt::Display for Flag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A flag value outside the flag's range (or not a number).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{flag} must be {} (got {value})", flag.accepts())]
pub struct FlagError {
    /// The flag.
    pub flag: Flag,
    /// The value given, quoted and shortened.
    pub value: String,
}

/// Parses `--burst`.
pub fn parse_burst(s: &str) -> Result<i32, FlagError> {
    Flag::Burst.parse_in(s, |v: &i32| *v >= 1)
}

/// Parses `--qps` (a 32-bit float, as client-go's option: `1e39` is out of range).
pub fn parse_qps(s: &str) -> Result<f32, FlagError> {
    Flag::Qps.parse_in(s, |v: &f32| qps_ok(*v))
}

/// Parses `--max-events`.
pub fn parse_max_events(s: &str) -> Result<i64, FlagError> {
    Flag::MaxEvents.parse_in(s, |v: &i64| *v >= 1)
}

/// Parses `--max-interval`.
pub fn parse_max_interval(s: &str) -> Result<i64, FlagError> {
    Flag::MaxInterval.parse_in(s, |v: &i64| *v >= 1)
}

/// Parses `--lru`.
pub fn parse_lru(s: &str) -> Result<i64, FlagError> {
    Flag::Lru.parse_in(s, |v: &i64| *v >= 1)
}

/// Parses `--max-occurrences`.
pub fn parse_max_occurrences(s: &str) -> Result<u64, FlagError> {
    Flag::MaxOccurrences.parse_in(s, |v: &u64| *v >= 1)
}

/// Parses `--max-line-bytes`.
pub fn parse_max_line_bytes(s: &str) -> Result<usize, FlagError> {
    Flag::MaxLineBytes.parse_in(s, |v: &usize| (1..=MAX_MAX_LINE_BYTES).contains(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers_accept_exactly_the_documented_range() {
        assert_eq!(parse_burst("1"), Ok(1));
        assert_eq!(parse_burst("2147483647"), Ok(i32::MAX));
        for bad in ["0", "-1", "2147483648", "", "1.5", "x"] {
            let e = parse_burst(bad).unwrap_err();
            assert_eq!(e.flag, Flag::Burst, "{bad}");
        }
        assert_eq!(parse_qps("0.1"), Ok(0.1));
        assert_eq!(parse_qps("3.4e38"), Ok(3.4e38));
        for bad in [
            "0", "-0", "-1", "NaN", "nan", "inf", "-inf", "1e39", "1e-50",
        ] {
            assert!(parse_qps(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_lru("9223372036854775807"), Ok(i64::MAX));
        assert!(parse_lru("0").is_err());
        assert!(parse_max_events("-10").is_err());
        assert!(parse_max_interval("0").is_err());
        assert_eq!(parse_max_occurrences("18446744073709551615"), Ok(u64::MAX));
        assert!(parse_max_occurrences("0").is_err());
        assert_eq!(parse_max_line_bytes("1073741824"), Ok(1 << 30));
        assert!(parse_max_line_bytes("1073741825").is_err());
    }

    #[test]
    fn validate_names_the_flag_and_its_range() {
        let o = ReplayOptions {
            qps: Some(f32::NAN),
            ..Default::default()
        };
        let e = o.correlator_options().unwrap_err();
        assert_eq!(e.flag, Flag::Qps);
        assert_eq!(
            e.to_string(),
            "--qps must be a finite number greater than 0 (and at most 3.4e38) (got \"NaN\")"
        );
        let o = ReplayOptions {
            max_line_bytes: 0,
            ..Default::default()
        };
        assert_eq!(o.validate().unwrap_err().flag, Flag::MaxLineBytes);
        assert!(ReplayOptions::default().validate().is_ok());
    }
}
