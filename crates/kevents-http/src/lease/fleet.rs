//! [`FleetLease`]: the link that keeps a fleet's write law ([`FleetLaw`]) in one
//! coordination.k8s.io/v1 Lease, between a [`FleetMember`] (a write budget) and the
//! apiserver, as a tokio task ([`FleetLeaseHandle`]).
//!
//! The task lists and watches the Lease, gives every law it reads to the member, and writes
//! the member's proposals unless the Lease holds a law of the same or a higher epoch (`POST`
//! a new Lease, or `PUT` with its `resourceVersion`; a 409 reads it again and decides
//! again: [`decide`] is the decision, without I/O). Fields of the Lease used:
//! `metadata.annotations["kevents.io/fleet-law"]` (the law's JSON), `spec.holderIdentity`
//! (who wrote it), `metadata.resourceVersion` (optimistic concurrency); the rest is kept.
//! In full, with how it fails: [`FleetLease`].

use std::collections::HashSet;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kevents_core::SinkError;
use kevents_core::fleet::{FLEET_LAW_ANNOTATION, FleetLaw, FleetLawError, FleetMember};
use kevents_core::request::{
    APPLICATION_JSON, Client, Method, Response, Transport, encode_segment,
};
use serde_json::{Map, Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout};

use super::config::{LeaseConfig, LeaseError};
use super::record::{MAX_LEASE_BYTES, decode_lease, get_lease, lease_path};
use crate::{HttpSink, WatchLines};

/// The default watch `timeoutSeconds`: the apiserver ends each watch after it, and the link
/// watches again from the last `resourceVersion`.
pub const FLEET_WATCH_TIMEOUT_SECONDS: u64 = 290;

/// How many times a write is decided again after a 409 Conflict before it is retried later
/// (after a back-off).
pub const MAX_WRITE_ATTEMPTS: u32 = 3;

/// A proposal is written after a random wait of up to this long, unless the watch brings a
/// law of its epoch or a later one first: members of a fleet meet their 429s together and
/// decide the same epoch at once; the first write reaches the others within milliseconds
/// and theirs need not be sent (each would be a 409 and a `GET`).
pub const FLEET_WRITE_SPREAD: Duration = Duration::from_millis(50);

/// The margin of the whole watch request's deadline over its `timeoutSeconds`.
const WATCH_MARGIN: Duration = Duration::from_secs(10);
/// The first back-off after a failure (then doubling).
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest back-off after failures.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The pause after a 401/403: the rights will not come back soon.
const FORBIDDEN_RETRY: Duration = Duration::from_secs(60);
/// A watch that ends sooner than this (or half its `timeoutSeconds`) counts as a failure (no
/// tight loop against a server or proxy that closes watches at once).
const SHORT_WATCH: Duration = Duration::from_secs(5);
/// The most distinct invalid-annotation errors remembered (each warned once).
const MAX_WARNED: usize = 64;

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
/// to [`FLEET_WRITE_SPREAD`] (another member's write of that epoch, seen meanwhile, spares
/// it the request): a new Lease (`POST`) when
/// there is none; nothing when the Lease already holds a law of the same or a higher epoch
/// (the member adopts that one instead); else the Lease as last read with the law replaced
/// (`PUT` with its `resourceVersion`: optimistic concurrency). A 409 (another member wrote
/// first, or created it first) reads the Lease again and decides again, at most
/// [`MAX_WRITE_ATTEMPTS`] times.
///
/// Fields of the Lease used: `metadata.annotations["kevents.io/fleet-law"]`
/// ([`FLEET_LAW_ANNOTATION`], the law's JSON, checked by [`FleetLaw::from_annotation`]: an
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
/// use kevents_http::HttpSink;
/// use kevents_http::lease::FleetLease;
/// # async fn f<M: FleetMember>(sink: HttpSink, member: M) -> Result<(), Box<dyn std::error::Error>> {
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
    /// use kevents_http::lease::{FleetLease, LeaseError};
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
    /// let link = kevents_http::lease::FleetLease::new("default", "kevents-fleet", "pod-a")?
    ///     .with_watch_timeout(Duration::from_secs(60));
    /// assert_eq!(link.watch_timeout(), Duration::from_secs(60));
    /// # Ok::<(), kevents_http::lease::LeaseError>(())
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
    /// over `sink`, gives every law read to `member`, writes every law `member` proposes (see
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
    pub fn spawn<M: FleetMember>(self, sink: HttpSink, member: M) -> FleetLeaseHandle {
        let (laws_tx, laws_rx) = watch::channel(None);
        let last_error = Arc::new(Mutex::new(None));
        let link = Link {
            client: sink.requests(),
            sink,
            lease: self,
            object: None,
            fresh: false,
            rv: String::new(),
            last_given: None,
            laws: laws_tx,
            last_error: last_error.clone(),
            warned: HashSet::new(),
            read_backoff: Backoff::default(),
            write_backoff: Backoff::default(),
        };
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
/// # async fn f(handle: kevents_http::lease::FleetLeaseHandle) {
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

/// What to do with a member's proposal, given the Lease as last read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum WriteStep {
    /// No Lease: create it with the proposal.
    Create,
    /// The Lease holds a law of the same or a higher epoch: write nothing, the member adopts
    /// that law.
    Keep(FleetLaw),
    /// The Lease holds an older law, none, or an invalid one: replace it.
    Update,
}

/// The decision for `proposal` given `lease`, the Lease as last read (`None`: there is none).
pub(crate) fn decide(lease: Option<&Value>, proposal: &FleetLaw) -> WriteStep {
    let Some(lease) = lease else {
        return WriteStep::Create;
    };
    match law_of(lease) {
        Some(Ok(stored)) if stored.epoch >= proposal.epoch => WriteStep::Keep(stored),
        _ => WriteStep::Update,
    }
}

/// The law in a Lease's annotation: `None` without one.
pub(crate) fn law_of(lease: &Value) -> Option<Result<FleetLaw, FleetLawError>> {
    let text = lease
        .get("metadata")?
        .get("annotations")?
        .get(FLEET_LAW_ANNOTATION)?;
    Some(match text.as_str() {
        Some(text) => FleetLaw::from_annotation(text),
        None => Err(FleetLawError::Json("the annotation is not a string".into())),
    })
}

/// A new Lease holding `law`, written by `identity` (the body of a create).
pub(crate) fn new_fleet_lease(lease: &FleetLease, law: &FleetLaw) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lease.name,
            "namespace": lease.namespace,
            "annotations": { FLEET_LAW_ANNOTATION: law.to_annotation() },
        },
        "spec": { "holderIdentity": lease.identity },
    })
}

/// `object` (the Lease as last read, its `resourceVersion` kept) with the law replaced by
/// `law` and `spec.holderIdentity` by `identity`, other fields kept (the body of an update).
pub(crate) fn updated_fleet_lease(object: &Value, identity: &str, law: &FleetLaw) -> Value {
    let mut object = match object {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    object.insert("apiVersion".into(), "coordination.k8s.io/v1".into());
    object.insert("kind".into(), "Lease".into());
    let mut metadata = take_object(&mut object, "metadata");
    let mut annotations = take_object(&mut metadata, "annotations");
    annotations.insert(
        FLEET_LAW_ANNOTATION.into(),
        Value::String(law.to_annotation()),
    );
    metadata.insert("annotations".into(), Value::Object(annotations));
    object.insert("metadata".into(), Value::Object(metadata));
    let mut spec = take_object(&mut object, "spec");
    spec.insert("holderIdentity".into(), identity.into());
    object.insert("spec".into(), Value::Object(spec));
    Value::Object(object)
}

/// `map[key]` taken out as an object (an empty one if absent or not an object).
fn take_object(map: &mut Map<String, Value>, key: &str) -> Map<String, Value> {
    match map.remove(key) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// A Lease's `metadata.resourceVersion` (empty if absent).
fn resource_version(object: &Value) -> &str {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
}

/// Whether `incoming` is older than `current` by their resourceVersions (when both are the
/// integers etcd gives; else it is not known to be older).
fn is_older(current: Option<&Value>, incoming: &Value) -> bool {
    let Some(current) = current else {
        return false;
    };
    match (
        resource_version(current).parse::<u64>(),
        resource_version(incoming).parse::<u64>(),
    ) {
        (Ok(c), Ok(i)) => i < c,
        _ => false,
    }
}

/// A uniform random number in `[0, 1)` (std's random hasher keys; no crate needed).
fn unit_random() -> f64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u64(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Failures in a row of one side (reads, writes): the jittered doubling pause, and when to
/// log at warn.
#[derive(Debug, Default)]
struct Backoff {
    failures: u32,
}

impl Backoff {
    /// One more failure: the pause before the next try (1 s doubling to 30 s, each between
    /// half and all of it), and whether to log it at warn (the first and every tenth).
    fn failed(&mut self) -> (Duration, bool) {
        self.failures = self.failures.saturating_add(1);
        let doublings = (self.failures - 1).min(5);
        let full = (FIRST_BACKOFF * 2u32.pow(doublings)).min(MAX_BACKOFF);
        let pause = full / 2 + (full / 2).mul_f64(unit_random());
        (pause, self.warns())
    }

    /// One more 401/403: the slow pause, and whether to log it at warn.
    fn forbidden(&mut self) -> (Duration, bool) {
        self.failures = self.failures.saturating_add(1);
        let pause = FORBIDDEN_RETRY + FORBIDDEN_RETRY.mul_f64(0.1 * unit_random());
        (pause, self.warns())
    }

    fn warns(&self) -> bool {
        self.failures == 1 || self.failures.is_multiple_of(10)
    }

    fn reset(&mut self) {
        self.failures = 0;
    }
}

/// Why a list-and-watch ended.
enum ReadEnd {
    /// 410 Gone (the resourceVersion is too old): list again at once.
    Gone,
    /// A failure: list again after a pause.
    Failed(LeaseError),
}

/// What woke the task.
enum Wake {
    /// Time to list and watch.
    ReadDue,
    /// The watch's next line (`None`: the server ended it).
    Line(Result<Option<Vec<u8>>, SinkError>),
    /// The member's next law (`None`: it is gone).
    Proposal(Option<FleetLaw>),
    /// Time to retry a write.
    WriteDue,
}

/// The read side: waiting to list and watch, or to watch again from the last
/// resourceVersion without a list (`false`), until the instant; or watching since the
/// instant.
enum Reading {
    Due(Instant, bool),
    Watching(Box<WatchLines>, Instant),
}

/// How a write ended well.
enum Written {
    /// The Lease as the server stored it with the proposal.
    Stored(Value),
    /// Not written: the Lease holds this law, of the same or a higher epoch.
    Kept(FleetLaw),
}

/// The task's state.
struct Link {
    sink: HttpSink,
    client: Client<HttpSink>,
    lease: FleetLease,
    /// The Lease as last read or written (`None`: there is none, or not read yet).
    object: Option<Value>,
    /// `object` was read by a request and is not observed yet (the member is not held
    /// across requests: it need not be `Sync`).
    fresh: bool,
    /// The resourceVersion to watch from.
    rv: String,
    /// The law the member follows as far as the link knows: the last given to it or
    /// proposed by it (the same law is not given twice in a row).
    last_given: Option<FleetLaw>,
    laws: watch::Sender<Option<FleetLaw>>,
    last_error: Arc<Mutex<Option<LeaseError>>>,
    /// Invalid-annotation errors already warned about.
    warned: HashSet<String>,
    read_backoff: Backoff,
    write_backoff: Backoff,
}

impl Link {
    async fn run<M: FleetMember>(mut self, mut member: M) {
        let mut reading = Reading::Due(Instant::now(), true);
        let mut pending: Option<FleetLaw> = None;
        let mut write_at = Instant::now();
        loop {
            let wake = tokio::select! {
                biased;
                wake = next_read(&mut reading) => wake,
                law = member.proposal() => Wake::Proposal(law),
                _ = sleep_until(write_at), if pending.is_some() => Wake::WriteDue,
            };
            match wake {
                Wake::ReadDue => {
                    let relist = !matches!(reading, Reading::Due(_, false));
                    let opened = self.list_and_watch(relist).await;
                    self.observe_fresh(&member);
                    reading = match opened {
                        Ok(lines) => {
                            self.note(None);
                            Reading::Watching(Box::new(lines), Instant::now())
                        }
                        // A 410 on a watch from a resourceVersion just listed: a failure
                        // (no tight loop of lists), not an old resourceVersion.
                        Err(ReadEnd::Gone) if relist => {
                            self.read_failed(ReadEnd::Failed(LeaseError::Request(
                                SinkError::Transport(
                                    "the watch of the fleet's lease answered 410 Gone to the resourceVersion just listed".into(),
                                ),
                            )))
                        }
                        Err(end) => self.read_failed(end),
                    };
                }
                Wake::Line(line) => {
                    let started = match &reading {
                        Reading::Watching(_, started) => *started,
                        Reading::Due(..) => Instant::now(),
                    };
                    match line {
                        Ok(Some(line)) => {
                            self.read_backoff.reset();
                            if let Err(end) = self.watch_event(&line, &member) {
                                reading = self.read_failed(end);
                            }
                        }
                        Ok(None)
                            if started.elapsed()
                                >= SHORT_WATCH.min(self.lease.watch_timeout / 2) =>
                        {
                            // The watch's timeoutSeconds passed: watch again from the last
                            // resourceVersion (a bookmark's, or the last event's).
                            self.read_backoff.reset();
                            reading = Reading::Due(Instant::now(), false);
                        }
                        Ok(None) => {
                            reading = self.read_failed(ReadEnd::Failed(LeaseError::Request(
                                SinkError::Transport(
                                    "the watch of the fleet's lease ended at once".into(),
                                ),
                            )));
                        }
                        Err(e) => {
                            reading = self.read_failed(ReadEnd::Failed(LeaseError::Request(e)));
                        }
                    }
                }
                Wake::Proposal(None) => {
                    tracing::debug!(
                        namespace = %self.lease.namespace,
                        name = %self.lease.name,
                        "the fleet member is gone: the fleet lease link ends"
                    );
                    return;
                }
                Wake::Proposal(Some(law)) => {
                    pending = Some(law);
                    self.last_given = Some(law);
                    if self.write_backoff.failures == 0 {
                        write_at = Instant::now() + FLEET_WRITE_SPREAD.mul_f64(unit_random());
                    }
                }
                Wake::WriteDue => {}
            }
            if let Some(law) = pending
                && Instant::now() >= write_at
            {
                let written = self.write(&law).await;
                self.observe_fresh(&member);
                match written {
                    Ok(written) => {
                        pending = None;
                        self.write_backoff.reset();
                        self.note(None);
                        match written {
                            Written::Stored(object) => {
                                tracing::debug!(epoch = law.epoch, "fleet law written");
                                self.observe(Some(object), &member);
                            }
                            Written::Kept(stored) => self.give(&member, stored),
                        }
                    }
                    Err(e) => {
                        let (pause, warn) = if matches!(e, LeaseError::Forbidden { .. }) {
                            self.write_backoff.forbidden()
                        } else {
                            self.write_backoff.failed()
                        };
                        self.log_failure(&e, "write", pause, warn);
                        self.note(Some(e));
                        write_at = Instant::now() + pause;
                    }
                }
            }
        }
    }

    /// After a failed or ended read: when to list again.
    fn read_failed(&mut self, end: ReadEnd) -> Reading {
        match end {
            ReadEnd::Gone => Reading::Due(Instant::now(), true),
            ReadEnd::Failed(e) => {
                let (pause, warn) = if matches!(e, LeaseError::Forbidden { .. }) {
                    self.read_backoff.forbidden()
                } else {
                    self.read_backoff.failed()
                };
                self.log_failure(&e, "read", pause, warn);
                self.note(Some(e));
                Reading::Due(Instant::now() + pause, true)
            }
        }
    }

    fn log_failure(&self, e: &LeaseError, side: &'static str, pause: Duration, warn: bool) {
        let (namespace, name) = (&self.lease.namespace, &self.lease.name);
        let retry_ms = pause.as_millis() as u64;
        if matches!(e, LeaseError::Forbidden { .. }) {
            if warn {
                tracing::warn!(%namespace, %name, side, retry_ms, error = %e,
                    "the fleet's lease is forbidden to this identity (RBAC: it needs get, list, watch, create and update on leases.coordination.k8s.io): the fleet's law is not shared, the write budget keeps adapting alone");
            } else {
                tracing::debug!(%namespace, %name, side, retry_ms, error = %e,
                    "the fleet's lease is still forbidden");
            }
        } else if warn {
            tracing::warn!(%namespace, %name, side, retry_ms, failures = self.failures(side),
                error = %e, "the fleet's lease could not be read or written; retrying");
        } else {
            tracing::debug!(%namespace, %name, side, retry_ms, error = %e,
                "the fleet's lease could not be read or written; retrying");
        }
    }

    fn failures(&self, side: &str) -> u32 {
        if side == "read" {
            self.read_backoff.failures
        } else {
            self.write_backoff.failures
        }
    }

    fn note(&self, e: Option<LeaseError>) {
        if let Ok(mut slot) = self.last_error.lock() {
            *slot = e;
        }
    }

    /// Gives `law` to the member unless it was the last given (or proposed).
    fn give<M: FleetMember>(&mut self, member: &M, law: FleetLaw) {
        if self.last_given != Some(law) {
            member.adopt(&law);
            self.last_given = Some(law);
        }
    }

    /// The Lease as now read (`None`: there is none): kept, its law published and given to
    /// the member; an invalid annotation warned about once per distinct error.
    fn observe<M: FleetMember>(&mut self, object: Option<Value>, member: &M) {
        let law = match object.as_ref().and_then(law_of) {
            Some(Ok(law)) => Some(law),
            Some(Err(e)) => {
                let text = e.to_string();
                if self.warned.len() < MAX_WARNED && self.warned.insert(text) {
                    tracing::warn!(namespace = %self.lease.namespace, name = %self.lease.name,
                        error = %e, "the fleet's lease holds an invalid law: ignored (the next write replaces it)");
                }
                None
            }
            None => None,
        };
        self.object = object;
        self.laws.send_if_modified(|seen| {
            let changed = *seen != law;
            *seen = law;
            changed
        });
        if let Some(law) = law {
            self.give(member, law);
        }
    }

    /// The Lease read by the last requests, if one was ([`Link::fresh`]), observed.
    fn observe_fresh<M: FleetMember>(&mut self, member: &M) {
        if std::mem::take(&mut self.fresh) {
            let object = self.object.take();
            self.observe(object, member);
        }
    }

    /// Lists the Lease (kept, to be observed: [`Link::fresh`]) unless `relist` is false and a
    /// resourceVersion is known, then opens a watch from the resourceVersion.
    async fn list_and_watch(&mut self, relist: bool) -> Result<WatchLines, ReadEnd> {
        if relist || self.rv.is_empty() {
            let (object, rv) = self.list().await.map_err(ReadEnd::Failed)?;
            self.object = object;
            self.fresh = true;
            self.rv = rv;
        }
        let path = format!(
            "{}?watch=1&fieldSelector=metadata.name%3D{}&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={}",
            lease_path(&self.lease.namespace, None),
            encode_segment(&self.lease.name),
            encode_segment(&self.rv),
            self.lease.watch_timeout.as_secs(),
        );
        // Bounded by the request deadline until the answer's head (the whole watch by
        // WATCH_DEADLINE).
        let open_deadline = Transport::limits(self.client.transport()).request_timeout;
        let mut lines = timeout(
            open_deadline,
            self.sink.watch_lines(
                &path,
                self.lease.watch_timeout + WATCH_MARGIN,
                MAX_LEASE_BYTES,
            ),
        )
        .await
        .map_err(|_| ReadEnd::Failed(LeaseError::Request(SinkError::Timeout(open_deadline))))?
        .map_err(|e| ReadEnd::Failed(LeaseError::Request(e)))?;
        let code = lines.status();
        if code == 200 {
            return Ok(lines);
        }
        if code == 410 {
            return Err(ReadEnd::Gone);
        }
        // The server's Status, as the first line of the answer.
        let body = timeout(Duration::from_secs(5), lines.next_line())
            .await
            .ok()
            .and_then(Result::ok)
            .flatten()
            .unwrap_or_default();
        let answer = Response {
            code,
            body,
            ..Default::default()
        };
        Err(ReadEnd::Failed(self.refusal(&answer, "watch")))
    }

    /// `GET` of the list of the Lease by name: the Lease (if there is one) and the list's
    /// resourceVersion.
    async fn list(&self) -> Result<(Option<Value>, String), LeaseError> {
        let path = format!(
            "{}?fieldSelector=metadata.name%3D{}",
            lease_path(&self.lease.namespace, None),
            encode_segment(&self.lease.name)
        );
        let answer = self
            .client
            .send(Method::Get, path, None, Vec::new(), MAX_LEASE_BYTES)
            .await
            .map_err(LeaseError::Request)?;
        let mut list = self.decode(answer, "list")?;
        let rv = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if rv.is_empty() {
            return Err(LeaseError::Decode(
                "the list of leases has no resourceVersion".into(),
            ));
        }
        let items = match list.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            None | Some(Value::Null) => Vec::new(),
            Some(_) => {
                return Err(LeaseError::Decode(
                    "the list's items is not an array".into(),
                ));
            }
        };
        let object = items
            .into_iter()
            .find(|item| item["metadata"]["name"].as_str() == Some(self.lease.name.as_str()));
        Ok((object, rv))
    }

    /// Handles one line of the watch.
    fn watch_event<M: FleetMember>(&mut self, line: &[u8], member: &M) -> Result<(), ReadEnd> {
        let mut event: Value = serde_json::from_slice(line).map_err(|e| {
            ReadEnd::Failed(LeaseError::Decode(format!(
                "a watch event is not JSON: {e}"
            )))
        })?;
        let kind = event["type"].as_str().unwrap_or_default().to_owned();
        let object = event.get_mut("object").map(Value::take).unwrap_or_default();
        let rv = resource_version(&object).to_owned();
        match kind.as_str() {
            "ADDED" | "MODIFIED" => {
                if !object.is_object() {
                    return Err(ReadEnd::Failed(LeaseError::Decode(
                        "a watch event's object is not an object".into(),
                    )));
                }
                if object["metadata"]["name"].as_str() == Some(self.lease.name.as_str())
                    && !is_older(self.object.as_ref(), &object)
                {
                    self.observe(Some(object), member);
                }
            }
            "DELETED" => self.observe(None, member),
            "BOOKMARK" => {}
            "ERROR" => {
                if object["code"].as_u64() == Some(410) {
                    return Err(ReadEnd::Gone);
                }
                let answer = Response {
                    code: object["code"]
                        .as_u64()
                        .and_then(|c| u16::try_from(c).ok())
                        .unwrap_or(500),
                    body: serde_json::to_vec(&object).unwrap_or_default(),
                    ..Default::default()
                };
                return Err(ReadEnd::Failed(self.refusal(&answer, "watch")));
            }
            other => {
                return Err(ReadEnd::Failed(LeaseError::Decode(format!(
                    "a watch event of type {:?}",
                    kevents_core::status::sanitize_server_text(other)
                ))));
            }
        }
        if !rv.is_empty() {
            self.rv = rv;
        }
        Ok(())
    }

    /// Writes `law` if the Lease does not hold a law of its epoch or a higher one: see
    /// [`decide`]; a 409 (or a 404 on update) reads the Lease again (kept, to be observed:
    /// [`Link::fresh`]) and decides again.
    async fn write(&mut self, law: &FleetLaw) -> Result<Written, LeaseError> {
        for _ in 0..MAX_WRITE_ATTEMPTS {
            let (method, verb, body) = match decide(self.object.as_ref(), law) {
                WriteStep::Keep(stored) => return Ok(Written::Kept(stored)),
                WriteStep::Create => (Method::Post, "create", new_fleet_lease(&self.lease, law)),
                WriteStep::Update => {
                    let base = self.object.as_ref().unwrap_or(&Value::Null);
                    let body = updated_fleet_lease(base, &self.lease.identity, law);
                    (Method::Put, "update", body)
                }
            };
            let name = (method == Method::Put).then_some(self.lease.name.as_str());
            let path = lease_path(&self.lease.namespace, name);
            let body = serde_json::to_vec(&body).map_err(|e| LeaseError::Decode(e.to_string()))?;
            let answer = self
                .client
                .send(method, path, Some(APPLICATION_JSON), body, MAX_LEASE_BYTES)
                .await
                .map_err(LeaseError::Request)?;
            if answer.code == 409 || (method == Method::Put && answer.code == 404) {
                // Another member wrote (or created, or deleted) it first: read it again.
                self.object = self.get().await?;
                self.fresh = true;
                continue;
            }
            return self.decode(answer, verb).map(Written::Stored);
        }
        Err(LeaseError::Conflict)
    }

    /// `GET` of the Lease: `None` when not found.
    async fn get(&self) -> Result<Option<Value>, LeaseError> {
        get_lease(&self.client, &self.lease.namespace, &self.lease.name).await
    }

    /// A non-2xx answer as an error: 401/403 [`LeaseError::Forbidden`], others the server's.
    fn refusal(&self, answer: &Response, verb: &'static str) -> LeaseError {
        let source = answer.answer().status_error();
        if matches!(answer.code, 401 | 403) {
            return LeaseError::Forbidden {
                verb,
                namespace: self.lease.namespace.clone(),
                name: self.lease.name.clone(),
                source,
            };
        }
        LeaseError::Request(source)
    }

    /// A 2xx answer's JSON object; other answers are errors.
    fn decode(&self, answer: Response, verb: &'static str) -> Result<Value, LeaseError> {
        decode_lease(answer, verb, &self.lease.namespace, &self.lease.name)
    }
}

/// The read side's next wake: the time to list, or the watch's next line.
async fn next_read(reading: &mut Reading) -> Wake {
    match reading {
        Reading::Due(at, _) => {
            sleep_until(*at).await;
            Wake::ReadDue
        }
        Reading::Watching(lines, _) => Wake::Line(lines.next_line().await),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use kevents_core::fleet::FleetPhase;
    use tokio::sync::mpsc;

    use super::*;
    use crate::HttpConfig;

    fn law(epoch: u64, from: f64) -> FleetLaw {
        FleetLaw {
            epoch,
            phase: FleetPhase::Adapted,
            from,
            since_micros: 1_764_400_000_000_000,
        }
    }

    fn lease_with(annotation: Option<&str>) -> Value {
        let mut v = json!({
            "metadata": { "name": "f", "namespace": "default", "resourceVersion": "7" },
            "spec": { "holderIdentity": "b", "leaseDurationSeconds": 3 },
        });
        if let Some(a) = annotation {
            v["metadata"]["annotations"] = json!({ FLEET_LAW_ANNOTATION: a, "other": "x" });
        }
        v
    }

    #[test]
    fn no_lease_is_created() {
        assert_eq!(decide(None, &law(1, 5.0)), WriteStep::Create);
    }

    #[test]
    fn a_lease_of_the_same_or_a_higher_epoch_is_kept() {
        let stored = law(2, 8.0);
        let lease = lease_with(Some(&stored.to_annotation()));
        assert_eq!(decide(Some(&lease), &law(2, 5.0)), WriteStep::Keep(stored));
        assert_eq!(decide(Some(&lease), &law(1, 5.0)), WriteStep::Keep(stored));
        assert_eq!(decide(Some(&lease), &law(3, 5.0)), WriteStep::Update);
    }

    #[test]
    fn a_lease_without_a_valid_law_is_updated() {
        assert_eq!(
            decide(Some(&lease_with(None)), &law(1, 5.0)),
            WriteStep::Update
        );
        assert_eq!(
            decide(Some(&lease_with(Some("garbage"))), &law(1, 5.0)),
            WriteStep::Update
        );
        let negative = r#"{"epoch":9,"phase":"Adapted","from":-1,"sinceMicros":0}"#;
        assert_eq!(
            decide(Some(&lease_with(Some(negative))), &law(1, 5.0)),
            WriteStep::Update
        );
        let mut not_a_string = lease_with(None);
        not_a_string["metadata"]["annotations"] = json!({ FLEET_LAW_ANNOTATION: 3 });
        assert!(matches!(law_of(&not_a_string), Some(Err(_))));
        assert_eq!(decide(Some(&not_a_string), &law(1, 5.0)), WriteStep::Update);
    }

    #[test]
    fn bodies_hold_the_law_and_keep_the_rest() {
        let link = FleetLease::new("default", "f", "pod-a").expect("valid");
        let l = law(4, 2.5);
        let created = new_fleet_lease(&link, &l);
        assert_eq!(created["metadata"]["name"], "f");
        assert_eq!(created["spec"]["holderIdentity"], "pod-a");
        assert_eq!(law_of(&created), Some(Ok(l)));

        let updated = updated_fleet_lease(&lease_with(Some("garbage")), "pod-a", &l);
        assert_eq!(resource_version(&updated), "7");
        assert_eq!(updated["kind"], "Lease");
        assert_eq!(updated["spec"]["holderIdentity"], "pod-a");
        assert_eq!(updated["spec"]["leaseDurationSeconds"], 3);
        assert_eq!(updated["metadata"]["annotations"]["other"], "x");
        assert_eq!(law_of(&updated), Some(Ok(l)));

        // A Lease without annotations, or with a spec that is not an object.
        let mut bare = lease_with(None);
        bare["spec"] = Value::Null;
        let updated = updated_fleet_lease(&bare, "pod-a", &l);
        assert_eq!(law_of(&updated), Some(Ok(l)));
        assert_eq!(updated["spec"]["holderIdentity"], "pod-a");
    }

    #[test]
    fn older_objects_are_recognised_by_their_resource_version() {
        let current = lease_with(None);
        let mut older = current.clone();
        older["metadata"]["resourceVersion"] = "6".into();
        let mut newer = current.clone();
        newer["metadata"]["resourceVersion"] = "8".into();
        assert!(is_older(Some(&current), &older));
        assert!(!is_older(Some(&current), &newer));
        assert!(!is_older(None, &older));
        older["metadata"]["resourceVersion"] = "opaque".into();
        assert!(!is_older(Some(&current), &older));
    }

    #[test]
    fn backoff_doubles_to_30_s_jittered_and_warns_first_and_every_tenth() {
        let mut b = Backoff::default();
        let mut warned = Vec::new();
        for n in 1..=20u32 {
            let (pause, warn) = b.failed();
            let full = (FIRST_BACKOFF * 2u32.pow((n - 1).min(5))).min(MAX_BACKOFF);
            assert!(pause >= full / 2 && pause <= full, "{n}: {pause:?}");
            if warn {
                warned.push(n);
            }
        }
        assert_eq!(warned, [1, 10, 20]);
        b.reset();
        assert!(b.failed().0 <= FIRST_BACKOFF);
        let (pause, _) = b.forbidden();
        assert!(pause >= FORBIDDEN_RETRY);
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
        // Nothing listens on port 1: every request fails at once.
        let sink =
            HttpSink::new(HttpConfig::new("https://127.0.0.1:1").expect("config")).expect("sink");
        let (tx, rx) = mpsc::unbounded_channel();
        let adopted = Arc::new(AtomicUsize::new(0));
        let member = Member {
            proposals: rx,
            adopted: adopted.clone(),
        };
        let handle = FleetLease::new("default", "f", "a")
            .expect("valid")
            .spawn(sink, member);
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
        let sink =
            HttpSink::new(HttpConfig::new("https://127.0.0.1:1").expect("config")).expect("sink");
        let (_tx, rx) = mpsc::unbounded_channel();
        let member = Member {
            proposals: rx,
            adopted: Arc::new(AtomicUsize::new(0)),
        };
        let handle = FleetLease::new("default", "f", "a")
            .expect("valid")
            .spawn(sink, member);
        let laws = handle.laws();
        timeout(Duration::from_secs(5), handle.stop())
            .await
            .expect("stops at once")
            .expect("stopped");
        assert!(laws.has_changed().is_err(), "the task is gone");
    }
}
