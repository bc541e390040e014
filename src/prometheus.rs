//! Serving the pipeline's metrics to Prometheus (feature `prometheus`).
//!
//! kevents counts through the [`metrics`](https://docs.rs/metrics) facade (every metric is in
//! `docs/metrics.md` and in [`StatsSnapshot`](crate::actors::StatsSnapshot)). [`install`] makes a
//! `metrics-exporter-prometheus` recorder the process's global recorder, describes every
//! kevents metric to it and serves the Prometheus text format over HTTP on an address of
//! your choice, from a thread of its own (it works the same from `actix::main`,
//! `tokio::main` or a plain `main`).
//!
//! Install it **before** building a pipeline: a pipeline takes its metric handles from the
//! recorder installed at the time it is built.
//!
//! ```no_run
//! use kevents::{EventSource, Pipeline, SinkOptions};
//! # use kevents_sim::MemoryApiServer;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Every path but `/health` answers with the metrics, `/metrics` included.
//! let metrics = kevents::prometheus::install(([0, 0, 0, 0], 9090).into())?;
//! actix::System::new().block_on(async {
//!     # let api = MemoryApiServer::new();
//!     let pipeline = Pipeline::builder(EventSource::new("my-controller", "node-1"))
//!         .sink("api", api, SinkOptions::default())
//!         .start();
//!     // ... record events ...
//!     pipeline.shutdown(std::time::Duration::from_secs(5)).await;
//! });
//! // The same text the endpoint serves, e.g. for a handler of your own web server.
//! print!("{}", metrics.render());
//! # Ok(()) }
//! ```

use std::net::SocketAddr;

pub use metrics_exporter_prometheus::PrometheusHandle;
use metrics_exporter_prometheus::{BuildError, PrometheusBuilder};

/// Why [`install`] failed.
#[derive(Debug, thiserror::Error)]
pub enum PrometheusError {
    /// The exporter could not be built (the address could not be bound, ...) or another
    /// `metrics` recorder is already installed.
    #[error("Prometheus exporter: {0}")]
    Build(#[from] BuildError),
    /// The exporter's thread or its runtime could not be started.
    #[error("starting the Prometheus exporter thread: {0}")]
    Thread(#[from] std::io::Error),
    /// The exporter's thread ended before reporting whether it started.
    #[error("the Prometheus exporter thread ended before it started serving")]
    ThreadEnded,
}

/// Installs a Prometheus recorder as the process's global `metrics` recorder, describes every
/// kevents metric to it ([`describe_metrics`](crate::actors::describe_metrics)) and serves the text
/// exposition format over HTTP on `addr` (every path but `/health`, so `/metrics` too) from
/// a thread named `kevents-prometheus`. Returns the recorder's handle: its `render()` gives
/// the same text, for serving it from your own web server instead.
///
/// Call it once per process, before building a pipeline. Metrics with the same name and
/// labels from several pipelines (for instance two pipelines with a sink named `api`) are
/// summed.
///
/// # Errors
///
/// [`PrometheusError::Build`] if `addr` cannot be bound or a `metrics` recorder is already
/// installed; [`PrometheusError::Thread`] if the thread or its runtime cannot be started.
///
/// ```no_run
/// let handle = kevents::prometheus::install(([127, 0, 0, 1], 9090).into())?;
/// // ... build pipelines; `curl http://127.0.0.1:9090/metrics` shows their metrics ...
/// let text: String = handle.render();
/// # let _ = text;
/// # Ok::<(), kevents::prometheus::PrometheusError>(())
/// ```
pub fn install(addr: SocketAddr) -> Result<PrometheusHandle, PrometheusError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("kevents-prometheus".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Err(PrometheusError::Thread(e)));
                    return;
                }
            };
            // `build` binds the listener and spawns the exporter's upkeep task: it needs
            // the runtime's context.
            let built = {
                let _guard = runtime.enter();
                PrometheusBuilder::new().with_http_listener(addr).build()
            };
            let (recorder, exporter) = match built {
                Ok(b) => b,
                Err(e) => {
                    let _ = tx.send(Err(e.into()));
                    return;
                }
            };
            let handle = recorder.handle();
            if let Err(e) = metrics::set_global_recorder(recorder) {
                let _ = tx.send(Err(BuildError::from(e).into()));
                return;
            }
            if tx.send(Ok(handle)).is_err() {
                return;
            }
            if let Err(e) = runtime.block_on(exporter) {
                tracing::error!(error = ?e, "the Prometheus exporter stopped");
            }
        })?;
    let handle = rx.recv().map_err(|_| PrometheusError::ThreadEnded)??;
    kevents_actors::describe_metrics();
    Ok(handle)
}
