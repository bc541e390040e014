//! The simulator's generated TLS material: a self-signed serving certificate for
//! `127.0.0.1` and `localhost` (its PEM is what clients trust), and a CA that signs client
//! certificates on request, so HTTPS and certificate authentication are tested without any
//! file on disk.

use std::sync::Arc;

use crate::error::SimError;
use crate::server;

/// The serving certificate (as PEM for clients, and as the acceptor that serves it) and the
/// client CA.
pub(crate) struct TlsMaterial {
    pub(crate) ca_pem: String,
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
    pub(crate) client_ca: Arc<rcgen::Issuer<'static, rcgen::KeyPair>>,
}

/// Generates the serving certificate and the client CA.
pub(crate) fn tls_material() -> Result<TlsMaterial, SimError> {
    let tls = |e: &dyn std::fmt::Display| SimError::Tls(e.to_string());
    // The CA of client certificates (SimHandle::client_certificate): asked for, not required.
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(|e| tls(&e))?;
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kevents-sim-client-ca");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = rcgen::KeyPair::generate().map_err(|e| tls(&e))?;
    let client_ca = Arc::new(rcgen::Issuer::new(ca_params, ca_key));
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .map_err(|e| tls(&e))?;
    let cert_der = certified.cert.der().clone();
    let key_der = rustls_pki_types::PrivateKeyDer::Pkcs8(
        rustls_pki_types::PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()),
    );
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let verifier = Arc::new(server::AnyClientCert(provider.clone()));
    let mut config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(&e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![cert_der], key_der)
        .map_err(|e| tls(&e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsMaterial {
        ca_pem: certified.cert.pem(),
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        client_ca,
    })
}
