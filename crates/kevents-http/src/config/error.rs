//! [`ConfigError`]: why a configuration could not be loaded or used.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::exec::ExecError;

/// Why a configuration could not be loaded or used. Messages never contain credentials: no
/// token, password, key or URL user information, and no line of a kubeconfig.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A URL is not an absolute `http(s)://` URL with a host.
    #[error("{origin}: invalid URL {url}: {reason}")]
    Url {
        /// Where the URL comes from (`cluster URL`, `kubeconfig FILE: clusters["c"].cluster.server`, ...).
        origin: String,
        /// The URL, its user information replaced by `***`.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The cluster URL carries user information (`https://user:token@host`). Credentials
    /// belong in the kubeconfig's user entry (`token`, `tokenFile`, `username`/`password`) or
    /// in [`HttpConfig::auth`](super::HttpConfig::auth).
    #[error(
        "{origin}: the server URL {url} carries credentials; put them in the user entry (token, tokenFile, username/password), not in the URL"
    )]
    CredentialsInUrl {
        /// Where the URL comes from.
        origin: String,
        /// The URL, its user information replaced by `***`.
        url: String,
    },
    /// A kubeconfig is not valid YAML or does not have the kubeconfig's shape. The kubeconfig
    /// text is never quoted.
    #[error("kubeconfig {file}, line {line}, column {column}: {problem}")]
    KubeconfigSyntax {
        /// The file (or `kubeconfig text` for [`HttpConfig::from_kubeconfig_yaml`](super::HttpConfig::from_kubeconfig_yaml)).
        file: String,
        /// 1-based line (0: unknown).
        line: u64,
        /// 1-based column (0: unknown).
        column: u64,
        /// What is wrong, quoted values left out.
        problem: String,
    },
    /// A kubeconfig entry is missing or cannot be used (unknown context, cluster without a
    /// server, files that cannot be merged, ...).
    #[error("kubeconfig {file}: {field}: {problem}")]
    Kubeconfig {
        /// The file(s).
        file: String,
        /// The entry, e.g. `contexts["prod"]` or `clusters["c"].cluster.server`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The in-cluster configuration cannot be loaded (not running in a pod?).
    #[error("in-cluster config: {0}")]
    InCluster(String),
    /// Neither a kubeconfig nor an in-cluster configuration was found.
    #[error("no configuration found: {kubeconfig}; and {in_cluster}")]
    Infer {
        /// Why no kubeconfig was loaded.
        kubeconfig: Box<ConfigError>,
        /// Why the in-cluster configuration was not loaded.
        in_cluster: Box<ConfigError>,
    },
    /// A file named by the configuration could not be read.
    #[error("cannot read {what} {}: {source}", .path.display())]
    Read {
        /// What the file holds (`client certificate`, `token file`, ...).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// A file named by the configuration is larger than its limit (an endless file such as
    /// `/dev/zero` is refused once the limit is reached).
    #[error("{what} {} is larger than {limit} bytes", .path.display())]
    TooLarge {
        /// What the file holds.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The limit ([`MAX_KUBECONFIG_BYTES`](super::MAX_KUBECONFIG_BYTES), [`MAX_TOKEN_FILE_BYTES`](super::MAX_TOKEN_FILE_BYTES),
        /// [`MAX_PEM_FILE_BYTES`](super::MAX_PEM_FILE_BYTES)).
        limit: u64,
    },
    /// A file (or a kubeconfig and the files it names) could not be read within
    /// [`CREDENTIAL_FILE_TIMEOUT`](crate::CREDENTIAL_FILE_TIMEOUT): a FIFO without a writer,
    /// a device, a hung network mount. The read is given up; nothing waits for it.
    #[error(
        "reading {what} did not finish within {} s (a FIFO without a writer, or a hung network mount?)",
        .after.as_secs()
    )]
    Stalled {
        /// What was being read, and where.
        what: String,
        /// How long it was waited for.
        after: Duration,
    },
    /// A base64 `*-data` field does not decode.
    #[error("{0} is not valid base64")]
    Base64(&'static str),
    /// PEM certificates or keys could not be parsed or used.
    #[error("TLS configuration: {0}")]
    Tls(String),
    /// Credentials (token, token file, basic auth) for a plain `http://` server: they would
    /// cross the network in clear text. Refused unless the server is on loopback and
    /// [`HttpConfig::allow_credentials_over_loopback_http`](super::HttpConfig::allow_credentials_over_loopback_http) is set.
    #[error(
        "{origin}: refusing to send credentials to {url} over plain http; use an https:// server"
    )]
    CredentialsOverHttp {
        /// Where the configuration comes from.
        origin: String,
        /// The server URL.
        url: String,
    },
    /// `insecure-skip-tls-verify` together with a CA: contradictory (client-go refuses it
    /// too: "specifying a root certificates file with the insecure flag is not allowed").
    #[error(
        "{origin}: insecure-skip-tls-verify together with a certificate authority is not allowed; remove one of them"
    )]
    InsecureWithCa {
        /// Where the configuration comes from.
        origin: String,
    },
    /// A configuration entry combines settings that exclude each other (an exec plugin
    /// together with a token, ...).
    #[error("{origin}: {problem}")]
    Conflict {
        /// The entry, e.g. `kubeconfig F: users["u"].user.exec`.
        origin: String,
        /// What to keep.
        problem: String,
    },
    /// A bearer token that cannot be sent in an `Authorization` header: a CR or LF inside it
    /// (a token pasted with a line break, a token file holding two lines) or another control
    /// character. Refused when the configuration is loaded (for a token file that is re-read
    /// as it rotates: when it is read); the token itself is never shown.
    #[error("{origin}: invalid bearer token: {problem}")]
    InvalidToken {
        /// Where the token comes from: `kubeconfig F: users["u"].user.token`,
        /// `token file /path`, `bearer token`.
        origin: String,
        /// What is wrong with it, e.g. `it contains a line break (CR or LF)`.
        problem: String,
    },
    /// The configuration asks for something this crate does not implement.
    #[error("unsupported configuration: {0}")]
    Unsupported(String),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    /// [`HttpSink::infer_blocking`](crate::HttpSink::infer_blocking) could not start the
    /// helper thread or the runtime it loads the configuration on.
    #[error("cannot load the configuration synchronously: {0}")]
    Blocking(String),
    /// An exec credential plugin (`users[].user.exec`) cannot be used as configured
    /// (no command, an unsupported `apiVersion`, `interactiveMode: Always`, ...).
    #[error("{origin}: {source}")]
    Exec {
        /// Where the configuration comes from.
        origin: String,
        /// What is wrong.
        source: ExecError,
    },
    /// The credential could not be obtained: a token file that cannot be read (its path is
    /// in the message). See [`HttpSink::authenticate`](crate::HttpSink::authenticate).
    #[error("{0}")]
    Credential(String),
    /// An exec credential plugin could not be run or gave no usable credential (the error
    /// names the plugin). See [`HttpSink::authenticate`](crate::HttpSink::authenticate).
    #[error(transparent)]
    ExecRun(ExecError),
    /// A kubeconfig `auth-provider` entry (`oidc`, `gcp`, `azure`, ...): not supported;
    /// client-go itself removed the `gcp` and `azure` providers in 1.26. Exec credential
    /// plugins replace them: `gke-gcloud-auth-plugin` (GKE), `kubelogin` (AKS, and OIDC with
    /// `kubectl oidc-login`), `aws eks get-token` (EKS).
    #[error(
        "{origin}: auth-provider {name:?} is not supported; use an exec credential plugin (users[].user.exec) instead: gke-gcloud-auth-plugin for GKE, kubelogin for AKS, kubectl oidc-login (int128/kubelogin) for OIDC, aws eks get-token for EKS"
    )]
    AuthProvider {
        /// Where the configuration comes from.
        origin: String,
        /// The provider's name (`oidc`, `gcp`, `azure`, ...).
        name: String,
    },
}

/// Checks that a bearer token (leading and trailing whitespace already trimmed, as it is
/// sent) can be sent in an `Authorization` header: no CR or LF inside it (a token pasted with
/// a line break, a token file holding two lines) and no other control character.
/// [`ConfigError::InvalidToken`] names `origin`, never the token.
///
/// ```
/// use kevents_http::config::check_bearer_token;
/// assert!(check_bearer_token("abc.def-123", "bearer token").is_ok());
/// let e = check_bearer_token("abc\ndef", "token file /t").unwrap_err();
/// assert_eq!(
///     e.to_string(),
///     "token file /t: invalid bearer token: it contains a line break (CR or LF)"
/// );
/// assert!(!format!("{e:?}").contains("abc"));
/// ```
pub fn check_bearer_token(token: &str, origin: &str) -> Result<(), ConfigError> {
    let problem = if token.contains(['\r', '\n']) {
        "it contains a line break (CR or LF)"
    } else if token.chars().any(|c| c.is_ascii_control() && c != '\t') {
        "it contains a control character"
    } else {
        return Ok(());
    };
    Err(ConfigError::InvalidToken {
        origin: origin.to_owned(),
        problem: problem.to_owned(),
    })
}
