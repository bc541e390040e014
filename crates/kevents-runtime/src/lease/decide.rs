//! The election's decisions without I/O (client-go's `tryAcquireOrRenew` and `release`,
//! their record-keeping), each step given the time: the monotonic instant at which the Lease
//! was read (the observed time, on the local clock) and the wall time written into the record.

use std::time::{Duration, Instant};

use kevents_core::Time;

use super::record::{LeaseRecord, shown_holder};

/// What to do after reading the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// There is no Lease: create it holding this record.
    Create(LeaseRecord),
    /// Another candidate holds the Lease and it has not expired.
    Wait {
        /// Its holder.
        holder: String,
    },
    /// Write this record over the Lease read (its resourceVersion checked).
    Update(LeaseRecord),
}

/// One candidate's view of the election: the record last observed and when it was last seen
/// changing, on the local monotonic clock (client-go's `observedRecord`, `observedTime`).
#[derive(Debug, Clone)]
pub(crate) struct Election {
    identity: String,
    lease_seconds: i32,
    observed: Option<LeaseRecord>,
    observed_time: Option<Instant>,
    /// The record this candidate last wrote, and the one it is writing (whose answer may be
    /// lost): a record naming this candidate that is neither was written by another process
    /// under the same identity.
    last_written: Option<LeaseRecord>,
    pending: Option<LeaseRecord>,
    /// How many such records were read.
    foreign_renewals: u64,
}

/// Whether `a` and `b` are the same write as the apiserver stores it (times at microsecond
/// precision, a Lease's `MicroTime`; the raw bytes and readability aside).
fn same_write(a: &LeaseRecord, b: &LeaseRecord) -> bool {
    let micros = |t: Option<Time>| t.map(|t| t.to_rfc3339_micros());
    a.holder_identity == b.holder_identity
        && a.lease_duration_seconds == b.lease_duration_seconds
        && a.lease_transitions == b.lease_transitions
        && micros(a.acquire_time) == micros(b.acquire_time)
        && micros(a.renew_time) == micros(b.renew_time)
}

impl Election {
    /// A candidate named `identity` that writes `leaseDurationSeconds` = `lease_seconds`.
    pub(crate) fn new(identity: String, lease_seconds: i32) -> Self {
        Election {
            identity,
            lease_seconds,
            observed: None,
            observed_time: None,
            last_written: None,
            pending: None,
            foreign_renewals: 0,
        }
    }

    /// How many records naming this candidate were read that it did not write: another
    /// process runs with the same identity (both believe they lead; client-go cannot tell
    /// either).
    pub(crate) fn foreign_renewals(&self) -> u64 {
        self.foreign_renewals
    }

    /// Whether the record last observed names this candidate (client-go's `IsLeader`); a
    /// record that could not be read in full names nobody.
    pub(crate) fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|r| r.unreadable.is_none() && r.holder_identity == self.identity)
    }

    /// The observed record's holder (empty: nobody).
    pub(crate) fn holder(&self) -> &str {
        self.observed
            .as_ref()
            .map_or("", |r| r.holder_identity.as_str())
    }

    /// Whether the observed lease is still valid at `now`: observed time plus the observed
    /// record's `leaseDurationSeconds` is after `now` (client-go's `isLeaseValid`).
    fn lease_valid(&self, now: Instant) -> bool {
        match (&self.observed, self.observed_time) {
            (Some(r), Some(t)) => {
                let d = Duration::from_secs(u64::try_from(r.lease_duration_seconds).unwrap_or(0));
                t.checked_add(d).is_some_and(|end| end > now)
            }
            _ => false,
        }
    }

    /// The decision on the Lease read at `now` (`None`: not found), the record to write
    /// stamped with `wall`.
    pub(crate) fn step(&mut self, now: Instant, wall: Time, current: Option<&LeaseRecord>) -> Step {
        let mut record = LeaseRecord {
            holder_identity: self.identity.clone(),
            lease_duration_seconds: self.lease_seconds,
            acquire_time: Some(wall),
            renew_time: Some(wall),
            lease_transitions: 0,
            ..LeaseRecord::default()
        };
        let Some(old) = current else {
            self.pending = Some(record.clone());
            return Step::Create(record);
        };
        let ours = self
            .last_written
            .as_ref()
            .is_some_and(|w| w.holder_identity == self.identity);
        if ours
            && old.unreadable.is_none()
            && old.holder_identity == self.identity
            && !self
                .last_written
                .as_ref()
                .is_some_and(|w| same_write(w, old))
            && !self.pending.as_ref().is_some_and(|p| same_write(p, old))
        {
            self.foreign_renewals = self.foreign_renewals.saturating_add(1);
        }
        self.observe(now, old);
        if !old.holder_identity.is_empty() && self.lease_valid(now) && !self.is_leader() {
            return Step::Wait {
                holder: shown_holder(&old.holder_identity),
            };
        }
        if self.is_leader() {
            record.acquire_time = old.acquire_time;
            record.lease_transitions = old.lease_transitions;
        } else {
            record.lease_transitions = old.lease_transitions.saturating_add(1);
        }
        self.pending = Some(record.clone());
        Step::Update(record)
    }

    /// The Lease read at `now` holds `record`: the observed time moves only when the record
    /// changed.
    pub(crate) fn observe(&mut self, now: Instant, record: &LeaseRecord) {
        if self.observed.as_ref() != Some(record) {
            self.observed = Some(record.clone());
            self.observed_time = Some(now);
        }
    }

    /// `record` was written at `now` (client-go's `setObservedRecord`).
    pub(crate) fn written(&mut self, now: Instant, record: LeaseRecord) {
        self.pending = None;
        self.last_written = Some(record.clone());
        self.observed = Some(record);
        self.observed_time = Some(now);
    }

    /// The record that gives the Lease up (client-go's `release`): no holder, a lease of
    /// one second, the transitions kept; `None` when not leading.
    pub(crate) fn release_record(&self, wall: Time) -> Option<LeaseRecord> {
        let observed = self.observed.as_ref().filter(|_| self.is_leader())?;
        Some(LeaseRecord {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(wall),
            renew_time: Some(wall),
            lease_transitions: observed.lease_transitions,
            ..LeaseRecord::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wall(s: i64) -> Time {
        Time::from_unix_secs(1_700_000_000 + s)
    }

    fn held_by(holder: &str, transitions: i32, renewed: i64) -> LeaseRecord {
        LeaseRecord {
            holder_identity: holder.into(),
            lease_duration_seconds: 15,
            acquire_time: Some(wall(0)),
            renew_time: Some(wall(renewed)),
            lease_transitions: transitions,
            ..LeaseRecord::default()
        }
    }

    #[test]
    fn a_missing_lease_is_created_with_no_transition() {
        let mut e = Election::new("a".into(), 15);
        let t0 = Instant::now();
        let Step::Create(r) = e.step(t0, wall(0), None) else {
            panic!("create")
        };
        assert_eq!(r.holder_identity, "a");
        assert_eq!(r.lease_duration_seconds, 15);
        assert_eq!(r.lease_transitions, 0);
        assert!(!e.is_leader());
        e.written(t0, r);
        assert!(e.is_leader());
    }

    #[test]
    fn a_held_lease_waits_until_unchanged_for_its_duration_on_the_local_clock() {
        let mut e = Election::new("b".into(), 15);
        let t0 = Instant::now();
        let other = held_by("a", 0, 0);
        assert_eq!(
            e.step(t0, wall(0), Some(&other)),
            Step::Wait { holder: "a".into() }
        );
        // The holder's renewTime is far in the past by the wall clock: only the local
        // observation counts (clock skew between machines does not matter).
        let old = held_by("a", 0, -3600);
        let mut e = Election::new("b".into(), 15);
        assert!(matches!(e.step(t0, wall(0), Some(&old)), Step::Wait { .. }));
        // Unchanged for 14.9 s: still waits; at 15 s: takes over, one more transition.
        assert!(matches!(
            e.step(t0 + Duration::from_millis(14_900), wall(15), Some(&old)),
            Step::Wait { .. }
        ));
        let Step::Update(r) = e.step(t0 + Duration::from_secs(15), wall(15), Some(&old)) else {
            panic!("update")
        };
        assert_eq!(r.holder_identity, "b");
        assert_eq!(r.lease_transitions, 1);
        assert_eq!(r.acquire_time, Some(wall(15)));
    }

    #[test]
    fn a_renewal_seen_restarts_the_wait() {
        let mut e = Election::new("b".into(), 15);
        let t0 = Instant::now();
        assert!(matches!(
            e.step(t0, wall(0), Some(&held_by("a", 0, 0))),
            Step::Wait { .. }
        ));
        let renewed = held_by("a", 0, 10);
        assert!(matches!(
            e.step(t0 + Duration::from_secs(10), wall(10), Some(&renewed)),
            Step::Wait { .. }
        ));
        assert!(matches!(
            e.step(t0 + Duration::from_secs(24), wall(24), Some(&renewed)),
            Step::Wait { .. }
        ));
        assert!(matches!(
            e.step(t0 + Duration::from_secs(25), wall(25), Some(&renewed)),
            Step::Update(_)
        ));
    }

    #[test]
    fn the_leader_renews_keeping_acquire_time_and_transitions() {
        let mut e = Election::new("a".into(), 15);
        let t0 = Instant::now();
        let mine = held_by("a", 4, 0);
        e.written(t0, mine.clone());
        let Step::Update(r) = e.step(t0 + Duration::from_secs(2), wall(2), Some(&mine)) else {
            panic!("renew")
        };
        assert_eq!(r.acquire_time, Some(wall(0)));
        assert_eq!(r.renew_time, Some(wall(2)));
        assert_eq!(r.lease_transitions, 4);
    }

    #[test]
    fn a_leader_that_sees_another_holder_is_no_longer_leader() {
        let mut e = Election::new("a".into(), 15);
        let t0 = Instant::now();
        e.written(t0, held_by("a", 0, 0));
        assert!(e.is_leader());
        assert_eq!(
            e.step(
                t0 + Duration::from_secs(1),
                wall(1),
                Some(&held_by("b", 1, 1))
            ),
            Step::Wait { holder: "b".into() }
        );
        assert!(!e.is_leader());
        assert_eq!(e.holder(), "b");
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let mut a = Election::new("a".into(), 15);
        let t0 = Instant::now();
        a.written(t0, held_by("a", 2, 0));
        let released = a.release_record(wall(1)).expect("leading");
        assert_eq!(released.holder_identity, "");
        assert_eq!(released.lease_duration_seconds, 1);
        assert_eq!(released.lease_transitions, 2);
        let mut b = Election::new("b".into(), 15);
        let Step::Update(r) = b.step(t0, wall(1), Some(&released)) else {
            panic!("taken")
        };
        assert_eq!(r.lease_transitions, 3);
        assert_eq!(b.release_record(wall(1)), None);
    }

    #[test]
    fn an_expired_short_lease_uses_the_records_own_duration() {
        // A lease written with leaseDurationSeconds 1 by a holder still named: expired 1 s
        // after it was observed, whatever this candidate's own duration.
        let mut b = Election::new("b".into(), 15);
        let t0 = Instant::now();
        let short = LeaseRecord {
            lease_duration_seconds: 1,
            ..held_by("a", 0, 0)
        };
        assert!(matches!(
            b.step(t0, wall(0), Some(&short)),
            Step::Wait { .. }
        ));
        assert!(matches!(
            b.step(t0 + Duration::from_secs(1), wall(1), Some(&short)),
            Step::Update(_)
        ));
    }

    #[test]
    fn an_unreadable_record_names_nobody_and_is_taken_over_once_unchanged() {
        // Year 9999 in acquireTime: a valid time kevents' clock cannot hold; the record holds
        // this candidate's own name, yet names nobody it can be.
        let lease = serde_json::json!({ "spec": {
            "holderIdentity": "b", "leaseDurationSeconds": 15,
            "acquireTime": "9999-12-31T23:59:59.000000Z",
            "renewTime": "2026-12-07T10:00:00.000000Z",
        }});
        let old = LeaseRecord::from_lease(&lease, 15);
        assert!(
            old.unreadable
                .as_deref()
                .is_some_and(|w| w.contains("years 1678-2261"))
        );
        let mut b = Election::new("b".into(), 15);
        let t0 = Instant::now();
        assert!(matches!(b.step(t0, wall(0), Some(&old)), Step::Wait { .. }));
        assert!(!b.is_leader());
        let Step::Update(r) = b.step(t0 + Duration::from_secs(15), wall(15), Some(&old)) else {
            panic!("taken over")
        };
        assert_eq!(r.holder_identity, "b");
        assert_eq!(r.acquire_time, Some(wall(15)));
        // A change of the raw bytes alone restarts the wait.
        let mut c = Election::new("c".into(), 15);
        assert!(matches!(c.step(t0, wall(0), Some(&old)), Step::Wait { .. }));
        let changed = LeaseRecord::from_lease(
            &serde_json::json!({ "spec": { "holderIdentity": "b", "leaseDurationSeconds": 15,
                "acquireTime": "9999-12-31T23:59:58.000000Z" }}),
            15,
        );
        assert!(matches!(
            c.step(t0 + Duration::from_secs(10), wall(10), Some(&changed)),
            Step::Wait { .. }
        ));
        assert!(matches!(
            c.step(t0 + Duration::from_secs(24), wall(24), Some(&changed)),
            Step::Wait { .. }
        ));
        assert!(matches!(
            c.step(t0 + Duration::from_secs(25), wall(25), Some(&changed)),
            Step::Update(_)
        ));
    }

    #[test]
    fn a_huge_holder_is_shown_cut() {
        let holder = "x".repeat(1 << 20);
        let lease =
            serde_json::json!({ "spec": { "holderIdentity": holder, "leaseDurationSeconds": 15 }});
        let old = LeaseRecord::from_lease(&lease, 15);
        assert!(old.unreadable.is_some());
        let mut b = Election::new("b".into(), 15);
        let Step::Wait { holder } = b.step(Instant::now(), wall(0), Some(&old)) else {
            panic!("waits")
        };
        assert!(
            holder.len() < 200 && holder.ends_with("(1048576 bytes)"),
            "{holder}"
        );
    }

    #[test]
    fn a_renewal_under_this_identity_not_written_here_is_counted() {
        let mut a = Election::new("a".into(), 15);
        let t0 = Instant::now();
        let Step::Create(mine) = a.step(t0, wall(0), None) else {
            panic!("create")
        };
        a.written(t0, mine.clone());
        // Its own record read back (server times in microseconds): not counted.
        let Step::Update(renewal) = a.step(t0 + Duration::from_secs(2), wall(2), Some(&mine))
        else {
            panic!("renew")
        };
        assert_eq!(a.foreign_renewals(), 0);
        a.written(t0 + Duration::from_secs(2), renewal.clone());
        // Another process named "a" renewed it at 3 s.
        let twin = LeaseRecord {
            renew_time: Some(wall(3)),
            ..renewal
        };
        assert!(matches!(
            a.step(t0 + Duration::from_secs(4), wall(4), Some(&twin)),
            Step::Update(_)
        ));
        assert_eq!(a.foreign_renewals(), 1);
        // A candidate that never wrote counts nothing (a restart under the same name).
        let mut fresh = Election::new("a".into(), 15);
        assert!(matches!(
            fresh.step(t0, wall(5), Some(&twin)),
            Step::Update(_)
        ));
        assert_eq!(fresh.foreign_renewals(), 0);
    }
}
