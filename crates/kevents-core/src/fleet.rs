//! The write law a fleet of processes shares when they write to one apiserver under one
//! limit ([`FleetLaw`]), and what a member of such a fleet does ([`FleetMember`]).
//!
//! Budgets that adapt alone learn their share of a limit only from the 429s each meets; a
//! thousand of them at a write a second each cannot learn it without a 429 in every few of
//! their writes (docs/semantics.md, "Fleets that share their law"). A fleet that shares its
//! law sends at one rate: the member that meets a 429 decides the next epoch's law and
//! writes it where every member reads it (a coordination.k8s.io Lease:
//! `kevents_runtime::fleet::FleetLease`), and every member follows it from then on. The law
//! is a function of time, so an epoch costs one write to the Lease, whatever the growth.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use kevents_core::fleet::{FleetLaw, FleetPhase};
//!
//! let law = FleetLaw {
//!     epoch: 7,
//!     phase: FleetPhase::Adapted,
//!     from: 12.5,
//!     since_micros: 1_764_400_000_000_000,
//! };
//! let text = law.to_annotation();
//! assert_eq!(FleetLaw::from_annotation(&text)?, law);
//! assert_eq!(law.since(), SystemTime::UNIX_EPOCH + Duration::from_micros(1_764_400_000_000_000));
//! assert!(FleetLaw::from_annotation(r#"{"epoch":1,"phase":"Adapted","from":-1,"sinceMicros":0}"#).is_err());
//! # Ok::<(), kevents_core::fleet::FleetLawError>(())
//! ```

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The annotation of the Lease that holds a fleet's law (the law's JSON).
pub const FLEET_LAW_ANNOTATION: &str = "kevents.io/fleet-law";

/// The most writes per second a law may give (a larger one is refused as garbage).
pub const MAX_FLEET_RATE: f64 = 1e9;

/// The lowest rate a law read from others may give (writes per second): a write budget's own
/// minimum, so that no law makes a member slower than adapting alone would. A lower one is
/// raised to it ([`FleetLaw::bounded`]).
pub const FLEET_MIN_RATE: f64 = 0.2;

/// How far past the highest epoch a member has seen a law read from others may jump: an
/// honest fleet moves one epoch per decrease, so a jump of 2^32 never happens in good faith
/// (a law at epoch `u64::MAX` would leave no later epoch to replace it).
pub const MAX_FLEET_EPOCH_JUMP: u64 = 1 << 32;

/// How far in the future (by the reader's clock) a law's start may lie: clock skew between
/// members, not more ([`FleetLaw::bounded`]).
pub const MAX_FLEET_LAW_AHEAD: Duration = Duration::from_secs(60);

/// A member's proposal is written after a random wait of up to this long, unless a law of
/// its epoch or a later one arrives first: members of a fleet meet their 429s together and
/// decide the same epoch at once; the first write reaches the others within milliseconds and
/// theirs need not be sent (each would be a conflict and a read). Used by kevents-runtime's
/// Lease link and kevents-sim's `MemoryLease`.
pub const FLEET_WRITE_SPREAD: Duration = Duration::from_millis(50);

/// In an adapted epoch every member's rate grows in time from the epoch's start, by this part
/// of the epoch's rate a second (the growth doubling every second past 12 s without a 429):
/// back from a decrease by 0.8 in 5 s.
pub const FLEET_GROWTH: f64 = 0.05;

/// A member ends slow start at the rate its own writes were accepted at when it has at least
/// this many of them...
pub const FLEET_EXIT_SAMPLE: u64 = 4;

/// ...else at this part of the rate reached (two doublings back: the server's burst lets a
/// fleet's slow start overshoot its limit by more than one).
pub const FLEET_EXIT_UNSAMPLED: f64 = 0.25;

/// Where a fleet's law is in an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FleetPhase {
    /// The rate doubles every 250 ms from `from` at `since`, until a 429.
    SlowStart,
    /// The rate grows from `from` at `since` by 5 % of `from` a second (the growth doubling
    /// every second past 12 s), until a 429.
    Adapted,
}

/// One epoch of the law every member of a fleet writes at: a rate per member that is a
/// function of time. An epoch begins at a decrease (a member met a 429); a law replaces
/// one of a lower epoch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetLaw {
    /// The epoch: one more at every decrease.
    pub epoch: u64,
    /// Slow start or adapted.
    pub phase: FleetPhase,
    /// Writes per second of each member at `since`.
    pub from: f64,
    /// When the epoch began, in microseconds since the Unix epoch (the members' clocks:
    /// a skew of 100 ms moves an adapted rate by half a percent).
    pub since_micros: i64,
}

/// A law that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FleetLawError {
    /// Not the law's JSON.
    #[error("the fleet law is not valid JSON of a law: {0}")]
    Json(String),
    /// A rate that is not a number of writes per second.
    #[error(
        "the fleet law's rate {0} is not above 0 and at most {MAX_FLEET_RATE} writes per second"
    )]
    Rate(String),
    /// An epoch too far past the highest seen ([`MAX_FLEET_EPOCH_JUMP`]).
    #[error("the fleet law's epoch {epoch} jumps more than 2^32 past the highest seen ({highest})")]
    Epoch {
        /// The law's epoch.
        epoch: u64,
        /// The highest epoch the reader had seen.
        highest: u64,
    },
    /// A start too far in the future ([`MAX_FLEET_LAW_AHEAD`]).
    #[error("the fleet law starts {0:?} in the future (more than the 60 s of clock skew allowed)")]
    Ahead(Duration),
}

impl FleetLaw {
    /// When the epoch began.
    pub fn since(&self) -> SystemTime {
        let d = Duration::from_micros(self.since_micros.unsigned_abs());
        if self.since_micros >= 0 {
            UNIX_EPOCH + d
        } else {
            UNIX_EPOCH - d
        }
    }

    /// The microseconds since the Unix epoch of `t` (saturated).
    pub fn micros_of(t: SystemTime) -> i64 {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
            Err(e) => i64::try_from(e.duration().as_micros()).map_or(i64::MIN, |m| -m),
        }
    }

    /// The law as the Lease's annotation holds it (its JSON).
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads a law from the Lease's annotation, checked: a rate above 0 and at most
    /// [`MAX_FLEET_RATE`].
    pub fn from_annotation(text: &str) -> Result<FleetLaw, FleetLawError> {
        let law: FleetLaw =
            serde_json::from_str(text).map_err(|e| FleetLawError::Json(e.to_string()))?;
        if !(law.from > 0.0 && law.from <= MAX_FLEET_RATE) {
            return Err(FleetLawError::Rate(law.from.to_string()));
        }
        Ok(law)
    }

    /// The law as a member may follow it when others wrote it, given the highest epoch the
    /// member has seen and its clock: refused when its epoch jumps more than
    /// [`MAX_FLEET_EPOCH_JUMP`] past `highest` or it starts more than [`MAX_FLEET_LAW_AHEAD`]
    /// after `now`; its rate raised to [`FLEET_MIN_RATE`] if lower (`true`: it was). A law
    /// read from a Lease anyone with rights can write must never leave a member slower than
    /// it would be adapting alone.
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use kevents_core::fleet::{FleetLaw, FleetLawError, FleetPhase, FLEET_MIN_RATE};
    /// let now = SystemTime::now();
    /// let law = FleetLaw { epoch: u64::MAX, phase: FleetPhase::Adapted, from: 1e-9,
    ///                      since_micros: FleetLaw::micros_of(now) };
    /// assert!(matches!(law.bounded(3, now), Err(FleetLawError::Epoch { .. })));
    /// let slow = FleetLaw { epoch: 4, ..law };
    /// let (followed, raised) = slow.bounded(3, now).unwrap();
    /// assert!(raised && followed.from == FLEET_MIN_RATE);
    /// ```
    pub fn bounded(self, highest: u64, now: SystemTime) -> Result<(FleetLaw, bool), FleetLawError> {
        if self.epoch > highest.saturating_add(MAX_FLEET_EPOCH_JUMP) {
            return Err(FleetLawError::Epoch {
                epoch: self.epoch,
                highest,
            });
        }
        if let Ok(ahead) = self.since().duration_since(now)
            && ahead > MAX_FLEET_LAW_AHEAD
        {
            return Err(FleetLawError::Ahead(ahead));
        }
        if self.from < FLEET_MIN_RATE {
            return Ok((
                FleetLaw {
                    from: FLEET_MIN_RATE,
                    ..self
                },
                true,
            ));
        }
        Ok((self, false))
    }
}

/// A member of a fleet that shares its law: a write budget
/// (`kevents_actors::WriteBudget::join_fleet`), driven by the link that keeps the shared
/// copy (`kevents_runtime::fleet::FleetLease`, or a simulator's).
pub trait FleetMember: Send + 'static {
    /// Follows `law` if it is newer than the one followed (a higher epoch, or the same
    /// epoch decided by another member); an older one is ignored.
    fn adopt(&self, law: &FleetLaw);

    /// The next law this member moved to on its own (after a 429 in the current epoch),
    /// for the others to follow; only the latest counts when several came meanwhile.
    /// `None`: the member is gone (its budget dropped).
    fn proposal(&mut self) -> impl Future<Output = Option<FleetLaw>> + Send;
}
