//! The functions callgrind counts (`--toggle-collect`, by these names: keep them in step
//! with [`crate::MEASURES`]). Each takes everything it works on ready-made and is never
//! inlined, so its inclusive count is the hot path's cost alone.

use kevents_actors::{Emit, Recorder};
use kevents_core::core_v1::correlator::Correlator;
use kevents_core::{EventType, ObjectReference, Stored, Time, VirtualClock};
use kevents_export::__private::{Deltas, publication};
use kevents_export::{Api, ExportRecord, JetStreamConfig};

/// What a measured function did; printed, and compared with the baseline's.
#[derive(Debug, Default)]
pub struct Tally {
    /// Correlator: events written as new; series: CREATEs; export: records published.
    pub created: u64,
    /// Correlator: events written as patches; series: PATCHes (series starts and finishes).
    pub patched: u64,
    /// Correlator: occurrences skipped (spam filter); series: counted in memory; export:
    /// objects carrying no new occurrence.
    pub skipped: u64,
    /// Emit: calls queued; export: occurrences delivered (the deltas' sum).
    pub accepted: u64,
    /// Export: payload bytes.
    pub bytes: u64,
    /// Anything refused or failed (always 0 when the work is right).
    pub failed: u64,
}

/// `correlate` on every event of the batch (in place, as the pipeline's correlator actor)
/// and, for every write, a new resourceVersion and `update_state` with the hint, the clock
/// put where the occurrence happened: what `kevents bench correlator` times.
#[inline(never)]
pub fn correlate(
    correlator: &mut Correlator,
    clock: &VirtualClock,
    batch: &mut [(usize, kevents_core::Event, Time)],
    tally: &mut Tally,
) {
    for (k, event, at) in batch.iter_mut() {
        clock.set(*at);
        let d = kevents_core::__private::correlate_in_place(correlator, event);
        if d.skip {
            tally.skipped += 1;
            continue;
        }
        if d.patch.is_some() {
            tally.patched += 1;
        } else {
            tally.created += 1;
        }
        event.metadata.resource_version = (*k + 1).to_string();
        kevents_core::__private::update_state_with(correlator, d.hint, event);
    }
}

/// `Recorder::event` (core/v1) on prebuilt objects, reasons and messages: the caller's side
/// of the pipeline (checks, the intake).
#[inline(never)]
pub fn emit(recorder: &Recorder, calls: &[(&ObjectReference, &str, &str)], tally: &mut Tally) {
    for &(object, reason, message) in calls {
        match recorder.event(object, EventType::Normal, reason, message) {
            Ok(Emit::Queued) => tally.accepted += 1,
            _ => tally.failed += 1,
        }
    }
}

/// The events.k8s.io/v1 call (`recorder.events_v1().event`, with an action) on the same
/// arguments: checked with the apiserver's rules at the call, packed into the intake.
#[inline(never)]
pub fn emit_v1(recorder: &Recorder, calls: &[(&ObjectReference, &str, &str)], tally: &mut Tally) {
    let v1 = recorder.events_v1();
    for &(object, reason, message) in calls {
        match v1.event(object, None, EventType::Normal, reason, "Bench", message) {
            Ok(Emit::Queued) => tally.accepted += 1,
            _ => tally.failed += 1,
        }
    }
}

/// The series actor's pure core: each occurrence observed at its instant, every write it
/// returns answered "stored as sent"; then a tick at `finish_at` finishes the idle series
/// and forgets the singletons, and their writes are answered the same way.
#[inline(never)]
pub fn series(
    cache: &mut kevents_core::events_v1::SeriesCache,
    occurrences: Vec<(kevents_core::events_v1::Event, Time)>,
    finish_at: Time,
    tally: &mut Tally,
) {
    let stored = Ok(Stored::AsSent);
    for (event, now) in occurrences {
        let observed = cache.observe(event, now);
        if observed.write.is_none() && observed.evicted.is_none() {
            tally.skipped += 1;
        }
        for write in observed {
            if write.is_create() {
                tally.created += 1;
            } else {
                tally.patched += 1;
            }
            cache.on_write_result(&write, &stored);
        }
    }
    for write in cache.tick(finish_at) {
        tally.patched += 1;
        cache.on_write_result(&write, &stored);
    }
}

/// The export's per-record path without the network: the record read from the watched
/// object, its delta against the uid's last export, and for a record carrying new
/// occurrences, what the JetStream sink publishes (subject, `Nats-Msg-Id`, JSON payload);
/// then the uid's count remembered.
#[inline(never)]
pub fn export(
    deltas: &mut Deltas,
    config: &JetStreamConfig,
    objects: &[serde_json::Value],
    tally: &mut Tally,
) {
    for object in objects {
        let Ok(mut record) = ExportRecord::read(Api::CoreV1, object) else {
            tally.failed += 1;
            continue;
        };
        if deltas.delta(&mut record).is_none() {
            tally.skipped += 1;
            continue;
        }
        match publication(config, &record) {
            Ok((subject, key, payload)) => {
                tally.created += 1;
                tally.accepted += record.delta;
                tally.bytes +=
                    std::hint::black_box(subject.len() + key.len() + payload.len()) as u64;
            }
            Err(_) => tally.failed += 1,
        }
        deltas.remember(&record);
    }
}
