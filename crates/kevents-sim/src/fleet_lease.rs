//! A fleet's shared law kept in memory as kube-apiserver keeps it in a Lease
//! ([`MemoryLease`]): a write of a law whose epoch is not above the stored one's is refused
//! (the optimistic concurrency `kevents_runtime::fleet::FleetLease` relies on), and every
//! member sees each change (a watch), each leg after a latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kevents_core::fleet::{FLEET_WRITE_SPREAD, FleetLaw, FleetMember};
use tokio::sync::watch;
use tokio::task::JoinHandle;

#[derive(Debug)]
struct Shared {
    stored: Mutex<Option<FleetLaw>>,
    changes: watch::Sender<Option<FleetLaw>>,
    latency: Duration,
    writes: AtomicU64,
    refused: AtomicU64,
}

/// One Lease holding a fleet's law, in memory; clone the handle for every member.
///
/// ```
/// use std::time::Duration;
/// use kevents_sim::fleet_lease::MemoryLease;
///
/// let lease = MemoryLease::new(Duration::from_millis(5));
/// assert_eq!(lease.law(), None);
/// assert_eq!(lease.writes(), 0);
/// // lease.spawn(budget.join_fleet()) for every member, on a tokio runtime.
/// ```
#[derive(Debug, Clone)]
pub struct MemoryLease(Arc<Shared>);

impl MemoryLease {
    /// An empty Lease whose every leg (a member's write reaching it, a change reaching a
    /// member) takes `latency`.
    pub fn new(latency: Duration) -> Self {
        MemoryLease(Arc::new(Shared {
            stored: Mutex::new(None),
            changes: watch::channel(None).0,
            latency,
            writes: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }))
    }

    /// The law stored now.
    pub fn law(&self) -> Option<FleetLaw> {
        *self.0.stored.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Laws written (each a member's proposal of a newer epoch).
    pub fn writes(&self) -> u64 {
        self.0.writes.load(Ordering::Relaxed)
    }

    /// Proposals refused (a law of that epoch or a later one was stored first).
    pub fn refused(&self) -> u64 {
        self.0.refused.load(Ordering::Relaxed)
    }

    /// Writes `law` if its epoch is above the stored one's; else returns the stored law.
    fn write(&self, law: FleetLaw) -> Result<(), FleetLaw> {
        let mut stored = self.0.stored.lock().unwrap_or_else(|p| p.into_inner());
        match *stored {
            Some(s) if s.epoch >= law.epoch => {
                self.0.refused.fetch_add(1, Ordering::Relaxed);
                Err(s)
            }
            _ => {
                *stored = Some(law);
                self.0.writes.fetch_add(1, Ordering::Relaxed);
                self.0.changes.send_replace(Some(law));
                Ok(())
            }
        }
    }

    /// Links `member` to the Lease on the current tokio runtime until the member is gone:
    /// it follows every law stored (the one there now first), and writes each proposal
    /// after a random wait of up to [`FLEET_WRITE_SPREAD`] (50 ms) unless a
    /// law of its epoch or a later one reached it meanwhile, as `FleetLease` does (a refused
    /// one: it follows the stored law instead).
    pub fn spawn<M: FleetMember>(&self, mut member: M) -> JoinHandle<()> {
        let lease = self.clone();
        let mut changes = self.0.changes.subscribe();
        // Each link's own jitter (xorshift64*, seeded per link).
        let mut seed = SEEDS.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) | 1;
        let mut jitter = move || {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            let unit =
                (seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64;
            FLEET_WRITE_SPREAD.mul_f64(unit)
        };
        tokio::spawn(async move {
            let latency = lease.0.latency;
            let mut seen = *changes.borrow_and_update();
            if let Some(law) = seen {
                member.adopt(&law);
            }
            let mut pending: Option<(FleetLaw, tokio::time::Instant)> = None;
            loop {
                let write_at = pending.map(|(_, at)| at);
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        let law = *changes.borrow_and_update();
                        tokio::time::sleep(latency).await;
                        seen = law;
                        if let Some(law) = law {
                            member.adopt(&law);
                        }
                    }
                    proposal = member.proposal() => {
                        let Some(law) = proposal else { return };
                        pending = Some((law, tokio::time::Instant::now() + jitter()));
                    }
                    _ = tokio::time::sleep_until(write_at.unwrap_or_else(tokio::time::Instant::now)), if write_at.is_some() => {
                        let Some((law, _)) = pending.take() else { continue };
                        if seen.is_some_and(|s| s.epoch >= law.epoch) {
                            continue;
                        }
                        tokio::time::sleep(latency).await;
                        if let Err(stored) = lease.write(law) {
                            tokio::time::sleep(latency).await;
                            member.adopt(&stored);
                        }
                    }
                }
            }
        })
    }
}

/// Seeds of the links' jitter.
static SEEDS: AtomicU64 = AtomicU64::new(0x2545_F491_4F6C_DD1D);

#[cfg(test)]
mod tests {
    use super::*;
    use kevents_core::fleet::FleetPhase;
    use tokio::sync::mpsc;

    struct Member {
        adopted: Arc<Mutex<Vec<u64>>>,
        proposals: mpsc::UnboundedReceiver<FleetLaw>,
    }

    impl FleetMember for Member {
        fn adopt(&self, law: &FleetLaw) {
            self.adopted.lock().unwrap().push(law.epoch);
        }
        async fn proposal(&mut self) -> Option<FleetLaw> {
            self.proposals.recv().await
        }
    }

    fn law(epoch: u64) -> FleetLaw {
        FleetLaw {
            epoch,
            phase: FleetPhase::Adapted,
            from: 1.0,
            since_micros: 0,
        }
    }

    fn member() -> (
        Member,
        Arc<Mutex<Vec<u64>>>,
        mpsc::UnboundedSender<FleetLaw>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let adopted = Arc::new(Mutex::new(Vec::new()));
        (
            Member {
                adopted: adopted.clone(),
                proposals: rx,
            },
            adopted,
            tx,
        )
    }

    /// A proposal of a newer epoch is stored and seen by every member; one of an epoch
    /// already seen is not written; two of one epoch at once: one stored, the other refused
    /// and its member follows the stored law; a member gone ends its link.
    #[tokio::test(start_paused = true)]
    async fn newer_laws_are_stored_and_followed_by_every_member() {
        let lease = MemoryLease::new(Duration::from_millis(5));
        let (a, seen_a, propose_a) = member();
        let (b, seen_b, propose_b) = member();
        let task_a = lease.spawn(a);
        let _task_b = lease.spawn(b);
        propose_a.send(law(1)).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(lease.law(), Some(law(1)));
        assert_eq!(*seen_b.lock().unwrap(), vec![1]);
        assert_eq!(*seen_a.lock().unwrap(), vec![1], "its own, seen back");
        // B proposes epoch 1 too, having seen it: nothing is written.
        propose_b.send(law(1)).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!((lease.writes(), lease.refused()), (1, 0));
        // Both propose epoch 2 at once: one is stored; the other, unless it saw that one
        // first, is refused; both follow epoch 2.
        propose_a.send(law(2)).unwrap();
        propose_b.send(law(2)).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(lease.law().map(|l| l.epoch), Some(2));
        assert_eq!(lease.writes(), 2);
        assert!(lease.refused() <= 1);
        for seen in [&seen_a, &seen_b] {
            let seen = seen.lock().unwrap();
            assert_eq!(seen[..2], [1, 2], "{seen:?}");
            assert!(seen.iter().all(|&e| e <= 2), "{seen:?}");
        }
        drop(propose_a);
        tokio::time::timeout(Duration::from_secs(1), task_a)
            .await
            .expect("the link ends")
            .expect("no panic");
    }
}
