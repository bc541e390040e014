//! Where the apiserver is and how to talk to it: [`HttpConfig`], built by hand, from a
//! kubeconfig or from the in-cluster service account (loading: `kubeconfig.rs`), and the
//! limits that bound every read (here); [`ConfigError`] (`error.rs`); the credentials
//! (`credentials.rs`); URLs (`url.rs`); bounded file reads (`files.rs`).

mod credentials;
mod error;
mod files;
mod url;

pub use credentials::{Auth, ClientIdentity, Impersonation};
pub use error::{ConfigError, check_bearer_token};
pub(crate) use files::{decode_b64, pem_certs, read_capped};
use url::is_loopback;
pub(crate) use url::{check_proxy_scheme, parse_cluster_url};
pub use url::{redact_url, redact_url_text};

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Url;
use secrecy::SecretString;

use crate::exec::ExecConfig;

/// The request layer's limits, shared by every sink ([`kevents_core::request`]): the default
/// per-request timeout (connect, send, and read the whole response), the largest request the
/// apiserver accepts, the response and list limits.
pub use kevents_core::request::{
    APISERVER_MAX_REQUEST_BYTES, DEFAULT_MAX_LIST_BYTES, DEFAULT_MAX_LIST_PAGES,
    DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_REQUEST_TIMEOUT, LIST_PAGE_SIZE,
};
/// Default TCP + TLS connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default interval after which a token file is read again (client-go and kube re-read
/// once a minute).
pub const DEFAULT_TOKEN_REFRESH: Duration = Duration::from_secs(60);
/// Largest kubeconfig file read (4 MiB).
pub const MAX_KUBECONFIG_BYTES: u64 = 4 * 1024 * 1024;
/// Largest token file read (64 KiB; service-account tokens are about 1 KiB). Also the limit
/// of the in-cluster namespace file.
pub const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;
/// Largest CA bundle, client certificate or client key file read (1 MiB).
pub const MAX_PEM_FILE_BYTES: u64 = 1024 * 1024;

/// The `User-Agent` sent with every request: `kevents/<version>`.
pub const USER_AGENT: &str = concat!("kevents/", env!("CARGO_PKG_VERSION"));

/// Everything [`crate::HttpSink`] needs. Fields are public; the `with_*` methods chain.
/// `Debug` shows no credential (URLs without their user information).
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
#[derive(Clone)]
pub struct HttpConfig {
    /// The apiserver, e.g. `https://10.0.0.1:443`. A path prefix (as behind a proxy) is kept.
    /// Must not carry user information ([`ConfigError::CredentialsInUrl`]).
    pub cluster_url: Url,
    /// The kubeconfig context's namespace, or the pod's (informational: events carry their
    /// own namespace).
    pub default_namespace: String,
    /// CA certificates (DER) that replace the system roots, as client-go does with
    /// `certificate-authority(-data)`. `None`: the system's trust store.
    pub root_certs: Option<Vec<Vec<u8>>>,
    /// Do not verify the server certificate (kubeconfig `insecure-skip-tls-verify`). Not
    /// allowed together with `root_certs` ([`ConfigError::InsecureWithCa`]).
    pub insecure_skip_tls_verify: bool,
    /// Verify the server certificate against this name instead of the URL's host
    /// (kubeconfig `tls-server-name`).
    pub tls_server_name: Option<String>,
    /// How requests authenticate. Credentials need an `https://` cluster URL
    /// ([`ConfigError::CredentialsOverHttp`]).
    pub auth: Auth,
    /// TLS client certificate.
    pub client_identity: Option<ClientIdentity>,
    /// Impersonation headers.
    pub impersonation: Option<Impersonation>,
    /// An HTTP(S) proxy (kubeconfig `proxy-url`). Environment proxies are never used. Its user
    /// information, if any, is used for the proxy and never shown.
    pub proxy_url: Option<Url>,
    /// Per-request timeout, from connecting to the end of the response body.
    pub request_timeout: Duration,
    /// TCP and TLS connect timeout.
    pub connect_timeout: Duration,
    /// Largest response body read ([`DEFAULT_MAX_RESPONSE_BYTES`]). A larger error answer is
    /// classified by its code alone; a larger 2xx answer to a create or patch counts as
    /// stored (see `docs/http.md`); any other larger answer is an error.
    pub max_response_bytes: usize,
    /// Most pages one list reads ([`DEFAULT_MAX_LIST_PAGES`]).
    pub max_list_pages: usize,
    /// Most response bytes one list reads, all pages together ([`DEFAULT_MAX_LIST_BYTES`]).
    pub max_list_bytes: usize,
    /// Allow credentials over plain `http://` when the cluster URL's host is a loopback
    /// address (`127.0.0.0/8`, `::1`, `localhost`): for tests against a local simulator only.
    /// Credentials to any other `http://` host are refused whatever this says.
    pub allow_credentials_over_loopback_http: bool,
    /// `User-Agent` header.
    pub user_agent: String,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("cluster_url", &redact_url(&self.cluster_url))
            .field("default_namespace", &self.default_namespace)
            .field("root_certs", &self.root_certs.as_ref().map(Vec::len))
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field("tls_server_name", &self.tls_server_name)
            .field("auth", &self.auth)
            .field("client_identity", &self.client_identity)
            .field("impersonation", &self.impersonation)
            .field("proxy_url", &self.proxy_url.as_ref().map(redact_url))
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("max_list_pages", &self.max_list_pages)
            .field("max_list_bytes", &self.max_list_bytes)
            .field(
                "allow_credentials_over_loopback_http",
                &self.allow_credentials_over_loopback_http,
            )
            .field("user_agent", &self.user_agent)
            .finish()
    }
}

impl HttpConfig {
    /// A configuration for `cluster_url` with no credentials, the system trust store and the
    /// default timeouts and limits.
    ///
    /// ```
    /// let c = kevents_http::HttpConfig::new("http://127.0.0.1:8080").unwrap();
    /// assert_eq!(c.cluster_url.as_str(), "http://127.0.0.1:8080/");
    /// assert!(kevents_http::HttpConfig::new("ftp://x").is_err());
    /// let err = kevents_http::HttpConfig::new("https://me:s3cr3t@h").unwrap_err();
    /// assert!(!err.to_string().contains("s3cr3t"));
    /// ```
    pub fn new(cluster_url: &str) -> Result<Self, ConfigError> {
        Ok(Self::for_url(parse_cluster_url(
            cluster_url,
            "cluster URL",
        )?))
    }

    /// The defaults of [`HttpConfig::new`] for a parsed URL.
    pub(crate) fn for_url(cluster_url: Url) -> Self {
        HttpConfig {
            cluster_url,
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
            max_list_pages: DEFAULT_MAX_LIST_PAGES,
            max_list_bytes: DEFAULT_MAX_LIST_BYTES,
            allow_credentials_over_loopback_http: false,
            user_agent: USER_AGENT.into(),
        }
    }

    /// Checks what can be checked without the network: a usable cluster URL without user
    /// information, no credentials over plain `http://` (unless allowed for loopback), not
    /// both `insecure_skip_tls_verify` and a CA. [`crate::HttpSink::new`] calls it; the
    /// kubeconfig loaders too, naming the kubeconfig.
    ///
    /// ```
    /// use kevents_http::{ConfigError, HttpConfig};
    /// let clear = HttpConfig::new("http://10.0.0.1:8080")?.with_token("t");
    /// assert!(matches!(clear.validate(), Err(ConfigError::CredentialsOverHttp { .. })));
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_as("configuration")
    }

    pub(crate) fn validate_as(&self, origin: &str) -> Result<(), ConfigError> {
        let url = &self.cluster_url;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ConfigError::CredentialsInUrl {
                origin: origin.to_owned(),
                url: redact_url(url),
            });
        }
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(ConfigError::Url {
                origin: origin.to_owned(),
                url: redact_url(url),
                reason: "must be http(s):// with a host".into(),
            });
        }
        if self.insecure_skip_tls_verify && self.root_certs.is_some() {
            return Err(ConfigError::InsecureWithCa {
                origin: origin.to_owned(),
            });
        }
        if let Auth::Exec(exec) = &self.auth {
            exec.validate().map_err(|source| ConfigError::Exec {
                origin: origin.to_owned(),
                source,
            })?;
        }
        if let Some(proxy) = &self.proxy_url {
            check_proxy_scheme(proxy, origin)?;
        }
        // Over plain HTTP, credentials stay on this machine only when both the server and the
        // proxy (if any) are loopback addresses.
        let loopback = is_loopback(url) && self.proxy_url.as_ref().is_none_or(is_loopback);
        if url.scheme() == "http"
            && self.auth.sends_credentials()
            && !(self.allow_credentials_over_loopback_http && loopback)
        {
            return Err(ConfigError::CredentialsOverHttp {
                origin: origin.to_owned(),
                url: redact_url(url),
            });
        }
        Ok(())
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

    /// Authenticates with the token and/or client certificate an exec credential plugin
    /// returns (see [`Auth::Exec`]).
    ///
    /// ```
    /// use kevents_http::{ExecConfig, HttpConfig};
    /// let config = HttpConfig::new("https://10.0.0.1:6443")?
    ///     .with_exec(ExecConfig::new("gke-gcloud-auth-plugin")
    ///         .with_install_hint("gcloud components install gke-gcloud-auth-plugin"));
    /// assert_eq!(config.auth.kind(), "exec");
    /// # Ok::<(), kevents_http::ConfigError>(())
    /// ```
    pub fn with_exec(mut self, exec: ExecConfig) -> Self {
        self.auth = Auth::Exec(Box::new(exec));
        self
    }

    /// Trusts only the certificates of this PEM bundle (replacing the system roots).
    pub fn with_ca_pem(mut self, pem: &[u8]) -> Result<Self, ConfigError> {
        self.root_certs = Some(pem_certs(pem)?);
        Ok(self)
    }

    /// Trusts only the certificates of this PEM file (at most [`MAX_PEM_FILE_BYTES`]).
    ///
    /// ```
    /// let err = kevents_http::HttpConfig::new("https://h")?.with_ca_file("/dev/zero").unwrap_err();
    /// assert!(matches!(err, kevents_http::ConfigError::TooLarge { .. }));
    /// # Ok::<(), kevents_http::ConfigError>(())
    /// ```
    pub fn with_ca_file(self, path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        let pem = read_capped("CA file", path.as_ref(), MAX_PEM_FILE_BYTES)?;
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

    /// Allows credentials over plain `http://` to a loopback host (tests against a local
    /// simulator); see [`HttpConfig::allow_credentials_over_loopback_http`].
    ///
    /// ```
    /// use kevents_http::HttpConfig;
    /// let local = HttpConfig::new("http://127.0.0.1:8080")?.with_token("t");
    /// assert!(local.clone().with_credentials_over_loopback_http(true).validate().is_ok());
    /// assert!(local.validate().is_err());
    /// let remote = HttpConfig::new("http://10.0.0.1:8080")?.with_token("t");
    /// assert!(remote.with_credentials_over_loopback_http(true).validate().is_err());
    /// # Ok::<(), kevents_http::ConfigError>(())
    /// ```
    pub fn with_credentials_over_loopback_http(mut self, allow: bool) -> Self {
        self.allow_credentials_over_loopback_http = allow;
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

    /// Sets the most pages and the most bytes (all pages together) one list reads.
    pub fn with_list_limits(mut self, pages: usize, bytes: usize) -> Self {
        self.max_list_pages = pages;
        self.max_list_bytes = bytes;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_user_information_is_refused_and_never_shown() {
        for url in [
            "https://user:t0ken@h:6443",
            "https://t0ken@h",
            "https://user:t0k en@h/x",
            "user:t0ken@h:6443",
            "https://user:t0ken@[::1",
        ] {
            let err = HttpConfig::new(url).unwrap_err();
            let text = format!("{err} {err:?}");
            assert!(
                matches!(err, ConfigError::CredentialsInUrl { .. }),
                "{text}"
            );
            assert!(!text.contains("t0k"), "{text}");
        }
        // Set by hand on the public field: refused by validate, hidden by Debug.
        let mut c = HttpConfig::new("https://h").unwrap();
        c.cluster_url = Url::parse("https://user:t0ken@h").unwrap();
        c.proxy_url = Some(Url::parse("http://proxy-user:pr0xy@proxy:3128").unwrap());
        let debug = format!("{c:?}");
        assert!(
            !debug.contains("t0ken") && !debug.contains("pr0xy"),
            "{debug}"
        );
        let err = c.validate().unwrap_err();
        assert!(!format!("{err} {err:?}").contains("t0ken"));
    }

    #[test]
    fn capped_reads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"12345").unwrap();
        assert_eq!(read_capped("f", &p, 5).unwrap(), b"12345");
        assert!(matches!(
            read_capped("f", &p, 4),
            Err(ConfigError::TooLarge { limit: 4, .. })
        ));
        assert!(matches!(
            read_capped("f", &dir.path().join("missing"), 4),
            Err(ConfigError::Read { .. })
        ));
    }

    #[test]
    fn loopback_hosts() {
        for (u, want) in [
            ("http://127.0.0.1:1", true),
            ("http://127.3.2.1:1", true),
            ("http://[::1]:1", true),
            ("http://LOCALHOST:1", true),
            ("http://10.0.0.1:1", false),
            ("http://localhost.example:1", false),
        ] {
            assert_eq!(is_loopback(&Url::parse(u).unwrap()), want, "{u}");
        }
    }
}
