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
        let line = self.line(snapshots, health);
        if self.tty {
            eprintln!();
        }
        eprintln!("{line}");
        self.last = Some(Instant::now());
        self.printed += 1;
    }

    /// The note [`WaitNotes::note`] prints.
    fn line(&self, snapshots: &[StatsSnapshot], health: &HealthReport) -> String {
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
                    line.push_str(&throttled(*ago, health.last_error_retry_after));
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
        line
    }
}

/// What a 429 makes the writes do, from how long ago it came (`ago`) and the pause its
/// Retry-After asked for: the write budget pauses the writes the limit covers for that long
/// (cut to its maximum, 60 s by default), or, without a Retry-After, lowers its rate.
fn throttled(ago: Duration, retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(asked) => {
            let left = asked.saturating_sub(ago);
            format!(
                "; throttled: waiting {} as the server's Retry-After asks ({} left), then retried",
                secs(Duration::from_secs(asked.as_secs())),
                secs(Duration::from_secs(left.as_secs())),
            )
        }
        None => "; throttled (no Retry-After): writes slowed to the rate the server accepts".into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn health(why: &str, ago: u64, retry_after: Option<u64>) -> HealthReport {
        HealthReport {
            last_error: Some((Duration::from_secs(ago), why.into())),
            last_error_retried: true,
            last_error_retry_after: retry_after.map(Duration::from_secs),
            ..HealthReport::default()
        }
    }

    fn notes() -> WaitNotes {
        WaitNotes::new(Duration::from_secs(5), Duration::from_secs(10), 12, false)
    }

    #[test]
    fn a_retry_after_pause_is_said_to_be_one() {
        let h = health("429 TooManyRequests: slow down", 2, Some(60));
        let line = notes().line(&[], &h);
        assert!(
            line.contains("throttled: waiting 60 s as the server's Retry-After asks (58 s left)"),
            "{line}"
        );
        assert!(!line.contains("write budget allows"), "{line}");
    }

    #[test]
    fn a_429_without_retry_after_says_the_rate_is_lowered() {
        let h = health("429 TooManyRequests: slow down", 0, None);
        let line = notes().line(&[], &h);
        assert!(
            line.contains(
                "throttled (no Retry-After): writes slowed to the rate the server accepts"
            ),
            "{line}"
        );
    }

    #[test]
    fn other_errors_keep_their_retry_text() {
        let h = health("500 InternalError: boom", 1, None);
        let line = notes().line(&[], &h);
        assert!(
            line.contains("retrying every 10 s, at most 12 attempts per write"),
            "{line}"
        );
    }
}
