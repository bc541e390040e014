//! The demo's story: 30 minutes in the life of a namespace, as its controllers and the
//! kubelet would report it. Three things go wrong at once:
//!
//! * `web` is a Deployment whose pods crash-loop (kubelet BackOff, over and over);
//! * `api`'s new image does not exist (ErrImagePull, ImagePullBackOff);
//! * the autoscaler keeps resizing `web`, so the deployment and replicaset controllers report
//!   scaling and pod creation with a different message every time.
//!
//! Every step is an occurrence at an offset from the start; the demo drives a virtual clock
//! through them, so 30 minutes take a few seconds and the timestamps look real.

use kevents_core::{EventType, ObjectReference};

/// The components that report events, one recorder (and one correlator) each, as in a cluster.
pub const COMPONENTS: [&str; 3] = ["kubelet", "deployment-controller", "replicaset-controller"];

/// Length of the story in seconds: 30 minutes.
pub const STORY_SECS: u64 = 1_800;

/// One occurrence of the story.
#[derive(Debug, Clone)]
pub struct Step {
    /// Seconds since the start of the story.
    pub at_secs: u64,
    /// Index into [`COMPONENTS`].
    pub component: usize,
    /// The involved object.
    pub object: ObjectReference,
    /// Normal or Warning.
    pub event_type: EventType,
    /// Reason.
    pub reason: &'static str,
    /// Message.
    pub message: String,
}

fn pod(ns: &str, name: &str, container: Option<&str>) -> ObjectReference {
    let r = ObjectReference::new("v1", "Pod", ns, name).with_uid(format!("uid-{name}"));
    match container {
        Some(c) => r.with_field_path(format!("spec.containers{{{c}}}")),
        None => r,
    }
}

/// The whole story in `namespace`, ordered by time.
pub fn story(namespace: &str) -> Vec<Step> {
    let ns = namespace;
    let mut steps = Vec::new();
    let mut push =
        |at_secs, component, object: ObjectReference, event_type, reason, message: String| {
            steps.push(Step {
                at_secs,
                component,
                object,
                event_type,
                reason,
                message,
            });
        };
    let web_pod = "web-7d4c9b6f5-x2x7q";
    let api_pod = "api-5c8d7f9b4-k9m2p";
    let web = pod(ns, web_pod, Some("web"));
    let api = pod(ns, api_pod, Some("api"));

    // The crash loop: the container starts, dies, and the kubelet backs off with a growing
    // delay; BackOff is reported on every sync (every 10 s), far more often than it restarts.
    let mut restart_at = 5u64;
    let mut delay = 10u64;
    for restart in 0.. {
        let t = restart_at;
        if t > 1_750 {
            break;
        }
        if restart == 0 {
            push(
                t,
                0,
                web.clone(),
                EventType::Normal,
                "Pulling",
                "Pulling image \"nginx:1.25\"".into(),
            );
            push(
                t + 2,
                0,
                web.clone(),
                EventType::Normal,
                "Pulled",
                "Successfully pulled image \"nginx:1.25\" in 1.873s".into(),
            );
        } else {
            push(
                t,
                0,
                web.clone(),
                EventType::Normal,
                "Pulled",
                "Container image \"nginx:1.25\" already present on machine".into(),
            );
        }
        push(
            t + 3,
            0,
            web.clone(),
            EventType::Normal,
            "Created",
            "Created container web".into(),
        );
        push(
            t + 3,
            0,
            web.clone(),
            EventType::Normal,
            "Started",
            "Started container web".into(),
        );
        let mut b = t + 10;
        while b < (t + delay).min(1_790) {
            push(
                b,
                0,
                web.clone(),
                EventType::Warning,
                "BackOff",
                format!(
                    "Back-off restarting failed container web in pod {web_pod}_{ns}(uid-{web_pod})"
                ),
            );
            b += 10;
        }
        restart_at = t + delay;
        delay = (delay * 2).min(300);
    }

    // The missing image: every pull fails, then the kubelet backs off pulling.
    let image = "registry.example.com/team/api:v2.4.1";
    let mut t = 60u64;
    let mut pull_delay = 10u64;
    while t < 1_750 {
        push(
            t,
            0,
            api.clone(),
            EventType::Normal,
            "Pulling",
            format!("Pulling image \"{image}\""),
        );
        push(
            t + 1,
            0,
            api.clone(),
            EventType::Warning,
            "Failed",
            format!(
                "Failed to pull image \"{image}\": rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": not found"
            ),
        );
        push(
            t + 1,
            0,
            api.clone(),
            EventType::Warning,
            "Failed",
            "Error: ErrImagePull".into(),
        );
        let mut b = t + 10;
        while b < t + pull_delay {
            push(
                b,
                0,
                api.clone(),
                EventType::Normal,
                "BackOff",
                format!("Back-off pulling image \"{image}\""),
            );
            push(
                b,
                0,
                api.clone(),
                EventType::Warning,
                "Failed",
                "Error: ImagePullBackOff".into(),
            );
            b += 10;
        }
        t += pull_delay;
        pull_delay = (pull_delay * 2).min(300);
    }

    // The autoscaler: the deployment is resized every minute and a half, and every scale-up
    // creates pods with new names, so messages are all different: similar events.
    let deploy =
        ObjectReference::new("apps/v1", "Deployment", ns, "web").with_uid("uid-deploy-web");
    let rs =
        ObjectReference::new("apps/v1", "ReplicaSet", ns, "web-7d4c9b6f5").with_uid("uid-rs-web");
    let mut replicas = 3u32;
    for k in 0..18u64 {
        let t = 30 + k * 95;
        let next = if k % 3 == 2 {
            replicas - 1
        } else {
            replicas + 1
        };
        let verb = if next > replicas { "up" } else { "down" };
        push(
            t,
            1,
            deploy.clone(),
            EventType::Normal,
            "ScalingReplicaSet",
            format!("Scaled {verb} replica set web-7d4c9b6f5 to {next}"),
        );
        if next > replicas {
            push(
                t + 1,
                2,
                rs.clone(),
                EventType::Normal,
                "SuccessfulCreate",
                format!("Created pod: web-7d4c9b6f5-{:05x}", 0x1f2e3 + k * 7919),
            );
        } else {
            push(
                t + 1,
                2,
                rs.clone(),
                EventType::Normal,
                "SuccessfulDelete",
                format!(
                    "Deleted pod: web-7d4c9b6f5-{:05x}",
                    0x1f2e3 + (k - 1) * 7919
                ),
            );
        }
        replicas = next;
    }

    steps.retain(|s| s.at_secs <= STORY_SECS);
    steps.sort_by_key(|s| s.at_secs);
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn story_is_ordered_and_exercises_every_correlator_path() {
        let s = story("demo");
        assert!(s.windows(2).all(|w| w[0].at_secs <= w[1].at_secs));
        assert!(s.last().unwrap().at_secs <= 1_800);
        let backoffs = s
            .iter()
            .filter(|x| x.reason == "BackOff" && x.object.name.starts_with("web"))
            .count();
        assert!(
            backoffs > 25,
            "the crash loop must outrun the spam filter's burst: {backoffs}"
        );
        let creates = s.iter().filter(|x| x.reason == "SuccessfulCreate").count();
        assert!(
            creates >= 10,
            "similar events must reach the aggregation threshold: {creates}"
        );
    }
}
