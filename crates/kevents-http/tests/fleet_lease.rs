//! The fleet's Lease link (`FleetLease`) against a real kube-apiserver (v1.20.2, and v1.36
//! with `KEVENTS_K8S_VERSION=1.36`), with fake members (proposals from a channel, adoptions
//! recorded): a proposal creates the Lease and another member adopts it through its watch,
//! and the other way; a stale proposal is not written and its member adopts the stored law;
//! two members proposing the same epoch at once agree on the one stored; a member that
//! starts later adopts the stored law; an identity without RBAC rights on leases keeps
//! running with `LeaseError::Forbidden`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kevents_core::fleet::{FLEET_LAW_ANNOTATION, FleetLaw, FleetMember, FleetPhase};
use kevents_core::request::{APPLICATION_JSON, Method};
use kevents_http::HttpSink;
use kevents_runtime::fleet::{FleetLease, FleetLeaseHandle};
use kevents_runtime::lease::LeaseError;
use kevents_testkit::Target;
use tokio::sync::mpsc;

/// The longest any step may take (a broken link fails, it does not hang).
const WITHIN: Duration = Duration::from_secs(10);

async fn real() -> Target {
    match Target::real().await {
        Ok(Some(t)) => t,
        Ok(None) => panic!("kube-apiserver is not provisioned"),
        Err(e) => panic!("starting kube-apiserver: {e}"),
    }
}

/// A Lease name unique to a test and a run.
fn unique(test: &str) -> String {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(0);
    format!("kevents-fleet-{test}-{:08x}", h.finish() as u32)
}

fn law(epoch: u64, from: f64) -> FleetLaw {
    FleetLaw {
        epoch,
        phase: FleetPhase::Adapted,
        from,
        since_micros: 1_764_400_000_000_000 + epoch as i64,
    }
}

/// A member: its proposals come from a channel, its adoptions are recorded.
struct FakeMember {
    adopted: Arc<Mutex<Vec<FleetLaw>>>,
    proposals: mpsc::UnboundedReceiver<FleetLaw>,
}

impl FleetMember for FakeMember {
    fn adopt(&self, law: &FleetLaw) {
        if let Ok(mut adopted) = self.adopted.lock() {
            adopted.push(*law);
        }
    }

    async fn proposal(&mut self) -> Option<FleetLaw> {
        self.proposals.recv().await
    }
}

/// The test's side of a member and its running link.
struct Member {
    adopted: Arc<Mutex<Vec<FleetLaw>>>,
    propose: mpsc::UnboundedSender<FleetLaw>,
    handle: FleetLeaseHandle,
}

impl Member {
    fn start(sink: &HttpSink, name: &str, identity: &str) -> Member {
        Member::start_link(
            sink,
            FleetLease::new("default", name, identity).expect("valid names"),
        )
    }

    fn start_link(sink: &HttpSink, link: FleetLease) -> Member {
        let adopted = Arc::new(Mutex::new(Vec::new()));
        let (propose, proposals) = mpsc::unbounded_channel();
        let fake = FakeMember {
            adopted: adopted.clone(),
            proposals,
        };
        let handle = link.spawn(sink.clone(), fake);
        Member {
            adopted,
            propose,
            handle,
        }
    }

    fn propose(&self, law: FleetLaw) {
        self.propose.send(law).expect("the link is running");
    }

    fn adopted(&self) -> Vec<FleetLaw> {
        self.adopted.lock().expect("not poisoned").clone()
    }

    /// Waits until the member's adoptions satisfy `done`.
    async fn wait_adopted(&self, what: &str, done: impl Fn(&[FleetLaw]) -> bool) {
        let waited = tokio::time::timeout(WITHIN, async {
            while !done(&self.adopted()) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "{what}: not within {WITHIN:?}; adopted {:?}, last error {:?}",
            self.adopted(),
            self.handle.last_error()
        );
    }

    /// Waits until the link has seen the Lease hold `law` (`None`: no valid law).
    async fn wait_law(&self, law: impl Into<Option<FleetLaw>>) {
        let law = law.into();
        let mut laws = self.handle.laws();
        let seen = tokio::time::timeout(WITHIN, laws.wait_for(|l| *l == law)).await;
        assert!(
            matches!(seen, Ok(Ok(_))),
            "the link did not see {law:?} within {WITHIN:?}: it saw {:?}, last error {:?}",
            self.handle.law(),
            self.handle.last_error()
        );
    }
}

/// The Lease as the apiserver holds it: its law and holder.
async fn stored(sink: &HttpSink, name: &str) -> (FleetLaw, String) {
    let body = sink
        .requests()
        .get(&lease_path(name), 1 << 20)
        .await
        .expect("GET lease");
    let lease: serde_json::Value = serde_json::from_slice(&body).expect("lease JSON");
    let text = lease["metadata"]["annotations"][FLEET_LAW_ANNOTATION]
        .as_str()
        .unwrap_or_else(|| panic!("no law annotation: {lease}"));
    let law = FleetLaw::from_annotation(text).expect("a valid law");
    let holder = lease["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (law, holder)
}

/// The Lease's path.
fn lease_path(name: &str) -> String {
    format!("/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}")
}

/// Another writer (not a link) replaces the law's annotation with `text`.
async fn write_annotation(sink: &HttpSink, name: &str, text: &str) {
    let body = sink
        .requests()
        .get(&lease_path(name), 1 << 20)
        .await
        .expect("GET lease");
    let mut lease: serde_json::Value = serde_json::from_slice(&body).expect("lease JSON");
    lease["metadata"]["annotations"][FLEET_LAW_ANNOTATION] = text.into();
    let answer = sink
        .requests()
        .send(
            Method::Put,
            lease_path(name),
            Some(APPLICATION_JSON),
            serde_json::to_vec(&lease).expect("JSON"),
            1 << 20,
        )
        .await
        .expect("PUT lease");
    assert_eq!(
        answer.code,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
}

/// Another client deletes the Lease.
async fn delete_lease(sink: &HttpSink, name: &str) {
    let answer = sink
        .requests()
        .send(Method::Delete, lease_path(name), None, Vec::new(), 1 << 20)
        .await
        .expect("DELETE lease");
    assert_eq!(
        answer.code,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
}

/// Gives a link time to list and open its watch.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(500)).await;
}

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_proposal_is_stored_and_the_other_member_adopts_it_both_ways() {
        let t = real().await;
        let name = unique("both-ways");
        let a = Member::start(&t.admin, &name, "a");
        let b = Member::start(&t.admin, &name, "b");
        settle().await;
        assert_eq!(a.handle.law(), None, "no Lease yet");

        // (a) A proposes epoch 1: the Lease is created with it; B adopts it via its watch.
        let one = law(1, 10.0);
        a.propose(one);
        a.wait_law(one).await;
        assert_eq!(stored(&t.admin, &name).await, (one, "a".to_owned()));
        b.wait_adopted("B adopts epoch 1", |l| l.last() == Some(&one)).await;
        b.wait_law(one).await;
        assert!(a.adopted().is_empty(), "A is not given its own law: {:?}", a.adopted());

        // (b) B proposes epoch 2: the Lease is updated; A adopts it.
        let two = law(2, 5.0);
        b.propose(two);
        a.wait_adopted("A adopts epoch 2", |l| l.last() == Some(&two)).await;
        assert_eq!(stored(&t.admin, &name).await, (two, "b".to_owned()));
        assert_eq!(b.adopted(), [one], "B is not given its own law");
        assert_eq!(a.handle.last_error(), None);
        assert_eq!(b.handle.last_error(), None);

        // The member gone: its link ends.
        drop(b.propose);
        tokio::time::timeout(WITHIN, async {
            while !b.handle.is_finished() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("B's link ends when B is gone");
        assert!(b.handle.laws().has_changed().is_err(), "its laws' sender is gone");
        a.handle.stop().await.expect("stopped");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stale_proposal_is_not_written_and_its_member_adopts_the_stored_law() {
        let t = real().await;
        let name = unique("stale");
        let a = Member::start(&t.admin, &name, "a");
        let b = Member::start(&t.admin, &name, "b");
        settle().await;
        let one = law(1, 10.0);
        a.propose(one);
        b.wait_adopted("B adopts epoch 1", |l| l.last() == Some(&one)).await;
        let two = law(2, 5.0);
        b.propose(two);
        a.wait_adopted("A adopts epoch 2", |l| l.last() == Some(&two)).await;
        let before = a.adopted().len();

        // (c) A proposes epoch 1 again (stale): nothing written, A is given epoch 2 again.
        a.propose(law(1, 20.0));
        a.wait_adopted("A adopts the stored epoch 2 after its stale proposal", |l| {
            l.len() > before && l.last() == Some(&two)
        })
        .await;
        assert_eq!(stored(&t.admin, &name).await, (two, "b".to_owned()));
        settle().await;
        assert_eq!(stored(&t.admin, &name).await, (two, "b".to_owned()));
        assert_eq!(b.adopted(), [one], "B saw no other write");
        assert_eq!(a.handle.law(), Some(two));
        a.handle.stop().await.expect("stopped");
        b.handle.stop().await.expect("stopped");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_members_proposing_the_same_epoch_at_once_agree_on_the_stored_one() {
        let t = real().await;
        let name = unique("same-epoch");
        let a = Member::start(&t.admin, &name, "a");
        let b = Member::start(&t.admin, &name, "b");
        settle().await;
        // (d) Twice: when there is no Lease yet (both create: one 409 AlreadyExists), then on
        // a Lease both know (both update with the same resourceVersion: one 409 Conflict).
        for (epoch, round) in [(1, "create"), (2, "update")] {
            let (la, lb) = (law(epoch, 10.0), law(epoch, 12.5));
            a.propose(la);
            b.propose(lb);
            // Whichever was stored, both links see it.
            let deadline = tokio::time::Instant::now() + WITHIN;
            let winner = loop {
                let (sa, sb) = (a.handle.law(), b.handle.law());
                if let (Some(sa), Some(sb)) = (sa, sb)
                    && sa == sb
                    && sa.epoch == epoch
                {
                    break sa;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{round}: the links do not agree within {WITHIN:?}: {sa:?} {sb:?}, errors {:?} {:?}",
                    a.handle.last_error(),
                    b.handle.last_error()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            let (law, holder) = stored(&t.admin, &name).await;
            assert_eq!(law, winner, "{round}");
            assert!(law == la || law == lb, "{round}: {law:?}");
            let (winner_member, loser, loser_law) = if law == la {
                assert_eq!(holder, "a", "{round}");
                (&a, &b, lb)
            } else {
                assert_eq!(holder, "b", "{round}");
                (&b, &a, la)
            };
            // The loser was given the stored law; the winner proposed it (not given it).
            loser
                .wait_adopted(round, |l| l.last() == Some(&law))
                .await;
            assert!(!winner_member.adopted().contains(&law), "{round}");
            assert!(!loser.adopted().contains(&loser_law), "{round}");
            assert_eq!(a.handle.last_error(), None, "{round}");
            assert_eq!(b.handle.last_error(), None, "{round}");
        }
        a.handle.stop().await.expect("stopped");
        b.handle.stop().await.expect("stopped");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_that_starts_later_adopts_the_stored_law() {
        let t = real().await;
        let name = unique("later");
        let a = Member::start(&t.admin, &name, "a");
        let three = law(3, 7.5);
        a.propose(three);
        a.wait_law(three).await;
        drop(a);
        // (e) No other member runs; a new one reads the law at start.
        let c = Member::start(&t.admin, &name, "c");
        c.wait_adopted("C adopts the stored law at start", |l| l == [three]).await;
        c.wait_law(three).await;
        // It then follows later laws, and writes its own over them.
        let four = law(4, 3.0);
        c.propose(four);
        c.wait_law(four).await;
        assert_eq!(stored(&t.admin, &name).await, (four, "c".to_owned()));
        assert_eq!(c.adopted(), [three]);
        c.handle.stop().await.expect("stopped");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn renewed_watches_an_invalid_law_and_a_deleted_lease() {
        let t = real().await;
        let name = unique("renewed");
        // Watches of 2 s: renewed from their last resourceVersion several times below.
        let link = |identity: &str| {
            FleetLease::new("default", &name, identity)
                .expect("valid names")
                .with_watch_timeout(Duration::from_secs(2))
        };
        let a = Member::start_link(&t.admin, link("a"));
        let b = Member::start_link(&t.admin, link("b"));
        settle().await;
        let one = law(1, 10.0);
        a.propose(one);
        b.wait_adopted("B adopts epoch 1", |l| l == [one]).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let two = law(2, 5.0);
        a.propose(two);
        b.wait_adopted("B adopts epoch 2 after renewed watches", |l| l == [one, two]).await;
        assert_eq!(a.handle.last_error(), None);
        assert_eq!(b.handle.last_error(), None);

        // Another writer puts an invalid law: the links ignore it (no law), nobody adopts.
        write_annotation(&t.admin, &name, "not a law").await;
        a.wait_law(None).await;
        b.wait_law(None).await;
        assert_eq!(a.adopted(), []);
        assert_eq!(b.adopted(), [one, two]);
        // A proposal replaces it (any epoch: the Lease holds no valid law).
        let three = law(3, 4.0);
        b.propose(three);
        a.wait_adopted("A adopts epoch 3 over the invalid law", |l| l == [three]).await;
        assert_eq!(stored(&t.admin, &name).await, (three, "b".to_owned()));

        // The Lease deleted: no law; the next proposal creates it again.
        delete_lease(&t.admin, &name).await;
        a.wait_law(None).await;
        b.wait_law(None).await;
        let four = law(4, 2.0);
        a.propose(four);
        b.wait_adopted("B adopts epoch 4 in the new Lease", |l| l == [one, two, four]).await;
        assert_eq!(stored(&t.admin, &name).await, (four, "a".to_owned()));
        assert_eq!(a.handle.last_error(), None);
        assert_eq!(b.handle.last_error(), None);
        a.handle.stop().await.expect("stopped");
        b.handle.stop().await.expect("stopped");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_identity_without_rbac_on_leases_keeps_running_with_forbidden() {
        let t = real().await;
        let name = unique("rbac");
        let nobody = Member::start(&t.nobody, &name, "nobody");
        let waited = tokio::time::timeout(WITHIN, async {
            while nobody.handle.last_error().is_none() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "no error reported");
        match nobody.handle.last_error() {
            Some(LeaseError::Forbidden { verb, namespace, name: n, source }) => {
                assert_eq!((verb, namespace.as_str()), ("list", "default"));
                assert_eq!(n, name);
                assert_eq!(source.code(), Some(403));
            }
            other => panic!("expected Forbidden, got {other:?}"),
        }
        // A proposal is refused too (create), and the link keeps running.
        nobody.propose(law(1, 1.0));
        let waited = tokio::time::timeout(WITHIN, async {
            while !matches!(
                nobody.handle.last_error(),
                Some(LeaseError::Forbidden { verb: "create", .. })
            ) {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "create not refused: {:?}", nobody.handle.last_error());
        assert!(!nobody.handle.is_finished());
        assert!(nobody.adopted().is_empty());
        nobody.handle.stop().await.expect("stopped");
    }
}
