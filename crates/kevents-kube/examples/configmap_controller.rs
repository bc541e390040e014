//! A kube-rs `Controller` over the ConfigMaps of one namespace whose reconciler records events
//! through kevents' drop-in for `kube::runtime::events::Recorder`.
//!
//! ```sh
//! cargo run -p kevents-kube --example configmap_controller -- \
//!     [--kubeconfig FILE] [--namespace NS] [--seconds N]
//! ```
//!
//! Without `--kubeconfig` the client comes from `kube::Client::try_default()` (`KUBECONFIG`,
//! `~/.kube/config` or in-cluster). It runs for `--seconds` (default 20) or until Ctrl-C, then
//! shuts the recorder down (writing the final counts) and prints its report. Every reconcile
//! publishes one `Reconciled` event per ConfigMap; `kubectl get events.v1.events.k8s.io -n NS`
//! then shows one event per ConfigMap whose series count is the number of reconciles.
//!
//! `tests/controller.rs` runs the same code (`run_controller`) against a real kube-apiserver.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kevents_kube::{PublishError, Recorder};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::watcher;
use kube::{Api, Client, Resource, ResourceExt};

/// What the reconciler shares.
pub struct Ctx {
    /// The drop-in recorder (one per controller, cloned into every reconcile).
    pub recorder: Recorder,
    /// Events published per reconcile, concurrently (1 in the example).
    pub publishes_per_reconcile: usize,
    /// How soon a ConfigMap is reconciled again.
    pub requeue: Duration,
    /// Publish calls per ConfigMap name, to check the stored counts against.
    pub published: Mutex<BTreeMap<String, u64>>,
}

/// The reconciler's error.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The recorder refused the event (invalid, or shut down).
    #[error(transparent)]
    Publish(#[from] PublishError),
}

/// Records `Reconciled` about the ConfigMap (`publishes_per_reconcile` times, concurrently)
/// and requeues it.
pub async fn reconcile(cm: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let reference = cm.object_ref(&());
    let keys = cm.data.as_ref().map_or(0, |d| d.len());
    let event = Event {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some(format!("{keys} keys in sync")),
        action: "Reconcile".into(),
        secondary: None,
    };
    let calls = (0..ctx.publishes_per_reconcile).map(|_| ctx.recorder.publish(&event, &reference));
    for result in futures::future::join_all(calls).await {
        result?;
        *ctx.published
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(cm.name_any())
            .or_default() += 1;
    }
    Ok(Action::requeue(ctx.requeue))
}

/// Retry a failed reconcile after a second.
pub fn error_policy(_cm: Arc<ConfigMap>, _error: &ReconcileError, _ctx: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_secs(1))
}

/// Runs the controller over the ConfigMaps of `namespace` until `stop` completes; returns the
/// number of successful reconciles.
pub async fn run_controller(
    client: Client,
    namespace: &str,
    ctx: Arc<Ctx>,
    stop: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> u64 {
    let api: Api<ConfigMap> = Api::namespaced(client, namespace);
    let mut reconciled = 0;
    let mut results = std::pin::pin!(
        Controller::new(api, watcher::Config::default())
            .graceful_shutdown_on(stop)
            .run(reconcile, error_policy, ctx)
    );
    while let Some(result) = results.next().await {
        match result {
            Ok(_) => reconciled += 1,
            Err(e) => eprintln!("reconcile failed: {e}"),
        }
    }
    reconciled
}

#[allow(dead_code)] // tests/controller.rs includes this file for `run_controller`
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut kubeconfig = None;
    let mut namespace = None;
    let mut seconds = 20u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--kubeconfig" => kubeconfig = Some(value()?),
            "--namespace" => namespace = Some(value()?),
            "--seconds" => seconds = value()?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let client = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)?;
            let options = kube::config::KubeConfigOptions::default();
            Client::try_from(kube::Config::from_custom_kubeconfig(kc, &options).await?)?
        }
        None => Client::try_default().await?,
    };
    let namespace = namespace.unwrap_or_else(|| client.default_namespace().to_owned());
    let reporter = kube::runtime::events::Reporter {
        controller: "example.com/configmap-controller".into(),
        instance: std::env::var("POD_NAME").ok(),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let ctx = Arc::new(Ctx {
        recorder: recorder.clone(),
        publishes_per_reconcile: 1,
        requeue: Duration::from_secs(2),
        published: Mutex::default(),
    });
    let stop = async move {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(seconds)) => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    };
    let reconciled = run_controller(client, &namespace, Arc::clone(&ctx), stop).await;
    let report = recorder.shutdown(Duration::from_secs(10)).await?;
    println!("{reconciled} reconciles in namespace {namespace}");
    for (name, n) in ctx
        .published
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
    {
        println!("  configmap {name}: {n} events published");
    }
    if let Some(s) = report.stats.sink_events_v1(kevents_kube::SINK_NAME) {
        println!(
            "recorder: {} published, {} written ({} creates, {} patches), {} failed, completed {}",
            report.stats.recorded,
            s.delivered(),
            s.created,
            s.patched,
            s.failed(),
            report.completed
        );
    }
    Ok(())
}
