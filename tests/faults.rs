//! Fault tests: the whole pipeline and the HTTP sink against the apiserver simulator while
//! it misbehaves. Each test prints its figures (run with `--nocapture` to see them); timings
//! are printed, never asserted. `docs/benchmarks.md` ("Faults") summarises them, and
//! `kevents bench faults --outage-secs 60` runs the full-size outage.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kevents::actors::{
    IntakePolicy, RetryPolicy, SinkSnapshot, StatsSnapshot, WatcherPolicy, WriteBudget,
};
use kevents::core::{Event, EventSink, SinkFuture};
use kevents::http::{HttpConfig, HttpSink};
use kevents::{EventSource, EventType, ObjectReference, Pipeline, SinkOptions};
use kevents_sim::{Faults, SimConfig, SimHandle, Simulator};

async fn sim_sink(sim: &SimHandle, timeout: Duration) -> HttpSink {
    let config = HttpConfig::from_kubeconfig_yaml(&sim.kubeconfig(None, "default"), None)
        .await
        .unwrap()
        .with_request_timeout(timeout)
        .with_connect_timeout(Duration::from_millis(500));
    HttpSink::new(config).unwrap()
}

fn fast_retry(max_attempts: u32, sleep: Duration) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        sleep,
        randomize_first: false,
        ..RetryPolicy::default()
    }
}

fn start(sink: impl EventSink, options: SinkOptions, intake: IntakePolicy) -> Pipeline {
    Pipeline::builder(EventSource::new("kevents-test", "node-1"))
        .intake(intake)
        .sink("apiserver", sink, options)
        .start()
}

fn idle(s: &StatsSnapshot) -> bool {
    s.intake_depth == 0 && s.broadcast == s.recorded && s.watchers.iter().all(|w| w.depth == 0)
}

/// Waits until the pipeline is idle (at most `limit`), calling `check` on every snapshot.
async fn settle(
    p: &Pipeline,
    limit: Duration,
    mut check: impl FnMut(&StatsSnapshot),
) -> SinkSnapshot {
    let start = Instant::now();
    loop {
        let s = p.stats();
        check(&s);
        if idle(&s) {
            return s.sink("apiserver").cloned().unwrap();
        }
        assert!(start.elapsed() < limit, "not idle after {limit:?}: {s:?}");
        actix_rt::time::sleep(Duration::from_millis(10)).await;
    }
}

fn pod(i: usize) -> ObjectReference {
    ObjectReference::new("v1", "Pod", "default", format!("pod-{i}")).with_uid(format!("uid-{i}"))
}

/// Emits one event on each of `objects` (distinct events); returns the per-call latencies.
fn emit(p: &Pipeline, objects: std::ops::Range<usize>) -> Vec<Duration> {
    let r = p.recorder();
    objects
        .map(|i| {
            let t = Instant::now();
            let emit = r.event(
                &pod(i),
                EventType::Warning,
                "BackOff",
                "Back-off restarting failed container",
            );
            let d = t.elapsed();
            emit.unwrap();
            d
        })
        .collect()
}

fn summary(mut d: Vec<Duration>) -> String {
    d.sort();
    let mean = d.iter().sum::<Duration>() / d.len().max(1) as u32;
    format!(
        "{} calls, mean {:?}, p99 {:?}, max {:?}",
        d.len(),
        mean,
        d[(d.len() - 1) * 99 / 100],
        d[d.len() - 1]
    )
}

/// An outage: 50 events are delivered, then the apiserver refuses connections for 2 s
/// while 200 distinct events are emitted. The caller is not slowed; the sink chain holds at most its capacity (50), the
/// other 150 are dropped and counted; everything held is delivered after recovery, within
/// the retry budget (40 attempts, 100 ms apart).
#[test]
fn outage_keeps_memory_bounded_and_delivers_within_the_retry_budget() {
    actix::System::new().block_on(async {
        let sim = Simulator::start(SimConfig::default()).await.unwrap();
        let capacity = 50;
        let intake = 1000;
        let p = start(
            sim_sink(&sim, Duration::from_secs(1)).await,
            SinkOptions {
                retry: fast_retry(40, Duration::from_millis(100)),
                delivery: WatcherPolicy::DropIfFull { capacity },
                ..SinkOptions::default()
            },
            IntakePolicy::DropIfFull { capacity: intake },
        );
        let mut max_depth = 0;
        let mut max_intake = 0;
        let mut bounded = |s: &StatsSnapshot| {
            let w = s.watcher("sink:apiserver").unwrap();
            max_depth = max_depth.max(w.depth);
            max_intake = max_intake.max(s.intake_depth);
            assert!(w.depth <= capacity as u64, "{s:?}");
            assert!(s.intake_depth <= intake as u64, "{s:?}");
            assert!(s.sinks[0].queued <= capacity as u64, "{s:?}");
        };

        let before = emit(&p, 0..50);
        settle(&p, Duration::from_secs(30), &mut bounded).await;

        sim.refuse_connections(None).await;
        let outage = Instant::now();
        let during = emit(&p, 200..400);
        while outage.elapsed() < Duration::from_secs(2) {
            bounded(&p.stats());
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
        let held = p.stats().watcher("sink:apiserver").unwrap().depth;
        sim.accept_connections().await;
        let recovered = Instant::now();
        let s = settle(&p, Duration::from_secs(30), &mut bounded).await;
        let drain = recovered.elapsed();
        let report = p.shutdown(Duration::from_secs(5)).await;
        let w = report.stats.watcher("sink:apiserver").unwrap();

        eprintln!("outage: emit before {}", summary(before));
        eprintln!("outage: emit during {}", summary(during));
        eprintln!(
            "outage: max sink-chain depth {max_depth}/{capacity}, max intake depth {max_intake}/{intake}, held at recovery {held}, drained in {drain:?}"
        );
        eprintln!(
            "outage: created {}, dropped (queue full) {}, retry exhausted {}, attempts {}",
            s.created, w.dropped_full, s.retry_exhausted, s.attempts
        );
        assert_eq!(held, capacity as u64);
        assert_eq!(w.dropped_full, 150, "the rest is counted");
        assert_eq!(s.created, 100, "everything held was delivered");
        assert_eq!((s.retry_exhausted, s.rejected, s.abandoned), (0, 0, 0));
        assert_eq!(w.accepted + w.dropped_full, 250);
        assert_eq!(sim.events().len(), 100);
    });
}

/// A 429 storm: the next 30 requests are answered 429 with `Retry-After: 1`. Every event is
/// delivered; each 429 costs exactly one extra attempt.
#[test]
fn storm_of_429_is_retried_after_retry_after() {
    actix::System::new().block_on(async {
        let sim = Simulator::start(SimConfig::default()).await.unwrap();
        let p = start(
            sim_sink(&sim, Duration::from_secs(5)).await,
            SinkOptions {
                retry: fast_retry(12, Duration::from_millis(10)),
                ..SinkOptions::default()
            },
            IntakePolicy::default(),
        );
        sim.set_faults(Faults::too_many_requests(1, 30));
        let t = Instant::now();
        let lat = emit(&p, 0..20);
        let s = settle(&p, Duration::from_secs(60), |_| {}).await;
        let took = t.elapsed();
        let injected = sim.stats().injected_errors;
        eprintln!(
            "429 storm: emit {}; {} created, {} attempts, {injected} answered 429, delivered in {took:?} (Retry-After 1 s honoured)",
            summary(lat),
            s.created,
            s.attempts
        );
        assert_eq!(injected, 30);
        assert_eq!((s.created, s.failed()), (20, 0));
        assert_eq!(s.attempts, 50);
        p.shutdown(Duration::from_secs(5)).await;
    });
}

/// Slow responses: every request takes 1 s, the per-request timeout is 200 ms. Each event is
/// tried 3 times (timeouts are retried) and then counted as retry-exhausted; the caller
/// is not slowed. With the latency down to 50 ms the next events go through.
#[test]
fn slow_responses_hit_the_per_request_timeout() {
    actix::System::new().block_on(async {
        let sim = Simulator::start(SimConfig::default()).await.unwrap();
        let p = start(
            sim_sink(&sim, Duration::from_millis(200)).await,
            SinkOptions {
                retry: fast_retry(3, Duration::from_millis(20)),
                // Per-write timeouts and retries only: no circuit breaker holding them.
                budget: Some(WriteBudget::off()),
                ..SinkOptions::default()
            },
            IntakePolicy::default(),
        );
        sim.set_faults(Faults::latency(Duration::from_secs(1)));
        let t = Instant::now();
        let lat = emit(&p, 0..5);
        let s = settle(&p, Duration::from_secs(30), |_| {}).await;
        let slow = t.elapsed();
        assert_eq!((s.retry_exhausted, s.attempts, s.created), (5, 15, 0), "{s:?}");

        sim.set_faults(Faults::latency(Duration::from_millis(50)));
        let t = Instant::now();
        emit(&p, 100..120);
        let s = settle(&p, Duration::from_secs(30), |_| {}).await;
        let ok = t.elapsed();
        eprintln!(
            "slow responses: emit {}; 1 s latency / 200 ms timeout: 5 events x 3 attempts exhausted in {slow:?}; 50 ms latency: 20 events created in {ok:?}",
            summary(lat)
        );
        assert_eq!(s.created, 20, "{s:?}");
        p.shutdown(Duration::from_secs(5)).await;
    });
}

/// Resets mid-request: the next 5 requests have their connection reset after the request was
/// read. They are retried; every event is delivered once.
#[test]
fn resets_mid_request_are_retried() {
    actix::System::new().block_on(async {
        let sim = Simulator::start(SimConfig::default()).await.unwrap();
        let p = start(
            sim_sink(&sim, Duration::from_secs(5)).await,
            SinkOptions {
                retry: fast_retry(12, Duration::from_millis(20)),
                ..SinkOptions::default()
            },
            IntakePolicy::default(),
        );
        sim.set_faults(Faults::resets(5));
        let t = Instant::now();
        emit(&p, 0..10);
        let s = settle(&p, Duration::from_secs(30), |_| {}).await;
        let resets = sim.stats().resets;
        eprintln!(
            "resets: {resets} connections reset, {} created, {} attempts, in {:?}",
            s.created,
            s.attempts,
            t.elapsed()
        );
        assert_eq!(resets, 5);
        assert_eq!((s.created, s.failed()), (10, 0), "{s:?}");
        assert!(s.attempts >= 10 && s.attempts <= 15, "{s:?}");
        assert_eq!(sim.events().len(), 10);
        p.shutdown(Duration::from_secs(5)).await;
    });
}

/// An `EventSink` that panics on its 3rd write, wrapping the HTTP sink.
#[derive(Clone)]
struct PanicsOnce {
    inner: HttpSink,
    writes: Arc<AtomicU64>,
}

impl PanicsOnce {
    fn tick(&self) {
        if self.writes.fetch_add(1, Ordering::SeqCst) == 2 {
            panic!("sink bug (injected)");
        }
    }
}

impl EventSink for PanicsOnce {
    fn create(&self, event: &Event) -> SinkFuture {
        self.tick();
        self.inner.create(event)
    }
    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        self.tick();
        self.inner.patch(event, patch)
    }
}

/// A sink panic: the supervisor restarts the sink actor, the write in flight is retried and
/// every event is delivered.
#[test]
fn sink_panic_is_supervised() {
    actix::System::new().block_on(async {
        let sim = Simulator::start(SimConfig::default()).await.unwrap();
        let sink = PanicsOnce {
            inner: sim_sink(&sim, Duration::from_secs(5)).await,
            writes: Arc::default(),
        };
        let p = start(
            sink,
            SinkOptions {
                retry: fast_retry(12, Duration::from_millis(10)),
                ..SinkOptions::default()
            },
            IntakePolicy::default(),
        );
        emit(&p, 0..10);
        let s = settle(&p, Duration::from_secs(30), |_| {}).await;
        eprintln!(
            "sink panic: {} restart(s), {} created, {} attempts",
            s.restarts, s.created, s.attempts
        );
        assert_eq!(s.restarts, 1, "{s:?}");
        assert_eq!((s.created, s.failed()), (10, 0), "{s:?}");
        assert_eq!(sim.events().len(), 10);
        p.shutdown(Duration::from_secs(5)).await;
    });
}
