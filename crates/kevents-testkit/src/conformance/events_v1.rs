//! The `events.k8s.io/v1` conformance scenarios: each takes a [`Target`] and checks one
//! behaviour of `/apis/events.k8s.io/v1` as the series writer sees it through
//! [`kevents_http::HttpSink`]'s [`events_v1::EventSink`](kevents_core::events_v1::EventSink) implementation. The same functions run
//! against the simulator and the real kube-apiserver v1.20.2, so the simulator is shown to
//! answer like the real one (codes and `Status` reasons; messages are not compared), and
//! against v1.37 and v1.36 (`KEVENTS_K8S_VERSION=1.37` or `1.36`): scenarios whose answer
//! changed since 1.20 expect each version's own ([`Target::server_minor`]; 1.37 answers as
//! 1.36).

use std::time::{Duration, SystemTime};

use kevents_core::events_v1::{
    self, EventSeries, Reporter, Step, Write, WriteReason, series_patch, write_once,
};
use kevents_core::{EventType, ObjectReference, SinkError, Stored, Time};

use super::{Failure, Failures, ServerCopy, SuiteSink};
use crate::Target;

type Outcome = Result<(), String>;

fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "{prefix}-{:010x}",
        ((nanos as u64).rotate_left(17) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) & 0xff_ffff_ffff
    )
}

fn now() -> Time {
    Time::from(SystemTime::now())
}

fn factory() -> kevents_core::events_v1::EventFactory {
    kevents_core::events_v1::EventFactory::new(Reporter::with_instance(
        "kevents.io/conformance",
        "conformance-0",
    ))
}

fn pod(name: &str) -> ObjectReference {
    ObjectReference::new("v1", "Pod", "default", name).with_uid(format!("uid-{name}"))
}

fn event(regarding: ObjectReference, action: &str, note: &str) -> Result<events_v1::Event, String> {
    factory()
        .make(
            now(),
            kevents_core::events_v1::Occurrence::new(
                regarding,
                None,
                EventType::Warning,
                "BackOff",
                action,
                note,
            ),
        )
        .map_err(|e| e.to_string())
}

fn micros(t: Option<Time>) -> Option<i64> {
    t.map(|t| t.unix_nanos().div_euclid(1000))
}

/// Expects a `Status` failure with `code` and `reason`.
fn expect_status(
    r: Result<Stored<events_v1::Event>, SinkError>,
    code: u16,
    reason: &str,
) -> Outcome {
    super::expect_status(r, code, reason).map(drop)
}

/// Discovery lists `events.k8s.io/v1`.
pub async fn v1_discovery_served<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let served = t
        .admin
        .events_v1_served()
        .await
        .map_err(|e| format!("discovery: {e}"))?;
    ensure!(served, "events.k8s.io/v1 not served");
    Ok(())
}

/// CREATE answers 201 with the event as stored: every field kept, uid and resourceVersion set.
pub async fn v1_create_stores_fields<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let related = ObjectReference::new("v1", "Node", "", "node-1");
    let mut e = event(
        pod(&unique("v1-create")),
        "Restart",
        "back-off <restarting> & more",
    )?;
    e.related = Some(related.clone());
    let stored = t.admin.create_events_v1(&e).await.server_copy("create")?;
    ensure!(
        stored.metadata.name == e.metadata.name,
        "name {:?}",
        stored.metadata.name
    );
    ensure!(!stored.metadata.uid.is_empty(), "no uid");
    ensure!(
        stored.metadata.resource_version.parse::<u64>().is_ok(),
        "resourceVersion {:?}",
        stored.metadata.resource_version
    );
    ensure!(
        stored.action == e.action
            && stored.reason == e.reason
            && stored.note == e.note
            && stored.type_ == e.type_
            && stored.reporting_controller == e.reporting_controller
            && stored.reporting_instance == e.reporting_instance,
        "stored {stored:?}"
    );
    ensure!(
        stored.regarding == e.regarding,
        "regarding {:?}",
        stored.regarding
    );
    ensure!(
        stored.related == Some(related),
        "related {:?}",
        stored.related
    );
    ensure!(
        micros(stored.event_time) == micros(e.event_time),
        "eventTime {:?} vs {:?}",
        stored.event_time,
        e.event_time
    );
    ensure!(stored.series.is_none(), "series {:?}", stored.series);
    let got = t
        .admin
        .get_event_v1("default", &e.metadata.name)
        .await
        .map_err(|e| format!("get: {e}"))?;
    ensure!(
        got == stored,
        "GET differs from the create answer:\n{got:?}\n{stored:?}"
    );
    Ok(())
}

/// A series PATCH with client-go's body (`{"series":{"count":..,"lastObservedTime":..}}`) sets
/// the series (count, lastObservedTime) and nothing else.
pub async fn v1_series_patch<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let e = event(pod(&unique("v1-series")), "Restart", "crash")?;
    let created = t.admin.create_events_v1(&e).await.server_copy("create")?;
    let mut last = now();
    for count in [2, 7] {
        last = last.saturating_add(Duration::from_secs(1));
        let series = EventSeries::new(count, last);
        let patched = t
            .admin
            .patch_events_v1(&e, &series_patch(&series))
            .await
            .server_copy(&format!("patch count {count}"))?;
        let s = patched.series.ok_or("no series after the patch")?;
        ensure!(s.count == count, "count {} instead of {count}", s.count);
        ensure!(
            micros(s.last_observed_time) == micros(Some(last)),
            "lastObservedTime {:?}",
            s.last_observed_time
        );
        ensure!(
            patched.note == created.note && patched.metadata.uid == created.metadata.uid,
            "patched {patched:?}"
        );
    }
    Ok(())
}

/// PATCH of an event that does not exist: 404 NotFound; `write_once` then re-creates it
/// with its series (client-go 1.27 `recordEvent`).
pub async fn v1_patch_missing_is_not_found<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let mut e = event(pod(&unique("v1-missing")), "Restart", "crash")?;
    let series = EventSeries::new(2, now());
    expect_status(
        t.admin.patch_events_v1(&e, &series_patch(&series)).await,
        404,
        "NotFound",
    )?;
    e.series = Some(series);
    let w = Write::Patch {
        patch: series_patch(&series),
        event: e.clone(),
        reason: WriteReason::SeriesStart,
    };
    let out = write_once(&t.admin, w).await;
    ensure!(
        out.recreated && out.step == Step::Stored,
        "write_once: recreated {} step {:?} result {:?}",
        out.recreated,
        out.step,
        out.result
    );
    let got = t
        .admin
        .get_event_v1("default", &e.metadata.name)
        .await
        .map_err(|e| format!("get: {e}"))?;
    ensure!(
        got.series.map(|s| s.count) == Some(2),
        "series {:?}",
        got.series
    );
    Ok(())
}

/// A second CREATE with the same name: 409 AlreadyExists.
pub async fn v1_duplicate_create_already_exists<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let e = event(pod(&unique("v1-dup")), "Restart", "crash")?;
    t.admin.create_events_v1(&e).await.server_copy("create")?;
    let r = t.admin.create_events_v1(&e).await;
    if let Err(err) = &r {
        ensure!(err.is_already_exists(), "not AlreadyExists: {err:?}");
    }
    expect_status(r, 409, "AlreadyExists")
}

/// Strict validation (`ValidateEventCreate`, `pkg/apis/core/validation/events.go`): an empty action
/// is refused with 422 Invalid.
pub async fn v1_missing_action_is_invalid<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let mut e = event(pod(&unique("v1-noaction")), "Restart", "crash")?;
    e.action.clear();
    expect_status(t.admin.create_events_v1(&e).await, 422, "Invalid")
}

/// Strict validation (`pkg/apis/core/validation/events.go`): a note over 1024 bytes is refused with
/// 422 Invalid.
pub async fn v1_long_note_is_invalid<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let mut e = event(pod(&unique("v1-longnote")), "Restart", "crash")?;
    e.note = "n".repeat(1025);
    expect_status(t.admin.create_events_v1(&e).await, 422, "Invalid")
}

/// The event validation (`legacyValidateEvent`, `pkg/apis/core/validation/events.go`) of an event
/// about a cluster-scoped object: in `kube-system` it is stored by every version; in `default` a
/// 1.20 apiserver (and the simulator) refuse it with 422 Invalid, and 1.36 and 1.37 store it
/// (that check accepts `default` too there).
pub async fn v1_cluster_scoped_namespace<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let node = ObjectReference::new("v1", "Node", "", unique("v1-node"));
    let mut e = event(node, "Reboot", "rebooted")?;
    ensure!(
        e.metadata.namespace == "kube-system",
        "the factory put it in {:?}",
        e.metadata.namespace
    );
    t.admin
        .create_events_v1(&e)
        .await
        .server_copy("create in kube-system")?;
    e.metadata.namespace = "default".into();
    e.metadata.name = format!("{}-default", e.metadata.name);
    if t.server_minor() >= 36 {
        t.admin
            .create_events_v1(&e)
            .await
            .server_copy("create in default (1.36+)")?;
        Ok(())
    } else {
        expect_status(t.admin.create_events_v1(&e).await, 422, "Invalid")
    }
}

/// A series PATCH with count 1. On a 1.20 apiserver (and the simulator) the update validation
/// (`ValidateUpdate` in `pkg/registry/core/event/strategy.go`) compares the new object with
/// itself, so the PATCH is not validated (count 1 is stored); 1.36 and 1.37 compare it with the
/// stored object and validates the series: 422 Invalid (`series.count`: should be at least 2).
pub async fn v1_series_patch_validation<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let e = event(pod(&unique("v1-count1")), "Restart", "crash")?;
    t.admin.create_events_v1(&e).await.server_copy("create")?;
    let patch = series_patch(&EventSeries::new(1, now()));
    if t.server_minor() >= 36 {
        return expect_status(t.admin.patch_events_v1(&e, &patch).await, 422, "Invalid");
    }
    let patched = t
        .admin
        .patch_events_v1(&e, &patch)
        .await
        .server_copy("patch with count 1")?;
    ensure!(
        patched.series.map(|s| s.count) == Some(1),
        "series {:?}",
        patched.series
    );
    Ok(())
}

/// Every events.k8s.io/v1 scenario, in order; all are run even if some fail.
pub async fn run_all<S: SuiteSink>(t: &Target<S>) -> Result<(), Failures> {
    macro_rules! scenarios {
        ($($f:ident),* $(,)?) => {{
            let mut failures = Vec::new();
            $(
                match $f(t).await {
                    Ok(()) => eprintln!("{}: {} ... ok", t.name, stringify!($f)),
                    Err(message) => {
                        eprintln!("{}: {} ... FAILED: {message}", t.name, stringify!($f));
                        failures.push(Failure { target: t.name.to_owned(), scenario: stringify!($f), message });
                    }
                }
            )*
            failures
        }};
    }
    let failures = scenarios!(
        v1_discovery_served,
        v1_create_stores_fields,
        v1_series_patch,
        v1_patch_missing_is_not_found,
        v1_duplicate_create_already_exists,
        v1_missing_action_is_invalid,
        v1_long_note_is_invalid,
        v1_cluster_scoped_namespace,
        v1_series_patch_validation,
    );
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Failures(failures))
    }
}
