//! Which client-go release kevents behaves like: one switch for every behaviour the API
//! server sees that changed between client-go v1.20.2 and v0.36.4 (Kubernetes 1.36).
//!
//! The differences were measured with client-go's own code on the same traces
//! (docs/compatibility.md, "Client-go version profiles"):
//!
//! | behaviour | 1.20 | 1.36 |
//! |---|---|---|
//! | spam key (`getSpamKey`) | source + object | source + object + event type (1.32) |
//! | `reportingController`/`reportingInstance` of core/v1 events | empty | source component/host (1.28) |
//! | event names that are not DNS-1123 subdomains | kept (`<object>.<hex>`) | a random UUID (1.33) |
//! | spam filter token bucket | 2019 `x/time/rate` copy | `golang.org/x/time` 0.16 |
//!
//! The existing individual options ([`EventFactory::naming`](crate::EventFactory),
//! [`EventFactory::reporting_fields`](crate::EventFactory),
//! [`CorrelatorOptions::spam_key_fn`](crate::CorrelatorOptions),
//! [`CorrelatorOptions::token_bucket`](crate::CorrelatorOptions)) stay as overrides of what the
//! profile chooses.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// A client-go release whose behaviour kevents reproduces. 1.36 is the default.
///
/// ```
/// use kevents_core::profile::{ClientGoVersion, TokenBucket};
/// let v: ClientGoVersion = "1.20".parse().unwrap();
/// assert_eq!(v, ClientGoVersion::V1_20);
/// assert!(!v.spam_key_has_type());
/// assert_eq!(ClientGoVersion::default(), ClientGoVersion::V1_36);
/// assert_eq!(ClientGoVersion::V1_36.token_bucket(), TokenBucket::XTimeRate016);
/// assert_eq!("1.19".parse::<ClientGoVersion>().unwrap_err().to_string(),
///            "unknown client-go version \"1.19\" (expected 1.36 or 1.20)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ClientGoVersion {
    /// client-go v1.20.2 (Kubernetes 1.20): what the older traces and clusters need.
    V1_20,
    /// client-go v0.36.4 (Kubernetes 1.36): today's components. The default.
    #[default]
    V1_36,
}

impl ClientGoVersion {
    /// `"1.20"` or `"1.36"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ClientGoVersion::V1_20 => "1.20",
            ClientGoVersion::V1_36 => "1.36",
        }
    }

    /// Whether the spam filter's key includes the event type (client-go 1.32+), so Normal
    /// and Warning events of one source and object draw from separate token buckets.
    pub const fn spam_key_has_type(self) -> bool {
        matches!(self, ClientGoVersion::V1_36)
    }

    /// Whether core/v1 events carry `reportingComponent`/`reportingInstance` copied from
    /// their source (client-go 1.28+ `generateEvent`).
    pub const fn reporting_fields(self) -> bool {
        matches!(self, ClientGoVersion::V1_36)
    }

    /// Whether an event name that is not a valid DNS-1123 subdomain is replaced by a
    /// random UUID (client-go 1.33+ `util.GenerateEventName`).
    pub const fn uuid_names(self) -> bool {
        matches!(self, ClientGoVersion::V1_36)
    }

    /// The spam filter's token-bucket arithmetic.
    pub const fn token_bucket(self) -> TokenBucket {
        match self {
            ClientGoVersion::V1_20 => TokenBucket::Legacy,
            ClientGoVersion::V1_36 => TokenBucket::XTimeRate016,
        }
    }
}

impl fmt::Display for ClientGoVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A client-go version kevents has no profile for.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown client-go version {0:?} (expected 1.36 or 1.20)")]
pub struct UnknownClientGoVersion(pub String);

impl FromStr for ClientGoVersion {
    type Err = UnknownClientGoVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "1.20" | "v1.20" | "1.20.2" | "v1.20.2" => Ok(ClientGoVersion::V1_20),
            "1.36" | "v1.36" | "0.36.4" | "v0.36.4" => Ok(ClientGoVersion::V1_36),
            other => Err(UnknownClientGoVersion(
                other.chars().take(32).collect::<String>(),
            )),
        }
    }
}

/// How the spam filter's token bucket computes refills. Both start full, hold at most
/// `burst` tokens and refill `qps` tokens per second; they differ only for an occurrence
/// within tens of nanoseconds of a token boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TokenBucket {
    /// Whole nanoseconds (GCRA with the period truncated to nanoseconds): the decisions of
    /// the 2019 `x/time/rate` copy client-go 1.20 vendors, on every shared 1.20 trace.
    Legacy,
    /// `golang.org/x/time/rate` 0.16 (client-go 1.36) in IEEE doubles, operation for
    /// operation: tokens start at `burst`, a refill is `d.Seconds() * qps`, a wait is
    /// `time.Duration(tokens / qps * 1e9)` (truncated).
    XTimeRate016,
}
