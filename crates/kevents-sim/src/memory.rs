//! An in-memory apiserver for core/v1 events: what the replay tool, tests and benchmarks
//! write to. It behaves like the real one where the recorder can tell: AlreadyExists on a
//! duplicate create, 404 on a patch of a missing event, a new resourceVersion on every write,
//! and strategic-merge patches applied key by key. Optionally it throttles core/v1 event
//! writes as kube-apiserver's `EventRateLimit` admission plugin does
//! ([`MemoryApiServer::with_event_rate_limits`]), queues them as its API Priority and
//! Fairness does ([`MemoryApiServer::with_flow_control`]) and answers after a latency
//! ([`MemoryApiServer::with_latency`]), its limits deciding earlier when asked
//! ([`MemoryApiServer::with_admission_latency`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

use kevents_core::events_v1::{self, ClusterScopedRule};
use kevents_core::status::{SinkError, Status, StatusDetails};
use kevents_core::{Event, EventSink, SinkFuture, Stored};

use crate::flow_control::{
    FlowControl, FlowController, RETRY_AFTER_SECONDS, TOO_MANY_REQUESTS_BODY,
};
use crate::rate_limit::{EventRateLimiter, EventRateLimits, EventWrite};

#[derive(Debug, Default)]
struct Store {
    events: BTreeMap<(String, String), Event>,
    resource_version: u64,
    creates: u64,
    patches: u64,
    /// The `EventRateLimit` plugin, when configured.
    limiter: Option<EventRateLimiter>,
    /// Writes it refused.
    throttled: u64,
}

impl Store {
    /// The plugin's verdict on a core/v1 event write (the in-memory server has no users: the
    /// `User` key is empty, as for a request without user information).
    fn admit(&mut self, event: &Event) -> Result<(), SinkError> {
        let Some(limiter) = &mut self.limiter else {
            return Ok(());
        };
        let o = &event.involved_object;
        let source_and_object = [
            event.source.component.as_str(),
            &event.source.host,
            &o.kind,
            &o.namespace,
            &o.name,
            &o.uid,
            &o.api_version,
        ]
        .concat();
        let write = EventWrite {
            namespace: &event.metadata.namespace,
            user: "",
            source_and_object: &source_and_object,
        };
        limiter.admit(Instant::now(), write).map_err(|t| {
            self.throttled += 1;
            SinkError::Status(Box::new(Status::failure(429, "", t.message)))
        })
    }
}

/// A thread-safe in-memory event store that implements [`EventSink`]. Clones share the store.
///
/// ```
/// use kevents_core::Event;
/// use kevents_sim::MemoryApiServer;
/// let api = MemoryApiServer::new();
/// let mut e = Event::default();
/// e.metadata.name = "pod.1".into();
/// e.metadata.namespace = "ns".into();
/// e.count = 1;
/// let stored = api.create_now(&e).unwrap();
/// assert_eq!(stored.metadata.resource_version, "1");
/// assert!(api.create_now(&e).unwrap_err().is_already_exists());
/// let patched = api.patch_now("ns", "pod.1", br#"{"count":2}"#).unwrap();
/// assert_eq!(patched.count, 2);
/// assert!(api.patch_now("ns", "gone", b"{}").unwrap_err().is_not_found());
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemoryApiServer {
    store: Arc<Mutex<Store>>,
    /// How long each request made through the sink traits takes.
    latency: Duration,
    /// When, of `latency`, the rate limits decide (a refused write is answered then).
    admission: Option<Duration>,
    /// API Priority and Fairness for core/v1 writes through the sink traits, when set.
    flow: Option<FlowController>,
    /// The flow distinguisher (user name) of this handle's writes.
    user: Arc<str>,
}

/// What of a write a call does: its admission (the rate limits) apart from its store, when
/// the two are [apart in time](MemoryApiServer::with_admission_latency), or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Admit,
    Store,
    Whole,
}

fn status(code: u16, reason: &str, message: String, name: &str) -> SinkError {
    let mut s = Status::failure(code, reason, message);
    s.details = Some(StatusDetails {
        name: name.to_owned(),
        kind: "events".into(),
        ..Default::default()
    });
    SinkError::Status(Box::new(s))
}

impl MemoryApiServer {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Throttles core/v1 event creates and patches as kube-apiserver's `EventRateLimit`
    /// admission plugin does with `limits` (see [`crate::rate_limit`]; there are no users,
    /// so a `User` limit has one bucket, of the empty key). Refused writes are answered 429
    /// with the plugin's message. Clones made after this share the buckets.
    ///
    /// ```
    /// use kevents_core::Event;
    /// use kevents_sim::MemoryApiServer;
    /// let api = MemoryApiServer::new().with_event_rate_limits(&"Namespace:1:1".parse().unwrap());
    /// let mut e = Event::default();
    /// e.metadata.namespace = "ns".into();
    /// e.metadata.name = "a".into();
    /// assert!(api.create_now(&e).is_ok());
    /// e.metadata.name = "b".into();
    /// let refused = api.create_now(&e).unwrap_err();
    /// assert_eq!(refused.code(), Some(429));
    /// assert_eq!(api.throttled(), 1);
    /// ```
    pub fn with_event_rate_limits(self, limits: &EventRateLimits) -> Self {
        self.lock().limiter = if limits.limits.is_empty() {
            None
        } else {
            Some(EventRateLimiter::new(limits))
        };
        self
    }

    /// Requests through the [`EventSink`] traits are answered after `latency` (a tokio
    /// timer: call them inside a tokio runtime); the `*_now` methods are immediate.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use kevents_core::{Event, EventSink};
    /// let api = kevents_sim::MemoryApiServer::new().with_latency(std::time::Duration::from_millis(5));
    /// let mut e = Event::default();
    /// e.metadata.namespace = "ns".into();
    /// e.metadata.name = "a".into();
    /// let t = std::time::Instant::now();
    /// api.create(&e).await.unwrap();
    /// assert!(t.elapsed() >= std::time::Duration::from_millis(5));
    /// # }
    /// ```
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// Writes through the [`EventSink`] traits meet the rate limits (and a write refused
    /// 429 is answered) `admission` after they were made, at most the
    /// [latency](MemoryApiServer::with_latency); a write admitted is stored and answered at
    /// the latency. Without it the limits decide at the latency, together with the store, as
    /// they do under [flow control](MemoryApiServer::with_flow_control) (the seat is held
    /// for the latency, then the write is decided and stored).
    /// kube-apiserver admits a write before it stores it: on 1.20.2 over loopback a 429
    /// came back after 2.0 ms, a 201 after 3.7 ms (medians).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::{Duration, Instant};
    /// use kevents_core::{Event, EventSink};
    /// let api = kevents_sim::MemoryApiServer::new()
    ///     .with_event_rate_limits(&"Server:1:1".parse().unwrap())
    ///     .with_latency(Duration::from_millis(40))
    ///     .with_admission_latency(Duration::from_millis(10));
    /// let mut e = Event::default();
    /// e.metadata.namespace = "ns".into();
    /// e.metadata.name = "a".into();
    /// let t = Instant::now();
    /// api.create(&e).await.unwrap();
    /// assert!(t.elapsed() >= Duration::from_millis(40));
    /// e.metadata.name = "b".into();
    /// let t = Instant::now();
    /// let refused = api.create(&e).await.unwrap_err();
    /// assert_eq!(refused.code(), Some(429));
    /// assert!(t.elapsed() < Duration::from_millis(40));
    /// # }
    /// ```
    pub fn with_admission_latency(mut self, admission: Duration) -> Self {
        self.admission = Some(admission);
        self
    }

    /// When the limits decide, and how long after that the store is.
    fn split_latency(&self) -> (Duration, Duration) {
        let admission = self.admission.unwrap_or(self.latency).min(self.latency);
        (admission, self.latency - admission)
    }

    /// Sleeps `d` unless it is zero (then the write goes on at once, as before the split).
    async fn pass(d: Duration) {
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    }

    /// Puts core/v1 event creates and patches made through the [`EventSink`] trait through
    /// kube-apiserver's API Priority and Fairness for one priority level (see
    /// [`crate::flow_control`]): each waits for a seat in its flow's queues, holds it for
    /// the [latency](MemoryApiServer::with_latency), and is answered 429 with
    /// `Retry-After: 1` when its queue is full or it waited too long, as kube-apiserver
    /// answers. The flow is the handle's user ([`MemoryApiServer::as_user`], empty by
    /// default). The `*_now` methods are immediate and bypass it. Clones made after this
    /// share the seats and queues.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use kevents_core::{Event, EventSink};
    /// use kevents_sim::flow_control::{ApfVersion, FlowControl};
    /// let api = kevents_sim::MemoryApiServer::new()
    ///     .with_flow_control(FlowControl::new(ApfVersion::V1_20, 1, 1)); // 1 seat
    /// let mut e = Event::default();
    /// e.metadata.namespace = "ns".into();
    /// e.metadata.name = "a".into();
    /// api.create(&e).await.unwrap();
    /// assert_eq!(api.flow_control().unwrap().stats().dispatched, 1);
    /// # }
    /// ```
    pub fn with_flow_control(mut self, config: FlowControl) -> Self {
        self.flow = Some(FlowController::new(config));
        self
    }

    /// The same store (and rate limits and flow control) seen by another user: its writes
    /// are a flow of their own in API Priority and Fairness.
    ///
    /// ```
    /// let api = kevents_sim::MemoryApiServer::new();
    /// let bob = api.as_user("bob");
    /// assert_eq!(bob.user(), "bob");
    /// assert_eq!(api.user(), "");
    /// ```
    pub fn as_user(&self, user: &str) -> Self {
        MemoryApiServer {
            user: Arc::from(user),
            ..self.clone()
        }
    }

    /// The user this handle writes as.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The flow control, when configured ([`MemoryApiServer::with_flow_control`]).
    pub fn flow_control(&self) -> Option<&FlowController> {
        self.flow.as_ref()
    }

    /// Event writes refused 429 by the rate limits so far.
    pub fn throttled(&self) -> u64 {
        self.lock().throttled
    }

    fn lock(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock cannot leave the map half-updated (every update
        // is a single insert), so a poisoned lock is still usable.
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates `event` (its resourceVersion is ignored), as `POST .../events`.
    pub fn create_now(&self, event: &Event) -> Result<Event, SinkError> {
        self.admit_create(event)?;
        self.store_create(event)
    }

    /// A create's validation and admission (the rate limits), before it is stored.
    fn admit_create(&self, event: &Event) -> Result<(), SinkError> {
        if event.metadata.namespace.is_empty() || event.metadata.name.is_empty() {
            return Err(status(
                422,
                "Invalid",
                "metadata.name and metadata.namespace are required".into(),
                &event.metadata.name,
            ));
        }
        self.lock().admit(event)
    }

    /// A create admitted: stored unless the name is taken.
    fn store_create(&self, event: &Event) -> Result<Event, SinkError> {
        let mut s = self.lock();
        let key = (
            event.metadata.namespace.clone(),
            event.metadata.name.clone(),
        );
        if s.events.contains_key(&key) {
            return Err(status(
                409,
                "AlreadyExists",
                format!("events \"{}\" already exists", key.1),
                &key.1,
            ));
        }
        s.resource_version += 1;
        s.creates += 1;
        let mut stored = event.clone();
        stored.metadata.resource_version = s.resource_version.to_string();
        s.events.insert(key, stored.clone());
        Ok(stored)
    }

    /// Applies a strategic-merge patch to an existing event, as `PATCH .../events/{name}`.
    /// For an Event every patched field is a scalar, so the merge is key by key; `null`
    /// deletes.
    pub fn patch_now(&self, namespace: &str, name: &str, patch: &[u8]) -> Result<Event, SinkError> {
        self.patch_inner(namespace, name, patch, Phase::Whole)
    }

    /// A patch: read, merged and validated; then, as `phase` asks, the rate limits and
    /// the store.
    fn patch_inner(
        &self,
        namespace: &str,
        name: &str,
        patch: &[u8],
        phase: Phase,
    ) -> Result<Event, SinkError> {
        let mut s = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        let Some(current) = s.events.get(&key) else {
            return Err(status(
                404,
                "NotFound",
                format!("events \"{name}\" not found"),
                name,
            ));
        };
        let bad = |m: String| status(400, "BadRequest", m, name);
        let Value::Object(changes) =
            serde_json::from_slice::<Value>(patch).map_err(|e| bad(e.to_string()))?
        else {
            return Err(bad("patch is not a JSON object".into()));
        };
        let mut doc = serde_json::to_value(current).map_err(|e| bad(e.to_string()))?;
        if let Value::Object(map) = &mut doc {
            for (k, v) in changes {
                if v.is_null() {
                    map.remove(&k);
                } else {
                    map.insert(k, v);
                }
            }
        }
        let mut updated: Event = serde_json::from_value(doc).map_err(|e| bad(e.to_string()))?;
        if phase != Phase::Store {
            s.admit(&updated)?;
        }
        if phase == Phase::Admit {
            return Ok(updated);
        }
        s.resource_version += 1;
        s.patches += 1;
        updated.metadata.resource_version = s.resource_version.to_string();
        s.events.insert(key, updated.clone());
        Ok(updated)
    }

    /// Deletes an event (what the server's event TTL does). Returns whether it existed.
    pub fn delete(&self, namespace: &str, name: &str) -> bool {
        self.lock()
            .events
            .remove(&(namespace.to_owned(), name.to_owned()))
            .is_some()
    }

    /// The stored event, if any.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Event> {
        self.lock()
            .events
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Every stored event, ordered by namespace and name.
    pub fn list(&self) -> Vec<Event> {
        self.lock().events.values().cloned().collect()
    }

    /// Successful creates and patches so far.
    pub fn request_counts(&self) -> (u64, u64) {
        let s = self.lock();
        (s.creates, s.patches)
    }
}

/// The 429 of a request refused by API Priority and Fairness, as a client decodes
/// kube-apiserver's answer (a plain-text body, `Retry-After: 1`).
fn flow_rejected() -> SinkError {
    kevents_core::answer::Answer {
        code: 429,
        retry_after: Some(Duration::from_secs(u64::from(RETRY_AFTER_SECONDS))),
        body: TOO_MANY_REQUESTS_BODY.as_bytes(),
        oversized: false,
    }
    .status_error()
}

impl MemoryApiServer {
    /// A write through the flow control: a seat held for the latency and the write.
    fn flow_write(
        &self,
        flow: FlowController,
        write: impl FnOnce(&MemoryApiServer) -> Result<Event, SinkError> + Send + 'static,
    ) -> SinkFuture {
        let api = self.clone();
        Box::pin(async move {
            let seat = flow.admit(&api.user).await.map_err(|_| flow_rejected())?;
            Self::pass(api.latency).await;
            let r = write(&api).map(Stored::from);
            drop(seat);
            r
        })
    }
}

impl EventSink for MemoryApiServer {
    fn create(&self, event: &Event) -> SinkFuture {
        if let Some(flow) = self.flow.clone() {
            let event = event.clone();
            return self.flow_write(flow, move |api| api.create_now(&event));
        }
        if self.latency.is_zero() {
            let r = self.create_now(event).map(Stored::from);
            return Box::pin(async move { r });
        }
        let (api, event) = (self.clone(), event.clone());
        Box::pin(async move {
            let (admission, rest) = api.split_latency();
            Self::pass(admission).await;
            api.admit_create(&event)?;
            Self::pass(rest).await;
            api.store_create(&event).map(Stored::from)
        })
    }

    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        if let Some(flow) = self.flow.clone() {
            let (ns, name, patch) = (
                event.metadata.namespace.clone(),
                event.metadata.name.clone(),
                patch.to_vec(),
            );
            return self.flow_write(flow, move |api| api.patch_now(&ns, &name, &patch));
        }
        if self.latency.is_zero() {
            let r = self
                .patch_now(&event.metadata.namespace, &event.metadata.name, patch)
                .map(Stored::from);
            return Box::pin(async move { r });
        }
        let (api, ns, name, patch) = (
            self.clone(),
            event.metadata.namespace.clone(),
            event.metadata.name.clone(),
            patch.to_vec(),
        );
        Box::pin(async move {
            let (admission, rest) = api.split_latency();
            Self::pass(admission).await;
            api.patch_inner(&ns, &name, &patch, Phase::Admit)?;
            Self::pass(rest).await;
            api.patch_inner(&ns, &name, &patch, Phase::Store)
                .map(Stored::from)
        })
    }
}

/// `events.k8s.io/v1`: the same store seen through the other API, as on a real apiserver
/// (both APIs share one storage: an event created through one is read through the other).
/// Creates get the strict validation of a current server (the apiserver's
/// `ValidateEventCreate`: 422 Invalid); patches are strategic merges (maps merged
/// recursively, `null` deletes) validated as updates (`ValidateEventUpdate`, series count at
/// least 2); a patch of a missing event is a 404.
impl MemoryApiServer {
    /// Creates an `events.k8s.io/v1` event, as `POST /apis/events.k8s.io/v1/namespaces/{ns}/events`.
    ///
    /// ```
    /// use kevents_core::events_v1::Event;
    /// use kevents_sim::MemoryApiServer;
    /// let api = MemoryApiServer::new();
    /// let err = api.create_now_events_v1(&Event::default()).unwrap_err();
    /// assert_eq!(err.code(), Some(422));
    /// ```
    pub fn create_now_events_v1(
        &self,
        event: &events_v1::Event,
    ) -> Result<events_v1::Event, SinkError> {
        if let Err(e) = events_v1::validate_create(event, ClusterScopedRule::DefaultOrKubeSystem) {
            return Err(status(422, "Invalid", e.to_string(), &event.metadata.name));
        }
        // Stored as the wire carries it: eventTime and lastObservedTime in microseconds
        // (MicroTime), so a later PATCH read back through JSON finds them unchanged.
        let wire = serde_json::to_value(event)
            .and_then(serde_json::from_value::<events_v1::Event>)
            .map_err(|e| status(400, "BadRequest", e.to_string(), &event.metadata.name))?;
        self.create_now(&Event::from(wire))
            .map(events_v1::Event::from)
    }

    /// Applies a strategic-merge patch to an `events.k8s.io/v1` event, as
    /// `PATCH /apis/events.k8s.io/v1/namespaces/{ns}/events/{name}`.
    pub fn patch_now_events_v1(
        &self,
        namespace: &str,
        name: &str,
        patch: &[u8],
    ) -> Result<events_v1::Event, SinkError> {
        let mut s = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        let Some(current) = s.events.get(&key) else {
            return Err(status(
                404,
                "NotFound",
                format!("events.events.k8s.io \"{name}\" not found"),
                name,
            ));
        };
        let old = events_v1::Event::from(current.clone());
        let bad = |m: String| status(400, "BadRequest", m, name);
        let changes = serde_json::from_slice::<Value>(patch).map_err(|e| bad(e.to_string()))?;
        if !changes.is_object() {
            return Err(bad("patch is not a JSON object".into()));
        }
        let mut doc = serde_json::to_value(&old).map_err(|e| bad(e.to_string()))?;
        merge_json(&mut doc, changes);
        let mut updated: events_v1::Event =
            serde_json::from_value(doc).map_err(|e| bad(e.to_string()))?;
        updated.metadata.name = old.metadata.name.clone();
        updated.metadata.namespace = old.metadata.namespace.clone();
        if let Err(e) = events_v1::validate_update(&old, &updated) {
            return Err(status(422, "Invalid", e.to_string(), name));
        }
        s.resource_version += 1;
        s.patches += 1;
        updated.metadata.resource_version = s.resource_version.to_string();
        s.events.insert(key, Event::from(updated.clone()));
        Ok(updated)
    }

    /// Performs a series-cache write now: CREATE or PATCH, answered as [`events_v1::EventSink`]
    /// answers (the stored copy), for `SeriesCache::on_write_result`.
    pub fn send_now_events_v1(
        &self,
        write: &events_v1::Write,
    ) -> Result<Stored<events_v1::Event>, SinkError> {
        match write {
            events_v1::Write::Create { event, .. } => self.create_now_events_v1(event),
            events_v1::Write::Patch { event, patch, .. } => {
                self.patch_now_events_v1(&event.metadata.namespace, &event.metadata.name, patch)
            }
        }
        .map(Stored::from)
    }

    /// The stored event seen through `events.k8s.io/v1`, if any.
    pub fn get_events_v1(&self, namespace: &str, name: &str) -> Option<events_v1::Event> {
        self.get(namespace, name).map(events_v1::Event::from)
    }

    /// Every stored event seen through `events.k8s.io/v1`, ordered by namespace and name.
    pub fn list_events_v1(&self) -> Vec<events_v1::Event> {
        self.list()
            .into_iter()
            .map(events_v1::Event::from)
            .collect()
    }
}

/// Strategic merge of a patch without lists: objects merged key by key recursively, `null`
/// deletes, anything else replaces.
fn merge_json(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(&k);
                } else if let Some(existing) = t.get_mut(&k) {
                    merge_json(existing, v);
                } else {
                    t.insert(k, v);
                }
            }
        }
        (t, p) => *t = p,
    }
}

impl kevents_core::events_v1::EventSink for MemoryApiServer {
    fn create_events_v1(&self, event: &events_v1::Event) -> kevents_core::events_v1::SinkFuture {
        let r = self.create_now_events_v1(event).map(Stored::from);
        Box::pin(async move { r })
    }

    fn patch_events_v1(
        &self,
        event: &events_v1::Event,
        patch: &[u8],
    ) -> kevents_core::events_v1::SinkFuture {
        let r = self
            .patch_now_events_v1(&event.metadata.namespace, &event.metadata.name, patch)
            .map(Stored::from);
        Box::pin(async move { r })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use kevents_core::{Event, EventSink};

    use super::MemoryApiServer;

    fn event(name: &str) -> Event {
        let mut e = Event::default();
        e.metadata.namespace = "ns".into();
        e.metadata.name = name.into();
        e.count = 1;
        e
    }

    /// With the admission apart from the latency, a create and a patch the limits admit
    /// are stored at the latency (not before: the store is empty at the admission), a
    /// refused one is answered at the admission and stores nothing, and a token is taken
    /// once per write.
    #[tokio::test(start_paused = true)]
    async fn admission_before_the_store() {
        let api = MemoryApiServer::new()
            .with_event_rate_limits(&"Server:1:2".parse().unwrap())
            .with_latency(Duration::from_millis(30))
            .with_admission_latency(Duration::from_millis(10));
        let t = tokio::time::Instant::now();
        let create = tokio::spawn({
            let api = api.clone();
            async move { api.create(&event("a")).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(api.get("ns", "a").is_none(), "stored before the latency");
        create.await.unwrap().unwrap();
        assert_eq!(t.elapsed(), Duration::from_millis(30));
        assert_eq!(api.get("ns", "a").unwrap().count, 1);
        let mut patched = event("a");
        patched.count = 2;
        api.patch(&patched, br#"{"count":2}"#).await.unwrap();
        assert_eq!(api.get("ns", "a").unwrap().count, 2);
        assert_eq!(api.request_counts(), (1, 1));
        let t = tokio::time::Instant::now();
        let refused = api.create(&event("b")).await.unwrap_err();
        assert_eq!(refused.code(), Some(429));
        assert_eq!(t.elapsed(), Duration::from_millis(10));
        assert!(api.get("ns", "b").is_none());
        assert_eq!(api.throttled(), 1);
    }
}
