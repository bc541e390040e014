//! Exec credential plugins (kubeconfig `users[].user.exec`), as client-go's
//! `plugin/pkg/client/auth/exec`: the configuration ([`ExecConfig`]), what the plugin is told
//! about the cluster ([`ExecCluster`]) and what can go wrong ([`ExecError`]). Running the
//! plugin and reading its answer is in `exec_plugin.rs`; caching the credential, sharing one
//! run between concurrent requests and re-running after a 401 in `auth.rs`.

use std::time::Duration;

use kevents_core::status::sanitize_server_text_to;
use thiserror::Error;

/// `client.authentication.k8s.io/v1`.
pub const EXEC_API_V1: &str = "client.authentication.k8s.io/v1";
/// `client.authentication.k8s.io/v1beta1`.
pub const EXEC_API_V1BETA1: &str = "client.authentication.k8s.io/v1beta1";
/// The name of the cluster extension passed to the plugin as `spec.cluster.config` when
/// `provideClusterInfo` is set (as client-go).
pub const EXEC_CLUSTER_EXTENSION: &str = "client.authentication.k8s.io/exec";
/// The environment variable that carries the `ExecCredential` input of the plugin.
pub const EXEC_INFO_ENV: &str = "KUBERNETES_EXEC_INFO";
/// Default longest run of a plugin before it is killed ([`ExecError::Timeout`]).
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(30);
/// First pause after a troubled run of a plugin (it failed, or returned a credential already
/// expired or due for a refresh at once) before it is run again; doubled after each troubled
/// run up to [`EXEC_MAX_BACKOFF`], reset by a good one. Requests in between use the
/// credential while it has not expired, or fail with the last run's error (retried).
pub const EXEC_INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// Longest pause between two runs of a troubled plugin.
pub const EXEC_MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Default time before a credential's `expirationTimestamp` at which the plugin is run again.
pub const DEFAULT_EXEC_REFRESH_MARGIN: Duration = Duration::from_secs(10);
/// Largest plugin output (stdout) read: 1 MiB ([`ExecError::OutputTooLarge`] beyond).
pub const MAX_EXEC_OUTPUT_BYTES: usize = 1024 * 1024;
/// Most of the plugin's stderr kept (the rest is read and thrown away); only its end, at most
/// 512 characters and sanitised, is logged at debug level (target `kevents_http`), and only
/// when the plugin failed. It is never part of an error: a failing plugin may print a
/// refresh token or a password there.
pub const MAX_EXEC_STDERR_BYTES: usize = 64 * 1024;

/// The version of the `ExecCredential` exchanged with the plugin (kubeconfig
/// `exec.apiVersion`). `v1alpha1` is not supported (client-go removed it in 1.24).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecApiVersion {
    /// `client.authentication.k8s.io/v1`: `interactiveMode` is required.
    V1,
    /// `client.authentication.k8s.io/v1beta1`: `interactiveMode` defaults to `IfAvailable`.
    V1Beta1,
}

impl ExecApiVersion {
    /// The `apiVersion` string.
    ///
    /// ```
    /// use kevents_http::ExecApiVersion;
    /// assert_eq!(ExecApiVersion::V1.as_str(), "client.authentication.k8s.io/v1");
    /// assert_eq!(ExecApiVersion::parse("client.authentication.k8s.io/v1beta1"), Ok(ExecApiVersion::V1Beta1));
    /// assert!(ExecApiVersion::parse("client.authentication.k8s.io/v1alpha1").is_err());
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            ExecApiVersion::V1 => EXEC_API_V1,
            ExecApiVersion::V1Beta1 => EXEC_API_V1BETA1,
        }
    }

    /// Parses an `apiVersion`; anything but v1 and v1beta1 is
    /// [`ExecError::UnsupportedApiVersion`].
    pub fn parse(api_version: &str) -> Result<Self, ExecError> {
        match api_version {
            EXEC_API_V1 => Ok(ExecApiVersion::V1),
            EXEC_API_V1BETA1 => Ok(ExecApiVersion::V1Beta1),
            other => Err(ExecError::UnsupportedApiVersion {
                api_version: sanitize_server_text_to(other, 100),
            }),
        }
    }
}

/// Kubeconfig `exec.interactiveMode`. kevents never runs a plugin interactively: its stdin
/// is not a terminal (it is `/dev/null`) and `spec.interactive` is `false`; `Never` and
/// `IfAvailable` plugins run that way, `Always` is refused ([`ExecError::InteractiveAlways`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InteractiveMode {
    /// The plugin never prompts.
    Never,
    /// The plugin prompts only when it can (here: never).
    IfAvailable,
    /// The plugin must prompt: refused.
    Always,
}

/// What the plugin is told about the cluster when `provideClusterInfo` is set:
/// `spec.cluster` of the `ExecCredential` in [`EXEC_INFO_ENV`]. `Debug` shows no proxy URL
/// (it may carry a proxy password).
#[derive(Clone, Default, PartialEq)]
pub struct ExecCluster {
    /// `server`.
    pub server: String,
    /// `tls-server-name`.
    pub tls_server_name: Option<String>,
    /// `insecure-skip-tls-verify`.
    pub insecure_skip_tls_verify: bool,
    /// `certificate-authority-data`: the CA bundle, PEM (sent base64-encoded, as Go's
    /// `[]byte`).
    pub certificate_authority_data: Option<Vec<u8>>,
    /// `proxy-url`.
    pub proxy_url: Option<String>,
    /// `config`: the cluster's extension named [`EXEC_CLUSTER_EXTENSION`].
    pub config: Option<serde_json::Value>,
}

impl std::fmt::Debug for ExecCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecCluster")
            .field("server", &self.server)
            .field("tls_server_name", &self.tls_server_name)
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field(
                "certificate_authority_data_bytes",
                &self.certificate_authority_data.as_ref().map(Vec::len),
            )
            .field("proxy_url", &self.proxy_url.is_some())
            .field("config", &self.config.is_some())
            .finish()
    }
}

/// An exec credential plugin (kubeconfig `users[].user.exec`): the command run to get a
/// bearer token and/or a client certificate, as client-go's exec authenticator. Build one by
/// hand with [`ExecConfig::new`] and the `with_*` methods, or let the kubeconfig loaders do
/// it. `Debug` shows the command, the number of arguments and the names (not the values) of
/// the environment variables.
///
/// ```
/// use std::time::Duration;
/// use kevents_http::{ExecApiVersion, ExecConfig, HttpConfig, InteractiveMode};
/// let plugin = ExecConfig::new("aws")
///     .with_args(["eks", "get-token", "--cluster-name", "prod"])
///     .with_env("AWS_PROFILE", "prod")
///     .with_api_version(ExecApiVersion::V1Beta1)
///     .with_install_hint("install the AWS CLI: https://aws.amazon.com/cli/")
///     .with_timeout(Duration::from_secs(20));
/// assert_eq!(plugin.interactive_mode, InteractiveMode::IfAvailable);
/// let config = HttpConfig::new("https://eks.example:443")?.with_exec(plugin);
/// assert!(config.validate().is_ok());
/// # Ok::<(), kevents_http::ConfigError>(())
/// ```
#[derive(Clone, PartialEq)]
pub struct ExecConfig {
    /// `command`: a name looked up in `PATH`, or a path (kubeconfig: a relative path with a
    /// `/` is relative to the kubeconfig's directory, as client-go).
    pub command: String,
    /// `args`.
    pub args: Vec<String>,
    /// `env`: added to (and overriding) the environment kevents runs in.
    pub env: Vec<(String, String)>,
    /// `apiVersion`.
    pub api_version: ExecApiVersion,
    /// `installHint`: shown when the command is not found.
    pub install_hint: Option<String>,
    /// `interactiveMode`.
    pub interactive_mode: InteractiveMode,
    /// `provideClusterInfo`: `Some` puts the cluster into `spec.cluster` of
    /// [`EXEC_INFO_ENV`].
    pub cluster: Option<ExecCluster>,
    /// Longest run before the plugin is killed ([`DEFAULT_EXEC_TIMEOUT`]).
    pub timeout: Duration,
    /// The plugin runs again this long before a credential's `expirationTimestamp`
    /// ([`DEFAULT_EXEC_REFRESH_MARGIN`]).
    pub refresh_margin: Duration,
}

impl std::fmt::Debug for ExecConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecConfig")
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field(
                "env",
                &self.env.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            )
            .field("api_version", &self.api_version.as_str())
            .field("install_hint", &self.install_hint.is_some())
            .field("interactive_mode", &self.interactive_mode)
            .field("cluster", &self.cluster)
            .field("timeout", &self.timeout)
            .field("refresh_margin", &self.refresh_margin)
            .finish()
    }
}

impl ExecConfig {
    /// A plugin `command` with no arguments, `v1beta1`, `IfAvailable`, the default timeout
    /// and refresh margin.
    pub fn new(command: impl Into<String>) -> Self {
        ExecConfig {
            command: command.into(),
            args: Vec::new(),
            env: Vec::new(),
            api_version: ExecApiVersion::V1Beta1,
            install_hint: None,
            interactive_mode: InteractiveMode::IfAvailable,
            cluster: None,
            timeout: DEFAULT_EXEC_TIMEOUT,
            refresh_margin: DEFAULT_EXEC_REFRESH_MARGIN,
        }
    }

    /// Sets the arguments.
    pub fn with_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Adds an environment variable.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Sets the `apiVersion`.
    pub fn with_api_version(mut self, api_version: ExecApiVersion) -> Self {
        self.api_version = api_version;
        self
    }

    /// Sets the install hint.
    pub fn with_install_hint(mut self, hint: impl Into<String>) -> Self {
        self.install_hint = Some(hint.into());
        self
    }

    /// Sets the interactive mode.
    pub fn with_interactive_mode(mut self, mode: InteractiveMode) -> Self {
        self.interactive_mode = mode;
        self
    }

    /// Gives the plugin the cluster's information (`provideClusterInfo: true`).
    pub fn with_cluster_info(mut self, cluster: ExecCluster) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// Sets the longest run of the plugin.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how long before expiry a credential is refreshed.
    pub fn with_refresh_margin(mut self, margin: Duration) -> Self {
        self.refresh_margin = margin;
        self
    }

    /// What can be checked before running it: a command, and an interactive mode kevents
    /// can honour (not `Always`).
    ///
    /// ```
    /// use kevents_http::{ExecConfig, ExecError, InteractiveMode};
    /// let always = ExecConfig::new("kubelogin").with_interactive_mode(InteractiveMode::Always);
    /// assert!(matches!(always.validate(), Err(ExecError::InteractiveAlways { .. })));
    /// assert!(matches!(ExecConfig::new("").validate(), Err(ExecError::MissingCommand)));
    /// ```
    pub fn validate(&self) -> Result<(), ExecError> {
        if self.command.trim().is_empty() {
            return Err(ExecError::MissingCommand);
        }
        if self.interactive_mode == InteractiveMode::Always {
            return Err(ExecError::InteractiveAlways {
                command: self.command.clone(),
            });
        }
        Ok(())
    }
}

/// Why an exec credential plugin could not be configured, run, or gave no usable credential.
/// Messages name the plugin and never contain its output (token, key), its standard error
/// (logged at debug level only: run with `RUST_LOG=kevents_http=debug` to see it) nor the
/// values of its environment.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecError {
    /// The kubeconfig's `exec` has no `command`.
    #[error("exec credential plugin: no command given (users[].user.exec.command)")]
    MissingCommand,
    /// `apiVersion` missing or not one of v1 and v1beta1.
    #[error(
        "exec credential plugin: apiVersion {api_version:?} is not supported; use client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1"
    )]
    UnsupportedApiVersion {
        /// The `apiVersion` given (empty: none).
        api_version: String,
    },
    /// `client.authentication.k8s.io/v1` without `interactiveMode` (client-go requires it).
    #[error(
        "exec credential plugin: interactiveMode must be specified for client.authentication.k8s.io/v1 (Never or IfAvailable)"
    )]
    MissingInteractiveMode,
    /// `interactiveMode: Always`: the plugin wants to prompt, but kevents never runs plugins
    /// interactively (their stdin is not a terminal).
    #[error(
        "exec credential plugin {command}: interactiveMode Always needs a terminal, but kevents never runs plugins interactively (stdin is not a terminal); log in beforehand or use a mode that does not prompt (Never, IfAvailable)"
    )]
    InteractiveAlways {
        /// The plugin.
        command: String,
    },
    /// The command was not found (with the kubeconfig's `installHint`, if any).
    #[error("exec credential plugin {command} not found{}", hint_suffix(.install_hint))]
    NotFound {
        /// The command.
        command: String,
        /// `installHint`.
        install_hint: Option<String>,
    },
    /// The command could not be started (permissions, not executable, ...).
    #[error("exec credential plugin {command} could not be started: {reason}")]
    Spawn {
        /// The command.
        command: String,
        /// The operating system's reason.
        reason: String,
    },
    /// The plugin did not finish within its timeout and was killed (with every process it
    /// started: the plugin runs in a process group of its own).
    #[error(
        "exec credential plugin {command} did not finish within {} s (it hangs, or waits for input it cannot get); killed",
        .after.as_secs_f64()
    )]
    Timeout {
        /// The command.
        command: String,
        /// The timeout.
        after: Duration,
    },
    /// The plugin exited unsuccessfully.
    #[error(
        "exec credential plugin {command} failed ({status}); its standard error is logged at debug level (RUST_LOG=kevents_http=debug)"
    )]
    Failed {
        /// The command.
        command: String,
        /// How it ended (`exit status: 1`, `signal: 9 (SIGKILL)`).
        status: String,
    },
    /// The plugin wrote more than [`MAX_EXEC_OUTPUT_BYTES`] to stdout.
    #[error("exec credential plugin {command} wrote more than {limit} bytes; killed")]
    OutputTooLarge {
        /// The command.
        command: String,
        /// The limit.
        limit: usize,
    },
    /// The plugin's credential has expired (or expires within the refresh margin right after
    /// the run) and the plugin is backing off before it runs again.
    #[error(
        "exec credential plugin {command} returned a credential that has expired or expires at once; it runs again after a back-off"
    )]
    Expired {
        /// The command.
        command: String,
    },
    /// The plugin's output is not a usable `ExecCredential` (not JSON, another apiVersion or
    /// kind, no status, no token and no certificate, a certificate without key, a bad
    /// expirationTimestamp or PEM). The output itself is never quoted.
    #[error("exec credential plugin {command} returned an unusable credential: {problem}")]
    BadOutput {
        /// The command.
        command: String,
        /// What is wrong, without quoting the output.
        problem: String,
    },
}

fn hint_suffix(hint: &Option<String>) -> String {
    match hint.as_deref().map(str::trim) {
        Some(h) if !h.is_empty() => format!(": {}", sanitize_server_text_to(h, 1024)),
        _ => String::new(),
    }
}
