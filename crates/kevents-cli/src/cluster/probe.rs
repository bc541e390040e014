//! The reachability probe run before a story or a benchmark is played against an apiserver:
//! `GET /version`, then listing and (harmlessly) creating events in the namespace, each
//! request bounded by [`PROBE_TIMEOUT`]. It turns a wrong address, bad credentials or missing
//! rights into one clear failure within seconds instead of hundreds of failed writes.

use std::time::Duration;

use kevents_core::{Event, EventSink, SinkError, Stored};
use kevents_http::{HttpConfig, HttpSink, ServerVersion};

use super::describe::{describe, list_error};
use super::exit::{Failure, FailureKind};

/// How long each request of the reachability probe may take (connect included).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `fut`, giving up after [`PROBE_TIMEOUT`] and two seconds more (the sink's own
/// timeouts should end it first).
async fn bounded<T>(fut: impl Future<Output = Result<T, SinkError>>) -> Result<T, SinkError> {
    let limit = PROBE_TIMEOUT + Duration::from_secs(2);
    actix_rt::time::timeout(limit, fut)
        .await
        .unwrap_or(Err(SinkError::Timeout(limit)))
}

fn probe_sink(config: &HttpConfig) -> Result<HttpSink, Failure> {
    HttpSink::new(
        config
            .clone()
            .with_request_timeout(PROBE_TIMEOUT)
            .with_connect_timeout(PROBE_TIMEOUT),
    )
    .map_err(|e| Failure::new(FailureKind::Config, e))
}

fn refused(url: &str, what: &str, e: &SinkError) -> Failure {
    let why = match e.code() {
        Some(401) => format!(
            "the apiserver at {url} refused the credentials of the kubeconfig ({})",
            describe(e)
        ),
        Some(403) => format!(
            "the apiserver at {url} does not allow {what} ({})",
            describe(e)
        ),
        _ => format!(
            "cannot use the apiserver at {url} ({what}): {}",
            describe(e)
        ),
    };
    Failure::new(FailureKind::Unreachable, why)
}

/// The first half of the reachability probe: `GET /version`, each request bounded by
/// [`PROBE_TIMEOUT`]. Catches connection refused, DNS, TLS, timeouts and rejected
/// credentials within seconds, as a [`FailureKind::Unreachable`].
pub async fn probe_server(config: &HttpConfig) -> Result<ServerVersion, Failure> {
    let sink = probe_sink(config)?;
    let url = sink.base_url().to_string();
    // The credential first (token file, exec plugin, within their own time limits): a
    // plugin that is missing, fails or hangs is a configuration problem and says so, rather
    // than a request without an answer. The plugin's credential is cached for the writes.
    sink.authenticate().await.map_err(|e| {
        Failure::new(
            FailureKind::Config,
            format!("cannot get a credential for the apiserver at {url}: {e}"),
        )
    })?;
    bounded(sink.server_version())
        .await
        .map_err(|e| refused(&url, "GET /version", &e))
}

/// The second half of the probe: that events of `namespace` can be listed (one `GET` of a
/// one-event page) and created. The create check sends an Event without a name, which the apiserver refuses
/// (422) only after authorising the request: nothing is stored, and a 401, a 403 or a
/// missing namespace (404, a [`FailureKind::Config`]) shows up now instead of as hundreds
/// of failed writes.
pub async fn probe_events(config: &HttpConfig, namespace: &str) -> Result<(), Failure> {
    let sink = probe_sink(config)?;
    let url = sink.base_url().to_string();
    bounded(async {
        // One page of one event: whether the list works, not what it holds (the whole
        // namespace could be 256 MiB of answers).
        sink.requests()
            .list_events_page(namespace, 1)
            .await
            .map_err(list_error)
    })
    .await
    .map_err(|e| {
        refused(
            &url,
            &format!("listing events in namespace {namespace}"),
            &e,
        )
    })?;
    let mut probe = Event::default();
    probe.metadata.namespace = namespace.to_owned();
    probe.involved_object.namespace = namespace.to_owned();
    match bounded(sink.create(&probe)).await {
        // Refused after authorisation, as it must be.
        Err(SinkError::Status(s)) if matches!(s.code, 400 | 409 | 422) => Ok(()),
        Err(e) if e.is_not_found() => Err(Failure::new(
            FailureKind::Config,
            format!(
                "namespace {namespace} does not exist on the apiserver at {url} ({}); create it (kubectl create namespace {namespace}) or choose another with --namespace",
                describe(&e)
            ),
        )),
        Err(e) => Err(refused(
            &url,
            &format!("creating events in namespace {namespace}"),
            &e,
        )),
        Ok(Stored::Returned(stored)) => {
            // A server that stores a nameless event: take it away again.
            let _ = bounded(
                sink.requests()
                    .delete_event(namespace, &stored.metadata.name),
            )
            .await;
            Ok(())
        }
        // Stored, but its echo was over the response limit: no name to delete it by.
        Ok(Stored::AsSent) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevents_sim::{SimConfig, Simulator};

    /// Issue 36: the probe listed every page of the namespace (three pages for 600 events,
    /// up to 256 MiB) only to check that the list works; one page is one request.
    #[actix_rt::test]
    async fn the_probe_lists_one_page_of_a_namespace_with_many_events() {
        let sim = Simulator::start(SimConfig::default())
            .await
            .expect("simulator");
        let config = HttpConfig::new(&sim.url()).expect("config");
        let sink = HttpSink::new(config.clone()).expect("sink");
        for i in 0..600 {
            let mut e = Event::default();
            e.metadata.name = format!("web.{i}");
            e.metadata.namespace = "default".into();
            e.involved_object.namespace = "default".into();
            e.involved_object.kind = "Pod".into();
            e.involved_object.name = "web".into();
            e.reason = "BackOff".into();
            e.count = 1;
            sink.create(&e).await.expect("create");
        }
        let before = sim.stats().requests;
        probe_events(&config, "default").await.expect("probe");
        // One list request and the nameless create (refused with 422).
        assert_eq!(sim.stats().requests - before, 2);
        assert_eq!(sim.events().len(), 600, "the probe stored nothing");
    }
}
