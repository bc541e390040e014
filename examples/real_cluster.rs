//! Records a few events to a real cluster: kubeconfig -> `HttpSink` -> pipeline -> events ->
//! shutdown report -> the events read back.
//!
//! ```sh
//! cargo run --example real_cluster -- --kubeconfig ~/.kube/config [--context C] [--namespace NS]
//! KUBECONFIG=/path/to/kubeconfig cargo run --example real_cluster   # or ~/.kube/config, or in-cluster
//! ```
//!
//! The namespace (default: the context's) must exist. The events are about a Pod `kevents-example`
//! that need not exist; `kubectl get events -n NS` shows them.

use std::path::PathBuf;
use std::time::Duration;

use kevents::http::{HttpConfig, HttpSink};
use kevents::{EventSource, EventType, ObjectReference, Pipeline, SinkOptions, eventf};

/// Command-line options (parsed by hand: the example has no CLI dependency).
#[derive(Debug, Default)]
struct Options {
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
    namespace: Option<String>,
}

fn parse() -> Result<Options, String> {
    let mut o = Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--kubeconfig" => o.kubeconfig = Some(PathBuf::from(value("--kubeconfig")?)),
            "--context" => o.context = Some(value("--context")?),
            "--namespace" | "-n" => o.namespace = Some(value("--namespace")?),
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: real_cluster [--kubeconfig FILE] [--context C] [--namespace NS]"
                ));
            }
        }
    }
    Ok(o)
}

#[actix::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = parse()?;
    let config = match (&options.kubeconfig, &options.context) {
        (None, None) => HttpConfig::infer().await?,
        (path, context) => HttpConfig::from_kubeconfig(path.as_deref(), context.as_deref()).await?,
    };
    let namespace = options
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let sink = HttpSink::new(config)?;
    println!(
        "apiserver {} ({}), namespace {namespace}",
        sink.base_url(),
        sink.server_version()
            .await
            .map(|v| v.git_version)
            .unwrap_or_else(|e| format!("version unknown: {e}"))
    );

    let pipeline = Pipeline::builder(EventSource::new("kevents-example", "laptop"))
        .sink("apiserver", sink.clone(), SinkOptions::default())
        .start();
    let recorder = pipeline.recorder();
    let pod = ObjectReference::new("v1", "Pod", &namespace, "kevents-example");
    recorder.event(
        &pod,
        EventType::Normal,
        "Scheduled",
        "Successfully assigned to laptop",
    )?;
    for attempt in 1..=3 {
        eventf!(
            recorder,
            &pod,
            EventType::Warning,
            "BackOff",
            "Back-off restarting failed container (attempt {})",
            attempt
        )?;
    }
    let report = pipeline.shutdown(Duration::from_secs(30)).await;
    let s = &report.stats.sinks[0];
    println!(
        "shutdown: completed {}, created {}, patched {}, spam-filtered {}, failed {} (rejected {}, retry budget {}, abandoned {})",
        report.completed,
        s.created,
        s.patched,
        s.spam_filtered,
        s.failed(),
        s.rejected,
        s.retry_exhausted,
        s.abandoned
    );
    for e in sink.requests().list_events(&namespace).await? {
        if e.involved_object.name == "kevents-example" {
            println!(
                "  {:<8} {:<10} x{:<3} {}",
                e.type_, e.reason, e.count, e.message
            );
        }
    }
    Ok(())
}
