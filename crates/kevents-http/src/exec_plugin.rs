//! Running an exec credential plugin ([`ExecConfig::run`]) on the caller's tokio runtime
//! (`tokio::process`: nothing blocks the thread, so an actix arbiter keeps running while the
//! plugin does), with a timeout, stdin `/dev/null`, a bounded read of stdout and stderr, and
//! the checks client-go makes of its answer ([`ExecCredential`]).

use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use kevents_core::Time;
use kevents_core::status::sanitize_server_text_to;
use secrecy::{ExposeSecret as _, SecretString};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt as _};

use crate::config::ClientIdentity;
use crate::exec::{
    EXEC_INFO_ENV, ExecCluster, ExecConfig, ExecError, MAX_EXEC_OUTPUT_BYTES, MAX_EXEC_STDERR_BYTES,
};

/// What a plugin returned: a bearer token and/or a client certificate, and until when they
/// are valid. `Debug` shows neither the token nor the key.
///
/// ```no_run
/// use kevents_http::ExecConfig;
/// # async fn f() -> Result<(), kevents_http::ExecError> {
/// let credential = ExecConfig::new("gke-gcloud-auth-plugin").run().await?;
/// println!("{credential:?}, expires {:?}", credential.expiration);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ExecCredential {
    /// `status.token`.
    pub token: Option<SecretString>,
    /// `status.clientCertificateData` and `status.clientKeyData`.
    pub client_identity: Option<ClientIdentity>,
    /// `status.expirationTimestamp` (`None`: valid until the server refuses it with 401).
    pub expiration: Option<SystemTime>,
}

impl std::fmt::Debug for ExecCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecCredential")
            .field("token", &self.token.as_ref().map(|_| "[REDACTED]"))
            .field("client_identity", &self.client_identity)
            .field("expiration", &self.expiration)
            .finish()
    }
}

/// The `ExecCredential` given to the plugin in [`EXEC_INFO_ENV`].
#[derive(Serialize)]
struct ExecInfo<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    spec: ExecInfoSpec<'a>,
}

#[derive(Serialize)]
struct ExecInfoSpec<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster: Option<ClusterJson<'a>>,
    interactive: bool,
}

/// Go's `clientauthentication.Cluster` JSON.
#[derive(Serialize)]
struct ClusterJson<'a> {
    server: &'a str,
    #[serde(rename = "tls-server-name", skip_serializing_if = "Option::is_none")]
    tls_server_name: Option<&'a str>,
    #[serde(rename = "insecure-skip-tls-verify", skip_serializing_if = "is_false")]
    insecure_skip_tls_verify: bool,
    #[serde(
        rename = "certificate-authority-data",
        skip_serializing_if = "Option::is_none"
    )]
    certificate_authority_data: Option<String>,
    #[serde(rename = "proxy-url", skip_serializing_if = "Option::is_none")]
    proxy_url: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<&'a serde_json::Value>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl<'a> ClusterJson<'a> {
    fn of(c: &'a ExecCluster) -> Self {
        ClusterJson {
            server: &c.server,
            tls_server_name: c.tls_server_name.as_deref().filter(|s| !s.is_empty()),
            insecure_skip_tls_verify: c.insecure_skip_tls_verify,
            certificate_authority_data: c
                .certificate_authority_data
                .as_ref()
                .filter(|d| !d.is_empty())
                .map(|d| base64::engine::general_purpose::STANDARD.encode(d)),
            proxy_url: c.proxy_url.as_deref().filter(|s| !s.is_empty()),
            config: c.config.as_ref(),
        }
    }
}

/// The plugin's answer.
#[derive(Deserialize)]
struct Output {
    #[serde(default, rename = "apiVersion")]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    status: Option<OutputStatus>,
}

#[derive(Deserialize)]
struct OutputStatus {
    #[serde(default, rename = "expirationTimestamp")]
    expiration_timestamp: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default, rename = "clientCertificateData")]
    client_certificate_data: Option<String>,
    #[serde(default, rename = "clientKeyData")]
    client_key_data: Option<String>,
}

/// An identifier worth quoting in an error (an apiVersion or kind): short and plain;
/// anything else (possibly a secret in the wrong place) is not quoted.
fn quoted_if_plain(s: &str) -> String {
    let plain = s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '-'));
    if plain {
        format!("{s:?}")
    } else {
        "(not shown)".into()
    }
}

/// Reads all of `r`, keeping at most `limit` bytes; `Err(())` when there is more than
/// `limit` (reading stops there).
async fn read_capped<R: AsyncRead + Unpin>(mut r: R, limit: usize) -> Result<Vec<u8>, ()> {
    let mut buf = Vec::new();
    (&mut r)
        .take(limit as u64 + 1)
        .read_to_end(&mut buf)
        .await
        .map_err(|_| ())?;
    if buf.len() > limit { Err(()) } else { Ok(buf) }
}

/// Reads all of `r` (so the plugin never blocks on a full pipe), keeping the first `limit`
/// bytes.
async fn drain_capped<R: AsyncRead + Unpin>(mut r: R, limit: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                let room = limit.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
        }
    }
}

/// The process group of a running plugin (its id is the plugin's pid), killed with SIGKILL
/// when dropped while set: on a timeout, an oversized output, or a cancelled request.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.0.and_then(|p| i32::try_from(p).ok()) {
            use nix::sys::signal::{Signal, killpg};
            use nix::unistd::Pid;
            if let Err(e) = killpg(Pid::from_raw(pid), Signal::SIGKILL) {
                tracing::debug!(error = %e, "exec credential plugin: killing its process group");
            }
        }
    }
}

/// The end of the plugin's stderr, sanitised, at most 512 characters.
fn stderr_tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    let start = text.char_indices().rev().nth(511).map_or(0, |(i, _)| i);
    sanitize_server_text_to(&text[start..], 600)
}

impl ExecConfig {
    /// Runs the plugin once and returns its credential: on the current tokio runtime
    /// (`tokio::process`, nothing blocks the thread), stdin `/dev/null`, the environment of
    /// this process plus [`ExecConfig::env`] and [`EXEC_INFO_ENV`], in a process group of its
    /// own that is killed whole after [`ExecConfig::timeout`]; stdout read up to
    /// [`MAX_EXEC_OUTPUT_BYTES`], the end of stderr logged at debug level only when it
    /// failed. Nothing of stdout is logged, nothing of stderr is in an error.
    /// [`HttpSink`](crate::HttpSink) calls it when it needs a credential; calling it directly is for
    /// checking a plugin.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use kevents_http::{ExecConfig, ExecError};
    /// let missing = ExecConfig::new("no-such-plugin-kevents")
    ///     .with_install_hint("brew install no-such-plugin")
    ///     .run().await.unwrap_err();
    /// assert!(matches!(missing, ExecError::NotFound { .. }));
    /// assert!(missing.to_string().contains("brew install no-such-plugin"));
    /// # }
    /// ```
    pub async fn run(&self) -> Result<ExecCredential, ExecError> {
        // The future may be dropped mid-run (a cancelled request): the group guard and
        // `kill_on_drop` end the plugin then too.
        self.validate()?;
        let command = self.command.clone();
        let info = ExecInfo {
            kind: "ExecCredential",
            api_version: self.api_version.as_str(),
            spec: ExecInfoSpec {
                cluster: self.cluster.as_ref().map(ClusterJson::of),
                interactive: false,
            },
        };
        let info = serde_json::to_string(&info).map_err(|e| ExecError::Spawn {
            command: command.clone(),
            reason: format!("cannot encode {EXEC_INFO_ENV}: {e}"),
        })?;
        let mut cmd = tokio::process::Command::new(&self.command);
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(EXEC_INFO_ENV, info)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // A process group of its own, so that a plugin killed at its timeout takes every
        // process it started with it (a shell script's `sleep`, a helper).
        #[cfg(unix)]
        cmd.process_group(0);
        let started = std::time::Instant::now();
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ExecError::NotFound {
                command: command.clone(),
                install_hint: self.install_hint.clone(),
            },
            _ => ExecError::Spawn {
                command: command.clone(),
                reason: sanitize_server_text_to(&e.to_string(), 200),
            },
        })?;
        // Until the plugin has been waited for, dropping this kills its whole group.
        let mut group = GroupGuard(child.id());
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let too_large = || ExecError::OutputTooLarge {
            command: command.clone(),
            limit: MAX_EXEC_OUTPUT_BYTES,
        };
        let work = async {
            let out = async {
                match stdout {
                    Some(s) => read_capped(s, MAX_EXEC_OUTPUT_BYTES)
                        .await
                        .map_err(|()| too_large()),
                    None => Ok(Vec::new()),
                }
            };
            let err = async {
                Ok(match stderr {
                    Some(s) => drain_capped(s, MAX_EXEC_STDERR_BYTES).await,
                    None => Vec::new(),
                })
            };
            // An oversized stdout ends both reads at once (the child is killed on drop).
            let (out, err) = tokio::try_join!(out, err)?;
            let status = child.wait().await.map_err(|e| ExecError::Spawn {
                command: command.clone(),
                reason: sanitize_server_text_to(&e.to_string(), 200),
            })?;
            Ok::<_, ExecError>((out, err, status))
        };
        let (out, err, status) =
            tokio::time::timeout(self.timeout, work)
                .await
                .map_err(|_| ExecError::Timeout {
                    command: command.clone(),
                    after: self.timeout,
                })??;
        // The plugin was waited for: its group id may be reused from now on.
        group.0 = None;
        tracing::debug!(
            command = %sanitize_server_text_to(&command, 200),
            success = status.success(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "ran exec credential plugin"
        );
        if !status.success() {
            // Debug level only: a failing plugin may print a refresh token or a password.
            tracing::debug!(
                command = %sanitize_server_text_to(&command, 200),
                status = %status,
                stderr = %stderr_tail(&err),
                "exec credential plugin failed; the end of its standard error"
            );
            return Err(ExecError::Failed {
                command,
                status: status.to_string(),
            });
        }
        drop(err);
        self.parse_output(&out)
    }

    /// Checks the plugin's stdout as client-go does and turns it into a credential.
    fn parse_output(&self, out: &[u8]) -> Result<ExecCredential, ExecError> {
        let bad = |problem: String| ExecError::BadOutput {
            command: self.command.clone(),
            problem,
        };
        // serde_json's messages can quote the input (a token): only the category and the
        // position are shown.
        let decoded: Output = serde_json::from_slice(out).map_err(|e| {
            bad(format!(
                "not an ExecCredential JSON object ({:?} error at line {}, column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })?;
        let want = self.api_version.as_str();
        if decoded.api_version != want || decoded.kind != "ExecCredential" {
            return Err(bad(format!(
                "apiVersion {} kind {}, expected {want} ExecCredential",
                quoted_if_plain(&decoded.api_version),
                quoted_if_plain(&decoded.kind)
            )));
        }
        let status = decoded
            .status
            .ok_or_else(|| bad("no status field".into()))?;
        let nonempty = |s: Option<String>| s.filter(|s| !s.trim().is_empty());
        let token = nonempty(status.token);
        let cert = nonempty(status.client_certificate_data);
        let key = nonempty(status.client_key_data);
        if token.is_none() && cert.is_none() && key.is_none() {
            return Err(bad(
                "neither a token nor a client certificate and key".into()
            ));
        }
        let client_identity = match (cert, key) {
            (Some(cert), Some(key)) => Some(check_identity(cert, key).map_err(bad)?),
            (None, None) => None,
            _ => {
                return Err(bad(
                    "a client certificate without its key, or a key without its certificate".into(),
                ));
            }
        };
        let token = match token {
            Some(t) => {
                let t = t.trim();
                if t.bytes().any(|b| b < 0x20 || b == 0x7f) {
                    return Err(bad("the token contains control characters".into()));
                }
                Some(SecretString::from(t.to_owned()))
            }
            None => None,
        };
        let expiration = match status.expiration_timestamp.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(ts) => {
                let t = Time::parse_rfc3339(ts)
                    .map_err(|_| bad("expirationTimestamp is not an RFC 3339 time".into()))?;
                let nanos = t.unix_nanos();
                Some(if nanos >= 0 {
                    UNIX_EPOCH + Duration::from_nanos(nanos as u64)
                } else {
                    UNIX_EPOCH
                })
            }
        };
        Ok(ExecCredential {
            token,
            client_identity,
            expiration,
        })
    }
}

/// A certificate and key from the plugin (PEM, as `clientCertificateData` and
/// `clientKeyData` are), parsed now so that an unusable one is the plugin's error.
fn check_identity(cert: String, key: String) -> Result<ClientIdentity, String> {
    use rustls_pki_types::pem::PemObject as _;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_slice_iter(cert.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| "clientCertificateData is not PEM".to_owned())?;
    if certs.is_empty() {
        return Err("clientCertificateData holds no PEM certificate".into());
    }
    let identity = ClientIdentity::from_pem(cert.into_bytes(), key.into_bytes());
    PrivateKeyDer::from_pem_slice(identity.key_pem.expose_secret())
        .map_err(|_| "clientKeyData holds no usable PEM private key".to_owned())?;
    Ok(identity)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::ExecApiVersion;

    fn parse(json: &str) -> Result<ExecCredential, ExecError> {
        ExecConfig::new("p")
            .with_api_version(ExecApiVersion::V1)
            .parse_output(json.as_bytes())
    }

    #[test]
    fn output_checks_never_quote_the_output() {
        let ok = parse(
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential",
               "status":{"token":"s3cr3t-tok","expirationTimestamp":"2030-01-01T00:00:00Z"}}"#,
        )
        .unwrap();
        assert_eq!(ok.token.unwrap().expose_secret(), "s3cr3t-tok");
        assert!(ok.expiration.unwrap() > SystemTime::now());
        for bad in [
            r#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"s3cr3t-tok"}}"#,
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"s3cr3t-tok x","status":{"token":"t"}}"#,
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"}"#,
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":["s3cr3t-tok"]}}"#,
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"s3cr3t-tok","expirationTimestamp":"s3cr3t-tok"}}"#,
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientKeyData":"s3cr3t-tok"}}"#,
            r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}}"#,
            r#"s3cr3t-tok"#,
            "",
        ] {
            let e = parse(bad).unwrap_err();
            let text = format!("{e} {e:?}");
            assert!(matches!(e, ExecError::BadOutput { .. }), "{text}");
            assert!(!text.contains("s3cr3t"), "{text}");
        }
    }

    #[test]
    fn exec_info_is_what_client_go_sends() {
        let cluster = ExecCluster {
            server: "https://k:6443".into(),
            certificate_authority_data: Some(b"PEM".to_vec()),
            config: Some(serde_json::json!({"audience": "x"})),
            ..Default::default()
        };
        let info = ExecInfo {
            kind: "ExecCredential",
            api_version: "client.authentication.k8s.io/v1",
            spec: ExecInfoSpec {
                cluster: Some(ClusterJson::of(&cluster)),
                interactive: false,
            },
        };
        assert_eq!(
            serde_json::to_string(&info).unwrap(),
            r#"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","spec":{"cluster":{"server":"https://k:6443","certificate-authority-data":"UEVN","config":{"audience":"x"}},"interactive":false}}"#
        );
    }

    #[test]
    fn stderr_tail_is_short_and_escaped() {
        let long = format!("{}\x1b[31mend\n", "x".repeat(2000));
        let t = stderr_tail(long.as_bytes());
        assert!(
            t.ends_with("end") && t.contains("\\u{1b}") && t.len() < 700,
            "{t}"
        );
    }
}
