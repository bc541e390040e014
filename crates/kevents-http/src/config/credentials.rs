//! Who the requests are made as: [`Auth`], a TLS [`ClientIdentity`], [`Impersonation`].

use std::path::PathBuf;
use std::time::Duration;

use secrecy::{SecretSlice, SecretString};

use crate::exec::ExecConfig;

/// How requests authenticate. `Debug` never shows a credential.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    /// No credentials (e.g. a client certificate alone, or the simulator without auth).
    #[default]
    None,
    /// A static bearer token.
    Bearer(SecretString),
    /// A bearer token read from a file (at most [`MAX_TOKEN_FILE_BYTES`](super::MAX_TOKEN_FILE_BYTES)) and read again
    /// when it may have rotated: at most every `refresh` (so a rotated service-account token
    /// is picked up), and at once when the server answers 401 (the request is then sent once
    /// more if the file changed).
    BearerFile {
        /// The token file (in a pod: `/var/run/secrets/kubernetes.io/serviceaccount/token`).
        path: PathBuf,
        /// How long a read token is used before the file is read again.
        refresh: Duration,
    },
    /// HTTP basic authentication (kubeconfig `username`/`password`).
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: SecretString,
    },
    /// An exec credential plugin (kubeconfig `users[].user.exec`): run when a credential is
    /// needed, its token and/or client certificate cached until shortly before their
    /// `expirationTimestamp` or until the server answers 401 (then the plugin runs again and
    /// the request is sent once more). Concurrent requests share one run, and sinks built
    /// with equal `ExecConfig`s share one cache (as client-go's authenticator cache). See
    /// [`ExecConfig`].
    Exec(Box<ExecConfig>),
}

impl Auth {
    /// Whether requests carry a credential (token or password).
    pub fn sends_credentials(&self) -> bool {
        !matches!(self, Auth::None)
    }

    /// The kind of credential, for `Debug` output and logs: `none`, `token`, `token-file`,
    /// `basic` or `exec`.
    ///
    /// ```
    /// assert_eq!(kevents_http::Auth::None.kind(), "none");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Auth::None => "none",
            Auth::Bearer(_) => "token",
            Auth::BearerFile { .. } => "token-file",
            Auth::Basic { .. } => "basic",
            Auth::Exec(_) => "exec",
        }
    }
}

/// A TLS client certificate and its private key, both PEM. `Debug` hides the key.
#[derive(Clone)]
pub struct ClientIdentity {
    /// Certificate chain, PEM.
    pub cert_pem: Vec<u8>,
    /// Private key (PKCS#8, PKCS#1 or SEC1), PEM.
    pub key_pem: SecretSlice<u8>,
}

impl ClientIdentity {
    /// An identity from PEM certificate chain and PEM key.
    ///
    /// ```
    /// let id = kevents_http::ClientIdentity::from_pem(b"-----BEGIN CERTIFICATE-----...".to_vec(),
    ///                                                 b"-----BEGIN PRIVATE KEY-----...".to_vec());
    /// assert!(!format!("{id:?}").contains("PRIVATE KEY"));
    /// ```
    pub fn from_pem(cert_pem: Vec<u8>, key_pem: Vec<u8>) -> Self {
        ClientIdentity {
            cert_pem,
            key_pem: SecretSlice::from(key_pem),
        }
    }
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("cert_pem_bytes", &self.cert_pem.len())
            .field("key_pem", &"[REDACTED]")
            .finish()
    }
}

/// User impersonation headers (kubeconfig `as`, `as-uid`, `as-groups`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Impersonation {
    /// `Impersonate-User`.
    pub user: String,
    /// `Impersonate-Uid`, if set.
    pub uid: Option<String>,
    /// `Impersonate-Group`, one header each.
    pub groups: Vec<String>,
}
