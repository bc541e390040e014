//! Nothing lost at a process's edge: a `#[tokio::main]` program (the
//! `drop_in_exit_without_shutdown` example) publishes 10 events with the drop-in and returns from
//! `main` without `shutdown`; the real apiserver stores all 10. `cargo test` builds the
//! examples before it runs any test.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

/// Publishes 10 repeats about `name` with a drop-in over `client`, then drops it.
async fn publish_and_drop(client: kube::Client, name: &str) {
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::runtime::events::{Event, EventType, Reporter};
    let recorder = kevents_kube::Recorder::new(
        client,
        Reporter {
            controller: "example.com/exit-probe".into(),
            instance: None,
        },
    );
    let pod = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some("default".into()),
        name: Some(name.into()),
        ..Default::default()
    };
    let ev = Event {
        type_: EventType::Warning,
        reason: "BackOff".into(),
        note: Some("restarting".into()),
        action: "Restart".into(),
        secondary: None,
    };
    for _ in 0..10 {
        recorder.publish(&ev, &pod).await.expect("published");
    }
}

/// The stored series counts of the events about `name`.
async fn stored<S: kevents_testkit::conformance::SuiteSink>(sink: &S, name: &str) -> Vec<i32> {
    sink.list_events_v1("default")
        .await
        .expect("list events.k8s.io/v1")
        .into_iter()
        .filter(|e| e.regarding.name == name)
        .map(|e| e.series.map_or(1, |s| s.count))
        .collect()
}

/// Multi-thread runtime (`#[tokio::main]`'s): the drop waits, the counts are stored when it
/// returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_drop_waits_on_a_multi_thread_runtime() {
    let target = kevents_testkit::Target::simulator()
        .await
        .expect("simulator");
    let client = common::client_for(&target, kevents_testkit::Identity::Admin).await;
    publish_and_drop(client, "mt").await;
    assert_eq!(stored(&target.admin, "mt").await, [10]);
}

/// Current-thread runtime (`#[tokio::test]`'s): the client's requests need this runtime, so
/// the drop does not block it (which could only end at the deadline, nothing written); the
/// drain goes on while the runtime runs.
#[tokio::test(flavor = "current_thread")]
async fn the_last_drop_does_not_block_a_current_thread_runtime() {
    let target = kevents_testkit::Target::simulator()
        .await
        .expect("simulator");
    let client = common::client_for(&target, kevents_testkit::Identity::Admin).await;
    let started = std::time::Instant::now();
    publish_and_drop(client, "ct").await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while stored(&target.admin, "ct").await != [10] && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(stored(&target.admin, "ct").await, [10]);
}

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn returning_from_main_without_shutdown_stores_every_count() {
        let target = common::real_target().await;
        let kubeconfig = target
            .real_apiserver()
            .expect("a real apiserver")
            .admin_kubeconfig
            .clone();
        let probe = kevents_testkit::example_binary("drop_in_exit_without_shutdown");
        for run in 0..3 {
            let object = format!("exit-drop-in-{run}");
            let started = Instant::now();
            let out = Command::new(&probe)
                .env("KUBECONFIG", &kubeconfig)
                .args(["default", "10", &object])
                .output()
                .expect("the example runs");
            let took = started.elapsed();
            assert!(
                out.status.success(),
                "run {run}: {:?}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            // Read back right after the process is gone.
            let stored: Vec<_> = target
                .admin
                .requests().events_v1().list_events("default")
                .await
                .expect("list events.k8s.io/v1")
                .into_iter()
                .filter(|e| e.regarding.name == object)
                .collect();
            let counts: Vec<i32> = stored
                .iter()
                .map(|e| e.series.map_or(1, |s| s.count))
                .collect();
            assert_eq!(
                counts,
                [10],
                "run {run} ({took:?}): stored {stored:#?}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!("run {run}: 10 published, series count 10 stored, process took {took:?}");
        }
    }

    /// An identity that may not write: the program still ends on its own, and says on stderr
    /// how many occurrences were lost and why (nobody else would: it holds no report).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_identity_says_its_losses_on_stderr_at_exit() {
        let target = common::real_target().await;
        let kubeconfig = target
            .real_apiserver()
            .expect("a real apiserver")
            .nobody_kubeconfig
            .clone();
        let out = Command::new(kevents_testkit::example_binary("drop_in_exit_without_shutdown"))
            .env("KUBECONFIG", &kubeconfig)
            .args(["default", "25", "exit-refused"])
            .output()
            .expect("the example runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{:?}\n{stderr}", out.status);
        assert_eq!(
            stderr
                .matches("counts lost: 25 occurrences refused by the server (25 \u{d7} 403 Forbidden: create events.k8s.io/v1 events in namespace \"default\")")
                .count(),
            1,
            "said once, with the cause:\n{stderr}"
        );
    }
}
