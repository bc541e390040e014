//! What the server's tasks share: the store, the fault plan, the counters, who may do
//! what; and one connection's kill switch.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

use crate::faults::Faults;
use crate::flow_control::FlowController;
use crate::stats::SimStats;
use crate::store::Store;

/// A known bearer token.
#[derive(Debug, Clone)]
pub(crate) struct User {
    pub(crate) name: String,
    pub(crate) authorized: bool,
}

pub(crate) struct Shared {
    pub(crate) store: Mutex<Store>,
    pub(crate) faults: Mutex<Faults>,
    pub(crate) stats: Mutex<SimStats>,
    /// `None`: no authentication, everyone may do everything. Tokens can be added and
    /// revoked while it runs.
    pub(crate) tokens: Option<Mutex<Vec<(String, User)>>>,
    /// Client certificates (DER) issued by [`crate::SimHandle::client_certificate`] and whom
    /// they authenticate (HTTPS only; the TLS layer checks they were signed by the
    /// simulator's client CA).
    pub(crate) cert_users: Mutex<Vec<(Vec<u8>, User)>>,
    pub(crate) events_v1_served: bool,
    /// API Priority and Fairness for event writes, when configured.
    pub(crate) flow: Option<FlowController>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the data consistent, so a poisoned lock is usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One connection's kill switch. `sock` is a duplicate of the connection's descriptor, so
/// setting `SO_LINGER` 0 on it makes the final close send a TCP RST.
pub(crate) struct ConnCtl {
    pub(super) sock: std::net::TcpStream,
    pub(super) kill: Notify,
}

impl ConnCtl {
    pub(super) fn reset(&self) {
        let _ = socket2::SockRef::from(&self.sock).set_linger(Some(Duration::ZERO));
        self.kill.notify_one();
    }
}
