//! [`LeaderElector`]: the requests of one election step over kevents-core's request layer,
//! and the loop of client-go's `LeaderElector.Run` as a tokio task ([`LeaderHandle`]).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kevents_core::request::{APPLICATION_JSON, Client, Method, Response, Transport};
use kevents_core::{Clock, SystemClock};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};

use super::config::{JITTER_FACTOR, LeaseConfig, LeaseError};
use super::decide::{Election, Step};
use super::record::{LeaseRecord, decode_lease, get_lease, lease_path, new_lease, updated_lease};

pub use super::record::MAX_LEASE_BYTES;

/// The pause before a release is written again after a 409 Conflict.
const RELEASE_CONFLICT_PAUSE: Duration = Duration::from_millis(20);

/// A candidate in a coordination.k8s.io/v1 Lease election, with client-go's
/// `tools/leaderelection` rules over a `LeaseLock`: read the Lease; create it if missing; if
/// another candidate holds it and it has not expired (not seen changing, on this process's
/// clock, for its `leaseDurationSeconds`), wait; else write it (`PUT` with its
/// `resourceVersion`: a 409 means another candidate won). `leaseTransitions` counts the
/// changes of holder.
///
/// One step at a time with [`LeaderElector::try_acquire_or_renew`], or the whole loop as a
/// task with [`LeaderElector::spawn`]. Every request has the transport's deadline and reads at
/// most [`MAX_LEASE_BYTES`].
///
/// ```no_run
/// use kevents_runtime::lease::{LeaderElector, LeaseConfig};
/// use kevents_core::request::{Client, Transport};
/// # async fn f<T: Transport>(requests: Client<T>) -> Result<(), Box<dyn std::error::Error>> {
/// // `requests`: kevents_http::HttpSink::requests() or kevents_kube::KubeSink::requests().
/// let config = LeaseConfig::new("default", "my-controller", "pod-a");
/// let handle = LeaderElector::new(requests, config)?.spawn();
/// let mut changes = handle.changes();
/// changes.wait_for(|leading| *leading).await?;
/// println!("leading");
/// handle.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LeaderElector<T> {
    client: Client<T>,
    config: LeaseConfig,
    election: Election,
    /// The Lease as last read or written (its resourceVersion for the next update).
    lease: Option<Value>,
    /// The raw record last warned about as unreadable (warned once per change).
    warned_unreadable: Option<String>,
}

impl<T: Transport> LeaderElector<T> {
    /// A candidate over `client` (`HttpSink::requests()`, `KubeSink::requests()`, or any
    /// transport's), `config` checked by [`LeaseConfig::validate`]; nothing is sent yet.
    ///
    /// ```
    /// use kevents_core::request::{Client, Limits, Request, Transport, TransportFuture};
    /// use kevents_runtime::lease::{LeaderElector, LeaseConfig, LeaseError};
    /// # #[derive(Clone)] struct Nowhere;
    /// # impl Transport for Nowhere {
    /// #     fn send(&self, _: Request) -> TransportFuture<'_> { unreachable!() }
    /// #     fn limits(&self) -> Limits { Limits::default() }
    /// # }
    /// let bad = LeaseConfig::new("Not_A_Namespace", "l", "a");
    /// assert!(matches!(LeaderElector::new(Client::new(Nowhere), bad),
    ///                  Err(LeaseError::InvalidNamespace(_))));
    /// ```
    pub fn new(client: Client<T>, config: LeaseConfig) -> Result<Self, LeaseError> {
        config.validate()?;
        let election = Election::new(config.identity.clone(), config.lease_seconds());
        Ok(LeaderElector {
            client,
            config,
            election,
            lease: None,
            warned_unreadable: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// Whether the record last read or written names this candidate as holder (client-go's
    /// `IsLeader`; the spawned loop's [`LeaderHandle::is_leader`] also turns `false` when a
    /// renewal misses its deadline).
    pub fn is_leader(&self) -> bool {
        self.election.is_leader()
    }

    /// The holder named by the record last read or written (empty: nobody, or not read yet).
    pub fn observed_holder(&self) -> &str {
        self.election.holder()
    }

    /// One step (client-go's `tryAcquireOrRenew`): `Ok(())` when this candidate holds the
    /// Lease afterwards (created, taken over or renewed);
    /// [`LeaseError::HeldByOther`] when another holds it and it has not expired;
    /// [`LeaseError::Conflict`] when another wrote it first; [`LeaseError::Forbidden`] when
    /// this identity may not read or write it.
    pub async fn try_acquire_or_renew(&mut self) -> Result<(), LeaseError> {
        let read_at = Instant::now().into_std();
        let wall = SystemClock.now();
        let current = self.get().await?;
        let record = current.as_ref().map(|lease| self.read_record(lease));
        if current.is_some() {
            self.lease = current;
        }
        let unreadable = record.as_ref().and_then(|r| r.unreadable.clone());
        let foreign = self.election.foreign_renewals();
        let step = self.election.step(read_at, wall, record.as_ref());
        if self.election.foreign_renewals() > foreign {
            tracing::warn!(
                namespace = %self.config.namespace,
                name = %self.config.name,
                identity = %self.config.identity,
                "the Lease was renewed under this identity by another process: two candidates share one identity and both lead (give each replica its own identity)"
            );
        }
        match step {
            Step::Wait { holder } => Err(LeaseError::HeldByOther { holder }),
            Step::Create(record) => {
                let body = new_lease(&self.config.namespace, &self.config.name, &record);
                let lease = self.write(Method::Post, "create", &body).await?;
                self.lease = Some(lease);
                self.election.written(Instant::now().into_std(), record);
                Ok(())
            }
            Step::Update(record) => {
                if let Some(why) = &unreadable {
                    tracing::warn!(
                        namespace = %self.config.namespace,
                        name = %self.config.name,
                        identity = %self.config.identity,
                        unreadable = %why,
                        "taking over the Lease whose record could not be read, unchanged for its lease duration"
                    );
                }
                let base = self.lease.clone().unwrap_or(Value::Null);
                let body = updated_lease(&base, &record);
                let lease = self.write(Method::Put, "update", &body).await?;
                self.lease = Some(lease);
                self.election.written(Instant::now().into_std(), record);
                Ok(())
            }
        }
    }

    /// Gives the Lease up if this candidate holds it (client-go's `release`, what its
    /// `ReleaseOnCancel` does): reads it, and if it still names this candidate writes it
    /// with no holder and `leaseDurationSeconds` 1, so that a standby takes over at its next
    /// try. A 409 Conflict (a renewal in flight landed between the read and the write) reads
    /// it again and tries again within the renew deadline, as client-go 1.37 does. `Ok(true)`
    /// when released, `Ok(false)` when not holding it.
    pub async fn release(&mut self) -> Result<bool, LeaseError> {
        let deadline = Instant::now() + self.config.renew_deadline;
        loop {
            match self.release_once().await {
                Err(LeaseError::Conflict) if Instant::now() < deadline => {
                    sleep(RELEASE_CONFLICT_PAUSE).await;
                }
                other => return other,
            }
        }
    }

    /// One read and, if this candidate holds the Lease, one write of its release.
    async fn release_once(&mut self) -> Result<bool, LeaseError> {
        let read_at = Instant::now().into_std();
        let Some(lease) = self.get().await? else {
            return Ok(false);
        };
        let record = self.read_record(&lease);
        self.election.observe(read_at, &record);
        self.lease = Some(lease);
        let Some(released) = self.election.release_record(SystemClock.now()) else {
            return Ok(false);
        };
        let base = self.lease.clone().unwrap_or(Value::Null);
        let lease = self
            .write(Method::Put, "update", &updated_lease(&base, &released))
            .await?;
        self.lease = Some(lease);
        self.election.written(Instant::now().into_std(), released);
        Ok(true)
    }

    /// Runs the election as a tokio task (client-go's `Run` with `ReleaseOnCancel`), which
    /// must be called within a tokio runtime: try every retry period (jittered by up to
    /// [`JITTER_FACTOR`]) until this candidate holds the Lease; then renew it every retry
    /// period; a renewal that has not succeeded within the renew deadline, or that finds
    /// another holder in the Lease, ends leadership
    /// ([`LeaderHandle::changes`] turns `false` at that moment, requests in flight are
    /// dropped) and the task becomes a candidate again. [`LeaderHandle::release`] ends it and
    /// gives the Lease up; dropping the handle ends it without (the Lease then expires after
    /// its duration, as when a process dies).
    pub fn spawn(self) -> LeaderHandle {
        let (leader_tx, leader_rx) = watch::channel(false);
        let (stop_tx, stop_rx) = watch::channel(false);
        let last_error = Arc::new(Mutex::new(None));
        let identity_conflicts = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(self.run(
            leader_tx,
            stop_rx,
            last_error.clone(),
            identity_conflicts.clone(),
        ));
        LeaderHandle {
            leader: leader_rx,
            stop: stop_tx,
            task: Some(task),
            last_error,
            identity_conflicts,
        }
    }

    async fn run(
        mut self,
        leader: watch::Sender<bool>,
        mut stop: watch::Receiver<bool>,
        last_error: Arc<Mutex<Option<LeaseError>>>,
        identity_conflicts: Arc<AtomicU64>,
    ) -> Result<(), LeaseError> {
        let note = |e: Option<LeaseError>, conflicts: u64| {
            identity_conflicts.store(conflicts, Ordering::Relaxed);
            if let Ok(mut slot) = last_error.lock() {
                *slot = e;
            }
        };
        let retry = self.config.retry_period;
        let renew_deadline = self.config.renew_deadline;
        loop {
            // Acquire (client-go's `acquire`: `JitterUntil` the retry period, factor 1.2).
            loop {
                // Each try bounded by the renew deadline too (a transport's own deadline
                // may be longer).
                let attempt = tokio::select! {
                    r = timeout(renew_deadline, self.try_acquire_or_renew()) => {
                        r.unwrap_or(Err(LeaseError::Deadline(renew_deadline)))
                    }
                    _ = stopped(&mut stop) => return Ok(()),
                };
                match attempt {
                    Ok(()) => {
                        note(None, self.identity_conflicts());
                        break;
                    }
                    Err(e) => {
                        if matches!(e, LeaseError::Forbidden { .. }) {
                            tracing::warn!(error = %e, "lease election");
                        } else {
                            tracing::debug!(error = %e, "lease not acquired");
                        }
                        note(Some(e), self.identity_conflicts());
                    }
                }
                tokio::select! {
                    _ = sleep(jittered(retry)) => {}
                    _ = stopped(&mut stop) => return Ok(()),
                }
            }
            tracing::info!(
                namespace = %self.config.namespace,
                name = %self.config.name,
                identity = %self.config.identity,
                "became leader"
            );
            leader.send_replace(true);
            // Renew (client-go's `renew`): every retry period, each renewal retried every retry
            // period until the renew deadline.
            let mut lost =
                format!("the Lease was not renewed within the renew deadline ({renew_deadline:?})");
            'renew: loop {
                tokio::select! {
                    _ = sleep(retry) => {}
                    _ = stopped(&mut stop) => return self.stop_leading(&leader).await,
                }
                let deadline = Instant::now() + renew_deadline;
                loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    let attempt = tokio::select! {
                        r = timeout(left, self.try_acquire_or_renew()) => r,
                        _ = stopped(&mut stop) => return self.stop_leading(&leader).await,
                    };
                    match attempt {
                        Ok(Ok(())) => {
                            note(None, self.identity_conflicts());
                            continue 'renew;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, "lease not renewed");
                            if let LeaseError::HeldByOther { holder } = &e {
                                // Another candidate holds it now: leadership ends at once
                                // (client-go's `IsLeader` turns false here too).
                                lost = format!("another holder took the Lease: {holder:?}");
                                note(Some(e), self.identity_conflicts());
                                break 'renew;
                            }
                            note(Some(e), self.identity_conflicts());
                        }
                        Err(_) => note(
                            Some(LeaseError::Deadline(renew_deadline)),
                            self.identity_conflicts(),
                        ),
                    }
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break 'renew;
                    }
                    tokio::select! {
                        _ = sleep(retry.min(left)) => {}
                        _ = stopped(&mut stop) => return self.stop_leading(&leader).await,
                    }
                }
            }
            leader.send_replace(false);
            tracing::warn!(
                namespace = %self.config.namespace,
                name = %self.config.name,
                identity = %self.config.identity,
                "leadership lost: {lost}"
            );
        }
    }

    /// Stops leading and gives the Lease up, within the renew deadline.
    async fn stop_leading(&mut self, leader: &watch::Sender<bool>) -> Result<(), LeaseError> {
        leader.send_replace(false);
        let deadline = self.config.renew_deadline;
        match timeout(deadline, self.release()).await {
            Ok(r) => r.map(|_| ()),
            Err(_) => Err(LeaseError::Deadline(deadline)),
        }
    }

    /// The record in `lease`, a record that cannot be read in full warned about (once per
    /// change of its bytes): it names nobody, and it is taken over once unchanged for its lease
    /// duration, as client-go takes over any record nobody renews.
    fn read_record(&mut self, lease: &Value) -> LeaseRecord {
        let record = LeaseRecord::from_lease(lease, self.config.lease_seconds());
        if let Some(why) = &record.unreadable
            && self.warned_unreadable.as_deref() != Some(record.raw.as_str())
        {
            self.warned_unreadable = Some(record.raw.clone());
            tracing::warn!(
                namespace = %self.config.namespace,
                name = %self.config.name,
                unreadable = %why,
                "the Lease's record could not be read: it is taken over if it does not change for {} s",
                record.lease_duration_seconds
            );
        }
        record
    }

    /// How many times the Lease was found renewed under this candidate's identity by
    /// another process (two replicas given the same identity both lead, as with client-go;
    /// each such renewal is warned about).
    pub fn identity_conflicts(&self) -> u64 {
        self.election.foreign_renewals()
    }

    /// `GET` of the Lease: `None` when not found.
    async fn get(&self) -> Result<Option<Value>, LeaseError> {
        get_lease(&self.client, &self.config.namespace, &self.config.name).await
    }

    /// A create (`POST`) or update (`PUT`) of the Lease: the object the server stored.
    async fn write(
        &self,
        method: Method,
        verb: &'static str,
        body: &Value,
    ) -> Result<Value, LeaseError> {
        let name = (method != Method::Post).then_some(self.config.name.as_str());
        let path = lease_path(&self.config.namespace, name);
        let body = serde_json::to_vec(body).map_err(|e| LeaseError::Decode(e.to_string()))?;
        let answer = self
            .client
            .send(method, path, Some(APPLICATION_JSON), body, MAX_LEASE_BYTES)
            .await
            .map_err(LeaseError::Request)?;
        if answer.code == 409 {
            return Err(LeaseError::Conflict);
        }
        self.decode(answer, verb)
    }

    /// A 2xx answer's Lease; 401/403 are [`LeaseError::Forbidden`], other answers the
    /// server's error.
    fn decode(&self, answer: Response, verb: &'static str) -> Result<Value, LeaseError> {
        decode_lease(answer, verb, &self.config.namespace, &self.config.name)
    }
}

/// Waits until a stop is asked for (or the handle is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// `period` stretched by a random part of up to [`JITTER_FACTOR`] × `period` (client-go's
/// `wait.Jitter`).
fn jittered(period: Duration) -> Duration {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(0);
    let unit = (h.finish() >> 11) as f64 / (1u64 << 53) as f64;
    period + period.mul_f64(JITTER_FACTOR * unit)
}

/// The running election of a [`LeaderElector::spawn`]ed task: whether this candidate leads
/// now, a channel of the changes, and [`LeaderHandle::release`] for a clean shutdown.
/// Dropping it ends the task without giving the Lease up.
///
/// ```no_run
/// # async fn f(handle: kevents_runtime::lease::LeaderHandle) {
/// let mut changes = handle.changes();
/// while changes.changed().await.is_ok() {
///     println!("leading: {}", *changes.borrow());
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct LeaderHandle {
    leader: watch::Receiver<bool>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<Result<(), LeaseError>>>,
    last_error: Arc<Mutex<Option<LeaseError>>>,
    identity_conflicts: Arc<AtomicU64>,
}

impl LeaderHandle {
    /// A handle whose leadership `leader` gives (no task): for tests of what runs over it.
    #[cfg(test)]
    pub(crate) fn for_tests(leader: watch::Receiver<bool>) -> Self {
        LeaderHandle {
            leader,
            stop: watch::channel(false).0,
            task: None,
            last_error: Arc::new(Mutex::new(None)),
            identity_conflicts: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Whether this candidate leads now (it holds the Lease and renewed it within the renew
    /// deadline).
    pub fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    /// The leadership as a watch channel: `true` when it starts, `false` at once when it
    /// ends (renewal deadline missed, release).
    pub fn changes(&self) -> watch::Receiver<bool> {
        self.leader.clone()
    }

    /// Why the last step failed, if it did (cleared by a successful one):
    /// [`LeaseError::HeldByOther`] while a standby waits, [`LeaseError::Forbidden`] when the
    /// identity lacks RBAC rights on the Lease.
    pub fn last_error(&self) -> Option<LeaseError> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }

    /// [`LeaderElector::identity_conflicts`] of the running task: how many times the Lease
    /// was found renewed under this candidate's identity by another process (more than zero:
    /// two replicas share an identity and both lead).
    pub fn identity_conflicts(&self) -> u64 {
        self.identity_conflicts.load(Ordering::Relaxed)
    }

    /// Ends the election on a clean shutdown: leadership ends at once (`false` on
    /// [`LeaderHandle::changes`]) and, if this candidate holds the Lease, it is given up
    /// (no holder, `leaseDurationSeconds` 1) so that a standby takes over at its next try.
    /// Takes at most the renew deadline plus one request's deadline.
    pub async fn release(mut self) -> Result<(), LeaseError> {
        self.stop.send_replace(true);
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        match task.await {
            Ok(r) => r,
            Err(e) => Err(LeaseError::Stopped(e.to_string())),
        }
    }
}

impl Drop for LeaderHandle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    //! The loop over an in-memory Lease store (a [`Transport`] of its own): leadership ends at
    //! the renew deadline when the server stops answering, whatever its requests do.

    use std::sync::atomic::{AtomicU8, Ordering};

    use kevents_core::SinkError;
    use kevents_core::request::{Limits, Request, TransportFuture};

    use super::*;

    const UP: u8 = 0;
    const FAILING: u8 = 1;
    const HANGING: u8 = 2;
    /// The next PUT meets a renewal that landed first: 409, the stored resourceVersion moved.
    const CONFLICT_ONCE: u8 = 3;

    #[derive(Clone, Default, Debug)]
    struct Store {
        lease: Arc<Mutex<Option<(Value, u64)>>>,
        mode: Arc<AtomicU8>,
    }

    impl Store {
        fn answer(&self, request: &Request) -> Response {
            let ok = |code: u16, v: &Value| Response {
                code,
                body: serde_json::to_vec(v).unwrap_or_default(),
                ..Default::default()
            };
            let Ok(mut slot) = self.lease.lock() else {
                return Response {
                    code: 500,
                    ..Default::default()
                };
            };
            let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            let with_rv = |mut v: Value, rv: u64| {
                v["metadata"]["resourceVersion"] = Value::String(rv.to_string());
                v
            };
            if request.method == Method::Put
                && self
                    .mode
                    .compare_exchange(CONFLICT_ONCE, UP, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                && let Some((v, rv)) = slot.as_mut()
            {
                *rv += 1;
                *v = with_rv(v.clone(), *rv);
                return Response {
                    code: 409,
                    ..Default::default()
                };
            }
            match (request.method, slot.as_ref()) {
                (Method::Get, None) => Response {
                    code: 404,
                    ..Default::default()
                },
                (Method::Get, Some((v, _))) => ok(200, v),
                (Method::Post, None) => {
                    let v = with_rv(body, 1);
                    *slot = Some((v.clone(), 1));
                    ok(201, &v)
                }
                (Method::Put, Some((_, rv)))
                    if body["metadata"]["resourceVersion"]
                        .as_str()
                        .and_then(|s| s.parse().ok())
                        == Some(*rv) =>
                {
                    let v = with_rv(body, rv + 1);
                    *slot = Some((v.clone(), rv + 1));
                    ok(200, &v)
                }
                _ => Response {
                    code: 409,
                    ..Default::default()
                },
            }
        }
    }

    impl Transport for Store {
        fn send(&self, request: Request) -> TransportFuture<'_> {
            Box::pin(async move {
                match self.mode.load(Ordering::SeqCst) {
                    UP | CONFLICT_ONCE => Ok(self.answer(&request)),
                    FAILING => Err(SinkError::Transport("connection refused".into())),
                    _ => std::future::pending().await,
                }
            })
        }

        fn limits(&self) -> Limits {
            // A request deadline longer than the renew deadline: only the loop's deadline
            // can end a hanging renewal in time.
            Limits {
                request_timeout: Duration::from_secs(60),
                ..Limits::default()
            }
        }
    }

    fn elector(store: &Store, identity: &str) -> LeaderElector<Store> {
        let config = LeaseConfig::new("default", "l", identity).with_durations(
            Duration::from_secs(3),
            Duration::from_secs(2),
            Duration::from_millis(500),
        );
        LeaderElector::new(Client::new(store.clone()), config).expect("valid")
    }

    async fn leadership_ends_at_the_renew_deadline(mode: u8) {
        let store = Store::default();
        let handle = elector(&store, "a").spawn();
        let mut changes = handle.changes();
        timeout(Duration::from_secs(5), changes.wait_for(|l| *l))
            .await
            .expect("leads")
            .expect("task alive");
        store.mode.store(mode, Ordering::SeqCst);
        let cut = Instant::now();
        timeout(Duration::from_secs(5), changes.wait_for(|l| !*l))
            .await
            .expect("leadership ends")
            .expect("task alive");
        let took = cut.elapsed();
        // At most one retry period (the next renewal) plus the renew deadline, and a margin.
        assert!(took <= Duration::from_millis(2500 + 400), "{took:?}");
        assert!(took >= Duration::from_secs(2), "{took:?}");
        assert!(!handle.is_leader());
        // The server answers again: leading again.
        store.mode.store(UP, Ordering::SeqCst);
        timeout(Duration::from_secs(5), changes.wait_for(|l| *l))
            .await
            .expect("leads again")
            .expect("task alive");
        handle.release().await.expect("released");
        let record = store
            .lease
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|(v, _)| LeaseRecord::from_lease(v, 15)));
        let record = record.expect("stored");
        assert_eq!(record.unreadable, None);
        assert_eq!(record.holder_identity, "");
        assert_eq!(record.lease_duration_seconds, 1);
    }

    #[tokio::test]
    async fn a_release_that_meets_a_conflict_reads_again_and_releases() {
        let store = Store::default();
        let mut a = elector(&store, "a");
        a.try_acquire_or_renew().await.expect("acquires");
        assert!(a.is_leader());
        store.mode.store(CONFLICT_ONCE, Ordering::SeqCst);
        assert_eq!(a.release().await, Ok(true), "released after the conflict");
        let holder = store
            .lease
            .lock()
            .expect("lock")
            .as_ref()
            .map(|(v, _)| v["spec"]["holderIdentity"].clone());
        assert_eq!(holder, Some(Value::String(String::new())));
    }

    #[tokio::test]
    async fn a_failing_server_ends_leadership_at_the_renew_deadline() {
        leadership_ends_at_the_renew_deadline(FAILING).await;
    }

    #[tokio::test]
    async fn a_hanging_server_ends_leadership_at_the_renew_deadline() {
        leadership_ends_at_the_renew_deadline(HANGING).await;
    }

    #[tokio::test]
    async fn a_new_holder_seen_ends_leadership_at_once() {
        let store = Store::default();
        let handle = elector(&store, "a").spawn();
        let mut changes = handle.changes();
        timeout(Duration::from_secs(5), changes.wait_for(|l| *l))
            .await
            .expect("leads")
            .expect("task alive");
        // Another candidate writes the Lease (as one would after a partition).
        if let Ok(mut slot) = store.lease.lock()
            && let Some((v, _)) = slot.as_mut()
        {
            v["spec"]["holderIdentity"] = Value::String("b".into());
        }
        let cut = Instant::now();
        timeout(Duration::from_secs(5), changes.wait_for(|l| !*l))
            .await
            .expect("leadership ends")
            .expect("task alive");
        assert!(
            cut.elapsed() < Duration::from_millis(1500),
            "{:?}",
            cut.elapsed()
        );
        assert_eq!(
            handle.last_error(),
            Some(LeaseError::HeldByOther { holder: "b".into() })
        );
        handle.release().await.expect("nothing to release");
    }
}
