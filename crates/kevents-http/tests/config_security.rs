//! Configuration (kubeconfig, token files, TLS) and the security guarantees: credentials
//! never appear in `Debug` output, error messages or logs (captured at TRACE level for every
//! crate, reqwest/hyper/rustls included).

mod common;

use common::{log_text, logs};
use std::io::Write as _;
use std::time::Duration;

use kevents_core::{Event, EventSink, SinkError};
use kevents_http::{ClientIdentity, ConfigError, HttpConfig, HttpSink};
use kevents_sim::{SimConfig, Simulator};

const KEY_MARKER: &str = "MIIEvQ-not-a-real-key-but-secret";

fn event(name: &str) -> Event {
    let mut e = Event::default();
    e.metadata.name = name.into();
    e.metadata.namespace = "default".into();
    e.involved_object.namespace = "default".into();
    e.count = 1;
    e
}

/// A configuration for a TLS simulator, trusting its certificate.
fn trusted(sim: &kevents_sim::SimHandle) -> Result<HttpConfig, ConfigError> {
    HttpConfig::new(&sim.url())?.with_ca_pem(sim.ca_pem().unwrap_or_default().as_bytes())
}

fn self_signed() -> (String, String) {
    let c = rcgen::generate_simple_self_signed(vec!["client".to_owned()]).unwrap();
    (c.cert.pem(), c.signing_key.serialize_pem())
}

#[tokio::test]
async fn tokens_and_keys_never_appear_in_debug_errors_or_logs() {
    logs();
    let sim = Simulator::start(SimConfig::like_apiserver()).await.unwrap();
    let admin = sim.admin_token().unwrap().to_owned();
    let nobody = sim.nobody_token().unwrap().to_owned();
    let (cert, key) = self_signed();

    let config = trusted(&sim)
        .unwrap()
        .with_token(admin.clone())
        .with_client_identity(ClientIdentity::from_pem(
            cert.into_bytes(),
            key.clone().into_bytes(),
        ));
    let sink = HttpSink::new(config.clone()).unwrap();
    let nobody_sink = HttpSink::new(trusted(&sim).unwrap().with_token(nobody.clone())).unwrap();
    let wrong = HttpSink::new(trusted(&sim).unwrap().with_token("wrong-token-value-123")).unwrap();
    let basic = trusted(&sim).unwrap();
    let basic = HttpConfig {
        auth: kevents_http::Auth::Basic {
            username: "u".into(),
            password: "basic-password-456".to_owned().into(),
        },
        ..basic
    };

    // Requests that succeed, are refused, and fail at the transport level.
    sink.create(&event("sec.1")).await.unwrap();
    let mut again = event("sec.1");
    again.count = 2;
    sink.patch(&again, br#"{"count":2}"#).await.unwrap();
    let forbidden = nobody_sink.create(&event("sec.2")).await.unwrap_err();
    assert_eq!(forbidden.code(), Some(403));
    let unauthorized = wrong.create(&event("sec.3")).await.unwrap_err();
    assert_eq!(unauthorized.code(), Some(401));
    let url = sim.url();
    sim.shutdown().await;
    let transport = sink.create(&event("sec.4")).await.unwrap_err();
    assert!(
        matches!(transport, SinkError::Transport(_)),
        "{transport:?}"
    );
    let _ = url;

    let texts = [
        format!("{config:?}"),
        format!("{sink:?}"),
        format!("{basic:?}"),
        format!("{:?}", basic.auth),
        format!("{forbidden} {forbidden:?}"),
        format!("{unauthorized} {unauthorized:?}"),
        format!("{transport} {transport:?}"),
        log_text(),
    ];
    let key_body = key.lines().nth(1).unwrap_or(KEY_MARKER).to_owned();
    for text in &texts {
        for secret in [
            admin.as_str(),
            nobody.as_str(),
            "wrong-token-value-123",
            "basic-password-456",
            key_body.as_str(),
            "PRIVATE KEY",
        ] {
            assert!(
                !text.contains(secret),
                "secret {secret:?} leaked in:\n{text}"
            );
        }
    }
    assert!(
        log_text().contains("apiserver request"),
        "the capture works: {}",
        log_text()
    );
}

#[tokio::test]
async fn token_file_is_reread_when_it_rotates() {
    let sim = Simulator::start(SimConfig::like_apiserver()).await.unwrap();
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "{}", sim.nobody_token().unwrap()).unwrap();
    let sink = HttpSink::new(
        trusted(&sim)
            .unwrap()
            .with_token_file(file.path(), Duration::from_secs(3600)),
    )
    .unwrap();
    assert_eq!(
        sink.create(&event("rot.1")).await.unwrap_err().code(),
        Some(403)
    );
    // The kubelet rewrites the projected token: the changed file is read again even though
    // the refresh interval has not passed.
    std::fs::write(file.path(), format!("{}\n", sim.admin_token().unwrap())).unwrap();
    sink.create(&event("rot.1")).await.unwrap();
    // A revoked token (401) makes the sink read the file at once.
    std::fs::write(file.path(), "revoked\n").unwrap();
    assert_eq!(
        sink.create(&event("rot.2")).await.unwrap_err().code(),
        Some(401)
    );
    std::fs::write(file.path(), sim.admin_token().unwrap()).unwrap();
    sink.create(&event("rot.2")).await.unwrap();
    // A missing file before any successful read is a retryable error.
    let missing = HttpSink::new(
        trusted(&sim)
            .unwrap()
            .with_token_file("/nonexistent/token", Duration::from_secs(60)),
    )
    .unwrap();
    let err = missing.create(&event("rot.3")).await.unwrap_err();
    assert!(matches!(err, SinkError::Transport(_)), "{err:?}");
}

#[tokio::test]
async fn tls_verification_is_on_by_default() {
    let sim = Simulator::start(SimConfig {
        tls: true,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let ca = sim.ca_pem().unwrap().as_bytes().to_vec();
    assert!(sim.url().starts_with("https://127.0.0.1:"));

    // Trusted CA: works (over HTTP/2 or HTTP/1.1, whatever ALPN picks).
    let trusted = HttpSink::new(
        HttpConfig::new(&sim.url())
            .unwrap()
            .with_ca_pem(&ca)
            .unwrap(),
    )
    .unwrap();
    trusted.create(&event("tls.1")).await.unwrap();

    // System roots only: the self-signed certificate is refused.
    let untrusted = HttpSink::new(HttpConfig::new(&sim.url()).unwrap());
    if let Ok(untrusted) = untrusted {
        let err = untrusted.create(&event("tls.2")).await.unwrap_err();
        assert!(matches!(err, SinkError::Transport(_)), "{err:?}");
    }

    // insecure-skip-tls-verify accepts it.
    let insecure = HttpSink::new(
        HttpConfig::new(&sim.url())
            .unwrap()
            .with_insecure_skip_tls_verify(true),
    )
    .unwrap();
    insecure.create(&event("tls.3")).await.unwrap();

    // tls-server-name: checked against that name instead of the URL's host.
    let mut named = HttpConfig::new(&sim.url())
        .unwrap()
        .with_ca_pem(&ca)
        .unwrap();
    named.tls_server_name = Some("localhost".into());
    HttpSink::new(named.clone())
        .unwrap()
        .create(&event("tls.4"))
        .await
        .unwrap();
    named.tls_server_name = Some("wrong.example".into());
    let err = HttpSink::new(named)
        .unwrap()
        .create(&event("tls.5"))
        .await
        .unwrap_err();
    assert!(matches!(err, SinkError::Transport(_)), "{err:?}");

    // The kubeconfig the simulator writes carries the CA as certificate-authority-data.
    let from_kubeconfig = HttpConfig::from_kubeconfig_yaml(&sim.kubeconfig(None, "default"), None)
        .await
        .unwrap();
    HttpSink::new(from_kubeconfig)
        .unwrap()
        .create(&event("tls.6"))
        .await
        .unwrap();
    assert_eq!(sim.events().len(), 4);
}

#[tokio::test]
async fn kubeconfig_files_and_contexts() {
    let sim = Simulator::start(SimConfig::like_apiserver()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token_path = dir.path().join("token");
    std::fs::write(&token_path, sim.admin_token().unwrap()).unwrap();
    std::fs::write(dir.path().join("ca.crt"), sim.ca_pem().unwrap()).unwrap();
    let yaml = format!(
        r#"apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster: {{server: "{url}", certificate-authority: ca.crt}}
users:
- name: admin
  user: {{tokenFile: token}}
- name: nobody
  user: {{token: "{nobody}"}}
- name: plugin
  user:
    exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/false}}
- name: oidc
  user:
    auth-provider: {{name: oidc, config: {{id-token: s3cr3t-id-token}}}}
contexts:
- name: admin
  context: {{cluster: sim, user: admin, namespace: team-a}}
- name: nobody
  context: {{cluster: sim, user: nobody}}
- name: plugin
  context: {{cluster: sim, user: plugin}}
- name: oidc
  context: {{cluster: sim, user: oidc}}
current-context: admin
"#,
        url = sim.url(),
        nobody = sim.nobody_token().unwrap()
    );
    let path = dir.path().join("config");
    std::fs::write(&path, yaml).unwrap();

    let admin = HttpConfig::from_kubeconfig(Some(&path), None)
        .await
        .unwrap();
    assert_eq!(admin.default_namespace, "team-a");
    assert!(
        matches!(&admin.auth, kevents_http::Auth::BearerFile { path, .. } if path == &token_path)
    );
    HttpSink::new(admin)
        .unwrap()
        .create(&event("kc.1"))
        .await
        .unwrap();

    let nobody = HttpConfig::from_kubeconfig(Some(&path), Some("nobody"))
        .await
        .unwrap();
    assert_eq!(nobody.default_namespace, "default");
    let err = HttpSink::new(nobody)
        .unwrap()
        .create(&event("kc.2"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(403));

    // client.authentication.k8s.io/v1 requires interactiveMode, as in client-go.
    let plugin = HttpConfig::from_kubeconfig(Some(&path), Some("plugin")).await;
    assert!(
        matches!(
            plugin,
            Err(ConfigError::Exec {
                source: kevents_http::ExecError::MissingInteractiveMode,
                ..
            })
        ),
        "{plugin:?}"
    );
    // auth-provider: a typed error that names exec plugins as the replacement.
    let oidc = HttpConfig::from_kubeconfig(Some(&path), Some("oidc"))
        .await
        .unwrap_err();
    let text = format!("{oidc} {oidc:?}");
    assert!(
        matches!(&oidc, ConfigError::AuthProvider { name, .. } if name == "oidc"),
        "{text}"
    );
    assert!(
        text.contains("exec credential plugin") && text.contains("users[\"oidc\"]"),
        "{text}"
    );
    assert!(!text.contains("s3cr3t"), "{text}");
    let unknown = HttpConfig::from_kubeconfig(Some(&path), Some("nope")).await;
    assert!(
        matches!(unknown, Err(ConfigError::Kubeconfig { .. })),
        "{unknown:?}"
    );
}

#[test]
fn bad_client_key_is_refused_without_echoing_it() {
    let (cert, _) = self_signed();
    let key = format!("-----BEGIN PRIVATE KEY-----\n{KEY_MARKER}\n-----END PRIVATE KEY-----\n");
    let err = HttpSink::new(
        HttpConfig::new("https://127.0.0.1:6443")
            .unwrap()
            .with_insecure_skip_tls_verify(true)
            .with_client_identity(ClientIdentity::from_pem(
                cert.into_bytes(),
                key.into_bytes(),
            )),
    )
    .unwrap_err();
    assert!(matches!(err, ConfigError::Tls(_)), "{err:?}");
    assert!(!format!("{err} {err:?}").contains(KEY_MARKER));
    // A valid pair is accepted.
    let (cert, key) = self_signed();
    HttpSink::new(
        HttpConfig::new("https://127.0.0.1:6443")
            .unwrap()
            .with_insecure_skip_tls_verify(true)
            .with_client_identity(ClientIdentity::from_pem(
                cert.into_bytes(),
                key.into_bytes(),
            )),
    )
    .unwrap();
}

#[tokio::test]
async fn discovery_and_version() {
    let plain = Simulator::start(SimConfig::default()).await.unwrap();
    let sink = HttpSink::new(HttpConfig::new(&plain.url()).unwrap()).unwrap();
    assert!(!sink.requests().events_v1_served().await.unwrap());
    assert_eq!(sink.server_version().await.unwrap().git_version, "v1.20.2");
    let served = Simulator::start(SimConfig {
        events_v1_served: true,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let sink = HttpSink::new(HttpConfig::new(&served.url()).unwrap()).unwrap();
    assert!(sink.requests().events_v1_served().await.unwrap());
}

#[tokio::test]
async fn url_path_prefix_and_escaping() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let sink = HttpSink::new(HttpConfig::new(&sim.url()).unwrap()).unwrap();
    // A name with characters that need escaping reaches the server intact (and is refused
    // by validation there, exactly as the real apiserver refuses it).
    let err = sink.create(&event("a/b")).await.unwrap_err();
    assert_eq!(err.code(), Some(422));
    // A name put into the URL path must be a DNS-1123 subdomain (issue 27): one that would
    // need escaping, a dot segment or an empty name is refused before anything is sent.
    let before = sim.stats().requests;
    for name in ["x?y#z", "..", ".", "", "a/b", "a%2Fb"] {
        let mut patch_target = event(name);
        patch_target.count = 2;
        let err = sink.patch(&patch_target, b"{}").await.unwrap_err();
        assert!(matches!(err, SinkError::Construction(_)), "{name}: {err:?}");
    }
    let mut elsewhere = event("ok.1");
    elsewhere.metadata.namespace = "..".into();
    let err = sink.patch(&elsewhere, b"{}").await.unwrap_err();
    assert!(matches!(err, SinkError::Construction(_)), "{err:?}");
    assert!(sink.requests().get_event("default", "..").await.is_err());
    assert!(sink.requests().delete_event("..", "x").await.is_err());
    assert_eq!(sim.stats().requests, before, "nothing was sent");
}
