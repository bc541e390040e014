//! Where the apiserver is and how to talk to it: [`HttpConfig`], built by hand, from a
//! kubeconfig or from the in-cluster service account (the last two through `kube`'s config
//! loader).

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use reqwest::Url;
use secrecy::{ExposeSecret, SecretSlice, SecretString};
use thiserror::Error;

/// Default per-request timeout (connect, send, and read the whole response).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Default TCP + TLS connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default largest response body read (1 MiB); larger bodies are not read.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// Default interval after which a token file is read again (client-go and kube re-read
/// once a minute).
pub const DEFAULT_TOKEN_REFRESH: Duration = Duration::from_secs(60);

/// The `User-Agent` sent with every request: `kevents/<version>`.
pub const USER_AGENT: &str = concat!("kevents/", env!("CARGO_PKG_VERSION"));

/// Why a configuration could not be loaded or used. Messages never contain credentials.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The cluster URL is not an absolute `http(s)://` URL.
    #[error("invalid cluster URL {url:?}: {reason}")]
    Url {
        /// The offending URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Loading the kubeconfig failed (missing file, unknown context, bad YAML, ...).
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// Loading the in-cluster configuration failed (not running in a pod?).
    #[error("in-cluster config: {0}")]
    InCluster(#[from] kube::config::InClusterError),
    /// Neither a kubeconfig nor an in-cluster configuration was found.
    #[error("no configuration found: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    /// A file named by the configuration could not be read.
    #[error("cannot read {what} {path}: {source}")]
    Read {
        /// What the file holds (`client certificate`, `token file`, ...).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// A base64 `*-data` field does not decode.
    #[error("{0} is not valid base64")]
    Base64(&'static str),
    /// PEM certificates or keys could not be parsed or used.
    #[error("TLS configuration: {0}")]
    Tls(String),
    /// The configuration asks for something this crate does not implement.
    #[error("unsupported configuration: {0}")]
    Unsupported(String),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// How requests authenticate. `Debug` never shows a credential.
#[derive(Debug, Clone, Default)]
pub enum Auth {
    /// No credentials (e.g. a client certificate alone, or the simulator without auth).
    #[default]
    None,
    /// A static bearer token.
    Bearer(SecretString),
    /// A bearer token read from a file and read again when it may have rotated: at most
    /// every `refresh` (so a rotated service-account token is picked up), and at once when the
    /// server answers 401 (the request is then sent once more if the file changed).
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

/// Everything [`crate::HttpSink`] needs. Fields are public; the `with_*` methods chain.
/// `Debug` shows no credential.
///
/// ```
/// use std::time::Duration;
/// use kevents_http::{HttpConfig, HttpSink};
/// let config = HttpConfig::new("https://127.0.0.1:6443")?
///     .with_token("s3cr3t")
///     .with_request_timeout(Duration::from_secs(5));
/// assert!(!format!("{config:?}").contains("s3cr3t"));
/// let sink = HttpSink::new(config)?;
/// # Ok::<(), kevents_http::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// The apiserver, e.g. `https://10.0.0.1:443`. A path prefix (as behind a proxy) is kept.
    pub cluster_url: Url,
    /// The kubeconfig context's namespace, or the pod's (informational: events carry their
    /// own namespace).
    pub default_namespace: String,
    /// CA certificates (DER) that replace the system roots, as client-go does with
    /// `certificate-authority(-data)`. `None`: the system's trust store.
    pub root_certs: Option<Vec<Vec<u8>>>,
    /// Do not verify the server certificate (kubeconfig `insecure-skip-tls-verify`).
    pub insecure_skip_tls_verify: bool,
    /// Verify the server certificate against this name instead of the URL's host
    /// (kubeconfig `tls-server-name`).
    pub tls_server_name: Option<String>,
    /// How requests authenticate.
    pub auth: Auth,
    /// TLS client certificate.
    pub client_identity: Option<ClientIdentity>,
    /// Impersonation headers.
    pub impersonation: Option<Impersonation>,
    /// An HTTP(S) proxy (kubeconfig `proxy-url`). Environment proxies are never used.
    pub proxy_url: Option<Url>,
    /// Per-request timeout, from connecting to the end of the response body.
    pub request_timeout: Duration,
    /// TCP and TLS connect timeout.
    pub connect_timeout: Duration,
    /// Largest response body read; a larger one is an error.
    pub max_response_bytes: usize,
    /// `User-Agent` header.
    pub user_agent: String,
}

fn parse_url(url: &str) -> Result<Url, ConfigError> {
    let bad = |reason: &str| ConfigError::Url {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let mut parsed = Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("scheme must be http or https"));
    }
    if parsed.host().is_none() {
        return Err(bad("no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("credentials in the URL are not supported"));
    }
    parsed.set_query(None);
    parsed.set_fragment(None);
    Ok(parsed)
}

fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|source| ConfigError::Read {
        what,
        path: path.to_owned(),
        source,
    })
}

/// Parses every `CERTIFICATE` block of a PEM bundle into DER.
pub(crate) fn pem_certs(pem: &[u8]) -> Result<Vec<Vec<u8>>, ConfigError> {
    use rustls_pki_types::pem::PemObject as _;
    let certs = rustls_pki_types::CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError::Tls(format!("bad PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(ConfigError::Tls("no PEM certificate found".into()));
    }
    Ok(certs)
}

impl HttpConfig {
    /// A configuration for `cluster_url` with no credentials, the system trust store and the
    /// default timeouts and limits.
    ///
    /// ```
    /// let c = kevents_http::HttpConfig::new("http://127.0.0.1:8080").unwrap();
    /// assert_eq!(c.cluster_url.as_str(), "http://127.0.0.1:8080/");
    /// assert!(kevents_http::HttpConfig::new("ftp://x").is_err());
    /// ```
    pub fn new(cluster_url: &str) -> Result<Self, ConfigError> {
        Ok(HttpConfig {
            cluster_url: parse_url(cluster_url)?,
            default_namespace: "default".into(),
            root_certs: None,
            insecure_skip_tls_verify: false,
            tls_server_name: None,
            auth: Auth::None,
            client_identity: None,
            impersonation: None,
            proxy_url: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            user_agent: USER_AGENT.into(),
        })
    }

    /// Like `kubectl`: the kubeconfig from `$KUBECONFIG` or `~/.kube/config` (current
    /// context), else the in-cluster service account.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), kevents_http::ConfigError> {
    /// let config = kevents_http::HttpConfig::infer().await?;
    /// # Ok(()) }
    /// ```
    pub async fn infer() -> Result<Self, ConfigError> {
        Self::from_kube(kube::Config::infer().await?)
    }

    /// A kubeconfig: `path`, or `$KUBECONFIG` (several files merged, as kubectl does) /
    /// `~/.kube/config` when `None`; `context`, or the current context when `None`.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), kevents_http::ConfigError> {
    /// use std::path::Path;
    /// let config = kevents_http::HttpConfig::from_kubeconfig(
    ///     Some(Path::new("/etc/kevents/kubeconfig")), Some("prod")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn from_kubeconfig(
        path: Option<&Path>,
        context: Option<&str>,
    ) -> Result<Self, ConfigError> {
        let options = kube::config::KubeConfigOptions {
            context: context.map(str::to_owned),
            ..Default::default()
        };
        let config = match path {
            Some(path) => {
                let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
            }
            None => kube::Config::from_kubeconfig(&options).await?,
        };
        Self::from_kube(config)
    }

    /// A kubeconfig given as YAML text (relative file paths in it are relative to the
    /// current directory).
    ///
    /// ```
    /// # tokio_test_block_on(async {
    /// let yaml = r#"
    /// apiVersion: v1
    /// kind: Config
    /// clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
    /// users: [{name: u, user: {token: s3cr3t}}]
    /// contexts: [{name: x, context: {cluster: c, user: u, namespace: ns}}]
    /// current-context: x
    /// "#;
    /// let config = kevents_http::HttpConfig::from_kubeconfig_yaml(yaml, None).await.unwrap();
    /// assert_eq!(config.default_namespace, "ns");
    /// assert!(!format!("{config:?}").contains("s3cr3t"));
    /// # });
    /// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f) }
    /// ```
    pub async fn from_kubeconfig_yaml(
        yaml: &str,
        context: Option<&str>,
    ) -> Result<Self, ConfigError> {
        let options = kube::config::KubeConfigOptions {
            context: context.map(str::to_owned),
            ..Default::default()
        };
        let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml)?;
        Self::from_kube(kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?)
    }

    /// The pod's service account: `KUBERNETES_SERVICE_HOST`/`_PORT`, the mounted CA, the
    /// namespace file, and the token file (re-read every [`DEFAULT_TOKEN_REFRESH`], so the
    /// kubelet's token rotation is picked up).
    ///
    /// ```no_run
    /// let config = kevents_http::HttpConfig::incluster()?;
    /// # Ok::<(), kevents_http::ConfigError>(())
    /// ```
    pub fn incluster() -> Result<Self, ConfigError> {
        Self::from_kube(kube::Config::incluster()?)
    }

    /// Converts a configuration loaded by `kube`. Exec credential plugins and
    /// `auth-provider` entries are refused ([`ConfigError::Unsupported`]); a static token
    /// wins over a token file, as in client-go.
    pub fn from_kube(config: kube::Config) -> Result<Self, ConfigError> {
        let mut out = HttpConfig::new(&config.cluster_url.to_string())?;
        out.default_namespace = config.default_namespace;
        out.root_certs = config.root_cert;
        out.insecure_skip_tls_verify = config.accept_invalid_certs;
        out.tls_server_name = config.tls_server_name;
        if let Some(proxy) = config.proxy_url {
            let s = proxy.to_string();
            out.proxy_url = Some(Url::parse(&s).map_err(|e| ConfigError::Url {
                url: s,
                reason: e.to_string(),
            })?);
        }
        let a = config.auth_info;
        if a.exec.is_some() {
            return Err(ConfigError::Unsupported(
                "exec credential plugins (users[].user.exec); use a token, token file or client certificate".into(),
            ));
        }
        if a.auth_provider.is_some() {
            return Err(ConfigError::Unsupported(
                "auth-provider entries (users[].user.auth-provider)".into(),
            ));
        }
        out.auth = if let Some(token) = a.token {
            Auth::Bearer(token)
        } else if let Some(path) = a.token_file {
            Auth::BearerFile {
                path: PathBuf::from(path),
                refresh: DEFAULT_TOKEN_REFRESH,
            }
        } else if let (Some(username), Some(password)) = (a.username, a.password) {
            Auth::Basic { username, password }
        } else {
            Auth::None
        };
        let cert = match (&a.client_certificate_data, &a.client_certificate) {
            (Some(data), _) => Some(decode_b64("client-certificate-data", data.as_bytes())?),
            (None, Some(path)) => Some(read_file("client certificate", Path::new(path))?),
            (None, None) => None,
        };
        let key = match (&a.client_key_data, &a.client_key) {
            (Some(data), _) => Some(decode_b64(
                "client-key-data",
                data.expose_secret().as_bytes(),
            )?),
            (None, Some(path)) => Some(read_file("client key", Path::new(path))?),
            (None, None) => None,
        };
        out.client_identity = match (cert, key) {
            (Some(cert), Some(key)) => Some(ClientIdentity::from_pem(cert, key)),
            (None, None) => None,
            _ => {
                return Err(ConfigError::Tls(
                    "a client certificate needs both the certificate and the key".into(),
                ));
            }
        };
        if let Some(user) = a.impersonate {
            out.impersonation = Some(Impersonation {
                user,
                uid: a.impersonate_uid,
                groups: a.impersonate_groups.unwrap_or_default(),
            });
        } else if a.impersonate_groups.is_some_and(|g| !g.is_empty()) {
            return Err(ConfigError::Unsupported(
                "impersonating groups without a user".into(),
            ));
        }
        Ok(out)
    }

    /// Authenticates with a static bearer token.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.auth = Auth::Bearer(SecretString::from(token.into()));
        self
    }

    /// Authenticates with the token in `path`, read again at most every `refresh` (and at
    /// once after a 401).
    pub fn with_token_file(mut self, path: impl Into<PathBuf>, refresh: Duration) -> Self {
        self.auth = Auth::BearerFile {
            path: path.into(),
            refresh,
        };
        self
    }

    /// Trusts only the certificates of this PEM bundle (replacing the system roots).
    pub fn with_ca_pem(mut self, pem: &[u8]) -> Result<Self, ConfigError> {
        self.root_certs = Some(pem_certs(pem)?);
        Ok(self)
    }

    /// Trusts only the certificates of this PEM file.
    pub fn with_ca_file(self, path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let pem = read_file("CA file", path.as_ref())?;
        self.with_ca_pem(&pem)
    }

    /// Presents a TLS client certificate.
    pub fn with_client_identity(mut self, identity: ClientIdentity) -> Self {
        self.client_identity = Some(identity);
        self
    }

    /// Skips server certificate verification. Insecure: for test clusters only.
    pub fn with_insecure_skip_tls_verify(mut self, skip: bool) -> Self {
        self.insecure_skip_tls_verify = skip;
        self
    }

    /// Sets the per-request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Sets the connect timeout.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the largest response body read.
    pub fn with_max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }
}

fn decode_b64(what: &'static str, data: &[u8]) -> Result<Vec<u8>, ConfigError> {
    let trimmed: Vec<u8> = data
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(trimmed)
        .map_err(|_| ConfigError::Base64(what))
}
