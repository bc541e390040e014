//! The `metrics` facade export: every counter of `StatsSnapshot` reaches the installed
//! recorder under the name and labels listed in `stats.rs`, with the same value.
//!
//! A global recorder is process-wide and the intake counters have no labels, so this binary
//! holds exactly one test and builds exactly one pipeline.
#![allow(missing_docs)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kevents_actors::{Emit, IntakePolicy, Pipeline, RecordError, SinkOptions, StatsSnapshot};
use kevents_core::core_v1::correlator::CorrelatorOptions;
use kevents_core::{EventSource, EventType, ObjectReference, Occurrence};
use kevents_sim::MemoryApiServer;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// A counter's identity: name and labels (label order does not matter).
type CounterId = (String, BTreeMap<String, String>);

/// Keeps every counter's value (the same `AtomicU64` for every registration of one key, as an
/// exporter aggregates them); gauges and histograms are ignored.
#[derive(Clone, Default)]
struct CountingRecorder {
    counters: Arc<Mutex<HashMap<CounterId, Arc<AtomicU64>>>>,
}

fn id(name: &str, labels: &[(&str, &str)]) -> CounterId {
    (
        name.to_owned(),
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    )
}

impl CountingRecorder {
    /// The exported value of a counter; panics if it was never registered.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let counters = self.counters.lock().unwrap();
        match counters.get(&id(name, labels)) {
            Some(v) => v.load(Ordering::SeqCst),
            None => {
                let mut known: Vec<_> = counters.keys().collect();
                known.sort();
                panic!("counter {name} {labels:?} was never registered; registered: {known:#?}")
            }
        }
    }

    fn len(&self) -> usize {
        self.counters.lock().unwrap().len()
    }
}

impl Recorder for CountingRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let id = (
            key.name().to_owned(),
            key.labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect(),
        );
        let value = self.counters.lock().unwrap().entry(id).or_default().clone();
        Counter::from_arc(value)
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// Every counter of `s` equals its exported value.
fn assert_exported(m: &CountingRecorder, s: &StatsSnapshot) {
    assert_eq!(m.get("kevents_recorded_total", &[]), s.recorded, "recorded");
    for (reason, value) in [
        ("invalid", s.dropped_invalid),
        ("intake_full", s.dropped_intake_full),
        ("after_shutdown", s.dropped_after_shutdown),
    ] {
        assert_eq!(
            m.get("kevents_dropped_total", &[("reason", reason)]),
            value,
            "dropped {reason}"
        );
    }
    assert_eq!(
        m.get("kevents_broadcast_total", &[]),
        s.broadcast,
        "broadcast"
    );
    for w in &s.watchers {
        let n = w.name.as_str();
        assert_eq!(
            m.get("kevents_watcher_accepted_total", &[("watcher", n)]),
            w.accepted,
            "watcher {n} accepted"
        );
        for (reason, value) in [("full", w.dropped_full), ("closed", w.dropped_closed)] {
            assert_eq!(
                m.get(
                    "kevents_watcher_dropped_total",
                    &[("watcher", n), ("reason", reason)]
                ),
                value,
                "watcher {n} dropped {reason}"
            );
        }
    }
    for k in &s.sinks {
        let n = k.name.as_str();
        for (outcome, value) in [
            ("correlated", k.correlated),
            ("aggregated", k.aggregated),
            ("spam_filtered", k.spam_filtered),
        ] {
            assert_eq!(
                m.get(
                    "kevents_sink_events_total",
                    &[("sink", n), ("outcome", outcome)]
                ),
                value,
                "sink {n} events {outcome}"
            );
        }
        for (outcome, value) in [
            ("created", k.created),
            ("patched", k.patched),
            ("recreated", k.recreated),
            ("rejected", k.rejected),
            ("retry_exhausted", k.retry_exhausted),
            ("abandoned", k.abandoned),
        ] {
            assert_eq!(
                m.get(
                    "kevents_sink_writes_total",
                    &[("sink", n), ("outcome", outcome)]
                ),
                value,
                "sink {n} writes {outcome}"
            );
        }
        assert_eq!(
            m.get("kevents_sink_attempts_total", &[("sink", n)]),
            k.attempts,
            "sink {n} attempts"
        );
        assert_eq!(
            m.get("kevents_sink_retries_total", &[("sink", n)]),
            k.retries,
            "sink {n} retries"
        );
        assert_eq!(
            m.get("kevents_sink_restarts_total", &[("sink", n)]),
            k.restarts,
            "sink {n} restarts"
        );
    }
}

fn pod(name: &str) -> ObjectReference {
    ObjectReference::new("v1", "Pod", "ns", name).with_uid(format!("uid-{name}"))
}

fn sink_options(burst_size: i32) -> SinkOptions {
    SinkOptions {
        correlator: CorrelatorOptions {
            burst_size,
            ..CorrelatorOptions::default()
        },
        // One write per correlator result (the request sequence this test counts).
        coalesce: false,
        // client-go's spam filter: a skipped repeat is dropped (`spam_filtered`).
        defer_spam_tails: false,
        ..SinkOptions::default()
    }
}

#[actix_rt::test]
async fn counters_are_exported_with_the_in_process_values() {
    let m = CountingRecorder::default();
    // Before the pipeline exists: its counter handles are registered when it is built.
    metrics::set_global_recorder(m.clone()).expect("the only recorder of this test binary");

    // "strict" lets one event per object through (burst 1), "lenient" the client-go default.
    let strict = MemoryApiServer::new();
    let lenient = MemoryApiServer::new();
    let p = Pipeline::builder(EventSource::new("test", "node"))
        .intake(IntakePolicy::DropIfFull { capacity: 3 })
        .sink("strict", strict.clone(), sink_options(1))
        .sink("lenient", lenient.clone(), sink_options(25))
        .start();
    assert!(
        m.len() > 0,
        "no counter registered with the global recorder"
    );
    let r = p.recorder();

    // Invalid: refused at the call.
    let mut bad = Occurrence::new(pod("a"), EventType::Normal, "Started", "x");
    bad.event_type = "Info".into();
    assert!(matches!(r.emit(bad), Err(RecordError::Invalid(_))));
    // Three fit into the intake; nothing is taken from it before the next await (the actix
    // system runs on this thread), so the fourth is dropped.
    for (object, reason) in [("a", "Started"), ("a", "Started"), ("b", "Failed")] {
        assert_eq!(
            r.event(&pod(object), EventType::Normal, reason, "m"),
            Ok(Emit::Queued)
        );
    }
    assert!(matches!(
        r.event(&pod("c"), EventType::Normal, "Started", "m"),
        Ok(Emit::Dropped(_))
    ));
    p.flush().await.unwrap();

    let s = p.stats();
    // The scenario happened as intended, so the comparison below is not vacuous.
    assert_eq!(
        (
            s.recorded,
            s.dropped_invalid,
            s.dropped_intake_full,
            s.broadcast
        ),
        (3, 1, 1, 3)
    );
    let strict_s = s.sink("strict").unwrap();
    assert_eq!(
        (
            strict_s.correlated,
            strict_s.spam_filtered,
            strict_s.created,
            strict_s.patched
        ),
        (3, 1, 2, 0),
        "burst 1: the repeat on pod a is spam-filtered"
    );
    let lenient_s = s.sink("lenient").unwrap();
    assert_eq!(
        (
            lenient_s.correlated,
            lenient_s.spam_filtered,
            lenient_s.created,
            lenient_s.patched
        ),
        (3, 0, 2, 1),
        "burst 25: the repeat on pod a is a PATCH (count 2)"
    );
    assert_eq!((strict.list().len(), lenient.list().len()), (2, 2));
    assert_eq!(s.watchers.len(), 2, "one watcher per sink chain");
    assert_exported(&m, &s);

    let report = p.shutdown(Duration::from_secs(10)).await;
    assert!(report.completed);
    assert_exported(&m, &report.stats);

    // After shutdown: refused and counted (the handle outlives the pipeline, so compare with
    // the last snapshot plus one).
    assert_eq!(
        r.event(&pod("a"), EventType::Normal, "Started", "late"),
        Err(RecordError::Shutdown)
    );
    assert_eq!(
        m.get("kevents_dropped_total", &[("reason", "after_shutdown")]),
        report.stats.dropped_after_shutdown + 1
    );
}
