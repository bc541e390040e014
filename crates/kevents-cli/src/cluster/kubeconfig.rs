//! Where a real cluster is ([`KubeTarget`]) and loading its kubeconfig: its credentials are
//! remembered as secrets before anything can fail (even a parse error must not print them),
//! and a token file it names is read once, within a time limit, so that an empty or
//! unreadable one is a configuration error now rather than failed writes later.

use std::path::PathBuf;
use std::sync::OnceLock;

use kevents_http::config::{MAX_KUBECONFIG_BYTES, MAX_TOKEN_FILE_BYTES};
use kevents_http::secrecy::ExposeSecret as _;
use kevents_http::{Auth, ConfigError, HttpConfig, read_credential_file};

use super::exit::{Failure, FailureKind};
use super::secrets::add_secret;

/// Remembers the credentials written in a kubeconfig's text (values of `token`,
/// `password`, `client-key-data`, ...), best effort, so that even an error while parsing it
/// cannot print them.
fn scan_kubeconfig_secrets(text: &str) {
    const KEYS: [&str; 8] = [
        "token",
        "password",
        "client-key-data",
        "id-token",
        "refresh-token",
        "access-token",
        "client-secret",
        "secret",
    ];
    for line in text.lines() {
        for part in line.split([',', '{', '}']) {
            let part = part.trim().trim_start_matches("- ").trim();
            let Some((key, value)) = part.split_once(':') else {
                continue;
            };
            let key = key.trim().trim_matches(['"', '\'']);
            if KEYS.contains(&key) {
                add_secret(value.trim().trim_matches(['"', '\'']));
            }
        }
    }
}

/// Remembers the credentials `config` authenticates with ([`add_secret`]) and checks that
/// a token file it names can be read (within
/// [`CREDENTIAL_FILE_TIMEOUT`](kevents_http::CREDENTIAL_FILE_TIMEOUT): a FIFO or a hung
/// mount is reported, not waited for) and is not empty.
pub async fn register_credentials(config: &HttpConfig) -> Result<(), Failure> {
    match &config.auth {
        Auth::Bearer(token) => add_secret(token.expose_secret()),
        Auth::Basic { password, .. } => add_secret(password.expose_secret()),
        Auth::BearerFile { path, .. } => {
            match read_credential_file("token file", path, MAX_TOKEN_FILE_BYTES).await {
                Ok(token) if !String::from_utf8_lossy(&token).trim().is_empty() => {
                    let token = String::from_utf8_lossy(&token);
                    add_secret(&token);
                    // A CR or LF inside the token: refused now (exit 2), not at the first
                    // request.
                    let origin = format!("token file {}", path.display());
                    kevents_http::config::check_bearer_token(token.trim(), &origin)
                        .map_err(|e| Failure::new(FailureKind::Config, e))?;
                }
                Ok(_) => {
                    return Err(Failure::new(
                        FailureKind::Config,
                        format!("the token file {} is empty", path.display()),
                    ));
                }
                Err(ConfigError::Read { source, .. }) => {
                    return Err(Failure::new(
                        FailureKind::Config,
                        format!("cannot read the token file {}: {source}", path.display()),
                    ));
                }
                Err(e) => return Err(Failure::new(FailureKind::Config, e)),
            }
        }
        // Obtained when a request needs it; never printed by kevents.
        Auth::Exec(_) | Auth::None => {}
    }
    if let Some(id) = &config.client_identity
        && let Ok(key) = std::str::from_utf8(id.key_pem.expose_secret())
    {
        for line in key.lines().filter(|l| !l.starts_with("-----")) {
            add_secret(line);
        }
    }
    Ok(())
}

/// A kubeconfig loading error that names the file once: most errors name it already
/// (`kubeconfig F, line 3, ...`, `kubeconfig F: contexts["x"]: not found`); the others (a CA
/// file that cannot be read, bad base64) get `kubeconfig F: ` in front.
pub fn kubeconfig_message(path: &std::path::Path, e: &ConfigError) -> String {
    let text = e.to_string();
    let name = format!("kubeconfig {}", path.display());
    if text.contains(&name) {
        text
    } else {
        format!("{name}: {text}")
    }
}

/// Where to reach a real cluster. The kubeconfig is read once ([`config`](Self::config))
/// and its bytes kept, so a pipe (`/dev/stdin`), a FIFO or a process substitution
/// (`<(kubectl config view --raw)`) works as well as a file.
#[derive(Debug, Clone)]
pub struct KubeTarget {
    /// The kubeconfig file.
    pub kubeconfig: PathBuf,
    /// Its context (`None`: the current context).
    pub context: Option<String>,
    /// The kubeconfig's content, once read.
    read: OnceLock<Vec<u8>>,
}

impl KubeTarget {
    /// The cluster of `kubeconfig` (`context`, or its current context); nothing read yet.
    pub fn new(kubeconfig: PathBuf, context: Option<String>) -> Self {
        KubeTarget {
            kubeconfig,
            context,
            read: OnceLock::new(),
        }
    }

    /// The kubeconfig's content as [`config`](Self::config) read it (`None` before).
    pub fn kubeconfig_bytes(&self) -> Option<&[u8]> {
        self.read.get().map(Vec::as_slice)
    }

    /// Reads the kubeconfig once (bounded in size and time), remembers its credentials (so
    /// no output can show them), loads it and checks a token file it names. Any problem is a
    /// [`FailureKind::Config`]. A second call does not read the file again.
    pub async fn config(&self) -> Result<HttpConfig, Failure> {
        let path = &self.kubeconfig;
        let bytes = match self.read.get() {
            Some(bytes) => bytes.clone(),
            None => {
                let bytes = read_credential_file("kubeconfig", path, MAX_KUBECONFIG_BYTES)
                    .await
                    .map_err(|e| Failure::new(FailureKind::Config, kubeconfig_message(path, &e)))?;
                let _ = self.read.set(bytes.clone());
                bytes
            }
        };
        scan_kubeconfig_secrets(&String::from_utf8_lossy(&bytes));
        let config = HttpConfig::from_kubeconfig_bytes(bytes, path, self.context.as_deref())
            .await
            .map_err(|e| Failure::new(FailureKind::Config, kubeconfig_message(path, &e)))?;
        register_credentials(&config).await?;
        Ok(config)
    }
}

/// The configuration a command talks to the cluster with: `--kubeconfig` (and `--context`)
/// read once, else `KUBECONFIG`, `~/.kube/config` or the in-cluster service account; either
/// way its credentials are registered so that no output shows them.
pub async fn cluster_config(
    kubeconfig: Option<&PathBuf>,
    context: Option<&String>,
) -> Result<HttpConfig, Failure> {
    match kubeconfig {
        Some(path) => {
            KubeTarget::new(path.clone(), context.cloned())
                .config()
                .await
        }
        None => {
            let config = HttpConfig::infer()
                .await
                .map_err(|e| Failure::new(FailureKind::Config, e))?;
            register_credentials(&config).await?;
            Ok(config)
        }
    }
}
