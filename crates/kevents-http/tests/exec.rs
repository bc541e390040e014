//! Exec credential plugins against the simulator (HTTPS, tokens and client certificates):
//! fake plugins are bash scripts in a temporary directory that count their runs in a file,
//! hand out tokens (or certificates) in turn and can expire them. Every test also checks that
//! no token or key it handed out reaches an error or the TRACE-level logs of every crate.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use kevents_core::{Event, EventSink, SinkError};
use kevents_http::{Auth, ConfigError, ExecConfig, ExecError, HttpConfig, HttpSink};
use kevents_sim::{SimConfig, SimHandle, Simulator};

fn event(name: &str) -> Event {
    let mut e = Event::default();
    e.metadata.name = name.into();
    e.metadata.namespace = "default".into();
    e.involved_object.namespace = "default".into();
    e.involved_object.kind = "Pod".into();
    e.involved_object.name = "p".into();
    e.reason = "Test".into();
    e.count = 1;
    e
}

/// The part every fake plugin starts with: `D` is its directory, `N` the number of this run
/// (counted in `D/runs`).
const PROLOGUE: &str = r#"#!/bin/bash
set -u
D="$(cd "$(dirname "$0")" && pwd)"
echo run >> "$D/runs"
N=$(wc -l < "$D/runs")
[ -f "$D/sleep" ] && sleep "$(cat "$D/sleep")"
"#;

/// Hands out the N-th line of `D/tokens` (the last one once they run out), expiring in
/// `D/expire_in` seconds if that file exists.
const TOKENS: &str = r#"
TOK=$(sed -n "${N}p" "$D/tokens"); [ -n "$TOK" ] || TOK=$(tail -n 1 "$D/tokens")
EXP=""
if [ -f "$D/expire_in" ]; then
  EXP=",\"expirationTimestamp\":\"$(date -u -d "+$(cat "$D/expire_in") seconds" +%Y-%m-%dT%H:%M:%SZ)\""
fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"%s}}\n' "$TOK" "$EXP"
"#;

struct Plugin {
    dir: tempfile::TempDir,
}

impl Plugin {
    fn new(body: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plugin.sh"), format!("{PROLOGUE}{body}")).unwrap();
        Plugin { dir }
    }

    fn tokens(tokens: &[&str]) -> Self {
        let p = Plugin::new(TOKENS);
        p.write("tokens", &(tokens.join("\n") + "\n"));
        p
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("plugin.sh")
    }

    fn write(&self, name: &str, content: &str) {
        std::fs::write(self.dir.path().join(name), content).unwrap();
    }

    fn runs(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("runs"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    /// The kubeconfig `exec` entry: `bash plugin.sh` (a script run by bash is only read, so
    /// it cannot fail with "text file busy" while another test forks).
    fn exec_yaml(&self, extra: &str) -> String {
        format!(
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n      command: /bin/bash\n      args: [\"{}\"]\n{extra}",
            self.path().display()
        )
    }
}

fn kubeconfig(sim: &SimHandle, user: &str, cluster_extra: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(sim.ca_pem().unwrap());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: sim\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\n{cluster_extra}users:\n- name: plug\n  user:\n{user}contexts:\n- name: sim\n  context: {{cluster: sim, user: plug, namespace: default}}\ncurrent-context: sim\n",
        sim.url()
    )
}

async fn sink_for(sim: &SimHandle, plugin: &Plugin, margin: Option<Duration>) -> HttpSink {
    let mut config =
        HttpConfig::from_kubeconfig_yaml(&kubeconfig(sim, &plugin.exec_yaml(""), ""), None)
            .await
            .unwrap();
    if let (Auth::Exec(exec), Some(m)) = (&mut config.auth, margin) {
        exec.refresh_margin = m;
    }
    HttpSink::new(config).unwrap()
}

/// None of `secrets` in the logs so far, nor in `texts`.
fn assert_secret_free(secrets: &[&str], texts: &[&str]) {
    let logs = common::log_text();
    for s in secrets {
        assert!(!logs.contains(s), "{s} logged:\n{logs}");
        for t in texts {
            assert!(!t.contains(s), "{s} in {t}");
        }
    }
}

/// Every log line holding `text` is at DEBUG level (none at INFO, WARN or ERROR), and
/// there is at least one.
fn assert_only_at_debug(text: &str) {
    let logs = common::log_text();
    let lines: Vec<&str> = logs.lines().filter(|l| l.contains(text)).collect();
    assert!(!lines.is_empty(), "{text} not logged at all");
    for l in lines {
        assert!(l.contains(" DEBUG ") || l.contains(" TRACE "), "{l}");
    }
}

async fn start() -> SimHandle {
    common::logs();
    Simulator::start(SimConfig::like_apiserver()).await.unwrap()
}

#[tokio::test]
async fn the_plugin_runs_once_for_many_requests() {
    let sim = start().await;
    let token = "exec-token-once-5f1c";
    sim.add_token(token, "exec-user", true);
    let plugin = Plugin::tokens(&[token]);
    let sink = sink_for(&sim, &plugin, None).await;
    assert!(format!("{sink:?}").contains("exec"));
    for i in 0..20 {
        sink.create(&event(&format!("once.{i}"))).await.unwrap();
    }
    assert_eq!(plugin.runs(), 1);
    assert_eq!(sim.events().len(), 20);
    // Another sink with the same plugin configuration shares the cached credential (as
    // client-go's authenticator cache): a probe sink and a pipeline's sink run it once.
    let other = sink_for(&sim, &plugin, None).await;
    other.create(&event("once.other")).await.unwrap();
    assert_eq!(plugin.runs(), 1);
    assert_secret_free(&[token], &[&format!("{sink:?}")]);
}

#[tokio::test]
async fn credentials_are_refreshed_shortly_before_they_expire() {
    let sim = start().await;
    let (t1, t2) = ("exec-token-exp-1-9a7e", "exec-token-exp-2-9a7e");
    sim.add_token(t1, "exec-user", true);
    sim.add_token(t2, "exec-user", true);
    let plugin = Plugin::tokens(&[t1, t2]);
    // Expires 3-4 s from the run (the timestamp has whole seconds), refreshed 2 s before.
    plugin.write("expire_in", "4");
    let sink = sink_for(&sim, &plugin, Some(Duration::from_secs(2))).await;
    sink.create(&event("exp.1")).await.unwrap();
    sink.create(&event("exp.2")).await.unwrap();
    assert_eq!(plugin.runs(), 1);
    // The first token is revoked: only a refreshed credential gets through.
    sim.revoke_token(t1);
    tokio::time::sleep(Duration::from_millis(2200)).await;
    sink.create(&event("exp.3")).await.unwrap();
    assert_eq!(plugin.runs(), 2);
    sink.create(&event("exp.4")).await.unwrap();
    assert_eq!(plugin.runs(), 2);
    assert_secret_free(&[t1, t2], &[]);
}

#[tokio::test]
async fn a_401_runs_the_plugin_again_and_retries_once() {
    let sim = start().await;
    let (stale, good) = ("exec-token-stale-41c2", "exec-token-good-41c2");
    sim.add_token(good, "exec-user", true);
    let plugin = Plugin::tokens(&[stale, good]);
    let sink = sink_for(&sim, &plugin, None).await;
    // stale -> 401 -> the plugin runs again -> good: the request succeeds.
    sink.create(&event("u.1")).await.unwrap();
    assert_eq!(plugin.runs(), 2);
    assert_eq!(sim.stats().requests, 2);
    for i in 2..10 {
        sink.create(&event(&format!("u.{i}"))).await.unwrap();
    }
    assert_eq!(plugin.runs(), 2);

    // A plugin that keeps returning a refused token: one re-run, one 401, no loop.
    let bad = "exec-token-bad-41c2";
    let plugin = Plugin::tokens(&[bad]);
    let sink = sink_for(&sim, &plugin, None).await;
    let before = sim.stats().requests;
    let err = sink.create(&event("u.bad")).await.unwrap_err();
    assert_eq!(err.code(), Some(401), "{err}");
    assert_eq!(plugin.runs(), 2);
    assert_eq!(sim.stats().requests - before, 1);
    assert_secret_free(&[stale, good, bad], &[&err.to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_one_plugin_run() {
    let sim = start().await;
    let token = "exec-token-shared-77d0";
    sim.add_token(token, "exec-user", true);
    let plugin = Plugin::tokens(&[token]);
    plugin.write("sleep", "0.5");
    let sink = sink_for(&sim, &plugin, None).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..16 {
        let sink = sink.clone();
        tasks.spawn(async move { sink.create(&event(&format!("c.{i}"))).await });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap().unwrap();
    }
    assert_eq!(plugin.runs(), 1);
    assert_eq!(sim.events().len(), 16);
    assert_secret_free(&[token], &[]);
}

#[tokio::test]
async fn a_missing_command_gives_the_install_hint_and_sends_nothing() {
    let sim = start().await;
    let yaml = kubeconfig(
        &sim,
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: kevents-no-such-credential-plugin\n      installHint: \"install it with: apt-get install kevents-plugin\"\n",
        "",
    );
    let config = HttpConfig::from_kubeconfig_yaml(&yaml, None).await.unwrap();
    let Auth::Exec(exec) = &config.auth else {
        panic!("{config:?}")
    };
    let typed = exec.run().await.unwrap_err();
    assert!(
        matches!(&typed, ExecError::NotFound { install_hint: Some(h), .. } if h.contains("apt-get")),
        "{typed:?}"
    );
    let sink = HttpSink::new(config).unwrap();
    let err = sink.create(&event("missing")).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, SinkError::Transport(_)), "{text}");
    assert!(
        text.contains("kevents-no-such-credential-plugin not found")
            && text.contains("install it with: apt-get install kevents-plugin"),
        "{text}"
    );
    assert_eq!(sim.stats().requests, 0);
}

#[tokio::test]
async fn bad_output_is_a_typed_error_and_nothing_is_sent() {
    let sim = start().await;
    let secret = "exec-token-badout-3e11";
    let cases = [
        // Another apiVersion than the kubeconfig's.
        format!(
            r#"printf '{{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{{"token":"{secret}"}}}}'"#
        ),
        // Not JSON at all, the token in it.
        format!("echo 'token: {secret}'"),
        // No status.
        r#"printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"}'"#
            .to_owned(),
        // A certificate without a key.
        format!(
            r#"printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"clientCertificateData":"{secret}"}}}}'"#
        ),
        // A bad expiry.
        format!(
            r#"printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{secret}","expirationTimestamp":"{secret}"}}}}'"#
        ),
    ];
    let mut texts = Vec::new();
    for body in &cases {
        let plugin = Plugin::new(body);
        let sink = sink_for(&sim, &plugin, None).await;
        let err = sink.create(&event("bad")).await.unwrap_err();
        assert!(matches!(err, SinkError::Transport(_)), "{err}");
        assert!(err.to_string().contains("unusable credential"), "{err}");
        texts.push(err.to_string());
        let config =
            HttpConfig::from_kubeconfig_yaml(&kubeconfig(&sim, &plugin.exec_yaml(""), ""), None)
                .await
                .unwrap();
        let Auth::Exec(exec) = &config.auth else {
            panic!()
        };
        let typed = exec.run().await.unwrap_err();
        assert!(matches!(typed, ExecError::BadOutput { .. }), "{typed:?}");
        texts.push(format!("{typed} {typed:?}"));
    }
    // A failing plugin: the error names it and its exit status; its stderr is never in the
    // error (it may hold a refresh token), only logged at debug level (issue 27). Nothing is
    // sent.
    let plugin = Plugin::new("echo 'login expired: run gcloud auth login' >&2; exit 3");
    let sink = sink_for(&sim, &plugin, None).await;
    let err = sink.create(&event("fail")).await.unwrap_err().to_string();
    assert!(
        err.contains("exit status: 3")
            && err.contains("exec credential plugin /bin/bash failed")
            && !err.contains("run gcloud auth login")
            && err.contains("RUST_LOG=kevents_http=debug"),
        "{err}"
    );
    assert_only_at_debug("run gcloud auth login");
    // Too much output: killed at the limit.
    let plugin = Plugin::new("head -c 3000000 /dev/zero | tr '\\0' x");
    let config =
        HttpConfig::from_kubeconfig_yaml(&kubeconfig(&sim, &plugin.exec_yaml(""), ""), None)
            .await
            .unwrap();
    let Auth::Exec(exec) = &config.auth else {
        panic!()
    };
    assert!(matches!(
        exec.run().await,
        Err(ExecError::OutputTooLarge { .. })
    ));
    assert_eq!(sim.stats().requests, 0);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    assert_secret_free(&[secret], &refs);
}

#[test]
fn a_slow_plugin_never_blocks_the_runtime_and_is_killed_at_its_timeout() {
    // actix's runtime is a current-thread tokio runtime: while the plugin runs, the thread
    // keeps running other tasks.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let plugin = Plugin::new("sleep 30");
        let exec = ExecConfig::new("/bin/bash")
            .with_args([plugin.path().display().to_string()])
            .with_timeout(Duration::from_millis(800));
        let ticker = tokio::spawn(async {
            let mut ticks = 0;
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                ticks += 1;
            }
            ticks
        });
        let started = Instant::now();
        let err = exec.run().await.unwrap_err();
        assert!(matches!(err, ExecError::Timeout { .. }), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(ticker.await.unwrap(), 10);
    });
}

#[tokio::test]
async fn the_plugin_gets_the_cluster_info_its_env_and_no_terminal() {
    let sim = start().await;
    let token = "exec-token-info-0b3d";
    sim.add_token(token, "exec-user", true);
    let plugin = Plugin::new(&format!(
        r#"printf '%s' "$KUBERNETES_EXEC_INFO" > "$D/info.json"
printf '%s' "$KEVENTS_TEST_VAR" > "$D/env.txt"
if [ -t 0 ]; then echo tty > "$D/stdin.txt"; else echo no-tty > "$D/stdin.txt"; fi
printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{token}"}}}}'
"#
    ));
    let user = plugin.exec_yaml(
        "      provideClusterInfo: true\n      env:\n      - {name: KEVENTS_TEST_VAR, value: from-kubeconfig}\n",
    );
    let extension = "    extensions:\n    - name: client.authentication.k8s.io/exec\n      extension: {audience: kevents-test}\n";
    let config = HttpConfig::from_kubeconfig_yaml(&kubeconfig(&sim, &user, extension), None)
        .await
        .unwrap();
    let sink = HttpSink::new(config).unwrap();
    sink.create(&event("info")).await.unwrap();
    let read = |f: &str| std::fs::read_to_string(plugin.dir.path().join(f)).unwrap();
    let info: serde_json::Value = serde_json::from_str(&read("info.json")).unwrap();
    assert_eq!(info["apiVersion"], "client.authentication.k8s.io/v1");
    assert_eq!(info["kind"], "ExecCredential");
    assert_eq!(info["spec"]["interactive"], false);
    let cluster = &info["spec"]["cluster"];
    assert_eq!(cluster["server"], sim.url());
    assert_eq!(cluster["config"]["audience"], "kevents-test");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(cluster["certificate-authority-data"].as_str().unwrap())
        .unwrap();
    assert_eq!(ca, sim.ca_pem().unwrap().as_bytes());
    assert_eq!(read("env.txt"), "from-kubeconfig");
    assert_eq!(read("stdin.txt").trim(), "no-tty");
    assert_secret_free(&[token], &[]);
}

#[tokio::test]
async fn kubeconfig_exec_entries_are_checked() {
    let sim = start().await;
    let load = |user: &str| {
        let yaml = kubeconfig(&sim, user, "");
        async move { HttpConfig::from_kubeconfig_yaml(&yaml, None).await }
    };
    let always = load("    exec: {apiVersion: client.authentication.k8s.io/v1, command: kubelogin, interactiveMode: Always}\n").await;
    assert!(
        matches!(
            always,
            Err(ConfigError::Exec {
                source: ExecError::InteractiveAlways { .. },
                ..
            })
        ),
        "{always:?}"
    );
    let alpha =
        load("    exec: {apiVersion: client.authentication.k8s.io/v1alpha1, command: x}\n").await;
    assert!(
        matches!(
            alpha,
            Err(ConfigError::Exec {
                source: ExecError::UnsupportedApiVersion { .. },
                ..
            })
        ),
        "{alpha:?}"
    );
    let both = load("    token: s3cr3t-both\n    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x}\n").await;
    let both = both.unwrap_err();
    assert!(!format!("{both} {both:?}").contains("s3cr3t"));
    // v1beta1 defaults to IfAvailable; a relative command with a '/' is relative to the
    // kubeconfig's directory (client-go), a bare name is looked up in PATH.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    std::fs::write(
        &path,
        kubeconfig(
            &sim,
            "    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: ./bin/plugin}\n",
            "",
        ),
    )
    .unwrap();
    let config = HttpConfig::from_kubeconfig(Some(&path), None)
        .await
        .unwrap();
    let Auth::Exec(exec) = &config.auth else {
        panic!()
    };
    assert_eq!(
        Path::new(&exec.command),
        dir.path().join("./bin/plugin").as_path()
    );
    assert_eq!(
        exec.interactive_mode,
        kevents_http::InteractiveMode::IfAvailable
    );
}

#[tokio::test]
async fn a_client_certificate_from_the_plugin_is_used_and_rotated() {
    let sim = start().await;
    let (cert_a, key_a) = sim.client_certificate("cert-user-a", true).unwrap();
    let (cert_b, key_b) = sim.client_certificate("cert-user-b", false).unwrap();
    let plugin = Plugin::new(
        r#"cat "$D/cred-$N.json" 2>/dev/null || cat "$D/cred-last.json"
"#,
    );
    let cred = |cert: &str, key: &str, expire_in: u64| {
        let expiry = kevents_core::Time::from(std::time::SystemTime::now())
            .saturating_add(Duration::from_secs(expire_in))
            .to_rfc3339();
        serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "status": {"clientCertificateData": cert, "clientKeyData": key, "expirationTimestamp": expiry}
        })
        .to_string()
    };
    plugin.write("cred-1.json", &cred(&cert_a, &key_a, 4));
    plugin.write("cred-last.json", &cred(&cert_b, &key_b, 3600));
    let sink = sink_for(&sim, &plugin, Some(Duration::from_secs(2))).await;
    // No token at all: the certificate authenticates (user a, every right).
    for i in 0..5 {
        sink.create(&event(&format!("cert.{i}"))).await.unwrap();
    }
    assert_eq!(plugin.runs(), 1);
    // Refreshed: certificate b (no rights) is now the one presented.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let err = sink.create(&event("cert.b")).await.unwrap_err();
    assert_eq!(err.code(), Some(403), "{err}");
    assert!(err.to_string().contains("cert-user-b"), "{err}");
    assert_eq!(plugin.runs(), 2);
    let key_lines: Vec<&str> = key_a
        .lines()
        .chain(key_b.lines())
        .filter(|l| !l.starts_with("-----"))
        .collect();
    assert_secret_free(&key_lines, &[&err.to_string(), &format!("{sink:?}")]);
}

// --- issue 27: back-off, process groups ----------------------------------------------------

#[tokio::test]
async fn a_failing_plugin_is_run_again_after_a_back_off_not_per_request() {
    let sim = start().await;
    let refresh = "refresh-token-in-stderr-19c4";
    let plugin = Plugin::new(&format!("echo 'oauth2: {refresh} rejected' >&2; exit 1"));
    let sink = sink_for(&sim, &plugin, None).await;
    let mut texts = Vec::new();
    for i in 0..40 {
        let err = sink.create(&event(&format!("f.{i}"))).await.unwrap_err();
        assert!(matches!(err, SinkError::Transport(_)), "{err:?}");
        texts.push(err.to_string());
    }
    // One run, then a back-off of 1 s (EXEC_INITIAL_BACKOFF): the requests in between get
    // the last run's error without running the plugin.
    assert_eq!(plugin.runs(), 1);
    tokio::time::sleep(kevents_http::EXEC_INITIAL_BACKOFF + Duration::from_millis(200)).await;
    for i in 0..10 {
        let _ = sink.create(&event(&format!("g.{i}"))).await.unwrap_err();
    }
    assert_eq!(plugin.runs(), 2, "one run per back-off step");
    assert_eq!(sim.stats().requests, 0);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    for t in &refs {
        assert!(!t.contains(refresh), "{t}");
    }
    assert_only_at_debug(refresh);
}

#[tokio::test]
async fn an_expiring_or_expired_credential_does_not_run_the_plugin_per_request() {
    let sim = start().await;
    let token = "exec-token-margin-6b2f";
    sim.add_token(token, "exec-user", true);
    // Valid for 5 s, inside the default 10 s refresh margin: due for a refresh at once.
    let plugin = Plugin::tokens(&[token]);
    plugin.write("expire_in", "5");
    let sink = sink_for(&sim, &plugin, None).await;
    let started = Instant::now();
    for i in 0..10 {
        sink.create(&event(&format!("m.{i}"))).await.unwrap();
    }
    // Once per back-off step (1 s, then 2 s): one run unless this took over a second.
    let allowed = if started.elapsed() < Duration::from_secs(1) {
        1
    } else {
        2
    };
    assert!(
        plugin.runs() <= allowed,
        "used until it expires, not refreshed per request: {} runs",
        plugin.runs()
    );
    // Already expired when returned: refused without sending it, retried after a back-off.
    let plugin = Plugin::new(&format!(
        r#"printf '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{token}","expirationTimestamp":"2001-01-01T00:00:00Z"}}}}'"#
    ));
    let sink = sink_for(&sim, &plugin, None).await;
    let before = sim.stats().requests;
    for i in 0..30 {
        let err = sink.create(&event(&format!("x.{i}"))).await.unwrap_err();
        assert!(
            matches!(&err, SinkError::Transport(t) if t.contains("expired")),
            "{err:?}"
        );
    }
    assert_eq!(plugin.runs(), 1);
    assert_eq!(sim.stats().requests, before);
    assert_secret_free(&[token], &[]);
}

#[tokio::test]
async fn a_plugin_whose_credential_keeps_being_refused_backs_off() {
    let sim = start().await;
    let plugin = Plugin::tokens(&["exec-token-refused-0d9e"]);
    let sink = sink_for(&sim, &plugin, None).await;
    let started = Instant::now();
    for i in 0..8 {
        let err = sink.create(&event(&format!("r.{i}"))).await.unwrap_err();
        assert_eq!(err.code(), Some(401), "{err}");
    }
    // The first request's 401 runs it again (the same token comes back): back-off, so the
    // other 401s do not run it (unless a second passed: one more run).
    let allowed = if started.elapsed() < Duration::from_secs(1) {
        2
    } else {
        3
    };
    assert!(plugin.runs() <= allowed, "{} runs", plugin.runs());
}

#[test]
fn a_plugin_killed_at_its_timeout_takes_its_children_with_it() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let plugin = Plugin::new("sleep 300 &\necho $! > \"$D/child\"\nwait\n");
    let exec = ExecConfig::new("/bin/bash")
        .with_args([plugin.path().display().to_string()])
        .with_timeout(Duration::from_millis(1500));
    let err = rt.block_on(exec.run()).unwrap_err();
    assert!(matches!(err, ExecError::Timeout { .. }), "{err:?}");
    assert!(
        err.to_string().contains("did not finish within 1.5 s"),
        "{err}"
    );
    let child: u32 = std::fs::read_to_string(plugin.dir.path().join("child"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Gone (or a zombie waiting for init), not sleeping on with parent 1.
    let alive = || {
        std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z'))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    while alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(), "the plugin's child {child} survived it");
}
