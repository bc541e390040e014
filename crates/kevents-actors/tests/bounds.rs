//! Zero capacities are refused with typed errors (issue 36): a pipeline whose intake,
//! watcher or chain queue has 0 slots (or an overflow table of 0 entries) does not start
//! (`StartError::Policy`), and a watcher or chain added later with one is not added
//! (`PipelineError::Policy`). Before, 0 silently became one slot, which dropped almost
//! every event (`bench pipeline --watcher-capacity 0`: 66 700 of 200 000).

mod common;

use actix::Actor as _;
use common::Collector;
use kevents_actors::{
    IntakePolicy, Pipeline, PipelineError, PolicyError, SinkOptions, StartError, WatcherPolicy,
};
use kevents_core::EventSource;
use kevents_sim::MemoryApiServer;

fn builder() -> kevents_actors::PipelineBuilder {
    Pipeline::builder(EventSource::new("bounds-test", "node"))
}

fn refused(r: Result<Pipeline, StartError>) -> (String, PolicyError) {
    match r {
        Err(StartError::Policy { queue, source }) => (queue, source),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("started with a zero bound"),
    }
}

#[actix_rt::test]
async fn zero_capacities_do_not_start() {
    let capacity = PolicyError { field: "capacity" };
    let overflow = PolicyError { field: "overflow" };
    assert_eq!(
        refused(
            builder()
                .intake(IntakePolicy::DropIfFull { capacity: 0 })
                .try_start()
        ),
        ("intake".to_owned(), capacity)
    );
    assert_eq!(
        refused(
            builder()
                .intake(IntakePolicy::CoalesceIfFull {
                    capacity: 5,
                    overflow: 0
                })
                .try_start()
        ),
        ("intake".to_owned(), overflow)
    );
    let zero = SinkOptions {
        delivery: WatcherPolicy::CoalesceIfFull {
            capacity: 0,
            overflow: 10,
        },
        ..SinkOptions::default()
    };
    assert_eq!(
        refused(
            builder()
                .sink("api", MemoryApiServer::new(), zero)
                .try_start()
        ),
        ("sink:api".to_owned(), capacity)
    );
    let zero_v1 = kevents_actors::events_v1::SinkOptions {
        delivery: WatcherPolicy::DropIfFull { capacity: 0 },
        ..kevents_actors::events_v1::SinkOptions::default()
    };
    assert_eq!(
        refused(
            builder()
                .sink_events_v1("v1", MemoryApiServer::new(), zero_v1)
                .try_start()
        ),
        ("series:v1".to_owned(), capacity)
    );
    let watcher = Collector::default().start().recipient();
    assert_eq!(
        refused(
            builder()
                .watcher("mine", watcher, WatcherPolicy::Backpressure { capacity: 0 })
                .start_thread()
        ),
        ("mine".to_owned(), capacity)
    );
    assert_eq!(
        refused(
            builder()
                .logging(WatcherPolicy::DropIfFull { capacity: 0 })
                .try_start()
        ),
        ("logging".to_owned(), capacity)
    );
    let text = StartError::Policy {
        queue: "intake".into(),
        source: capacity,
    }
    .to_string();
    assert_eq!(
        text,
        "the intake policy is invalid: capacity must be at least 1 (got 0)"
    );
}

#[actix_rt::test]
async fn zero_capacities_are_not_added_later() {
    let mut p = builder().try_start().expect("valid defaults");
    let watcher = Collector::default().start().recipient();
    let e = p
        .add_watcher("mine", watcher, WatcherPolicy::DropIfFull { capacity: 0 })
        .await
        .unwrap_err();
    assert!(
        matches!(&e, PipelineError::Policy { queue, .. } if queue == "mine"),
        "{e}"
    );
    let zero = SinkOptions {
        delivery: WatcherPolicy::DropIfFull { capacity: 0 },
        ..SinkOptions::default()
    };
    let e = p
        .add_sink("api", MemoryApiServer::new(), zero)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, PipelineError::Policy { queue, .. } if queue == "sink:api"),
        "{e}"
    );
    assert!(p.stats().watchers.is_empty(), "nothing added");
    p.shutdown(std::time::Duration::from_secs(1)).await;
}
