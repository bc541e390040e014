//! Hostile input and broken servers: bad kubeconfigs, credentials in URLs, endless local
//! files, endless lists, oversized echoes, server text with terminal escapes, credentials over
//! plain HTTP. Every test checks what a user sees (typed errors, their `Display` and `Debug`)
//! and that no secret appears there or in the logs (captured at TRACE level for every crate).

mod common;

use common::{log_text, logs};
use std::path::Path;
use std::time::Duration;

use kevents_core::status::sanitize_server_text;
use kevents_core::{Event, EventSink, SinkError, Stored, write_event};
use kevents_http::config::{
    DEFAULT_MAX_RESPONSE_BYTES, MAX_KUBECONFIG_BYTES, MAX_PEM_FILE_BYTES, MAX_TOKEN_FILE_BYTES,
};
use kevents_http::{ConfigError, HttpConfig, HttpSink, ListError};
use kevents_sim::{
    ErrorFault, FaultBody, Faults, ListFault, SimAuth, SimConfig, SimHandle, Simulator,
};

/// `Display` and `Debug` of a value.
fn shown(e: &(impl std::fmt::Display + std::fmt::Debug)) -> String {
    format!("{e}\n{e:?}")
}

/// None of `secrets` appears in `texts` or in the logs captured so far.
fn assert_no_secret(texts: &[String], secrets: &[&str]) {
    let logs = log_text();
    for text in texts.iter().chain([&logs]) {
        for secret in secrets {
            assert!(
                !text.contains(secret),
                "secret {secret:?} leaked in:\n{text}"
            );
        }
    }
}

fn event(name: &str) -> Event {
    let mut e = Event::default();
    e.metadata.name = name.into();
    e.metadata.namespace = "default".into();
    e.involved_object.namespace = "default".into();
    e.involved_object.kind = "Pod".into();
    e.involved_object.name = "web".into();
    e.reason = "BackOff".into();
    e.message = "restarting".into();
    e.count = 1;
    e
}

fn kubeconfig(cluster: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n{cluster}users:\n- name: u\n  user:\n{user}contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n"
    )
}

async fn plain_sim() -> (SimHandle, HttpSink) {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let sink = HttpSink::new(HttpConfig::new(&sim.url()).unwrap()).unwrap();
    (sim, sink)
}

// --- kubeconfig syntax errors and URLs with credentials -------------------------------------

#[tokio::test]
async fn kubeconfig_syntax_errors_name_the_place_and_quote_nothing() {
    logs();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    let secret = "s3cr3t-token-in-a-broken-file";
    std::fs::write(
        &path,
        format!("apiVersion: v1\nusers:\n- name: u\n  user:\n    token: {secret}\n   bad: [\n"),
    )
    .unwrap();
    let err = HttpConfig::from_kubeconfig(Some(&path), None)
        .await
        .unwrap_err();
    let ConfigError::KubeconfigSyntax {
        file, line, column, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        (file.as_str(), *line, *column),
        (path.to_str().unwrap(), 6, 4)
    );
    assert_eq!(
        err.to_string(),
        format!(
            "kubeconfig {}, line 6, column 4: while parsing a block mapping, did not find expected key",
            path.display()
        )
    );

    // A token where a mapping belongs, an unterminated quote, a bad scalar: the value is
    // never quoted back.
    let mut texts = vec![shown(&err)];
    for yaml in [
        format!("apiVersion: v1\nusers:\n- name: u\n  user: {secret}\n"),
        format!("apiVersion: v1\nusers:\n- name: u\n  user: {{token: \"{secret}\n"),
        format!(
            "apiVersion: v1\nclusters:\n- name: c\n  cluster: {{insecure-skip-tls-verify: {secret}}}\n"
        ),
        format!("apiVersion: v1\nusers: [{{name: u, user: {{token: [{secret}]}}}}]\n"),
    ] {
        let err = HttpConfig::from_kubeconfig_yaml(&yaml, None)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ConfigError::KubeconfigSyntax { file, line, .. }
                if file == "(kubeconfig text)" && *line > 1),
            "{err:?}"
        );
        texts.push(shown(&err));
    }
    assert_no_secret(&texts, &[secret, "s3cr3t"]);
}

#[tokio::test]
async fn server_urls_with_credentials_are_refused_and_never_shown() {
    logs();
    let mut texts = Vec::new();
    for server in [
        "https://admin:t0ken-in-url@k8s.example:6443",
        "https://t0ken-in-url@k8s.example",
        "https://admin:t0ken in-url@k8s.example/prefix",
    ] {
        let yaml = kubeconfig(&format!("    server: \"{server}\"\n"), "    {}\n");
        let err = HttpConfig::from_kubeconfig_yaml(&yaml, None)
            .await
            .unwrap_err();
        let ConfigError::CredentialsInUrl { origin, url } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(
            origin,
            "kubeconfig (kubeconfig text): clusters[\"c\"].cluster.server"
        );
        assert!(url.starts_with("https://***@k8s.example"), "{url}");
        texts.push(shown(&err));
        let err = HttpConfig::new(server).unwrap_err();
        assert!(
            matches!(err, ConfigError::CredentialsInUrl { .. }),
            "{err:?}"
        );
        texts.push(shown(&err));
    }
    assert!(
        texts[0].contains("put them in the user entry"),
        "{}",
        texts[0]
    );

    // Proxy credentials are for the proxy: accepted, never shown.
    let yaml = kubeconfig(
        "    server: https://k8s.example\n    proxy-url: http://proxy-user:pr0xy-pass@proxy:3128\n",
        "    token: t0ken-for-the-cluster\n",
    );
    let config = HttpConfig::from_kubeconfig_yaml(&yaml, None).await.unwrap();
    assert_eq!(
        config.proxy_url.as_ref().map(|u| u.password()),
        Some(Some("pr0xy-pass"))
    );
    let sink = HttpSink::new(config.clone()).unwrap();
    texts.push(format!("{config:?} {sink:?}"));
    assert_no_secret(&texts, &["t0ken", "pr0xy-pass", "admin:"]);
}

/// A proxy kevents cannot use is refused when the kubeconfig is loaded (a usage error, nothing
/// sent), not ignored (a direct connection past the proxy) nor failing at the first request.
#[tokio::test]
async fn a_proxy_url_of_an_unsupported_scheme_is_refused_at_load() {
    for (proxy, says) in [
        ("ftp://proxy:21", "proxy scheme \"ftp\" is not supported"),
        (
            "gopher://proxy:70",
            "proxy scheme \"gopher\" is not supported",
        ),
        ("socks5://proxy:1080", "SOCKS5 proxies are not"),
    ] {
        let yaml = kubeconfig(
            &format!("    server: https://k8s.example\n    proxy-url: {proxy}\n"),
            "    token: t0ken-for-the-cluster\n",
        );
        let err = HttpConfig::from_kubeconfig_yaml(&yaml, None)
            .await
            .unwrap_err();
        assert!(matches!(err, ConfigError::Url { .. }), "{proxy}: {err:?}");
        assert!(err.to_string().contains(says), "{proxy}: {err}");
        assert!(!err.to_string().contains("t0ken"));
        // Built by hand: refused by `validate` (and so by `HttpSink::new`).
        let mut config = HttpConfig::new("https://k8s.example").unwrap();
        config.proxy_url = Some(proxy.parse().unwrap());
        assert!(HttpSink::new(config).is_err(), "{proxy}");
    }
    let yaml = kubeconfig(
        "    server: https://k8s.example\n    proxy-url: https://proxy:3128\n",
        "    token: t\n",
    );
    assert!(HttpConfig::from_kubeconfig_yaml(&yaml, None).await.is_ok());
}

/// Credentials over plain HTTP are allowed to a loopback server only when nothing leaves the
/// machine: not through a proxy elsewhere.
#[test]
fn the_loopback_exemption_looks_at_the_proxy_too() {
    let local = HttpConfig::new("http://127.0.0.1:8080")
        .unwrap()
        .with_token("t")
        .with_credentials_over_loopback_http(true);
    assert!(HttpSink::new(local.clone()).is_ok());
    let mut through_proxy = local.clone();
    through_proxy.proxy_url = Some("http://proxy.example:3128".parse().unwrap());
    let err = HttpSink::new(through_proxy).unwrap_err();
    assert!(
        matches!(err, ConfigError::CredentialsOverHttp { .. }),
        "{err:?}"
    );
    let mut local_proxy = local;
    local_proxy.proxy_url = Some("http://127.0.0.1:3128".parse().unwrap());
    assert!(HttpSink::new(local_proxy).is_ok());
}

// --- endless lists ---------------------------------------------------------------------------

#[tokio::test]
async fn lists_read_every_page() {
    logs();
    let (sim, sink) = plain_sim().await;
    for i in 0..520 {
        sink.create(&event(&format!("page.{i:03}"))).await.unwrap();
    }
    let before = sim.stats().requests;
    let listed = sink.requests().list_events("default").await.unwrap();
    assert_eq!(listed.len(), 520);
    assert_eq!(sim.stats().requests - before, 3, "pages of 250");
    let names: std::collections::BTreeSet<_> =
        listed.iter().map(|e| e.metadata.name.clone()).collect();
    assert_eq!(names.len(), 520);
}

#[tokio::test]
async fn a_list_that_repeats_its_continue_token_ends_with_an_error() {
    logs();
    let (sim, sink) = plain_sim().await;
    for i in 0..3 {
        sink.create(&event(&format!("loop.{i}"))).await.unwrap();
    }
    sim.set_faults(Faults::endless_list(ListFault::RepeatContinue));
    let before = sim.stats().requests;
    let err = sink.requests().list_events("default").await.unwrap_err();
    assert!(
        matches!(err, ListError::RepeatedContinue { pages: 2, items: 6 }),
        "{err:?}"
    );
    assert_eq!(sim.stats().requests - before, 2);
    assert_eq!(
        err.to_string(),
        "event list: the server repeated a continue token after 2 pages (6 events): the list would never end"
    );
    // The same for events.k8s.io/v1 lists.
    let sim = Simulator::start(SimConfig {
        events_v1_served: true,
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let sink = HttpSink::new(HttpConfig::new(&sim.url()).unwrap()).unwrap();
    sim.set_faults(Faults::endless_list(ListFault::RepeatContinue));
    let err = sink
        .requests()
        .events_v1()
        .list_events("default")
        .await
        .unwrap_err();
    assert!(matches!(err, ListError::RepeatedContinue { .. }), "{err:?}");
}

#[tokio::test]
async fn endless_lists_stop_at_the_page_limit() {
    logs();
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let sink = HttpSink::new(
        HttpConfig::new(&sim.url())
            .unwrap()
            .with_list_limits(5, usize::MAX),
    )
    .unwrap();
    sink.create(&event("endless.1")).await.unwrap();
    sim.set_faults(Faults::endless_list(ListFault::EndlessContinue));
    let before = sim.stats().requests;
    let err = sink.requests().list_events("default").await.unwrap_err();
    assert!(
        matches!(err, ListError::TooManyPages { limit: 5, items: 5 }),
        "{err:?}"
    );
    assert_eq!(sim.stats().requests - before, 5);
}

#[tokio::test]
async fn endless_lists_stop_at_the_byte_limit() {
    logs();
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let sink = HttpSink::new(
        HttpConfig::new(&sim.url())
            .unwrap()
            .with_list_limits(usize::MAX, 64 * 1024),
    )
    .unwrap();
    let mut e = event("heavy.1");
    e.message = "m".repeat(10_000);
    sink.create(&e).await.unwrap();
    sim.set_faults(Faults::endless_list(ListFault::EndlessContinue));
    let err = sink.requests().list_events("default").await.unwrap_err();
    let ListError::TooLarge {
        limit,
        pages,
        items,
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(limit, 64 * 1024);
    // Each page is a bit more than 10 000 bytes: six fit, the seventh does not.
    assert_eq!((pages, items), (6, 6));
}

// --- answers over the size limit -------------------------------------------------------------

#[tokio::test]
async fn an_event_the_apiserver_accepts_has_an_echo_that_is_read() {
    logs();
    let (sim, sink) = plain_sim().await;
    let mut e = event("large.1");
    e.message = "x".repeat(1_100_000);
    let stored = sink
        .create(&e)
        .await
        .unwrap()
        .into_returned()
        .expect("the echo was read");
    assert!(!stored.metadata.resource_version.is_empty());
    assert_eq!(stored.message.len(), 1_100_000);
    assert_eq!(sim.stats().creates, 1);
}

#[tokio::test]
async fn a_2xx_over_the_limit_counts_as_stored_not_as_failed() {
    logs();
    let (sim, sink) = plain_sim().await;
    sim.set_faults(Faults {
        pad_success_to: DEFAULT_MAX_RESPONSE_BYTES + 1,
        ..Faults::none()
    });
    let mut e = event("echo.1");
    let out = write_event(&sink, &mut e, None).await;
    assert_eq!(out.result, Ok(Stored::AsSent));
    let stored = out.stored_event(&e).unwrap();
    assert_eq!(stored.metadata.name, "echo.1");
    assert!(stored.metadata.resource_version.is_empty(), "as sent");
    // A patch: the event as the patch makes it (the event the patch was made for).
    let mut again = event("echo.1");
    again.count = 2;
    let patch = br#"{"count":2}"#;
    let out = write_event(&sink, &mut again, Some(patch)).await;
    assert_eq!(out.result, Ok(Stored::AsSent));
    assert_eq!(out.stored_event(&again).unwrap().count, 2);
    assert_eq!(sim.event("default", "echo.1").unwrap().count, 2);
    let stats = sim.stats();
    assert_eq!((stats.creates, stats.patches, stats.requests), (1, 1, 2));
    assert!(log_text().contains("the event counts as stored"));
}

// --- server text with terminal escapes --------------------------------------------------------

fn assert_printable(text: &str) {
    assert!(
        !text.chars().any(|c| c.is_control() || c == '\u{202e}'),
        "raw control characters in {text:?}"
    );
}

#[tokio::test]
async fn server_text_reaches_errors_and_logs_escaped_and_bounded() {
    logs();
    let (sim, sink) = plain_sim().await;
    let hostile = format!(
        "\u{1b}[2J\u{1b}]0;pwned\u{7}\r\nlevel=ERROR fake log line\u{202e}\u{9b}31m{}",
        "y".repeat(20_000)
    );
    sim.set_faults(Faults::error_status(
        500,
        1,
        "Internal\u{1b}[31mError",
        &hostile,
    ));
    let err = sink.create(&event("esc.1")).await.unwrap_err();
    let SinkError::Status(status) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(status.code, 500);
    assert_eq!(status.reason, "Internal\\u{1b}[31mError");
    assert!(
        status.message.starts_with(
            "\\u{1b}[2J\\u{1b}]0;pwned\\u{7}\\r\\nlevel=ERROR fake log line\\u{202e}\\u{9b}31m"
        ),
        "{}",
        status.message
    );
    let text = err.to_string();
    assert_printable(&text);
    assert!(text.len() < 3000, "bounded: {} bytes", text.len());
    let cause = &status.details.as_ref().unwrap().causes[0];
    assert_printable(&cause.message);
    assert_printable(&cause.field);
    assert_printable(&cause.type_);

    // A proxy's plain-text answer with escapes: the excerpt is escaped.
    sim.set_faults(Faults {
        error: Some(ErrorFault {
            code: 502,
            retry_after: None,
            times: 1,
            body: FaultBody::Text("\u{1b}[31mbad gateway\r\n\u{1b}[0m".into()),
            headers: vec![],
        }),
        ..Faults::none()
    });
    let err = sink.create(&event("esc.2")).await.unwrap_err();
    let SinkError::Status(status) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(
        status.details.as_ref().unwrap().causes[0].message,
        "\\u{1b}[31mbad gateway\\r\\n\\u{1b}[0m"
    );
    // A 2xx that is no Event, its kind full of escapes, to a read (to a write it counts as
    // stored as sent, `an_undecodable_2xx_answer_to_a_write_counts_as_stored_as_sent`).
    sim.set_faults(Faults {
        error: Some(ErrorFault {
            code: 200,
            retry_after: None,
            times: 1,
            body: FaultBody::Json(r#"{"kind":"\u001b[2J\r\nEvil"}"#.into()),
            headers: vec![],
        }),
        ..Faults::none()
    });
    let err = sink
        .requests()
        .get_event("default", "esc.3")
        .await
        .unwrap_err();
    assert!(matches!(err, SinkError::UnexpectedObject(_)), "{err:?}");
    assert_printable(&err.to_string());
    // Nothing the server sent reached the logs raw.
    assert!(!log_text().contains('\u{1b}'), "ESC in the logs");
}

#[tokio::test]
async fn stored_messages_with_escapes_come_back_as_stored() {
    logs();
    // The simulator stores a message of the test's choosing (for the demo table's tests);
    // the client returns it as it is, and sanitize_server_text makes it printable.
    let (sim, sink) = plain_sim().await;
    let hostile = "line one\r\n\u{1b}[31mred\u{1b}[0m\tend";
    sim.set_faults(Faults {
        stored_message: Some(hostile.into()),
        ..Faults::none()
    });
    let stored = sink.create(&event("stored.1")).await.unwrap();
    assert_eq!(stored.returned().unwrap().message, hostile);
    assert_eq!(sim.event("default", "stored.1").unwrap().message, hostile);
    let listed = sink.requests().list_events("default").await.unwrap();
    assert_eq!(listed[0].message, hostile);
    assert_eq!(
        sanitize_server_text(&listed[0].message),
        "line one\\r\\n\\u{1b}[31mred\\u{1b}[0m\\tend"
    );
}

// --- credentials over plain HTTP, insecure with a CA ----------------------------------------

#[tokio::test]
async fn credentials_are_never_sent_over_plain_http() {
    logs();
    let sim = Simulator::start(SimConfig {
        auth: Some(SimAuth::random()),
        ..SimConfig::default()
    })
    .await
    .unwrap();
    let admin = sim.admin_token().unwrap().to_owned();
    let mut texts = Vec::new();
    let plain = HttpConfig::new(&sim.url()).unwrap();
    let basic = kevents_http::Auth::Basic {
        username: "u".into(),
        password: "basic-pa55word".to_owned().into(),
    };
    for config in [
        plain.clone().with_token(admin.clone()),
        plain
            .clone()
            .with_token_file("/nonexistent/token", Duration::from_secs(60)),
        HttpConfig {
            auth: basic,
            ..plain.clone()
        },
        HttpConfig::new("http://10.0.0.1:8080")
            .unwrap()
            .with_token(admin.clone())
            .with_credentials_over_loopback_http(true),
    ] {
        let err = HttpSink::new(config).unwrap_err();
        assert!(
            matches!(&err, ConfigError::CredentialsOverHttp { origin, .. } if origin == "configuration"),
            "{err:?}"
        );
        texts.push(shown(&err));
    }
    assert!(
        texts[0].contains("refusing to send credentials to http://127.0.0.1:"),
        "{}",
        texts[0]
    );
    // From a kubeconfig: the error names it and the context.
    let yaml = sim.kubeconfig(None, "default");
    let err = HttpConfig::from_kubeconfig_yaml(&yaml, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ConfigError::CredentialsOverHttp { origin, .. }
            if origin == "kubeconfig (kubeconfig text), context \"sim\""),
        "{err:?}"
    );
    texts.push(shown(&err));
    assert_eq!(sim.stats().requests, 0, "nothing was sent");
    // No credentials: plain http is fine. The loopback opt-in: fine for 127.0.0.1.
    HttpSink::new(plain.clone()).unwrap();
    let local = HttpSink::new(
        plain
            .with_token(admin.clone())
            .with_credentials_over_loopback_http(true),
    )
    .unwrap();
    local.create(&event("loopback.1")).await.unwrap();
    assert_no_secret(&texts, &[&admin, "basic-pa55word"]);
}

#[tokio::test]
async fn insecure_skip_tls_verify_with_a_ca_is_refused() {
    logs();
    let ca = rcgen::generate_simple_self_signed(vec!["k8s.example".to_owned()]).unwrap();
    let pem = ca.cert.pem();
    let by_hand = HttpConfig::new("https://k8s.example:6443")
        .unwrap()
        .with_ca_pem(pem.as_bytes())
        .unwrap()
        .with_insecure_skip_tls_verify(true);
    let err = HttpSink::new(by_hand).unwrap_err();
    assert!(matches!(err, ConfigError::InsecureWithCa { .. }), "{err:?}");
    use base64::Engine as _;
    let data = base64::engine::general_purpose::STANDARD.encode(pem.as_bytes());
    let yaml = kubeconfig(
        &format!(
            "    server: https://k8s.example:6443\n    insecure-skip-tls-verify: true\n    certificate-authority-data: {data}\n"
        ),
        "    {}\n",
    );
    let err = HttpConfig::from_kubeconfig_yaml(&yaml, None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "kubeconfig (kubeconfig text): clusters[\"c\"]: insecure-skip-tls-verify together with a certificate authority is not allowed; remove one of them"
    );
    // Either one alone is accepted.
    let insecure = kubeconfig(
        "    server: https://k8s.example:6443\n    insecure-skip-tls-verify: true\n",
        "    {}\n",
    );
    assert!(
        HttpConfig::from_kubeconfig_yaml(&insecure, None)
            .await
            .is_ok()
    );
}

// --- endless local files ---------------------------------------------------------------------

fn too_large(err: &ConfigError, want_path: &str, want_limit: u64) {
    let ConfigError::TooLarge { path, limit, .. } = err else {
        panic!("{err:?}")
    };
    assert_eq!((path.as_path(), *limit), (Path::new(want_path), want_limit));
    assert!(err.to_string().contains(want_path), "{err}");
}

#[tokio::test]
async fn endless_local_files_are_refused_at_their_limit() {
    logs();
    // The kubeconfig itself.
    for path in ["/dev/zero", "/dev/urandom"] {
        let err = HttpConfig::from_kubeconfig(Some(Path::new(path)), None)
            .await
            .unwrap_err();
        too_large(&err, path, MAX_KUBECONFIG_BYTES);
        assert_eq!(
            err.to_string(),
            format!("kubeconfig {path} is larger than 4194304 bytes")
        );
    }
    // A regular file one byte over the limit.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big");
    std::fs::write(&big, vec![b' '; MAX_KUBECONFIG_BYTES as usize + 1]).unwrap();
    let err = HttpConfig::from_kubeconfig(Some(&big), None)
        .await
        .unwrap_err();
    too_large(&err, big.to_str().unwrap(), MAX_KUBECONFIG_BYTES);

    // Files named in a kubeconfig.
    for (cluster, user, path, limit) in [
        (
            "    certificate-authority: /dev/zero\n",
            "    {}\n",
            "/dev/zero",
            MAX_PEM_FILE_BYTES,
        ),
        (
            "",
            "    client-certificate: /dev/zero\n    client-key-data: eA==\n",
            "/dev/zero",
            MAX_PEM_FILE_BYTES,
        ),
        (
            "",
            "    client-certificate-data: eA==\n    client-key: /dev/urandom\n",
            "/dev/urandom",
            MAX_PEM_FILE_BYTES,
        ),
    ] {
        let yaml = kubeconfig(&format!("    server: https://k8s.example\n{cluster}"), user);
        let err = HttpConfig::from_kubeconfig_yaml(&yaml, None)
            .await
            .unwrap_err();
        too_large(&err, path, limit);
    }
    let err = HttpConfig::new("https://k8s.example")
        .unwrap()
        .with_ca_file("/dev/zero")
        .unwrap_err();
    too_large(&err, "/dev/zero", MAX_PEM_FILE_BYTES);

    // A token file: read at request time; nothing is sent.
    let sim = Simulator::start(SimConfig::like_apiserver()).await.unwrap();
    let sink = HttpSink::new(
        HttpConfig::new(&sim.url())
            .unwrap()
            .with_ca_pem(sim.ca_pem().unwrap().as_bytes())
            .unwrap()
            .with_token_file("/dev/urandom", Duration::from_secs(60)),
    )
    .unwrap();
    let err = sink.create(&event("token.1")).await.unwrap_err();
    assert_eq!(
        err,
        SinkError::Transport(format!(
            "token file /dev/urandom is larger than {MAX_TOKEN_FILE_BYTES} bytes"
        ))
    );
    assert_eq!(sim.stats().requests, 0);
}

/// Kubeconfig leniency against client-go (issue 36): a `tokenFile` wins over an inline
/// `token` (client-go sends the file's, and follows its rotation); a token together with
/// username/password is "more than one authentication method"; a cluster, user or context
/// named twice in a file is refused (client-go: `duplicate name "x" in list`), not "the first
/// wins".
#[tokio::test]
async fn kubeconfig_credentials_and_names_as_client_go_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "from-the-file\n").unwrap();
    let head = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n";
    let tail = "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";

    let both = format!(
        "{head}users: [{{name: u, user: {{token: inline-s3cr3t, tokenFile: {}}}}}]\n{tail}",
        token_file.display()
    );
    let config = HttpConfig::from_kubeconfig_yaml(&both, None).await.unwrap();
    assert!(
        matches!(&config.auth, kevents_http::Auth::BearerFile { path, .. } if path == &token_file),
        "{:?}",
        config.auth
    );

    let basic = format!(
        "{head}users: [{{name: u, user: {{token: inline-s3cr3t, username: admin, password: pa55w0rd}}}}]\n{tail}"
    );
    let err = HttpConfig::from_kubeconfig_yaml(&basic, None)
        .await
        .unwrap_err();
    let text = shown(&err);
    assert!(matches!(err, ConfigError::Conflict { .. }), "{text}");
    assert!(
        text.contains("more than one authentication method"),
        "{text}"
    );
    assert!(
        !text.contains("inline-s3cr3t") && !text.contains("pa55w0rd"),
        "{text}"
    );

    for (list, yaml) in [
        (
            "contexts",
            format!(
                "{head}users: [{{name: u, user: {{}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}, {{name: x, context: {{cluster: c, user: u, namespace: other}}}}]\ncurrent-context: x\n"
            ),
        ),
        (
            "users",
            format!(
                "{head}users: [{{name: u, user: {{}}}}, {{name: u, user: {{token: t}}}}]\n{tail}"
            ),
        ),
        (
            "clusters",
            format!(
                "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"https://127.0.0.1:1\"}}}}, {{name: c, cluster: {{server: \"https://127.0.0.1:2\"}}}}]\nusers: [{{name: u, user: {{}}}}]\n{tail}"
            ),
        ),
    ] {
        let err = HttpConfig::from_kubeconfig_yaml(&yaml, None)
            .await
            .unwrap_err();
        let text = shown(&err);
        assert!(
            matches!(&err, ConfigError::Kubeconfig { field, .. } if field.starts_with(list)),
            "{list}: {text}"
        );
        assert!(text.contains("named twice"), "{list}: {text}");
    }
}

/// A CR or LF inside a bearer token (inline in the kubeconfig, in a token file read at load,
/// or set by the program) is an invalid token, named by where it comes from and refused when
/// loaded; it was reported as a TLS problem when the sink was built. The token never shows.
#[tokio::test]
async fn a_line_break_inside_a_token_is_an_invalid_token_not_a_tls_problem() {
    let head = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n";
    let tail = "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
    for token in ["s3cr3t\\r\\nline2", "s3cr3t\\nline2", "s3cr3t\\rline2"] {
        let yaml = format!("{head}users: [{{name: u, user: {{token: \"{token}\"}}}}]\n{tail}");
        let err = HttpConfig::from_kubeconfig_yaml(&yaml, None)
            .await
            .map(|_| ())
            .unwrap_err();
        let text = shown(&err);
        assert!(
            matches!(&err, ConfigError::InvalidToken { origin, .. } if origin.ends_with("users[\"u\"].user.token")),
            "{token}: {text}"
        );
        assert!(text.contains("line break (CR or LF)"), "{text}");
        assert!(!text.contains("TLS"), "{text}");
        assert_no_secret(&[text], &["s3cr3t", "line2"]);
    }

    // A token file that is not a regular file (a FIFO, as `<(vault read ...)`) is read at
    // load, once: its content is checked then.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("token");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, "s3cr3t\nline2\n").unwrap())
    };
    let yaml = format!(
        "{head}users: [{{name: u, user: {{tokenFile: {}}}}}]\n{tail}",
        fifo.display()
    );
    let err = HttpConfig::from_kubeconfig_yaml(&yaml, None)
        .await
        .map(|_| ())
        .unwrap_err();
    writer.join().unwrap();
    let text = shown(&err);
    assert!(
        matches!(&err, ConfigError::InvalidToken { origin, .. } if origin == &format!("token file {}", fifo.display())),
        "{text}"
    );
    assert!(!text.contains("TLS"), "{text}");
    assert_no_secret(&[text], &["s3cr3t", "line2"]);

    // A token the program sets: refused when the sink is built, as an invalid token.
    let mut config = HttpConfig::new("https://127.0.0.1:1").unwrap();
    config.auth = kevents_http::Auth::Bearer("s3cr3t\nline2".to_owned().into());
    let err = HttpSink::new(config).map(|_| ()).unwrap_err();
    let text = shown(&err);
    assert!(
        matches!(&err, ConfigError::InvalidToken { origin, .. } if origin == "bearer token"),
        "{text}"
    );
    assert_no_secret(&[text], &["s3cr3t", "line2"]);
}
