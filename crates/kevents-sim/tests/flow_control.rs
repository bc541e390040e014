//! `MemoryApiServer::with_flow_control`: writes through the sink trait hold a seat for the
//! latency, queue by user, and are refused 429 with `Retry-After: 1` beyond a flow's
//! capacity, as kube-apiserver's API Priority and Fairness answers (checked against the real
//! servers by kevents-testkit's `tests/flow_control.rs`).

use std::time::Duration;

use kevents_core::{Event, EventSink};
use kevents_sim::MemoryApiServer;
use kevents_sim::flow_control::{ApfVersion, FlowControl};

fn event(name: &str) -> Event {
    let mut e = Event::default();
    e.metadata.namespace = "ns".into();
    e.metadata.name = name.into();
    e.count = 1;
    e
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_flow_beyond_its_capacity_is_refused_and_another_is_not() {
    for version in [ApfVersion::V1_20, ApfVersion::V1_36] {
        let config = FlowControl::new(version, 1, 1);
        let capacity = config.capacity_per_flow() as usize;
        let api = MemoryApiServer::new()
            .with_flow_control(config)
            .with_latency(Duration::from_millis(3));
        let alice = api.as_user("alice");
        let bob = api.as_user("bob");
        let mut tasks = Vec::new();
        for i in 0..capacity + 5 {
            let (a, e) = (alice.clone(), event(&format!("a{i}")));
            tasks.push(tokio::spawn(async move { a.create(&e).await }));
        }
        for i in 0..10 {
            let (b, e) = (bob.clone(), event(&format!("b{i}")));
            tasks.push(tokio::spawn(async move { b.create(&e).await }));
        }
        let mut refused = Vec::new();
        let mut ok = 0;
        for t in tasks {
            match t.await.expect("task") {
                Ok(_) => ok += 1,
                Err(e) => refused.push(e),
            }
        }
        assert_eq!(refused.len(), 5, "{version:?}");
        assert_eq!(ok, capacity + 10, "{version:?}");
        for e in &refused {
            assert_eq!(e.code(), Some(429));
            assert_eq!(e.retry_after(), Some(Duration::from_secs(1)));
        }
        let stats = api.flow_control().expect("configured").stats();
        assert_eq!(stats.rejected_queue_full, 5);
        assert_eq!(stats.dispatched, (capacity + 10) as u64);
        assert_eq!(api.list().len(), capacity + 10);
    }
}
