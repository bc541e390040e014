//! Loading an [`HttpConfig`] from a kubeconfig (a file, `$KUBECONFIG`, `~/.kube/config`, or
//! text) or from the in-cluster service account. `kube`'s kubeconfig types and YAML parser
//! are used; reading, resolving the context and loading the files named in it are done here,
//! so that every file is read with a size limit ([`MAX_KUBECONFIG_BYTES`],
//! [`MAX_TOKEN_FILE_BYTES`], [`MAX_PEM_FILE_BYTES`]), a YAML error names the file, line and
//! column without quoting the kubeconfig, and a server URL with user information is refused.

use std::path::{Path, PathBuf};

use kevents_core::status::sanitize_server_text_to;
use kube::config::{AuthInfo, ExecInteractiveMode, Kubeconfig, KubeconfigError};
use reqwest::Url;
use secrecy::ExposeSecret as _;

use crate::config::{
    Auth, ClientIdentity, ConfigError, DEFAULT_TOKEN_REFRESH, HttpConfig, Impersonation,
    MAX_KUBECONFIG_BYTES, MAX_PEM_FILE_BYTES, MAX_TOKEN_FILE_BYTES, check_bearer_token, decode_b64,
    parse_cluster_url, pem_certs, read_capped, redact_url_text,
};
use crate::exec::{
    EXEC_CLUSTER_EXTENSION, ExecApiVersion, ExecCluster, ExecConfig, ExecError, InteractiveMode,
};
use crate::off_thread::{CREDENTIAL_FILE_TIMEOUT, off_thread};

/// Where a pod's service-account files are mounted.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The name a kubeconfig given as text has in errors.
const YAML_TEXT: &str = "(kubeconfig text)";

/// A kubeconfig and the name of its file(s) for errors.
struct Loaded {
    config: Kubeconfig,
    origin: String,
}

impl HttpConfig {
    /// Like `kubectl`: the kubeconfig from `$KUBECONFIG` or `~/.kube/config` (current
    /// context); when there is none (`$KUBECONFIG` unset or empty and no `~/.kube/config`),
    /// the in-cluster service account. A kubeconfig that exists but cannot be used is an
    /// error, not a reason to try in-cluster.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), kevents_http::ConfigError> {
    /// let config = kevents_http::HttpConfig::infer().await?;
    /// # Ok(()) }
    /// ```
    pub async fn infer() -> Result<Self, ConfigError> {
        bounded_load(
            "the kubeconfig or the in-cluster configuration".into(),
            || match default_kubeconfig() {
                Ok(loaded) => from_loaded(loaded, None),
                Err(Absent(kubeconfig)) => {
                    HttpConfig::incluster().map_err(|in_cluster| ConfigError::Infer {
                        kubeconfig: Box::new(kubeconfig),
                        in_cluster: Box::new(in_cluster),
                    })
                }
                Err(Broken(e)) => Err(e),
            },
        )
        .await
    }

    /// A kubeconfig: `path`, or `$KUBECONFIG` (several files merged, as kubectl does) /
    /// `~/.kube/config` when `None`; `context`, or the current context when `None`. Each file
    /// is read up to [`MAX_KUBECONFIG_BYTES`]; relative paths in it are relative to its
    /// directory.
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
        let what = match path {
            Some(p) => format!("kubeconfig {} and the files it names", p.display()),
            None => "the kubeconfig ($KUBECONFIG or ~/.kube/config) and the files it names".into(),
        };
        let path = path.map(Path::to_owned);
        let context = context.map(str::to_owned);
        bounded_load(what, move || {
            let loaded = match &path {
                Some(path) => Loaded {
                    config: read_kubeconfig_file(path)?,
                    origin: path.display().to_string(),
                },
                None => default_kubeconfig().map_err(|(Absent(e) | Broken(e))| e)?,
            };
            from_loaded(loaded, context.as_deref())
        })
        .await
    }

    /// A kubeconfig file already read, `bytes` being the content of `path` (read once, e.g.
    /// with [`read_credential_file`](crate::read_credential_file)): the file is not read
    /// again, so a pipe (`/dev/stdin`), a FIFO or a process substitution (`<(...)`) works.
    /// Decoded and parsed as [`from_kubeconfig`](Self::from_kubeconfig) does; relative paths
    /// in it are relative to the directory of `path`; errors name `path`. More than
    /// [`MAX_KUBECONFIG_BYTES`] is [`ConfigError::TooLarge`].
    ///
    /// ```
    /// # tokio_test_block_on(async {
    /// use std::path::Path;
    /// let yaml = b"apiVersion: v1
    /// kind: Config
    /// clusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]
    /// users: [{name: u, user: {token: s3cr3t}}]
    /// contexts: [{name: x, context: {cluster: c, user: u, namespace: ns}}]
    /// current-context: x
    /// ".to_vec();
    /// let config = kevents_http::HttpConfig::from_kubeconfig_bytes(
    ///     yaml, Path::new("/dev/stdin"), None).await.unwrap();
    /// assert_eq!(config.default_namespace, "ns");
    /// # });
    /// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f) }
    /// ```
    pub async fn from_kubeconfig_bytes(
        bytes: Vec<u8>,
        path: &Path,
        context: Option<&str>,
    ) -> Result<Self, ConfigError> {
        let path = path.to_owned();
        let context = context.map(str::to_owned);
        bounded_load(
            format!("the files named by kubeconfig {}", path.display()),
            move || {
                let loaded = Loaded {
                    config: kubeconfig_from_bytes(bytes, &path)?,
                    origin: path.display().to_string(),
                };
                from_loaded(loaded, context.as_deref())
            },
        )
        .await
    }

    /// A kubeconfig given as YAML text (relative file paths in it are relative to the
    /// current directory; errors name it `(kubeconfig text)`).
    ///
    /// ```
    /// # tokio_test_block_on(async {
    /// let yaml = r#"
    /// apiVersion: v1
    /// kind: Config
    /// clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
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
        let config = parse_kubeconfig(yaml, YAML_TEXT)?;
        refuse_duplicate_names(&config, YAML_TEXT)?;
        let loaded = Loaded {
            config,
            origin: YAML_TEXT.to_owned(),
        };
        let context = context.map(str::to_owned);
        bounded_load(format!("the files named by {YAML_TEXT}"), move || {
            from_loaded(loaded, context.as_deref())
        })
        .await
    }

    /// The pod's service account: `KUBERNETES_SERVICE_HOST`/`_PORT`, the mounted CA and
    /// namespace file (read once, with size limits), and the token file (re-read every
    /// [`DEFAULT_TOKEN_REFRESH`], so the kubelet's token rotation is picked up).
    ///
    /// ```no_run
    /// let config = kevents_http::HttpConfig::incluster()?;
    /// # Ok::<(), kevents_http::ConfigError>(())
    /// ```
    pub fn incluster() -> Result<Self, ConfigError> {
        incluster_from(
            Path::new(SERVICE_ACCOUNT_DIR),
            std::env::var("KUBERNETES_SERVICE_HOST").ok(),
            std::env::var("KUBERNETES_SERVICE_PORT").ok(),
        )
    }

    /// Converts a configuration loaded by `kube`. Exec credential plugins are supported
    /// ([`Auth::Exec`]); `auth-provider` entries are refused ([`ConfigError::AuthProvider`]);
    /// a static token wins over a token file, as in client-go; client certificate and key
    /// files are read with [`MAX_PEM_FILE_BYTES`] as limit.
    pub fn from_kube(config: kube::Config) -> Result<Self, ConfigError> {
        let origin = "kube config";
        let mut out = HttpConfig::new_at(&config.cluster_url.to_string(), origin)?;
        out.default_namespace = config.default_namespace;
        out.root_certs = config.root_cert;
        out.insecure_skip_tls_verify = config.accept_invalid_certs;
        out.tls_server_name = config.tls_server_name;
        if let Some(proxy) = &config.proxy_url {
            out.proxy_url = Some(parse_proxy(&proxy.to_string(), origin)?);
        }
        let cluster = ExecCluster {
            server: config.cluster_url.to_string(),
            tls_server_name: out.tls_server_name.clone(),
            insecure_skip_tls_verify: out.insecure_skip_tls_verify,
            certificate_authority_data: out.root_certs.as_deref().map(der_to_pem),
            proxy_url: config.proxy_url.as_ref().map(|p| p.to_string()),
            config: None,
        };
        apply_user(&mut out, config.auth_info, cluster, origin)?;
        out.validate_as(origin)?;
        Ok(out)
    }

    /// [`HttpConfig::new`] with errors naming `origin`.
    fn new_at(cluster_url: &str, origin: &str) -> Result<Self, ConfigError> {
        Ok(HttpConfig::for_url(parse_cluster_url(cluster_url, origin)?))
    }
}

/// Runs a kubeconfig's loading (it reads files: the kubeconfig, CA, client certificate and
/// key) on a thread of its own, bounded by [`CREDENTIAL_FILE_TIMEOUT`]: a file that blocks
/// is [`ConfigError::Stalled`], not a frozen caller.
async fn bounded_load(
    what: String,
    load: impl FnOnce() -> Result<HttpConfig, ConfigError> + Send + 'static,
) -> Result<HttpConfig, ConfigError> {
    off_thread("kevents-kubeconfig", CREDENTIAL_FILE_TIMEOUT, load)
        .await
        .unwrap_or(Err(ConfigError::Stalled {
            what,
            after: CREDENTIAL_FILE_TIMEOUT,
        }))
}

/// Why no default kubeconfig was loaded: there is none, or there is one that cannot be used.
enum DefaultError {
    Absent(ConfigError),
    Broken(ConfigError),
}
use DefaultError::{Absent, Broken};

/// `$KUBECONFIG` (its files merged, the first to set a value wins) or `~/.kube/config`.
fn default_kubeconfig() -> Result<Loaded, DefaultError> {
    let listed: Vec<PathBuf> = std::env::var_os("KUBECONFIG")
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if listed.is_empty() {
        let Some(home) = std::env::home_dir() else {
            return Err(Absent(ConfigError::Kubeconfig {
                file: "~/.kube/config".into(),
                field: "(file)".into(),
                problem: "KUBECONFIG is not set and there is no home directory".into(),
            }));
        };
        let path = home.join(".kube").join("config");
        return match read_kubeconfig_file(&path) {
            Ok(config) => Ok(Loaded {
                config,
                origin: path.display().to_string(),
            }),
            Err(e) if is_not_found(&e) => Err(Absent(e)),
            Err(e) => Err(Broken(e)),
        };
    }
    let origin = listed
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    let mut merged = Kubeconfig::default();
    for path in &listed {
        let next = read_kubeconfig_file(path).map_err(Broken)?;
        merged = merged.merge(next).map_err(|e| {
            Broken(ConfigError::Kubeconfig {
                file: origin.clone(),
                field: "(files)".into(),
                problem: kube_problem(&e),
            })
        })?;
    }
    Ok(Loaded {
        config: merged,
        origin,
    })
}

fn is_not_found(e: &ConfigError) -> bool {
    matches!(e, ConfigError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

/// One kubeconfig file: read up to [`MAX_KUBECONFIG_BYTES`], decoded (UTF-8, or UTF-16 with
/// a byte order mark, as kubectl accepts), parsed, relative paths made relative to its
/// directory.
fn read_kubeconfig_file(path: &Path) -> Result<Kubeconfig, ConfigError> {
    kubeconfig_from_bytes(read_capped("kubeconfig", path, MAX_KUBECONFIG_BYTES)?, path)
}

/// A kubeconfig already read from `path`: decoded, parsed, relative paths made relative to
/// the directory of `path` (the file itself is not read again).
fn kubeconfig_from_bytes(bytes: Vec<u8>, path: &Path) -> Result<Kubeconfig, ConfigError> {
    if bytes.len() as u64 > MAX_KUBECONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            what: "kubeconfig",
            path: path.to_owned(),
            limit: MAX_KUBECONFIG_BYTES,
        });
    }
    let text = decode_text(bytes).map_err(|source| ConfigError::Read {
        what: "kubeconfig",
        path: path.to_owned(),
        source,
    })?;
    let mut config = parse_kubeconfig(&text, &path.display().to_string())?;
    refuse_duplicate_names(&config, &path.display().to_string())?;
    if let Some(dir) = path.parent() {
        absolutize(&mut config, dir);
    }
    Ok(config)
}

fn decode_text(bytes: Vec<u8>) -> std::io::Result<String> {
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
    let utf16 = |rest: &[u8], le: bool| {
        let units: Vec<u16> = rest
            .chunks_exact(2)
            .map(|c| {
                if le {
                    u16::from_le_bytes([c[0], c[1]])
                } else {
                    u16::from_be_bytes([c[0], c[1]])
                }
            })
            .collect();
        String::from_utf16(&units).map_err(|_| invalid("not valid UTF-16 text"))
    };
    match bytes.as_slice() {
        [0xFF, 0xFE, rest @ ..] => utf16(rest, true),
        [0xFE, 0xFF, rest @ ..] => utf16(rest, false),
        [0xEF, 0xBB, 0xBF, rest @ ..] => {
            String::from_utf8(rest.to_vec()).map_err(|_| invalid("not valid UTF-8 text"))
        }
        _ => String::from_utf8(bytes).map_err(|_| invalid("not valid UTF-8 text")),
    }
}

/// Parses kubeconfig YAML (several documents are merged). A syntax error becomes
/// [`ConfigError::KubeconfigSyntax`] with the position and a description that quotes nothing.
fn parse_kubeconfig(text: &str, origin: &str) -> Result<Kubeconfig, ConfigError> {
    Kubeconfig::from_yaml(text).map_err(|e| match &e {
        KubeconfigError::Parse(parse) => {
            let (line, column) = parse.location().map_or((0, 0), |l| (l.line(), l.column()));
            ConfigError::KubeconfigSyntax {
                file: origin.to_owned(),
                line,
                column,
                problem: describe_yaml_problem(&parse.without_snippet().to_string()),
            }
        }
        other => ConfigError::Kubeconfig {
            file: origin.to_owned(),
            field: "(document)".into(),
            problem: kube_problem(other),
        },
    })
}

/// The parser's message without its position (reported apart) and with every quoted part
/// (`"..."`, `` `...` ``, `` `...' ``) replaced by `"…"`: a value in a kubeconfig may be a
/// secret (a token in the wrong place).
fn describe_yaml_problem(message: &str) -> String {
    let message = match message.rfind(" at line ") {
        Some(i) => &message[..i],
        None => message,
    };
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        let close: &[char] = match c {
            '"' => &['"'],
            '`' => &['`', '\''],
            _ => {
                out.push(c);
                continue;
            }
        };
        out.push_str("\"…\"");
        for d in chars.by_ref() {
            if close.contains(&d) {
                break;
            }
        }
    }
    sanitize_server_text_to(out.trim(), 200)
}

/// A `kube` kubeconfig error other than a parse error (these never contain file content).
fn kube_problem(e: &KubeconfigError) -> String {
    sanitize_server_text_to(&e.to_string(), 200)
}

/// Relative file names of a kubeconfig (CA, client certificate and key, token file) made
/// relative to `dir`, its directory.
fn absolutize(config: &mut Kubeconfig, dir: &Path) {
    let fix = |p: &mut Option<String>| {
        if let Some(path) = p.as_mut()
            && Path::new(path).is_relative()
        {
            *path = dir.join(&*path).to_string_lossy().into_owned();
        }
    };
    for named in &mut config.clusters {
        if let Some(c) = named.cluster.as_mut() {
            fix(&mut c.certificate_authority);
        }
    }
    for named in &mut config.auth_infos {
        if let Some(a) = named.auth_info.as_mut() {
            fix(&mut a.client_certificate);
            fix(&mut a.client_key);
            fix(&mut a.token_file);
            // client-go: a command with a path separator is relative to the kubeconfig; a
            // bare name is looked up in PATH.
            if let Some(exec) = a.exec.as_mut()
                && exec.command.as_deref().is_some_and(|c| c.contains('/'))
            {
                fix(&mut exec.command);
            }
        }
    }
}

/// Refuses a kubeconfig file that names two clusters, users or contexts alike, as client-go
/// does (`duplicate name "x" in list`): which one was meant is not known.
fn refuse_duplicate_names(config: &Kubeconfig, origin: &str) -> Result<(), ConfigError> {
    fn first_duplicate<'a>(names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
        let mut seen = std::collections::HashSet::new();
        names.into_iter().find(|n| !seen.insert(*n))
    }
    let lists = [
        (
            "clusters",
            first_duplicate(config.clusters.iter().map(|c| c.name.as_str())),
        ),
        (
            "users",
            first_duplicate(config.auth_infos.iter().map(|a| a.name.as_str())),
        ),
        (
            "contexts",
            first_duplicate(config.contexts.iter().map(|c| c.name.as_str())),
        ),
    ];
    for (list, duplicate) in lists {
        if let Some(name) = duplicate {
            return Err(ConfigError::Kubeconfig {
                file: origin.to_owned(),
                field: format!("{list}[{:?}]", sanitize_server_text_to(name, 100)),
                problem: "named twice in the file (client-go refuses it too): rename or remove one"
                    .into(),
            });
        }
    }
    Ok(())
}

/// The configuration of `context` (or the current one) of a loaded kubeconfig.
fn from_loaded(loaded: Loaded, context: Option<&str>) -> Result<HttpConfig, ConfigError> {
    let Loaded { config, origin } = loaded;
    let entry = |field: String, problem: &str| ConfigError::Kubeconfig {
        file: origin.clone(),
        field,
        problem: problem.to_owned(),
    };
    let context_name = context
        .map(str::to_owned)
        .or_else(|| config.current_context.clone())
        .filter(|c| !c.is_empty())
        .ok_or_else(|| entry("current-context".into(), "not set, and no context given"))?;
    let ctx = config
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| entry(format!("contexts[{context_name:?}]"), "not found"))?;
    let cluster_field = format!("clusters[{:?}]", ctx.cluster);
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| {
            entry(
                cluster_field.clone(),
                &format!("not found (the cluster of context {context_name:?})"),
            )
        })?;
    let server = cluster
        .server
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| entry(format!("{cluster_field}.cluster.server"), "missing"))?;
    let at = |field: &str| format!("kubeconfig {origin}: {cluster_field}.cluster.{field}");
    let mut out = HttpConfig::new_at(server, &at("server"))?;
    out.default_namespace = ctx
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".into());
    out.insecure_skip_tls_verify = cluster.insecure_skip_tls_verify.unwrap_or(false);
    let has_ca =
        cluster.certificate_authority.is_some() || cluster.certificate_authority_data.is_some();
    if out.insecure_skip_tls_verify && has_ca {
        return Err(ConfigError::InsecureWithCa {
            origin: format!("kubeconfig {origin}: {cluster_field}"),
        });
    }
    let ca_pem = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => Some(decode_b64("certificate-authority-data", data.as_bytes())?),
        (None, Some(path)) => Some(read_capped(
            "certificate authority",
            Path::new(path),
            MAX_PEM_FILE_BYTES,
        )?),
        (None, None) => None,
    };
    out.root_certs = ca_pem.as_deref().map(pem_certs).transpose()?;
    out.tls_server_name = cluster.tls_server_name.clone().filter(|n| !n.is_empty());
    if let Some(proxy) = cluster.proxy_url.as_deref().filter(|p| !p.is_empty()) {
        out.proxy_url = Some(parse_proxy(proxy, &at("proxy-url"))?);
    }
    // What an exec plugin is told with provideClusterInfo (client-go's
    // `clientauthentication.Cluster`).
    let exec_cluster = ExecCluster {
        server: server.to_owned(),
        tls_server_name: out.tls_server_name.clone(),
        insecure_skip_tls_verify: out.insecure_skip_tls_verify,
        certificate_authority_data: ca_pem,
        proxy_url: cluster.proxy_url.clone().filter(|p| !p.is_empty()),
        config: cluster.extensions.as_ref().and_then(|exts| {
            exts.iter()
                .find(|e| e.name == EXEC_CLUSTER_EXTENSION)
                .map(|e| e.extension.clone())
        }),
    };
    // client-go does not fail on a missing user entry: no credentials.
    let user_name = ctx.user.clone().unwrap_or_default();
    let user = ctx
        .user
        .as_ref()
        .and_then(|u| config.auth_infos.iter().find(|a| &a.name == u))
        .and_then(|a| a.auth_info.clone())
        .unwrap_or_default();
    apply_user(
        &mut out,
        user,
        exec_cluster,
        &format!("kubeconfig {origin}: users[{user_name:?}].user"),
    )?;
    out.allow_credentials_over_loopback_http |= loopback_http_allowed_by_env();
    out.validate_as(&format!("kubeconfig {origin}, context {context_name:?}"))?;
    Ok(out)
}

/// A proxy URL (user information allowed: it authenticates to the proxy; never shown).
fn parse_proxy(proxy: &str, origin: &str) -> Result<Url, ConfigError> {
    let url = Url::parse(proxy).map_err(|e| ConfigError::Url {
        origin: origin.to_owned(),
        url: redact_url_text(proxy),
        reason: e.to_string(),
    })?;
    crate::config::check_proxy_scheme(&url, origin)?;
    Ok(url)
}

/// Certificates (DER) as one PEM bundle.
fn der_to_pem(ders: &[Vec<u8>]) -> Vec<u8> {
    use base64::Engine as _;
    let mut out = String::new();
    for der in ders {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        for line in b64.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out.into_bytes()
}

/// A kubeconfig `exec` entry as an [`ExecConfig`]: `apiVersion` v1 or v1beta1, v1 with an
/// `interactiveMode`, `env` as name/value pairs; `cluster` is given to the plugin when
/// `provideClusterInfo` is set.
fn exec_config(e: kube::config::ExecConfig, cluster: ExecCluster) -> Result<ExecConfig, ExecError> {
    let api_version = ExecApiVersion::parse(e.api_version.as_deref().unwrap_or(""))?;
    let interactive_mode = match (e.interactive_mode, api_version) {
        (Some(ExecInteractiveMode::Never), _) => InteractiveMode::Never,
        (Some(ExecInteractiveMode::IfAvailable), _) => InteractiveMode::IfAvailable,
        (Some(ExecInteractiveMode::Always), _) => InteractiveMode::Always,
        (None, ExecApiVersion::V1) => return Err(ExecError::MissingInteractiveMode),
        (None, ExecApiVersion::V1Beta1) => InteractiveMode::IfAvailable,
    };
    let mut config = ExecConfig::new(e.command.unwrap_or_default())
        .with_args(e.args.unwrap_or_default())
        .with_api_version(api_version)
        .with_interactive_mode(interactive_mode);
    config.install_hint = e.install_hint.filter(|h| !h.trim().is_empty());
    for var in e.env.unwrap_or_default() {
        if let Some(name) = var.get("name").filter(|n| !n.is_empty()) {
            let value = var.get("value").cloned().unwrap_or_default();
            config.env.push((name.clone(), value));
        }
    }
    if e.provide_cluster_info {
        config.cluster = Some(cluster);
    }
    config.validate()?;
    Ok(config)
}

/// The credentials of a kubeconfig user entry (`origin`: where it is, for errors); `cluster`
/// is what an exec plugin is told with `provideClusterInfo`.
fn apply_user(
    out: &mut HttpConfig,
    a: AuthInfo,
    cluster: ExecCluster,
    origin: &str,
) -> Result<(), ConfigError> {
    if let Some(provider) = &a.auth_provider {
        return Err(ConfigError::AuthProvider {
            origin: origin.to_owned(),
            name: sanitize_server_text_to(&provider.name, 100),
        });
    }
    let token = a.token.filter(|t| !t.expose_secret().trim().is_empty());
    if let Some(t) = &token {
        check_bearer_token(t.expose_secret().trim(), &format!("{origin}.token"))?;
    }
    let token_file = a.token_file.filter(|p| !p.is_empty());
    if let Some(exec) = a.exec {
        if token.is_some() || token_file.is_some() || a.username.is_some() {
            return Err(ConfigError::Conflict {
                origin: format!("{origin}.exec"),
                problem: "an exec credential plugin together with token, tokenFile or username/password: keep only one of them".into(),
            });
        }
        let exec = exec_config(exec, cluster).map_err(|source| ConfigError::Exec {
            origin: origin.to_owned(),
            source,
        })?;
        out.auth = Auth::Exec(Box::new(exec));
    } else if (token.is_some() || token_file.is_some())
        && (a.username.as_deref().is_some_and(|u| !u.is_empty()) || a.password.is_some())
    {
        // client-go: "more than one authentication method found for ...; found [token
        // basicAuth], only one is allowed".
        return Err(ConfigError::Conflict {
            origin: origin.to_owned(),
            problem: "more than one authentication method (token or tokenFile, and username/password): keep only one of them".into(),
        });
    } else if let Some(path) = token_file {
        // client-go: a tokenFile wins over an inline token (and is read again as it rotates).
        out.auth = token_file_auth(PathBuf::from(path))?;
    } else if let Some(token) = token {
        out.auth = Auth::Bearer(token);
    } else if let (Some(username), Some(password)) = (a.username, a.password) {
        out.auth = Auth::Basic { username, password };
    } else {
        out.auth = Auth::None;
    }
    let cert = match (&a.client_certificate_data, &a.client_certificate) {
        (Some(data), _) => Some(decode_b64("client-certificate-data", data.as_bytes())?),
        (None, Some(path)) => Some(read_capped(
            "client certificate",
            Path::new(path),
            MAX_PEM_FILE_BYTES,
        )?),
        (None, None) => None,
    };
    let key = match (&a.client_key_data, &a.client_key) {
        (Some(data), _) => Some(decode_b64(
            "client-key-data",
            data.expose_secret().as_bytes(),
        )?),
        (None, Some(path)) => Some(read_capped(
            "client key",
            Path::new(path),
            MAX_PEM_FILE_BYTES,
        )?),
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
    Ok(())
}

/// A token file's credentials: a regular file is re-read when it may have rotated
/// ([`Auth::BearerFile`]); anything else (a pipe, `/dev/stdin`, a FIFO, a process
/// substitution) can be read only once, so it is read now, once, and its token kept
/// ([`Auth::Bearer`]).
fn token_file_auth(path: PathBuf) -> Result<Auth, ConfigError> {
    if std::fs::metadata(&path).map_or(true, |m| m.is_file()) {
        // A regular file, or one missing now (reported at the first request, as before).
        return Ok(Auth::BearerFile {
            path,
            refresh: DEFAULT_TOKEN_REFRESH,
        });
    }
    // On a thread of its own, waited for a second less than the whole load: a FIFO without
    // a writer is reported as this token file, not as the kubeconfig.
    let wait = CREDENTIAL_FILE_TIMEOUT.saturating_sub(std::time::Duration::from_secs(1));
    let (tx, rx) = std::sync::mpsc::channel();
    let reading = path.clone();
    std::thread::Builder::new()
        .name("kevents-token-file".into())
        .spawn(move || {
            let _ = tx.send(read_capped("token file", &reading, MAX_TOKEN_FILE_BYTES));
        })
        .map_err(|source| ConfigError::Read {
            what: "token file",
            path: path.clone(),
            source,
        })?;
    let bytes = rx.recv_timeout(wait).map_err(|_| ConfigError::Stalled {
        what: format!("token file {}", path.display()),
        after: wait,
    })??;
    let invalid = |what: &str| ConfigError::Read {
        what: "token file",
        path: path.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, what),
    };
    let text = String::from_utf8(bytes).map_err(|_| invalid("not UTF-8 text"))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(invalid("empty"));
    }
    check_bearer_token(token, &format!("token file {}", path.display()))?;
    Ok(Auth::Bearer(token.to_owned().into()))
}

/// The in-cluster configuration from the service-account directory `dir` and the service
/// host and port.
fn incluster_from(
    dir: &Path,
    host: Option<String>,
    port: Option<String>,
) -> Result<HttpConfig, ConfigError> {
    let (Some(host), Some(port)) = (
        host.filter(|h| !h.is_empty()),
        port.filter(|p| !p.is_empty()),
    ) else {
        return Err(ConfigError::InCluster(
            "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not running in a pod?)"
                .into(),
        ));
    };
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host
    };
    let mut out = HttpConfig::new_at(
        &format!("https://{host}:{port}"),
        "in-cluster KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT",
    )?;
    out.root_certs = Some(pem_certs(&read_capped(
        "service-account CA",
        &dir.join("ca.crt"),
        MAX_PEM_FILE_BYTES,
    )?)?);
    let ns = read_capped(
        "service-account namespace file",
        &dir.join("namespace"),
        MAX_TOKEN_FILE_BYTES,
    )?;
    out.default_namespace = String::from_utf8_lossy(&ns).trim().to_owned();
    if out.default_namespace.is_empty() {
        out.default_namespace = "default".into();
    }
    out.auth = token_file_auth(dir.join("token"))?;
    out.validate_as("in-cluster config")?;
    Ok(out)
}

/// The environment variable that lets a kubeconfig send credentials over plain `http://` to a
/// loopback host (127.0.0.0/8, `::1`, `localhost`) only: for tests against local fake
/// apiservers. Any other host over plain `http://` is still refused.
pub const ALLOW_LOOPBACK_HTTP_ENV: &str = "KEVENTS_ALLOW_CREDENTIALS_OVER_LOOPBACK_HTTP";

/// Whether [`ALLOW_LOOPBACK_HTTP_ENV`] is set to `1`.
fn loopback_http_allowed_by_env() -> bool {
    std::env::var(ALLOW_LOOPBACK_HTTP_ENV).is_ok_and(|v| v == "1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_problems_quote_nothing() {
        assert_eq!(
            describe_yaml_problem(
                "invalid type: string \"s3cr3t\", expected a map at line 4, column 9"
            ),
            "invalid type: string \"…\", expected a map"
        );
        assert_eq!(
            describe_yaml_problem("unexpected character: `\\u{0}' at line 1, column 1"),
            "unexpected character: \"…\""
        );
        assert_eq!(
            describe_yaml_problem("unknown variant `s3cr3t`, expected one of"),
            "unknown variant \"…\", expected one of"
        );
        assert_eq!(describe_yaml_problem("no quote \"s3cr3t"), "no quote \"…\"");
    }

    #[test]
    fn incluster_files_are_read_with_limits() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["kubernetes".to_owned()]).unwrap();
        std::fs::write(dir.path().join("ca.crt"), ca.cert.pem()).unwrap();
        std::fs::write(dir.path().join("namespace"), "team-a\n").unwrap();
        let c = incluster_from(dir.path(), Some("fd00::1".into()), Some("6443".into())).unwrap();
        assert_eq!(c.cluster_url.as_str(), "https://[fd00::1]:6443/");
        assert_eq!(c.default_namespace, "team-a");
        assert!(matches!(&c.auth, Auth::BearerFile { path, .. } if path.ends_with("token")));
        assert!(matches!(
            incluster_from(dir.path(), None, Some("443".into())),
            Err(ConfigError::InCluster(_))
        ));
        std::fs::write(dir.path().join("namespace"), vec![b'x'; 70_000]).unwrap();
        assert!(matches!(
            incluster_from(dir.path(), Some("10.0.0.1".into()), Some("443".into())),
            Err(ConfigError::TooLarge { .. })
        ));
    }

    #[test]
    fn utf16_kubeconfigs_are_decoded() {
        let text = "apiVersion: v1";
        let mut le = vec![0xFF, 0xFE];
        le.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        assert_eq!(decode_text(le).unwrap(), text);
        let mut be = vec![0xFE, 0xFF];
        be.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
        assert_eq!(decode_text(be).unwrap(), text);
        assert!(decode_text(vec![0xC3]).is_err());
    }
}
