//! What the simulator counts as it serves ([`SimStats`]), for tests that check how many
//! connections, requests and injected faults a client went through.

/// Counters of what the simulator saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SimStats {
    /// TCP connections accepted.
    pub connections: u64,
    /// HTTP requests received (including faulted ones).
    pub requests: u64,
    /// Successful POSTs (events and namespaces).
    pub creates: u64,
    /// Successful PATCHes.
    pub patches: u64,
    /// Requests answered with an injected error.
    pub injected_errors: u64,
    /// Requests whose connection was reset.
    pub resets: u64,
    /// Event writes refused 429 by the `EventRateLimit` plugin or by flow control
    /// ([`SimConfig::flow_control`](crate::SimConfig::flow_control)), or
    /// ([`SimConfig::event_rate_limits`](crate::SimConfig::event_rate_limits)).
    pub throttled: u64,
}
