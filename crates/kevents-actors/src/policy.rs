//! The pipeline's shared vocabulary: how each bounded queue behaves when full
//! ([`IntakePolicy`], [`WatcherPolicy`]) and how a failed write is retried ([`RetryPolicy`],
//! [`Classifier`]). Every stage reads these; none of them knows about a stage.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kevents_core::{Disposition, SinkError};

/// The default bound of an overflow table (coalesce-if-full): 65 536 entries, one per
/// distinct event identity, each about twice the occurrence's strings plus 250 bytes
/// (docs/semantics.md), so a full table of typical events holds some 25 MiB.
pub const DEFAULT_OVERFLOW_ENTRIES: usize = 65_536;

/// The intake's bound.
///
/// ```
/// use kevents_actors::{IntakePolicy, DEFAULT_OVERFLOW_ENTRIES};
/// assert_eq!(
///     IntakePolicy::default(),
///     IntakePolicy::CoalesceIfFull { capacity: 1000, overflow: DEFAULT_OVERFLOW_ENTRIES },
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntakePolicy {
    /// At most `capacity` occurrences wait in the intake (exactly: a count checked under the
    /// intake queue's lock, not the actix mailbox); a call that finds it full returns
    /// [`Emit::Dropped`](crate::Emit::Dropped) and is counted.
    DropIfFull {
        /// Slots in the intake (at least 1).
        capacity: usize,
    },
    /// No bound: nothing is ever dropped at the intake; memory grows with the backlog.
    Unbounded,
    /// At most `capacity` occurrences wait in the intake; while it is full, a call is merged
    /// into an overflow table of at most `overflow` entries, keyed by the call's identity
    /// (object, type, reason, message, annotations): a repeat of an identity already held
    /// adds one to its multiplicity and moves its newest instant. The table drains, in the
    /// order identities first overflowed, once the intake is empty, and each entry goes
    /// through the correlators as the occurrences it stands for. A new identity that finds
    /// the table full is dropped and counted as `intake_full`. The caller never waits: the
    /// table's lock is held for one hash-map update.
    CoalesceIfFull {
        /// Slots in the intake (at least 1).
        capacity: usize,
        /// Entries in the overflow table (at least 1).
        overflow: usize,
    },
}

impl Default for IntakePolicy {
    /// Coalesce-if-full with 1000 slots (client-go 1.21+'s incoming queue size) and
    /// [`DEFAULT_OVERFLOW_ENTRIES`] overflow entries. `DropIfFull { capacity: 1000 }` is
    /// client-go's behaviour.
    fn default() -> Self {
        IntakePolicy::CoalesceIfFull {
            capacity: 1000,
            overflow: DEFAULT_OVERFLOW_ENTRIES,
        }
    }
}

/// A queue bound that cannot work: a zero capacity or a zero overflow table, which would
/// drop (or merge) almost every event. [`PipelineBuilder::try_start`](crate::PipelineBuilder::try_start)
/// refuses it ([`StartError::Policy`](crate::StartError::Policy)).
///
/// ```
/// use kevents_actors::{IntakePolicy, PolicyError, WatcherPolicy};
/// assert_eq!(
///     WatcherPolicy::DropIfFull { capacity: 0 }.check(),
///     Err(PolicyError { field: "capacity" }),
/// );
/// assert!(IntakePolicy::default().check().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{field} must be at least 1 (got 0)")]
pub struct PolicyError {
    /// The field that is 0: `capacity` or `overflow`.
    pub field: &'static str,
}

/// `Err` naming the first of `fields` that is 0.
fn at_least_one(fields: &[(&'static str, usize)]) -> Result<(), PolicyError> {
    match fields.iter().find(|f| f.1 == 0) {
        Some(&(field, _)) => Err(PolicyError { field }),
        None => Ok(()),
    }
}

impl IntakePolicy {
    /// Whether this bound can work: every capacity and overflow table at least 1.
    ///
    /// ```
    /// use kevents_actors::IntakePolicy;
    /// assert!(IntakePolicy::CoalesceIfFull { capacity: 1, overflow: 0 }.check().is_err());
    /// assert!(IntakePolicy::Unbounded.check().is_ok());
    /// ```
    pub fn check(&self) -> Result<(), PolicyError> {
        match *self {
            IntakePolicy::DropIfFull { capacity } => at_least_one(&[("capacity", capacity)]),
            IntakePolicy::Unbounded => Ok(()),
            IntakePolicy::CoalesceIfFull { capacity, overflow } => {
                at_least_one(&[("capacity", capacity), ("overflow", overflow)])
            }
        }
    }

    /// `drop_if_full`, `unbounded` or `coalesce_if_full`.
    pub fn as_str(&self) -> &'static str {
        match self {
            IntakePolicy::DropIfFull { .. } => "drop_if_full",
            IntakePolicy::Unbounded => "unbounded",
            IntakePolicy::CoalesceIfFull { .. } => "coalesce_if_full",
        }
    }
}

/// How events reach one watcher. Every policy puts a bounded queue in front of the watcher;
/// the bound is exact (a semaphore of `capacity` slots, each held by one message until the
/// watcher drops it), independent of actix's mailbox capacity.
///
/// ```
/// use kevents_actors::WatcherPolicy;
/// let p = WatcherPolicy::DropIfFull { capacity: 1000 };
/// assert_eq!(p.capacity(), 1000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatcherPolicy {
    /// At most once: when the watcher has `capacity` events queued, further events are
    /// dropped for this watcher only and counted. The broadcaster never waits, so a slow
    /// watcher never slows the others (client-go's only policy, but counted here).
    DropIfFull {
        /// Slots in the watcher's queue.
        capacity: usize,
    },
    /// Exactly once: when the queue is full the broadcaster waits for a free slot. That
    /// holds every other watcher back too and makes the intake fill up, whose own policy
    /// then decides.
    Backpressure {
        /// Slots in the watcher's queue.
        capacity: usize,
    },
    /// Exact counts, never waiting: when the queue is full, the event is merged into this
    /// watcher's overflow table of at most `overflow` entries, keyed by the event's identity
    /// (see [`IntakePolicy::CoalesceIfFull`]); while the table holds anything, later events
    /// are merged behind it, so the watcher still sees events in order. The table drains as
    /// slots come back, each entry as one [`EventMessage`](crate::EventMessage) whose
    /// [`occurrences`](crate::EventMessage::occurrences) counts the merged repeats. A new
    /// identity that finds the table full is dropped and counted as `full`. The default of
    /// sink chains ([`WatcherPolicy::sink_default`]).
    CoalesceIfFull {
        /// Slots in the watcher's queue.
        capacity: usize,
        /// Entries in the overflow table (at least 1).
        overflow: usize,
    },
}

impl Default for WatcherPolicy {
    /// Drop-if-full with 1000 slots, client-go's watcher queue size (for your own watchers
    /// and the logging watcher; sink chains use [`WatcherPolicy::sink_default`]).
    fn default() -> Self {
        WatcherPolicy::DropIfFull { capacity: 1000 }
    }
}

impl WatcherPolicy {
    /// What sink chains use unless told otherwise: coalesce-if-full with 1000 slots and
    /// [`DEFAULT_OVERFLOW_ENTRIES`] overflow entries, so a burst ends in exact counts instead
    /// of drops.
    ///
    /// ```
    /// use kevents_actors::{SinkOptions, WatcherPolicy};
    /// assert_eq!(SinkOptions::default().delivery, WatcherPolicy::sink_default());
    /// ```
    pub const fn sink_default() -> Self {
        WatcherPolicy::CoalesceIfFull {
            capacity: 1000,
            overflow: DEFAULT_OVERFLOW_ENTRIES,
        }
    }

    /// Whether this bound can work: the capacity and overflow table at least 1.
    ///
    /// ```
    /// use kevents_actors::WatcherPolicy;
    /// assert!(WatcherPolicy::Backpressure { capacity: 0 }.check().is_err());
    /// assert!(WatcherPolicy::sink_default().check().is_ok());
    /// ```
    pub fn check(&self) -> Result<(), PolicyError> {
        match *self {
            WatcherPolicy::DropIfFull { capacity } | WatcherPolicy::Backpressure { capacity } => {
                at_least_one(&[("capacity", capacity)])
            }
            WatcherPolicy::CoalesceIfFull { capacity, overflow } => {
                at_least_one(&[("capacity", capacity), ("overflow", overflow)])
            }
        }
    }

    /// The number of slots (at least 1: a pipeline refuses a zero capacity when it starts,
    /// [`check`](Self::check)).
    pub fn capacity(&self) -> usize {
        let c = match *self {
            WatcherPolicy::DropIfFull { capacity }
            | WatcherPolicy::Backpressure { capacity }
            | WatcherPolicy::CoalesceIfFull { capacity, .. } => capacity,
        };
        c.clamp(
            1,
            (u32::MAX as usize).min(tokio::sync::Semaphore::MAX_PERMITS),
        )
    }

    /// The overflow table's bound, for a coalesce-if-full queue.
    pub fn overflow(&self) -> Option<usize> {
        match *self {
            WatcherPolicy::CoalesceIfFull { overflow, .. } => Some(overflow.max(1)),
            _ => None,
        }
    }

    /// `drop_if_full`, `backpressure` or `coalesce_if_full`.
    pub fn as_str(&self) -> &'static str {
        match self {
            WatcherPolicy::DropIfFull { .. } => "drop_if_full",
            WatcherPolicy::Backpressure { .. } => "backpressure",
            WatcherPolicy::CoalesceIfFull { .. } => "coalesce_if_full",
        }
    }
}

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
/// sink actor is then restarted (rebuilding the sink if a factory was given) and the write is
/// tried again.
pub type FatalFn = Arc<dyn Fn(&SinkError) -> bool + Send + Sync>;

/// How a write is retried. The defaults are client-go's (`tools/record/event.go`,
/// `maxTriesPerEvent` and `sleepDuration`): 12 attempts in total, the first sleep random in
/// `[0, 10 s)`, then 10 s; but with kevents' error classification (429 and 5xx are retried
/// too) and the server's `Retry-After` honoured.
///
/// ```
/// use kevents_actors::RetryPolicy;
/// use std::time::Duration;
/// let p = RetryPolicy::default();
/// assert_eq!((p.max_attempts, p.sleep, p.randomize_first), (12, Duration::from_secs(10), true));
/// let fast = RetryPolicy { sleep: Duration::ZERO, ..RetryPolicy::default() };
/// # let _ = fast;
/// ```
///
/// A server's `Retry-After` is kept within `[min_retry_after, max_retry_after]` (1 s and
/// 60 s by default), so `Retry-After: 0` cannot spend the whole budget at once.
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
    /// Lower bound on a `Retry-After` sleep (default 1 s): a server answering
    /// `Retry-After: 0` would otherwise use up every attempt within moments.
    pub min_retry_after: Duration,
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
            min_retry_after: Duration::from_secs(1),
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
            .field("min_retry_after", &self.min_retry_after)
            .field("classifier", &self.classifier)
            .field("fatal", &self.fatal.as_ref().map(|_| "custom"))
            .finish()
    }
}

impl RetryPolicy {
    /// Attempts per write (at least 1).
    pub(crate) fn attempts(&self) -> u32 {
        self.max_attempts.max(1)
    }

    /// The sleep before attempt `next` (2 for the first retry) after `err`. `paced`: the
    /// write's budget paces it (an enabled [`WriteBudget`](crate::WriteBudget), which a 429
    /// has already paused).
    ///
    /// A 429 is never slept on like a transport error: with `Retry-After` the write sleeps
    /// that long (within `[min_retry_after, max_retry_after]`); without it (EventRateLimit
    /// never sends one) a paced write is tried again as soon as its budget's pause ends
    /// (no sleep of its own), an unpaced one after `min_retry_after`.
    pub(crate) fn delay(&self, next: u32, err: Option<&SinkError>, paced: bool) -> Duration {
        if self.honour_retry_after
            && let Some(d) = err.and_then(SinkError::retry_after)
        {
            return d.max(self.min_retry_after).min(self.max_retry_after);
        }
        if err.is_some_and(|e| matches!(e, SinkError::Status(s) if s.code == 429)) {
            return if paced {
                Duration::ZERO
            } else {
                self.min_retry_after
            };
        }
        if next == 2 && self.randomize_first {
            self.sleep.mul_f64(fastrand::f64())
        } else {
            self.sleep
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevents_core::Status;

    fn too_many(retry_after_secs: u64) -> SinkError {
        let mut s = Status::failure(429, "TooManyRequests", "slow down");
        s.retry_after = Some(Duration::from_secs(retry_after_secs));
        SinkError::Status(Box::new(s))
    }

    #[test]
    fn retry_after_is_kept_within_its_bounds() {
        let p = RetryPolicy::default();
        assert_eq!(p.delay(3, Some(&too_many(0)), true), Duration::from_secs(1));
        assert_eq!(p.delay(3, Some(&too_many(5)), true), Duration::from_secs(5));
        assert_eq!(
            p.delay(3, Some(&too_many(3600)), true),
            Duration::from_secs(60)
        );
        let no_floor = RetryPolicy {
            min_retry_after: Duration::ZERO,
            ..RetryPolicy::default()
        };
        assert_eq!(no_floor.delay(3, Some(&too_many(0)), true), Duration::ZERO);
    }

    /// A 429 without `Retry-After` (EventRateLimit's) is not slept on like a transport
    /// error (0-10 s, then 10 s): a paced write goes again when its budget's pause ends, an
    /// unpaced one after `min_retry_after`. Other errors keep client-go's sleeps.
    #[test]
    fn a_429_without_retry_after_waits_for_the_budget_not_the_error_sleep() {
        let p = RetryPolicy::default();
        let throttled = SinkError::Status(Box::new(Status::failure(
            429,
            "TooManyRequests",
            "Too many requests: limit reached on type Namespace for key ns",
        )));
        for next in [2, 3, 7] {
            assert_eq!(p.delay(next, Some(&throttled), true), Duration::ZERO);
            assert_eq!(
                p.delay(next, Some(&throttled), false),
                Duration::from_secs(1)
            );
        }
        let reset = SinkError::Transport("connection reset".into());
        assert_eq!(p.delay(3, Some(&reset), true), Duration::from_secs(10));
        assert!(p.delay(2, Some(&reset), true) < Duration::from_secs(10));
    }
}
