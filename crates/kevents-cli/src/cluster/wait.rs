//! Waiting for pipelines to finish their work ([`wait_idle`]), and explaining on standard
//! error why writes are waiting while they do ([`WaitNotes`]), so that a slow or failing
//! apiserver is visible instead of a silent pause.

use std::time::{Duration, Instant};

use kevents_actors::{Pipeline, StatsSnapshot};

use super::describe::secs;
use super::health::HealthReport;
use super::secrets::one_line;
use crate::sanitize;

/// Explains on standard error, at most every few seconds, why writes are waiting.
pub struct WaitNotes {
    every: Duration,
    last: Option<Instant>,
    retry_sleep: Duration,
    retry_attempts: u32,
    tty: bool,
    /// Notes printed.
    pub printed: u64,
}

impl WaitNotes {
    /// Notes at most every `every`, for writes retried every `retry_sleep` up to
    /// `retry_attempts` times. On a terminal a note starts on a fresh line.
    pub fn new(every: Duration, retry_sleep: Duration, retry_attempts: u32, tty: bool) -> Self {
        WaitNotes {
            every,
            last: None,
            retry_sleep,
            retry_attempts,
            tty,
            printed: 0,
        }
    }

    /// Prints a note if one is due: `writes waiting: 12 queued (4 in flight); last error 2 s
    /// ago: connection refused; retrying every 10 s, at most 12 attempts per write`.
    pub fn note(&mut self, snapshots: &[StatsSnapshot], health: &HealthReport) {
        if self.last.is_some_and(|t| t.elapsed() < self.every) {
            return;
        }
        let queued: u64 = snapshots
            .iter()
            .flat_map(|s| s.sinks.iter())
            .map(|k| k.queued)
            .sum();
        let in_flight: u64 = snapshots
            .iter()
            .flat_map(|s| s.sinks.iter())
            .map(|k| k.in_flight)
            .sum();
        let mut line = format!("writes waiting: {queued} queued ({in_flight} in flight)");
        if let Some(oldest) = health.oldest.filter(|d| *d >= Duration::from_secs(1)) {
            line.push_str(&format!(
                "; oldest request unanswered for {}",
                secs(Duration::from_secs(oldest.as_secs()))
            ));
        }
        match &health.last_error {
            Some((ago, why)) => {
                line.push_str(&format!(
                    "; last error {} ago: {}",
                    secs(Duration::from_secs(ago.as_secs())),
                    sanitize::truncate(one_line(why), 200),
                ));
                // Only what is retried is said to be: a refusal (403, 422) ends its write.
                if why.starts_with("429") {
                    // A 429 is retried as soon as the write budget (lowered by it) allows.
                    line.push_str("; throttled: retried as the write budget allows");
                } else if health.last_error_retried {
                    line.push_str(&format!(
                        "; retrying every {}, at most {} attempts per write",
                        secs(self.retry_sleep),
                        self.retry_attempts
                    ));
                } else {
                    line.push_str("; that write is not retried (the server refused it)");
                }
            }
            None => line.push_str("; no error yet"),
        }
        if self.tty {
            eprintln!();
        }
        eprintln!("{line}");
        self.last = Some(Instant::now());
        self.printed += 1;
    }
}

/// Whether a pipeline has nothing left to do: the intake is empty, everything taken from it
/// was distributed, and no watcher (sink chains included) holds an event.
pub fn is_idle(s: &StatsSnapshot) -> bool {
    s.intake_depth == 0 && s.broadcast == s.recorded && s.watchers.iter().all(|w| w.depth == 0)
}

/// Waits until every pipeline is idle ([`is_idle`]) or `timeout` passed. Returns whether they
/// all became idle. `observe` sees every snapshot taken (e.g. to track queue depths).
pub async fn wait_idle(
    pipelines: &[&Pipeline],
    timeout: Duration,
    mut observe: impl FnMut(&StatsSnapshot),
) -> bool {
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        let mut idle = true;
        for p in pipelines {
            let s = p.stats();
            observe(&s);
            idle &= is_idle(&s);
        }
        if idle {
            return true;
        }
        if start.elapsed() >= timeout {
            return false;
        }
        actix_rt::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}
