//! What the commands that talk to an apiserver share, one module per concern:
//!
//! * [`exit`]: typed failures and the exit codes they map to (`docs/demo.md`);
//! * [`secrets`]: the credentials known to the process, removed (with control characters
//!   escaped) from every text from outside before it is printed;
//! * [`kubeconfig`]: where a real cluster is, loading its kubeconfig and credentials;
//! * [`namespace`]: checking the namespace's name, creating it with `kubectl`;
//! * [`describe`]: a failed request or a duration said in one short line;
//! * [`probe`]: the reachability probe (`GET /version`, listing and creating events);
//! * [`health`]: watching the health of the writes while they run;
//! * [`wait`]: waiting until pipelines are idle, and the notes saying why writes wait;
//! * [`totals`]: the counters of several pipelines, summed, and their accounting check.
//!
//! The items are re-exported here: callers name them `cluster::X`.

mod describe;
mod exit;
mod health;
mod kubeconfig;
mod namespace;
mod probe;
mod secrets;
mod totals;
mod wait;

pub use describe::{describe, list_error, round, secs};
pub use exit::{Failure, FailureKind, exit_code, finish};
pub use health::{Health, WatchedSink};
pub use kubeconfig::{KubeTarget, cluster_config};
pub use namespace::validate_namespace;
pub use probe::{PROBE_TIMEOUT, probe_events, probe_server};
pub use secrets::{RedactedStderr, add_secret, one_line, redact};
pub use totals::Totals;
pub use wait::{WaitNotes, is_idle, wait_idle};
