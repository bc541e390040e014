//! A running simulator ([`SimHandle`]): its address, tokens, certificates and kubeconfig for
//! clients; what it stored; the fault plan and counters; refusing and accepting connections
//! (a crashed and restarted apiserver) and shutting it down.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use kevents_core::Event;
use tokio::sync::{mpsc, oneshot};

use crate::config::SimAuth;
use crate::faults::Faults;
use crate::server::{self, Command, Shared, lock};
use crate::stats::SimStats;

/// A simulator whose thread is starting: what its [`SimHandle`] holds but the address, known
/// once the server listens.
pub(crate) struct PendingHandle {
    pub(crate) shared: Arc<Shared>,
    pub(crate) commands: mpsc::UnboundedSender<Command>,
    pub(crate) auth: Option<SimAuth>,
    pub(crate) ca_pem: Option<String>,
    pub(crate) client_ca: Option<Arc<rcgen::Issuer<'static, rcgen::KeyPair>>>,
}

impl PendingHandle {
    /// The handle of the simulator listening on `addr`.
    pub(crate) fn finish(self, addr: SocketAddr) -> SimHandle {
        SimHandle {
            shared: self.shared,
            commands: self.commands,
            addr,
            auth: self.auth,
            ca_pem: self.ca_pem,
            client_ca: self.client_ca,
        }
    }
}

/// A running simulator. Dropping it stops the server (without waiting); use
/// [`SimHandle::shutdown`] to wait.
pub struct SimHandle {
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
    addr: SocketAddr,
    auth: Option<SimAuth>,
    ca_pem: Option<String>,
    client_ca: Option<Arc<rcgen::Issuer<'static, rcgen::KeyPair>>>,
}

impl std::fmt::Debug for SimHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimHandle")
            .field("url", &self.url())
            .field("auth", &self.auth.is_some())
            .finish_non_exhaustive()
    }
}

impl SimHandle {
    /// `http://127.0.0.1:PORT` (or `https://`).
    pub fn url(&self) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token with every right, if authentication is on.
    pub fn admin_token(&self) -> Option<&str> {
        self.auth.as_ref().map(|a| a.admin_token.as_str())
    }

    /// The token without rights (403 on every event request), if authentication is on.
    pub fn nobody_token(&self) -> Option<&str> {
        self.auth.as_ref().map(|a| a.nobody_token.as_str())
    }

    /// Adds a bearer token while the simulator runs: `authorized` ones may do everything
    /// (like the admin token), the others are refused (403) but discovery, as user `user`.
    /// `false` when authentication is off (every request is allowed anyway).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let sim = kevents_sim::Simulator::start(kevents_sim::SimConfig::like_apiserver()).await.unwrap();
    /// assert!(sim.add_token("rotated-1", "rotator", true));
    /// assert!(sim.revoke_token("rotated-1"));
    /// assert!(!sim.revoke_token("rotated-1"));
    /// # }
    /// ```
    pub fn add_token(&self, token: &str, user: &str, authorized: bool) -> bool {
        let Some(tokens) = &self.shared.tokens else {
            return false;
        };
        lock(tokens).push((
            token.to_owned(),
            server::User {
                name: user.to_owned(),
                authorized,
            },
        ));
        true
    }

    /// Revokes a bearer token (the built-in ones too): requests with it get 401 from now on.
    /// `false` if it was not known.
    pub fn revoke_token(&self, token: &str) -> bool {
        let Some(tokens) = &self.shared.tokens else {
            return false;
        };
        let mut tokens = lock(tokens);
        let before = tokens.len();
        tokens.retain(|(t, _)| t != token);
        tokens.len() != before
    }

    /// A new TLS client certificate and its key (both PEM), signed by the simulator's client
    /// CA, that authenticates as `user` (with every right when `authorized`, else refused
    /// with 403 but discovery). HTTPS only (`None` over plain HTTP); with authentication off,
    /// every request is allowed anyway.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let sim = kevents_sim::Simulator::start(kevents_sim::SimConfig::like_apiserver()).await.unwrap();
    /// let (cert_pem, key_pem) = sim.client_certificate("cert-user", true).unwrap();
    /// assert!(cert_pem.contains("BEGIN CERTIFICATE") && key_pem.contains("PRIVATE KEY"));
    /// # }
    /// ```
    pub fn client_certificate(&self, user: &str, authorized: bool) -> Option<(String, String)> {
        let issuer = self.client_ca.as_ref()?;
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).ok()?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, user);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let key = rcgen::KeyPair::generate().ok()?;
        let cert = params.signed_by(&key, issuer).ok()?;
        lock(&self.shared.cert_users).push((
            cert.der().to_vec(),
            server::User {
                name: user.to_owned(),
                authorized,
            },
        ));
        Some((cert.pem(), key.serialize_pem()))
    }

    /// The self-signed serving certificate (PEM) to trust, when serving HTTPS.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// A kubeconfig (YAML) for this simulator, with `token` as the user's bearer token
    /// (the admin token when `None` and authentication is on) and context namespace
    /// `namespace`.
    ///
    /// ```
    /// let sim = kevents_sim::Simulator::start_blocking(Default::default()).unwrap();
    /// assert!(sim.kubeconfig(None, "default").contains(&sim.url()));
    /// ```
    pub fn kubeconfig(&self, token: Option<&str>, namespace: &str) -> String {
        let mut cluster = format!("    server: {}\n", self.url());
        if let Some(pem) = &self.ca_pem {
            let data = base64::engine::general_purpose::STANDARD.encode(pem.as_bytes());
            cluster.push_str(&format!("    certificate-authority-data: {data}\n"));
        }
        let token = token.or(self.admin_token());
        let user = match token {
            Some(t) => format!("    token: {t}\n"),
            None => "    {}\n".to_owned(),
        };
        let user = if token.is_some() {
            format!("- name: sim\n  user:\n{user}")
        } else {
            "- name: sim\n  user: {}\n".to_owned()
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n{cluster}users:\n{user}contexts:\n- name: sim\n  context:\n    cluster: sim\n    user: sim\n    namespace: {namespace}\ncurrent-context: sim\n"
        )
    }

    /// Every stored event, ordered by namespace and name (events the store cannot read as
    /// a core/v1 Event are skipped).
    pub fn events(&self) -> Vec<Event> {
        lock(&self.shared.store)
            .events
            .values()
            .filter_map(|v| serde_json::from_value(v.clone()).ok())
            .collect()
    }

    /// One stored event.
    pub fn event(&self, namespace: &str, name: &str) -> Option<Event> {
        lock(&self.shared.store)
            .events
            .get(&(namespace.to_owned(), name.to_owned()))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
    }

    /// Deletes an event (as the server's TTL would). Returns whether it existed.
    pub fn delete_event(&self, namespace: &str, name: &str) -> bool {
        lock(&self.shared.store)
            .events
            .remove(&(namespace.to_owned(), name.to_owned()))
            .is_some()
    }

    /// Makes `name` exist (when namespaces are enforced).
    pub fn create_namespace(&self, name: &str) {
        lock(&self.shared.store).namespaces.insert(name.to_owned());
    }

    /// Replaces the fault plan.
    pub fn set_faults(&self, faults: Faults) {
        *lock(&self.shared.faults) = faults;
    }

    /// The current fault plan (with its counters as far as they have counted down).
    pub fn faults(&self) -> Faults {
        lock(&self.shared.faults).clone()
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.set_faults(Faults::none());
    }

    /// The API Priority and Fairness of event writes, when configured
    /// ([`SimConfig::flow_control`](crate::SimConfig::flow_control)): its seats, queues and
    /// counts.
    pub fn flow_control(&self) -> Option<&crate::flow_control::FlowController> {
        self.shared.flow.as_ref()
    }

    /// Counters.
    pub fn stats(&self) -> SimStats {
        *lock(&self.shared.stats)
    }

    /// Stops listening and resets every open connection, as a crashed apiserver would.
    /// With `Some(d)`, the same port is listened on again after `d`; with `None`, only
    /// [`SimHandle::accept_connections`] does. Returns once connections are refused.
    pub async fn refuse_connections(&self, duration: Option<Duration>) {
        let (done, rx) = oneshot::channel();
        if self
            .commands
            .send(Command::Refuse { duration, done })
            .is_ok()
        {
            let _ = rx.await;
        }
    }

    /// Listens again on the same port (after [`SimHandle::refuse_connections`]). Returns once
    /// connections are accepted.
    pub async fn accept_connections(&self) {
        let (done, rx) = oneshot::channel();
        if self.commands.send(Command::Accept { done }).is_ok() {
            let _ = rx.await;
        }
    }

    /// Stops the server and waits until the port is closed.
    pub async fn shutdown(self) {
        let (done, rx) = oneshot::channel();
        if self.commands.send(Command::Shutdown { done }).is_ok() {
            let _ = rx.await;
        }
    }
}

impl Drop for SimHandle {
    fn drop(&mut self) {
        let (done, _rx) = oneshot::channel();
        let _ = self.commands.send(Command::Shutdown { done });
    }
}
