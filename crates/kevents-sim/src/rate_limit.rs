//! The `EventRateLimit` admission plugin of kube-apiserver
//! (`plugin/pkg/admission/eventratelimit`), reproduced rule for rule so that the simulators
//! throttle event writes as a hardened apiserver does ([`EventRateLimits`],
//! [`EventRateLimiter`]).
//!
//! What the plugin does, and so what this does:
//!
//! * It sees the **create** and **update** (PATCH is an update) of core/v1 `Event`s only:
//!   `events.k8s.io/v1` writes are a different group-kind and pass unlimited (checked on
//!   kube-apiserver 1.20.2 and 1.36.3), reads and deletes are never limited.
//! * One enforcer per configured limit, in the configuration's order. Each has a token
//!   bucket per key: `Server` one for everything, `Namespace` per namespace, `User` per
//!   user name (empty for a request without a user), `SourceAndObject` per event source
//!   and involved object (`source.component`, `source.host`, `involvedObject.kind`,
//!   `.namespace`, `.name`, `.uid`, `.apiVersion` joined without separator). Keyed
//!   buckets live in an LRU cache of `cacheSize` entries (4 096 when 0); a key evicted
//!   and seen again starts a full bucket.
//! * **Every** enforcer is asked, even after one refused, so an enforcer that accepts
//!   consumes its token even when another refuses the write.
//! * The buckets are client-go's `flowcontrol.NewTokenBucketRateLimiter(qps, burst)`
//!   (`golang.org/x/time/rate`): they start full (`burst` tokens), refill continuously at
//!   `qps` tokens a second up to `burst`, and `TryAccept` takes one token if there is a whole
//!   one; a refusal takes nothing.
//! * A refused write is answered `429` with a `Status` whose message is `Too many requests:
//!   limit reached on type T for key K`, or `Too many requests: [A, B]` when several
//!   limits refused it; the `Status` has no `reason` and no `details`, and the answer has
//!   no `Retry-After` header (both as kube-apiserver 1.20.2 and 1.36.3 answer).
//! * The plugin runs after validation (an invalid event is a 422 and takes no token) and
//!   before storage (a create that then fails with 409 `AlreadyExists` took its tokens); a
//!   PATCH of a missing event is a 404 before admission.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::str::FromStr;
use std::time::Instant;

/// The buckets kept per limit type when a limit gives no cache size (the plugin's
/// `defaultCacheSize`).
pub const DEFAULT_CACHE_SIZE: u32 = 4096;

/// What a limit counts by (the plugin's `LimitType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LimitType {
    /// Every event write to the server: one bucket.
    Server,
    /// A bucket per namespace.
    Namespace,
    /// A bucket per user name.
    User,
    /// A bucket per event source and involved object.
    SourceAndObject,
}

impl fmt::Display for LimitType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LimitType::Server => "Server",
            LimitType::Namespace => "Namespace",
            LimitType::User => "User",
            LimitType::SourceAndObject => "SourceAndObject",
        })
    }
}

/// Why a limit could not be read or is not one kube-apiserver accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateLimitError {
    /// Not `TYPE:QPS:BURST` or `TYPE:QPS:BURST:CACHE_SIZE`.
    #[error("event rate limit {0:?} is not TYPE:QPS:BURST[:CACHE_SIZE]")]
    Syntax(String),
    /// The type is none of `Server`, `Namespace`, `User`, `SourceAndObject`.
    #[error("unknown event rate limit type {0:?} (Server, Namespace, User or SourceAndObject)")]
    UnknownType(String),
    /// kube-apiserver refuses a qps or burst of 0.
    #[error("event rate limit {0:?}: qps and burst must be positive")]
    NotPositive(String),
}

impl FromStr for LimitType {
    type Err = RateLimitError;

    /// ```
    /// use kevents_sim::rate_limit::LimitType;
    /// assert_eq!("User".parse::<LimitType>().unwrap(), LimitType::User);
    /// assert!("Pod".parse::<LimitType>().is_err());
    /// ```
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Server" => Ok(LimitType::Server),
            "Namespace" => Ok(LimitType::Namespace),
            "User" => Ok(LimitType::User),
            "SourceAndObject" => Ok(LimitType::SourceAndObject),
            other => Err(RateLimitError::UnknownType(other.to_owned())),
        }
    }
}

/// One limit (the plugin's `Limit`): `qps` writes a second with bursts of `burst`, per key
/// of its type, keeping the buckets of `cache_size` keys (0: [`DEFAULT_CACHE_SIZE`]; unused
/// by `Server`).
///
/// ```
/// use kevents_sim::rate_limit::{LimitType, RateLimit};
/// let l: RateLimit = "Namespace:5:10".parse().unwrap();
/// assert_eq!(l, RateLimit { kind: LimitType::Namespace, qps: 5, burst: 10, cache_size: 0 });
/// assert_eq!(l.to_string(), "Namespace:5:10");
/// assert!("Namespace:0:10".parse::<RateLimit>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateLimit {
    /// What it counts by.
    pub kind: LimitType,
    /// Tokens added a second.
    pub qps: u32,
    /// Tokens a bucket holds (and starts with).
    pub burst: u32,
    /// Buckets kept (least recently used evicted); 0 means [`DEFAULT_CACHE_SIZE`].
    pub cache_size: u32,
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.kind, self.qps, self.burst)?;
        if self.cache_size != 0 {
            write!(f, ":{}", self.cache_size)?;
        }
        Ok(())
    }
}

impl FromStr for RateLimit {
    type Err = RateLimitError;

    /// `TYPE:QPS:BURST[:CACHE_SIZE]`, the syntax of `scripts/apiserver/start.sh`'s
    /// `KEVENTS_EVENT_RATE_LIMITS`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let syntax = || RateLimitError::Syntax(s.to_owned());
        let parts: Vec<&str> = s.split(':').collect();
        if !(3..=4).contains(&parts.len()) {
            return Err(syntax());
        }
        let num = |p: &str| p.parse::<u32>().map_err(|_| syntax());
        let limit = RateLimit {
            kind: parts[0].parse()?,
            qps: num(parts[1])?,
            burst: num(parts[2])?,
            cache_size: parts.get(3).map_or(Ok(0), |p| num(p))?,
        };
        if limit.qps == 0 || limit.burst == 0 {
            return Err(RateLimitError::NotPositive(s.to_owned()));
        }
        Ok(limit)
    }
}

/// The plugin's configuration: its limits, in the order they are checked. Empty: the
/// plugin is off.
///
/// ```
/// use kevents_sim::rate_limit::EventRateLimits;
/// let l: EventRateLimits = "Namespace:5:10 Server:20:40".parse().unwrap();
/// assert_eq!(l.limits.len(), 2);
/// assert_eq!(l.to_string(), "Namespace:5:10 Server:20:40");
/// assert!(EventRateLimits::default().limits.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct EventRateLimits {
    /// The limits, checked in this order.
    pub limits: Vec<RateLimit>,
}

impl fmt::Display for EventRateLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, l) in self.limits.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{l}")?;
        }
        Ok(())
    }
}

impl FromStr for EventRateLimits {
    type Err = RateLimitError;

    /// Limits separated by white space.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(EventRateLimits {
            limits: s
                .split_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()?,
        })
    }
}

impl From<Vec<RateLimit>> for EventRateLimits {
    fn from(limits: Vec<RateLimit>) -> Self {
        EventRateLimits { limits }
    }
}

/// What the plugin reads of a write: its namespace, its user, and the key of its event's
/// source and object ([`source_and_object_key`]).
#[derive(Debug, Clone, Copy)]
pub struct EventWrite<'a> {
    /// The namespace of the request.
    pub namespace: &'a str,
    /// The user's name (empty: no user).
    pub user: &'a str,
    /// The event's source-and-object key.
    pub source_and_object: &'a str,
}

/// The `SourceAndObject` key of a core/v1 event given as JSON, as the plugin builds it.
///
/// ```
/// let e = serde_json::json!({"source": {"component": "kubelet", "host": "node-1"},
///     "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "web", "uid": "u1"}});
/// assert_eq!(kevents_sim::rate_limit::source_and_object_key(&e), "kubeletnode-1Podnswebu1");
/// ```
pub fn source_and_object_key(event: &serde_json::Value) -> String {
    let at = |a: &str, b: &str| event.get(a).and_then(|o| o.get(b)).and_then(|v| v.as_str());
    [
        at("source", "component"),
        at("source", "host"),
        at("involvedObject", "kind"),
        at("involvedObject", "namespace"),
        at("involvedObject", "name"),
        at("involvedObject", "uid"),
        at("involvedObject", "apiVersion"),
    ]
    .iter()
    .map(|p| p.unwrap_or(""))
    .collect()
}

/// A write the plugin refused: its 429's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Throttled {
    /// `Too many requests: limit reached on type T for key K` (or `[..., ...]`).
    pub message: String,
}

/// `golang.org/x/time/rate`'s limiter as `TryAccept` uses it.
#[derive(Debug, Clone)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn full(burst: u32, now: Instant) -> Self {
        Bucket {
            tokens: f64::from(burst),
            last: now,
        }
    }

    fn try_accept(&mut self, now: Instant, qps: u32, burst: u32) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        let tokens = (self.tokens + elapsed * f64::from(qps)).min(f64::from(burst));
        if tokens >= 1.0 {
            self.tokens = tokens - 1.0;
            if now > self.last {
                self.last = now;
            }
            true
        } else {
            false
        }
    }
}

/// One limit's buckets: an LRU cache of keyed buckets (one bucket for `Server`).
#[derive(Debug)]
struct Enforcer {
    limit: RateLimit,
    buckets: HashMap<String, (Bucket, u64)>,
    /// Last use -> key, oldest first.
    recency: BTreeMap<u64, String>,
    tick: u64,
}

impl Enforcer {
    fn capacity(&self) -> usize {
        match (self.limit.kind, self.limit.cache_size) {
            (LimitType::Server, _) => 1,
            (_, 0) => DEFAULT_CACHE_SIZE as usize,
            (_, n) => n as usize,
        }
    }

    fn accept(&mut self, key: &str, now: Instant) -> bool {
        self.tick += 1;
        let tick = self.tick;
        let RateLimit { qps, burst, .. } = self.limit;
        if let Some((bucket, used)) = self.buckets.get_mut(key) {
            self.recency.remove(used);
            *used = tick;
            self.recency.insert(tick, key.to_owned());
            return bucket.try_accept(now, qps, burst);
        }
        if self.buckets.len() >= self.capacity()
            && let Some((_, oldest)) = self.recency.pop_first()
        {
            self.buckets.remove(&oldest);
        }
        let mut bucket = Bucket::full(burst, now);
        let ok = bucket.try_accept(now, qps, burst);
        self.buckets.insert(key.to_owned(), (bucket, tick));
        self.recency.insert(tick, key.to_owned());
        ok
    }
}

/// The plugin at work: its buckets, asked about each core/v1 event create or update.
///
/// ```
/// use std::time::{Duration, Instant};
/// use kevents_sim::rate_limit::{EventRateLimiter, EventWrite};
/// let mut l = EventRateLimiter::new(&"Namespace:1:2".parse().unwrap());
/// let t = Instant::now();
/// let w = EventWrite { namespace: "a", user: "", source_and_object: "" };
/// assert!(l.admit(t, w).is_ok());
/// assert!(l.admit(t, w).is_ok());
/// let refused = l.admit(t, w).unwrap_err();
/// assert_eq!(refused.message, "Too many requests: limit reached on type Namespace for key a");
/// assert!(l.admit(t + Duration::from_secs(1), w).is_ok());
/// ```
#[derive(Debug)]
pub struct EventRateLimiter {
    enforcers: Vec<Enforcer>,
}

impl EventRateLimiter {
    /// Full buckets for `limits`.
    pub fn new(limits: &EventRateLimits) -> Self {
        EventRateLimiter {
            enforcers: limits
                .limits
                .iter()
                .map(|&limit| Enforcer {
                    limit,
                    buckets: HashMap::new(),
                    recency: BTreeMap::new(),
                    tick: 0,
                })
                .collect(),
        }
    }

    /// Whether no limit is configured (every write passes).
    pub fn is_empty(&self) -> bool {
        self.enforcers.is_empty()
    }

    /// Asks every limit, in order, for a token for `write` at `now` (each accepting limit
    /// takes its token, even when another refuses); `Err` with the 429's message when any
    /// refused.
    pub fn admit(&mut self, now: Instant, write: EventWrite<'_>) -> Result<(), Throttled> {
        let mut refusals = Vec::new();
        for e in &mut self.enforcers {
            let key = match e.limit.kind {
                LimitType::Server => "",
                LimitType::Namespace => write.namespace,
                LimitType::User => write.user,
                LimitType::SourceAndObject => write.source_and_object,
            };
            if !e.accept(key, now) {
                refusals.push(format!(
                    "limit reached on type {} for key {key}",
                    e.limit.kind
                ));
            }
        }
        match refusals.len() {
            0 => Ok(()),
            1 => Err(Throttled {
                message: format!("Too many requests: {}", refusals[0]),
            }),
            _ => Err(Throttled {
                message: format!("Too many requests: [{}]", refusals.join(", ")),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn w<'a>(ns: &'a str, user: &'a str, so: &'a str) -> EventWrite<'a> {
        EventWrite {
            namespace: ns,
            user,
            source_and_object: so,
        }
    }

    fn limiter(spec: &str) -> EventRateLimiter {
        EventRateLimiter::new(&spec.parse().expect("limits"))
    }

    #[test]
    fn a_bucket_starts_full_and_refills_at_qps_up_to_burst() {
        let mut l = limiter("Server:10:5");
        let t = Instant::now();
        let ok = (0..8)
            .filter(|_| l.admit(t, w("a", "", "")).is_ok())
            .count();
        assert_eq!(ok, 5, "starts with burst tokens");
        // 0.25 s later: 2.5 tokens, so 2 writes.
        let t1 = t + Duration::from_millis(250);
        let ok = (0..8)
            .filter(|_| l.admit(t1, w("a", "", "")).is_ok())
            .count();
        assert_eq!(ok, 2);
        // The half token left carries over: 0.05 s more makes it one.
        assert!(
            l.admit(t1 + Duration::from_millis(50), w("a", "", ""))
                .is_ok()
        );
        // A long pause refills only up to burst.
        let t2 = t1 + Duration::from_secs(100);
        let ok = (0..20)
            .filter(|_| l.admit(t2, w("a", "", "")).is_ok())
            .count();
        assert_eq!(ok, 5);
    }

    #[test]
    fn a_refusal_takes_no_token() {
        let mut l = limiter("Server:1:1");
        let t = Instant::now();
        assert!(l.admit(t, w("a", "", "")).is_ok());
        for _ in 0..50 {
            assert!(
                l.admit(t + Duration::from_millis(500), w("a", "", ""))
                    .is_err()
            );
        }
        assert!(
            l.admit(t + Duration::from_millis(1000), w("a", "", ""))
                .is_ok()
        );
    }

    #[test]
    fn each_type_keys_its_buckets() {
        let t = Instant::now();
        let mut l = limiter("Namespace:1:1");
        assert!(l.admit(t, w("a", "u", "x")).is_ok());
        assert!(l.admit(t, w("b", "u", "x")).is_ok(), "another namespace");
        assert!(l.admit(t, w("a", "v", "y")).is_err(), "same namespace");
        let mut l = limiter("User:1:1");
        assert!(l.admit(t, w("a", "u", "x")).is_ok());
        assert!(l.admit(t, w("a", "v", "x")).is_ok(), "another user");
        let e = l.admit(t, w("b", "u", "y")).unwrap_err();
        assert_eq!(
            e.message,
            "Too many requests: limit reached on type User for key u"
        );
        let mut l = limiter("SourceAndObject:1:1");
        assert!(l.admit(t, w("a", "u", "x")).is_ok());
        assert!(l.admit(t, w("a", "u", "y")).is_ok(), "another object");
        assert!(l.admit(t, w("b", "v", "x")).is_err(), "same object");
        let mut l = limiter("Server:1:1");
        assert!(l.admit(t, w("a", "u", "x")).is_ok());
        let e = l.admit(t, w("b", "v", "y")).unwrap_err();
        assert_eq!(
            e.message,
            "Too many requests: limit reached on type Server for key "
        );
    }

    #[test]
    fn every_limit_is_asked_and_accepting_ones_take_their_token() {
        // As kube-apiserver answered with Namespace:1:2 then Server:1:3: two writes pass,
        // the third is refused by Namespace but takes Server's last token, the fourth is
        // refused by both, in the configuration's order.
        let mut l = limiter("Namespace:1:2 Server:1:3");
        let t = Instant::now();
        assert!(l.admit(t, w("default", "", "")).is_ok());
        assert!(l.admit(t, w("default", "", "")).is_ok());
        assert_eq!(
            l.admit(t, w("default", "", "")).unwrap_err().message,
            "Too many requests: limit reached on type Namespace for key default"
        );
        assert_eq!(
            l.admit(t, w("default", "", "")).unwrap_err().message,
            "Too many requests: [limit reached on type Namespace for key default, \
             limit reached on type Server for key ]"
        );
        // Another namespace has its own full bucket but Server is empty.
        assert_eq!(
            l.admit(t, w("other", "", "")).unwrap_err().message,
            "Too many requests: limit reached on type Server for key "
        );
    }

    #[test]
    fn evicted_keys_start_again_with_a_full_bucket() {
        let mut l = limiter("Namespace:1:1:2");
        let t = Instant::now();
        assert!(l.admit(t, w("a", "", "")).is_ok());
        assert!(l.admit(t, w("b", "", "")).is_ok());
        assert!(l.admit(t, w("a", "", "")).is_err(), "a is cached and empty");
        // a was used last, so c evicts b.
        assert!(l.admit(t, w("c", "", "")).is_ok());
        assert!(l.admit(t, w("a", "", "")).is_err(), "a is still cached");
        assert!(
            l.admit(t, w("b", "", "")).is_ok(),
            "b was evicted: full again"
        );
    }

    #[test]
    fn the_default_cache_holds_4096_keys() {
        let mut l = limiter("Namespace:1:1");
        let t = Instant::now();
        let names: Vec<String> = (0..=4096).map(|i| format!("ns{i}")).collect();
        for n in &names[..4096] {
            assert!(l.admit(t, w(n, "", "")).is_ok());
        }
        assert!(l.admit(t, w("ns0", "", "")).is_err(), "4 096 keys kept");
        // ns0 was just used; ns4096 evicts ns1.
        assert!(l.admit(t, w(&names[4096], "", "")).is_ok());
        assert!(l.admit(t, w("ns1", "", "")).is_ok(), "ns1 evicted");
    }

    #[test]
    fn limits_parse_as_start_sh_writes_them() {
        assert!("Server:1".parse::<RateLimit>().is_err());
        assert!("Server:1:2:3:4".parse::<RateLimit>().is_err());
        assert!("Server:x:2".parse::<RateLimit>().is_err());
        assert!("Server:1:0".parse::<RateLimit>().is_err());
        assert_eq!(
            "User:3:4:9"
                .parse::<RateLimit>()
                .expect("limit")
                .to_string(),
            "User:3:4:9"
        );
    }
}
