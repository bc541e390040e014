//! The events.k8s.io/v1 conformance suite, run against the simulator and against a real
//! kube-apiserver, v1.20.2 or v1.36 with `KEVENTS_K8S_VERSION=1.36` (ignored, with the command
//! that runs it, when it is not provisioned; failing in CI),
//! plus the end-to-end check: a repeated event recorded through the actor pipeline shows a
//! series with the right count in `kubectl get events.v1.events.k8s.io -o yaml`.

use std::time::Duration;

use kevents_actors::{EventsV1Config, Pipeline};
use kevents_core::events_v1::Reporter;
use kevents_core::{EventSource, EventType, ObjectReference};
use kevents_testkit::Target;
use kevents_testkit::conformance::events_v1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_events_v1_conformance() {
    let target = Target::simulator().await.expect("simulator starts");
    if let Err(failures) = events_v1::run_all(&target).await {
        panic!("{failures}");
    }
}

/// Records `repeats` identical events through a pipeline writing to `target`, shuts it down
/// (the flush writes the latest count) and returns the event's name prefix.
async fn record_series(target: &Target, pod: &str, repeats: usize) -> String {
    let served = target
        .admin
        .requests()
        .events_v1_served()
        .await
        .expect("discovery");
    assert!(served, "events.k8s.io/v1 is served by {}", target.name);
    let pipeline = Pipeline::builder(EventSource::new("kevents.io/e2e", "node-1"))
        .events_v1(
            EventsV1Config::new(Reporter::with_instance("kevents.io/e2e", "e2e-0")).served(served),
        )
        .sink_events_v1(
            "apiserver",
            target.admin.clone(),
            kevents_actors::events_v1::SinkOptions::default(),
        )
        .start();
    let recorder = pipeline.recorder();
    let regarding = ObjectReference::new("v1", "Pod", "default", pod).with_uid("uid-e2e");
    for i in 0..repeats {
        let occ = kevents_core::events_v1::Occurrence::new(
            regarding.clone(),
            None,
            EventType::Warning,
            "BackOff",
            "Restart",
            format!("crash {i}"),
        );
        recorder.events_v1().emit(occ).expect("valid event");
        if i == 1 {
            // Let the CREATE and the series start reach the server before the repeats.
            pipeline.flush().await.expect("flush");
        }
    }
    let report = pipeline.shutdown(Duration::from_secs(30)).await;
    assert!(report.completed, "{report:?}");
    let s = report
        .stats
        .sink_events_v1("apiserver")
        .expect("series stats");
    assert_eq!((s.created, s.failed()), (1, 0), "{s:?}");
    assert_eq!(s.cache.flushed, 1, "{s:?}");
    format!("{pod}.")
}

#[actix_rt::test]
async fn simulator_pipeline_series_count() {
    let target = Target::simulator().await.expect("simulator starts");
    let prefix = record_series(&target, "e2e-sim", 6).await;
    let events = target
        .admin
        .requests()
        .events_v1()
        .list_events("default")
        .await
        .expect("list");
    let e = events
        .iter()
        .find(|e| e.metadata.name.starts_with(&prefix))
        .expect("the event exists");
    assert_eq!(e.series.map(|s| s.count), Some(6));
}

#[cfg_attr(
    not(kevents_apiserver),
    ignore = "needs a real kube-apiserver: run `bash scripts/apiserver/provision.sh` once (as root), then `cargo test --workspace`"
)]
#[actix_rt::test]
async fn real_apiserver_events_v1() {
    let target = match Target::real().await {
        Ok(Some(t)) => t,
        Ok(None) => panic!("kube-apiserver is not provisioned (see above)"),
        Err(e) => panic!("{e}"),
    };
    let result = events_v1::run_all(&target).await;
    if let Err(failures) = result {
        panic!("{failures}");
    }

    // End to end: through the pipeline, then kubectl.
    let pod = format!(
        "e2e-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    );
    let prefix = record_series(&target, &pod, 7).await;
    let kubeconfig = target
        .real_apiserver()
        .expect("a real apiserver")
        .admin_kubeconfig
        .clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([
                "get",
                "events.v1.events.k8s.io",
                "-n",
                "default",
                "-o",
                "yaml",
            ])
            .output()
    })
    .await
    .expect("join")
    .expect("kubectl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One list item per "- " at the start of a line (two spaces in: `items:` entries).
    let item = text
        .split("\n- ")
        .find(|chunk| chunk.contains(&format!("name: {prefix}")))
        .unwrap_or_else(|| panic!("no event {prefix}* in:\n{text}"));
    assert!(item.contains("series:"), "no series:\n{item}");
    assert!(item.contains("count: 7"), "count is not 7:\n{item}");
    assert!(
        item.contains("reportingController: kevents.io/e2e"),
        "{item}"
    );
    assert!(item.contains("action: Restart"), "{item}");
}
