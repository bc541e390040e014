//! [`FleetLease`]: the link that keeps a fleet's write law
//! (`FleetLaw`: its types and constants are in [`kevents_core::fleet`]) in one coordination.k8s.io/v1 Lease, between a [`FleetMember`]
//! (a write budget) and the apiserver, as a tokio task ([`FleetLeaseHandle`]).
//!
//! Files: `mod.rs` (the link's configuration, [`FleetLease::spawn`], the handle), `body.rs`
//! (what to write given the Lease as last read, and the bodies: no I/O), `link.rs` (the task:
//! the Lease read through [`crate::watcher::Watcher`], proposals written with their
//! `resourceVersion`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kevents_core::fleet::{FleetLaw, FleetMember};
use kevents_core::request::StreamTransport;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::lease::{LeaseConfig, LeaseError};

mod body;
mod link;

use link::Link;

/// The default watch `timeoutSeconds`: the apiserver ends each watch after it, and the link
/// watches again from the last `resourceVersion`.
pub const FLEET_WATCH_TIMEOUT_SECONDS: u64 = 290;

/// How many times a write is decided again after a 409 Conflict before it is retried later
/// (after a back-off).
pub const MAX_WRITE_ATTEMPTS: u32 = 3;

/// The link between one member of a fleet and the Lease that holds the fleet's law: the
/// Lease's namespace and name and this member's identity, checked; [`FleetLease::spawn`]
/// runs it as a task.
///
/// The task lists the Lease (`GET .../leases?fieldSelector=metadata.name=NAME`), then
/// watches it from the list's `resourceVersion` (bookmarks on, `timeoutSeconds` 290:
/// [`FleetLease::with_watch_timeout`]); when the apiserver ends the watch it watches again
/// from the last `resourceVersion`, and when the watch fails (410 Gone included) it lists
/// again. Every law it reads (listed, watched, or read back after a conflict) is given to
/// the member ([`FleetMember::adopt`]; the same law is not given twice in a row, nor the
/// member's own proposal back to it). Meanwhile it awaits
/// the member's next law ([`FleetMember::proposal`]) and writes it after a random wait of up
/// to [`FLEET_WRITE_SPREAD`](kevents_core::fleet::FLEET_WRITE_SPREAD) (another member's write of that epoch, seen meanwhile, spares
/// it the request): a new Lease (`POST`) when
/// there is none; nothing when the Lease already holds a law of the same or a higher epoch
/// (the member adopts that one instead); else the Lease as last read with the law replaced
/// (`PUT` with its `resourceVersion`: optimistic concurrency). A 409 (another member wrote
/// first, or created it first) reads the Lease again and decides again, at most
/// [`MAX_WRITE_ATTEMPTS`] times.
///
/// Fields of the Lease used: `metadata.annotations["kevents.io/fleet-law"]`
/// ([`FLEET_LAW_ANNOTATION`](kevents_core::fleet::FLEET_LAW_ANNOTATION), the law's JSON, checked by [`FleetLaw::from_annotation`]: an
/// invalid one is logged once and ignored, and replaced at the next write),
/// `spec.holderIdentity` (the identity of the member that wrote the law, for people reading
/// the Lease), `metadata.resourceVersion` (optimistic concurrency). Other fields are kept as
/// they are. Give the fleet a Lease of its own (not a leader election's).
///
/// Failures never end the task: transport errors, timeouts and other answers are retried
/// after a jittered back-off (1 s doubling to 30 s), logged at warn the first time and every
/// tenth; a 401/403 (the identity lacks RBAC rights: `get`, `list`, `watch`, `create` and
/// `update` on `leases` in group `coordination.k8s.io`) is logged at warn and retried every
/// 60 s, while the member's budget keeps adapting alone. The task ends when the member is
/// gone ([`FleetMember::proposal`] answers `None`) or the handle stops it.
///
/// ```no_run
/// use kevents_core::fleet::FleetMember;
/// use kevents_core::request::StreamTransport;
/// use kevents_runtime::fleet::FleetLease;
/// # async fn f<T: StreamTransport, M: FleetMember>(sink: T, member: M) -> Result<(), Box<dyn std::error::Error>> {
/// // `sink`: any stream transport (kevents_http::HttpSink, kevents_kube::KubeSink);
/// // `member`: a write budget's (kevents_actors::WriteBudget::join_fleet()).
/// let handle = FleetLease::new("default", "kevents-fleet", "pod-a")?.spawn(sink, member);
/// let mut laws = handle.laws();
/// laws.wait_for(|law| law.is_some()).await?;
/// println!("the fleet's law: {:?}", *laws.borrow());
/// handle.stop().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetLease {
    namespace: String,
    name: String,
    identity: String,
    watch_timeout: Duration,
}

impl FleetLease {
    /// The link to Lease `namespace`/`name` for the member `identity` (written as
    /// `spec.holderIdentity` with its laws), checked as [`LeaseConfig::validate`] does: the
    /// namespace a DNS-1123 label ([`LeaseError::InvalidNamespace`]), the name a DNS-1123
    /// subdomain ([`LeaseError::InvalidName`]), the identity not empty
    /// ([`LeaseError::EmptyIdentity`]). Nothing is sent yet.
    ///
    /// ```
    /// use kevents_runtime::fleet::FleetLease;
    /// use kevents_runtime::lease::LeaseError;
    /// assert!(FleetLease::new("default", "kevents-fleet", "pod-a").is_ok());
    /// assert!(matches!(FleetLease::new("default", "Bad/Name", "pod-a"),
    ///                  Err(LeaseError::InvalidName(_))));
    /// assert_eq!(FleetLease::new("default", "l", ""), Err(LeaseError::EmptyIdentity));
    /// ```
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Result<FleetLease, LeaseError> {
        // LeaseConfig's checks (its default durations pass theirs).
        let config = LeaseConfig::new(namespace, name, identity);
        config.validate()?;
        Ok(FleetLease {
            namespace: config.namespace,
            name: config.name,
            identity: config.identity,
            watch_timeout: Duration::from_secs(FLEET_WATCH_TIMEOUT_SECONDS),
        })
    }

    /// The same with another watch `timeoutSeconds` (default
    /// [`FLEET_WATCH_TIMEOUT_SECONDS`]; whole seconds, at least 1): the apiserver ends each
    /// watch after it, and the link watches again from the last `resourceVersion`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let link = kevents_runtime::fleet::FleetLease::new("default", "kevents-fleet", "pod-a")?
    ///     .with_watch_timeout(Duration::from_secs(60));
    /// assert_eq!(link.watch_timeout(), Duration::from_secs(60));
    /// # Ok::<(), kevents_runtime::lease::LeaseError>(())
    /// ```
    pub fn with_watch_timeout(mut self, timeout: Duration) -> Self {
        self.watch_timeout = Duration::from_secs(timeout.as_secs().max(1));
        self
    }

    /// The watch `timeoutSeconds`.
    pub fn watch_timeout(&self) -> Duration {
        self.watch_timeout
    }

    /// The Lease's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The Lease's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This member's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Runs the link as a task on the caller's tokio runtime: reads and watches the Lease
    /// over `transport`, gives every law read to `member`, writes every law `member` proposes (see
    /// [`FleetLease`]). The task ends when the member is gone
    /// ([`FleetMember::proposal`] answers `None`), at [`FleetLeaseHandle::stop`] or when the
    /// handle is dropped.
    ///
    /// The task awaits [`FleetMember::proposal`] beside the watch and drops that future when
    /// the watch has something first: a proposal must not be lost when its future is dropped
    /// (`kevents_actors::BudgetMember`'s is not).
    ///
    /// # Panics
    ///
    /// When called outside a tokio runtime (as `tokio::spawn`).
    pub fn spawn<T: StreamTransport, M: FleetMember>(
        self,
        transport: T,
        member: M,
    ) -> FleetLeaseHandle {
        let (laws_tx, laws_rx) = watch::channel(None);
        let last_error = Arc::new(Mutex::new(None));
        let link = Link::new(transport, self, laws_tx, last_error.clone());
        let task = tokio::spawn(link.run(member));
        FleetLeaseHandle {
            laws: laws_rx,
            task: Some(task),
            last_error,
        }
    }
}

/// The running link of a [`FleetLease::spawn`]ed task: the law the Lease holds as the link
/// last saw it ([`FleetLeaseHandle::laws`]), the last failure, and
/// [`FleetLeaseHandle::stop`]. Dropping it ends the task too.
///
/// ```no_run
/// # async fn f(handle: kevents_runtime::fleet::FleetLeaseHandle) {
/// let mut laws = handle.laws();
/// while laws.changed().await.is_ok() {
///     println!("the Lease holds {:?}", *laws.borrow());
/// }
/// // The sender is gone: the task ended (the member is gone).
/// # }
/// ```
#[derive(Debug)]
pub struct FleetLeaseHandle {
    laws: watch::Receiver<Option<FleetLaw>>,
    task: Option<JoinHandle<()>>,
    last_error: Arc<Mutex<Option<LeaseError>>>,
}

impl FleetLeaseHandle {
    /// The law the Lease holds as the link last saw it (listed, watched, read back after a
    /// conflict, or written by this link), as a watch channel: `None` before the first read,
    /// when there is no Lease, or when its annotation is missing or invalid. It changes only
    /// when the law does; its sender is dropped when the task ends.
    pub fn laws(&self) -> watch::Receiver<Option<FleetLaw>> {
        self.laws.clone()
    }

    /// The law the Lease holds as the link last saw it (the current value of
    /// [`FleetLeaseHandle::laws`]).
    pub fn law(&self) -> Option<FleetLaw> {
        *self.laws.borrow()
    }

    /// Why the last request failed, if it did (cleared when a write succeeds or the Lease is
    /// listed and watched again): [`LeaseError::Forbidden`] when the identity lacks RBAC
    /// rights on leases, [`LeaseError::Request`] for a transport error or another answer,
    /// [`LeaseError::Conflict`] when [`MAX_WRITE_ATTEMPTS`] writes in a row conflicted.
    pub fn last_error(&self) -> Option<LeaseError> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }

    /// Whether the task has ended (the member is gone, or it was stopped).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Ends the task (a request in flight is dropped; the Lease keeps the last law written)
    /// and waits for it: [`LeaseError::Stopped`] if it had ended abnormally (a panic).
    pub async fn stop(mut self) -> Result<(), LeaseError> {
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        task.abort();
        match task.await {
            Ok(()) => Ok(()),
            Err(e) if e.is_cancelled() => Ok(()),
            Err(e) => Err(LeaseError::Stopped(e.to_string())),
        }
    }
}

impl Drop for FleetLeaseHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use kevents_core::SinkError;
    use kevents_core::fleet::FleetPhase;
    use kevents_core::request::{
        Limits, Request, StreamFuture, StreamRequest, Transport, TransportFuture,
    };
    use tokio::sync::mpsc;
    use tokio::time::{Instant, timeout};

    use super::*;

    fn law(epoch: u64, from: f64) -> FleetLaw {
        FleetLaw {
            epoch,
            phase: FleetPhase::Adapted,
            from,
            since_micros: 1_764_400_000_000_000,
        }
    }

    /// An apiserver nobody reaches: every request fails at once.
    #[derive(Clone)]
    struct Unreachable;

    impl Transport for Unreachable {
        fn send(&self, _: Request) -> TransportFuture<'_> {
            Box::pin(async { Err(SinkError::Transport("connection refused".into())) })
        }
        fn limits(&self) -> Limits {
            Limits::default()
        }
    }

    impl StreamTransport for Unreachable {
        fn open_lines(&self, _: StreamRequest) -> StreamFuture<'_> {
            Box::pin(async { Err(SinkError::Transport("connection refused".into())) })
        }
    }

    #[test]
    fn names_are_checked_as_lease_config_does() {
        assert!(matches!(
            FleetLease::new("Not_A_Namespace", "f", "a"),
            Err(LeaseError::InvalidNamespace(_))
        ));
        assert!(matches!(
            FleetLease::new("default", "a/b", "a"),
            Err(LeaseError::InvalidName(_))
        ));
        let ok = FleetLease::new("default", "f.g", "a").expect("valid");
        assert_eq!(
            (ok.namespace(), ok.name(), ok.identity()),
            ("default", "f.g", "a")
        );
    }

    /// A member whose proposals come from a channel, counting adoptions.
    struct Member {
        proposals: mpsc::UnboundedReceiver<FleetLaw>,
        adopted: Arc<AtomicUsize>,
    }

    impl FleetMember for Member {
        fn adopt(&self, _law: &FleetLaw) {
            self.adopted.fetch_add(1, Ordering::SeqCst);
        }

        async fn proposal(&mut self) -> Option<FleetLaw> {
            self.proposals.recv().await
        }
    }

    #[tokio::test]
    async fn an_unreachable_apiserver_is_retried_and_a_gone_member_ends_the_task() {
        let (tx, rx) = mpsc::unbounded_channel();
        let adopted = Arc::new(AtomicUsize::new(0));
        let member = Member {
            proposals: rx,
            adopted: adopted.clone(),
        };
        let handle = FleetLease::new("default", "f", "a")
            .expect("valid")
            .spawn(Unreachable, member);
        tx.send(law(1, 5.0)).expect("task alive");
        let deadline = Instant::now() + Duration::from_secs(10);
        while handle.last_error().is_none() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            matches!(handle.last_error(), Some(LeaseError::Request(_))),
            "{:?}",
            handle.last_error()
        );
        assert!(!handle.is_finished());
        assert_eq!(handle.law(), None);
        assert_eq!(adopted.load(Ordering::SeqCst), 0);
        // The member is gone: the task ends, the laws' sender with it.
        drop(tx);
        timeout(Duration::from_secs(5), async {
            while !handle.is_finished() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the task ends");
        assert!(
            handle.laws().has_changed().is_err(),
            "the laws' sender is gone"
        );
        handle.stop().await.expect("ended normally");
    }

    #[tokio::test]
    async fn stop_ends_a_running_task() {
        let (_tx, rx) = mpsc::unbounded_channel();
        let member = Member {
            proposals: rx,
            adopted: Arc::new(AtomicUsize::new(0)),
        };
        let handle = FleetLease::new("default", "f", "a")
            .expect("valid")
            .spawn(Unreachable, member);
        let laws = handle.laws();
        timeout(Duration::from_secs(5), handle.stop())
            .await
            .expect("stops at once")
            .expect("stopped");
        assert!(laws.has_changed().is_err(), "the task is gone");
    }
}
