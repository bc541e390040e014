//! Nothing lost at a process's edge, with the facade: a `#[tokio::main]` program (the
//! `exit_without_shutdown` example) records 10 events through an `HttpSink` pipeline and
//! returns from `main` without `shutdown`; the real apiserver stores all 10. `cargo test`
//! builds the examples before it runs any test.

use std::process::Command;
use std::time::Instant;

use kevents_testkit::Target;

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn returning_from_main_without_shutdown_stores_every_count() {
        let target = Target::real()
            .await
            .expect("starting the real kube-apiserver")
            .expect("kube-apiserver is not provisioned (see above)");
        let kubeconfig = target
            .real_apiserver()
            .expect("a real apiserver")
            .admin_kubeconfig
            .clone();
        let probe = kevents_testkit::example_binary("exit_without_shutdown");
        for run in 0..3 {
            let object = format!("exit-facade-{run}");
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
            let stored: Vec<_> = target
                .admin
                .requests().list_events("default")
                .await
                .expect("list core/v1 events")
                .into_iter()
                .filter(|e| e.involved_object.name == object)
                .collect();
            let counts: Vec<i32> = stored.iter().map(|e| e.count).collect();
            assert_eq!(
                counts,
                [10],
                "run {run} ({took:?}): stored {stored:#?}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!("run {run}: 10 recorded, count 10 stored, process took {took:?}");
        }
    }
}
