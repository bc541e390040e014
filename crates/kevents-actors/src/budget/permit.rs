//! What the budget answers a write that asks to start ([`Admit`], the [`Permit`] it holds
//! while its request is out), and what the request's answer tells the budget ([`Health`]).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kevents_core::SinkError;

use super::Inner;
use super::limit::{self, Limit};
use crate::telemetry::Deferral;

/// What an admitted request holds until its answer is reported: the epochs it was admitted
/// in (a 429 decreases a rate once per epoch), and its place among the writes in flight.
pub(crate) struct Permit {
    /// It is the circuit's probe.
    pub(crate) probe: bool,
    pub(super) epoch: u64,
    pub(super) namespace_epoch: Option<u64>,
    pub(super) inner: Option<Arc<Inner>>,
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("probe", &self.probe)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(inner) = &self.inner {
            inner.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Whether an attempt may start now.
#[derive(Debug)]
pub(crate) enum Admit {
    /// Make the request, holding the permit until its answer is reported.
    Go(Permit),
    /// Ask again after this long: the budget's rate, the circuit or the writes in flight
    /// (every write waits too).
    Wait(Duration, Deferral),
    /// Ask again after this long: a pause scoped to this write's namespace or object (a
    /// `Namespace` or `SourceAndObject` 429). Writes to other scopes may go meanwhile, so
    /// the write gives its place among the writes in flight up while it waits.
    Hold(Duration, Deferral),
}

/// What a request's answer says about the apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Health {
    /// It answered (success, or an error that is about the request: 4xx other than 429).
    Answered,
    /// It did not answer, or answered 5xx.
    Failed,
    /// 429, with its `Retry-After` and the limit it names.
    Throttled(Option<Duration>, Limit),
}

impl Health {
    /// Classifies one request's result.
    pub(crate) fn of<T>(result: &Result<T, SinkError>) -> Health {
        match result {
            Ok(_) => Health::Answered,
            Err(e @ SinkError::Status(s)) if s.code == 429 => {
                Health::Throttled(e.retry_after(), limit::of_message(&s.message))
            }
            Err(SinkError::Status(s)) if s.code >= 500 => Health::Failed,
            Err(SinkError::Transport(_) | SinkError::Timeout(_)) => Health::Failed,
            Err(_) => Health::Answered,
        }
    }
}
