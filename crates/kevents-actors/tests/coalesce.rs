//! Coalescing writes, the shared write budget (rate, 429 Retry-After pause) and the circuit
//! breaker, in virtual time (`tokio::time::pause`) against the in-memory apiserver.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kevents_actors::{
    BreakerOptions, BudgetOptions, IntakePolicy, Pipeline, RetryPolicy, SinkOptions, StatsSnapshot,
    WatcherPolicy, WriteBudget,
};
use kevents_core::{
    CorrelatorOptions, Event, EventSink, EventSource, EventType, ObjectReference, SharedClock,
    SinkError, SinkFuture, Status, Stored, Time, VirtualClock,
};
use kevents_sim::MemoryApiServer;
use proptest::prelude::*;

mod common;
use common::Queues;
use tokio::time::Instant;

/// One request the sink received.
#[derive(Debug, Clone)]
struct Request {
    verb: &'static str,
    name: String,
    count: i32,
    resource_version: String,
    body: Vec<u8>,
    ok: bool,
    at: Instant,
}

/// What the sink answers a request with, before the store sees it.
type Fault = Arc<dyn Fn(&Request) -> Option<SinkError> + Send + Sync>;
/// How long the sink takes to answer a request.
type Latency = Arc<dyn Fn() -> Duration + Send + Sync>;

/// The in-memory apiserver behind a latency and a fault plan, recording every request.
#[derive(Clone)]
struct Laggy {
    api: MemoryApiServer,
    log: Arc<Mutex<Vec<Request>>>,
    latency: Latency,
    fault: Option<Fault>,
}

impl Laggy {
    fn new(latency: Duration) -> Self {
        Laggy {
            api: MemoryApiServer::new(),
            log: Arc::default(),
            latency: Arc::new(move || latency),
            fault: None,
        }
    }

    fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap().clone()
    }

    fn call(&self, verb: &'static str, event: &Event, body: &[u8]) -> SinkFuture {
        let mut req = Request {
            verb,
            name: event.metadata.name.clone(),
            count: event.count,
            resource_version: event.metadata.resource_version.clone(),
            body: body.to_vec(),
            ok: false,
            at: Instant::now(),
        };
        let delay = (self.latency)();
        let (this, event) = (self.clone(), event.clone());
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            // The request reaches the store after the latency (so the order of the
            // requests of one event is the order they were made: one at a time per event).
            let result = match this.fault.as_ref().and_then(|f| f(&req)) {
                Some(e) => Err(e),
                None if verb == "create" => this.api.create_now(&event),
                None => {
                    this.api
                        .patch_now(&event.metadata.namespace, &event.metadata.name, &req.body)
                }
            };
            req.ok = result.is_ok();
            this.log.lock().unwrap().push(req);
            result.map(Stored::from)
        })
    }
}

impl EventSink for Laggy {
    fn create(&self, event: &Event) -> SinkFuture {
        self.call("create", event, b"")
    }
    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        self.call("patch", event, patch)
    }
}

fn pod(name: &str) -> ObjectReference {
    ObjectReference::new("v1", "Pod", "ns", name).with_uid(format!("uid-{name}"))
}

fn status(code: u16, retry_after: Option<u64>) -> SinkError {
    let mut s = Status::failure(code, "Failure", "injected");
    s.retry_after = retry_after.map(Duration::from_secs);
    SinkError::Status(Box::new(s))
}

/// No randomness, short sleeps, many attempts: every write ends stored.
fn patient_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 10_000,
        sleep: Duration::from_millis(100),
        randomize_first: false,
        min_retry_after: Duration::ZERO,
        ..RetryPolicy::default()
    }
}

/// A pipeline whose event names and timestamps come from `clock` (so two runs of the same
/// trace make the same events).
fn pipeline(clock: &VirtualClock, sink: Laggy, options: SinkOptions) -> Pipeline {
    pipeline_with(clock, sink, IntakePolicy::default(), options)
}

/// [`pipeline`] with an intake policy, the correlator's own options kept (its clock is
/// `clock`).
fn pipeline_with(
    clock: &VirtualClock,
    sink: Laggy,
    intake: IntakePolicy,
    options: SinkOptions,
) -> Pipeline {
    let shared: SharedClock = Arc::new(clock.clone());
    Pipeline::builder(EventSource::new("test", "node"))
        .clock(Arc::clone(&shared))
        .intake(intake)
        .sink(
            "api",
            sink,
            SinkOptions {
                correlator: CorrelatorOptions {
                    clock: Some(shared),
                    ..options.correlator.clone()
                },
                ..options
            },
        )
        .start()
}

/// The spam filter effectively off.
fn no_spam_filter() -> CorrelatorOptions {
    CorrelatorOptions {
        burst_size: 1 << 30,
        ..CorrelatorOptions::default()
    }
}

fn start_clock() -> VirtualClock {
    VirtualClock::new(Time::from_unix_nanos(1_600_000_000_000_000_000))
}

fn checked(s: &StatsSnapshot) {
    s.check_sinks().unwrap();
}

/// A CREATE that has not started absorbs the newer results of its event: one request, with
/// the newest count; the superseded writes are counted and the correlator learns the stored
/// state (the next occurrence is a PATCH of count 6 whose body is the one every result
/// written in order would have sent).
#[actix_rt::test]
async fn a_waiting_create_absorbs_newer_results() {
    tokio::time::pause();
    let mut last_bodies = Vec::new();
    for coalesce in [true, false] {
        let clock = start_clock();
        let sink = Laggy::new(Duration::from_millis(10));
        let p = pipeline(
            &clock,
            sink.clone(),
            SinkOptions {
                coalesce,
                budget: Some(WriteBudget::off()),
                ..SinkOptions::default()
            },
        );
        let r = p.recorder();
        for _ in 0..5 {
            clock.advance(Duration::from_secs(1));
            r.event(&pod("a"), EventType::Warning, "BackOff", "again")
                .unwrap();
        }
        p.flush().await.unwrap();
        clock.advance(Duration::from_secs(1));
        r.event(&pod("a"), EventType::Warning, "BackOff", "again")
            .unwrap();
        let report = p.shutdown(Duration::from_secs(10)).await;
        checked(&report.stats);
        let k = report.stats.sink("api").unwrap().clone();
        let reqs = sink.requests();
        let shape: Vec<_> = reqs.iter().map(|r| (r.verb, r.count)).collect();
        if coalesce {
            assert_eq!(shape, [("create", 5), ("patch", 6)]);
            assert_eq!((k.created, k.patched, k.superseded), (1, 1, 4));
        } else {
            assert_eq!(
                shape,
                [
                    ("create", 1),
                    ("patch", 2),
                    ("patch", 3),
                    ("patch", 4),
                    ("patch", 5),
                    ("patch", 6)
                ]
            );
            assert_eq!(k.superseded, 0);
        }
        let stored = sink.api.list();
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0].count, 6);
        last_bodies.push(reqs.last().unwrap().body.clone());
    }
    assert_eq!(
        last_bodies[0], last_bodies[1],
        "the PATCH of count 6 is byte-identical with and without coalescing"
    );
}

/// A PATCH waiting behind a write in flight is replaced by the newest one.
#[actix_rt::test]
async fn a_waiting_patch_is_replaced_by_the_newest() {
    tokio::time::pause();
    let clock = start_clock();
    let sink = Laggy::new(Duration::from_millis(50));
    let p = pipeline(
        &clock,
        sink.clone(),
        SinkOptions {
            budget: Some(WriteBudget::off()),
            ..SinkOptions::default()
        },
    );
    let r = p.recorder();
    r.event(&pod("a"), EventType::Normal, "Pulled", "x")
        .unwrap();
    // The CREATE is in flight now.
    tokio::time::sleep(Duration::from_millis(10)).await;
    for _ in 0..4 {
        clock.advance(Duration::from_secs(1));
        r.event(&pod("a"), EventType::Normal, "Pulled", "x")
            .unwrap();
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let report = p.shutdown(Duration::from_secs(10)).await;
    checked(&report.stats);
    let shape: Vec<_> = sink.requests().iter().map(|r| (r.verb, r.count)).collect();
    assert_eq!(shape, [("create", 1), ("patch", 5)]);
    assert_eq!(report.stats.sink("api").unwrap().superseded, 3);
    assert_eq!(sink.api.list()[0].count, 5);
}

/// A coalesced PATCH that finds nothing (404) re-creates the event with the newest state and
/// no resourceVersion, as client-go's re-create after 404.
#[actix_rt::test]
async fn a_coalesced_patch_answered_404_recreates_the_newest_state() {
    tokio::time::pause();
    let clock = start_clock();
    let sink = Laggy::new(Duration::from_millis(5));
    let p = pipeline(
        &clock,
        sink.clone(),
        SinkOptions {
            budget: Some(WriteBudget::off()),
            ..SinkOptions::default()
        },
    );
    let r = p.recorder();
    r.event(&pod("a"), EventType::Normal, "Pulled", "x")
        .unwrap();
    p.flush().await.unwrap();
    let name = sink.api.list()[0].metadata.name.clone();
    assert!(sink.api.delete("ns", &name));
    for _ in 0..3 {
        clock.advance(Duration::from_secs(1));
        r.event(&pod("a"), EventType::Normal, "Pulled", "x")
            .unwrap();
    }
    let report = p.shutdown(Duration::from_secs(10)).await;
    checked(&report.stats);
    let reqs = sink.requests();
    let shape: Vec<_> = reqs.iter().map(|r| (r.verb, r.count, r.ok)).collect();
    assert_eq!(
        shape,
        [
            ("create", 1, true),
            ("patch", 4, false),
            ("create", 4, true)
        ]
    );
    assert_eq!(reqs[2].resource_version, "");
    let k = report.stats.sink("api").unwrap();
    assert_eq!((k.created, k.recreated, k.superseded), (1, 1, 2));
    assert_eq!(sink.api.list()[0].count, 4);
}

/// Two pipelines writing to one apiserver share one budget: together they never exceed it.
#[actix_rt::test]
async fn the_budget_is_shared_across_sinks() {
    tokio::time::pause();
    let budget = WriteBudget::new(
        "apiserver",
        BudgetOptions {
            qps: 10,
            burst: 1,
            ..BudgetOptions::default()
        },
    );
    let sink = Laggy::new(Duration::ZERO);
    let options = || SinkOptions {
        budget: Some(budget.clone()),
        ..SinkOptions::default()
    };
    let a = Pipeline::builder(EventSource::new("a", "node"))
        .sink("api", sink.clone(), options())
        .start();
    let b = Pipeline::builder(EventSource::new("b", "node"))
        .write_budget(budget.clone())
        .sink("api", sink.clone(), SinkOptions::default())
        .start();
    let _ = options;
    let start = Instant::now();
    for i in 0..5 {
        a.recorder()
            .event(&pod(&format!("a{i}")), EventType::Normal, "Pulled", "x")
            .unwrap();
        b.recorder()
            .event(&pod(&format!("b{i}")), EventType::Normal, "Pulled", "x")
            .unwrap();
    }
    let (ra, rb) = tokio::join!(
        a.shutdown(Duration::from_secs(60)),
        b.shutdown(Duration::from_secs(60))
    );
    checked(&ra.stats);
    checked(&rb.stats);
    let reqs = sink.requests();
    assert_eq!(reqs.len(), 10);
    // 10 requests at 10 per second with a burst of 1: the last one at least 0.9 s in.
    let last = reqs.iter().map(|r| r.at).max().unwrap();
    assert!(
        last - start >= Duration::from_millis(890),
        "{:?}",
        last - start
    );
    for w in reqs.windows(2) {
        assert!(w[1].at - w[0].at >= Duration::from_millis(90), "{reqs:?}");
    }
    let s = budget.snapshot();
    assert!(s.deferred_rate >= 8, "{s:?}");
    // Both pipelines list the budget they share.
    assert!(ra.stats.budget("apiserver").is_some());
    assert!(rb.stats.budget("apiserver").is_some());
    assert_eq!(ra.stats.budgets.len(), 1);
}

/// A 429 with Retry-After pauses every write of the budget, of every sink sharing it, not
/// only the event that got it.
#[actix_rt::test]
async fn retry_after_pauses_the_whole_apiserver() {
    tokio::time::pause();
    let budget = WriteBudget::new("apiserver", BudgetOptions::default());
    let throttled = Laggy {
        fault: Some(Arc::new(|r: &Request| {
            (r.name.starts_with("first.") && r.verb == "create").then(|| status(429, Some(5)))
        })),
        ..Laggy::new(Duration::from_millis(1))
    };
    // Answers 429 to the first request only.
    let once = Arc::new(Mutex::new(true));
    let throttled = Laggy {
        fault: Some({
            let inner = throttled.fault.clone().unwrap();
            Arc::new(move |r: &Request| {
                let mut first = once.lock().unwrap();
                let e = inner(r).filter(|_| *first);
                if e.is_some() {
                    *first = false;
                }
                e
            })
        }),
        ..throttled
    };
    let other = Laggy::new(Duration::from_millis(1));
    let a = Pipeline::builder(EventSource::new("a", "node"))
        .write_budget(budget.clone())
        .sink("api", throttled.clone(), SinkOptions::default())
        .start();
    let b = Pipeline::builder(EventSource::new("b", "node"))
        .write_budget(budget.clone())
        .sink("api", other.clone(), SinkOptions::default())
        .start();
    let start = Instant::now();
    a.recorder()
        .event(&pod("first"), EventType::Normal, "Pulled", "x")
        .unwrap();
    // The 429 has been answered.
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(throttled.requests().len(), 1);
    b.recorder()
        .event(&pod("second"), EventType::Normal, "Pulled", "x")
        .unwrap();
    let (ra, rb) = tokio::join!(
        a.shutdown(Duration::from_secs(60)),
        b.shutdown(Duration::from_secs(60))
    );
    assert!(ra.completed && rb.completed);
    let second = other.requests();
    assert_eq!(second.len(), 1);
    assert!(
        second[0].at - start >= Duration::from_secs(5),
        "the other sink waited for the Retry-After: {:?}",
        second[0].at - start
    );
    let retried = throttled.requests();
    assert_eq!(retried.len(), 2);
    assert!(retried[1].ok && retried[1].at - start >= Duration::from_secs(5));
    let s = budget.snapshot();
    assert_eq!(s.pauses, 1);
    assert!(s.deferred_retry_after >= 1, "{s:?}");
}

/// Consecutive 5xx open the circuit: no requests but one probe at a time, at a bounded
/// interval, until a probe succeeds; events keep coalescing meanwhile and every count is
/// stored in the end.
#[actix_rt::test]
async fn the_breaker_opens_probes_and_closes() {
    tokio::time::pause();
    let budget = WriteBudget::new(
        "apiserver",
        BudgetOptions {
            qps: 0,
            breaker: BreakerOptions {
                failures: 3,
                probe_interval: Duration::from_millis(500),
                max_probe_interval: Duration::from_secs(1),
            },
            ..BudgetOptions::default()
        },
    );
    let outage_end = Instant::now() + Duration::from_secs(5);
    let sink = Laggy {
        fault: Some(Arc::new(move |_: &Request| {
            (Instant::now() < outage_end).then(|| status(503, None))
        })),
        ..Laggy::new(Duration::from_millis(1))
    };
    let clock = start_clock();
    let p = pipeline(
        &clock,
        sink.clone(),
        SinkOptions {
            retry: patient_retry(),
            budget: Some(budget.clone()),
            ..SinkOptions::default()
        },
    );
    let r = p.recorder();
    for round in 0..10 {
        for i in 0..10 {
            r.event(&pod(&format!("p{i}")), EventType::Warning, "Failed", "x")
                .unwrap();
        }
        let _ = round;
        tokio::time::sleep(Duration::from_millis(300)).await;
        clock.advance(Duration::from_millis(300));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mid = budget.snapshot();
    let report = p.shutdown(Duration::from_secs(120)).await;
    assert!(report.completed);
    checked(&report.stats);
    let s = budget.snapshot();
    assert_eq!(s.circuit_opens, 1, "{s:?}");
    assert!(!s.circuit_open);
    assert!(mid.circuit_opens == 1 && s.probes >= 3, "{mid:?} {s:?}");
    let reqs = sink.requests();
    let failed = reqs.iter().filter(|r| !r.ok).count() as u64;
    // The first attempts of the 10 events (all in flight at once), then only probes. Without
    // the breaker: 10 events retried every 100 ms for 5 s, about 500 failed requests.
    assert!(failed <= 10 + s.probes, "{failed} failed, {s:?}");
    // Every occurrence is in a stored count.
    let stored = sink.api.list();
    assert_eq!(stored.len(), 10);
    assert!(stored.iter().all(|e| e.count == 10), "{stored:?}");
    let k = report.stats.sink("api").unwrap();
    assert!(
        k.superseded > 0,
        "events coalesced while the circuit was open"
    );
}

/// One occurrence of a random trace: which object, reason and message, and how long after
/// the previous one.
#[derive(Debug, Clone)]
struct Step {
    object: u8,
    reason: u8,
    message: u8,
    gap_ms: u16,
}

fn step() -> impl Strategy<Value = Step> {
    (0u8..4, 0u8..2, 0u8..2, prop_oneof![Just(0u16), 0u16..40]).prop_map(
        |(object, reason, message, gap_ms)| Step {
            object,
            reason,
            message,
            gap_ms,
        },
    )
}

/// Per event name: count, message, firstTimestamp, lastTimestamp, reason.
type FinalState = BTreeMap<String, (i32, String, Option<Time>, Option<Time>, String)>;

/// What the final state of an event is, resourceVersion aside (it counts writes), with the
/// timestamps as the wire carries them (metav1.Time: seconds; the in-memory store keeps a
/// CREATE's nanoseconds but re-encodes an object it patches).
fn final_state(api: &MemoryApiServer) -> FinalState {
    api.list()
        .into_iter()
        .map(|e| {
            (
                e.metadata.name.clone(),
                (
                    e.count,
                    e.message,
                    e.first_timestamp.map(Time::truncate_to_secs),
                    e.last_timestamp.map(Time::truncate_to_secs),
                    e.reason,
                ),
            )
        })
        .collect()
}

/// Runs `trace` through a pipeline writing to a sink with random latencies (and, when
/// `faults`, random transient failures: 503, transport errors, 429 with a short
/// Retry-After) and returns the store's final state and the number of requests. The spam
/// filter is off: merging reorders repeats (an identity's repeats are correlated at its first
/// position), which may change which occurrences of an object the filter skips, though not
/// how many.
fn run_trace(
    trace: &[Step],
    seed: u64,
    coalesce: bool,
    faults: bool,
    queues: Queues,
) -> (FinalState, usize) {
    actix::System::new().block_on(async move {
        tokio::time::pause();
        let rng = Arc::new(Mutex::new(fastrand::Rng::with_seed(seed)));
        let latency_rng = Arc::clone(&rng);
        let sink = Laggy {
            latency: Arc::new(move || {
                Duration::from_millis(latency_rng.lock().unwrap().u64(0..30))
            }),
            fault: faults.then(|| {
                let rng = Arc::clone(&rng);
                Arc::new(move |_: &Request| {
                    let mut rng = rng.lock().unwrap();
                    match rng.u32(0..10) {
                        0 => Some(status(503, None)),
                        1 => Some(SinkError::Transport("connection reset".into())),
                        2 => Some(status(429, Some(1))),
                        _ => None,
                    }
                }) as Fault
            }),
            ..Laggy::new(Duration::ZERO)
        };
        let budget = if coalesce {
            WriteBudget::new(
                "apiserver",
                BudgetOptions {
                    qps: 20,
                    burst: 5,
                    breaker: BreakerOptions {
                        failures: 3,
                        probe_interval: Duration::from_millis(200),
                        max_probe_interval: Duration::from_secs(1),
                    },
                    ..BudgetOptions::default()
                },
            )
        } else {
            WriteBudget::off()
        };
        let clock = start_clock();
        let (intake, delivery) = queues.policies();
        let p = pipeline_with(
            &clock,
            sink.clone(),
            intake,
            SinkOptions {
                correlator: no_spam_filter(),
                retry: patient_retry(),
                coalesce,
                budget: Some(budget),
                max_in_flight: 3,
                delivery,
                ..SinkOptions::default()
            },
        );
        let r = p.recorder();
        for s in trace {
            // Event names are `<object>.<nanos>`: distinct instants, distinct names.
            clock.advance(Duration::from_micros(1));
            if s.gap_ms > 0 {
                let gap = Duration::from_millis(u64::from(s.gap_ms));
                clock.advance(gap);
                tokio::time::sleep(gap).await;
            }
            r.event(
                &pod(&format!("p{}", s.object)),
                EventType::Warning,
                &format!("Reason{}", s.reason),
                &format!("message {}", s.message),
            )
            .unwrap();
        }
        let report = p.shutdown(Duration::from_secs(3600)).await;
        assert!(report.completed, "{report:?}");
        checked(&report.stats);
        assert_eq!(report.stats.dropped_total(), 0, "{:?}", report.stats);
        let k = report.stats.sink("api").unwrap();
        assert_eq!(k.failed(), 0, "{k:?}");
        assert_eq!(
            k.correlated,
            trace.len() as u64,
            "every occurrence correlated"
        );
        if !coalesce {
            assert_eq!(k.superseded, 0);
        } else if std::env::var_os("KEVENTS_TRACE_COUNTS").is_some() {
            eprintln!(
                "superseded {} attempts {} budget {:?}",
                k.superseded, k.attempts, report.stats.budgets
            );
        }
        (final_state(&sink.api), sink.requests().len())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// The invariant of coalescing: the apiserver ends in the same state as if every result
    /// had been written in order; only intermediate states are skipped.
    #[test]
    fn coalescing_ends_in_the_state_of_every_write_in_order(
        trace in proptest::collection::vec(step(), 1..120),
        seed in any::<u64>(),
        faults in any::<bool>(),
    ) {
        let (in_order, _) = run_trace(&trace, seed, false, false, Queues::Lossless);
        let (coalesced, _) = run_trace(&trace, seed ^ 0x9e37_79b9, true, faults, Queues::Defaults);
        prop_assert_eq!(coalesced, in_order);
    }

    /// The invariant of coalesce-if-full queues: occurrences merged in the overflow tables of
    /// the intake and of the chain (2 slots each, so a burst overflows at once) end in the
    /// same stored counts, messages and timestamps as the same trace through lossless queues.
    #[test]
    fn overflow_tables_end_in_the_state_of_lossless_queues(
        trace in proptest::collection::vec(step(), 1..120),
        seed in any::<u64>(),
        faults in any::<bool>(),
    ) {
        let (lossless, _) = run_trace(&trace, seed, false, false, Queues::Lossless);
        let (tight, _) = run_trace(&trace, seed ^ 0x517c_c1b7, true, faults, Queues::Tight);
        prop_assert_eq!(tight, lossless);
    }
}

/// Coalesce-if-full queues of 2 slots (intake and chain) and 4 overflow entries.
fn tight(overflow: usize) -> (IntakePolicy, WatcherPolicy) {
    (
        IntakePolicy::CoalesceIfFull {
            capacity: 2,
            overflow,
        },
        WatcherPolicy::CoalesceIfFull {
            capacity: 2,
            overflow,
        },
    )
}

fn tight_pipeline(clock: &VirtualClock, sink: Laggy, overflow: usize) -> Pipeline {
    let (intake, delivery) = tight(overflow);
    pipeline_with(
        clock,
        sink,
        intake,
        SinkOptions {
            correlator: no_spam_filter(),
            retry: patient_retry(),
            delivery,
            budget: Some(WriteBudget::off()),
            ..SinkOptions::default()
        },
    )
}

/// A burst of 1 000 occurrences of 10 events through queues of 2 slots: the overflow tables
/// merge the repeats, nothing is dropped, every occurrence ends in a stored count, with far
/// fewer requests than occurrences; flush waits for the tables to drain.
#[actix_rt::test]
async fn a_burst_through_tight_queues_is_counted_exactly() {
    tokio::time::pause();
    let sink = Laggy::new(Duration::from_millis(5));
    let clock = start_clock();
    let p = tight_pipeline(&clock, sink.clone(), 16);
    let r = p.recorder();
    for round in 0..100 {
        for i in 0..10 {
            clock.advance(Duration::from_micros(1));
            let e = r
                .event(&pod(&format!("p{i}")), EventType::Warning, "Failed", "x")
                .unwrap();
            assert!(e.is_queued(), "round {round}: {e:?}");
        }
    }
    let mid = p.stats();
    assert!(mid.intake_coalesced > 900, "merged at the intake: {mid:?}");
    p.flush().await.unwrap();
    let s = p.stats();
    assert_eq!((s.intake_overflow, s.intake_depth), (0, 0), "{s:?}");
    let w = s.watcher("sink:api").unwrap();
    assert_eq!((w.overflow, w.accepted), (0, 1000), "{w:?}");
    let report = p.shutdown(Duration::from_secs(60)).await;
    assert!(report.completed);
    checked(&report.stats);
    assert_eq!(report.stats.dropped_total(), 0, "{:?}", report.stats);
    let stored = sink.api.list();
    assert_eq!(stored.len(), 10);
    assert!(stored.iter().all(|e| e.count == 100), "{stored:?}");
    let requests = sink.requests().len();
    assert!(requests < 100, "{requests} requests for 1 000 occurrences");
}

/// Beyond its bound an overflow table refuses new identities (dropped, counted as
/// `intake_full`) and still merges repeats of the identities it holds; every call is either
/// in a stored count or counted as dropped.
#[actix_rt::test]
async fn a_full_overflow_table_drops_new_identities_and_counts_them() {
    tokio::time::pause();
    let sink = Laggy::new(Duration::from_millis(5));
    let clock = start_clock();
    let p = tight_pipeline(&clock, sink.clone(), 2);
    let r = p.recorder();
    let mut dropped = 0;
    for round in 0..5 {
        for i in 0..20 {
            clock.advance(Duration::from_micros(1));
            let e = r
                .event(&pod(&format!("p{i}")), EventType::Warning, "Failed", "x")
                .unwrap();
            if !e.is_queued() {
                dropped += 1;
            }
            let _ = round;
        }
    }
    let report = p.shutdown(Duration::from_secs(60)).await;
    assert!(report.completed);
    checked(&report.stats);
    let s = &report.stats;
    assert!(dropped > 0 && s.dropped_intake_full == dropped, "{s:?}");
    assert!(
        s.intake_coalesced > 0,
        "repeats of held identities merged: {s:?}"
    );
    let w = s.watcher("sink:api").unwrap();
    let stored: i64 = sink.api.list().iter().map(|e| i64::from(e.count)).sum();
    assert_eq!(s.recorded + s.dropped_intake_full, 100);
    assert_eq!(
        stored as u64 + w.dropped_full,
        s.recorded,
        "every recorded occurrence is stored or counted: {s:?}"
    );
}

/// A chain whose spam filter holds 2 tokens per object and refills one per second.
fn throttled_pipeline(clock: &VirtualClock, sink: Laggy, defer: bool) -> Pipeline {
    pipeline(
        clock,
        sink,
        SinkOptions {
            correlator: CorrelatorOptions {
                burst_size: 2,
                qps: 1.0,
                ..CorrelatorOptions::default()
            },
            retry: patient_retry(),
            budget: Some(WriteBudget::off()),
            defer_spam_tails: defer,
            ..SinkOptions::default()
        },
    )
}

async fn emit(p: &Pipeline, clock: &VirtualClock, n: usize) {
    for _ in 0..n {
        clock.advance(Duration::from_millis(1));
        p.recorder()
            .event(&pod("p0"), EventType::Warning, "BackOff", "restarting")
            .unwrap();
    }
    p.flush().await.unwrap();
}

/// Deferred spam tails: the occurrences the spam filter skips keep their event's newest
/// state, written when the object's bucket refills, and at shutdown; so the final count
/// lands. Without the option (client-go) the count stays where the filter stopped it.
#[actix_rt::test]
async fn deferred_tails_are_written_at_refill_and_at_shutdown() {
    tokio::time::pause();
    let clock = start_clock();
    let sink = Laggy::new(Duration::from_millis(1));
    let p = throttled_pipeline(&clock, sink.clone(), true);
    // 2 pass (create, patch), 3 skipped: one held state, count 5.
    emit(&p, &clock, 5).await;
    assert_eq!(sink.api.list()[0].count, 2);
    let s = p.stats();
    let k = s.sink("api").unwrap();
    assert_eq!(
        (k.deferred, k.deferred_total, k.spam_filtered),
        (1, 3, 0),
        "{k:?}"
    );
    s.check_sinks().unwrap();
    // The bucket refills after 1 s; the tail is checked every 250 ms.
    clock.advance(Duration::from_millis(1100));
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(sink.api.list()[0].count, 5, "the tail landed at refill");
    let k = p.stats().sink("api").cloned().unwrap();
    assert_eq!(k.deferred, 0, "{k:?}");
    // The refill's token was spent on the tail: 4 more are all skipped, held, and written
    // at shutdown.
    emit(&p, &clock, 4).await;
    assert_eq!(sink.api.list()[0].count, 5);
    let report = p.shutdown(Duration::from_secs(60)).await;
    assert!(report.completed);
    checked(&report.stats);
    let k = report.stats.sink("api").unwrap();
    assert_eq!(
        (k.deferred, k.deferred_total, k.spam_filtered),
        (0, 7, 0),
        "{k:?}"
    );
    let stored = sink.api.list();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].count, 9, "every occurrence in the final count");
    assert_eq!(report.stats.dropped_total(), 0);

    // client-go's behaviour (the default): the skipped occurrences are counted drops and
    // the stored count stays at 2.
    let clock = start_clock();
    let sink = Laggy::new(Duration::from_millis(1));
    let p = throttled_pipeline(&clock, sink.clone(), false);
    emit(&p, &clock, 5).await;
    clock.advance(Duration::from_millis(1100));
    tokio::time::sleep(Duration::from_millis(600)).await;
    let report = p.shutdown(Duration::from_secs(60)).await;
    checked(&report.stats);
    assert_eq!(report.stats.sink("api").unwrap().spam_filtered, 3);
    assert_eq!(sink.api.list()[0].count, 2);
}
