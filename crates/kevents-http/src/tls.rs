//! The rustls client configuration, always with the `ring` crypto provider (see
//! `docs/dependencies.md`): CA roots, `insecure-skip-tls-verify`, `tls-server-name` and the
//! client certificate.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use secrecy::ExposeSecret;

use crate::config::{ConfigError, HttpConfig};

fn tls_err(e: impl std::fmt::Display) -> ConfigError {
    ConfigError::Tls(e.to_string())
}

/// Builds the rustls `ClientConfig` for `config`.
pub(crate) fn client_config(config: &HttpConfig) -> Result<rustls::ClientConfig, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(tls_err)?;

    let verifier: Arc<dyn ServerCertVerifier> = if config.insecure_skip_tls_verify {
        Arc::new(AcceptAnyCert(provider.clone()))
    } else {
        let mut roots = RootCertStore::empty();
        match &config.root_certs {
            Some(ders) => {
                let (added, _ignored) = roots.add_parsable_certificates(
                    ders.iter().map(|d| CertificateDer::from(d.clone())),
                );
                if added == 0 {
                    return Err(ConfigError::Tls(
                        "none of the configured CA certificates could be used".into(),
                    ));
                }
            }
            None if config.cluster_url.scheme() == "https" => {
                let native = rustls_native_certs::load_native_certs();
                let (added, _ignored) = roots.add_parsable_certificates(native.certs);
                if added == 0 {
                    return Err(ConfigError::Tls(
                        "no CA configured and no usable certificate in the system trust store"
                            .into(),
                    ));
                }
            }
            // Plain HTTP: the TLS configuration is never used, but must exist.
            None => {}
        }
        if roots.is_empty() {
            Arc::new(RejectAll)
        } else {
            WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                .build()
                .map_err(tls_err)?
        }
    };
    let verifier: Arc<dyn ServerCertVerifier> = match &config.tls_server_name {
        Some(name) => Arc::new(FixedServerName {
            inner: verifier,
            name: ServerName::try_from(name.clone())
                .map_err(|e| ConfigError::Tls(format!("tls-server-name {name:?}: {e}")))?,
        }),
        None => verifier,
    };
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut tls = match &config.client_identity {
        Some(identity) => {
            use rustls::pki_types::pem::PemObject as _;
            let certs = CertificateDer::pem_slice_iter(&identity.cert_pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ConfigError::Tls(format!("client certificate: {e}")))?;
            if certs.is_empty() {
                return Err(ConfigError::Tls(
                    "client certificate: no PEM certificate found".into(),
                ));
            }
            // The parse error of a key says nothing about its content.
            let key = PrivateKeyDer::from_pem_slice(identity.key_pem.expose_secret())
                .map_err(|_| ConfigError::Tls("client key: no usable PEM private key".into()))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| ConfigError::Tls(format!("client certificate and key: {e}")))?
        }
        None => builder.with_no_client_auth(),
    };
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tls)
}

/// `insecure-skip-tls-verify`: any certificate is accepted, handshake signatures are still
/// checked (so the connection is at least to the holder of the presented key).
#[derive(Debug)]
struct AcceptAnyCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Only used for plain-HTTP clusters, whose TLS configuration must never verify anything.
#[derive(Debug)]
struct RejectAll;

impl ServerCertVerifier for RejectAll {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Err(rustls::Error::General("no trusted CA configured".into()))
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("no trusted CA configured".into()))
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("no trusted CA configured".into()))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::ring::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `tls-server-name`: verifies the certificate against a fixed name instead of the URL host.
#[derive(Debug)]
struct FixedServerName {
    inner: Arc<dyn ServerCertVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for FixedServerName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
