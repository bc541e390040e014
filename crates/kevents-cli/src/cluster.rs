//! What the commands that talk to an apiserver share: building the sink from a kubeconfig,
//! making sure a namespace exists, waiting until pipelines are idle, and summing counters.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kevents_actors::{Pipeline, StatsSnapshot};
use kevents_http::{HttpConfig, HttpSink};

/// Where to reach a real cluster.
#[derive(Debug, Clone)]
pub struct KubeTarget {
    /// The kubeconfig file.
    pub kubeconfig: PathBuf,
    /// Its context (`None`: the current context).
    pub context: Option<String>,
}

impl KubeTarget {
    /// An [`HttpSink`] for this kubeconfig and context.
    pub async fn sink(&self) -> anyhow::Result<HttpSink> {
        let config = HttpConfig::from_kubeconfig(Some(&self.kubeconfig), self.context.as_deref())
            .await
            .with_context(|| format!("loading kubeconfig {}", self.kubeconfig.display()))?;
        HttpSink::new(config).context("building the HTTP sink")
    }

    /// Makes sure `namespace` exists, with `kubectl create namespace` (an existing one is
    /// fine). Without `kubectl` on the `PATH` nothing is created and a note says so: the
    /// namespace must then exist already.
    pub fn ensure_namespace(&self, namespace: &str) -> anyhow::Result<()> {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&self.kubeconfig);
        if let Some(c) = &self.context {
            cmd.arg("--context").arg(c);
        }
        cmd.args(["create", "namespace", namespace]);
        match cmd.output() {
            Ok(out) if out.status.success() => {
                eprintln!("created namespace {namespace}");
                Ok(())
            }
            Ok(out) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                if stderr.contains("AlreadyExists") || stderr.contains("already exists") {
                    Ok(())
                } else {
                    anyhow::bail!(
                        "kubectl create namespace {namespace} failed: {}",
                        stderr.trim()
                    )
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!(
                    "note: kubectl not found; namespace {namespace} must already exist (events in a missing namespace are rejected with 404)"
                );
                Ok(())
            }
            Err(e) => Err(e).context("running kubectl"),
        }
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

/// Counters of several pipelines (one sink chain each), summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Occurrences accepted into the intakes.
    pub queued: u64,
    /// Refused as invalid.
    pub dropped_invalid: u64,
    /// Refused because an intake was full.
    pub dropped_intake_full: u64,
    /// Refused after shutdown.
    pub dropped_after_shutdown: u64,
    /// Events distributed by the broadcasters.
    pub broadcast: u64,
    /// Events accepted by the sink chains' queues.
    pub accepted: u64,
    /// Events a sink chain missed because its queue was full.
    pub dropped_queue_full: u64,
    /// Events a sink chain missed because it had stopped.
    pub dropped_closed: u64,
    /// Skipped by the spam filter.
    pub spam_filtered: u64,
    /// Folded into an aggregate event.
    pub aggregated: u64,
    /// Writes ending in a CREATE.
    pub created: u64,
    /// Writes ending in a PATCH.
    pub patched: u64,
    /// Writes whose PATCH found nothing and that were re-created.
    pub recreated: u64,
    /// Writes refused by the server (not retried).
    pub rejected: u64,
    /// Writes given up after the retry budget.
    pub retry_exhausted: u64,
    /// Writes still queued at the shutdown deadline.
    pub abandoned: u64,
    /// Write attempts (a re-create is one attempt of two requests).
    pub attempts: u64,
    /// Supervisor restarts of sink actors.
    pub restarts: u64,
}

impl Totals {
    /// Sums the counters of `snapshots` (every watcher named `sink:*`, every sink).
    pub fn of<'a>(snapshots: impl IntoIterator<Item = &'a StatsSnapshot>) -> Totals {
        let mut t = Totals::default();
        for s in snapshots {
            t.queued += s.recorded;
            t.dropped_invalid += s.dropped_invalid;
            t.dropped_intake_full += s.dropped_intake_full;
            t.dropped_after_shutdown += s.dropped_after_shutdown;
            t.broadcast += s.broadcast;
            for w in s.watchers.iter().filter(|w| w.name.starts_with("sink:")) {
                t.accepted += w.accepted;
                t.dropped_queue_full += w.dropped_full;
                t.dropped_closed += w.dropped_closed;
            }
            for k in &s.sinks {
                t.spam_filtered += k.spam_filtered;
                t.aggregated += k.aggregated;
                t.created += k.created;
                t.patched += k.patched;
                t.recreated += k.recreated;
                t.rejected += k.rejected;
                t.retry_exhausted += k.retry_exhausted;
                t.abandoned += k.abandoned;
                t.attempts += k.attempts;
                t.restarts += k.restarts;
            }
        }
        t
    }

    /// Writes that reached the server.
    pub fn delivered(&self) -> u64 {
        self.created + self.patched + self.recreated
    }

    /// Writes given up.
    pub fn failed(&self) -> u64 {
        self.rejected + self.retry_exhausted + self.abandoned
    }

    /// HTTP requests made (a re-create is a PATCH and a CREATE).
    pub fn requests(&self) -> u64 {
        self.attempts + self.recreated
    }

    /// Attempts beyond the first of each finished write.
    pub fn retries(&self) -> u64 {
        self.attempts
            .saturating_sub(self.delivered() + self.rejected + self.retry_exhausted)
    }

    /// Checks that every occurrence is accounted for exactly once, given how many calls were
    /// made (`emitted`) and how many of them the recorder refused before counting (none: the
    /// pipeline counts refusals itself). Returns the first identity that does not hold.
    pub fn check(&self, emitted: u64) -> Result<(), String> {
        let refused = self.dropped_invalid + self.dropped_intake_full + self.dropped_after_shutdown;
        let checks = [
            ("emitted = queued + refused", emitted, self.queued + refused),
            ("queued = broadcast", self.queued, self.broadcast),
            (
                "broadcast = accepted + dropped by a sink queue",
                self.broadcast,
                self.accepted + self.dropped_queue_full + self.dropped_closed,
            ),
            (
                "accepted = spam-filtered + delivered + failed",
                self.accepted,
                self.spam_filtered + self.delivered() + self.failed(),
            ),
        ];
        for (what, left, right) in checks {
            if left != right {
                return Err(format!("{what} does not hold: {left} != {right}"));
            }
        }
        Ok(())
    }
}
