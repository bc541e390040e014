//! The conformance suites, one per event API: each scenario takes a [`Target`](crate::Target)
//! and checks one behaviour of the apiserver as kevents sees it through the target's sinks
//! ([`kevents_http::HttpSink`] by default, any [`SuiteSink`]). The same functions run against
//! the simulator and the real kube-apiserver v1.20.2, so the simulator is shown to answer
//! like the real one, and through kevents-http's and kevents-kube's sinks alike; and against
//! v1.37 and v1.36 (`KEVENTS_K8S_VERSION=1.37` or `1.36`), where the scenarios whose answer
//! changed since 1.20 expect each version's own
//! ([`Target::server_minor`](crate::Target::server_minor); 1.37 answers them as 1.36 does).
//!
//! * [`core_v1`]: `/api/v1` events, as client-go's `tools/record` writes them;
//! * [`events_v1`]: `/apis/events.k8s.io/v1` events, as client-go's `tools/events` writes them.

use std::future::Future;

use kevents_core::events_v1::Event as V1Event;
use kevents_core::{Event, EventSink, SinkError, Stored};
use kevents_http::HttpSink;

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

/// What the suites need of a sink besides writing: reads, deletes, lists and discovery, so
/// the same scenarios run through kevents-http's [`HttpSink`] and through any other sink
/// (kevents-kube's sink over a `kube::Client`, in its tests). List errors are text: each sink
/// has its own list error type.
pub trait SuiteSink: EventSink + kevents_core::events_v1::EventSink + Clone {
    /// `GET` of one core/v1 event.
    fn get_event(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Event, SinkError>> + Send;
    /// `DELETE` of one core/v1 event.
    fn delete_event(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), SinkError>> + Send;
    /// Every core/v1 event of a namespace.
    fn list_events(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<Event>, String>> + Send;
    /// `GET` of one `events.k8s.io/v1` event.
    fn get_event_v1(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<V1Event, SinkError>> + Send;
    /// Every `events.k8s.io/v1` event of a namespace.
    fn list_events_v1(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<V1Event>, String>> + Send;
    /// Whether `events.k8s.io/v1` is served.
    fn events_v1_served(&self) -> impl Future<Output = Result<bool, SinkError>> + Send;
}

impl SuiteSink for HttpSink {
    async fn get_event(&self, namespace: &str, name: &str) -> Result<Event, SinkError> {
        self.requests().get_event(namespace, name).await
    }
    async fn delete_event(&self, namespace: &str, name: &str) -> Result<(), SinkError> {
        self.requests().delete_event(namespace, name).await
    }
    async fn list_events(&self, namespace: &str) -> Result<Vec<Event>, String> {
        self.requests()
            .list_events(namespace)
            .await
            .map_err(|e| e.to_string())
    }
    async fn get_event_v1(&self, namespace: &str, name: &str) -> Result<V1Event, SinkError> {
        self.requests().events_v1().get_event(namespace, name).await
    }
    async fn list_events_v1(&self, namespace: &str) -> Result<Vec<V1Event>, String> {
        self.requests()
            .events_v1()
            .list_events(namespace)
            .await
            .map_err(|e| e.to_string())
    }
    async fn events_v1_served(&self) -> Result<bool, SinkError> {
        self.requests().events_v1_served().await
    }
}

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

/// The server's copy in a sink's answer, or what went wrong (`what: error`). A sink under
/// this suite writes to an apiserver, so it must return what the server stored
/// ([`Stored::Returned`]), not [`Stored::AsSent`].
pub(crate) trait ServerCopy<E> {
    /// The server's copy, or `"{what}: ..."`.
    fn server_copy(self, what: &str) -> Result<E, String>;
}

impl<E> ServerCopy<E> for Result<Stored<E>, SinkError> {
    fn server_copy(self, what: &str) -> Result<E, String> {
        match self {
            Ok(Stored::Returned(e)) => Ok(*e),
            Ok(Stored::AsSent) => Err(format!(
                "{what}: the sink answered AsSent instead of the server's copy"
            )),
            Err(e) => Err(format!("{what}: {e}")),
        }
    }
}

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
