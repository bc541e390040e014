//! The simulator's `EventRateLimit` (kevents-sim's `rate_limit`) checked against
//! kube-apiserver's admission plugin (v1.20.2, or v1.36 with `KEVENTS_K8S_VERSION=1.36`): the
//! same paced sequence of core/v1 event creates in two namespaces is sent to both, under
//! `Namespace:5:10` + `Server:20:40` and under `User:10:20`; the writes each limit refused
//! must agree within timing noise, and the 429s must look the same (message, no `details`, no
//! `Retry-After`). An `events.k8s.io/v1` create passes both while the limits are exhausted.
//!
//! The requests are paced by the client (one every 10 ms, each on its own task), so the
//! tokens that refill during the run do not depend on how fast either server answers.
//!
//! Ignored with the command that runs it where the apiserver is not provisioned; run (and
//! failing without it) in CI.

use std::collections::BTreeMap;
use std::time::Duration;

use kevents_core::{Event, EventSink, ObjectReference, SinkError};
use kevents_http::{HttpConfig, HttpSink};
use kevents_sim::{EventRateLimits, SimConfig, Simulator};
use kevents_testkit::RealApiserver;

/// What a run saw: accepted writes, and refusals by limit type (an aggregated 429 counts
/// for each type it names), and every 429 message's shape checked.
#[derive(Debug, Default)]
struct Seen {
    accepted: u64,
    refused: u64,
    by_type: BTreeMap<String, u64>,
}

fn event(ns: &str, i: usize) -> Event {
    let mut e = Event::default();
    e.metadata.namespace = ns.into();
    e.metadata.name = format!("p{i}.fleetsim");
    e.involved_object = ObjectReference {
        kind: "Pod".into(),
        namespace: ns.into(),
        name: format!("p{i}"),
        api_version: "v1".into(),
        ..Default::default()
    };
    e.reason = "Tested".into();
    e.message = "rate limit".into();
    e.type_ = "Normal".into();
    e.source.component = "fleetsim".into();
    e.count = 1;
    e
}

/// `n` creates alternating between namespaces `a` and `b`, one started every `every`.
async fn paced(sink: &HttpSink, n: usize, every: Duration) -> Seen {
    let mut tasks = Vec::new();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    for i in 0..n {
        tick.tick().await;
        let ns = if i % 2 == 0 { "a" } else { "b" };
        let fut = sink.create(&event(ns, i));
        tasks.push(tokio::spawn(fut));
    }
    let mut seen = Seen::default();
    for t in tasks {
        match t.await.expect("request task") {
            Ok(_) => seen.accepted += 1,
            Err(SinkError::Status(s)) if s.code == 429 => {
                seen.refused += 1;
                assert!(
                    s.message.starts_with("Too many requests: "),
                    "{}",
                    s.message
                );
                assert!(s.details.is_none() && s.retry_after.is_none(), "{s:?}");
                for part in s.message.split("limit reached on type ").skip(1) {
                    let kind = part.split_whitespace().next().unwrap_or("").to_owned();
                    *seen.by_type.entry(kind).or_default() += 1;
                }
            }
            Err(e) => panic!("unexpected answer: {e}"),
        }
    }
    seen
}

/// An `events.k8s.io/v1` create: not an object the plugin limits.
async fn events_v1_passes(sink: &HttpSink) {
    let mut e = kevents_core::events_v1::Event::default();
    e.metadata.namespace = "a".into();
    e.metadata.name = "v1.fleetsim".into();
    e.event_time = Some(kevents_core::Time::from(std::time::SystemTime::now()));
    e.reporting_controller = "kevents.dev/fleetsim".into();
    e.reporting_instance = "fleetsim-1".into();
    e.action = "Test".into();
    e.reason = "Tested".into();
    e.type_ = "Normal".into();
    e.regarding = ObjectReference::new("v1", "Pod", "a", "p");
    kevents_core::events_v1::EventSink::create_events_v1(sink, &e)
        .await
        .expect("events.k8s.io/v1 writes are not rate limited");
}

async fn against_simulator(limits: &str, n: usize, every: Duration) -> Seen {
    let sim = Simulator::start(SimConfig {
        event_rate_limits: limits.parse::<EventRateLimits>().expect("limits"),
        events_v1_served: true,
        ..SimConfig::like_apiserver()
    })
    .await
    .expect("simulator starts");
    sim.create_namespace("a");
    sim.create_namespace("b");
    let sink = HttpSink::new(
        HttpConfig::from_kubeconfig_yaml(&sim.kubeconfig(sim.admin_token(), "default"), None)
            .await
            .expect("kubeconfig"),
    )
    .expect("sink");
    let seen = paced(&sink, n, every).await;
    events_v1_passes(&sink).await;
    assert_eq!(
        sim.stats().throttled,
        seen.refused,
        "the simulator counts its 429s"
    );
    sim.shutdown().await;
    seen
}

async fn against_kube_apiserver(limits: &str, n: usize, every: Duration) -> Seen {
    let spec: Vec<(String, u32, u32)> = limits
        .parse::<EventRateLimits>()
        .expect("limits")
        .limits
        .iter()
        .map(|l| (l.kind.to_string(), l.qps, l.burst))
        .collect();
    let server = tokio::task::spawn_blocking(move || {
        let spec: Vec<(&str, u32, u32)> =
            spec.iter().map(|(k, q, b)| (k.as_str(), *q, *b)).collect();
        RealApiserver::start_with_event_rate_limits(&spec)
    })
    .await
    .expect("start task")
    .expect("starting kube-apiserver")
    .expect("kube-apiserver is not provisioned (see above)");
    server
        .create_namespace("a")
        .expect("kubectl create namespace");
    server
        .create_namespace("b")
        .expect("kubectl create namespace");
    // Creating the namespaces wrote no event: the buckets are still full.
    let sink = HttpSink::new(
        HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None)
            .await
            .expect("kubeconfig"),
    )
    .expect("sink");
    let seen = paced(&sink, n, every).await;
    events_v1_passes(&sink).await;
    seen
}

/// Same figures within `max(3, 5 %)` of the writes.
fn agree(sim: &Seen, real: &Seen, n: usize) {
    let tolerance = (n as u64 * 5 / 100).max(3);
    let close = |a: u64, b: u64| a.abs_diff(b) <= tolerance;
    assert!(
        close(sim.accepted, real.accepted) && close(sim.refused, real.refused),
        "simulator {sim:?} vs kube-apiserver {real:?} (tolerance {tolerance})"
    );
    let kinds: std::collections::BTreeSet<&String> =
        sim.by_type.keys().chain(real.by_type.keys()).collect();
    for k in kinds {
        let (s, r) = (
            sim.by_type.get(k).copied().unwrap_or(0),
            real.by_type.get(k).copied().unwrap_or(0),
        );
        assert!(
            close(s, r),
            "refusals by {k}: simulator {s}, kube-apiserver {r} (tolerance {tolerance})"
        );
    }
    eprintln!("simulator {sim:?}\nkube-apiserver {real:?}");
}

/// `Namespace:5:10` + `Server:20:40`: 300 creates over 3 s in two namespaces. Each
/// namespace's bucket could admit 10 + 5 * 3 = 25 of its 150, but Server's 40 + 20 * 3
/// tokens also go to the writes Namespace refuses: about a third of them end up admitted.
const NS_SERVER: &str = "Namespace:5:10 Server:20:40";
/// `User:10:20`: one user's 200 creates over 4 s: about 20 + 10 * 4 admitted.
const USER: &str = "User:10:20";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_throttles_as_its_limits_say() {
    let seen = against_simulator(NS_SERVER, 300, Duration::from_millis(10)).await;
    assert_eq!(seen.accepted + seen.refused, 300);
    // At most what the namespaces admit (10 at once and 5 a second each: 50 over 3 s) and
    // Server's 40 + 20 a second (refusals by Namespace take Server tokens too).
    assert!((20..=52).contains(&seen.accepted), "{seen:?}");
    assert!(seen.by_type.contains_key("Namespace") && seen.by_type.contains_key("Server"));
    let seen = against_simulator(USER, 200, Duration::from_millis(20)).await;
    assert!((55..=66).contains(&seen.accepted), "{seen:?}");
    assert_eq!(seen.by_type.get("User").copied(), Some(seen.refused));
}

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn namespace_and_server_limits_refuse_as_kube_apiserver_does() {
        let every = Duration::from_millis(10);
        let real = against_kube_apiserver(NS_SERVER, 300, every).await;
        let sim = against_simulator(NS_SERVER, 300, every).await;
        agree(&sim, &real, 300);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_user_limit_refuses_as_kube_apiserver_does() {
        let every = Duration::from_millis(20);
        let real = against_kube_apiserver(USER, 200, every).await;
        let sim = against_simulator(USER, 200, every).await;
        agree(&sim, &real, 200);
    }
}
