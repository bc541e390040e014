//! `kevents export`'s HTTP sinks: `--otlp URL` (OTLP/HTTP logs) and `--webhook URL`, their
//! headers (secret values from files or the environment) and TLS, checked before anything
//! connects; [`Direct`], the sink a NATS-less export delivers to.

use std::path::{Path, PathBuf};

use clap::Args;
use kevents_export::{ExportError, ExportRecord, HttpOptions, Otlp, RecordSink, Webhook};

use crate::cluster::{Failure, FailureKind};
use crate::nats_conn::{env_secret, read_secret, remember};

#[derive(Args, Debug, Clone, Default)]
pub struct SinkArgs {
    /// Send every record as an OpenTelemetry log record (OTLP/HTTP, protobuf) to this
    /// endpoint (`/v1/logs` is appended): a Collector's OTLP receiver, Loki, Elasticsearch.
    #[arg(long, value_name = "URL")]
    pub otlp: Option<String>,
    /// A header sent to the OTLP endpoint, `NAME=VALUE` (repeatable; shown nowhere).
    #[arg(long, value_name = "NAME=VALUE", requires = "otlp")]
    pub otlp_header: Vec<String>,
    /// A header whose value is a file's content, `NAME=FILE` (repeatable; for secrets).
    #[arg(long, value_name = "NAME=FILE", requires = "otlp")]
    pub otlp_header_file: Vec<String>,
    /// A header whose value is an environment variable's, `NAME=VAR` (repeatable; for
    /// secrets).
    #[arg(long, value_name = "NAME=VAR", requires = "otlp")]
    pub otlp_header_env: Vec<String>,
    /// A CA certificate file (PEM) trusted for the OTLP endpoint besides the system's.
    #[arg(long, value_name = "FILE", requires = "otlp")]
    pub otlp_ca: Option<PathBuf>,
    /// A client certificate (PEM) for an OTLP endpoint that verifies clients.
    #[arg(long, value_name = "FILE", requires_all = ["otlp", "otlp_key"])]
    pub otlp_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "otlp_cert")]
    pub otlp_key: Option<PathBuf>,
    /// `POST` every record as JSON to this URL, with `Idempotency-Key: uid:count`.
    #[arg(long, value_name = "URL")]
    pub webhook: Option<String>,
    /// A header sent to the webhook, `NAME=VALUE` (repeatable; shown nowhere).
    #[arg(long, value_name = "NAME=VALUE", requires = "webhook")]
    pub webhook_header: Vec<String>,
    /// A header whose value is a file's content, `NAME=FILE` (repeatable; for secrets).
    #[arg(long, value_name = "NAME=FILE", requires = "webhook")]
    pub webhook_header_file: Vec<String>,
    /// A header whose value is an environment variable's, `NAME=VAR` (repeatable).
    #[arg(long, value_name = "NAME=VAR", requires = "webhook")]
    pub webhook_header_env: Vec<String>,
    /// A CA certificate file (PEM) trusted for the webhook besides the system's.
    #[arg(long, value_name = "FILE", requires = "webhook")]
    pub webhook_ca: Option<PathBuf>,
    /// A client certificate (PEM) for a webhook that verifies clients.
    #[arg(long, value_name = "FILE", requires_all = ["webhook", "webhook_key"])]
    pub webhook_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "webhook_cert")]
    pub webhook_key: Option<PathBuf>,
    /// Without NATS: the namespace of the ConfigMap that keeps the resume point (default:
    /// the service account's namespace in a pod, else `default`).
    #[arg(long, value_name = "NS")]
    pub resume_namespace: Option<String>,
    /// Without NATS: the ConfigMap that keeps the resume point.
    #[arg(long, value_name = "NAME", default_value = "kevents-export-resume")]
    pub resume_configmap: String,
}

fn usage(message: impl std::fmt::Display) -> anyhow::Error {
    Failure::new(FailureKind::Config, message).into()
}

/// Reads a PEM file (bounded, 1 MiB) for `flag`.
fn pem(flag: &str, path: &Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)
        .map_err(|e| usage(format!("{flag}: cannot read {}: {e}", path.display())))?;
    let mut bytes = Vec::new();
    file.take((1 << 20) + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| usage(format!("{flag}: cannot read {}: {e}", path.display())))?;
    if bytes.len() > 1 << 20 {
        return Err(usage(format!(
            "{flag}: {} is larger than 1 MiB",
            path.display()
        )));
    }
    Ok(bytes)
}

fn split<'a>(flag: &str, value: &'a str) -> anyhow::Result<(&'a str, &'a str)> {
    match value.split_once('=') {
        Some((name, rest)) if !name.trim().is_empty() => Ok((name.trim(), rest)),
        _ => Err(usage(format!(
            "{flag}: expected NAME=..., got a value without a name"
        ))),
    }
}

/// The headers and TLS of one sink (`prefix`: `otlp` or `webhook`), secrets remembered for
/// redaction.
#[allow(clippy::too_many_arguments)]
fn options(
    prefix: &str,
    literal: &[String],
    files: &[String],
    envs: &[String],
    ca: Option<&PathBuf>,
    cert: Option<&PathBuf>,
    key: Option<&PathBuf>,
) -> anyhow::Result<HttpOptions> {
    let mut o = HttpOptions::default();
    let mut add = |flag: &str, name: &str, value: &str| -> anyhow::Result<()> {
        remember(value);
        if let Some((_, cred)) = value.split_once(' ') {
            remember(cred.trim());
        }
        o.header(name, value)
            .map_err(|e| usage(format!("{flag}: {e}")))
    };
    for h in literal {
        let flag = format!("--{prefix}-header");
        let (name, value) = split(&flag, h)?;
        add(&flag, name, value)?;
    }
    for h in files {
        let flag = format!("--{prefix}-header-file");
        let (name, file) = split(&flag, h)?;
        let value = read_secret(&flag, Path::new(file))?;
        add(&flag, name, &value)?;
    }
    for h in envs {
        let flag = format!("--{prefix}-header-env");
        let (name, var) = split(&flag, h)?;
        let value = env_secret(var)?
            .ok_or_else(|| usage(format!("{flag}: the variable {var} is not set")))?;
        add(&flag, name, &value)?;
    }
    if let Some(ca) = ca {
        o.ca_pem.push(pem(&format!("--{prefix}-ca"), ca)?);
    }
    if let (Some(cert), Some(key)) = (cert, key) {
        let key_pem = pem(&format!("--{prefix}-key"), key)?;
        o.client_identity = Some((pem(&format!("--{prefix}-cert"), cert)?, key_pem));
    }
    Ok(o)
}

/// The sinks asked for, built (URLs, headers and TLS checked; nothing connected).
pub struct Sinks {
    pub otlp: Option<Otlp>,
    pub webhook: Option<Webhook>,
}

impl SinkArgs {
    pub fn build(&self) -> anyhow::Result<Sinks> {
        let otlp = match &self.otlp {
            None => None,
            Some(url) => {
                let o = options(
                    "otlp",
                    &self.otlp_header,
                    &self.otlp_header_file,
                    &self.otlp_header_env,
                    self.otlp_ca.as_ref(),
                    self.otlp_cert.as_ref(),
                    self.otlp_key.as_ref(),
                )?;
                Some(Otlp::new(url, o).map_err(|e| usage(format!("--otlp: {}", config(e))))?)
            }
        };
        let webhook = match &self.webhook {
            None => None,
            Some(url) => {
                let o = options(
                    "webhook",
                    &self.webhook_header,
                    &self.webhook_header_file,
                    &self.webhook_header_env,
                    self.webhook_ca.as_ref(),
                    self.webhook_cert.as_ref(),
                    self.webhook_key.as_ref(),
                )?;
                Some(
                    Webhook::with_options(url, o)
                        .map_err(|e| usage(format!("--webhook: {}", config(e))))?,
                )
            }
        };
        Ok(Sinks { otlp, webhook })
    }

    /// The resume ConfigMap's namespace.
    pub fn resume_namespace(&self) -> String {
        if let Some(ns) = &self.resume_namespace {
            return ns.clone();
        }
        std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
            .ok()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".to_owned())
    }
}

fn config(e: ExportError) -> String {
    match e {
        ExportError::Config(t) | ExportError::Sink(t) => t,
        e => e.to_string(),
    }
}

/// The sink of an export without NATS: records go straight to the OTLP endpoint or the
/// webhook (the resume point is in a ConfigMap).
#[derive(Clone)]
pub enum Direct {
    Otlp(Otlp),
    Webhook(Webhook),
}

impl Direct {
    pub fn shown(&self) -> String {
        match self {
            Direct::Otlp(o) => format!("OTLP {}", o.shown()),
            Direct::Webhook(w) => format!("webhook {}", w.shown()),
        }
    }
}

impl RecordSink for Direct {
    async fn deliver(&mut self, record: &ExportRecord) -> Result<(), ExportError> {
        match self {
            Direct::Otlp(o) => o.deliver(record).await,
            Direct::Webhook(w) => w.deliver(record).await,
        }
    }
}
