//! The namespace the events go to: checked to be a valid name before anything is sent, and
//! created on a real cluster with `kubectl` when it can be (best effort, bounded in time: the
//! probe then says whether events can be written there).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::describe::secs;
use super::exit::{Failure, FailureKind};
use super::kubeconfig::KubeTarget;
use super::secrets::one_line;
use crate::sanitize;

/// How long `kubectl create namespace` may run.
pub const KUBECTL_LIMIT: Duration = Duration::from_secs(20);

/// Checks that `namespace` is a DNS-1123 label, as the apiserver requires.
pub fn validate_namespace(namespace: &str) -> Result<(), Failure> {
    if kevents_core::name::is_dns1123_label(namespace) {
        Ok(())
    } else {
        Err(Failure::new(
            FailureKind::Config,
            format!(
                "invalid --namespace {namespace:?}: a namespace is a DNS-1123 label (at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit); nothing was sent"
            ),
        ))
    }
}

impl KubeTarget {
    /// Makes sure `namespace` exists, with `kubectl create namespace` (an existing one is
    /// fine), each request bounded by 10 s and kubectl itself by [`KUBECTL_LIMIT`]. Never
    /// fails: without `kubectl`, or when it fails (no right to create namespaces, ...), a
    /// note says so and the probe ([`probe_events`](super::probe::probe_events)) finds out
    /// whether the namespace can be written.
    pub fn ensure_namespace(&self, namespace: &str) {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&self.kubeconfig);
        if let Some(c) = &self.context {
            cmd.arg("--context").arg(c);
        }
        cmd.args(["--request-timeout=10s", "create", "namespace", namespace])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("note: kubectl not found; namespace {namespace} must already exist");
                return;
            }
            Err(e) => {
                eprintln!("note: cannot run kubectl: {}", one_line(&e.to_string()));
                return;
            }
        };
        let reader = child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut err, &mut s);
                s
            })
        });
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if started.elapsed() < KUBECTL_LIMIT => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let stderr = reader.and_then(|r| r.join().ok()).unwrap_or_default();
        match status {
            Some(s) if s.success() => eprintln!("created namespace {namespace}"),
            Some(_) if stderr.contains("AlreadyExists") || stderr.contains("already exists") => {}
            Some(_) => {
                let why: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
                eprintln!(
                    "note: kubectl create namespace {namespace} failed: {}",
                    sanitize::truncate(one_line(why.join("; ").trim()), 300)
                );
            }
            None => eprintln!(
                "note: kubectl create namespace {namespace} did not finish within {}; stopped",
                secs(KUBECTL_LIMIT)
            ),
        }
    }
}
