//! Live counts against a real kube-apiserver v1.20.2: an events.k8s.io/v1 series' count is
//! in `kubectl describe` within `events_v1::SinkOptions::freshness` (2 s here), before any
//! shutdown, heartbeat or finish.
//!
//! Ignored where the apiserver is not provisioned (with the command that runs it), run and
//! failing without it in CI (`CI=true`) or with `KEVENTS_REQUIRE_APISERVER=1`.

use std::process::Command;
use std::time::Duration;

use kevents_actors::{EventsV1Config, Pipeline};
use kevents_core::events_v1::Reporter;
use kevents_core::{EventSource, EventType, ObjectReference};
use kevents_http::{HttpConfig, HttpSink};
use kevents_testkit::RealApiserver;

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn kubectl_describe_shows_the_live_count_within_the_freshness_interval() {
        let server = RealApiserver::start()
            .expect("starting the real kube-apiserver")
            .expect("kube-apiserver is not provisioned (see above)");
        let kubeconfig = server.admin_kubeconfig.clone();
        let cm = format!("live-{}", std::process::id());
        let kubectl = |args: &[&str]| {
            let out = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(args)
                .output()
                .expect("kubectl");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        kubectl(&["-n", "default", "create", "configmap", &cm]);
        let uid = kubectl(&["-n", "default", "get", "configmap", &cm, "-o", "jsonpath={.metadata.uid}"]);
        actix::System::new().block_on(async {
            let sink = HttpSink::new(
                HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None)
                    .await
                    .unwrap(),
            )
            .unwrap();
            let p = Pipeline::builder(EventSource::new("kevents-test", "node-1"))
                .events_v1(EventsV1Config::new(Reporter::with_instance(
                    "kevents.io/live-test",
                    "live-0",
                )))
                .sink_events_v1(
                    "apiserver",
                    sink,
                    kevents_actors::events_v1::SinkOptions {
                        freshness: Some(Duration::from_secs(2)),
                        ..Default::default()
                    },
                )
                .start();
            let object = ObjectReference::new("v1", "ConfigMap", "default", &cm).with_uid(uid);
            for _ in 0..7 {
                p.recorder()
                    .events_v1().emit(kevents_core::events_v1::Occurrence::new(
                        object.clone(),
                        None,
                        EventType::Normal,
                        "Synced",
                        "Sync",
                        "synced",
                    ))
                    .unwrap();
            }
            p.flush().await.unwrap();
            // CREATE and the series start: count 2 until the refresh.
            actix_rt::time::sleep(Duration::from_secs(4)).await;
            let described = kubectl(&["-n", "default", "describe", "configmap", &cm]);
            let line = described
                .lines()
                .find(|l| l.contains("Synced"))
                .unwrap_or_else(|| panic!("no event in kubectl describe:\n{described}"));
            assert!(line.contains("(x7 over"), "{line}");
            eprintln!("kubectl describe, before any shutdown: {}", line.trim());
            let s = p.stats().sink_events_v1("apiserver").cloned().unwrap();
            assert_eq!((s.created, s.patched, s.refreshed, s.unwritten), (1, 2, 1, 0), "{s:?}");
            let report = p.shutdown(Duration::from_secs(10)).await;
            assert!(report.completed);
        });
    }
}
