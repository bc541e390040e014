//! What a shutdown reports.

use std::fmt;

use crate::stats::StatsSnapshot;

/// What [`Pipeline::shutdown`](crate::Pipeline::shutdown) achieved.
///
/// Its `Display` is one paragraph for a log line:
///
/// ```
/// use kevents_actors::{Pipeline, SinkOptions};
/// use kevents_core::{EventSource, EventType, ObjectReference};
/// use kevents_sim::MemoryApiServer;
/// use std::time::Duration;
///
/// let api = MemoryApiServer::new();
/// let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
///     .sink("apiserver", api.clone(), SinkOptions::default())
///     .start();
/// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
/// pipeline.recorder().event(&pod, EventType::Warning, "BackOff", "restarting").unwrap();
/// let report = pipeline.shutdown_blocking(Duration::from_secs(5)).unwrap();
/// assert_eq!(
///     report.to_string(),
///     "kevents shutdown completed: 1 occurrence recorded; 1 write stored (1 created, \
///      0 patched, 0 re-created) by 1 core/v1 sink and 0 events.k8s.io/v1 series sinks; \
///      0 writes failed (0 abandoned at the deadline); 0 occurrences dropped, \
///      0 spam-filtered; nothing pending."
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Everything drained before the deadline.
    pub completed: bool,
    /// Occurrences still in the intake or the broadcaster when the deadline hit.
    pub pending_intake: u64,
    /// Per watcher, occurrences not written by the deadline that no other counter holds:
    /// for a core/v1 sink chain (`sink:<name>`), what its overflow table still held (its
    /// queued writes are counted as `abandoned`, in [`failed`](Self::failed), not here); for
    /// another watcher, what its queue and overflow table held.
    pub pending_watchers: Vec<(String, u64)>,
    /// Actors of the pipeline still alive after the teardown (0 unless the System is
    /// stopping under us).
    pub live_actors: u64,
    /// All counters after the teardown.
    pub stats: StatsSnapshot,
}

impl ShutdownReport {
    /// Writes the server stored, over both chains: the core/v1 sinks'
    /// ([`SinkSnapshot::delivered`](crate::SinkSnapshot::delivered)) and the
    /// events.k8s.io/v1 series sinks' ([`events_v1::SinkSnapshot::delivered`](crate::events_v1::SinkSnapshot::delivered)).
    pub fn delivered(&self) -> u64 {
        self.created() + self.patched() + self.recreated()
    }

    /// Writes given up (rejected, retries exhausted, abandoned at the deadline), over both
    /// chains.
    pub fn failed(&self) -> u64 {
        let s = &self.stats;
        s.sinks.iter().map(|k| k.failed()).sum::<u64>()
            + s.sinks_events_v1.iter().map(|k| k.failed()).sum::<u64>()
    }

    /// Writes still queued or in flight when the deadline hit (part of
    /// [`failed`](Self::failed)), over both chains.
    pub fn abandoned(&self) -> u64 {
        let s = &self.stats;
        s.sinks.iter().map(|k| k.abandoned).sum::<u64>()
            + s.sinks_events_v1.iter().map(|k| k.abandoned).sum::<u64>()
    }

    /// Writes that ended in a CREATE, over both chains.
    pub fn created(&self) -> u64 {
        let s = &self.stats;
        s.sinks.iter().map(|k| k.created).sum::<u64>()
            + s.sinks_events_v1.iter().map(|k| k.created).sum::<u64>()
    }

    /// Writes that ended in a PATCH, over both chains.
    pub fn patched(&self) -> u64 {
        let s = &self.stats;
        s.sinks.iter().map(|k| k.patched).sum::<u64>()
            + s.sinks_events_v1.iter().map(|k| k.patched).sum::<u64>()
    }

    /// PATCHes answered 404 and re-created with their count, over both chains.
    pub fn recreated(&self) -> u64 {
        let s = &self.stats;
        s.sinks.iter().map(|k| k.recreated).sum::<u64>()
            + s.sinks_events_v1.iter().map(|k| k.recreated).sum::<u64>()
    }

    /// Occurrences the server does not have because it refused a write for good (403,
    /// 422, ...), over both chains ([`StatsSnapshot::not_stored`]); the `Display` names
    /// their causes.
    pub fn not_stored(&self) -> u64 {
        self.stats.not_stored()
    }

    /// Occurrences not written by the deadline and counted in no other outcome (the intake,
    /// the watchers' overflow tables, other watchers' queues): with
    /// [`delivered`](Self::delivered), [`failed`](Self::failed) (abandoned writes included),
    /// [`dropped`](Self::dropped), the spam-filtered and the superseded ones, each recorded
    /// occurrence of a core/v1 chain is in exactly one of them.
    pub fn pending(&self) -> u64 {
        self.pending_intake + self.pending_watchers.iter().map(|p| p.1).sum::<u64>()
    }

    /// Occurrences that never reached a sink: refused at the call (invalid, intake full,
    /// after shutdown) or dropped for a watcher. Spam-filtered ones are counted apart
    /// ([`SinkSnapshot::spam_filtered`](crate::SinkSnapshot::spam_filtered)).
    pub fn dropped(&self) -> u64 {
        let s = &self.stats;
        s.dropped_invalid
            + s.dropped_intake_full
            + s.dropped_after_shutdown
            + s.watchers
                .iter()
                .map(|w| w.dropped_full + w.dropped_closed)
                .sum::<u64>()
    }
}

/// Says, once, on stderr and through `tracing`, what a shutdown nobody awaited (a dropped
/// handle) could not store: the application gets no report to read it from.
pub(super) fn warn_of_losses(report: &ShutdownReport, how: &str, deadline: std::time::Duration) {
    if let Some(message) = losses(report, how, deadline) {
        tracing::warn!("{message}");
        eprintln!("{message}");
    }
}

/// The sentence [`warn_of_losses`] says, if anything was lost: in occurrences, with why.
fn losses(report: &ShutdownReport, how: &str, deadline: std::time::Duration) -> Option<String> {
    let s = &report.stats;
    // Occurrences: still queued at the deadline, or counted in a series' memory only.
    let pending = report.pending() + s.sinks_events_v1.iter().map(|k| k.unwritten).sum::<u64>();
    let refused = s.not_stored();
    // Writes given up beyond the refusals (retries exhausted, abandoned at the deadline):
    // their occurrences are in `pending` or were written by a later write of their event.
    let failed = report.failed();
    if pending + refused + failed == 0 {
        return None;
    }
    let mut why = Vec::new();
    if refused > 0 {
        let causes = s.not_stored_by_cause();
        let named: Vec<String> = causes
            .iter()
            .take(SHOWN_CAUSES)
            .map(|(cause, n)| format!("{n} \u{d7} {cause}"))
            .collect();
        let more = causes.len().saturating_sub(SHOWN_CAUSES);
        let more = if more > 0 {
            format!(" and {more} more causes")
        } else {
            String::new()
        };
        why.push(format!(
            "{} refused by the server ({}{more})",
            count(refused, "occurrence"),
            named.join("; ")
        ));
    }
    if pending > 0 {
        why.push(format!(
            "{} not written within the {deadline:?} deadline",
            count(pending, "occurrence")
        ));
    }
    if failed > 0 {
        why.push(format!(
            "{} given up (refused, retries exhausted or abandoned at the deadline)",
            count(failed, "write")
        ));
    }
    Some(format!(
        "kevents: pipeline {how}: counts lost: {}. Call shutdown(deadline) before the \
         process exits to get the report.",
        why.join("; ")
    ))
}

/// Most causes of occurrences not stored the `Display` names (the others are counted).
const SHOWN_CAUSES: usize = 5;

/// `"1 sink"`, `"2 sinks"`.
fn count(n: impl Into<u64>, what: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

impl fmt::Display for ShutdownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        let outcome = if self.completed {
            "completed"
        } else {
            "hit its deadline"
        };
        write!(
            f,
            "kevents shutdown {outcome}: {} recorded; {} stored ({} created, {} patched, {} \
             re-created) by {} and {}; {} failed ({} abandoned at the deadline); {} dropped, \
             {} spam-filtered; ",
            count(s.recorded, "occurrence"),
            count(self.delivered(), "write"),
            self.created(),
            self.patched(),
            self.recreated(),
            count(s.sinks.len() as u64, "core/v1 sink"),
            count(
                s.sinks_events_v1.len() as u64,
                "events.k8s.io/v1 series sink"
            ),
            count(self.failed(), "write"),
            self.abandoned(),
            count(self.dropped(), "occurrence"),
            s.sinks.iter().map(|k| k.spam_filtered).sum::<u64>(),
        )?;
        let not_stored = self.not_stored();
        if not_stored > 0 {
            write!(f, "{} not stored: ", count(not_stored, "occurrence"))?;
            let causes = s.not_stored_by_cause();
            for (i, (cause, n)) in causes.iter().take(SHOWN_CAUSES).enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{n} \u{d7} {cause}")?;
            }
            if causes.len() > SHOWN_CAUSES {
                write!(
                    f,
                    ", and {}",
                    count((causes.len() - SHOWN_CAUSES) as u64, "more cause")
                )?;
            }
            f.write_str("; ")?;
        }
        if self.pending() == 0 {
            f.write_str("nothing pending")?;
        } else {
            write!(
                f,
                "{} not written by the deadline (intake {}",
                count(self.pending(), "occurrence"),
                self.pending_intake
            )?;
            for (name, n) in &self.pending_watchers {
                write!(f, ", {name} {n}")?;
            }
            f.write_str(")")?;
        }
        if self.live_actors > 0 {
            write!(f, "; {} still running", count(self.live_actors, "actor"))?;
        }
        f.write_str(".")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::SinkSnapshot;
    use std::time::Duration;

    #[test]
    fn losses_are_said_in_occurrences_and_writes_only_when_there_are_some() {
        let mut report = ShutdownReport {
            completed: true,
            pending_intake: 0,
            pending_watchers: Vec::new(),
            live_actors: 0,
            stats: StatsSnapshot::default(),
        };
        assert_eq!(losses(&report, "dropped", Duration::from_secs(5)), None);
        report.completed = false;
        report.pending_intake = 2;
        report.pending_watchers = vec![("series:kube".into(), 3)];
        report.stats.sinks_events_v1 = vec![crate::events_v1::SinkSnapshot {
            unwritten: 5,
            rejected: 1,
            ..crate::events_v1::SinkSnapshot::default()
        }];
        assert_eq!(
            losses(&report, "dropped without shutdown", Duration::from_secs(5)).as_deref(),
            Some(
                "kevents: pipeline dropped without shutdown: counts lost: 10 occurrences not \
                 written within the 5s deadline; 1 write given up (refused, retries exhausted \
                 or abandoned at the deadline). Call shutdown(deadline) before the process \
                 exits to get the report."
            )
        );
    }

    #[test]
    fn a_report_names_the_occurrences_not_stored_by_cause() {
        let cause = "403 Forbidden: create events.k8s.io/v1 events in namespace \"default\"";
        let report = ShutdownReport {
            completed: true,
            pending_intake: 0,
            pending_watchers: Vec::new(),
            live_actors: 0,
            stats: StatsSnapshot {
                recorded: 25,
                sinks_events_v1: vec![crate::events_v1::SinkSnapshot {
                    rejected: 1,
                    not_stored: 25,
                    not_stored_by_cause: vec![(cause.into(), 25)],
                    ..crate::events_v1::SinkSnapshot::default()
                }],
                ..StatsSnapshot::default()
            },
        };
        assert_eq!(report.not_stored(), 25);
        assert_eq!(
            losses(
                &report,
                "dropped without shutdown",
                std::time::Duration::from_secs(5)
            )
            .as_deref(),
            Some(
                "kevents: pipeline dropped without shutdown: counts lost: 25 occurrences \
                 refused by the server (25 \u{d7} 403 Forbidden: create events.k8s.io/v1 \
                 events in namespace \"default\"); 1 write given up (refused, retries \
                 exhausted or abandoned at the deadline). Call shutdown(deadline) before the \
                 process exits to get the report."
            )
        );
        assert_eq!(
            report.to_string(),
            "kevents shutdown completed: 25 occurrences recorded; 0 writes stored (0 created, \
             0 patched, 0 re-created) by 0 core/v1 sinks and 1 events.k8s.io/v1 series sink; \
             1 write failed (0 abandoned at the deadline); 0 occurrences dropped, 0 \
             spam-filtered; 25 occurrences not stored: 25 \u{d7} 403 Forbidden: create events.k8s.io/v1 events in namespace \
             \"default\"; nothing pending."
        );
    }

    #[test]
    fn a_deadline_report_names_what_is_pending() {
        let report = ShutdownReport {
            completed: false,
            pending_intake: 2,
            pending_watchers: vec![("sink:api".into(), 3)],
            live_actors: 1,
            stats: StatsSnapshot {
                recorded: 9,
                dropped_intake_full: 1,
                sinks: vec![SinkSnapshot {
                    created: 1,
                    patched: 2,
                    abandoned: 3,
                    spam_filtered: 4,
                    ..SinkSnapshot::default()
                }],
                sinks_events_v1: vec![crate::events_v1::SinkSnapshot {
                    created: 1,
                    recreated: 1,
                    rejected: 1,
                    ..crate::events_v1::SinkSnapshot::default()
                }],
                ..StatsSnapshot::default()
            },
        };
        assert_eq!(
            (report.delivered(), report.failed(), report.dropped()),
            (5, 4, 1)
        );
        assert_eq!(
            report.to_string(),
            "kevents shutdown hit its deadline: 9 occurrences recorded; 5 writes stored \
             (2 created, 2 patched, 1 re-created) by 1 core/v1 sink and 1 events.k8s.io/v1 \
             series sink; 4 writes failed (3 abandoned at the deadline); 1 occurrence \
             dropped, 4 spam-filtered; 5 occurrences not written by the deadline (intake 2, \
             sink:api 3); 1 actor still running."
        );
    }
}
