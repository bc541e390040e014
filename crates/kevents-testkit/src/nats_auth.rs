//! Authentication set-ups for a test's `nats-server` ([`crate::nats::NatsServer::start_with`]),
//! made here the way `nsc` and a CA would make them, so that a test needs no other tool:
//!
//! - [`operator`]: operator mode with a memory resolver, a system account, one account with
//!   JetStream enabled, and a user's `.creds` file (its JWT and NKey seed), the JWTs signed with Ed25519 NKeys
//!   as nats-io/jwt v2 signs them;
//! - [`nkey_user`]: a user NKey (its public key for an `authorization` block, its seed);
//! - [`tls_files`]: a CA, a server certificate for `127.0.0.1`, and a client certificate, for
//!   a `tls { verify: true }` block.
//!
//! ```no_run
//! let dir = tempfile::tempdir().unwrap();
//! let op = kevents_testkit::nats_auth::operator(dir.path()).expect("operator");
//! let nats = kevents_testkit::nats::NatsServer::start_with(&op.server_config).expect("starts");
//! // then: kevents export --nats <url> --nats-creds <op.creds_file>
//! # drop(nats);
//! ```

use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::nats::NatsError;

fn failed(what: &str, e: impl std::fmt::Display) -> NatsError {
    NatsError::Io {
        what: what.to_owned(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// A JWT of `claims`, signed by `issuer` (nats-io/jwt v2's encoding: header
/// `{"typ":"JWT","alg":"ed25519-nkey"}`, base64url without padding, Ed25519 signature of
/// `header.claims`).
fn jwt(issuer: &nkeys::KeyPair, mut claims: Value) -> Result<String, NatsError> {
    let header = URL_SAFE_NO_PAD.encode(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    claims["iss"] = Value::String(issuer.public_key());
    claims["iat"] = json!(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    );
    // The server does not check the id; nsc writes a hash of the claims, a unique one does.
    claims["jti"] = Value::String(format!(
        "KEVENTS{}",
        claims["sub"]
            .as_str()
            .unwrap_or("")
            .get(1..20)
            .unwrap_or("")
    ));
    let body = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signing_input = format!("{header}.{body}");
    let signature = issuer
        .sign(signing_input.as_bytes())
        .map_err(|e| failed("signing a JWT", e))?;
    Ok(format!(
        "{signing_input}.{}",
        URL_SAFE_NO_PAD.encode(signature)
    ))
}

/// Operator mode: the server's configuration and a user's credentials.
#[derive(Debug, Clone)]
pub struct Operator {
    /// The lines to append to the server's configuration (`operator`, `resolver: MEMORY`,
    /// the account's JWT preloaded).
    pub server_config: String,
    /// The user's `.creds` file (JWT and seed), as `nsc generate creds` writes it.
    pub creds_file: PathBuf,
    /// The user's NKey seed (`SU...`): a secret no output may show.
    pub user_seed: String,
    /// The user's JWT.
    pub user_jwt: String,
}

/// An operator, an account with unlimited JetStream, and a user of it, written under `dir`.
pub fn operator(dir: &Path) -> Result<Operator, NatsError> {
    let operator = nkeys::KeyPair::new_operator();
    let account = nkeys::KeyPair::new_account();
    let user = nkeys::KeyPair::new_user();
    // JetStream needs a system account for its internal subscriptions.
    let system = nkeys::KeyPair::new_account();
    let operator_jwt = jwt(
        &operator,
        json!({"sub": operator.public_key(), "name": "kevents-test-operator",
               "nats": {"type": "operator", "version": 2,
                        "system_account": system.public_key()}}),
    )?;
    let unlimited = json!({"subs": -1, "data": -1, "payload": -1, "imports": -1,
        "exports": -1, "wildcards": true, "conn": -1, "leaf": -1,
        "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1});
    let account_jwt = jwt(
        &operator,
        json!({"sub": account.public_key(), "name": "kevents-test-account",
               "nats": {"limits": unlimited, "default_permissions": {"pub": {}, "sub": {}},
                        "type": "account", "version": 2}}),
    )?;
    let system_jwt = jwt(
        &operator,
        json!({"sub": system.public_key(), "name": "SYS",
               "nats": {"limits": {"subs": -1, "data": -1, "payload": -1, "imports": -1,
                                   "exports": -1, "wildcards": true, "conn": -1, "leaf": -1},
                        "default_permissions": {"pub": {}, "sub": {}},
                        "type": "account", "version": 2}}),
    )?;
    let user_jwt = jwt(
        &account,
        json!({"sub": user.public_key(), "name": "kevents-test-user",
               "nats": {"pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1,
                        "type": "user", "version": 2}}),
    )?;
    let user_seed = user.seed().map_err(|e| failed("creating an NKey", e))?;
    let op_file = dir.join("operator.jwt");
    std::fs::write(&op_file, &operator_jwt).map_err(|e| failed("writing operator.jwt", e))?;
    let creds = format!(
        "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
         ************************* IMPORTANT *************************\n\
         NKEY Seed printed below can be used to sign and prove identity.\n\
         NKEYs are sensitive and should be treated as secrets.\n\n\
         -----BEGIN USER NKEY SEED-----\n{user_seed}\n------END USER NKEY SEED------\n\n\
         *************************************************************\n"
    );
    let creds_file = dir.join("user.creds");
    std::fs::write(&creds_file, creds).map_err(|e| failed("writing user.creds", e))?;
    let server_config = format!(
        "operator: {:?}\nsystem_account: {}\nresolver: MEMORY\n\
         resolver_preload: {{\n  {}: {:?}\n  {}: {:?}\n}}\n",
        op_file.display().to_string(),
        system.public_key(),
        account.public_key(),
        account_jwt,
        system.public_key(),
        system_jwt
    );
    Ok(Operator {
        server_config,
        creds_file,
        user_seed,
        user_jwt,
    })
}

/// A user NKey: (its public key `U...`, its seed `SU...`).
pub fn nkey_user() -> Result<(String, String), NatsError> {
    let user = nkeys::KeyPair::new_user();
    let seed = user.seed().map_err(|e| failed("creating an NKey", e))?;
    Ok((user.public_key(), seed))
}

/// PEM files for TLS with client verification, written under a directory.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA that signed both certificates.
    pub ca: PathBuf,
    /// The server's certificate (for `127.0.0.1` and `localhost`) and key.
    pub server_cert: PathBuf,
    /// The server's key.
    pub server_key: PathBuf,
    /// A client certificate signed by the CA.
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
}

impl TlsFiles {
    /// A server `tls` block that requires and verifies client certificates.
    pub fn server_config(&self) -> String {
        format!(
            "tls {{\n  cert_file: {:?}\n  key_file: {:?}\n  ca_file: {:?}\n  verify: true\n  timeout: 5\n}}\n",
            self.server_cert.display().to_string(),
            self.server_key.display().to_string(),
            self.ca.display().to_string()
        )
    }
}

/// A CA, a server certificate and a client certificate, written under `dir`.
pub fn tls_files(dir: &Path) -> Result<TlsFiles, NatsError> {
    let tls = |e: rcgen::Error| failed("making a certificate", e);
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kevents-test-nats-ca");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = rcgen::KeyPair::generate().map_err(tls)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let mut server =
        rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).map_err(tls)?;
    server.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = rcgen::KeyPair::generate().map_err(tls)?;
    let server_cert = server.signed_by(&server_key, &issuer).map_err(tls)?;
    let mut client = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
    client
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kevents-export");
    client.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = rcgen::KeyPair::generate().map_err(tls)?;
    let client_cert = client.signed_by(&client_key, &issuer).map_err(tls)?;
    let files = TlsFiles {
        ca: dir.join("ca.pem"),
        server_cert: dir.join("server.pem"),
        server_key: dir.join("server-key.pem"),
        client_cert: dir.join("client.pem"),
        client_key: dir.join("client-key.pem"),
    };
    for (path, text) in [
        (&files.ca, ca_cert.pem()),
        (&files.server_cert, server_cert.pem()),
        (&files.server_key, server_key.serialize_pem()),
        (&files.client_cert, client_cert.pem()),
        (&files.client_key, client_key.serialize_pem()),
    ] {
        std::fs::write(path, text).map_err(|e| failed("writing a PEM file", e))?;
    }
    Ok(files)
}
