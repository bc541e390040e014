//! Lead or stand by: [`run_while_leading`] runs work only while a [`LeaderHandle`] leads,
//! stops it when the Lease is lost, and starts it again when this candidate leads again. The
//! export and any application use it the same way.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use thiserror::Error;
use tokio::sync::watch;

use crate::lease::{LeaderHandle, LeaseError};

/// One term of leadership, given to the work [`run_while_leading`] starts: its number, and
/// [`Term::lost`], which completes when the term ends (the Lease lost, or shutdown asked for)
/// so that work which can stop cleanly does.
#[derive(Debug, Clone)]
pub struct Term {
    number: u64,
    leader: watch::Receiver<bool>,
    stop: watch::Receiver<bool>,
}

impl Term {
    /// 1 for the first term of this call, then 2, ...
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Completes when this term ends: the candidate no longer leads (or its elector ended),
    /// or shutdown was asked for.
    pub async fn lost(&self) {
        let mut leader = self.leader.clone();
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = leader.wait_for(|leads| !*leads) => {}
            _ = stop.wait_for(|stopped| *stopped) => {}
        }
    }

    /// Whether this term has ended (see [`Term::lost`]).
    pub fn is_lost(&self) -> bool {
        !*self.leader.borrow() || *self.stop.borrow()
    }
}

/// What [`run_while_leading`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Terms {
    /// Terms begun (times this candidate began to lead).
    pub led: u64,
    /// Terms that ended with the Lease lost (not by shutdown).
    pub lost: u64,
    /// Terms whose work did not return within the grace period after the term ended, and
    /// was dropped.
    pub dropped: u64,
}

/// Why [`run_while_leading`] ended early.
#[derive(Debug, Error)]
pub enum LeadError<E> {
    /// The work failed; nothing more is started (release the Lease, or let it expire).
    #[error("the work failed while leading: {0}")]
    Work(E),
    /// The elector's task ended (it was released or panicked): nobody can lead through it.
    #[error("the leader elector ended{}", match .0 { Some(e) => format!(": {e}"), None => String::new() })]
    ElectorEnded(Option<LeaseError>),
}

/// Runs `work` each time `handle`'s candidate begins to lead, until `shutdown` completes.
///
/// Each term's work gets a [`Term`]. When the term ends (the Lease is lost, or `shutdown`
/// completes), [`Term::lost`] completes, and the work has `grace` to return (zero: it is
/// dropped at once, its future never polled again); then it is dropped. Work that returns
/// `Ok(())` while still leading ends the call (it is done); work that returns an error ends it
/// with [`LeadError::Work`]. The caller releases the Lease afterwards
/// ([`LeaderHandle::release`]).
///
/// Losing the Lease is the elector's judgement on its own clock (client-go's: no fencing);
/// work that writes where another leader may write too needs a fence of its own there.
///
/// ```no_run
/// use std::time::Duration;
/// use kevents_core::request::{Client, Transport};
/// use kevents_runtime::lead::run_while_leading;
/// use kevents_runtime::lease::{LeaderElector, LeaseConfig};
/// # async fn f<T: Transport>(requests: Client<T>) -> Result<(), Box<dyn std::error::Error>> {
/// let config = LeaseConfig::new("default", "my-controller", "pod-a");
/// let handle = LeaderElector::new(requests, config)?.spawn();
/// let shutdown = async { /* e.g. tokio::signal::ctrl_c() */ };
/// let terms = run_while_leading(&handle, shutdown, Duration::ZERO, |term| async move {
///     println!("term {} begins", term.number());
///     term.lost().await; // ... the controller's work, until the term ends ...
///     Ok::<(), std::io::Error>(())
/// })
/// .await?;
/// println!("led {} times, lost the Lease {} times", terms.led, terms.lost);
/// handle.release().await?;
/// # Ok(()) }
/// ```
pub async fn run_while_leading<F, Fut, E>(
    handle: &LeaderHandle,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    mut work: F,
) -> Result<Terms, LeadError<E>>
where
    F: FnMut(Term) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    let mut leader = handle.changes();
    let mut terms = Terms::default();
    loop {
        // Stand by until this candidate leads, or shutdown.
        tokio::select! {
            biased;
            _ = &mut shutdown => return Ok(terms),
            led = leader.wait_for(|leads| *leads) => {
                if led.is_err() {
                    return Err(LeadError::ElectorEnded(handle.last_error()));
                }
            }
        }
        terms.led += 1;
        tracing::info!(term = terms.led, "leading: the work starts");
        let term = Term {
            number: terms.led,
            leader: handle.changes(),
            stop: stop_rx.clone(),
        };
        let mut running = pin!(work(term));
        let mut shut = false;
        let ended = tokio::select! {
            biased;
            result = &mut running => Some(result),
            _ = &mut shutdown => {
                shut = true;
                None
            }
            _ = leader.wait_for(|leads| !*leads) => None,
        };
        let ended = match ended {
            Some(result) => Some(result),
            None => {
                // The term ended: tell the work, give it its grace, then drop it.
                if shut {
                    stop_tx.send_replace(true);
                }
                tokio::time::timeout(grace, &mut running).await.ok()
            }
        };
        let still_leading = *leader.borrow() && !shut;
        match ended {
            Some(Err(e)) => return Err(LeadError::Work(e)),
            Some(Ok(())) if still_leading => return Ok(terms),
            Some(Ok(())) => {}
            None => {
                terms.dropped += 1;
                tracing::info!(
                    term = terms.led,
                    "the work did not stop within its grace: dropped"
                );
            }
        }
        if shut {
            return Ok(terms);
        }
        terms.lost += 1;
        tracing::info!(
            term = terms.led,
            "the Lease was lost: the work stopped, standing by"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::lease::LeaderHandle;

    /// A handle whose leadership the test sets.
    fn handle() -> (watch::Sender<bool>, LeaderHandle) {
        let (tx, rx) = watch::channel(false);
        (tx, LeaderHandle::for_tests(rx))
    }

    #[tokio::test(start_paused = true)]
    async fn work_runs_only_while_leading_and_is_dropped_when_the_lease_is_lost() {
        let (leads, handle) = handle();
        let running = Arc::new(AtomicU64::new(0));
        let polls = running.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let driver = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert_eq!(polls.load(Ordering::SeqCst), 0, "no work while standing by");
            leads.send_replace(true);
            tokio::time::sleep(Duration::from_secs(1)).await;
            let during = polls.load(Ordering::SeqCst);
            assert!(during >= 9, "{during}");
            leads.send_replace(false);
            tokio::time::sleep(Duration::from_millis(50)).await;
            let after = polls.load(Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert_eq!(polls.load(Ordering::SeqCst), after, "dropped at once");
            leads.send_replace(true);
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert!(polls.load(Ordering::SeqCst) > after, "a second term");
            let _ = stop.send(());
        };
        let run = run_while_leading(
            &handle,
            async {
                let _ = stopped.await;
            },
            Duration::ZERO,
            |_term| {
                let running = running.clone();
                async move {
                    loop {
                        running.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    #[allow(unreachable_code)]
                    Ok::<(), std::io::Error>(())
                }
            },
        );
        let (terms, ()) = tokio::join!(run, driver);
        let terms = terms.expect("ran");
        assert_eq!(
            terms,
            Terms {
                led: 2,
                lost: 1,
                dropped: 2
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_stops_cleanly_gets_its_grace_and_errors_end_the_call() {
        let (leads, handle) = handle();
        leads.send_replace(true);
        let flip = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            leads.send_replace(false);
        };
        let run = run_while_leading(
            &handle,
            std::future::pending(),
            Duration::from_secs(5),
            |term| async move {
                term.lost().await;
                assert!(term.is_lost());
                // Cleaning up takes a while, within the grace.
                tokio::time::sleep(Duration::from_secs(2)).await;
                Err::<(), _>(std::io::Error::other("saved and stopped"))
            },
        );
        let (result, ()) = tokio::join!(run, flip);
        assert!(matches!(result, Err(LeadError::Work(e)) if e.to_string() == "saved and stopped"));
    }

    #[tokio::test(start_paused = true)]
    async fn an_ended_elector_ends_the_call() {
        let (leads, handle) = handle();
        drop(leads);
        let result =
            run_while_leading(&handle, std::future::pending(), Duration::ZERO, |_| async {
                Ok::<(), std::io::Error>(())
            })
            .await;
        assert!(matches!(result, Err(LeadError::ElectorEnded(None))));
    }
}
