//! The core/v1 conformance suite, run against the simulator and against a real
//! kube-apiserver, v1.20.2 or v1.36 with `KEVENTS_K8S_VERSION=1.36` (ignored, with the command
//! that runs it, when it is not provisioned; failing in CI).

use kevents_testkit::Target;
use kevents_testkit::conformance::core_v1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_conformance() {
    let target = Target::simulator().await.expect("simulator starts");
    if let Err(failures) = core_v1::run_all(&target).await {
        panic!("{failures}");
    }
}

#[cfg_attr(
    not(kevents_apiserver),
    ignore = "needs a real kube-apiserver: run `bash scripts/apiserver/provision.sh` once (as root), then `cargo test --workspace`"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_apiserver_conformance() {
    let target = match Target::real().await {
        Ok(Some(t)) => t,
        Ok(None) => panic!("kube-apiserver is not provisioned (see above)"),
        Err(e) => panic!("{e}"),
    };
    let result = core_v1::run_all(&target).await;
    if let Err(failures) = result {
        let log = target
            .real_apiserver()
            .and_then(|r| std::fs::read_to_string(r.state_dir().join("apiserver.log")).ok())
            .unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(25).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "{failures}\n--- apiserver.log (tail) ---\n{}",
            tail.join("\n")
        );
    }
}
