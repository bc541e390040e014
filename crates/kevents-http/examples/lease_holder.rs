//! A process that competes for a coordination.k8s.io/v1 Lease and says when it leads:
//! `lease_holder KUBECONFIG NAMESPACE NAME IDENTITY [LEASE_SECS RENEW_SECS RETRY_SECS]`
//! prints `leading IDENTITY` when it becomes leader and `standby IDENTITY` when it stops
//! leading; releases the Lease when its standard input closes (a clean shutdown). The
//! lease test kills it with SIGKILL to play a dead holder.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use kevents_http::{HttpConfig, HttpSink};
use kevents_runtime::lease::{LeaderElector, LeaseConfig};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kubeconfig, namespace, name, identity, rest @ ..] = args.as_slice() else {
        return Err(
            "usage: lease_holder KUBECONFIG NAMESPACE NAME IDENTITY [LEASE RENEW RETRY]".into(),
        );
    };
    let secs = |i: usize, default: u64| -> Result<Duration, Box<dyn std::error::Error>> {
        Ok(Duration::from_secs(match rest.get(i) {
            Some(s) => s.parse()?,
            None => default,
        }))
    };
    let config = LeaseConfig::new(namespace.as_str(), name.as_str(), identity.as_str())
        .with_durations(secs(0, 15)?, secs(1, 10)?, secs(2, 2)?);
    let sink =
        HttpSink::new(HttpConfig::from_kubeconfig(Some(&PathBuf::from(kubeconfig)), None).await?)?;
    let handle = LeaderElector::new(sink.requests(), config)?.spawn();
    let mut changes = handle.changes();
    // Standard input read on a thread of its own; its end is the shutdown signal.
    let (closed_tx, mut closed) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = closed_tx.send(());
    });
    loop {
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    break;
                }
                let leading = *changes.borrow_and_update();
                let mut out = std::io::stdout().lock();
                writeln!(out, "{} {identity}", if leading { "leading" } else { "standby" })?;
                out.flush()?;
            }
            _ = &mut closed => break,
        }
    }
    handle.release().await?;
    println!("released {identity}");
    Ok(())
}
