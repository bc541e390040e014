//! `CorrelatorOptions`: every knob of client-go's, with the same defaults and the same
//! "zero means default" rule.

use std::fmt;
use std::sync::Arc;

use super::keys::KeyBuilder;
use crate::core_v1::model::Event;
use crate::profile::{ClientGoVersion, TokenBucket};
use crate::time::{SharedClock, SystemClock};

/// Writes the aggregate key and the local key of an event (client-go `EventAggregatorKeyFunc`).
pub type AggregateKeyFn = Arc<dyn Fn(&Event, &mut KeyBuilder, &mut KeyBuilder) + Send + Sync>;
/// Builds the message of an aggregate event (client-go `EventAggregatorMessageFunc`).
pub type MessageFn = Arc<dyn Fn(&Event) -> String + Send + Sync>;
/// Writes the spam-filter key of an event (client-go `EventSpamKeyFunc`).
pub type SpamKeyFn = Arc<dyn Fn(&Event, &mut KeyBuilder) + Send + Sync>;

/// client-go's defaults.
pub mod defaults {
    /// Entries in each of the three LRU caches.
    pub const LRU_CACHE_SIZE: i64 = 4096;
    /// Spam filter burst.
    pub const SPAM_BURST: i32 = 25;
    /// Spam filter refill, tokens per second (float32 `1/300`).
    pub const SPAM_QPS: f32 = 1.0 / 300.0;
    /// Distinct messages that trigger aggregation.
    pub const AGGREGATE_MAX_EVENTS: i64 = 10;
    /// Aggregation inactivity window in seconds.
    pub const AGGREGATE_INTERVAL_SECONDS: i64 = 600;
}

/// Which member of the set of similar messages is removed once aggregation triggers.
///
/// client-go removes an arbitrary member (`PopAny`, in Go map iteration order, so whether a
/// repeated message is aggregated is random). kevents is deterministic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AggregatePop {
    /// Remove the message that was added to the set first (the default). The set then holds
    /// the most recent distinct messages, so a message that keeps recurring is aggregated
    /// at most once per pass through the set.
    #[default]
    Oldest,
    /// Remove the message that was added last (the one that triggered aggregation): the
    /// first `max_events - 1` messages keep their own events.
    Newest,
}

/// Options of a [`Correlator`](super::Correlator), the same as client-go's
/// `CorrelatorOptions`. A zero value means "client-go's default"; other values, negative
/// ones included, are used as given (a negative cache size disables caching, a negative
/// `max_events` never aggregates, a burst below 1 filters everything, a negative qps never
/// filters).
///
/// ```
/// use kevents_core::core_v1::correlator::{CorrelatorOptions, Correlator};
/// let opts = CorrelatorOptions { burst_size: 3, qps: 0.1, ..Default::default() };
/// let correlator = Correlator::new(opts);
/// # let _ = correlator;
/// ```
#[derive(Clone, Default)]
pub struct CorrelatorOptions {
    /// Size of each of the three LRU caches (0: 4096).
    pub lru_cache_size: i64,
    /// Spam filter burst (0: 25). The bucket is capped so that `burst / qps` stays below
    /// about 146 years (governor keeps that span in u64 nanoseconds); with client-go's qps
    /// that still allows 15 million tokens.
    pub burst_size: i32,
    /// Spam filter refill rate in tokens per second (0: 1/300).
    pub qps: f32,
    /// Aggregation key function (None: [`aggregate_by_reason`](super::aggregate_by_reason)).
    pub key_fn: Option<AggregateKeyFn>,
    /// Aggregate message function (None: [`aggregate_message`](super::aggregate_message)).
    pub message_fn: Option<MessageFn>,
    /// Distinct messages that trigger aggregation (0: 10).
    pub max_events: i64,
    /// Aggregation inactivity window in seconds (0: 600).
    pub max_interval_in_seconds: i64,
    /// Clock (None: the system clock).
    pub clock: Option<SharedClock>,
    /// Spam key function (None: the profile's, [`spam_key_with_type`](super::spam_key_with_type)
    /// for client-go 1.36 and 1.37, [`spam_key`](super::spam_key) for 1.20).
    pub spam_key_fn: Option<SpamKeyFn>,
    /// Which similar message leaves the set when aggregation triggers.
    pub aggregate_pop: AggregatePop,
    /// The client-go release whose spam key and token bucket are used where
    /// `spam_key_fn` and `token_bucket` do not say (default 1.37).
    pub client_go: ClientGoVersion,
    /// The spam filter's token-bucket arithmetic (None: the profile's).
    pub token_bucket: Option<TokenBucket>,
}

impl CorrelatorOptions {
    /// These options with every zero replaced by client-go's default.
    pub fn with_defaults(mut self) -> Self {
        if self.lru_cache_size == 0 {
            self.lru_cache_size = defaults::LRU_CACHE_SIZE;
        }
        if self.burst_size == 0 {
            self.burst_size = defaults::SPAM_BURST;
        }
        if self.qps == 0.0 {
            self.qps = defaults::SPAM_QPS;
        }
        if self.max_events == 0 {
            self.max_events = defaults::AGGREGATE_MAX_EVENTS;
        }
        if self.max_interval_in_seconds == 0 {
            self.max_interval_in_seconds = defaults::AGGREGATE_INTERVAL_SECONDS;
        }
        if self.clock.is_none() {
            self.clock = Some(Arc::new(SystemClock));
        }
        if self.token_bucket.is_none() {
            self.token_bucket = Some(self.client_go.token_bucket());
        }
        self
    }

    /// client-go's defaults as release `version` has them.
    ///
    /// ```
    /// use kevents_core::core_v1::correlator::CorrelatorOptions;
    /// use kevents_core::profile::{ClientGoVersion, TokenBucket};
    /// let o = CorrelatorOptions::for_client_go(ClientGoVersion::V1_20).with_defaults();
    /// assert_eq!(o.token_bucket, Some(TokenBucket::Legacy));
    /// assert_eq!(CorrelatorOptions::default().client_go, ClientGoVersion::V1_37);
    /// ```
    pub fn for_client_go(version: ClientGoVersion) -> Self {
        CorrelatorOptions {
            client_go: version,
            ..Default::default()
        }
    }
}

impl fmt::Debug for CorrelatorOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CorrelatorOptions")
            .field("lru_cache_size", &self.lru_cache_size)
            .field("burst_size", &self.burst_size)
            .field("qps", &self.qps)
            .field("key_fn", &self.key_fn.as_ref().map(|_| "custom"))
            .field("message_fn", &self.message_fn.as_ref().map(|_| "custom"))
            .field("max_events", &self.max_events)
            .field("max_interval_in_seconds", &self.max_interval_in_seconds)
            .field("clock", &self.clock)
            .field("spam_key_fn", &self.spam_key_fn.as_ref().map(|_| "custom"))
            .field("aggregate_pop", &self.aggregate_pop)
            .field("client_go", &self.client_go)
            .field("token_bucket", &self.token_bucket)
            .finish()
    }
}
