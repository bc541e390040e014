//! `--nats` and the NATS connection of the commands that read or write the history: the
//! servers, one way to authenticate, and TLS, given as flags or as the `NATS_*` variables
//! the `nats` CLI reads. Secrets come from files or the environment, never only from argv;
//! every one is remembered for redaction ([`cluster::add_secret`]), and a server is only
//! ever shown as `scheme://host:port`, without its userinfo.
//!
//! async-nats (0.47) parses a URL's userinfo but never sends it: its CONNECT carries only
//! the options' credentials, so `nats://user:pass@host` reached the server without them and
//! was refused with "authorization violation" (nats.go and nats-py send them). Here the
//! userinfo is taken off every URL and given to async-nats as options.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use kevents_export::async_nats::{self, ConnectErrorKind, ConnectOptions, ServerAddr};

use crate::cluster::{self, Failure, FailureKind};

/// How the commands reach NATS.
#[derive(Args, Debug, Clone)]
pub struct NatsArgs {
    /// The NATS servers, comma-separated (`nats://a:4222,nats://b:4222`), as NATS clients take
    /// them: the client connects to one and fails over to the others. `tls://` requires TLS.
    /// Credentials in a URL (`nats://user:pass@host`, `nats://token@host`) are used and never
    /// shown.
    #[arg(
        long = "nats",
        env = "NATS_URL",
        hide_env_values = true,
        default_value = "nats://127.0.0.1:4222"
    )]
    pub servers: String,
    /// A credentials file (a user JWT and its NKey seed, as `nsc` and `nats context` write
    /// it).
    #[arg(
        long = "nats-creds",
        env = "NATS_CREDS",
        hide_env_values = true,
        value_name = "FILE"
    )]
    pub creds: Option<PathBuf>,
    /// A file holding an NKey user seed (`SU...`).
    #[arg(
        long = "nats-nkey",
        env = "NATS_NKEY",
        hide_env_values = true,
        value_name = "FILE"
    )]
    pub nkey: Option<PathBuf>,
    /// The user name; its password comes from `--nats-password-file` or NATS_PASSWORD.
    #[arg(long = "nats-user", env = "NATS_USER", hide_env_values = true)]
    pub user: Option<String>,
    /// A file holding the user's password (or NATS_PASSWORD; never on the command line).
    #[arg(long = "nats-password-file", value_name = "FILE", requires = "user")]
    pub password_file: Option<PathBuf>,
    /// A file holding the server's authorization token (or NATS_TOKEN).
    #[arg(long = "nats-token-file", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// CA certificates (PEM) to verify the server with (added to the system's roots); implies
    /// TLS.
    #[arg(
        long = "nats-ca",
        env = "NATS_CA",
        hide_env_values = true,
        value_name = "FILE"
    )]
    pub ca: Option<PathBuf>,
    /// A client certificate (PEM) for servers that verify clients; with `--nats-key`.
    #[arg(
        long = "nats-cert",
        env = "NATS_CERT",
        hide_env_values = true,
        value_name = "FILE"
    )]
    pub cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(
        long = "nats-key",
        env = "NATS_KEY",
        hide_env_values = true,
        value_name = "FILE"
    )]
    pub key: Option<PathBuf>,
}

/// The one way a connection authenticates.
#[derive(Debug, Clone, PartialEq)]
enum Credentials {
    None,
    UserPassword {
        user: String,
        password: String,
    },
    Token(String),
    NKey(String),
    /// A credentials file's text (its JWT and seed).
    Creds(String),
}

impl Credentials {
    fn describe(&self) -> &'static str {
        match self {
            Credentials::None => "no credentials",
            Credentials::UserPassword { .. } => "the user and password",
            Credentials::Token(_) => "the token",
            Credentials::NKey(_) => "the NKey",
            Credentials::Creds(_) => "the credentials file",
        }
    }
}

/// What [`NatsArgs::resolve`] found: the servers without userinfo, how they are shown,
/// the credentials and the TLS settings. Reading it needs no network.
#[derive(Debug)]
pub struct NatsTarget {
    servers: Vec<ServerAddr>,
    shown: String,
    credentials: Credentials,
    tls: bool,
    ca: Option<PathBuf>,
    client_cert: Option<(PathBuf, PathBuf)>,
}

/// The largest secret or credentials file read (a `.creds` file is about 1 KiB).
const MAX_SECRET_FILE: u64 = 64 * 1024;

fn usage(message: impl std::fmt::Display) -> anyhow::Error {
    Failure::new(FailureKind::Config, message).into()
}

/// Reads a secret file (bounded), trimmed; the error names the file, never its content.
pub(crate) fn read_secret(flag: &str, path: &Path) -> anyhow::Result<String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)
        .map_err(|e| usage(format!("{flag}: cannot read {}: {e}", path.display())))?;
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| usage(format!("{flag}: cannot read {}: {e}", path.display())))?;
    if bytes.len() as u64 > MAX_SECRET_FILE {
        return Err(usage(format!(
            "{flag}: {} is larger than {MAX_SECRET_FILE} bytes",
            path.display()
        )));
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| usage(format!("{flag}: {} is not UTF-8 text", path.display())))?;
    let text = text.trim().to_owned();
    if text.is_empty() {
        return Err(usage(format!("{flag}: {} is empty", path.display())));
    }
    Ok(text)
}

/// A non-empty environment variable (unset, empty or not UTF-8: `None`; not UTF-8 is an
/// error).
pub(crate) fn env_secret(name: &str) -> anyhow::Result<Option<String>> {
    match std::env::var(name) {
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Ok(Some(v.trim().to_owned())),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(usage(format!("{name} is not UTF-8"))),
    }
}

/// Remembers a secret for redaction, in the forms output could quote it: as given, as
/// Rust's `Debug` writes it (async-nats' trace log of CONNECT) and as a URL carries it.
pub(crate) fn remember(secret: &str) {
    cluster::add_secret(secret);
    let debug = format!("{secret:?}");
    cluster::add_secret(debug.trim_matches('"'));
    let encoded: String =
        percent_encoding::utf8_percent_encode(secret, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
    cluster::add_secret(&encoded);
}

fn decode(part: &str) -> anyhow::Result<String> {
    percent_encoding::percent_decode_str(part)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| usage("--nats: a URL's credentials are not UTF-8 once decoded"))
}

/// `scheme://host:port` (no userinfo, no path).
fn show(url: &url::Url) -> String {
    let host = url.host_str().unwrap_or("");
    match url.port_or_known_default() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}:4222", url.scheme()),
    }
}

impl NatsArgs {
    /// Checks the options and reads the secrets, before anything connects: a malformed
    /// server, an unreadable file or two ways to authenticate are usage errors (exit 2).
    pub fn resolve(&self) -> anyhow::Result<NatsTarget> {
        let mut servers = Vec::new();
        let mut shown = Vec::new();
        let mut from_url: Option<Credentials> = None;
        let mut tls = false;
        for (i, item) in self.servers.split(',').map(str::trim).enumerate() {
            let text = if item.contains("://") {
                item.to_owned()
            } else {
                format!("nats://{item}")
            };
            let mut url = url::Url::parse(&text).map_err(|e| {
                usage(format!(
                    "--nats: server {} of the list is not a NATS URL: {e}",
                    i + 1
                ))
            })?;
            if !matches!(url.scheme(), "nats" | "tls" | "ws" | "wss") {
                return Err(usage(format!(
                    "--nats: server {} of the list has scheme {:?}; NATS URLs are nats://, tls://, ws:// or wss://",
                    i + 1,
                    url.scheme()
                )));
            }
            if url.host_str().is_none_or(str::is_empty) {
                return Err(usage(format!(
                    "--nats: server {} of the list has no host",
                    i + 1
                )));
            }
            if !url.username().is_empty() || url.password().is_some() {
                remember(url.username());
                if let Some(p) = url.password() {
                    remember(p);
                }
                let user = decode(url.username())?;
                remember(&user);
                let found = match url.password() {
                    Some(p) => {
                        let password = decode(p)?;
                        remember(&password);
                        Credentials::UserPassword { user, password }
                    }
                    None => Credentials::Token(user),
                };
                match &from_url {
                    Some(c) if *c != found => {
                        return Err(usage(
                            "--nats: the servers' URLs carry different credentials; give one set",
                        ));
                    }
                    _ => from_url = Some(found),
                }
                // Only `set_*` on a URL with a host can fail, and this one has a host.
                let _ = url.set_username("");
                let _ = url.set_password(None);
            }
            tls |= url.scheme() == "tls" || url.scheme() == "wss";
            shown.push(show(&url));
            servers.push(ServerAddr::from_url(url).map_err(|e| {
                usage(format!(
                    "--nats: server {} of the list is not a NATS URL: {e}",
                    i + 1
                ))
            })?);
        }
        let mut found: Vec<(&str, Credentials)> = Vec::new();
        if let Some(c) = from_url {
            found.push(("credentials in a --nats URL", c));
        }
        if let Some(path) = &self.creds {
            let text = read_secret("--nats-creds", path)?;
            if !text.contains("NATS USER JWT") || !text.contains("NKEY SEED") {
                return Err(usage(format!(
                    "--nats-creds: {} is not a NATS credentials file (a user JWT and an NKey seed)",
                    path.display()
                )));
            }
            for line in text.lines().map(str::trim) {
                if !line.is_empty() && !line.starts_with("--") && !line.starts_with('*') {
                    remember(line);
                }
            }
            found.push(("--nats-creds", Credentials::Creds(text)));
        }
        if let Some(path) = &self.nkey {
            let seed = read_secret("--nats-nkey", path)?;
            remember(&seed);
            if !seed.starts_with("SU") {
                return Err(usage(format!(
                    "--nats-nkey: {} does not hold a user NKey seed (SU...)",
                    path.display()
                )));
            }
            found.push(("--nats-nkey", Credentials::NKey(seed)));
        }
        let password = match &self.password_file {
            Some(path) => Some(read_secret("--nats-password-file", path)?),
            None => env_secret("NATS_PASSWORD")?,
        };
        if let Some(p) = &password {
            remember(p);
        }
        match (&self.user, password) {
            (Some(user), Some(password)) => found.push((
                "--nats-user",
                Credentials::UserPassword {
                    user: user.clone(),
                    password,
                },
            )),
            (Some(_), None) => {
                return Err(usage(
                    "--nats-user needs a password: --nats-password-file FILE or NATS_PASSWORD",
                ));
            }
            (None, Some(_)) => {
                return Err(usage(
                    "NATS_PASSWORD is set without --nats-user (or NATS_USER)",
                ));
            }
            _ => {}
        }
        let token = match &self.token_file {
            Some(path) => Some(read_secret("--nats-token-file", path)?),
            None => env_secret("NATS_TOKEN")?,
        };
        if let Some(token) = token {
            remember(&token);
            found.push(("--nats-token-file or NATS_TOKEN", Credentials::Token(token)));
        }
        if found.len() > 1 {
            let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
            return Err(usage(format!(
                "NATS: give one way to authenticate, not {}",
                names.join(" and ")
            )));
        }
        let credentials = found.pop().map_or(Credentials::None, |(_, c)| c);
        for (flag, path) in [
            ("--nats-ca", &self.ca),
            ("--nats-cert", &self.cert),
            ("--nats-key", &self.key),
        ] {
            if let Some(path) = path
                && let Err(e) = std::fs::metadata(path)
            {
                return Err(usage(format!(
                    "{flag}: cannot read {}: {e}",
                    path.display()
                )));
            }
        }
        let client_cert = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            (None, None) => None,
            (Some(_), None) => return Err(usage("--nats-cert needs --nats-key")),
            (None, Some(_)) => return Err(usage("--nats-key needs --nats-cert")),
        };
        Ok(NatsTarget {
            servers,
            shown: shown.join(","),
            credentials,
            tls: tls || self.ca.is_some() || client_cert.is_some(),
            ca: self.ca.clone(),
            client_cert,
        })
    }
}

impl NatsTarget {
    /// The servers as printed: `nats://host:port,...`, without credentials.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Connects (5 s per attempt, named `name` on the server), with the credentials and TLS
    /// settings resolved. A refusal, an unreachable server or a failed TLS handshake exits 3
    /// with one line saying which.
    pub async fn connect(&self, name: &str) -> anyhow::Result<async_nats::Client> {
        let mut options = match &self.credentials {
            Credentials::None => ConnectOptions::new(),
            Credentials::UserPassword { user, password } => {
                ConnectOptions::with_user_and_password(user.clone(), password.clone())
            }
            Credentials::Token(t) => ConnectOptions::with_token(t.clone()),
            Credentials::NKey(seed) => ConnectOptions::with_nkey(seed.clone()),
            Credentials::Creds(text) => ConnectOptions::with_credentials(text).map_err(|e| {
                usage(format!(
                    "--nats-creds: the file is not a usable credentials file: {e}"
                ))
            })?,
        };
        options = options
            .name(name)
            .connection_timeout(Duration::from_secs(5));
        if self.tls {
            options = options.require_tls(true);
        }
        if let Some(ca) = &self.ca {
            options = options.add_root_certificates(ca.clone());
        }
        if let Some((cert, key)) = &self.client_cert {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        options
            .connect(self.servers.clone())
            .await
            .map_err(|e| self.connect_failure(&e))
    }

    fn connect_failure(&self, e: &async_nats::ConnectError) -> anyhow::Error {
        // The error's own text is "kind: source"; its source is said once, here.
        let source = std::error::Error::source(e)
            .map(|s| s.to_string())
            .unwrap_or_default();
        let at = &self.shown;
        let (kind, text) = match e.kind() {
            ConnectErrorKind::AuthorizationViolation => {
                let hint = if self.credentials == Credentials::None {
                    " (the server requires authentication: --nats-creds, --nats-nkey, \
                     --nats-user with NATS_PASSWORD, or NATS_TOKEN)"
                } else {
                    ""
                };
                (
                    FailureKind::Unreachable,
                    format!(
                        "NATS at {at} refused {}: authorization violation{hint}",
                        self.credentials.describe()
                    ),
                )
            }
            ConnectErrorKind::Authentication => (
                FailureKind::Config,
                format!(
                    "NATS: signing the server's nonce failed: {}",
                    self.credentials.describe()
                ),
            ),
            ConnectErrorKind::Tls => {
                let hint =
                    if source.contains("InvalidContentType") || source.contains("CorruptMessage") {
                        " (the server does not speak TLS: drop tls:// and --nats-ca, or give the \
                     server a tls block)"
                    } else if source.contains("UnknownIssuer") || source.contains("certificate") {
                        " (the server's certificate is not trusted: --nats-ca FILE)"
                    } else {
                        ""
                    };
                (
                    FailureKind::Unreachable,
                    format!("NATS at {at}: TLS failed: {source}{hint}"),
                )
            }
            ConnectErrorKind::TimedOut => (
                FailureKind::Unreachable,
                format!("NATS at {at} did not answer within 5 s"),
            ),
            kind => (
                FailureKind::Unreachable,
                if source.is_empty() {
                    format!("cannot connect to NATS at {at}: {kind}")
                } else {
                    format!("cannot connect to NATS at {at}: {source}")
                },
            ),
        };
        Failure::new(kind, text).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        nats: NatsArgs,
    }

    fn args(argv: &[&str]) -> NatsArgs {
        let mut all = vec!["t"];
        all.extend_from_slice(argv);
        Cli::try_parse_from(all).expect("parses").nats
    }

    fn exit_code(e: &anyhow::Error) -> u8 {
        cluster::exit_code(e)
    }

    #[test]
    fn userinfo_is_taken_off_every_url_and_used() {
        let t = args(&[
            "--nats",
            "nats://alice:s%40cret-1@h1:4223,nats://alice:s%40cret-1@h2",
        ])
        .resolve()
        .expect("resolves");
        assert_eq!(t.shown(), "nats://h1:4223,nats://h2:4222");
        assert_eq!(
            t.credentials,
            Credentials::UserPassword {
                user: "alice".into(),
                password: "s@cret-1".into()
            }
        );
        for s in &t.servers {
            assert!(!s.as_url_str().contains("cret"), "{}", s.as_url_str());
            assert!(!s.as_url_str().contains("alice"), "{}", s.as_url_str());
        }
        assert!(!cluster::redact("x s@cret-1 s%40cret-1").contains("cret"));
    }

    #[test]
    fn a_url_user_alone_is_a_token() {
        let t = args(&["--nats", "tls://tok3n-abc@h"])
            .resolve()
            .expect("resolves");
        assert_eq!(t.credentials, Credentials::Token("tok3n-abc".into()));
        assert!(t.tls);
        assert_eq!(t.shown(), "tls://h:4222");
    }

    #[test]
    fn two_ways_to_authenticate_are_a_usage_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let token = dir.path().join("token");
        std::fs::write(&token, "t0ken-value\n").expect("write");
        let e = args(&[
            "--nats",
            "nats://u:p4ssword@h",
            "--nats-token-file",
            token.to_str().expect("utf-8"),
        ])
        .resolve()
        .expect_err("refused");
        assert_eq!(exit_code(&e), 2);
        assert!(e.to_string().contains("one way to authenticate"), "{e}");
        assert!(!e.to_string().contains("p4ssword"), "{e}");
        assert!(!e.to_string().contains("t0ken-value"), "{e}");
    }

    #[test]
    fn bad_files_and_urls_are_usage_errors_naming_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let creds = dir.path().join("x.creds");
        std::fs::write(&creds, "not a creds file").expect("write");
        for argv in [
            vec!["--nats", "http://h:1"],
            vec!["--nats", "nats://h:99999"],
            vec!["--nats-creds", creds.to_str().expect("utf-8")],
            vec!["--nats-nkey", "/nonexistent/seed"],
            vec!["--nats-user", "bob"],
            vec!["--nats-cert", "/nonexistent/c.pem"],
        ] {
            let e = args(&argv).resolve().expect_err("refused");
            assert_eq!(exit_code(&e), 2, "{argv:?}: {e}");
        }
    }

    #[test]
    fn a_server_list_with_ports_is_accepted() {
        let t = args(&["--nats", "nats://a:1, nats://b:2"])
            .resolve()
            .expect("resolves");
        assert_eq!(t.shown(), "nats://a:1,nats://b:2");
        assert_eq!(t.credentials, Credentials::None);
        assert!(!t.tls);
    }

    #[test]
    fn the_password_comes_from_a_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "  hunter2-long\n").expect("write");
        let t = args(&[
            "--nats-user",
            "bob",
            "--nats-password-file",
            pw.to_str().expect("utf-8"),
        ])
        .resolve()
        .expect("resolves");
        assert_eq!(
            t.credentials,
            Credentials::UserPassword {
                user: "bob".into(),
                password: "hunter2-long".into()
            }
        );
    }
}
