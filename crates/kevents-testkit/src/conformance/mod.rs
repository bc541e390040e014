//! The conformance suites, one per event API: each scenario takes a [`Target`](crate::Target)
//! and checks one behaviour of the apiserver as kevents sees it through
//! [`kevents_http::HttpSink`]. The same functions run against the simulator and the real
//! kube-apiserver v1.20.2, so the simulator is shown to answer like the real one.
//!
//! * [`core_v1`]: `/api/v1` events, as client-go's `tools/record` writes them;
//! * [`events_v1`]: `/apis/events.k8s.io/v1` events, as client-go's `tools/events` writes them.

use kevents_core::SinkError;

/// `ensure!(condition, "format", args...)`: fail the scenario with the message unless the
/// condition holds. Defined before the suites so that they can use it.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

pub mod core_v1;
pub mod events_v1;

/// A scenario failed: what was expected and what happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{target}: {scenario}: {message}")]
pub struct Failure {
    /// `simulator` or `kube-apiserver`.
    pub target: String,
    /// The scenario's name.
    pub scenario: &'static str,
    /// What went wrong.
    pub message: String,
}

/// Several scenarios failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} conformance scenario(s) failed:\n{}", .0.len(), .0.iter().map(|f| format!("  - {f}")).collect::<Vec<_>>().join("\n"))]
pub struct Failures(pub Vec<Failure>);

/// Expects `result` to be a `Status` failure with `code` and `reason`, and returns the error
/// so the caller can check its details and classification. Shared by the core/v1 and
/// events.k8s.io/v1 suites.
pub(crate) fn expect_status<T: std::fmt::Debug>(
    result: Result<T, SinkError>,
    code: u16,
    reason: &str,
) -> Result<SinkError, String> {
    match result {
        Ok(stored) => Err(format!(
            "expected {code} {reason}, the server stored {stored:?}"
        )),
        Err(SinkError::Status(s)) => {
            ensure!(
                s.code == code && s.reason == reason,
                "expected {code} {reason}, got {} {}: {}",
                s.code,
                s.reason,
                s.message
            );
            Ok(SinkError::Status(s))
        }
        Err(other) => Err(format!("expected {code} {reason}, got {other:?}")),
    }
}
