//! The files and data a configuration names, read bounded: capped file reads, PEM
//! certificates, base64.

use std::io::Read as _;
use std::path::Path;

use base64::Engine as _;

use super::ConfigError;
use kevents_core::status::sanitize_server_text_to;

/// Reads at most `limit` bytes of `path`; a longer (or endless) file is
/// [`ConfigError::TooLarge`] once `limit + 1` bytes were read.
pub(crate) fn read_capped(
    what: &'static str,
    path: &Path,
    limit: u64,
) -> Result<Vec<u8>, ConfigError> {
    let read = |source| ConfigError::Read {
        what,
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read)?;
    let mut buf = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut buf)
        .map_err(read)?;
    if buf.len() as u64 > limit {
        return Err(ConfigError::TooLarge {
            what,
            path: path.to_owned(),
            limit,
        });
    }
    Ok(buf)
}

/// Parses every `CERTIFICATE` block of a PEM bundle into DER.
pub(crate) fn pem_certs(pem: &[u8]) -> Result<Vec<Vec<u8>>, ConfigError> {
    use rustls_pki_types::pem::PemObject as _;
    let certs = rustls_pki_types::CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            ConfigError::Tls(format!(
                "bad PEM certificate: {}",
                sanitize_server_text_to(&e.to_string(), 200)
            ))
        })?;
    if certs.is_empty() {
        return Err(ConfigError::Tls("no PEM certificate found".into()));
    }
    Ok(certs)
}

pub(crate) fn decode_b64(what: &'static str, data: &[u8]) -> Result<Vec<u8>, ConfigError> {
    let trimmed: Vec<u8> = data
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(trimmed)
        .map_err(|_| ConfigError::Base64(what))
}
