//! `kevents export --shards 8 --leader-elect` on a real kube-apiserver (v1.20.2: the export
//! filters every event itself; v1.37 started with the `ShardedListAndWatch` feature gate: the
//! apiserver filters by the KEP-5866 `shardSelector`) and a real nats-server: three replicas,
//! an external writer raising counts for about 40 s, one replica killed with SIGKILL and
//! another frozen with SIGSTOP past its Leases and thawed. Afterwards, read back: every shard
//! stream's records are its shard's, every event's deltas sum to its stored count, no
//! `(uid, count)` twice, and every shard the killed replica led was led again within the
//! lease duration plus one retry period of the kill (the Leases' holders and acquireTimes).

mod common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kevents_core::request::{APPLICATION_JSON, Method, STRATEGIC_MERGE_PATCH};
use kevents_core::{Clock, SystemClock, Time};
use kevents_export::{ExportRecord, JetStream, JetStreamConfig, Shard};
use kevents_http::{HttpConfig, HttpSink};
use kevents_testkit::nats::NatsServer;
use serde_json::{Value, json};

const SHARDS: u32 = 8;
const EVENTS: usize = 40;
/// The replicas' Lease durations: lease 6 s, renew deadline 4 s, retry period 1 s.
const LEASE: Duration = Duration::from_secs(6);
const RETRY: Duration = Duration::from_secs(1);

async fn admin_sink(server: &kevents_testkit::RealApiserver) -> HttpSink {
    HttpSink::new(
        HttpConfig::from_kubeconfig(Some(&server.admin_kubeconfig), None)
            .await
            .expect("config"),
    )
    .expect("sink")
}

/// Creates `EVENTS` core/v1 events in `default` (count 1); their names.
async fn seed(sink: &HttpSink) -> Vec<String> {
    let mut names = Vec::new();
    for i in 0..EVENTS {
        let name = format!("shard-ext-{i}");
        let now = SystemClock.now().to_rfc3339();
        let body = json!({"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "namespace": "default", "name": format!("pod-{i}")},
            "reason": "External", "message": "from the writer", "type": "Normal", "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": "external-writer"}});
        kevents_testkit::send_json(
            sink,
            Method::Post,
            "/api/v1/namespaces/default/events".into(),
            APPLICATION_JSON,
            &body,
        )
        .await;
        names.push(name);
    }
    names
}

/// Raises every event's count by 1..=3 (`counts` by name).
async fn raise(sink: &HttpSink, counts: &mut HashMap<String, u64>, round: u64) {
    let names: Vec<String> = counts.keys().cloned().collect();
    for (i, name) in names.into_iter().enumerate() {
        let count = counts[&name] + (i as u64 + round) % 3 + 1;
        let body = json!({"count": count, "lastTimestamp": SystemClock.now().to_rfc3339()});
        kevents_testkit::send_json(
            sink,
            Method::Patch,
            format!("/api/v1/namespaces/default/events/{name}"),
            STRATEGIC_MERGE_PATCH,
            &body,
        )
        .await;
        counts.insert(name, count);
    }
}

/// uid -> count of every stored event of `default`, read back from the apiserver.
async fn stored(sink: &HttpSink) -> HashMap<String, u64> {
    let body = sink
        .requests()
        .get("/api/v1/namespaces/default/events", 64 << 20)
        .await
        .expect("listing events");
    let list: Value = serde_json::from_slice(&body).expect("a list");
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| {
            let r = ExportRecord::from_object(kevents_export::Api::CoreV1, item).expect("uid");
            (r.uid, r.count)
        })
        .collect()
}

/// Every shard stream's records: (shard, subject, record).
async fn read_shards(nats: &str) -> Vec<(Shard, String, ExportRecord)> {
    let client = kevents_export::async_nats::connect(nats)
        .await
        .expect("NATS");
    let mut out = Vec::new();
    for shard in Shard::all(SHARDS).expect("shards") {
        let name = shard.stream("export");
        let js = JetStream::open(client.clone(), JetStreamConfig::new(&name))
            .await
            .expect("stream");
        for (subject, r) in kevents_export::jetstream::read_all(js.context(), &name)
            .await
            .expect("reading a shard stream")
        {
            out.push((shard, subject, r));
        }
    }
    out
}

fn check(
    records: &[(Shard, String, ExportRecord)],
    stored: &HashMap<String, u64>,
) -> Result<(), String> {
    let mut seen = HashSet::new();
    let mut sums: HashMap<&str, u64> = HashMap::new();
    for (shard, subject, r) in records {
        if !seen.insert((r.uid.clone(), r.count)) {
            return Err(format!("({}, {}) appears twice", r.uid, r.count));
        }
        if !shard.owns(&r.uid) {
            return Err(format!("{} in shard {shard}'s stream, not its own", r.uid));
        }
        if subject != &format!("{}.{}.{}", shard.stream("export"), r.namespace, r.uid) {
            return Err(format!("{} on subject {subject}", r.uid));
        }
        *sums.entry(&r.uid).or_default() += r.delta;
    }
    for (uid, count) in stored {
        let sum = sums.get(uid.as_str()).copied().unwrap_or(0);
        if sum != *count {
            return Err(format!("{uid}: deltas sum to {sum}, count is {count}"));
        }
    }
    Ok(())
}

/// A shard Lease as read: holder, acquireTime.
async fn shard_leases(sink: &HttpSink) -> Vec<(String, Option<Time>)> {
    let mut out = Vec::new();
    for shard in Shard::all(SHARDS).expect("shards") {
        let path = format!(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/{}",
            shard.lease("shards")
        );
        let lease: Value = match sink.requests().get(&path, 1 << 20).await {
            Ok(body) => serde_json::from_slice(&body).expect("a Lease"),
            Err(_) => Value::Null,
        };
        let holder = lease["spec"]["holderIdentity"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        let acquired = lease["spec"]["acquireTime"]
            .as_str()
            .and_then(|t| Time::parse_rfc3339(t).ok());
        out.push((holder, acquired));
    }
    out
}

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig)
        .unwrap_or_else(|e| panic!("{sig}: {e}"));
}

fn replica(kubeconfig: &Path, nats: &str, log: &Path, id: &str) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    Command::new(env!("CARGO_BIN_EXE_kevents"))
        .arg("export")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--namespace",
            "default",
            "--nats",
            nats,
            "--stream",
            "export",
        ])
        .args([
            "--shards",
            &SHARDS.to_string(),
            "--leader-elect",
            "--lease-name",
            "shards",
        ])
        .args(["--identity", id, "--progress", "0"])
        .args(["--lease-duration", &LEASE.as_secs().to_string()])
        .args([
            "--renew-deadline",
            "4",
            "--retry-period",
            &RETRY.as_secs().to_string(),
        ])
        // The shards' filter (by the apiserver or here) is said at info.
        .env("RUST_LOG", "warn,kevents_export::watcher=info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("running kevents export")
}

/// The apiserver of this run: v1.36 and later with the ShardedListAndWatch feature gate.
fn start_apiserver() -> (kevents_testkit::RealApiserver, bool) {
    let gated = std::env::var("KEVENTS_K8S_VERSION")
        .is_ok_and(|v| v.starts_with("1.36") || v.starts_with("1.37"));
    let server = if gated {
        kevents_testkit::RealApiserver::start_with_args(&[
            "--feature-gates=ShardedListAndWatch=true",
        ])
    } else {
        kevents_testkit::RealApiserver::start()
    };
    (
        server
            .expect("starting kube-apiserver")
            .expect("kube-apiserver is provisioned"),
        gated,
    )
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn three_sharded_replicas_stay_exact_through_sigkill_and_sigstop() {
        let (server, gated) = start_apiserver();
        let nats = NatsServer::start().unwrap_or_else(|e| panic!("starting nats-server: {e}"));
        let nats_url = nats.url();
        let logdir = tempfile::tempdir().expect("temporary directory");
        let log = logdir.path().join("export.log");
        let rt = tokio::runtime::Runtime::new().expect("runtime");
        rt.block_on(async {
            let sink = admin_sink(&server).await;
            let names = seed(&sink).await;
            let mut counts: HashMap<String, u64> = names.into_iter().map(|n| (n, 1)).collect();
            let (changes, poller) = watch_leases(sink.clone());
            let mut replicas: HashMap<String, Child> = HashMap::new();
            for id in ["ra", "rb", "rc"] {
                replicas.insert(id.into(), replica(&server.admin_kubeconfig, &nats_url, &log, id));
            }
            let started = Instant::now();
            let mut round = 0u64;
            // (who, when) of the kill, the shards it led then.
            let mut killed: Option<(String, Time, Vec<usize>)> = None;
            let mut stopped: Option<(String, Instant, Vec<usize>)> = None;
            let mut thawed = false;
            let mut seen_at: Option<usize> = None;
            let mut taken_from_stopped = false;
            // 40 s, and on until the frozen replica was thawed (a loaded machine makes rounds slow).
            while started.elapsed() < Duration::from_secs(40) || (stopped.is_some() && !thawed) {
                round += 1;
                raise(&sink, &mut counts, round).await;
                let leases = shard_leases(&sink).await;
                if killed.is_none() && started.elapsed() > Duration::from_secs(12) {
                    // The replica leading the most shards dies without a word.
                    let mut led: HashMap<&str, usize> = HashMap::new();
                    for (h, _) in &leases {
                        *led.entry(h.as_str()).or_default() += 1;
                    }
                    let (victim, _) = led
                        .iter()
                        .filter(|(h, _)| replicas.contains_key(**h))
                        .max_by_key(|(_, n)| **n)
                        .expect("a replica leads");
                    let victim = victim.to_string();
                    let child = replicas.get(&victim).expect("ours");
                    signal(child, nix::sys::signal::Signal::SIGKILL);
                    let at = SystemClock.now();
                    let shards = leases.iter().enumerate().filter(|(_, (h, _))| *h == victim).map(|(i, _)| i).collect();
                    let mut child = replicas.remove(&victim).expect("ours");
                    let _ = child.wait();
                    killed = Some((victim, at, shards));
                } else if stopped.is_none() && started.elapsed() > Duration::from_secs(22) {
                    // Another one is frozen past its Leases.
                    let victim = leases
                        .iter()
                        .map(|(h, _)| h.clone())
                        .find(|h| replicas.contains_key(h))
                        .expect("a live replica leads");
                    signal(&replicas[&victim], nix::sys::signal::Signal::SIGSTOP);
                    let shards = leases.iter().enumerate().filter(|(_, (h, _))| *h == victim).map(|(i, _)| i).collect();
                    stopped = Some((victim, Instant::now(), shards));
                    seen_at = Some(changes.lock().expect("changes").len());
                } else if let Some((victim, at, shards)) = &stopped
                    && !thawed
                    && at.elapsed() > LEASE + Duration::from_secs(3)
                {
                    {
                        // Its shards were taken over while it was frozen (the Lease poller saw
                        // each change holder since the freeze).
                        let seen = changes.lock().expect("changes");
                        let since = seen_at.unwrap_or(0);
                        taken_from_stopped = shards.iter().all(|i| {
                            seen[since..].iter().any(|(s, h, _)| s == i && !h.is_empty() && h != victim)
                        });
                        drop(seen);
                        signal(&replicas[victim], nix::sys::signal::Signal::SIGCONT);
                        thawed = true;
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let text = || std::fs::read_to_string(&log).unwrap_or_default();
            assert!(thawed && taken_from_stopped, "the frozen replica's shards were not taken over\n{}", text());
            // The history: every shard's stream converges to the stored counts.
            let deadline = Instant::now() + Duration::from_secs(60);
            let records = loop {
                let records = read_shards(&nats_url).await;
                match check(&records, &stored(&sink).await) {
                    Ok(()) => break records,
                    Err(e) if Instant::now() > deadline => panic!("{e}\n{}", text()),
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            };
            // The writer's rounds depend on the machine's load (about 10 to 40 in 40 s).
            assert!(round >= 5, "only {round} rounds of raises");
            assert!(records.len() >= 2 * EVENTS, "{} records", records.len());
            // Every shard that owns a stored event holds its records (40 random uids can leave
            // a shard of 8 empty: about 4 % of runs).
            let used: HashSet<Shard> = records.iter().map(|(s, _, _)| *s).collect();
            let owning: HashSet<Shard> = stored(&sink)
                .await
                .keys()
                .filter_map(|uid| Shard::all(SHARDS).expect("shards").into_iter().find(|s| s.owns(uid)))
                .collect();
            assert_eq!(used, owning, "the shards holding records");
            assert!(used.len() >= 5, "{} shards hold records", used.len());
            // `kevents history` finds the shard streams and reads them all: each event's
            // occurrences in the window (the last hour: all of them) are its stored count.
            let stored_now = stored(&sink).await;
            let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
                .args(["history", "--nats", &nats_url, "--stream", "export", "-n", "default"])
                .args(["--since", "1h", "-o", "json"])
                .output()
                .expect("running kevents history");
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            let mut listed = HashMap::new();
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let e: Value = serde_json::from_str(line).expect("a JSON line");
                listed.insert(
                    e["uid"].as_str().expect("uid").to_owned(),
                    e["occurrences"].as_u64().expect("occurrences"),
                );
            }
            assert_eq!(listed, stored_now, "kevents history over the shard streams");
            // The killed replica's shards were led again, each by a live replica, within the
            // lease duration plus one retry period of the kill (the acquireTime written by
            // the new holder; the test and the replicas share this machine's clock).
            let (victim, at, shards) = killed.expect("a replica was killed");
            assert!(!shards.is_empty(), "the killed replica led no shard");
            poller.abort();
            let takeovers = taken_over(&changes, &victim, &shards, at);
            let bound = LEASE + RETRY;
            for (i, after) in &takeovers {
                assert!(
                    *after <= bound,
                    "shard {i} led again {after:?} after the kill (bound {bound:?})\n{}",
                    text()
                );
            }
            eprintln!("takeovers after the kill: {takeovers:?}");
            // The apiserver filtered where it serves sharded list and watch, and not elsewhere.
            let log_text = text();
            if gated {
                assert!(log_text.contains("the apiserver filters the list and watch"), "{log_text}");
            } else {
                assert!(log_text.contains("did not echo the shardSelector"), "{log_text}");
            }
            // Every shard is led at the end, by a live replica (a shard given up to balance
            // is free until the next try of a replica under its share: waited for, up to two
            // lease durations).
            let deadline = Instant::now() + 2 * LEASE;
            loop {
                let leases = shard_leases(&sink).await;
                let unled: Vec<_> = leases
                    .iter()
                    .enumerate()
                    .filter(|(_, (h, _))| !replicas.contains_key(h))
                    .collect();
                if unled.is_empty() {
                    break;
                }
                assert!(Instant::now() < deadline, "shards not led by a live replica: {unled:?}\n{}", text());
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            // Another N (or none) on these streams is refused, nothing written: exit 2.
            for shards in [&["--shards", "4"][..], &[]] {
                let out = Command::new(env!("CARGO_BIN_EXE_kevents"))
                    .arg("export")
                    .arg("--kubeconfig")
                    .arg(&server.admin_kubeconfig)
                    .args(["--namespace", "default", "--nats", &nats_url, "--stream", "export"])
                    .args(shards)
                    .output()
                    .expect("running kevents export");
                let err = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(2), "{shards:?}: {err}");
                assert!(err.contains("was written with --shards 8"), "{err}");
            }
            for (_, mut child) in replicas {
                signal(&child, nix::sys::signal::Signal::SIGTERM);
                let status = child.wait().expect("waiting for export");
                assert!(status.success(), "export after SIGTERM: {status}\n{log_text}");
            }
        });
    }
}

/// The shard Leases' holders as they change, read every 100 ms by a task of its own:
/// (shard, holder, acquireTime) in the order seen.
type Changes = std::sync::Arc<std::sync::Mutex<Vec<(usize, String, Option<Time>)>>>;

fn watch_leases(sink: HttpSink) -> (Changes, tokio::task::JoinHandle<()>) {
    let changes: Changes = Default::default();
    let out = changes.clone();
    let task = tokio::spawn(async move {
        let mut last: Vec<String> = vec![String::new(); SHARDS as usize];
        loop {
            for (i, (holder, acquired)) in shard_leases(&sink).await.into_iter().enumerate() {
                if holder != last[i] {
                    last[i] = holder.clone();
                    out.lock().expect("changes").push((i, holder, acquired));
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    (changes, task)
}

/// For each of `shards` (led by `victim` when it was killed at `at`): how long after the kill
/// the first other replica acquired its Lease (the acquireTime it wrote; the replicas and
/// the test share this machine's clock).
fn taken_over(
    changes: &Changes,
    victim: &str,
    shards: &[usize],
    at: Time,
) -> Vec<(usize, Duration)> {
    let changes = changes.lock().expect("changes");
    shards
        .iter()
        .map(|i| {
            let acquired = changes
                .iter()
                .filter(|(s, h, _)| s == i && !h.is_empty() && h != victim)
                .filter_map(|(_, _, t)| *t)
                .find(|t| *t > at)
                .unwrap_or_else(|| {
                    panic!("shard {i} was not taken over after the kill: {changes:?}")
                });
            (
                *i,
                Duration::from_nanos(acquired.nanos_since(at).max(0) as u64),
            )
        })
        .collect()
}
