//! An in-memory apiserver for core/v1 events: what the replay tool, tests and benchmarks
//! write to. It behaves like the real one where the recorder can tell: AlreadyExists on a
//! duplicate create, 404 on a patch of a missing event, a new resourceVersion on every write,
//! and strategic-merge patches applied key by key.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::model::Event;
use crate::sink::{EventSink, SinkError, SinkFuture, Status, StatusDetails};

#[derive(Debug, Default)]
struct Store {
    events: BTreeMap<(String, String), Event>,
    resource_version: u64,
    creates: u64,
    patches: u64,
}

/// A thread-safe in-memory event store that implements [`EventSink`]. Clones share the store.
///
/// ```
/// use kevents_core::{Event, MemoryApiServer};
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

    fn lock(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock cannot leave the map half-updated (every update
        // is a single insert), so a poisoned lock is still usable.
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates `event` (its resourceVersion is ignored), as `POST .../events`.
    pub fn create_now(&self, event: &Event) -> Result<Event, SinkError> {
        let mut s = self.lock();
        let key = (
            event.metadata.namespace.clone(),
            event.metadata.name.clone(),
        );
        if event.metadata.namespace.is_empty() || event.metadata.name.is_empty() {
            return Err(status(
                422,
                "Invalid",
                "metadata.name and metadata.namespace are required".into(),
                &key.1,
            ));
        }
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

impl EventSink for MemoryApiServer {
    fn create(&self, event: &Event) -> SinkFuture {
        let r = self.create_now(event);
        Box::pin(async move { r })
    }

    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        let r = self.patch_now(&event.metadata.namespace, &event.metadata.name, patch);
        Box::pin(async move { r })
    }
}
