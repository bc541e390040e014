//! A write the apiserver refuses for good (403 Forbidden: a token that may not write
//! events) is a loss, counted in occurrences, by cause (issue 31): 25 occurrences of one
//! event under a refusing server are 25 occurrences not stored, in both chains; no PATCH is
//! sent for an event whose CREATE was refused; the shutdown report says so; and once the
//! refusal is lifted the next occurrences are stored again, starting with a CREATE.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kevents_actors::{
    EventsV1Config, Pipeline, RetryPolicy, ShutdownReport, SinkOptions, WriteBudget,
};
use kevents_core::events_v1::{self, Reporter};
use kevents_core::{
    CorrelatorOptions, Event, EventSink, EventSource, EventType, ObjectReference, SinkError,
    SinkFuture, Status,
};
use kevents_sim::MemoryApiServer;

/// The in-memory apiserver behind an authorizer that refuses every event request with 403
/// while `refuse` is set, as kube-apiserver does for a token without rights; requests are
/// counted by verb on the server side, refused ones included.
#[derive(Clone, Default)]
struct Gate {
    api: MemoryApiServer,
    refuse: Arc<AtomicBool>,
    creates: Arc<AtomicU64>,
    patches: Arc<AtomicU64>,
}

impl Gate {
    fn refusing() -> Self {
        let g = Gate::default();
        g.refuse.store(true, Ordering::SeqCst);
        g
    }

    fn forbidden(&self, verb: &str, api: &str, namespace: &str) -> Option<SinkError> {
        self.refuse.load(Ordering::SeqCst).then(|| {
            SinkError::Status(Box::new(Status::failure(
                403,
                "Forbidden",
                format!(
                    "events{api} is forbidden: User \"system:serviceaccount:default:nobody\" \
                     cannot {verb} resource \"events\" in API group \"{api}\" in the \
                     namespace \"{namespace}\""
                ),
            )))
        })
    }

    /// (CREATE, PATCH) requests received.
    fn requests(&self) -> (u64, u64) {
        (
            self.creates.load(Ordering::SeqCst),
            self.patches.load(Ordering::SeqCst),
        )
    }
}

/// Every answer comes after a few milliseconds, so that later occurrences arrive while a
/// write is in flight (and queue behind it).
async fn later<T>(r: T) -> T {
    tokio::time::sleep(Duration::from_millis(5)).await;
    r
}

impl EventSink for Gate {
    fn create(&self, event: &Event) -> SinkFuture {
        self.creates.fetch_add(1, Ordering::SeqCst);
        let r = match self.forbidden("create", "", &event.metadata.namespace) {
            Some(e) => Err(e),
            None => self.api.create_now(event).map(Into::into),
        };
        Box::pin(later(r))
    }

    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        self.patches.fetch_add(1, Ordering::SeqCst);
        let ns = &event.metadata.namespace;
        let r = match self.forbidden("patch", "", ns) {
            Some(e) => Err(e),
            None => self
                .api
                .patch_now(ns, &event.metadata.name, patch)
                .map(Into::into),
        };
        Box::pin(later(r))
    }
}

impl kevents_core::events_v1::EventSink for Gate {
    fn create_events_v1(&self, event: &events_v1::Event) -> kevents_core::events_v1::SinkFuture {
        self.creates.fetch_add(1, Ordering::SeqCst);
        let r = match self.forbidden("create", "events.k8s.io", &event.metadata.namespace) {
            Some(e) => Err(e),
            None => self.api.create_now_events_v1(event).map(Into::into),
        };
        Box::pin(later(r))
    }

    fn patch_events_v1(
        &self,
        event: &events_v1::Event,
        patch: &[u8],
    ) -> kevents_core::events_v1::SinkFuture {
        self.patches.fetch_add(1, Ordering::SeqCst);
        let ns = &event.metadata.namespace;
        let r = match self.forbidden("patch", "events.k8s.io", ns) {
            Some(e) => Err(e),
            None => self
                .api
                .patch_now_events_v1(ns, &event.metadata.name, patch)
                .map(Into::into),
        };
        Box::pin(later(r))
    }
}

fn retry() -> RetryPolicy {
    RetryPolicy {
        sleep: Duration::ZERO,
        randomize_first: false,
        ..RetryPolicy::default()
    }
}

fn v1_pipeline(gate: &Gate) -> Pipeline {
    Pipeline::builder(EventSource::new("refusals", "node-1"))
        .events_v1(EventsV1Config::new(Reporter::with_instance(
            "kevents.io/refusals",
            "refusals-0",
        )))
        .sink_events_v1(
            "v1",
            gate.clone(),
            kevents_actors::events_v1::SinkOptions {
                retry: retry(),
                budget: Some(WriteBudget::off()),
                ..kevents_actors::events_v1::SinkOptions::default()
            },
        )
        .start()
}

fn core_pipeline(gate: &Gate) -> Pipeline {
    Pipeline::builder(EventSource::new("refusals", "node-1"))
        .sink(
            "api",
            gate.clone(),
            SinkOptions {
                retry: retry(),
                budget: Some(WriteBudget::off()),
                // No spam filtering in the way of 25 occurrences of one object.
                correlator: CorrelatorOptions {
                    burst_size: 1000,
                    ..CorrelatorOptions::default()
                },
                ..SinkOptions::default()
            },
        )
        .start()
}

fn pod() -> ObjectReference {
    ObjectReference::new("v1", "Pod", "default", "web-1").with_uid("uid-web-1")
}

fn backoff_v1() -> kevents_core::events_v1::Occurrence {
    kevents_core::events_v1::Occurrence::new(
        pod(),
        None,
        EventType::Warning,
        "BackOff",
        "Restart",
        "back-off restarting failed container",
    )
}

const V1_CAUSE: &str = "403 Forbidden: create events.k8s.io/v1 events in namespace \"default\"";
const CORE_CAUSE: &str = "403 Forbidden: create core/v1 events in namespace \"default\"";

/// Records `n` occurrences of the event, waits until the pipeline has handled them all.
async fn record_v1(p: &Pipeline, n: usize) {
    for _ in 0..n {
        p.recorder()
            .events_v1()
            .emit(backoff_v1())
            .expect("recorded");
    }
    p.flush().await.expect("flushed");
}

/// The first occurrence alone, then (its CREATE in flight) the others: they become PATCHes
/// queued behind it.
async fn record_core(p: &Pipeline, n: usize) {
    for i in 0..n {
        p.recorder()
            .event(&pod(), EventType::Warning, "BackOff", "back-off restarting")
            .expect("recorded");
        if i == 0 {
            actix_rt::time::sleep(Duration::from_millis(2)).await;
        }
    }
    p.flush().await.expect("flushed");
    // The correlator learns of the refusal from its sink after the writes ended.
    actix_rt::time::sleep(Duration::from_millis(50)).await;
}

fn assert_reported(report: &ShutdownReport, cause: &str) {
    let text = report.to_string();
    assert!(
        text.contains(&format!("25 occurrences not stored: 25 \u{d7} {cause}")),
        "{text}"
    );
    assert!(report.stats.dropped_total() >= 25, "{report:?}");
    assert_eq!(report.not_stored(), 25);
}

#[actix_rt::test]
async fn events_v1_a_refused_series_is_25_occurrences_not_stored_and_never_patched() {
    let gate = Gate::refusing();
    let p = v1_pipeline(&gate);
    record_v1(&p, 25).await;
    let (creates, patches) = gate.requests();
    assert_eq!(patches, 0, "no PATCH of an event whose CREATE was refused");
    assert!(creates >= 1);
    let report = p.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed, "{report:?}");
    let s = report.stats.sink_events_v1("v1").expect("the series chain");
    assert_eq!(s.not_stored, 25, "{s:?}");
    assert_eq!(s.not_stored_by_cause, [(V1_CAUSE.to_owned(), 25)]);
    assert_eq!((s.patched, s.delivered()), (0, 0), "{s:?}");
    assert_eq!(s.unwritten, 0, "{s:?}");
    assert_eq!(gate.requests().1, 0, "nor at shutdown");
    assert_reported(&report, V1_CAUSE);
    assert!(gate.api.list_events_v1().is_empty());
}

#[actix_rt::test]
async fn events_v1_occurrences_after_the_refusal_is_lifted_are_stored() {
    let gate = Gate::refusing();
    let p = v1_pipeline(&gate);
    record_v1(&p, 25).await;
    assert_eq!(gate.requests().1, 0);
    // RBAC fixed: the next occurrence starts again with a CREATE.
    gate.refuse.store(false, Ordering::SeqCst);
    record_v1(&p, 3).await;
    let report = p.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed, "{report:?}");
    let stored = gate.api.list_events_v1();
    assert_eq!(stored.len(), 1, "{stored:#?}");
    assert_eq!(stored[0].series.map(|s| s.count), Some(3), "{stored:#?}");
    let s = report.stats.sink_events_v1("v1").expect("the series chain");
    assert_eq!(s.not_stored, 25, "{s:?}");
    assert_eq!(s.created, 1, "{s:?}");
    assert_reported(&report, V1_CAUSE);
}

#[actix_rt::test]
async fn core_v1_a_refused_event_is_25_occurrences_not_stored_and_never_patched() {
    let gate = Gate::refusing();
    let p = core_pipeline(&gate);
    record_core(&p, 25).await;
    assert_eq!(
        gate.requests().1,
        0,
        "no PATCH of an event whose CREATE was refused"
    );
    let report = p.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed, "{report:?}");
    report
        .stats
        .check_sinks()
        .expect("every write accounted for");
    let k = report.stats.sink("api").expect("the core/v1 chain");
    assert_eq!(k.not_stored, 25, "{k:?}");
    assert_eq!(k.not_stored_by_cause, [(CORE_CAUSE.to_owned(), 25)]);
    assert_eq!((k.patched, k.delivered()), (0, 0), "{k:?}");
    assert_eq!(gate.requests().1, 0);
    assert_reported(&report, CORE_CAUSE);
    assert!(gate.api.list().is_empty());
}

#[actix_rt::test]
async fn core_v1_occurrences_after_the_refusal_is_lifted_are_stored() {
    let gate = Gate::refusing();
    let p = core_pipeline(&gate);
    record_core(&p, 25).await;
    assert_eq!(gate.requests().1, 0);
    gate.refuse.store(false, Ordering::SeqCst);
    record_core(&p, 3).await;
    let report = p.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed, "{report:?}");
    report
        .stats
        .check_sinks()
        .expect("every write accounted for");
    let stored = gate.api.list();
    assert_eq!(stored.len(), 1, "{stored:#?}");
    assert_eq!(stored[0].count, 3, "{stored:#?}");
    let k = report.stats.sink("api").expect("the core/v1 chain");
    assert_eq!(k.not_stored, 25, "{k:?}");
    assert_eq!(k.created, 1, "{k:?}");
    assert_reported(&report, CORE_CAUSE);
}

/// Without coalescing (client-go's request sequence: one write per occurrence), the refused
/// CREATE drops the 24 PATCHes queued behind it: still 25, counted once.
#[actix_rt::test]
async fn core_v1_without_coalescing_counts_each_occurrence_once() {
    let gate = Gate::refusing();
    let p = Pipeline::builder(EventSource::new("refusals", "node-1"))
        .sink(
            "api",
            gate.clone(),
            SinkOptions {
                retry: retry(),
                budget: Some(WriteBudget::off()),
                coalesce: false,
                correlator: CorrelatorOptions {
                    burst_size: 1000,
                    ..CorrelatorOptions::default()
                },
                ..SinkOptions::default()
            },
        )
        .start();
    record_core(&p, 25).await;
    let report = p.shutdown(Duration::from_secs(10)).await;
    report
        .stats
        .check_sinks()
        .expect("every write accounted for");
    let k = report.stats.sink("api").expect("the core/v1 chain");
    assert_eq!((k.not_stored, k.rejected), (25, 25), "{k:?}");
    assert_eq!(gate.requests().1, 0);
}

/// A PATCH refused after a stored CREATE (a role that may create events but not patch
/// them) loses the occurrences the server lacks, each counted once over the refusals.
#[actix_rt::test]
async fn events_v1_refused_patches_count_what_the_server_lacks() {
    #[derive(Clone, Default)]
    struct CreateOnly(Gate);
    impl kevents_core::events_v1::EventSink for CreateOnly {
        fn create_events_v1(
            &self,
            event: &events_v1::Event,
        ) -> kevents_core::events_v1::SinkFuture {
            self.0.create_events_v1(event)
        }
        fn patch_events_v1(
            &self,
            event: &events_v1::Event,
            _: &[u8],
        ) -> kevents_core::events_v1::SinkFuture {
            self.0.patches.fetch_add(1, Ordering::SeqCst);
            let e = Status::failure(403, "Forbidden", event.metadata.name.clone());
            Box::pin(later(Err(SinkError::Status(Box::new(e)))))
        }
    }
    let gate = CreateOnly(Gate::default());
    let p = Pipeline::builder(EventSource::new("refusals", "node-1"))
        .events_v1(EventsV1Config::new(Reporter::with_instance(
            "kevents.io/refusals",
            "refusals-0",
        )))
        .sink_events_v1(
            "v1",
            gate.clone(),
            kevents_actors::events_v1::SinkOptions {
                retry: retry(),
                budget: Some(WriteBudget::off()),
                freshness: None,
                ..kevents_actors::events_v1::SinkOptions::default()
            },
        )
        .start();
    record_v1(&p, 10).await;
    let report = p.shutdown(Duration::from_secs(10)).await;
    let s = report.stats.sink_events_v1("v1").expect("the series chain");
    // The CREATE stored 1; the series start (count 2) and the shutdown flush (count 10)
    // were refused: 9 occurrences the server lacks.
    assert_eq!((s.created, s.not_stored), (1, 9), "{s:?}");
    let cause = "403 Forbidden: patch events.k8s.io/v1 events in namespace \"default\"";
    assert_eq!(s.not_stored_by_cause, [(cause.to_owned(), 9)]);
    assert_eq!((s.restarts, gate.0.requests()), (0, (1, 2)), "{s:?}");
}
