//! Which client-go release kevents behaves like: one switch for every behaviour the API
//! server sees that changed between client-go v1.20.2, v0.36.4 (Kubernetes 1.36) and v0.37.2
//! (Kubernetes 1.37).
//!
//! The differences were measured with client-go's own code on the same traces
//! (docs/compatibility.md, "Client-go version profiles"):
//!
//! | behaviour | 1.20 | 1.36 and 1.37 |
//! |---|---|---|
//! | spam key (`getSpamKey`) | source + object | source + object + event type (1.32) |
//! | `reportingController`/`reportingInstance` of core/v1 events | empty | source component/host (1.28) |
//! | event names that are not DNS-1123 subdomains | kept (`<object>.<hex>`) | a random UUID (1.33) |
//! | spam filter token bucket | 2019 `x/time/rate` copy | `golang.org/x/time` 0.14-0.16 (identical `rate`) |
//!
//! client-go v0.37.2 sends what v0.36.4 sends: the harnesses of both agree byte for byte on
//! every sample trace, core/v1 and events.k8s.io/v1, and its `tools/record`, `tools/events` and
//! `util/flowcontrol` changed nothing the API server sees (docs/compatibility.md, "client-go
//! v0.37.2"). [`ClientGoVersion::V1_37`] therefore names the same behaviour as
//! [`ClientGoVersion::V1_36`]; it is the default because it is today's release.
//!
//! The existing individual options ([`EventFactory::naming`](crate::EventFactory),
//! [`EventFactory::reporting_fields`](crate::EventFactory),
//! [`CorrelatorOptions::spam_key_fn`](crate::CorrelatorOptions),
//! [`CorrelatorOptions::token_bucket`](crate::CorrelatorOptions)) stay as overrides of what the
//! profile chooses.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// A client-go release whose behaviour kevents reproduces. 1.37 is the default.
///
/// ```
/// use kevents_core::profile::{ClientGoVersion, TokenBucket};
/// let v: ClientGoVersion = "1.20".parse().unwrap();
/// assert_eq!(v, ClientGoVersion::V1_20);
/// assert!(!v.spam_key_has_type());
/// assert_eq!(ClientGoVersion::default(), ClientGoVersion::V1_37);
/// assert_eq!("1.37".parse::<ClientGoVersion>().unwrap(), ClientGoVersion::V1_37);
/// assert_eq!(ClientGoVersion::V1_37.token_bucket(), TokenBucket::XTimeRate016);
/// // 1.37 behaves as 1.36 did.
/// assert_eq!(ClientGoVersion::V1_37.behaviour(), ClientGoVersion::V1_36.behaviour());
/// assert_eq!("1.19".parse::<ClientGoVersion>().unwrap_err().to_string(),
///            "unknown client-go version \"1.19\" (expected 1.37, 1.36 or 1.20)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ClientGoVersion {
    /// client-go v1.20.2 (Kubernetes 1.20): what the older traces and clusters need.
    V1_20,
    /// client-go v0.36.4 (Kubernetes 1.36).
    V1_36,
    /// client-go v0.37.2 (Kubernetes 1.37): today's components. The default. Behaves as
    /// [`V1_36`](ClientGoVersion::V1_36): nothing the API server sees changed in 1.37.
    #[default]
    V1_37,
}

impl ClientGoVersion {
    /// `"1.20"`, `"1.36"` or `"1.37"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ClientGoVersion::V1_20 => "1.20",
            ClientGoVersion::V1_36 => "1.36",
            ClientGoVersion::V1_37 => "1.37",
        }
    }

    /// The oldest version with the same behaviour: [`V1_36`](ClientGoVersion::V1_36) for
    /// 1.37 (client-go v0.37.2 changed nothing the API server sees), else the version itself.
    /// Two versions with the same `behaviour()` give the same events, names, patches and
    /// spam-filter decisions.
    pub const fn behaviour(self) -> ClientGoVersion {
        match self {
            ClientGoVersion::V1_37 => ClientGoVersion::V1_36,
            v => v,
        }
    }

    /// Whether the spam filter's key includes the event type (client-go 1.32+), so Normal
    /// and Warning events of one source and object draw from separate token buckets.
    pub const fn spam_key_has_type(self) -> bool {
        matches!(self.behaviour(), ClientGoVersion::V1_36)
    }

    /// Whether core/v1 events carry `reportingComponent`/`reportingInstance` copied from
    /// their source (client-go 1.28+ `generateEvent`).
    pub const fn reporting_fields(self) -> bool {
        matches!(self.behaviour(), ClientGoVersion::V1_36)
    }

    /// Whether an event name that is not a valid DNS-1123 subdomain is replaced by a
    /// random UUID (client-go 1.33+ `util.GenerateEventName`).
    pub const fn uuid_names(self) -> bool {
        matches!(self.behaviour(), ClientGoVersion::V1_36)
    }

    /// The spam filter's token-bucket arithmetic.
    pub const fn token_bucket(self) -> TokenBucket {
        match self.behaviour() {
            ClientGoVersion::V1_20 => TokenBucket::Legacy,
            _ => TokenBucket::XTimeRate016,
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
#[error("unknown client-go version {0:?} (expected 1.37, 1.36 or 1.20)")]
pub struct UnknownClientGoVersion(pub String);

impl FromStr for ClientGoVersion {
    type Err = UnknownClientGoVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "1.20" | "v1.20" | "1.20.2" | "v1.20.2" => Ok(ClientGoVersion::V1_20),
            "1.36" | "v1.36" | "0.36.4" | "v0.36.4" => Ok(ClientGoVersion::V1_36),
            "1.37" | "v1.37" | "0.37.2" | "v0.37.2" => Ok(ClientGoVersion::V1_37),
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
    /// `golang.org/x/time/rate` 0.16 (client-go 1.36 and 1.37, whose 0.15 has the same
    /// `rate` package) in IEEE doubles, operation for
    /// operation: tokens start at `burst`, a refill is `d.Seconds() * qps`, a wait is
    /// `time.Duration(tokens / qps * 1e9)` (truncated).
    XTimeRate016,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_parses_and_prints_back() {
        for (texts, v) in [
            (
                &["1.20", "v1.20", "1.20.2", " v1.20.2 "][..],
                ClientGoVersion::V1_20,
            ),
            (
                &["1.36", "v1.36", "0.36.4", "v0.36.4"][..],
                ClientGoVersion::V1_36,
            ),
            (
                &["1.37", "v1.37", "0.37.2", "v0.37.2"][..],
                ClientGoVersion::V1_37,
            ),
        ] {
            for t in texts {
                assert_eq!(t.parse::<ClientGoVersion>(), Ok(v), "{t:?}");
            }
            assert_eq!(v.to_string().parse::<ClientGoVersion>(), Ok(v));
        }
        for bad in ["1.38", "0.37.1", "1.3", ""] {
            assert!(bad.parse::<ClientGoVersion>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn one_point_thirty_seven_behaves_as_one_point_thirty_six() {
        let (new, old) = (ClientGoVersion::V1_37, ClientGoVersion::V1_36);
        assert_eq!(ClientGoVersion::default(), new);
        assert_eq!(new.behaviour(), old);
        assert_eq!(new.spam_key_has_type(), old.spam_key_has_type());
        assert_eq!(new.reporting_fields(), old.reporting_fields());
        assert_eq!(new.uuid_names(), old.uuid_names());
        assert_eq!(new.token_bucket(), old.token_bucket());
        // ... and 1.20 is still its own.
        let legacy = ClientGoVersion::V1_20;
        assert_eq!(legacy.behaviour(), legacy);
        assert!(!legacy.spam_key_has_type() && !legacy.reporting_fields() && !legacy.uuid_names());
        assert_eq!(legacy.token_bucket(), TokenBucket::Legacy);
    }
}
