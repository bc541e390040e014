//! Criterion benchmarks of the correlator on the `hot` and `wide` workloads
//! (docs/benchmarks.md): one occurrence through `correlate` plus `update_state`, events built
//! outside the measured closure. `kevents bench correlator` runs the whole workloads.

use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use kevents_core::core_v1::correlator::{Correlator, CorrelatorOptions};
use kevents_core::{Clock, EventFactory, EventSource, EventType, Naming, Time, VirtualClock};
use kevents_sim::workload::Workload;

fn bench_workload(c: &mut Criterion, w: Workload) {
    let mut group = c.benchmark_group(format!("correlator/{}", w.name));
    group.throughput(Throughput::Elements(1));
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
    let mut i = 0usize;
    group.bench_function("correlate+update_state", |b| {
        b.iter_batched(
            || {
                i += 1;
                clock.advance(Duration::from_millis(1));
                factory
                    .make(clock.now(), w.occurrence(i % w.n, EventType::Normal))
                    .expect("workload occurrences are valid")
            },
            |event| {
                let mut r = correlator.correlate(event);
                if !r.skip {
                    r.event.metadata.resource_version = "1".into();
                    correlator.update_state(&r.event);
                }
                r.skip
            },
            BatchSize::SmallInput,
        );
    });
    group.finish();
}

fn correlator(c: &mut Criterion) {
    bench_workload(c, Workload::HOT);
    bench_workload(c, Workload::WIDE);
}

criterion_group!(benches, correlator);
criterion_main!(benches);
