//! Why a simulator could not start ([`SimError`]): its socket, its thread or its TLS setup.

use std::net::SocketAddr;

use thiserror::Error;

/// Why the simulator could not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SimError {
    /// Binding the listening socket failed.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The IO error.
        source: std::io::Error,
    },
    /// The server thread or its runtime could not be started.
    #[error("cannot start the simulator thread: {0}")]
    Thread(String),
    /// Generating or loading the TLS certificate failed.
    #[error("TLS setup: {0}")]
    Tls(String),
}
