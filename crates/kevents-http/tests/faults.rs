//! Sink-level fault tests against the simulator: every fault ends in the right `SinkError`
//! kind and disposition, and the sink recovers once the fault is gone.

use std::time::Duration;

use kevents_core::{Disposition, Event, EventSink, SinkError, Stored};
use kevents_http::{HttpConfig, HttpSink};
use kevents_sim::{ErrorFault, FaultBody, Faults, SimConfig, SimHandle, Simulator};

fn event(name: &str) -> Event {
    let mut e = Event::default();
    e.metadata.name = name.into();
    e.metadata.namespace = "default".into();
    e.involved_object.namespace = "default".into();
    e.involved_object.kind = "Pod".into();
    e.involved_object.name = "web".into();
    e.reason = "BackOff".into();
    e.message = "restarting".into();
    e.count = 1;
    e
}

async fn setup(timeout: Duration) -> (SimHandle, HttpSink) {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let sink = HttpSink::new(
        HttpConfig::new(&sim.url())
            .unwrap()
            .with_request_timeout(timeout),
    )
    .unwrap();
    (sim, sink)
}

#[tokio::test]
async fn storm_of_429_with_retry_after_then_success() {
    let (sim, sink) = setup(Duration::from_secs(10)).await;
    sim.set_faults(Faults::too_many_requests(3, 5));
    for i in 0..5 {
        let err = sink.create(&event("storm.1")).await.unwrap_err();
        assert_eq!(err.code(), Some(429), "request {i}: {err}");
        assert_eq!(err.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(err.disposition(), Disposition::Retry);
        assert_eq!(
            err.client_go_disposition(),
            Disposition::Drop { quiet: false }
        );
        let SinkError::Status(s) = &err else { panic!() };
        assert_eq!(s.reason, "TooManyRequests");
    }
    let stored = sink.create(&event("storm.1")).await.unwrap();
    assert_eq!(stored.returned().expect("the server's copy").count, 1);
    assert_eq!(sim.stats().injected_errors, 5);
    eprintln!("429 storm: {:?}", sim.stats());
}

#[tokio::test]
async fn server_errors_are_retryable_statuses() {
    let (sim, sink) = setup(Duration::from_secs(10)).await;
    for code in [500u16, 502, 503, 504] {
        sim.set_faults(Faults::error(code, 1));
        let err = sink.create(&event("busy.1")).await.unwrap_err();
        assert_eq!(err.code(), Some(code));
        assert_eq!(err.disposition(), Disposition::Retry, "{code}");
    }
    // A proxy's plain-text 502: a generic Status with the code and the body as the cause.
    sim.set_faults(Faults {
        error: Some(ErrorFault {
            code: 502,
            retry_after: Some(2),
            times: 1,
            body: FaultBody::Text("upstream connect error".into()),
            headers: vec![],
        }),
        ..Faults::none()
    });
    let err = sink.create(&event("busy.1")).await.unwrap_err();
    let SinkError::Status(s) = &err else {
        panic!("{err:?}")
    };
    assert_eq!((s.code, s.reason.as_str()), (502, "InternalError"));
    assert_eq!(s.retry_after, Some(Duration::from_secs(2)));
    assert_eq!(
        s.details.as_ref().unwrap().causes[0].message,
        "upstream connect error"
    );
    assert!(sink.create(&event("busy.1")).await.is_ok());
}

#[tokio::test]
async fn slow_responses_hit_the_request_timeout() {
    let (sim, sink) = setup(Duration::from_millis(200)).await;
    sim.set_faults(Faults::latency(Duration::from_secs(5)));
    let err = sink.create(&event("slow.1")).await.unwrap_err();
    assert_eq!(err, SinkError::Timeout(Duration::from_millis(200)));
    assert_eq!(err.disposition(), Disposition::Retry);
    sim.clear_faults();
    assert!(sink.create(&event("slow.1")).await.is_ok());
}

#[tokio::test]
async fn resets_mid_request_are_transport_errors() {
    let (sim, sink) = setup(Duration::from_secs(10)).await;
    sim.set_faults(Faults::resets(3));
    for _ in 0..3 {
        let err = sink.create(&event("reset.1")).await.unwrap_err();
        assert!(matches!(err, SinkError::Transport(_)), "{err:?}");
        assert_eq!(err.disposition(), Disposition::Retry);
    }
    assert_eq!(sim.stats().resets, 3);
    // The request was read but not handled: nothing was stored, the retry creates.
    assert!(sim.events().is_empty());
    assert!(sink.create(&event("reset.1")).await.is_ok());
}

#[tokio::test]
async fn refused_connections_then_recovery_on_the_same_port() {
    let (sim, sink) = setup(Duration::from_secs(10)).await;
    assert!(sink.create(&event("outage.1")).await.is_ok());
    sim.refuse_connections(None).await;
    for _ in 0..3 {
        let err = sink.create(&event("outage.2")).await.unwrap_err();
        assert!(matches!(err, SinkError::Transport(_)), "{err:?}");
        assert_eq!(err.disposition(), Disposition::Retry);
    }
    sim.accept_connections().await;
    assert!(sink.create(&event("outage.2")).await.is_ok());
    assert_eq!(sim.events().len(), 2);
}

#[tokio::test]
async fn timed_outage_ends_by_itself() {
    let (sim, sink) = setup(Duration::from_secs(10)).await;
    sim.refuse_connections(Some(Duration::from_millis(300)))
        .await;
    let mut attempts = 0;
    let stored = loop {
        attempts += 1;
        match sink.create(&event("timed.1")).await {
            Ok(e) => break e.into_returned().expect("the server's copy"),
            Err(e) => {
                assert!(matches!(e, SinkError::Transport(_)), "{e:?}");
                assert!(attempts < 500, "the simulator never came back");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert_eq!(stored.metadata.name, "timed.1");
    eprintln!("timed outage: {attempts} attempts until recovery");
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let (sim, sink) = setup(Duration::from_secs(10)).await;
    sim.set_faults(Faults {
        error: Some(ErrorFault {
            code: 307,
            retry_after: None,
            times: 1,
            body: FaultBody::Text(String::new()),
            headers: vec![("Location".into(), "http://127.0.0.1:1/elsewhere".into())],
        }),
        ..Faults::none()
    });
    let err = sink.create(&event("redirect.1")).await.unwrap_err();
    assert_eq!(err.code(), Some(307));
    assert!(matches!(err.disposition(), Disposition::Drop { .. }));
}

/// A 2xx to a write whose body is not the event: the server says it stored it, so the
/// write counts as stored as sent and is not retried (issue 36: it was an unexpected object,
/// retried, its re-POST refused with 409 and the stored event counted failed).
#[tokio::test]
async fn non_event_success_body_to_a_write_counts_as_stored_as_sent() {
    let (sim, sink) = setup(Duration::from_secs(10)).await;
    sim.set_faults(Faults {
        error: Some(ErrorFault {
            code: 200,
            retry_after: None,
            times: 1,
            body: FaultBody::Text("<html>captive portal</html>".into()),
            headers: vec![],
        }),
        ..Faults::none()
    });
    let stored = sink.create(&event("odd.1")).await.unwrap();
    assert_eq!(stored, Stored::AsSent);
}

#[tokio::test]
async fn response_bodies_are_size_limited() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let sink = HttpSink::new(
        HttpConfig::new(&sim.url())
            .unwrap()
            .with_max_response_bytes(64),
    )
    .unwrap();
    // The write happened (201); only the answer was too large to read: the event counts as
    // stored, as it was sent (no server-set fields).
    let stored = sink.create(&event("big.1")).await.unwrap();
    assert_eq!(stored, Stored::AsSent);
    assert_eq!(sim.events().len(), 1);
    // An error answer too large to read is still classified by its code.
    let err = sink.create(&event("big.1")).await.unwrap_err();
    assert_eq!(err.code(), Some(409));
    // Any other 2xx too large to read is an error.
    let err = sink
        .requests()
        .get_event("default", "big.1")
        .await
        .unwrap_err();
    assert!(matches!(err, SinkError::UnexpectedObject(_)), "{err:?}");
}

#[tokio::test]
async fn a_server_that_never_answers_hits_the_request_timeout() {
    let (sim, sink) = setup(Duration::from_millis(300)).await;
    sim.set_faults(Faults::unresponsive());
    let err = sink.create(&event("mute.1")).await.unwrap_err();
    assert_eq!(err, SinkError::Timeout(Duration::from_millis(300)));
    assert!(sim.events().is_empty());
    sim.clear_faults();
    assert!(sink.create(&event("mute.1")).await.is_ok());
}

#[tokio::test]
async fn unreachable_port_is_a_transport_error() {
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let url = sim.url();
    sim.shutdown().await;
    let sink = HttpSink::new(HttpConfig::new(&url).unwrap()).unwrap();
    let err = sink.create(&event("gone.1")).await.unwrap_err();
    assert!(matches!(err, SinkError::Transport(_)), "{err:?}");
}
