//! Starting a simulator ([`Simulator::start`], [`Simulator::start_blocking`]): the shared
//! state is built from the [`SimConfig`], the server thread with its own current-thread
//! tokio runtime binds the socket, and the caller gets a [`SimHandle`] once connections are
//! accepted, from any runtime or none.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot};

use crate::config::SimConfig;
use crate::error::SimError;
use crate::faults::Faults;
use crate::flow_control::FlowController;
use crate::handle::{PendingHandle, SimHandle};
use crate::rate_limit::EventRateLimiter;
use crate::server::{self, Shared, User};
use crate::stats::SimStats;
use crate::store;
use crate::tls::tls_material;

/// Starts simulators.
#[derive(Debug)]
pub struct Simulator;

impl Simulator {
    /// Starts a simulator on its own thread and returns once it accepts connections.
    /// Callable from any async runtime (it only awaits a channel).
    pub async fn start(config: SimConfig) -> Result<SimHandle, SimError> {
        let (tx, rx) = oneshot::channel();
        let pending = Self::spawn(config, tx)?;
        match rx.await {
            Ok(Ok(addr)) => Ok(pending.finish(addr)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(SimError::Thread("the simulator thread exited".into())),
        }
    }

    /// Like [`Simulator::start`], for synchronous callers. Must not be called from inside
    /// an async task (it blocks the thread until the server is up).
    ///
    /// ```
    /// let sim = kevents_sim::Simulator::start_blocking(Default::default()).unwrap();
    /// assert!(sim.url().starts_with("http://127.0.0.1:"));
    /// ```
    pub fn start_blocking(config: SimConfig) -> Result<SimHandle, SimError> {
        let (tx, rx) = oneshot::channel();
        let pending = Self::spawn(config, tx)?;
        match rx.blocking_recv() {
            Ok(Ok(addr)) => Ok(pending.finish(addr)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(SimError::Thread("the simulator thread exited".into())),
        }
    }

    fn spawn(
        config: SimConfig,
        ready: oneshot::Sender<Result<SocketAddr, SimError>>,
    ) -> Result<PendingHandle, SimError> {
        let tls = if config.tls {
            Some(tls_material()?)
        } else {
            None
        };
        let tokens = config.auth.as_ref().map(|a| {
            Mutex::new(vec![
                (
                    a.admin_token.clone(),
                    User {
                        name: "kevents-admin".into(),
                        authorized: true,
                    },
                ),
                (
                    a.nobody_token.clone(),
                    User {
                        name: "nobody".into(),
                        authorized: false,
                    },
                ),
            ])
        });
        let shared = Arc::new(Shared {
            store: Mutex::new({
                let mut s = store::Store::new(
                    config.namespaces.as_deref(),
                    config.initial_resource_version,
                );
                if !config.event_rate_limits.limits.is_empty() {
                    s.rate_limiter = Some(EventRateLimiter::new(&config.event_rate_limits));
                }
                s
            }),
            faults: Mutex::new(Faults::default()),
            stats: Mutex::new(SimStats::default()),
            tokens,
            cert_users: Mutex::new(Vec::new()),
            events_v1_served: config.events_v1_served,
            flow: config.flow_control.clone().map(FlowController::new),
        });
        let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
        let thread_shared = shared.clone();
        let acceptor = tls.as_ref().map(|t| t.acceptor.clone());
        let bind_addr = config.bind;
        std::thread::Builder::new()
            .name("kevents-sim".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready.send(Err(SimError::Thread(e.to_string())));
                        return;
                    }
                };
                rt.block_on(async move {
                    let listener = match server::bind(bind_addr) {
                        Ok(l) => l,
                        Err(source) => {
                            let _ = ready.send(Err(SimError::Bind {
                                addr: bind_addr,
                                source,
                            }));
                            return;
                        }
                    };
                    match listener.local_addr() {
                        Ok(a) => {
                            let _ = ready.send(Ok(a));
                        }
                        Err(source) => {
                            let _ = ready.send(Err(SimError::Bind {
                                addr: bind_addr,
                                source,
                            }));
                            return;
                        }
                    }
                    if let Some(done) = server::run(thread_shared, listener, acceptor, cmd_rx).await
                    {
                        let _ = done.send(());
                    }
                });
            })
            .map_err(|e| SimError::Thread(e.to_string()))?;
        Ok(PendingHandle {
            shared,
            commands: cmd_tx,
            auth: config.auth,
            client_ca: tls.as_ref().map(|t| t.client_ca.clone()),
            ca_pem: tls.map(|t| t.ca_pem),
        })
    }
}
