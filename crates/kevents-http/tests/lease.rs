//! The Lease elector against a real kube-apiserver (v1.20.2, and v1.36 with
//! `KEVENTS_K8S_VERSION=1.36`): one candidate acquires, a second waits; the holder dies (its
//! task aborted, or its process killed with SIGKILL) and the standby takes over once the
//! lease has expired; a released lease is taken over at once; `leaseTransitions` counts the
//! holders; an identity without RBAC rights on leases gets `LeaseError::Forbidden`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kevents_http::HttpSink;
use kevents_runtime::lease::{LeaderElector, LeaderHandle, LeaseConfig, LeaseError};
use kevents_testkit::Target;

/// Short durations for the tests: lease 4 s, renew deadline 3 s, retry period 1 s.
const LEASE: Duration = Duration::from_secs(4);
const RENEW: Duration = Duration::from_secs(3);
const RETRY: Duration = Duration::from_secs(1);

/// The longest a standby can take to see a dead holder's lease expire and take it: it sees
/// the last renewal at most one jittered retry after it was written (retry × 2.2), waits the
/// lease duration, then tries at most one jittered retry later; plus a second for requests.
fn takeover_bound() -> Duration {
    LEASE + RETRY.mul_f64(2.0 * 2.2) + Duration::from_secs(1)
}

fn config(name: &str, identity: &str) -> LeaseConfig {
    LeaseConfig::new("default", name, identity).with_durations(LEASE, RENEW, RETRY)
}

async fn real() -> Target {
    match Target::real().await {
        Ok(Some(t)) => t,
        Ok(None) => panic!("kube-apiserver is not provisioned"),
        Err(e) => panic!("starting kube-apiserver: {e}"),
    }
}

/// The Lease's spec as the apiserver holds it.
async fn lease_spec(sink: &HttpSink, name: &str) -> serde_json::Value {
    let body = sink
        .requests()
        .get(
            &format!("/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}"),
            4 << 20,
        )
        .await
        .expect("GET lease");
    let lease: serde_json::Value = serde_json::from_slice(&body).expect("lease JSON");
    lease["spec"].clone()
}

async fn wait_leading(handle: &LeaderHandle, within: Duration) -> Duration {
    let started = Instant::now();
    let mut changes = handle.changes();
    tokio::time::timeout(within, changes.wait_for(|l| *l))
        .await
        .unwrap_or_else(|_| panic!("not leading within {within:?}: {:?}", handle.last_error()))
        .expect("election task alive");
    started.elapsed()
}

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_standby_takes_over_a_dead_holder_and_a_released_lease_at_once() {
        let t = real().await;
        let a = LeaderElector::new(t.admin.requests(), config("kevents-lease", "a"))
            .expect("config")
            .spawn();
        wait_leading(&a, Duration::from_secs(10)).await;
        let spec = lease_spec(&t.admin, "kevents-lease").await;
        assert_eq!(spec["holderIdentity"], "a");
        assert_eq!(spec["leaseDurationSeconds"], 4);
        assert_eq!(spec["leaseTransitions"], 0);
        assert!(
            spec["renewTime"].as_str().is_some_and(|s| s.len() == 27 && s.ends_with('Z')),
            "MicroTime: {spec}"
        );

        // A second candidate waits while the holder renews (three lease durations).
        let b = LeaderElector::new(t.admin.requests(), config("kevents-lease", "b"))
            .expect("config")
            .spawn();
        tokio::time::sleep(LEASE * 3).await;
        assert!(a.is_leader());
        assert!(!b.is_leader());
        assert_eq!(
            b.last_error(),
            Some(LeaseError::HeldByOther { holder: "a".into() })
        );
        assert_eq!(lease_spec(&t.admin, "kevents-lease").await["holderIdentity"], "a");

        // The holder dies without release: its task is aborted (the handle dropped).
        drop(a);
        let took = wait_leading(&b, takeover_bound()).await;
        eprintln!("standby took over a dead holder's lease after {took:?} (lease {LEASE:?})");
        assert!(took >= LEASE - RETRY * 2, "took over before expiry: {took:?}");
        let spec = lease_spec(&t.admin, "kevents-lease").await;
        assert_eq!(spec["holderIdentity"], "b");
        assert_eq!(spec["leaseTransitions"], 1);

        // A third candidate; the leader releases: taken over at the next try, not after a
        // lease duration.
        let c = LeaderElector::new(t.admin.requests(), config("kevents-lease", "c"))
            .expect("config")
            .spawn();
        tokio::time::sleep(RETRY * 3).await;
        assert!(!c.is_leader());
        let mut b_changes = b.changes();
        b.release().await.expect("released");
        assert!(!*b_changes.borrow_and_update(), "leadership ends at release");
        let spec = lease_spec(&t.admin, "kevents-lease").await;
        assert!(
            spec["holderIdentity"] == "" || spec["holderIdentity"] == "c",
            "released: {spec}"
        );
        let took = wait_leading(&c, RETRY.mul_f64(2.2) + Duration::from_secs(1)).await;
        eprintln!("standby took over a released lease after {took:?}");
        let spec = lease_spec(&t.admin, "kevents-lease").await;
        assert_eq!(spec["holderIdentity"], "c");
        assert_eq!(spec["leaseDurationSeconds"], 4);
        assert_eq!(spec["leaseTransitions"], 2);
        c.release().await.expect("released");
        let spec = lease_spec(&t.admin, "kevents-lease").await;
        assert_eq!(spec["holderIdentity"], "");
        assert_eq!(spec["leaseDurationSeconds"], 1);
        assert_eq!(spec["leaseTransitions"], 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_step_at_a_time_and_a_conflict_is_typed() {
        let t = real().await;
        let mut a = LeaderElector::new(t.admin.requests(), config("kevents-steps", "a")).expect("config");
        let mut b = LeaderElector::new(t.admin.requests(), config("kevents-steps", "b")).expect("config");
        a.try_acquire_or_renew().await.expect("created");
        assert!(a.is_leader());
        assert_eq!(
            b.try_acquire_or_renew().await,
            Err(LeaseError::HeldByOther { holder: "a".into() })
        );
        a.try_acquire_or_renew().await.expect("renewed");
        // b saw the lease expire on its clock; a renews between b's read and b's write:
        // b's PUT carries the old resourceVersion and gets 409.
        tokio::time::sleep(LEASE + Duration::from_millis(200)).await;
        // b reads (record unchanged for a lease duration: expired) ...
        let mut c = LeaderElector::new(t.admin.requests(), config("kevents-steps", "c")).expect("config");
        assert!(matches!(c.try_acquire_or_renew().await, Err(LeaseError::HeldByOther { .. })));
        a.try_acquire_or_renew().await.expect("renewed");
        // ... and b's record of it is stale: the takeover conflicts or waits, never wins.
        let r = b.try_acquire_or_renew().await;
        assert!(
            matches!(r, Err(LeaseError::HeldByOther { .. }) | Err(LeaseError::Conflict)),
            "{r:?}"
        );
        assert!(!b.is_leader());
        assert!(a.release().await.expect("release"));
        b.try_acquire_or_renew().await.expect("taken after release");
        assert_eq!(lease_spec(&t.admin, "kevents-steps").await["leaseTransitions"], 1);
        assert!(!a.release().await.expect("not holding"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_identity_without_rbac_on_leases_gets_a_typed_error() {
        let t = real().await;
        let mut nobody = LeaderElector::new(t.nobody.requests(), config("kevents-rbac", "nobody"))
            .expect("config");
        match nobody.try_acquire_or_renew().await {
            Err(LeaseError::Forbidden { verb, namespace, name, source }) => {
                assert_eq!((verb, namespace.as_str(), name.as_str()), ("get", "default", "kevents-rbac"));
                assert_eq!(source.code(), Some(403));
            }
            other => panic!("expected Forbidden, got {other:?}"),
        }
        let handle = nobody.spawn();
        tokio::time::sleep(RETRY).await;
        assert!(!handle.is_leader());
        assert!(
            matches!(handle.last_error(), Some(LeaseError::Forbidden { .. })),
            "{:?}",
            handle.last_error()
        );
        handle.release().await.expect("nothing to release");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreadable_lease_is_taken_over_once_unchanged_for_its_duration() {
        // Hostile round 5: a Lease whose acquireTime is in year 9999 (valid RFC 3339,
        // beyond kevents' clock) or whose holderIdentity is 1 MB used to stop every
        // candidate for good. The apiserver stores both; a candidate takes either over once
        // it has not changed for its lease duration, and the server then names it.
        let t = real().await;
        let huge = "h".repeat(1 << 20);
        for (name, holder, acquire) in [
            ("kevents-year-9999", "ghost", "9999-12-31T23:59:59.000000Z"),
            ("kevents-huge-holder", huge.as_str(), "2026-12-07T10:00:00.000000Z"),
        ] {
            let lease = serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": 4,
                         "acquireTime": acquire, "renewTime": "2026-12-07T10:00:00.000000Z"},
            });
            kevents_testkit::send_json(
                &t.admin,
                kevents_core::request::Method::Post,
                "/apis/coordination.k8s.io/v1/namespaces/default/leases".into(),
                kevents_core::request::APPLICATION_JSON,
                &lease,
            )
            .await;
            let stored = lease_spec(&t.admin, name).await;
            assert_eq!(stored["acquireTime"], acquire, "the apiserver stores it as written");
            let started = Instant::now();
            let handle = LeaderElector::new(t.admin.requests(), config(name, "taker"))
                .expect("config")
                .spawn();
            tokio::time::sleep(LEASE - Duration::from_millis(500)).await;
            assert!(!handle.is_leader(), "{name}: taken before it was unchanged for 4 s");
            match handle.last_error() {
                Some(LeaseError::HeldByOther { holder }) => assert!(holder.len() < 200, "{name}: holder shown cut: {} bytes", holder.len()),
                other => panic!("{name}: expected HeldByOther, got {other:?}"),
            }
            wait_leading(&handle, takeover_bound()).await;
            eprintln!("{name}: taken over after {:?}", started.elapsed());
            let spec = lease_spec(&t.admin, name).await;
            assert_eq!(spec["holderIdentity"], "taker", "{name}");
            assert_eq!(spec["leaseTransitions"], 1, "{name}");
            assert_ne!(spec["acquireTime"], acquire, "{name}");
            handle.release().await.expect("released");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_candidates_sharing_an_identity_are_detected() {
        // Both lead (client-go's rule: the Lease names "twin", and each is "twin"); each
        // finds renewals it did not write and counts them (and warns).
        let t = real().await;
        let a = LeaderElector::new(t.admin.requests(), config("kevents-twins", "twin"))
            .expect("config")
            .spawn();
        wait_leading(&a, Duration::from_secs(10)).await;
        let b = LeaderElector::new(t.admin.requests(), config("kevents-twins", "twin"))
            .expect("config")
            .spawn();
        wait_leading(&b, Duration::from_secs(10)).await;
        let deadline = Instant::now() + Duration::from_secs(15);
        while (a.identity_conflicts() == 0 || b.identity_conflicts() == 0) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(a.identity_conflicts() > 0 && b.identity_conflicts() > 0,
            "a saw {}, b saw {}", a.identity_conflicts(), b.identity_conflicts());
        assert_eq!(lease_spec(&t.admin, "kevents-twins").await["holderIdentity"], "twin");
        // One candidate alone sees none.
        let solo = LeaderElector::new(t.admin.requests(), config("kevents-solo", "solo"))
            .expect("config")
            .spawn();
        wait_leading(&solo, Duration::from_secs(10)).await;
        tokio::time::sleep(RETRY * 4).await;
        assert_eq!(solo.identity_conflicts(), 0);
        solo.release().await.expect("released");
        a.release().await.expect("released");
        drop(b);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_processes_the_holder_killed_with_sigkill() {
        let t = real().await;
        let kubeconfig = t.real_apiserver().expect("real").admin_kubeconfig.clone();
        let holder = |identity: &str| {
            let mut child = Command::new(kevents_testkit::example_binary("lease_holder"))
                .arg(&kubeconfig)
                .args(["default", "kevents-procs", identity, "4", "3", "1"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("lease_holder runs");
            let stdout = child.stdout.take().expect("stdout");
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            (child, rx)
        };
        let (mut a, a_lines) = holder("proc-a");
        assert_eq!(
            a_lines.recv_timeout(Duration::from_secs(15)).expect("a leads"),
            "leading proc-a"
        );
        let (mut b, b_lines) = holder("proc-b");
        assert!(
            b_lines.recv_timeout(LEASE * 2).is_err(),
            "b must not lead while a renews"
        );
        a.kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
        let killed = Instant::now();
        a.wait().expect("reaped");
        assert_eq!(
            b_lines.recv_timeout(takeover_bound()).expect("b takes over"),
            "leading proc-b"
        );
        eprintln!("process b took over {:?} after a was killed", killed.elapsed());
        let spec = lease_spec(&t.admin, "kevents-procs").await;
        assert_eq!(spec["holderIdentity"], "proc-b");
        assert_eq!(spec["leaseTransitions"], 1);
        // A clean shutdown (stdin closed) releases.
        drop(b.stdin.take());
        assert_eq!(
            b_lines.recv_timeout(Duration::from_secs(10)).expect("b stops"),
            "released proc-b"
        );
        assert!(b.wait().expect("b exits").success());
        assert_eq!(lease_spec(&t.admin, "kevents-procs").await["holderIdentity"], "");
    }
}

#[test]
fn client_go_validation_before_any_request() {
    let ok = config("l", "a");
    assert!(ok.validate().is_ok());
    let mut c = ok.clone();
    c.lease_duration = RENEW;
    assert!(matches!(
        c.validate(),
        Err(LeaseError::LeaseDurationTooShort { .. })
    ));
    let mut c = ok.clone();
    c.renew_deadline = RETRY.mul_f64(1.2);
    assert!(matches!(
        c.validate(),
        Err(LeaseError::RenewDeadlineTooShort { .. })
    ));
    let mut c = ok.clone();
    c.identity.clear();
    assert_eq!(c.validate(), Err(LeaseError::EmptyIdentity));
    let mut c = ok.clone();
    c.name = "Bad/Name".into();
    assert!(matches!(c.validate(), Err(LeaseError::InvalidName(_))));
    let mut c = ok;
    c.retry_period = Duration::ZERO;
    assert_eq!(c.validate(), Err(LeaseError::ZeroDuration("retry period")));
}
