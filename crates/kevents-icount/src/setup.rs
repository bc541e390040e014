//! The fixed inputs of each measure, built before the measured function is called, and the
//! JSON line saying what the work did.

use std::sync::Arc;
use std::time::Duration;

use kevents_actors::{EventsV1Config, IntakePolicy, Pipeline, SinkOptions};
use kevents_core::core_v1::correlator::{Correlator, CorrelatorOptions};
use kevents_core::events_v1::{Reporter, SeriesCache, SeriesOptions};
use kevents_core::{Clock, EventFactory, EventSource, EventType, Naming, Time, VirtualClock};
use kevents_export::__private::Deltas;
use kevents_export::JetStreamConfig;
use kevents_sim::MemoryApiServer;
use kevents_sim::workload::Workload;
use serde_json::{Value, json};

use crate::measured::{self, Tally};

/// `hot` cut to 30 000 occurrences: 1 000 pods, 5 reasons, 3 messages; deduplication,
/// patches, the spam filter, and 5 000 aggregate keys against 4 096-entry LRUs.
pub const CORRELATOR_HOT: Workload = Workload {
    n: 30_000,
    ..Workload::HOT
};
/// `wide` cut to 20 000 occurrences: every one a new event.
pub const CORRELATOR_WIDE: Workload = Workload {
    n: 20_000,
    ..Workload::WIDE
};
/// `api` stretched to 20 000 occurrences, spam filter off: 100 pods, 3 reasons, 2 messages,
/// so most occurrences are repeats of a cached event (patches of its count).
pub const CORRELATOR_API: Workload = Workload {
    n: 20_000,
    ..Workload::API
};
/// Calls of each emit measure (`hot`'s objects, reasons and messages).
const EMIT_CALLS: usize = 20_000;
/// Occurrences through the series cache (`hot`'s objects and reasons).
const SERIES_OCCURRENCES: usize = 30_000;
/// Live events of the export measure, and the watched objects read per event.
const EXPORT_EVENTS: usize = 2_000;
const EXPORT_ROUNDS: usize = 10;

const START: i64 = 1_700_000_000;

fn summary(measure: &str, size: usize, t: &Tally) -> Value {
    json!({
        "measure": measure,
        "size": size,
        "created": t.created,
        "patched": t.patched,
        "skipped": t.skipped,
        "accepted": t.accepted,
        "bytes": t.bytes,
        "failed": t.failed,
    })
}

/// The correlator on `w`, in batches of 1 024 events built by the recorder-side factory
/// (one virtual millisecond per occurrence), as `kevents bench correlator`.
/// `spam_filter: false` sets a burst of 2^30 (`kevents bench pipeline`'s).
pub fn correlator(w: Workload, spam_filter: bool) -> Result<Value, String> {
    const BATCH: usize = 1024;
    let clock = VirtualClock::new(Time::from_unix_secs(START));
    let defaults = CorrelatorOptions::default();
    let mut correlator = Correlator::new(CorrelatorOptions {
        clock: Some(Arc::new(clock.clone())),
        burst_size: if spam_filter {
            defaults.burst_size
        } else {
            1 << 30
        },
        ..defaults
    });
    let factory = EventFactory {
        source: EventSource::new("bench", "node"),
        naming: Naming::Legacy,
        reporting_fields: false,
    };
    let mut tally = Tally::default();
    let mut batch = Vec::with_capacity(BATCH);
    let mut i = 0;
    while i < w.n {
        let end = (i + BATCH).min(w.n);
        for k in i..end {
            clock.advance(Duration::from_millis(1));
            let event = factory
                .make(clock.now(), w.occurrence(k, EventType::Normal))
                .map_err(|e| format!("occurrence {k}: {e}"))?;
            batch.push((k, event, clock.now()));
        }
        measured::correlate(&mut correlator, &clock, &mut batch, &mut tally);
        batch.clear();
        i = end;
    }
    Ok(summary(&format!("correlator-{}", w.name), w.n, &tally))
}

/// `EMIT_CALLS` record calls into a running pipeline (core/v1 and events.k8s.io/v1 sink
/// chains, unbounded intake) on this thread's actix System: nothing drains the intake while
/// the calls run, so each call does the same work in every run.
pub fn emit(v1: bool) -> Result<Value, String> {
    let w = Workload::HOT;
    let objects: Vec<_> = (0..w.objects).map(|o| w.object(o)).collect();
    let reasons: Vec<String> = (0..w.reasons).map(|r| format!("Reason{r}")).collect();
    let messages: Vec<String> = (0..w.messages)
        .map(|m| format!("message variant {m}"))
        .collect();
    let calls: Vec<_> = (0..EMIT_CALLS)
        .map(|i| {
            (
                &objects[i % w.objects],
                reasons[(i / w.objects) % w.reasons].as_str(),
                messages[(i / (w.objects * w.reasons)) % w.messages].as_str(),
            )
        })
        .collect();
    let system = actix::System::new();
    let tally = system.block_on(async {
        let pipeline = Pipeline::builder(EventSource::new("bench", "node"))
            .factory(EventFactory {
                source: EventSource::new("bench", "node"),
                naming: Naming::Legacy,
                reporting_fields: false,
            })
            .events_v1(EventsV1Config::new(Reporter::with_instance(
                "bench", "node",
            )))
            .intake(IntakePolicy::Unbounded)
            .sink("memory", MemoryApiServer::new(), SinkOptions::default())
            .sink_events_v1(
                "memory-v1",
                MemoryApiServer::new(),
                kevents_actors::events_v1::SinkOptions::default(),
            )
            .start();
        let recorder = pipeline.recorder();
        let mut tally = Tally::default();
        if v1 {
            measured::emit_v1(&recorder, &calls, &mut tally);
        } else {
            measured::emit(&recorder, &calls, &mut tally);
        }
        // Not shut down: delivering the backlog is not what is measured, and the process
        // ends after the summary line.
        std::mem::forget(pipeline);
        tally
    });
    // Neither is stopping the System: its actors would start (and be torn down) only now.
    std::mem::forget(system);
    let name = if v1 { "emit-v1" } else { "emit" };
    Ok(summary(name, EMIT_CALLS, &tally))
}

/// `SERIES_OCCURRENCES` events.k8s.io/v1 occurrences (`hot`'s 1 000 pods and 5 reasons, one
/// virtual millisecond apart) through a series cache, then the tick that finishes them.
pub fn series() -> Result<Value, String> {
    let w = Workload::HOT;
    let mut factory =
        kevents_core::events_v1::EventFactory::new(Reporter::with_instance("bench", "node"));
    factory.naming = Naming::Legacy;
    let start = Time::from_unix_secs(START);
    let mut occurrences = Vec::with_capacity(SERIES_OCCURRENCES);
    let mut now = start;
    for i in 0..SERIES_OCCURRENCES {
        now = start.saturating_add(Duration::from_millis(i as u64));
        let occ = kevents_core::events_v1::Occurrence::new(
            w.object(i),
            None,
            EventType::Warning,
            format!("Reason{}", (i / w.objects) % w.reasons),
            "Restart",
            "back-off restarting failed container",
        );
        let event = factory
            .make(now, occ)
            .map_err(|e| format!("occurrence {i}: {e}"))?;
        occurrences.push((event, now));
    }
    let mut cache = SeriesCache::new(SeriesOptions::default());
    let mut tally = Tally::default();
    let finish_at = now.saturating_add(Duration::from_secs(7 * 60));
    measured::series(&mut cache, occurrences, finish_at, &mut tally);
    if !cache.is_empty() {
        tally.failed += cache.len() as u64;
    }
    Ok(summary("series", SERIES_OCCURRENCES, &tally))
}

/// A watched core/v1 event as the apiserver serves it: `EXPORT_EVENTS` events, each read
/// `EXPORT_ROUNDS` times with its count rising, except every fourth round, which reads the
/// count the round before read (a relist: no new occurrence).
fn watched(i: usize) -> Value {
    let e = i % EXPORT_EVENTS;
    let round = i / EXPORT_EVENTS;
    let count = 1 + round - round / 4;
    let second = |s: usize| {
        format!(
            "2026-01-01T{:02}:{:02}:{:02}Z",
            s / 3600,
            (s / 60) % 60,
            s % 60
        )
    };
    json!({
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": format!("pod-{e}.17a0b1c2d3e4f5{:02x}", e % 256),
            "namespace": format!("team-{}", e % 20),
            "uid": format!("0b3c{e:04x}-6f1d-4f5e-9a7b-1c2d3e4f{:04x}", e),
            "resourceVersion": format!("{}", 100_000 + i),
            "creationTimestamp": second(e),
            "managedFields": [{
                "manager": "kubelet",
                "operation": "Update",
                "apiVersion": "v1",
                "time": second(e + round),
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:count": {}, "f:lastTimestamp": {}, "f:message": {}}
            }]
        },
        "involvedObject": {
            "kind": "Pod",
            "namespace": format!("team-{}", e % 20),
            "name": format!("pod-{e}"),
            "uid": format!("7e2a{e:04x}-0c1d-4e5f-8a9b-0c1d2e3f{:04x}", e),
            "apiVersion": "v1",
            "resourceVersion": "4242",
            "fieldPath": "spec.containers{app}"
        },
        "reason": "BackOff",
        "message": "Back-off restarting failed container app in pod",
        "source": {"component": "kubelet", "host": format!("node-{}", e % 50)},
        "firstTimestamp": second(e),
        "lastTimestamp": second(e + round),
        "count": count,
        "type": "Warning",
        "eventTime": null,
        "reportingComponent": "kubelet",
        "reportingInstance": format!("node-{}", e % 50)
    })
}

/// `EXPORT_EVENTS * EXPORT_ROUNDS` watched objects through the export's per-record path.
pub fn export() -> Result<Value, String> {
    let objects: Vec<Value> = (0..EXPORT_EVENTS * EXPORT_ROUNDS).map(watched).collect();
    let config = JetStreamConfig::new("kevents");
    let mut deltas = Deltas::with_capacity(EXPORT_EVENTS);
    let mut tally = Tally::default();
    measured::export(&mut deltas, &config, &objects, &mut tally);
    if deltas.live() != EXPORT_EVENTS {
        tally.failed += 1;
    }
    Ok(summary("export", objects.len(), &tally))
}
