//! The namespace the events go to: checked to be a valid name before anything is sent, and
//! created on a real cluster with `kubectl` when it can be (best effort, bounded in time: the
//! probe then says whether events can be written there).

use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::path::Path;
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

/// Whether `path` can be opened again for the same content: a regular file outside `/dev`
/// and `/proc` (where `/dev/stdin` or `/dev/fd/N` would name another process's input).
fn reopenable(path: &Path) -> bool {
    !(path.starts_with("/dev") || path.starts_with("/proc"))
        && std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// `bytes` in an anonymous memory file (`memfd_create`), inherited by the children started
/// while it is open (so a child opens it as `/dev/fd/N`); closed when dropped.
fn memory_file(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let fd =
        memfd_create(c"kevents-kubeconfig", MFdFlags::empty()).map_err(std::io::Error::from)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    Ok(OwnedFd::from(file))
}

impl KubeTarget {
    /// Makes sure `namespace` exists, with `kubectl create namespace` (an existing one is
    /// fine), each request bounded by 10 s and kubectl itself by [`KUBECTL_LIMIT`]. Never
    /// fails: without `kubectl`, or when it fails (no right to create namespaces, ...), a
    /// note says so and the probe ([`probe_events`](super::probe::probe_events)) finds out
    /// whether the namespace can be written.
    pub fn ensure_namespace(&self, namespace: &str) {
        let mut cmd = Command::new("kubectl");
        // A kubeconfig that cannot be opened again as it was (a pipe, a FIFO, `<(...)`,
        // `/dev/stdin`) was read by `config`: kubectl, which reads its kubeconfig more than
        // once, gets those bytes in an anonymous memory file (never on disk).
        let _memory = match self.kubeconfig_bytes() {
            Some(bytes) if !reopenable(&self.kubeconfig) => match memory_file(bytes) {
                Ok(fd) => {
                    cmd.arg("--kubeconfig")
                        .arg(format!("/dev/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd)));
                    Some(fd)
                }
                Err(e) => {
                    eprintln!(
                        "note: cannot hand the kubeconfig to kubectl ({e}); namespace {namespace} must already exist"
                    );
                    return;
                }
            },
            _ => {
                cmd.arg("--kubeconfig").arg(&self.kubeconfig);
                None
            }
        };
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
