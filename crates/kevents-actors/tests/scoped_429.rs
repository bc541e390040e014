//! A throttled scope holds nobody else up (issue 34), in memory: the server limits one
//! namespace to 2 writes/s (burst 2) and answers 429 naming the `Namespace` limit, as
//! EventRateLimit does. 40 events to that namespace, then 16 to 8 others: every event of
//! the others is stored while most of the throttled namespace's still wait (counts read
//! back from the server, no timing asserted), then every count is stored. The engine parked
//! the throttled namespace's writes among the 16 writes in flight before: the others waited
//! until at least 24 of the 40 were stored. `tests/fleet.rs` (the facade) does the same
//! against the real apiserver.
#![allow(missing_docs)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kevents_actors::{Pipeline, SinkOptions};
use kevents_core::{
    Event, EventSink, EventSource, EventType, ObjectReference, SinkError, SinkFuture, Status,
    Stored,
};
use kevents_sim::MemoryApiServer;

const HOT: usize = 40;
const OTHERS: usize = 8;
const PER_OTHER: usize = 2;

/// The in-memory apiserver with a token bucket (2/s, burst 2) on namespace `hot`.
#[derive(Clone)]
struct NamespaceLimit {
    api: MemoryApiServer,
    bucket: Arc<Mutex<(f64, Instant)>>,
}

impl NamespaceLimit {
    fn admit(&self, namespace: &str) -> Result<(), SinkError> {
        if namespace != "hot" {
            return Ok(());
        }
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        b.0 = (b.0 + 2.0 * now.duration_since(b.1).as_secs_f64()).min(2.0);
        b.1 = now;
        if b.0 >= 1.0 {
            b.0 -= 1.0;
            return Ok(());
        }
        Err(SinkError::Status(Box::new(Status::failure(
            429,
            "TooManyRequests",
            "Too many requests: limit reached on type Namespace for key hot",
        ))))
    }
}

impl EventSink for NamespaceLimit {
    fn create(&self, event: &Event) -> SinkFuture {
        let out = self
            .admit(&event.metadata.namespace)
            .and_then(|()| self.api.create_now(event).map(Stored::from));
        Box::pin(async move { out })
    }
    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        let out = self.admit(&event.metadata.namespace).and_then(|()| {
            self.api
                .patch_now(&event.metadata.namespace, &event.metadata.name, patch)
                .map(Stored::from)
        });
        Box::pin(async move { out })
    }
}

fn stored_in(api: &MemoryApiServer, namespace: &str) -> (usize, i64) {
    let events: Vec<_> = api
        .list()
        .into_iter()
        .filter(|e| e.metadata.namespace == namespace)
        .collect();
    (
        events.len(),
        events.iter().map(|e| i64::from(e.count)).sum(),
    )
}

#[test]
fn a_throttled_namespace_holds_no_other_namespace_up() {
    let api = MemoryApiServer::new();
    let sink = NamespaceLimit {
        api: api.clone(),
        bucket: Arc::new(Mutex::new((2.0, Instant::now()))),
    };
    let pipeline = Pipeline::builder(EventSource::new("ctl", "host"))
        .sink("api", sink, SinkOptions::default())
        .start_thread()
        .expect("started");
    let recorder = pipeline.recorder();
    for i in 0..HOT {
        let pod = ObjectReference::new("v1", "Pod", "hot", format!("hot-{i}"));
        recorder
            .event(&pod, EventType::Normal, "Started", "started")
            .expect("recorded");
    }
    let others: Vec<String> = (0..OTHERS).map(|i| format!("other-{i}")).collect();
    for ns in &others {
        for i in 0..PER_OTHER {
            let pod = ObjectReference::new("v1", "Pod", ns, format!("web-{i}"));
            recorder
                .event(&pod, EventType::Normal, "Started", "started")
                .expect("recorded");
        }
    }
    let mut others_stored = 0;
    let mut hot_then = (0, 0);
    for _ in 0..1200 {
        others_stored = others.iter().map(|ns| stored_in(&api, ns).0).sum();
        if others_stored == OTHERS * PER_OTHER {
            hot_then = stored_in(&api, "hot");
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(others_stored, OTHERS * PER_OTHER);
    assert!(
        hot_then.0 <= HOT * 2 / 5,
        "the other namespaces waited for the throttled one: {} of its {HOT} events were stored first",
        hot_then.0
    );
    let report = pipeline
        .shutdown_blocking(Duration::from_secs(60))
        .expect("shut down");
    assert!(report.completed, "{report}");
    assert_eq!(stored_in(&api, "hot"), (HOT, HOT as i64), "{report}");
    for ns in &others {
        assert_eq!(
            stored_in(&api, ns),
            (PER_OTHER, PER_OTHER as i64),
            "{ns}: {report}"
        );
    }
    assert_eq!(report.stats.sinks[0].retry_exhausted, 0, "{report}");
}
