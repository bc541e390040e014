//! Exec credential plugins against a real kube-apiserver, v1.20.2 or v1.36 (static token file with
//! three extra `system:masters` tokens, and a client CA): fake plugins are bash scripts that
//! count their runs in a file. Ignored, with the command that runs it, when the apiserver is
//! not provisioned; run (and failing without it) in CI or with `KEVENTS_REQUIRE_APISERVER=1`.

use std::path::Path;
use std::time::Duration;

use kevents_core::{Event, EventSink};
use kevents_http::{Auth, HttpConfig, HttpSink};
use kevents_testkit::RealApiserver;

fn event(name: &str) -> Event {
    let mut e = Event::default();
    e.metadata.name = name.into();
    e.metadata.namespace = "default".into();
    e.involved_object.namespace = "default".into();
    e.involved_object.kind = "Pod".into();
    e.involved_object.name = "exec-test".into();
    e.reason = "ExecTest".into();
    e.message = "written with a credential from an exec plugin".into();
    e.type_ = "Normal".into();
    e.source.component = "kevents-exec-test".into();
    e.count = 1;
    e
}

/// A plugin script in its own directory: counts its runs in `runs`, prints `cred-N.json`
/// (N: this run) or `cred-last.json`, after `sleep` seconds if that file exists.
struct Plugin {
    dir: tempfile::TempDir,
}

impl Plugin {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("plugin.sh"),
            r#"#!/bin/bash
set -u
D="$(cd "$(dirname "$0")" && pwd)"
echo run >> "$D/runs"
N=$(wc -l < "$D/runs")
[ -f "$D/sleep" ] && sleep "$(cat "$D/sleep")"
cat "$D/cred-$N.json" 2>/dev/null || cat "$D/cred-last.json"
"#,
        )
        .unwrap();
        Plugin { dir }
    }

    fn set(&self, name: &str, value: &serde_json::Value) {
        std::fs::write(self.dir.path().join(name), value.to_string()).unwrap();
    }

    fn runs(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("runs"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    fn kubeconfig(&self, server: &RealApiserver) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: real\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: plug\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n      command: /bin/bash\n      args: [\"{}\"]\ncontexts:\n- name: real\n  context: {{cluster: real, user: plug, namespace: default}}\ncurrent-context: real\n",
            server.url,
            server.ca_file.display(),
            self.dir.path().join("plugin.sh").display()
        )
    }

    async fn sink(&self, server: &RealApiserver, margin: Option<Duration>) -> HttpSink {
        let mut config = HttpConfig::from_kubeconfig_yaml(&self.kubeconfig(server), None)
            .await
            .unwrap();
        if let (Auth::Exec(exec), Some(m)) = (&mut config.auth, margin) {
            exec.refresh_margin = m;
        }
        HttpSink::new(config).unwrap()
    }
}

fn token(token: &str, expire_in: Option<u64>) -> serde_json::Value {
    let mut status = serde_json::json!({ "token": token });
    if let Some(s) = expire_in {
        status["expirationTimestamp"] = kevents_core::Time::from(std::time::SystemTime::now())
            .saturating_add(Duration::from_secs(s))
            .to_rfc3339()
            .into();
    }
    serde_json::json!({
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": status,
    })
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn exec_plugins_against_the_real_apiserver() {
        let server = RealApiserver::start()
            .expect("starting the real kube-apiserver")
            .expect("kube-apiserver is not provisioned (see above)");
        assert_eq!(server.exec_tokens.len(), 3);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(scenarios(&server));
    }
}

async fn scenarios(server: &RealApiserver) {
    let [t0, t1, t2] = [0, 1, 2].map(|i| server.exec_tokens[i].clone());

    // Many requests, one run; a 401 for a token the apiserver does not know makes the sink
    // run the plugin again and retry once.
    let plugin = Plugin::new();
    plugin.set("cred-1.json", &token("exec-unknown-token-0000", None));
    plugin.set("cred-last.json", &token(&t0, None));
    let sink = plugin.sink(server, None).await;
    for i in 0..20 {
        sink.create(&event(&format!("exec-real.a{i}")))
            .await
            .unwrap();
    }
    assert_eq!(plugin.runs(), 2, "one run, then one more after the 401");

    // Expiry: refreshed 2 s before expirationTimestamp.
    let plugin = Plugin::new();
    plugin.set("cred-1.json", &token(&t1, Some(4)));
    plugin.set("cred-last.json", &token(&t2, Some(3600)));
    let sink = plugin.sink(server, Some(Duration::from_secs(2))).await;
    sink.create(&event("exec-real.b1")).await.unwrap();
    sink.create(&event("exec-real.b2")).await.unwrap();
    assert_eq!(plugin.runs(), 1);
    tokio::time::sleep(Duration::from_millis(2200)).await;
    sink.create(&event("exec-real.b3")).await.unwrap();
    sink.create(&event("exec-real.b4")).await.unwrap();
    assert_eq!(plugin.runs(), 2);

    // Concurrent requests wait for the same (slow) run.
    let plugin = Plugin::new();
    plugin.set("cred-last.json", &token(&t2, None));
    std::fs::write(plugin.dir.path().join("sleep"), "0.5").unwrap();
    let sink = plugin.sink(server, None).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..12 {
        let sink = sink.clone();
        tasks.spawn(async move { sink.create(&event(&format!("exec-real.c{i}"))).await });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap().unwrap();
    }
    assert_eq!(plugin.runs(), 1);

    // A client certificate from the plugin (signed by the apiserver's client CA), no token.
    let plugin = Plugin::new();
    plugin.set(
        "cred-last.json",
        &serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "status": {
                "clientCertificateData": read(&server.client_cert),
                "clientKeyData": read(&server.client_key),
            }
        }),
    );
    let sink = plugin.sink(server, None).await;
    for i in 0..5 {
        sink.create(&event(&format!("exec-real.d{i}")))
            .await
            .unwrap();
    }
    assert_eq!(plugin.runs(), 1);
    let stored = sink
        .requests()
        .get_event("default", "exec-real.d4")
        .await
        .unwrap();
    assert_eq!(stored.reason, "ExecTest");
}
