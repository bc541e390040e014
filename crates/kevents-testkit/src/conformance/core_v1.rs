//! The core/v1 conformance scenarios: each takes a [`Target`] and checks one behaviour of the
//! apiserver as the recorder sees it through [`kevents_http::HttpSink`]. The same functions
//! run against the simulator and the real apiserver, so the simulator is shown to answer
//! like the real one.
//!
//! Scenarios use the `default` namespace and unique event names, so they can share one
//! apiserver and run in any order.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kevents_core::core_v1::correlator::{AGGREGATE_PREFIX, observation_patch};
use kevents_core::{
    Correlator, CorrelatorOptions, Disposition, Event, EventFactory, EventSink, EventSource,
    EventType, Naming, ObjectReference, Occurrence, SinkError, Time, VirtualClock, WriteKind,
    write_event,
};

use super::{Failure, Failures, ServerCopy, SuiteSink, expect_status};
use crate::Target;

type Outcome = Result<(), String>;

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", &uuid_like()[..10])
}

fn uuid_like() -> String {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "{:016x}",
        (nanos as u64).rotate_left(17) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    )
}

/// Two minutes ago, so `kubectl` ages are in the past.
fn start_time() -> Time {
    Time::from(SystemTime::now() - Duration::from_secs(120))
}

/// Timestamps are whole seconds on the wire.
fn secs(t: Option<Time>) -> Option<i64> {
    t.map(Time::unix_secs)
}

fn pod(name: &str) -> ObjectReference {
    ObjectReference::new("v1", "Pod", "default", name).with_uid(format!("uid-{name}"))
}

fn factory() -> EventFactory {
    let mut f = EventFactory::new(EventSource::new("kevents-conformance", "node-1"));
    f.naming = Naming::Legacy;
    f
}

fn event_for(
    object: ObjectReference,
    reason: &str,
    message: &str,
    at: Time,
) -> Result<Event, String> {
    factory()
        .make(
            at,
            Occurrence::new(object, EventType::Warning, reason, message),
        )
        .map_err(|e| e.to_string())
}

fn status_of(e: &SinkError) -> Result<&kevents_core::Status, String> {
    match e {
        SinkError::Status(s) => Ok(s),
        other => Err(format!("expected a Status error, got {other:?}")),
    }
}

/// Create answers 201 with the event as stored: fields kept, uid and resourceVersion set.
pub async fn create_stores_fields<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let at = start_time();
    let e = event_for(
        pod(&unique("create")),
        "BackOff",
        "Back-off restarting <failed> container & more",
        at,
    )?;
    let stored = t.admin.create(&e).await.server_copy("create")?;
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
        stored.count == 1 && stored.reason == e.reason && stored.message == e.message,
        "stored {stored:?}"
    );
    ensure!(
        stored.type_ == "Warning" && stored.source == e.source,
        "stored {stored:?}"
    );
    ensure!(
        stored.involved_object == e.involved_object,
        "involvedObject {:?}",
        stored.involved_object
    );
    ensure!(
        secs(stored.first_timestamp) == secs(e.first_timestamp)
            && secs(stored.last_timestamp) == secs(e.last_timestamp),
        "timestamps {stored:?}"
    );
    ensure!(
        stored.metadata.creation_timestamp.is_some(),
        "no creationTimestamp"
    );
    let got = t
        .admin
        .get_event("default", &e.metadata.name)
        .await
        .map_err(|e| format!("get: {e}"))?;
    ensure!(
        got == stored,
        "GET differs from the create answer:\n{got:?}\n{stored:?}"
    );
    Ok(())
}

/// PATCH with client-go's exact body updates count, lastTimestamp and message only.
pub async fn patch_updates_count<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let at = start_time();
    let e = event_for(pod(&unique("patch")), "Unhealthy", "probe failed", at)?;
    let created = t.admin.create(&e).await.server_copy("create")?;
    let mut next = created.clone();
    next.count = 2;
    next.last_timestamp = Some(at.saturating_add(Duration::from_secs(10)));
    next.message = "probe failed again".into();
    let body = observation_patch(&next);
    let patched = t.admin.patch(&next, &body).await.server_copy("patch")?;
    ensure!(patched.count == 2, "count {}", patched.count);
    ensure!(
        patched.message == "probe failed again",
        "message {:?}",
        patched.message
    );
    ensure!(
        secs(patched.last_timestamp) == secs(next.last_timestamp),
        "lastTimestamp {:?}",
        patched.last_timestamp
    );
    ensure!(
        patched.first_timestamp == created.first_timestamp,
        "firstTimestamp changed"
    );
    ensure!(patched.metadata.uid == created.metadata.uid, "uid changed");
    let (a, b) = (
        created
            .metadata
            .resource_version
            .parse::<u64>()
            .unwrap_or(u64::MAX),
        patched
            .metadata
            .resource_version
            .parse::<u64>()
            .unwrap_or(0),
    );
    ensure!(b > a, "resourceVersion did not increase: {a} -> {b}");
    Ok(())
}

/// PATCH of a missing event: 404 NotFound Status naming the event.
pub async fn patch_missing_is_not_found<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let mut e = event_for(pod(&unique("missing")), "X", "m", start_time())?;
    e.count = 2;
    let err = expect_status(t.admin.patch(&e, br#"{"count":2}"#).await, 404, "NotFound")?;
    let s = status_of(&err)?;
    let d = s.details.clone().unwrap_or_default();
    ensure!(
        d.name == e.metadata.name && d.kind == "events",
        "details {d:?}"
    );
    ensure!(
        s.message == format!("events \"{}\" not found", e.metadata.name),
        "message {:?}",
        s.message
    );
    ensure!(err.is_not_found(), "is_not_found");
    Ok(())
}

/// A second create of the same name: 409 AlreadyExists, dropped quietly.
pub async fn duplicate_create_already_exists<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let e = event_for(pod(&unique("dup")), "X", "m", start_time())?;
    t.admin.create(&e).await.server_copy("first create")?;
    let err = expect_status(t.admin.create(&e).await, 409, "AlreadyExists")?;
    let s = status_of(&err)?;
    ensure!(
        s.message == format!("events \"{}\" already exists", e.metadata.name),
        "message {:?}",
        s.message
    );
    ensure!(
        err.disposition() == Disposition::Drop { quiet: true },
        "disposition {:?}",
        err.disposition()
    );
    Ok(())
}

/// An event whose involvedObject is in another namespace: 422 Invalid with the cause.
pub async fn namespace_mismatch_is_invalid<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let mut e = event_for(pod(&unique("mismatch")), "X", "m", start_time())?;
    e.involved_object.namespace = "other".into();
    let err = expect_status(t.admin.create(&e).await, 422, "Invalid")?;
    let s = status_of(&err)?;
    let d = s.details.clone().unwrap_or_default();
    ensure!(
        d.kind == "Event" && d.name == e.metadata.name,
        "details {d:?}"
    );
    ensure!(d.causes.len() == 1, "causes {:?}", d.causes);
    let c = &d.causes[0];
    ensure!(
        c.type_ == "FieldValueInvalid" && c.field == "involvedObject.namespace",
        "cause {c:?}"
    );
    ensure!(
        c.message == "Invalid value: \"other\": does not match event.namespace",
        "cause message {:?}",
        c.message
    );
    ensure!(
        s.message
            == format!(
                "Event \"{}\" is invalid: involvedObject.namespace: Invalid value: \"other\": does not match event.namespace",
                e.metadata.name
            ),
        "message {:?}",
        s.message
    );
    ensure!(
        err.disposition() == Disposition::Drop { quiet: false },
        "disposition"
    );
    Ok(())
}

/// An event in a namespace that does not exist: 404 naming the namespace, dropped.
pub async fn missing_namespace_is_not_found<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let ns = unique("kevents-missing");
    let mut object = pod("p");
    object.namespace = ns.clone();
    let e = event_for(object, "X", "m", start_time())?;
    let err = expect_status(t.admin.create(&e).await, 404, "NotFound")?;
    let s = status_of(&err)?;
    let d = s.details.clone().unwrap_or_default();
    ensure!(d.kind == "namespaces" && d.name == ns, "details {d:?}");
    ensure!(
        s.message == format!("namespaces \"{ns}\" not found"),
        "message {:?}",
        s.message
    );
    ensure!(
        matches!(err.disposition(), Disposition::Drop { .. }),
        "disposition"
    );
    Ok(())
}

/// A token without RBAC rights: 403 Forbidden Status, dropped (not retried), not quiet.
pub async fn forbidden_token_is_dropped<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let e = event_for(pod(&unique("nobody")), "X", "m", start_time())?;
    let err = expect_status(t.nobody.create(&e).await, 403, "Forbidden")?;
    let s = status_of(&err)?;
    ensure!(
        s.message
            == "events is forbidden: User \"nobody\" cannot create resource \"events\" in API group \"\" in the namespace \"default\"",
        "message {:?}",
        s.message
    );
    ensure!(
        err.disposition() == Disposition::Drop { quiet: false },
        "disposition {:?}",
        err.disposition()
    );
    let mut patched = e.clone();
    patched.count = 2;
    let err = t
        .nobody
        .patch(&patched, br#"{"count":2}"#)
        .await
        .err()
        .ok_or("nobody could patch")?;
    let s = status_of(&err)?;
    ensure!(
        s.code == 403
            && s.message
                == format!(
                    "events \"{}\" is forbidden: User \"nobody\" cannot patch resource \"events\" in API group \"\" in the namespace \"default\"",
                    e.metadata.name
                ),
        "patch: {} {:?}",
        s.code,
        s.message
    );
    // Discovery stays allowed for an authenticated user without rights.
    let served = t
        .nobody
        .events_v1_served()
        .await
        .map_err(|e| format!("discovery: {e}"))?;
    let _ = served;
    Ok(())
}

/// A deleted event is re-created by the next repeat with the accumulated count (client-go's
/// `recordEvent` follows a PATCH answered 404 with a CREATE).
pub async fn recreate_after_not_found<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let at = start_time();
    let mut e = event_for(pod(&unique("recreate")), "BackOff", "m", at)?;
    let first = write_event(&t.admin, &mut e, None).await;
    ensure!(
        first.kind == WriteKind::Create,
        "first write {:?}",
        first.kind
    );
    let stored = first.result.server_copy("create")?;
    t.admin
        .delete_event("default", &stored.metadata.name)
        .await
        .map_err(|e| format!("delete: {e}"))?;
    let mut repeat = stored.clone();
    repeat.count = 3;
    repeat.last_timestamp = Some(at.saturating_add(Duration::from_secs(30)));
    let patch = observation_patch(&repeat);
    let out = write_event(&t.admin, &mut repeat, Some(&patch)).await;
    ensure!(
        out.kind == WriteKind::Recreate,
        "second write {:?}",
        out.kind
    );
    let again = out.result.server_copy("recreate")?;
    ensure!(again.metadata.name == stored.metadata.name, "name changed");
    ensure!(again.count == 3, "count {}", again.count);
    ensure!(
        secs(again.first_timestamp) == secs(stored.first_timestamp),
        "firstTimestamp {:?}",
        again.first_timestamp
    );
    ensure!(
        again.metadata.uid != stored.metadata.uid,
        "uid should be new"
    );
    Ok(())
}

/// Runs `occurrences` through a correlator and writes each decision as client-go does
/// (`write_event`, then `update_state`). Returns the names written.
async fn record(
    sink: &impl EventSink,
    occurrences: Vec<Occurrence>,
    step: Duration,
) -> Result<Vec<String>, String> {
    let clock = VirtualClock::new(start_time());
    let mut correlator = Correlator::new(CorrelatorOptions {
        clock: Some(Arc::new(clock.clone())),
        ..Default::default()
    });
    let f = factory();
    let mut names = Vec::new();
    for occ in occurrences {
        use kevents_core::Clock as _;
        let event = f.make(clock.now(), occ).map_err(|e| e.to_string())?;
        let decision = correlator.correlate(event);
        if !decision.skip {
            let mut ev = decision.event;
            let out = write_event(sink, &mut ev, decision.patch.as_deref()).await;
            let what = format!("{} failed", out.kind.as_str());
            let stored = out.result.server_copy(&what)?;
            correlator.update_state(&stored);
            if !names.contains(&stored.metadata.name) {
                names.push(stored.metadata.name.clone());
            }
        }
        clock.advance(step);
    }
    Ok(names)
}

/// Five identical occurrences: one stored event with count 5.
pub async fn correlator_repeat_counts<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let object = pod(&unique("repeat"));
    let occ = Occurrence::new(
        object.clone(),
        EventType::Warning,
        "BackOff",
        "Back-off restarting failed container",
    );
    let names = record(&t.admin, vec![occ; 5], Duration::from_secs(10)).await?;
    ensure!(names.len() == 1, "names {names:?}");
    let stored = t
        .admin
        .get_event("default", &names[0])
        .await
        .map_err(|e| format!("get: {e}"))?;
    ensure!(stored.count == 5, "count {}", stored.count);
    let same_object: Vec<Event> = t
        .admin
        .list_events("default")
        .await
        .map_err(|e| format!("list: {e}"))?
        .into_iter()
        .filter(|e| e.involved_object.name == object.name)
        .collect();
    ensure!(
        same_object.len() == 1,
        "{} events stored for the object",
        same_object.len()
    );
    Ok(())
}

/// Eleven distinct messages with one reason: 9 single events plus one aggregate whose
/// message is the combined one and whose count is 2.
pub async fn aggregation_combines_messages<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let object = pod(&unique("aggregate"));
    let occs: Vec<Occurrence> = (1..=11)
        .map(|i| {
            Occurrence::new(
                object.clone(),
                EventType::Warning,
                "FailedMount",
                format!("volume {i} not ready"),
            )
        })
        .collect();
    record(&t.admin, occs, Duration::from_secs(1)).await?;
    let events: Vec<Event> = t
        .admin
        .list_events("default")
        .await
        .map_err(|e| format!("list: {e}"))?
        .into_iter()
        .filter(|e| e.involved_object.name == object.name)
        .collect();
    ensure!(
        events.len() == 10,
        "{} events stored, expected 9 + 1 aggregate",
        events.len()
    );
    let aggregates: Vec<&Event> = events
        .iter()
        .filter(|e| e.message.starts_with(AGGREGATE_PREFIX))
        .collect();
    ensure!(aggregates.len() == 1, "aggregates {aggregates:?}");
    let agg = aggregates[0];
    ensure!(
        agg.message == format!("{AGGREGATE_PREFIX}volume 11 not ready"),
        "aggregate message {:?}",
        agg.message
    );
    ensure!(agg.count == 2, "aggregate count {}", agg.count);
    ensure!(
        events.iter().filter(|e| e.count == 1).count() == 9,
        "single events"
    );
    Ok(())
}

/// `kubectl describe configmap` shows `(x5 over ...)` for an event repeated five times
/// (real apiserver only: it needs kubectl and a ConfigMap).
pub async fn kubectl_describe_shows_count<S: SuiteSink>(t: &Target<S>) -> Outcome {
    let Some(real) = t.real_apiserver() else {
        return Ok(());
    };
    let kubeconfig = real.admin_kubeconfig.clone();
    let name = unique("kevents-cm");
    let kubectl = |args: Vec<String>| {
        let kubeconfig = kubeconfig.clone();
        async move {
            tokio::task::spawn_blocking(move || {
                std::process::Command::new("kubectl")
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(&args)
                    .output()
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("running kubectl: {e}"))
        }
    };
    let out = kubectl(vec![
        "create".into(),
        "configmap".into(),
        name.clone(),
        "-n".into(),
        "default".into(),
    ])
    .await?;
    ensure!(
        out.status.success(),
        "kubectl create configmap failed: {} (an INTERNAL_ERROR here is kube-apiserver 1.20 built with Go >= 1.18 and reflect2 1.0.1 panicking while decoding; see docs/http.md)",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let out = kubectl(vec![
        "get".into(),
        "configmap".into(),
        name.clone(),
        "-n".into(),
        "default".into(),
        "-o".into(),
        "jsonpath={.metadata.uid}".into(),
    ])
    .await?;
    let uid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    ensure!(
        out.status.success() && !uid.is_empty(),
        "kubectl get configmap: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let object = ObjectReference::new("v1", "ConfigMap", "default", &name).with_uid(uid);
    let occ = Occurrence::new(object, EventType::Warning, "Synced", "hello from kevents");
    record(&t.admin, vec![occ; 5], Duration::from_secs(10)).await?;
    let out = kubectl(vec![
        "describe".into(),
        "configmap".into(),
        name.clone(),
        "-n".into(),
        "default".into(),
    ])
    .await?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    ensure!(
        out.status.success(),
        "kubectl describe failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.contains("hello from kevents"))
        .unwrap_or("");
    ensure!(
        line.contains("(x5 over ")
            && line.contains("Warning")
            && line.contains("Synced")
            && line.contains("kevents-conformance"),
        "kubectl describe output:\n{text}"
    );
    Ok(())
}

/// Every scenario, in order; all are run even if some fail.
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
        create_stores_fields,
        patch_updates_count,
        patch_missing_is_not_found,
        duplicate_create_already_exists,
        namespace_mismatch_is_invalid,
        missing_namespace_is_not_found,
        forbidden_token_is_dropped,
        recreate_after_not_found,
        correlator_repeat_counts,
        aggregation_combines_messages,
        kubectl_describe_shows_count,
    );
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Failures(failures))
    }
}
