//! `kevents export`: watch a cluster's events and export every occurrence exactly once
//! into NATS JetStream (kevents-export's run loop), until SIGTERM or Ctrl-C; `--otlp` and
//! `--webhook` are fed from the stream, or, without NATS, receive the records directly with
//! the resume point in a ConfigMap (`export_sinks.rs`, `export_feed.rs`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use kevents_export::{
    ConfigMapResume, ExportConfig, ExportError, ExportStats, JetStream, JetStreamConfig,
};
use kevents_runtime::lead::{LeadError, run_while_leading};
use kevents_runtime::lease::{LeaderElector, LeaseConfig};

use crate::cluster::{self, Failure, FailureKind};
use crate::export_shards::store_failure;
use crate::export_sinks::{Direct, SinkArgs};
use crate::nats_conn::NatsArgs;

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
    /// NATS: the servers, credentials and TLS.
    #[command(flatten)]
    pub nats: NatsArgs,
    /// Whether NATS was asked for (`--nats` or NATS_URL; set by main from the matches).
    #[arg(skip)]
    pub nats_given: bool,
    /// The HTTP sinks (`--otlp`, `--webhook`) and, without NATS, the resume ConfigMap.
    #[command(flatten)]
    pub sinks: SinkArgs,
    /// Replicas of the stream and bucket when they are created (a JetStream cluster: 3).
    #[arg(long, allow_negative_numbers = true, default_value_t = 1, value_parser = crate::bounds::parse::export_nats_replicas)]
    pub nats_replicas: u64,
    /// The JetStream stream (created if missing; subjects `{stream}.{namespace}`, resume
    /// point in the key-value bucket `{stream}-resume`).
    #[arg(long, default_value = "export")]
    pub stream: String,
    /// The event API to watch (both show every event).
    #[arg(long, value_enum, default_value_t = WatchApi::Core)]
    pub api: WatchApi,
    /// A watch's timeoutSeconds (it is started again from the last resourceVersion).
    #[arg(long, allow_negative_numbers = true, default_value_t = 240, value_parser = crate::bounds::parse::export_watch_timeout)]
    pub watch_timeout: u64,
    /// Serve Prometheus metrics on this address (`/metrics`).
    #[arg(long)]
    pub metrics_addr: Option<SocketAddr>,
    /// Seconds between progress lines on stderr (0: none).
    #[arg(long, allow_negative_numbers = true, default_value_t = 5, value_parser = crate::bounds::parse::export_progress)]
    pub progress: u64,
    /// Export only while holding a coordination.k8s.io/v1 Lease (client-go's leader
    /// election): replicas stand by and the next one continues from the resume point when the
    /// holder stops or dies.
    #[arg(long)]
    pub leader_elect: bool,
    /// The Lease's namespace.
    #[arg(long, default_value = "default", requires = "leader_elect")]
    pub lease_namespace: String,
    /// The Lease's name.
    #[arg(long, default_value = "kevents-export", requires = "leader_elect")]
    pub lease_name: String,
    /// This replica's identity in the Lease (default: `<hostname>_<pid>`).
    #[arg(long, requires = "leader_elect")]
    pub identity: Option<String>,
    /// (The durations take effect with `--leader-elect`.)
    /// Lease duration, seconds (client-go's default 15).
    #[arg(long, allow_negative_numbers = true, default_value_t = 15, value_parser = crate::bounds::parse::export_lease_duration)]
    pub lease_duration: u64,
    /// Renew deadline, seconds (client-go's default 10).
    #[arg(long, allow_negative_numbers = true, default_value_t = 10, value_parser = crate::bounds::parse::export_renew_deadline)]
    pub renew_deadline: u64,
    /// Split the events into N shards by their uid's FNV-1a hash (KEP-5866's), each exported
    /// into its own stream `{stream}-{i}of{N}` with its own resume point and fence; with
    /// `--leader-elect` each shard is led through its own Lease `{lease-name}-{i}` and the
    /// replicas share them (docs/export.md, "Shards"). NATS only.
    #[arg(long, value_parser = crate::bounds::parse::export_shards)]
    pub shards: Option<u64>,
    /// Retry period, seconds (client-go's default 2).
    #[arg(long, allow_negative_numbers = true, default_value_t = 2, value_parser = crate::bounds::parse::export_retry_period)]
    pub retry_period: u64,
}

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    cluster::finish(actix::System::new().block_on(run_async(args)))
}

async fn run_async(args: ExportArgs) -> anyhow::Result<()> {
    // Every option is checked before anything is connected to: a usage error exits 2 with
    // nothing done (docs/cli-bounds.md).
    for ns in &args.namespaces {
        cluster::validate_namespace(ns)?;
    }
    let sinks = args.sinks.build()?;
    let direct = !args.nats_given && (sinks.otlp.is_some() || sinks.webhook.is_some());
    if direct && sinks.otlp.is_some() && sinks.webhook.is_some() {
        return Err(Failure::new(
            FailureKind::Config,
            "--otlp and --webhook together need NATS (--nats): without it, each keeps a resume point of its own; run two exports",
        )
        .into());
    }
    if args.shards.is_some() && (direct || sinks.otlp.is_some() || sinks.webhook.is_some()) {
        return Err(Failure::new(
            FailureKind::Config,
            "--shards needs NATS (--nats) and feeds no --otlp or --webhook: read the shard streams with `kevents history`",
        )
        .into());
    }
    let resume_namespace = args.sinks.resume_namespace();
    if direct {
        cluster::validate_namespace(&resume_namespace)?;
        kevents_core::request::check_path_names(
            &resume_namespace,
            Some(&args.sinks.resume_configmap),
        )
        .map_err(|e| Failure::new(FailureKind::Config, format!("--resume-configmap: {e}")))?;
    }
    let nats_target = args.nats.resolve()?;
    let mut js_config = JetStreamConfig::new(&args.stream);
    js_config.replicas = args.nats_replicas as usize;
    if let Some(identity) = &args.identity {
        js_config.identity = identity.clone();
    }
    js_config
        .validate()
        .map_err(|e| Failure::new(FailureKind::Config, format!("--stream: {e}")))?;
    let identity = match &args.identity {
        Some(id) => id.clone(),
        None => format!(
            "{}_{}",
            kevents_core::events_v1::hostname(),
            std::process::id()
        ),
    };
    let lease = LeaseConfig::new(&args.lease_namespace, &args.lease_name, &identity)
        .with_durations(
            Duration::from_secs(args.lease_duration),
            Duration::from_secs(args.renew_deadline),
            Duration::from_secs(args.retry_period),
        );
    if args.leader_elect {
        lease
            .validate()
            .map_err(|e| Failure::new(FailureKind::Config, format!("--leader-elect: {e}")))?;
    }
    let config = cluster::cluster_config(args.kubeconfig.as_ref(), args.context.as_ref()).await?;
    let apiserver = kevents_http::HttpSink::new(config)?;
    if let Some(addr) = args.metrics_addr {
        let (recorder, exporter) = metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .build()
            .with_context(|| format!("serving metrics on {addr}"))?;
        metrics::set_global_recorder(recorder).context("installing the metrics recorder")?;
        // Every family from the start, at zero: a standby's /metrics is not empty.
        crate::export_metrics::register(!args.leader_elect);
        tokio::spawn(async move {
            if let Err(e) = exporter.await {
                tracing::warn!("the metrics listener ended: {e:?}");
            }
        });
    }
    let mode = if direct {
        let sink = match (sinks.otlp, sinks.webhook) {
            (Some(otlp), _) => Direct::Otlp(otlp),
            (None, Some(hook)) => Direct::Webhook(hook),
            (None, None) => unreachable!("direct mode has a sink"),
        };
        let store = ConfigMapResume::new(
            apiserver.requests(),
            &resume_namespace,
            &args.sinks.resume_configmap,
        )
        .map_err(store_failure)?;
        eprintln!(
            "export: to {} (no NATS), resume point in the ConfigMap {}",
            sink.shown(),
            store.shown()
        );
        Mode::Direct { sink, store }
    } else {
        let nats = nats_target.connect("kevents export").await?;
        if let Some(n) = args.shards {
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            eprintln!(
                "export: NATS at {}, streams {}-{{0..{}}}of{n}",
                nats_target.shown(),
                args.stream,
                n - 1
            );
            let streams = crate::export_shards::open_streams(&nats, &js_config, n)
                .await
                .map_err(store_failure)?;
            let config = config_of(&args);
            return run_sharded(args, apiserver, config, streams, lease).await;
        }
        eprintln!(
            "export: NATS at {}, stream {}",
            nats_target.shown(),
            args.stream
        );
        // A history written with --shards is not continued without (nor the reverse).
        kevents_export::shard::check_layout(
            &kevents_export::async_nats::jetstream::new(nats.clone()),
            &args.stream,
            None,
        )
        .await
        .map_err(store_failure)?;
        let js = JetStream::open(nats, js_config)
            .await
            .map_err(store_failure)?;
        let feeds = crate::export_feed::feeds_from_stream(&js, sinks);
        Mode::Nats { js, feeds }
    };
    let config = config_of(&args);
    let stop = Stop::on_signals();
    if !args.leader_elect {
        let stats = mode
            .run(apiserver, config, stop.wait())
            .await
            .map_err(store_failure)?;
        eprintln!(
            "export: stopped after {} records, {} occurrences; incomplete: before_start={} watch_gap={} deleted_unread={}",
            stats.records,
            stats.occurrences,
            stats.incomplete.before_start,
            stats.incomplete.watch_gap,
            stats.incomplete.deleted_unread
        );
        return Ok(());
    }
    let lease_duration = Duration::from_secs(args.lease_duration);
    let leader = LeaderElector::new(apiserver.requests(), lease)
        .context("--leader-elect")?
        .spawn();
    eprintln!(
        "export: {identity} waits for the Lease {}/{}",
        args.lease_namespace, args.lease_name
    );
    // A standby's /metrics says so (the gauge exists before the first term).
    metrics::gauge!("kevents_export_leader").set(0.0);
    let (records, occurrences) = (std::cell::Cell::new(0u64), std::cell::Cell::new(0u64));
    let incomplete = std::cell::Cell::new(kevents_export::Incomplete::default());
    // Export while leading (kevents-runtime's lead-or-stand-by loop): losing the Lease ends
    // the term, and the run saves what it delivered within the grace; the next leader
    // continues from there.
    let led = run_while_leading(&leader, stop.wait(), LOST_LEASE_GRACE, |term| {
        let (apiserver, config, mode) = (apiserver.clone(), config.clone(), &mode);
        let identity = identity.clone();
        let (records, occurrences, incomplete) = (&records, &occurrences, &incomplete);
        let stop = &stop;
        async move {
            metrics::counter!("kevents_export_leader_changes_total").increment(1);
            metrics::gauge!("kevents_export_leader").set(1.0);
            eprintln!("export: {identity} leads; exporting from the resume point");
            loop {
                let stats = mode
                    .run(apiserver.clone(), config.clone(), term.lost())
                    .await;
                let stats = match stats {
                    Ok(stats) => stats,
                    // The history's store refused this replica's write: another one wrote
                    // since this term began (this replica was deposed while it could not
                    // tell, e.g. frozen past its Lease). Stand by until the elector agrees;
                    // if it still says this replica leads after a lease duration, begin
                    // again (a term's start fences the other writer).
                    Err(e) if e.is_fenced() => {
                        metrics::counter!("kevents_export_fenced_total").increment(1);
                        eprintln!(
                            "export: {identity} was fenced off the stream ({e}); standing by"
                        );
                        tokio::select! {
                            _ = term.lost() => break,
                            _ = tokio::time::sleep(lease_duration) => continue,
                        }
                    }
                    Err(e) => {
                        metrics::gauge!("kevents_export_leader").set(0.0);
                        return Err(e);
                    }
                };
                records.set(records.get() + stats.records);
                occurrences.set(occurrences.get() + stats.occurrences);
                let (mut sum, add) = (incomplete.get(), stats.incomplete);
                sum.before_start += add.before_start;
                sum.watch_gap += add.watch_gap;
                sum.deleted_unread += add.deleted_unread;
                incomplete.set(sum);
                break;
            }
            metrics::gauge!("kevents_export_leader").set(0.0);
            if !stop.is_set() {
                eprintln!("export: {identity} lost the Lease; standing by");
            }
            Ok::<(), kevents_export::ExportError>(())
        }
    })
    .await;
    if let Err(e) = leader.release().await {
        tracing::warn!("releasing the Lease: {e}");
    }
    match led {
        Ok(_) => {}
        Err(LeadError::Work(e)) => return Err(store_failure(e)),
        Err(e @ LeadError::ElectorEnded(_)) => anyhow::bail!("{e}"),
    }
    let incomplete = incomplete.get();
    eprintln!(
        "export: stopped after {} records, {} occurrences; incomplete: before_start={} watch_gap={} deleted_unread={}",
        records.get(),
        occurrences.get(),
        incomplete.before_start,
        incomplete.watch_gap,
        incomplete.deleted_unread
    );
    Ok(())
}

/// The run's configuration from the options.
fn config_of(args: &ExportArgs) -> ExportConfig {
    ExportConfig {
        api: match args.api {
            WatchApi::Core => kevents_export::Api::CoreV1,
            WatchApi::Events => kevents_export::Api::EventsV1,
        },
        namespaces: args.namespaces.clone(),
        watch_timeout: Duration::from_secs(args.watch_timeout),
        progress: (args.progress > 0).then(|| Duration::from_secs(args.progress)),
        ..ExportConfig::default()
    }
}

/// `--shards N`: every shard here, or, with `--leader-elect`, the shards this replica leads
/// (src/export_shards.rs).
async fn run_sharded(
    args: ExportArgs,
    apiserver: kevents_http::HttpSink,
    config: ExportConfig,
    streams: Vec<(kevents_export::Shard, JetStream)>,
    lease: LeaseConfig,
) -> anyhow::Result<()> {
    let stop = Stop::on_signals();
    let stats = if args.leader_elect {
        eprintln!(
            "export: {} competes for the Leases {}/{}-{{0..{}}}",
            lease.identity,
            lease.namespace,
            lease.name,
            streams.len().saturating_sub(1)
        );
        crate::export_shards::run_elected(apiserver, config, streams, lease, stop.wait()).await?
    } else {
        crate::export_shards::run_all(apiserver, config, streams, stop.wait())
            .await
            .map_err(store_failure)?
    };
    eprintln!(
        "export: stopped after {} records, {} occurrences; incomplete: before_start={} watch_gap={} deleted_unread={}",
        stats.records,
        stats.occurrences,
        stats.incomplete.before_start,
        stats.incomplete.watch_gap,
        stats.incomplete.deleted_unread
    );
    Ok(())
}

/// Where the export delivers: into NATS (the stream is the history and the resume point;
/// OTLP and webhook sinks are fed from it), or straight to one HTTP sink with the resume
/// point in a ConfigMap.
// One value for the whole command: its size does not matter.
#[allow(clippy::large_enum_variant)]
enum Mode {
    Nats {
        js: JetStream,
        feeds: crate::export_feed::Feeds,
    },
    Direct {
        sink: Direct,
        store: ConfigMapResume<kevents_http::HttpSink>,
    },
}

impl Mode {
    /// One run of the export (a term), from the resume point, until `shutdown`.
    async fn run(
        &self,
        apiserver: kevents_http::HttpSink,
        config: ExportConfig,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<ExportStats, ExportError> {
        match self {
            Mode::Nats { js, feeds } => {
                let run = kevents_export::run(apiserver, config, js.clone(), js.clone(), shutdown);
                feeds.alongside(run).await
            }
            Mode::Direct { sink, store } => {
                // The ConfigMap holds a batch's records as pending (900 KiB in all).
                let config = ExportConfig {
                    batch: config.batch.min(32),
                    ..config
                };
                kevents_export::run(apiserver, config, sink.clone(), store.clone(), shutdown).await
            }
        }
    }
}

/// How long a term's export may take, once the Lease is lost, to finish the record being
/// delivered and save its resume point before it is dropped.
const LOST_LEASE_GRACE: Duration = Duration::from_secs(2);

/// SIGTERM or Ctrl-C, seen by every part of the command that waits for it.
struct Stop(tokio::sync::watch::Receiver<bool>);

impl Stop {
    fn on_signals() -> Stop {
        let (tx, rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            terminated().await;
            let _ = tx.send(true);
        });
        Stop(rx)
    }

    fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    async fn wait(&self) {
        let mut rx = self.0.clone();
        // An error means the signal task is gone, which only happens after it sent.
        let _ = rx.wait_for(|stopped| *stopped).await;
    }
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
