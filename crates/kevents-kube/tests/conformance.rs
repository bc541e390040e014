//! Both conformance suites of kevents-testkit (core/v1 and events.k8s.io/v1) run through
//! `KubeSink` over a `kube::Client` built with kube's own kubeconfig loading, against the
//! simulator and against a real kube-apiserver v1.20.2 (ignored, with the command that runs
//! it, when it is not provisioned; failing in CI or with `KEVENTS_REQUIRE_APISERVER=1`).

mod common;

use common::{real_target, through_kube};
use kevents_testkit::Target;
use kevents_testkit::conformance::{core_v1, events_v1};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_core_v1_through_kube_client() {
    let t = through_kube(Target::simulator().await.expect("simulator starts")).await;
    if let Err(failures) = core_v1::run_all(&t).await {
        panic!("{failures}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_events_v1_through_kube_client() {
    let t = through_kube(Target::simulator().await.expect("simulator starts")).await;
    if let Err(failures) = events_v1::run_all(&t).await {
        panic!("{failures}");
    }
}

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn real_apiserver_both_suites_through_kube_client() {
        let t = through_kube(real_target().await).await;
        let core = core_v1::run_all(&t).await;
        let v1 = events_v1::run_all(&t).await;
        if core.is_err() || v1.is_err() {
            let log = t
                .real_apiserver()
                .and_then(|r| std::fs::read_to_string(r.state_dir().join("apiserver.log")).ok())
                .unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(25).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!("core/v1: {core:?}\nevents.k8s.io/v1: {v1:?}\n--- apiserver.log (tail) ---\n{}", tail.join("\n"));
        }
    }
}
