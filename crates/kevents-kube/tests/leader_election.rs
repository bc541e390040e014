//! Leader election for kube-rs controllers against a real kube-apiserver (v1.20.2, and the
//! newest with `KEVENTS_K8S_VERSION`): two processes of `examples/leader_controller.rs`, each
//! over its own `kube::Client`; only the holder of the Lease reconciles; the holder is killed
//! with SIGKILL and the other leads (and reconciles) within the lease duration plus the
//! retries' bound; a clean shutdown releases the Lease.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{client_for, real_target};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kevents_testkit::Identity;
use kube::api::{Api, PostParams};

/// The test's durations: lease 4 s, renew deadline 3 s, retry period 1 s.
const LEASE: u64 = 4;
const RETRY: u64 = 1;

/// The longest a standby can take, after the holder died, to lead: the lease duration from
/// when it last saw the Lease change, which is at most one jittered retry period (×1.2) after
/// the holder's last renewal; then at most one jittered retry period until its next try (this
/// is client-go's rule: the standby judges by its own clock from what it observed); plus a
/// second for the requests.
fn takeover_bound() -> Duration {
    Duration::from_secs(LEASE)
        + Duration::from_secs(RETRY).mul_f64(2.0 * 1.2)
        + Duration::from_secs(1)
}

struct Proc {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Proc {
    fn start(kubeconfig: &std::path::Path, identity: &str, lease: &str) -> Proc {
        let mut child = Command::new(kevents_testkit::example_binary("leader_controller"))
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "--namespace",
                "default",
                "--lease",
                lease,
                "--identity",
                identity,
            ])
            .args(["--durations", "4", "3", "1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("leader_controller runs");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proc { child, lines }
    }

    /// Waits for a line starting with `prefix`, within `within`; the lines before it.
    fn wait_for(&self, prefix: &str, within: Duration) -> Vec<String> {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with(prefix) => return seen,
                Ok(line) => seen.push(line),
                Err(_) => panic!("no line {prefix:?} within {within:?}; saw {seen:?}"),
            }
        }
    }

    /// Every line printed so far.
    fn drain(&self) -> Vec<String> {
        self.lines.try_iter().collect()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_controller_runs_only_while_leading_and_the_standby_takes_over_a_killed_holder() {
        let t = real_target().await;
        let client = client_for(&t, Identity::Admin).await;
        let kubeconfig = t.real_apiserver().expect("real").admin_kubeconfig.clone();
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("kevents-leader-cm".into());
        let _ = configmaps.create(&PostParams::default(), &cm).await;
        let lease_name = "kevents-kube-leader";

        let a = Proc::start(&kubeconfig, "ctl-a", lease_name);
        a.wait_for("leading ctl-a", Duration::from_secs(20));
        a.wait_for("reconciled ctl-a kevents-leader-cm", Duration::from_secs(20));
        let mut b = Proc::start(&kubeconfig, "ctl-b", lease_name);
        std::thread::sleep(Duration::from_secs(LEASE * 2));
        let b_lines = b.drain();
        assert!(
            b_lines.iter().all(|l| !l.starts_with("leading") && !l.starts_with("reconciled")),
            "b must neither lead nor reconcile while a renews: {b_lines:?}"
        );

        let mut a = a;
        a.child.kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
        let killed = Instant::now();
        a.child.wait().expect("reaped");
        b.wait_for("leading ctl-b", takeover_bound());
        let took = killed.elapsed();
        eprintln!("ctl-b led {took:?} after ctl-a was killed (bound {:?})", takeover_bound());
        b.wait_for("reconciled ctl-b kevents-leader-cm", Duration::from_secs(20));

        let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
        let spec = leases.get(lease_name).await.expect("the Lease").spec.expect("spec");
        assert_eq!(spec.holder_identity.as_deref(), Some("ctl-b"));
        assert_eq!(spec.lease_transitions, Some(1));

        // A clean shutdown (stdin closed) stops the controller and releases the Lease.
        drop(b.child.stdin.take());
        b.wait_for("released ctl-b", Duration::from_secs(15));
        assert!(b.child.wait().expect("b exits").success());
        let spec = leases.get(lease_name).await.expect("the Lease").spec.expect("spec");
        assert_eq!(spec.holder_identity.as_deref().unwrap_or(""), "");
        let _ = configmaps.delete("kevents-leader-cm", &Default::default()).await;
    }
}
