//! The fleet's Lease link as a task: the Lease read through a [`Watcher`] (listed, then
//! watched by name), every law read given to the member, the member's proposals written
//! with the Lease's `resourceVersion` (a 409 reads it again and decides again).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use kevents_core::fleet::{FLEET_WRITE_SPREAD, FleetLaw, FleetMember};
use kevents_core::request::{APPLICATION_JSON, Client, Method, Response, StreamTransport};
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use super::body::{WriteStep, is_older, law_of, new_fleet_lease, updated_fleet_lease, write_step};
use super::{FleetLease, MAX_WRITE_ATTEMPTS};
use crate::backoff::{Backoff, unit_random};
use crate::lease::LeaseError;
use crate::lease::record::{MAX_LEASE_BYTES, decode_lease, get_lease, lease_path};
use crate::watcher::{WatchConfig, WatchError, WatchEvent, Watcher};

/// How long a watch of the Lease may outlast its `timeoutSeconds` before it is taken for a
/// half-open connection.
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

/// What woke the task.
enum Wake {
    /// The Lease's watcher saw something.
    Watch(WatchEvent),
    /// The member's next law (`None`: it is gone).
    Proposal(Option<FleetLaw>),
    /// Time to retry a write.
    WriteDue,
}

/// How a write ended well.
enum Written {
    /// The Lease as the server stored it with the proposal.
    Stored(Value),
    /// Not written: the Lease holds this law, of the same or a higher epoch.
    Kept(FleetLaw),
}

/// The task's state.
pub(super) struct Link<T: StreamTransport> {
    client: Client<T>,
    watcher: Watcher<T>,
    lease: FleetLease,
    /// The Lease as last read or written (`None`: there is none, or not read yet).
    object: Option<Value>,
    /// `object` was read by a request and is not observed yet (the member is not held
    /// across requests: it need not be `Sync`).
    fresh: bool,
    /// While a list is read: the Lease it holds so far.
    listing: Option<Option<Value>>,
    /// The law the member follows as far as the link knows: the last given to it or
    /// proposed by it (the same law is not given twice in a row).
    last_given: Option<FleetLaw>,
    laws: watch::Sender<Option<FleetLaw>>,
    last_error: Arc<Mutex<Option<LeaseError>>>,
    /// Invalid-annotation errors already warned about.
    warned: HashSet<String>,
    write_backoff: Backoff,
    /// The highest epoch followed or proposed: a law read from the Lease may not jump far
    /// past it (`FleetLaw::bounded`).
    highest: u64,
}

/// How the link watches its Lease: by name, unpaged, bounded as a Lease read is.
pub(super) fn watch_config(lease: &FleetLease) -> WatchConfig {
    let mut config = WatchConfig::new(lease_path(&lease.namespace, None))
        .with_field_selector(format!("metadata.name={}", lease.name))
        .with_page_size(0)
        .with_watch_timeout(lease.watch_timeout);
    config.idle_timeout = WATCH_MARGIN;
    config.max_line_bytes = MAX_LEASE_BYTES;
    config.max_page_bytes = MAX_LEASE_BYTES;
    config.max_list_pages = 1;
    config.max_list_bytes = MAX_LEASE_BYTES;
    config.short_watch = SHORT_WATCH;
    config.first_backoff = FIRST_BACKOFF;
    config.max_backoff = MAX_BACKOFF;
    config.forbidden_backoff = FORBIDDEN_RETRY;
    config
}

impl<T: StreamTransport> Link<T> {
    pub(super) fn new(
        transport: T,
        lease: FleetLease,
        laws: watch::Sender<Option<FleetLaw>>,
        last_error: Arc<Mutex<Option<LeaseError>>>,
    ) -> Self {
        let watcher = Watcher::new(transport.clone(), watch_config(&lease), None);
        Link {
            client: Client::new(transport),
            watcher,
            lease,
            object: None,
            fresh: false,
            listing: None,
            last_given: None,
            laws,
            last_error,
            warned: HashSet::new(),
            write_backoff: Backoff::new(FIRST_BACKOFF, MAX_BACKOFF).with_forbidden(FORBIDDEN_RETRY),
            highest: 0,
        }
    }

    pub(super) async fn run<M: FleetMember>(mut self, mut member: M) {
        let mut pending: Option<FleetLaw> = None;
        let mut write_at = Instant::now();
        loop {
            let wake = tokio::select! {
                biased;
                event = self.watcher.next() => Wake::Watch(event),
                law = member.proposal() => Wake::Proposal(law),
                _ = sleep_until(write_at), if pending.is_some() => Wake::WriteDue,
            };
            match wake {
                Wake::Watch(event) => self.watched(event, &member),
                Wake::Proposal(None) => {
                    tracing::debug!(
                        namespace = %self.lease.namespace,
                        name = %self.lease.name,
                        "the fleet member is gone: the fleet lease link ends"
                    );
                    return;
                }
                Wake::Proposal(Some(law)) => {
                    self.highest = self.highest.max(law.epoch);
                    pending = Some(law);
                    self.last_given = Some(law);
                    if self.write_backoff.failures() == 0 {
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
                        self.log_failure(&e, "write", pause, warn, self.write_backoff.failures());
                        self.note(Some(e));
                        write_at = Instant::now() + pause;
                    }
                }
            }
        }
    }

    /// One thing the watcher saw.
    fn watched<M: FleetMember>(&mut self, event: WatchEvent, member: &M) {
        match event {
            WatchEvent::ListStart { .. } => self.listing = Some(None),
            WatchEvent::Listed(object) => {
                if let Some(found) = &mut self.listing
                    && object["metadata"]["name"].as_str() == Some(self.lease.name.as_str())
                {
                    *found = Some(object);
                }
            }
            WatchEvent::ListEnd { .. } => {
                let object = self.listing.take().flatten();
                self.note(None);
                self.observe(object, member);
            }
            WatchEvent::Applied { object, .. } => {
                if object["metadata"]["name"].as_str() == Some(self.lease.name.as_str())
                    && !is_older(self.object.as_ref(), &object)
                {
                    self.observe(Some(object), member);
                }
            }
            WatchEvent::Deleted { object, .. } => {
                if object["metadata"]["name"].as_str() == Some(self.lease.name.as_str()) {
                    self.observe(None, member);
                }
            }
            WatchEvent::Bookmark { .. } | WatchEvent::Restarted => {}
            WatchEvent::Failed {
                error,
                verb,
                retry_in,
                failures,
                warn,
            } => {
                self.listing = None;
                let e = self.read_error(error, verb);
                self.log_failure(&e, "read", retry_in, warn, failures);
                self.note(Some(e));
            }
        }
    }

    /// A failed read as the handle reports it: 401/403 [`LeaseError::Forbidden`].
    fn read_error(&self, error: WatchError, verb: &'static str) -> LeaseError {
        match error {
            WatchError::Request(source) if matches!(source.code(), Some(401 | 403)) => {
                LeaseError::Forbidden {
                    verb,
                    namespace: self.lease.namespace.clone(),
                    name: self.lease.name.clone(),
                    source,
                }
            }
            WatchError::Request(source) => LeaseError::Request(source),
            WatchError::Decode(text) => LeaseError::Decode(text),
            other => LeaseError::Request(kevents_core::SinkError::Transport(other.to_string())),
        }
    }

    fn log_failure(
        &self,
        e: &LeaseError,
        side: &'static str,
        pause: Duration,
        warn: bool,
        failures: u32,
    ) {
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
            tracing::warn!(%namespace, %name, side, retry_ms, failures,
                error = %e, "the fleet's lease could not be read or written; retrying");
        } else {
            tracing::debug!(%namespace, %name, side, retry_ms, error = %e,
                "the fleet's lease could not be read or written; retrying");
        }
    }

    fn note(&self, e: Option<LeaseError>) {
        if let Ok(mut slot) = self.last_error.lock() {
            *slot = e;
        }
    }

    /// Gives `law` to the member unless it was the last given (or proposed).
    fn give<M: FleetMember>(&mut self, member: &M, law: FleetLaw) {
        self.highest = self.highest.max(law.epoch);
        if self.last_given != Some(law) {
            member.adopt(&law);
            self.last_given = Some(law);
        }
    }

    /// The Lease as now read (`None`: there is none): kept, its law published and given to
    /// the member; an invalid annotation warned about once per distinct error.
    fn observe<M: FleetMember>(&mut self, object: Option<Value>, member: &M) {
        let read = object
            .as_ref()
            .and_then(law_of)
            .map(|law| law.and_then(|law| law.bounded(self.highest, SystemTime::now())));
        let law = match read {
            Some(Ok((law, raised))) => {
                if raised {
                    tracing::warn!(namespace = %self.lease.namespace, name = %self.lease.name,
                        epoch = law.epoch, floor = law.from,
                        "the fleet's lease holds a law slower than a budget's minimum: followed at the minimum");
                }
                Some(law)
            }
            Some(Err(e)) => {
                let text = e.to_string();
                if self.warned.len() < MAX_WARNED && self.warned.insert(text) {
                    tracing::warn!(namespace = %self.lease.namespace, name = %self.lease.name,
                        error = %e, "the fleet's lease holds an invalid or out-of-bounds law: ignored, the budget adapts alone (the next write replaces it)");
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

    /// Writes `law` if the Lease does not hold a law of its epoch or a higher one: see
    /// [`write_step`]; a 409 (or a 404 on update) reads the Lease again (kept, to be observed:
    /// [`Link::fresh`]) and decides again.
    async fn write(&mut self, law: &FleetLaw) -> Result<Written, LeaseError> {
        for _ in 0..MAX_WRITE_ATTEMPTS {
            let step = write_step(self.object.as_ref(), law, self.highest, SystemTime::now());
            let (method, verb, body) = match step {
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
                self.object =
                    get_lease(&self.client, &self.lease.namespace, &self.lease.name).await?;
                self.fresh = true;
                continue;
            }
            return self.decode(answer, verb).map(Written::Stored);
        }
        Err(LeaseError::Conflict)
    }

    /// A 2xx answer's JSON object; other answers are errors.
    fn decode(&self, answer: Response, verb: &'static str) -> Result<Value, LeaseError> {
        decode_lease(answer, verb, &self.lease.namespace, &self.lease.name)
    }
}
