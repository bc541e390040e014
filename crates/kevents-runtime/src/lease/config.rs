//! [`LeaseConfig`]: the Lease, the candidate's identity and client-go's three durations, with
//! client-go's validation; [`LeaseError`], why an election step failed.

use std::time::Duration;

use kevents_core::SinkError;
use kevents_core::name::{is_dns1123_label, is_dns1123_subdomain};
use thiserror::Error;

/// client-go's `JitterFactor` (`tools/leaderelection`): the retry period of a candidate is
/// stretched by up to this factor, and the renew deadline must exceed `retry_period` times it.
pub const JITTER_FACTOR: f64 = 1.2;
/// Default [`LeaseConfig::lease_duration`]: 15 s, as client-go's and kube-controller-manager's.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Default [`LeaseConfig::renew_deadline`]: 10 s.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// Default [`LeaseConfig::retry_period`]: 2 s.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// What a [`LeaderElector`](super::LeaderElector) competes for and how, with client-go's
/// defaults ([`LeaseConfig::new`]) and its validation ([`LeaseConfig::validate`]).
///
/// ```
/// use std::time::Duration;
/// use kevents_runtime::lease::LeaseConfig;
/// let config = LeaseConfig::new("kube-system", "kevents-export", "pod-a");
/// assert_eq!(config.lease_duration, Duration::from_secs(15));
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Namespace of the Lease (a DNS-1123 label).
    pub namespace: String,
    /// Name of the Lease (a DNS-1123 subdomain).
    pub name: String,
    /// This candidate's identity, written as `holderIdentity` (non-empty, unique among the
    /// candidates: a pod name, a hostname plus a random suffix).
    pub identity: String,
    /// How long a standby waits, from when it last saw the Lease change, before it takes the
    /// Lease over; written as `leaseDurationSeconds` (whole seconds, at least 1 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives leadership up.
    pub renew_deadline: Duration,
    /// The interval between tries (jittered by [`JITTER_FACTOR`] while not leading).
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// A configuration with client-go's defaults: lease duration 15 s, renew deadline 10 s,
    /// retry period 2 s.
    ///
    /// ```
    /// let c = kevents_runtime::lease::LeaseConfig::new("default", "my-controller", "host-1");
    /// assert_eq!(c.identity, "host-1");
    /// ```
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
        }
    }

    /// The same with other durations.
    ///
    /// ```
    /// use std::time::Duration;
    /// let c = kevents_runtime::lease::LeaseConfig::new("default", "l", "a")
    ///     .with_durations(Duration::from_secs(4), Duration::from_secs(3), Duration::from_secs(1));
    /// assert!(c.validate().is_ok());
    /// ```
    pub fn with_durations(
        mut self,
        lease_duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Self {
        self.lease_duration = lease_duration;
        self.renew_deadline = renew_deadline;
        self.retry_period = retry_period;
        self
    }

    /// client-go's `NewLeaderElector` checks, in its order: the lease duration above the
    /// renew deadline, the renew deadline above [`JITTER_FACTOR`] × the retry period, each
    /// above zero, a non-empty identity; and, before
    /// any request, the namespace a DNS-1123 label and the name a DNS-1123 subdomain. The
    /// lease duration is written in whole seconds, so it must be at least 1 s.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kevents_runtime::lease::{LeaseConfig, LeaseError};
    /// let mut c = LeaseConfig::new("default", "l", "a");
    /// c.renew_deadline = Duration::from_secs(2);
    /// assert!(matches!(c.validate(), Err(LeaseError::RenewDeadlineTooShort { .. })));
    /// ```
    pub fn validate(&self) -> Result<(), LeaseError> {
        if self.lease_duration <= self.renew_deadline {
            return Err(LeaseError::LeaseDurationTooShort {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(LeaseError::RenewDeadlineTooShort {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        for (what, d) in [
            ("lease duration", self.lease_duration),
            ("renew deadline", self.renew_deadline),
            ("retry period", self.retry_period),
        ] {
            if d.is_zero() {
                return Err(LeaseError::ZeroDuration(what));
            }
        }
        if self.lease_duration < Duration::from_secs(1) {
            return Err(LeaseError::ZeroDuration("lease duration in whole seconds"));
        }
        if self.identity.is_empty() {
            return Err(LeaseError::EmptyIdentity);
        }
        if !is_dns1123_label(&self.namespace) {
            return Err(LeaseError::InvalidNamespace(self.namespace.clone()));
        }
        if !is_dns1123_subdomain(&self.name) {
            return Err(LeaseError::InvalidName(self.name.clone()));
        }
        Ok(())
    }

    /// `leaseDurationSeconds` as written: the lease duration in whole seconds (saturating).
    pub(crate) fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// Why a configuration was refused or an election step failed.
///
/// ```
/// use kevents_runtime::lease::LeaseError;
/// assert_eq!(LeaseError::EmptyIdentity.to_string(), "the lease identity is empty");
/// ```
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LeaseError {
    /// The lease duration is not above the renew deadline.
    #[error(
        "the lease duration ({lease_duration:?}) must be greater than the renew deadline ({renew_deadline:?})"
    )]
    LeaseDurationTooShort {
        /// The lease duration.
        lease_duration: Duration,
        /// The renew deadline.
        renew_deadline: Duration,
    },
    /// The renew deadline is not above [`JITTER_FACTOR`] × the retry period.
    #[error(
        "the renew deadline ({renew_deadline:?}) must be greater than the retry period ({retry_period:?}) × 1.2"
    )]
    RenewDeadlineTooShort {
        /// The renew deadline.
        renew_deadline: Duration,
        /// The retry period.
        retry_period: Duration,
    },
    /// A duration is zero (the lease duration: under one second).
    #[error("the {0} must be greater than zero")]
    ZeroDuration(&'static str),
    /// The identity is empty.
    #[error("the lease identity is empty")]
    EmptyIdentity,
    /// The namespace is not a DNS-1123 label.
    #[error("the lease namespace {0:?} is not a DNS-1123 label")]
    InvalidNamespace(String),
    /// The name is not a DNS-1123 subdomain.
    #[error("the lease name {0:?} is not a DNS-1123 subdomain")]
    InvalidName(String),
    /// The apiserver refused this identity's credentials on the Lease (401 or 403): it lacks
    /// RBAC rights (`get`, `create`, `update` on `leases` in group `coordination.k8s.io`).
    #[error(
        "not allowed to {verb} leases.coordination.k8s.io {namespace}/{name} (RBAC: the identity needs get, create and update on leases): {source}"
    )]
    Forbidden {
        /// The verb refused: `get`, `create` or `update`.
        verb: &'static str,
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// The server's answer (sanitised).
        source: SinkError,
    },
    /// Another candidate wrote the Lease first (409 Conflict on create or update): it won
    /// this round.
    #[error("the lease was written by another candidate first (conflict)")]
    Conflict,
    /// The Lease is held by another candidate and has not expired.
    #[error("the lease is held by {holder:?} and has not expired")]
    HeldByOther {
        /// The holder's identity.
        holder: String,
    },
    /// A request failed (transport error, timeout, another status).
    #[error("lease request failed: {0}")]
    Request(SinkError),
    /// The apiserver's Lease could not be read (not JSON, wrong fields).
    #[error("the apiserver's lease could not be read: {0}")]
    Decode(String),
    /// A step did not finish within the renew deadline.
    #[error("the lease request did not finish within the deadline ({0:?})")]
    Deadline(Duration),
    /// The election task ended abnormally (it panicked or was cancelled).
    #[error("the election task ended abnormally: {0}")]
    Stopped(String),
}
