//! Against a real kube-apiserver v1.20.2 (ignored, with the command that runs it, when it is
//! not provisioned; failing in CI or with `KEVENTS_REQUIRE_APISERVER=1`), from a tokio runtime
//! that never starts actix:
//!
//! * a pipeline of one's own over `KubeSink` (both chains), started with
//!   `PipelineBuilder::start`, runs on a thread of its own and stores exact counts;
//! * both reports' `delivered()` count the series chain's writes (the drop-in's said 0).

mod common;

use std::time::Duration;

use common::{client_for, real_target};
use k8s_openapi::api::core::v1::ObjectReference as K8sReference;
use kevents_actors::{EventsV1Config, Pipeline, SinkOptions};
use kevents_core::events_v1::Reporter;
use kevents_core::{EventSource, EventType, ObjectReference};
use kevents_kube::{KubeSink, Recorder, SINK_NAME};
use kevents_testkit::Identity;
use kube::api::Api;
use kube::runtime::events::{Event, EventType as KubeEventType};

kevents_testkit::real_apiserver_tests! {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pipeline_started_from_tokio_writes_both_apis_to_a_real_apiserver() {
        let target = real_target().await;
        let client = client_for(&target, Identity::Admin).await;
        let sink = KubeSink::new(client.clone());
        let pipeline = Pipeline::builder(EventSource::new("example.com/ctl", "node-1"))
            .events_v1(EventsV1Config::new(Reporter::with_instance("example.com/ctl", "ctl-1")))
            .sink_events_v1("apiserver", sink.clone(), kevents_actors::events_v1::SinkOptions::default())
            .sink("apiserver", sink, SinkOptions::default())
            .start();
        assert!(pipeline.runs_on_own_thread());
        let recorder = pipeline.recorder();
        let web = ObjectReference::new("v1", "Pod", "default", "web-1");
        let api = ObjectReference::new("v1", "Pod", "default", "api-1");
        for _ in 0..3 {
            recorder
                .event(&web, EventType::Warning, "BackOff", "restarting")
                .expect("recorded");
            recorder
                .events_v1().emit(kevents_core::events_v1::Occurrence::new(
                    api.clone(),
                    None,
                    EventType::Normal,
                    "Scheduled",
                    "Binding",
                    "bound",
                ))
                .expect("recorded");
        }
        let report = pipeline.shutdown(Duration::from_secs(30)).await;
        assert!(report.completed, "{report}");
        let sink = report.stats.sink("apiserver").expect("core/v1 chain");
        let series = report.stats.sink_events_v1("apiserver").expect("series chain");
        assert!(sink.delivered() >= 1 && series.delivered() >= 2, "{report}");
        assert_eq!(report.delivered(), sink.delivered() + series.delivered(), "{report}");
        assert_eq!(report.failed(), 0, "{report}");

        let core: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(client.clone(), "default");
        let stored = core.list(&Default::default()).await.expect("core/v1 list");
        let backoff: Vec<_> = stored
            .items
            .iter()
            .filter(|e| e.reason.as_deref() == Some("BackOff"))
            .collect();
        assert_eq!(backoff.len(), 1);
        assert_eq!(backoff[0].count, Some(3));
        let v1: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client, "default");
        let stored = v1.list(&Default::default()).await.expect("events.k8s.io list");
        let scheduled: Vec<_> = stored
            .items
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Scheduled"))
            .collect();
        assert_eq!(scheduled.len(), 1);
        assert_eq!(scheduled[0].series.as_ref().map(|s| s.count), Some(3));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_drop_ins_report_counts_its_series_writes() {
        let target = real_target().await;
        let client = client_for(&target, Identity::Admin).await;
        let recorder = Recorder::new(client, "example.com/ctl".into());
        let pod = K8sReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some("web-1".into()),
            ..Default::default()
        };
        let ev = Event {
            type_: KubeEventType::Normal,
            reason: "Synced".into(),
            note: Some("configuration applied".into()),
            action: "Reconcile".into(),
            secondary: None,
        };
        for _ in 0..3 {
            recorder.publish(&ev, &pod).await.expect("published");
        }
        let report = recorder
            .shutdown(Duration::from_secs(30))
            .await
            .expect("report");
        let series = report.stats.sink_events_v1(SINK_NAME).expect("series chain");
        // A CREATE, the PATCH starting the series, the final count at shutdown.
        assert_eq!(series.delivered(), 3, "{report}");
        assert_eq!(report.delivered(), 3, "{report}");
        assert!(report.to_string().contains("3 writes stored"), "{report}");
    }
}
