//! `FakeRecorder`: the drop-in's fake for reconcilers' unit tests.

use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kevents_kube::{FakeRecorder, NoteLength, PublishError, Recorder, RecorderOptions};
use kube::runtime::events::{Event, EventType, Reporter};

fn cm(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ConfigMap".into()),
        namespace: Some("apps".into()),
        name: Some(name.into()),
        resource_version: Some("42".into()),
        ..Default::default()
    }
}

fn event(reason: &str, action: &str, note: Option<&str>) -> Event {
    Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: note.map(Into::into),
        action: action.into(),
        secondary: None,
    }
}

/// A reconciler as users write it: takes the recorder from its context.
async fn reconcile(recorder: &Recorder, name: &str) -> Result<(), PublishError> {
    recorder
        .publish(
            &event("Invalid", "Validate", Some("missing key")),
            &cm(name),
        )
        .await
}

#[tokio::test]
async fn records_each_publish_structured_and_built_as_the_recorder_would() {
    let fake = FakeRecorder::new(Reporter {
        controller: "example.com/ctl".into(),
        instance: None,
    });
    let recorder = fake.recorder();
    reconcile(&recorder, "a").await.expect("published");
    reconcile(&recorder, "a").await.expect("published");
    reconcile(&recorder, "b").await.expect("published");
    let published = fake.published();
    assert_eq!(published.len(), 3, "every call kept, no series folding");
    let first = &published[0];
    assert_eq!(first.type_, EventType::Warning);
    assert_eq!(
        (first.reason.as_str(), first.action.as_str()),
        ("Invalid", "Validate")
    );
    assert_eq!(first.note.as_deref(), Some("missing key"));
    assert_eq!(first.regarding, cm("a"), "the reference as given");
    // The built event: reporting fields, namespace, resourceVersion removed by default.
    assert_eq!(first.event.reporting_controller, "example.com/ctl");
    // An instance of `None` reports the controller, as kube-rs does.
    assert_eq!(first.event.reporting_instance, "example.com/ctl");
    assert_eq!(first.event.metadata.namespace, "apps");
    assert!(
        first.event.metadata.name.starts_with("a."),
        "{}",
        first.event.metadata.name
    );
    assert_eq!(first.event.regarding.resource_version, "");
    assert_eq!(first.event.note, "missing key");
    assert_eq!(
        fake.strings(),
        ["Warning Invalid missing key"; 3].map(String::from)
    );
    assert_eq!(fake.take().len(), 3);
    assert!(fake.is_empty());
}

#[tokio::test]
async fn refuses_what_the_recorder_refuses_and_keeps_nothing_of_it() {
    let fake = FakeRecorder::with_options(
        "example.com/ctl".into(),
        RecorderOptions::default().note_length(NoteLength::Reject),
    );
    let recorder = fake.recorder();
    let no_action = recorder.publish(&event("Synced", "", None), &cm("a")).await;
    assert!(
        matches!(no_action, Err(PublishError::Invalid(_))),
        "{no_action:?}"
    );
    let long = "x".repeat(2000);
    let long_note = recorder.try_publish(&event("Synced", "Sync", Some(&long)), &cm("a"));
    assert!(
        matches!(long_note, Err(PublishError::Invalid(_))),
        "{long_note:?}"
    );
    assert!(fake.is_empty());

    // The default truncates, as the recorder does.
    let fake = FakeRecorder::new("example.com/ctl".into());
    fake.recorder()
        .publish(&event("Synced", "Sync", Some(&long)), &cm("a"))
        .await
        .expect("truncated");
    let built = &fake.published()[0].event;
    assert!(built.note.len() <= 1024 && built.note.ends_with("..."));
}

#[tokio::test]
async fn cluster_scoped_objects_and_kept_resource_versions() {
    let fake = FakeRecorder::with_options(
        "example.com/ctl".into(),
        RecorderOptions::default().keep_resource_version(true),
    );
    let node = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some("n1".into()),
        resource_version: Some("7".into()),
        ..Default::default()
    };
    fake.recorder()
        .publish(&event("Drained", "Drain", None), &node)
        .await
        .expect("published");
    let built = &fake.published()[0].event;
    assert_eq!(built.metadata.namespace, "kube-system");
    assert_eq!(built.regarding.resource_version, "7");
}

#[tokio::test]
async fn flush_stats_shutdown_and_the_handle_behave_as_the_recorders() {
    let fake = FakeRecorder::new("example.com/ctl".into());
    let recorder = fake.recorder();
    recorder
        .publish(&event("Synced", "Sync", None), &cm("a"))
        .await
        .expect("published");
    recorder.flush().await.expect("nothing to wait for");
    assert_eq!(recorder.stats().await.expect("stats").recorded, 1);
    let pod = kevents_core::ObjectReference::new("v1", "Pod", "apps", "p");
    recorder
        .handle()
        .event(&pod, kevents_core::EventType::Normal, "Started", "started")
        .expect("recorded by the facade's fake");
    assert_eq!(fake.handle_fake().strings(), ["Normal Started started"]);
    let report = recorder
        .shutdown(Duration::from_secs(1))
        .await
        .expect("first shutdown");
    assert!(report.completed);
    let clone = fake.recorder();
    assert_eq!(
        clone
            .publish(&event("Synced", "Sync", None), &cm("a"))
            .await,
        Err(PublishError::Shutdown)
    );
    assert!(matches!(
        recorder.shutdown(Duration::from_secs(1)).await,
        Err(PublishError::Shutdown)
    ));
    assert_eq!(fake.len(), 1);
}
