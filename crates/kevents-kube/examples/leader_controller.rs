//! A kube-rs `Controller` over the ConfigMaps of one namespace that runs only while its
//! process holds a coordination.k8s.io/v1 Lease, over the application's own `kube::Client`
//! (kevents-runtime's elector and lead-or-stand-by loop, through `kevents_kube::leader`).
//!
//! ```sh
//! cargo run -p kevents-kube --example leader_controller -- \
//!     [--kubeconfig FILE] [--namespace NS] [--lease NAME] [--identity ID] [--durations L R P]
//! ```
//!
//! Without `--kubeconfig` the client comes from `kube::Client::try_default()` (`KUBECONFIG`,
//! `~/.kube/config` or in-cluster). It prints `leading ID` when it starts to lead,
//! `reconciled ID NAME` for each reconcile, `standby ID` when it stops leading, and, when its
//! standard input closes (or on SIGTERM/Ctrl-C), releases the Lease and prints
//! `released ID`. `tests/leader_election.rs` runs two of them against a real kube-apiserver
//! and kills the holder with SIGKILL.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kevents_kube::KubeSink;
use kevents_kube::leader::{LeaderElector, LeaseConfig, run_while_leading};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

/// The reconciler's error (it has none of its own).
#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

struct Args {
    kubeconfig: Option<PathBuf>,
    namespace: String,
    lease: String,
    identity: String,
    durations: [u64; 3],
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        kubeconfig: None,
        namespace: "default".into(),
        lease: "leader-controller".into(),
        identity: format!(
            "{}_{}",
            kevents_core::events_v1::hostname(),
            std::process::id()
        ),
        durations: [15, 10, 2],
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--kubeconfig" => a.kubeconfig = Some(value()?.into()),
            "--namespace" => a.namespace = value()?,
            "--lease" => a.lease = value()?,
            "--identity" => a.identity = value()?,
            "--durations" => {
                for d in &mut a.durations {
                    *d = value()?.parse().map_err(|e| format!("--durations: {e}"))?;
                }
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(a)
}

async fn client(kubeconfig: Option<&PathBuf>) -> Result<Client, Box<dyn std::error::Error>> {
    let Some(path) = kubeconfig else {
        return Ok(Client::try_default().await?);
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    Ok(Client::try_from(config)?)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("leader_controller: {e}");
            std::process::exit(2);
        }
    };
    let client = client(args.kubeconfig.as_ref()).await?;
    let [lease, renew, retry] = args.durations.map(Duration::from_secs);
    let config = LeaseConfig::new(&args.namespace, &args.lease, &args.identity)
        .with_durations(lease, renew, retry);
    // The controller's own client carries the Lease's requests too.
    let handle = LeaderElector::new(KubeSink::new(client.clone()).requests(), config)?.spawn();

    // Standard input read on a thread of its own; its end (or a signal) is the shutdown.
    let (closed_tx, closed) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = closed_tx.send(());
    });
    let shutdown = async {
        tokio::select! {
            _ = closed => {}
            _ = kevents_kube::terminated() => {}
        }
    };

    let identity = args.identity.clone();
    let configmaps: Api<ConfigMap> = Api::namespaced(client, &args.namespace);
    let terms = run_while_leading(&handle, shutdown, Duration::from_secs(1), |term| {
        let (configmaps, identity) = (configmaps.clone(), identity.clone());
        async move {
            say(format!("leading {identity}"));
            let who = Arc::new(identity.clone());
            let controller = Controller::new(configmaps, watcher::Config::default())
                .run(
                    |cm: Arc<ConfigMap>, who: Arc<Arc<String>>| async move {
                        say(format!("reconciled {} {}", who, cm.name_any()));
                        Ok::<_, Never>(Action::requeue(Duration::from_secs(300)))
                    },
                    |_, _, _| Action::requeue(Duration::from_secs(5)),
                    Arc::new(who),
                )
                .for_each(|_| async {});
            // The controller runs until the term ends (run_while_leading also drops it then).
            tokio::select! {
                _ = controller => {}
                _ = term.lost() => {}
            }
            say(format!("standby {identity}"));
            Ok::<(), Never>(())
        }
    })
    .await;
    handle.release().await?;
    say(format!("released {}", args.identity));
    let terms = terms?;
    eprintln!(
        "leader_controller: led {} times, lost the Lease {} times",
        terms.led, terms.lost
    );
    Ok(())
}
