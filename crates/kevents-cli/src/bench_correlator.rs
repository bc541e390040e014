//! `kevents bench correlator`: workload `hot` or `wide` through the correlator alone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use kevents_core::core_v1::correlator::{Correlator, CorrelatorOptions};
use kevents_core::{Clock, EventFactory, EventSource, EventType, Naming, Time, VirtualClock};
use kevents_sim::workload::{Workload, peak_rss_bytes};
use serde_json::json;

/// Options of `kevents bench correlator`.
#[derive(Args, Debug)]
pub struct CorrelatorArgs {
    /// `hot` or `wide` (see docs/benchmarks.md).
    #[arg(long, default_value = "hot")]
    workload: String,
    /// Runs (one JSON line each).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, value_parser = crate::bounds::parse::correlator_runs)]
    runs: usize,
    /// Override the number of occurrences.
    #[arg(long, allow_negative_numbers = true, value_parser = crate::bounds::parse::correlator_n)]
    n: Option<usize>,
}

pub fn run(args: CorrelatorArgs) -> anyhow::Result<()> {
    let mut w = Workload::by_name(&args.workload)
        .ok_or_else(|| anyhow::anyhow!("unknown workload {:?} (hot, wide, api)", args.workload))?;
    if let Some(n) = args.n {
        w.n = n;
    }
    for _ in 0..args.runs {
        println!("{}", run_once(w));
    }
    Ok(())
}

/// One run on one thread, with a virtual clock advancing 1 ms per occurrence and client-go's
/// default options. Occurrences are built by the recorder-side factory in batches of 1024
/// (untimed); the timed part is what client-go's figure measures: `correlate` on every
/// occurrence (in place, as the pipeline's correlator actor does) and, unless skipped,
/// `update_state` with the event as the server would store it (a new resourceVersion) and
/// the correlation's hint, as the actor passes it. Events are dropped after the timed part,
/// batch by batch (client-go's harness keeps all of them alive in a slice).
/// `total_events_per_s` also counts building and dropping the events.
fn run_once(w: Workload) -> serde_json::Value {
    const BATCH: usize = 1024;
    let clock = VirtualClock::new(Time::from_unix_secs(1_700_000_000));
    let mut correlator = Correlator::new(CorrelatorOptions {
        clock: Some(Arc::new(clock.clone())),
        ..Default::default()
    });
    let factory = EventFactory {
        source: EventSource::new("bench", "node"),
        naming: Naming::Legacy,
        reporting_fields: false,
    };
    let (mut skipped, mut patched, mut created) = (0u64, 0u64, 0u64);
    let mut correlating = Duration::ZERO;
    let mut batch = Vec::with_capacity(BATCH);
    let start = Instant::now();
    let mut i = 0;
    while i < w.n {
        let end = (i + BATCH).min(w.n);
        batch.extend((i..end).filter_map(|k| {
            clock.advance(Duration::from_millis(1));
            factory
                .make(clock.now(), w.occurrence(k, EventType::Normal))
                .ok()
                .map(|e| (k, e, clock.now()))
        }));
        let t0 = Instant::now();
        for (k, event, at) in batch.iter_mut() {
            // The correlator reads this clock: put it where the occurrence happened.
            clock.set(*at);
            let d = kevents_core::__private::correlate_in_place(&mut correlator, event);
            if d.skip {
                skipped += 1;
                continue;
            }
            if d.patch.is_some() {
                patched += 1
            } else {
                created += 1
            }
            event.metadata.resource_version = (*k + 1).to_string();
            kevents_core::__private::update_state_with(&mut correlator, d.hint, event);
        }
        correlating += t0.elapsed();
        // Dropped after the timed part, as client-go's harness keeps its events alive (in a
        // slice) while it times them: freeing an event is not the correlator's work.
        batch.clear();
        i = end;
    }
    let total = start.elapsed().as_secs_f64();
    let secs = correlating.as_secs_f64();
    json!({
        "workload": w.name,
        "n": w.n,
        "seconds": secs,
        "correlator_events_per_s": (w.n as f64 / secs).round(),
        "ns_per_event": (secs * 1e9 / w.n as f64).round(),
        "total_events_per_s": (w.n as f64 / total).round(),
        "created": created,
        "patched": patched,
        "skipped": skipped,
        "peak_rss_bytes": peak_rss_bytes(),
    })
}
