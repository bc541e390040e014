//! How a simulator is started ([`SimConfig`]): address, TLS, bearer tokens ([`SimAuth`]),
//! which namespaces exist, whether `events.k8s.io/v1` is served, event rate limits, flow control. The default is the
//! simplest server; [`SimConfig::like_apiserver`] is a fresh kube-apiserver's setup.

use std::net::SocketAddr;

use crate::flow_control::FlowControl;
use crate::rate_limit::EventRateLimits;

/// Bearer-token authentication: one token with every right, one with none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimAuth {
    /// A token allowed everything (like group `system:masters`).
    pub admin_token: String,
    /// A token that authenticates as user `nobody` and is refused everything but discovery.
    pub nobody_token: String,
}

impl SimAuth {
    /// Fresh random tokens.
    ///
    /// ```
    /// let a = kevents_sim::SimAuth::random();
    /// assert_ne!(a.admin_token, a.nobody_token);
    /// ```
    pub fn random() -> Self {
        SimAuth {
            admin_token: format!("admin-{}", uuid::Uuid::new_v4().simple()),
            nobody_token: format!("nobody-{}", uuid::Uuid::new_v4().simple()),
        }
    }
}

/// How to start the simulator. The default: `127.0.0.1`, a free port, plain HTTP, no
/// authentication, every namespace exists, events.k8s.io/v1 not served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// Listening address (port 0: a free one).
    pub bind: SocketAddr,
    /// Serve HTTPS with a freshly generated self-signed certificate for `127.0.0.1` and
    /// `localhost` (see [`SimHandle::ca_pem`](crate::SimHandle::ca_pem)).
    pub tls: bool,
    /// Require bearer tokens.
    pub auth: Option<SimAuth>,
    /// `Some`: only these namespaces exist (more can be created with `POST
    /// /api/v1/namespaces` or
    /// [`SimHandle::create_namespace`](crate::SimHandle::create_namespace)); creating an
    /// event elsewhere is 404. `None`: every namespace exists.
    pub namespaces: Option<Vec<String>>,
    /// Serve `events.k8s.io/v1`: discovery (`GET /apis`, `GET /apis/events.k8s.io/v1`) and
    /// `/apis/events.k8s.io/v1/namespaces/{ns}/events[/{name}]` with kube-apiserver 1.20.2's
    /// behaviour (strict create validation, series merge on PATCH). Off: those paths answer
    /// 404, as a server without the API.
    pub events_v1_served: bool,
    /// resourceVersion before the first write.
    pub initial_resource_version: u64,
    /// kube-apiserver's `EventRateLimit` admission plugin with these limits (see
    /// [`rate_limit`](crate::rate_limit)); empty (the default): off. The `User` key is the
    /// token's user (`kevents-admin` for the admin token; empty without authentication).
    pub event_rate_limits: EventRateLimits,
    /// kube-apiserver's API Priority and Fairness for event writes (see
    /// [`flow_control`](crate::flow_control)); `None` (the default): off. Every event create
    /// and patch of both APIs waits for a seat of the configured priority level after
    /// authentication and before its body is read, holds it while the body arrives, the
    /// fault plan's latency passes and the write is done, and is answered 429 (`Retry-After:
    /// 1`, plain text) when its queue is full or it waited too long. The flow is the user
    /// (`kevents-admin` for the admin token; empty without authentication).
    ///
    /// ```
    /// use kevents_sim::flow_control::{ApfVersion, FlowControl};
    /// let config = kevents_sim::SimConfig {
    ///     flow_control: Some(FlowControl::new(ApfVersion::V1_20, 1, 1)),
    ///     ..Default::default()
    /// };
    /// let sim = kevents_sim::Simulator::start_blocking(config).unwrap();
    /// assert_eq!(sim.flow_control().unwrap().seats_in_use(), 0);
    /// ```
    pub flow_control: Option<FlowControl>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            auth: None,
            namespaces: None,
            events_v1_served: false,
            initial_resource_version: 100,
            event_rate_limits: EventRateLimits::default(),
            flow_control: None,
        }
    }
}

impl SimConfig {
    /// Like a fresh kube-apiserver 1.20: HTTPS (a generated certificate, see
    /// [`SimHandle::ca_pem`](crate::SimHandle::ca_pem); bearer tokens are never sent over
    /// plain HTTP), random admin and nobody tokens, only the namespaces `default`,
    /// `kube-system`, `kube-public` and `kube-node-lease`, and `events.k8s.io/v1` served.
    ///
    /// ```
    /// let c = kevents_sim::SimConfig::like_apiserver();
    /// assert!(c.tls && c.auth.is_some() && c.namespaces.is_some() && c.events_v1_served);
    /// ```
    pub fn like_apiserver() -> Self {
        SimConfig {
            tls: true,
            auth: Some(SimAuth::random()),
            namespaces: Some(
                ["default", "kube-system", "kube-public", "kube-node-lease"]
                    .map(String::from)
                    .to_vec(),
            ),
            events_v1_served: true,
            ..SimConfig::default()
        }
    }
}
