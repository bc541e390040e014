//! `kevents export`: watch a cluster's events and export every occurrence exactly once
//! into NATS JetStream (kevents-export's run loop), until SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use kevents_export::{ExportConfig, JetStream, JetStreamConfig};

use crate::cluster::{self, KubeTarget};

/// Which view of the stored events to watch.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum WatchApi {
    /// `/api/v1/events`.
    Core,
    /// `/apis/events.k8s.io/v1/events`.
    Events,
}

#[derive(Args, Debug, Clone)]
pub struct ExportArgs {
    /// The kubeconfig to watch with (default: KUBECONFIG, ~/.kube/config, or the in-cluster
    /// service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Its context (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// A namespace to watch (repeatable; default: the whole cluster).
    #[arg(long = "namespace", short = 'n')]
    pub namespaces: Vec<String>,
    /// The NATS server.
    #[arg(long, default_value = "nats://127.0.0.1:4222")]
    pub nats: String,
    /// The JetStream stream (created if missing; subjects `{stream}.{namespace}`, resume
    /// point in the key-value bucket `{stream}-resume`).
    #[arg(long, default_value = "export")]
    pub stream: String,
    /// The event API to watch (both show every event).
    #[arg(long, value_enum, default_value_t = WatchApi::Core)]
    pub api: WatchApi,
    /// A watch's timeoutSeconds (it is started again from the last resourceVersion).
    #[arg(long, default_value_t = 240)]
    pub watch_timeout: u64,
    /// Serve Prometheus metrics on this address (`/metrics`).
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, default_value_t = 5)]
    pub progress: u64,
}

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    cluster::finish(actix::System::new().block_on(run_async(args)))
}

async fn run_async(args: ExportArgs) -> anyhow::Result<()> {
    for ns in &args.namespaces {
        cluster::validate_namespace(ns)?;
    }
    let config = match &args.kubeconfig {
        Some(path) => {
            KubeTarget {
                kubeconfig: path.clone(),
                context: args.context.clone(),
            }
            .config()
            .await?
        }
        None => kevents_http::HttpConfig::infer()
            .await
            .context("no kubeconfig or in-cluster configuration")?,
    };
    let apiserver = kevents_http::HttpSink::new(config)?;
    if let Some(addr) = args.metrics_addr {
        let (recorder, exporter) = metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .build()
            .with_context(|| format!("serving metrics on {addr}"))?;
        metrics::set_global_recorder(recorder).context("installing the metrics recorder")?;
        tokio::spawn(async move {
            if let Err(e) = exporter.await {
                tracing::warn!("the metrics listener ended: {e:?}");
            }
        });
    }
    let nats = kevents_export::async_nats::connect(args.nats.as_str())
        .await
        .with_context(|| format!("connecting to NATS at {}", args.nats))?;
    let js = JetStream::open(nats, JetStreamConfig::new(&args.stream)).await?;
    let config = ExportConfig {
        api: match args.api {
            WatchApi::Core => kevents_export::Api::CoreV1,
            WatchApi::Events => kevents_export::Api::EventsV1,
        },
        namespaces: args.namespaces.clone(),
        watch_timeout: Duration::from_secs(args.watch_timeout.max(1)),
        progress: (args.progress > 0).then(|| Duration::from_secs(args.progress)),
        ..ExportConfig::default()
    };
    let stats = kevents_export::run(apiserver, config, js.clone(), js, terminated()).await?;
    eprintln!(
        "export: stopped after {} records, {} occurrences",
        stats.records, stats.occurrences
    );
    Ok(())
}

/// Completes on SIGTERM or Ctrl-C (SIGINT).
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
