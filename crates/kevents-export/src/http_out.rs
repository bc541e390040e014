//! [`HttpOptions`]: what an HTTP sink ([`crate::Webhook`], [`crate::Otlp`]) sends with every
//! request (headers, secret or not) and how it trusts the server (extra CA certificates, a
//! client certificate), and the redaction of those secrets from every message.

use std::sync::Arc;
use std::time::Duration;

use crate::ExportError;

/// The largest error body read from a destination (the rest is not read).
pub(crate) const MAX_ERROR_BODY: usize = 64 << 10;

/// Options of an HTTP sink: extra headers (e.g. `Authorization`), TLS trust and a client
/// certificate, the request timeout. Header values are secrets: they are never shown (not in
/// `Debug`, errors, or logs); a server that echoes one has it replaced with `<redacted>`.
///
/// ```
/// let mut o = kevents_export::HttpOptions::default();
/// o.header("Authorization", "Bearer s3cret").unwrap();
/// assert!(!format!("{o:?}").contains("s3cret"));
/// assert_eq!(o.redact("bad token s3cret"), "bad token <redacted>");
/// assert!(o.header("bad name", "v").is_err());
/// ```
#[derive(Clone)]
pub struct HttpOptions {
    pub(crate) headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    pub(crate) secrets: Vec<String>,
    /// CA certificates (PEM) trusted besides the system's.
    pub ca_pem: Vec<Vec<u8>>,
    /// A client certificate chain and its private key (PEM), for servers that verify clients.
    pub client_identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The deadline of one request (connect, send, answer).
    pub timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            headers: Vec::new(),
            secrets: Vec::new(),
            ca_pem: Vec::new(),
            client_identity: None,
            timeout: Duration::from_secs(10),
        }
    }
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpOptions")
            .field("headers", &names)
            .field("ca_pem", &self.ca_pem.len())
            .field("client_identity", &self.client_identity.is_some())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl HttpOptions {
    /// Adds a header sent with every request; its value is kept secret. A name or value
    /// HTTP does not allow is [`ExportError::Config`] (naming the header, not its value).
    pub fn header(&mut self, name: &str, value: &str) -> Result<(), ExportError> {
        let n = reqwest::header::HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| ExportError::Config(format!("{name:?} is not an HTTP header name")))?;
        let mut v = reqwest::header::HeaderValue::from_str(value.trim()).map_err(|_| {
            ExportError::Config(format!("the value of the header {n} is not a header value"))
        })?;
        v.set_sensitive(true);
        let secret = value.trim().to_owned();
        if secret.len() >= 4 {
            // The whole value and, for `Scheme credentials`, the credentials alone.
            if let Some((_, cred)) = secret.split_once(' ')
                && cred.trim().len() >= 4
            {
                self.secrets.push(cred.trim().to_owned());
            }
            self.secrets.push(secret);
        }
        self.headers.push((n, v));
        Ok(())
    }

    /// The names of the headers set (never their values).
    pub fn header_names(&self) -> Vec<String> {
        self.headers.iter().map(|(n, _)| n.to_string()).collect()
    }

    /// `text` with every header value replaced by `<redacted>`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        let mut secrets: Vec<&String> = self.secrets.iter().collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        for s in secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "<redacted>");
            }
        }
        out
    }

    pub(crate) fn headers(&self) -> &[(reqwest::header::HeaderName, reqwest::header::HeaderValue)] {
        &self.headers
    }

    /// A reqwest client for `url`: HTTPS verified against the system's roots and
    /// [`HttpOptions::ca_pem`], the client certificate if any, [`HttpOptions::timeout`].
    pub(crate) fn client(&self, https: bool) -> Result<reqwest::Client, ExportError> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let config = |e: &dyn std::fmt::Display| ExportError::Config(e.to_string());
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        if https {
            let native = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(native.certs);
        }
        for pem in &self.ca_pem {
            let mut any = false;
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| config(&format!("a CA file: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| config(&format!("a CA certificate: {e}")))?;
                any = true;
            }
            if !any {
                return Err(ExportError::Config("a CA file holds no certificate".into()));
            }
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| config(&e))?
            .with_root_certificates(roots);
        let tls = match &self.client_identity {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| config(&format!("the client certificate: {e}")))?;
                if chain.is_empty() {
                    return Err(ExportError::Config(
                        "the client certificate file holds no certificate".into(),
                    ));
                }
                // The key's own parse error could quote it: never shown.
                let key = PrivateKeyDer::from_pem_slice(key).map_err(|_| {
                    ExportError::Config("the client key file holds no private key".into())
                })?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| config(&format!("the client certificate and key: {e}")))?
            }
        };
        reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(self.timeout)
            .build()
            .map_err(|e| config(&e))
    }
}

/// `url` as it may be shown: `scheme://host:port/path` (no userinfo, query or fragment).
pub(crate) fn shown(url: &reqwest::Url) -> String {
    format!(
        "{}://{}:{}{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(0),
        url.path()
    )
}

/// Parses an `http`/`https` URL for `what`, refusing credentials in it (they belong in a
/// header, from a file or the environment).
pub(crate) fn parse_url(what: &str, url: &str) -> Result<reqwest::Url, ExportError> {
    let parsed =
        reqwest::Url::parse(url).map_err(|e| ExportError::Config(format!("{what} URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(ExportError::Config(format!(
            "a {what} URL is http or https, not {}",
            parsed.scheme()
        )));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(ExportError::Config(format!(
            "a {what} URL carries no credentials: send them in a header (from a file or the environment)"
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(ExportError::Config(format!("a {what} URL names a host")));
    }
    Ok(parsed)
}

/// Reads at most `cap` bytes of an answer's body (the rest is dropped unread).
pub(crate) async fn bounded_body(mut resp: reqwest::Response, cap: usize) -> Vec<u8> {
    let mut body = Vec::new();
    while body.len() < cap {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                let room = cap - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    body
}
