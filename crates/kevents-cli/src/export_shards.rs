//! `kevents export --shards N`: the events split into N shards by their uid's FNV-1a hash
//! (kevents-export's [`Shard`]), each exported by its own run into its own stream
//! `{stream}-{i}of{N}` (its own resume point and fence). Without `--leader-elect` this
//! process runs every shard. With it, each shard is led through its own Lease
//! `{lease-name}-{i}` (client-go's semantics, kevents-runtime's elector), and the replicas
//! share the shards: each holds one membership Lease `{lease-name}-member-{j}` (j < N), counts
//! the live members M, and leads at most ceil(N / M) shards, releasing the extras (the Lease
//! written with no holder, as client-go's release) so that the others take them at their
//! next try. A shard whose Lease is lost stops its run at once; a late write of a deposed
//! holder is refused by the shard stream's fence. docs/export.md, "Shards", says why.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kevents_core::request::{Client, Method};
use kevents_export::{
    ExportConfig, ExportError, ExportRecord, ExportStats, JetStream, JetStreamConfig, RecordSink,
    Shard,
};
use kevents_http::HttpSink;

use crate::cluster::{Failure, FailureKind};
use kevents_runtime::lease::{LeaderElector, LeaderHandle, LeaseConfig, LeaseError};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A shard's stream, opened (created if missing) after the layout was checked: the streams
/// of an export must all have been made with the same N ([`kevents_export::shard::check_layout`]).
pub(crate) async fn open_streams(
    nats: &kevents_export::async_nats::Client,
    base: &JetStreamConfig,
    count: u32,
) -> Result<Vec<(Shard, JetStream)>, ExportError> {
    let context = kevents_export::async_nats::jetstream::new(nats.clone());
    kevents_export::shard::check_layout(&context, &base.stream, Some(count)).await?;
    let mut out = Vec::new();
    for shard in Shard::all(count)? {
        let mut config = JetStreamConfig::new(&shard.stream(&base.stream));
        config.replicas = base.replicas;
        config.identity = base.identity.clone();
        config.validate()?;
        out.push((shard, JetStream::open(nats.clone(), config).await?));
    }
    Ok(out)
}

/// The shard's stream as a sink that also counts its records per shard
/// (`kevents_export_shard_records_total{shard}`).
#[derive(Clone)]
struct Counted {
    js: JetStream,
    shard: String,
}

impl RecordSink for Counted {
    async fn deliver(&mut self, record: &ExportRecord) -> Result<(), ExportError> {
        self.js.deliver(record).await?;
        metrics::counter!("kevents_export_shard_records_total", "shard" => self.shard.clone())
            .increment(1);
        Ok(())
    }
}

/// One run of `shard` from its resume point until `shutdown`.
async fn run_shard(
    apiserver: HttpSink,
    mut config: ExportConfig,
    shard: Shard,
    js: JetStream,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<ExportStats, ExportError> {
    config.shard = Some(shard);
    let sink = Counted {
        js: js.clone(),
        shard: shard.index().to_string(),
    };
    kevents_export::run(apiserver, config, sink, js, shutdown).await
}

/// Registers the per-shard families at zero for every shard.
fn register(count: u32) {
    for i in 0..count {
        let shard = i.to_string();
        metrics::counter!("kevents_export_shard_records_total", "shard" => shard.clone())
            .absolute(0);
        metrics::gauge!("kevents_export_shard_led", "shard" => shard).set(0.0);
    }
    metrics::gauge!("kevents_export_shards_led").set(0.0);
}

/// Without `--leader-elect`: every shard in this process, each its own run, until `stop`.
pub(crate) async fn run_all(
    apiserver: HttpSink,
    config: ExportConfig,
    streams: Vec<(Shard, JetStream)>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<ExportStats, ExportError> {
    register(streams.len() as u32);
    let (tx, rx) = watch::channel(false);
    metrics::gauge!("kevents_export_shards_led").set(streams.len() as f64);
    let runs: Vec<JoinHandle<Result<ExportStats, ExportError>>> = streams
        .into_iter()
        .map(|(shard, js)| {
            metrics::gauge!("kevents_export_shard_led", "shard" => shard.index().to_string())
                .set(1.0);
            let mut rx = rx.clone();
            tokio::task::spawn_local(run_shard(
                apiserver.clone(),
                config.clone(),
                shard,
                js,
                async move {
                    let _ = rx.wait_for(|s| *s).await;
                },
            ))
        })
        .collect();
    // Until stopped, or until a run ends (its store failed): then the others stop too.
    let any_done = async {
        while !runs.iter().any(|r| r.is_finished()) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::select! {
        () = stop => {}
        () = any_done => {}
    }
    let _ = tx.send(true);
    let mut results = Vec::new();
    for run in runs {
        results.push(
            run.await
                .map_err(|e| ExportError::Sink(format!("a shard's run: {e}")))?,
        );
    }
    let mut total = ExportStats::default();
    for stats in results {
        add(&mut total, &stats?);
    }
    Ok(total)
}

fn add(total: &mut ExportStats, stats: &ExportStats) {
    total.records += stats.records;
    total.occurrences += stats.occurrences;
    total.incomplete.before_start += stats.incomplete.before_start;
    total.incomplete.watch_gap += stats.incomplete.watch_gap;
    total.incomplete.deleted_unread += stats.incomplete.deleted_unread;
}

/// The Lease's path.
fn lease_path(namespace: &str, name: &str) -> String {
    format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
}

/// What a membership slot's Lease said when last read, and when that last changed.
struct Seen {
    holder: String,
    renewed: String,
    changed: Instant,
}

/// This replica's membership: one slot Lease `{lease}-member-{j}` held (client-go's
/// election on it), and the slots' holders as read every retry period; a slot is live while
/// its record changes within its lease duration (observed here, as client-go judges expiry:
/// no clock is compared across machines).
struct Members {
    client: Client<HttpSink>,
    template: LeaseConfig,
    slots: usize,
    electors: Vec<Option<LeaderElector<HttpSink>>>,
    mine: Option<usize>,
    /// When this replica's slot was last renewed.
    renewed: Instant,
    seen: Vec<Option<Seen>>,
}

impl Members {
    fn new(client: Client<HttpSink>, template: LeaseConfig, slots: usize) -> Self {
        Members {
            client,
            template,
            slots,
            electors: (0..slots).map(|_| None).collect(),
            mine: None,
            renewed: Instant::now(),
            seen: (0..slots).map(|_| None).collect(),
        }
    }

    fn slot_name(&self, j: usize) -> String {
        format!("{}-member-{j}", self.template.name)
    }

    fn elector(&mut self, j: usize) -> Result<&mut LeaderElector<HttpSink>, LeaseError> {
        if self.electors[j].is_none() {
            let config = LeaseConfig {
                name: self.slot_name(j),
                ..self.template.clone()
            };
            self.electors[j] = Some(LeaderElector::new(self.client.clone(), config)?);
        }
        match self.electors[j].as_mut() {
            Some(e) => Ok(e),
            None => Err(LeaseError::EmptyIdentity),
        }
    }

    /// Reads every slot, renews this replica's (or takes a free one); the live members.
    async fn refresh(&mut self) -> usize {
        let now = Instant::now();
        for j in 0..self.slots {
            let path = lease_path(&self.template.namespace, &self.slot_name(j));
            let read = self
                .client
                .send(Method::Get, path, None, Vec::new(), 1 << 20)
                .await;
            let (holder, renewed) = match read {
                Ok(r) if r.code == 404 => (String::new(), String::new()),
                Ok(r) if (200..300).contains(&r.code) => {
                    let lease: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
                    let s = |k: &str| lease["spec"][k].as_str().unwrap_or_default().to_owned();
                    (s("holderIdentity"), s("renewTime"))
                }
                // Unreadable now: judged by what was read before.
                _ => continue,
            };
            let slot = &mut self.seen[j];
            if slot
                .as_ref()
                .is_none_or(|s| s.holder != holder || s.renewed != renewed)
            {
                *slot = Some(Seen {
                    holder,
                    renewed,
                    changed: now,
                });
            }
        }
        let deadline = self.template.renew_deadline;
        if let Some(j) = self.mine {
            let renewal = match self.elector(j) {
                Ok(e) => tokio::time::timeout(deadline, e.try_acquire_or_renew())
                    .await
                    .unwrap_or(Err(LeaseError::Deadline(deadline))),
                Err(e) => Err(e),
            };
            match renewal {
                Ok(()) => self.renewed = Instant::now(),
                Err(e) => {
                    tracing::debug!(error = %e, slot = j, "membership not renewed");
                    if matches!(e, LeaseError::HeldByOther { .. })
                        || self.renewed.elapsed() > deadline
                    {
                        tracing::warn!(slot = j, error = %e, "membership Lease lost");
                        self.mine = None;
                    }
                }
            }
        }
        if self.mine.is_none() {
            let free: Vec<usize> = (0..self.slots).filter(|j| !self.live(*j)).collect();
            for j in free {
                let attempt = match self.elector(j) {
                    Ok(e) => tokio::time::timeout(deadline, e.try_acquire_or_renew())
                        .await
                        .unwrap_or(Err(LeaseError::Deadline(deadline))),
                    Err(e) => Err(e),
                };
                if attempt.is_ok() {
                    tracing::info!(slot = j, "membership Lease taken");
                    self.mine = Some(j);
                    self.renewed = Instant::now();
                    break;
                }
            }
        }
        (0..self.slots)
            .filter(|j| self.live(*j) || self.mine == Some(*j))
            .count()
    }

    fn live(&self, j: usize) -> bool {
        self.seen[j].as_ref().is_some_and(|s| {
            !s.holder.is_empty()
                && (s.holder == self.template.identity
                    || s.changed.elapsed() < self.template.lease_duration)
        })
    }

    async fn release(&mut self) {
        if let Some(j) = self.mine.take()
            && let Ok(e) = self.elector(j)
            && let Err(e) = e.release().await
        {
            tracing::warn!("releasing the membership Lease: {e}");
        }
    }
}

/// A shard as this replica sees it.
enum Slot {
    /// Competing: its Lease read (and taken when free or expired) every quarter of the retry
    /// period, here rather than in the elector's own loop (every retry period, jittered), so
    /// that a dead holder's Lease is taken within a lease duration plus half a retry period
    /// of its last renewal: client-go judges a Lease expired a lease duration after it saw
    /// the record change, and each of the two reads (the one that sees the last renewal, the
    /// one that finds it expired) may come up to a poll late.
    Candidate {
        elector: Box<LeaderElector<HttpSink>>,
        next: Instant,
        /// Until then (a shard just given up to balance, or fenced) it takes no free Lease,
        /// only one whose holder stopped renewing: it keeps observing the Lease meanwhile, so
        /// a holder that dies is still taken over in time.
        cool_until: Instant,
    },
    /// Taken: the elector's loop renews it; the run exports while it leads.
    Led(Led),
    /// Between two states (never seen by a poll).
    Cooling(Instant),
}

struct Led {
    handle: LeaderHandle,
    run: Option<Running>,
    since: Instant,
}

struct Running {
    stop: watch::Sender<bool>,
    task: JoinHandle<Result<ExportStats, ExportError>>,
}

/// With `--leader-elect`: lead shards as the balance allows, until `stop`.
pub(crate) async fn run_elected(
    apiserver: HttpSink,
    config: ExportConfig,
    streams: Vec<(Shard, JetStream)>,
    lease: LeaseConfig,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<ExportStats> {
    let count = streams.len();
    register(count as u32);
    let streams: BTreeMap<u32, (Shard, JetStream)> = streams
        .into_iter()
        .map(|(s, js)| (s.index(), (s, js)))
        .collect();
    let candidate = |shard: &Shard, cool: Duration| -> Result<Slot, LeaseError> {
        let config = LeaseConfig {
            name: shard.lease(&lease.name),
            ..lease.clone()
        };
        Ok(Slot::Candidate {
            elector: Box::new(LeaderElector::new(apiserver.requests(), config)?),
            next: Instant::now(),
            cool_until: Instant::now() + cool,
        })
    };
    let mut slots: BTreeMap<u32, Slot> = BTreeMap::new();
    for (i, (shard, _)) in &streams {
        slots.insert(*i, candidate(shard, Duration::ZERO)?);
    }
    // The membership in a task of its own (N reads a retry period): the shards' polls do not
    // wait for it. It says this replica's share; asked to stop, it releases the membership.
    let mut members = Members::new(apiserver.requests(), lease.clone(), count);
    let (share_tx, share_rx) = watch::channel(0usize);
    let (members_stop, mut members_stopped) = watch::channel(false);
    let members_task = tokio::task::spawn_local(async move {
        loop {
            let live = members.refresh().await;
            let share = if members.mine.is_some() {
                count.div_ceil(live.max(1))
            } else {
                0
            };
            share_tx.send_replace(share);
            tokio::select! {
                () = tokio::time::sleep(members.template.retry_period) => {}
                _ = members_stopped.wait_for(|s| *s) => break,
            }
        }
        members.release().await;
    });
    let mut total = ExportStats::default();
    let (retry, duration, deadline) = (
        lease.retry_period,
        lease.lease_duration,
        lease.renew_deadline,
    );
    // Replicas started together see each other's membership before any competes (two reads
    // of the membership Leases, a retry period apart): no replica takes every shard first.
    let compete_from = Instant::now() + retry;
    let mut over_since: Option<Instant> = None;
    let tick = Duration::from_millis(100).min(retry / 4);
    tokio::pin!(stop);
    let result: anyhow::Result<()> = loop {
        tokio::select! {
            () = &mut stop => break Ok(()),
            () = tokio::time::sleep(tick) => {}
        }
        let cap = *share_rx.borrow();
        let mut failed = None;
        let mut leading_now = slots
            .values()
            .filter(|s| matches!(s, Slot::Led(l) if l.handle.is_leader()))
            .count();
        for (i, slot) in slots.iter_mut() {
            let shard = streams[i].0;
            let now = Instant::now();
            let next = match slot {
                Slot::Cooling(until) if now >= *until => Some(candidate(&shard, Duration::ZERO)?),
                Slot::Cooling(_) => None,
                Slot::Candidate {
                    elector,
                    next,
                    cool_until,
                } if now >= *next && now >= compete_from => {
                    // At its share, a replica takes only a Lease whose holder stopped
                    // renewing (a dead or frozen replica's: that must not wait for the
                    // membership to catch up), never a free one (left to those under their
                    // share), so it reads a free-looking Lease before it tries.
                    let at_share = leading_now >= cap;
                    let free = (at_share || now < *cool_until)
                        && elector.observed_holder().is_empty()
                        && lease_holder(&apiserver, &lease.namespace, &shard.lease(&lease.name))
                            .await
                            .is_none_or(|h| h.is_empty());
                    let attempt = if free {
                        Err(LeaseError::HeldByOther {
                            holder: String::new(),
                        })
                    } else {
                        tokio::time::timeout(deadline, elector.try_acquire_or_renew())
                            .await
                            .unwrap_or(Err(LeaseError::Deadline(deadline)))
                    };
                    match attempt {
                        Ok(()) => {
                            // Taken: the elector's own loop renews it from now on.
                            let Slot::Candidate { elector, .. } =
                                std::mem::replace(slot, Slot::Cooling(now))
                            else {
                                unreachable!("matched a candidate")
                            };
                            leading_now += 1;
                            Some(Slot::Led(Led {
                                handle: elector.spawn(),
                                run: None,
                                since: now,
                            }))
                        }
                        Err(e) => {
                            if matches!(e, LeaseError::Forbidden { .. }) {
                                tracing::warn!(error = %e, %shard, "shard Lease");
                            }
                            *next = Instant::now() + retry / 4;
                            None
                        }
                    }
                }
                Slot::Candidate { .. } => None,
                Slot::Led(led) => {
                    // A run that ended: the Lease was lost (it stopped at once), it was
                    // fenced, or its store failed.
                    let mut fenced = false;
                    if led.run.as_ref().is_some_and(|r| r.task.is_finished())
                        && let Some(run) = led.run.take()
                    {
                        match run.task.await {
                            Ok(Ok(stats)) => add(&mut total, &stats),
                            Ok(Err(e)) if e.is_fenced() => {
                                metrics::counter!("kevents_export_fenced_total").increment(1);
                                eprintln!(
                                    "export: {} was fenced off shard {shard}'s stream ({e}); giving it up",
                                    lease.identity
                                );
                                fenced = true;
                            }
                            Ok(Err(e)) => failed = Some(store_failure(e)),
                            Err(e) => failed = Some(anyhow::anyhow!("shard {shard}'s run: {e}")),
                        }
                    }
                    let lost = !led.handle.is_leader() && led.since.elapsed() > deadline;
                    if fenced || (lost && led.run.is_none()) {
                        if let Slot::Led(led) = std::mem::replace(slot, Slot::Cooling(now)) {
                            give_up(led, &mut total).await;
                        }
                        Some(candidate(
                            &shard,
                            if fenced { duration } else { Duration::ZERO },
                        )?)
                    } else {
                        if led.handle.is_leader() && led.run.is_none() {
                            let (shard, js) = streams[i].clone();
                            let (tx, mut rx) = watch::channel(false);
                            let mut changes = led.handle.changes();
                            let run = run_shard(
                                apiserver.clone(),
                                config.clone(),
                                shard,
                                js,
                                async move {
                                    tokio::select! {
                                        _ = changes.wait_for(|leading| !*leading) => {}
                                        _ = rx.wait_for(|s| *s) => {}
                                    }
                                },
                            );
                            eprintln!("export: {} leads shard {shard}", lease.identity);
                            metrics::counter!("kevents_export_leader_changes_total").increment(1);
                            led.run = Some(Running {
                                stop: tx,
                                task: tokio::task::spawn_local(run),
                            });
                        }
                        None
                    }
                }
            };
            if let Some(next) = next {
                *slot = next;
            }
        }
        if let Some(e) = failed {
            break Err(e);
        }
        let leading: Vec<u32> = slots
            .iter()
            .filter(|(_, s)| matches!(s, Slot::Led(l) if l.handle.is_leader()))
            .map(|(i, _)| *i)
            .collect();
        // More than this replica's share for a whole lease duration (not a takeover that the
        // membership has not caught up with yet): give the last ones up, and do not compete
        // for them for a lease duration, so that the replicas under their share take them.
        if leading.len() > cap {
            let since = *over_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= duration {
                for i in leading.iter().rev().take(leading.len() - cap) {
                    eprintln!(
                        "export: {} gives shard {i} up (leads {} of at most {cap})",
                        lease.identity,
                        leading.len()
                    );
                    if let Some(Slot::Led(led)) =
                        slots.insert(*i, candidate(&streams[i].0, duration)?)
                    {
                        give_up(led, &mut total).await;
                    }
                }
                over_since = None;
            }
        } else {
            over_since = None;
        }
        let mut led = 0;
        for i in streams.keys() {
            let on = matches!(slots.get(i), Some(Slot::Led(l)) if l.handle.is_leader());
            led += usize::from(on);
            metrics::gauge!("kevents_export_shard_led", "shard" => i.to_string()).set(if on {
                1.0
            } else {
                0.0
            });
        }
        metrics::gauge!("kevents_export_shards_led").set(led as f64);
        metrics::gauge!("kevents_export_leader").set(if led > 0 { 1.0 } else { 0.0 });
    };
    for (_, slot) in std::mem::take(&mut slots) {
        if let Slot::Led(led) = slot {
            give_up(led, &mut total).await;
        }
    }
    members_stop.send_replace(true);
    if let Err(e) = members_task.await {
        tracing::warn!("the membership task: {e}");
    }
    metrics::gauge!("kevents_export_shards_led").set(0.0);
    result.map(|()| total)
}

/// The holder of Lease `namespace/name` (`Some("")`: free or missing; `None`: unreadable).
async fn lease_holder(apiserver: &HttpSink, namespace: &str, name: &str) -> Option<String> {
    let read = apiserver
        .requests()
        .send(
            Method::Get,
            lease_path(namespace, name),
            None,
            Vec::new(),
            1 << 20,
        )
        .await
        .ok()?;
    match read.code {
        404 => Some(String::new()),
        200..=299 => {
            let lease: Value = serde_json::from_slice(&read.body).ok()?;
            Some(
                lease["spec"]["holderIdentity"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        }
        _ => None,
    }
}

/// Stops a shard's run (it saves what it delivered) and releases its Lease.
async fn give_up(led: Led, total: &mut ExportStats) {
    if let Some(run) = led.run {
        let _ = run.stop.send(true);
        match tokio::time::timeout(Duration::from_secs(10), run.task).await {
            Ok(Ok(Ok(stats))) => add(total, &stats),
            Ok(Ok(Err(e))) => tracing::warn!("a shard's run ended: {e}"),
            Ok(Err(e)) => tracing::warn!("a shard's run: {e}"),
            Err(_) => tracing::warn!("a shard's run did not stop within 10 s"),
        }
    }
    if let Err(e) = led.handle.release().await {
        tracing::warn!("releasing a shard's Lease: {e}");
    }
}

/// An export error as the command's failure: the history's store (deleted, unfit, fenced)
/// exits 6 (docs/export.md).
pub(crate) fn store_failure(e: kevents_export::ExportError) -> anyhow::Error {
    use kevents_export::ExportError;
    match e {
        ExportError::Store(_) | ExportError::Fenced(_) => {
            Failure::new(FailureKind::Store, e.to_string()).into()
        }
        ExportError::Config(_) => Failure::new(FailureKind::Config, e.to_string()).into(),
        e => e.into(),
    }
}
