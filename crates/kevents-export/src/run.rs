//! The run loop ([`run`]): one task per watch scope feeds, in order, one loop that owns the
//! per-uid state (last exported count and namespace, never the event), computes each
//! record's delta and delivers the records that are ready as one batch: begin, deliver,
//! commit; resourceVersions saved after.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::time::{Duration, Instant};

use kevents_core::request::StreamTransport;
use tokio::sync::mpsc;

use crate::store::{RecordSink, ResumeStore};
use crate::watcher::{Item, ScopeConfig, run_scope};
use crate::{Api, Counts, ExportError, ExportRecord};

/// What to watch and how.
///
/// ```
/// let mut c = kevents_export::ExportConfig::default();
/// c.namespaces = vec!["team-a".into(), "team-b".into()];
/// assert_eq!(c.api, kevents_export::Api::CoreV1);
/// ```
#[derive(Debug, Clone)]
pub struct ExportConfig {
    /// Which view of the stored events to watch (both show every event; see docs/export.md).
    pub api: Api,
    /// The namespaces to watch; empty: the whole cluster.
    pub namespaces: Vec<String>,
    /// A watch's `timeoutSeconds`: the server ends it then, and it is started again from
    /// the last resourceVersion.
    pub watch_timeout: Duration,
    /// How long a watch may stay silent beyond `watch_timeout` before it is taken for a
    /// half-open connection and dropped.
    pub idle_timeout: Duration,
    /// Items per list page.
    pub page_size: usize,
    /// Bound on one watch line (one event), bytes.
    pub max_line_bytes: usize,
    /// Bound on one list page, bytes.
    pub max_page_bytes: usize,
    /// At most how often a scope's resourceVersion is saved.
    pub save_interval: Duration,
    /// Print a progress line on stderr this often (`None`: never).
    pub progress: Option<Duration>,
    /// At most this many records delivered together: the loop takes the items that are
    /// ready (never waiting for more) and delivers their records as one batch
    /// ([`crate::RecordSink::deliver_batch`], begun and committed as one:
    /// [`crate::ResumeStore::begin_batch`]). A restart repeats at most one batch.
    pub batch: usize,
    /// Export only this shard's events ([`crate::Shard`]): its `shardSelector` is asked of
    /// the apiserver (KEP-5866), and every event read is checked against its hash range
    /// whether the server filtered or not. `None`: every event.
    pub shard: Option<crate::Shard>,
}

impl Default for ExportConfig {
    fn default() -> Self {
        ExportConfig {
            api: Api::CoreV1,
            namespaces: Vec::new(),
            watch_timeout: Duration::from_secs(240),
            idle_timeout: Duration::from_secs(30),
            page_size: 500,
            max_line_bytes: 4 << 20,
            max_page_bytes: 64 << 20,
            save_interval: Duration::from_secs(1),
            progress: None,
            batch: 256,
            shard: None,
        }
    }
}

/// The resume point's key of a watch scope: `{api}.{namespace}` (`_cluster` for the whole
/// cluster; namespace names cannot hold `_`).
///
/// ```
/// use kevents_export::{Api, scope_key};
/// assert_eq!(scope_key(Api::CoreV1, "default"), "core.default");
/// assert_eq!(scope_key(Api::EventsV1, ""), "events._cluster");
/// ```
pub fn scope_key(api: Api, namespace: &str) -> String {
    let api = match api {
        Api::CoreV1 => "core",
        Api::EventsV1 => "events",
    };
    if namespace.is_empty() {
        format!("{api}._cluster")
    } else {
        format!("{api}.{namespace}")
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Records delivered.
    pub records: u64,
    /// Occurrences delivered (the sum of the records' deltas).
    pub occurrences: u64,
    /// Lists after a 410 Gone.
    pub relists: u64,
    /// Watches ended and started again.
    pub watch_restarts: u64,
    /// Failed list or watch requests (retried).
    pub failures: u64,
    /// Records delivered again at start (begun, maybe not finished, before a crash).
    pub redelivered: u64,
    /// Live events known now.
    pub live: u64,
    /// What the history could not keep exactly, by cause ([`Incomplete`]).
    pub incomplete: Incomplete,
    /// Listed or watched objects skipped as malformed (no uid, a count outside 0 to
    /// 2^31-1: [`crate::Malformed`]), or carrying the uid of an event in another namespace.
    pub malformed: u64,
    /// Events whose count was read lower than the count already exported (each event
    /// counted and warned once; nothing is exported for it until its count passes the one
    /// exported).
    pub decreases: u64,
}

/// What the exported history could not keep exactly, by cause (docs/export.md,
/// "Completeness"). Each occurrence is still in the history (deltas sum to the counts);
/// what these say is which ones lost their own moment: they are in one record with others.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Incomplete {
    /// Occurrences that happened before the export began: the first record of an event that
    /// already had a count when a scope's first list (without a resume point) read it.
    pub before_start: u64,
    /// Occurrences read in a relist after a watch gap (410 Gone): coalesced across the gap.
    pub watch_gap: u64,
    /// Events that were deleted (or expired) while no watch was reading them: known before a
    /// relist and absent from it; their last occurrences may never have been read.
    pub deleted_unread: u64,
}

impl Incomplete {
    /// Whether everything exported in the run kept its own record (all zero).
    pub fn is_exact(&self) -> bool {
        *self == Incomplete::default()
    }
}

/// What a record read means against the counts exported ([`State::delta`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// It carries occurrences not exported yet (its delta is set); the count exported before.
    New { previous: u64 },
    /// Nothing new; `lowered`: its count was read lower than the one exported, the first time
    /// for this event.
    Nothing { lowered: bool, exported: u64 },
    /// The uid of an event exported from another namespace (named).
    OtherNamespace(String),
}

/// Per live event what deduplication and the fence need: its last exported count and
/// namespace, a flag for a count read lower (warned once), and a mark for the list of its
/// scope in progress (events known before a relist and not in it were deleted unread), in
/// [`Counts`]' compact entries.
pub(crate) struct State {
    known: Counts,
}

impl State {
    /// No event known yet, room for `live` of them.
    pub(crate) fn with_capacity(live: usize) -> Self {
        State {
            known: Counts::with_capacity(live),
        }
    }

    /// Continues from a resume point's counts (moved, not copied).
    fn from_counts(known: Counts) -> Self {
        State { known }
    }

    /// Sets `record`'s delta against the last count exported for its uid when it carries
    /// occurrences not exported yet ([`Seen::New`], delta set); else says why not.
    pub(crate) fn delta(&mut self, record: &mut ExportRecord) -> Seen {
        let Some(known) = self.known.slot(&record.uid) else {
            if record.count == 0 {
                return Seen::Nothing {
                    lowered: false,
                    exported: 0,
                };
            }
            record.delta = record.count;
            return Seen::New { previous: 0 };
        };
        let first = self.known.namespace(known.ns());
        if first != record.namespace {
            return Seen::OtherNamespace(first.to_owned());
        }
        let exported = known.count();
        if record.count <= exported {
            let lowered = record.count < exported && !known.lowered();
            if lowered && let Some(slot) = self.known.slot_mut(&record.uid) {
                slot.set_lowered();
            }
            return Seen::Nothing { lowered, exported };
        }
        record.delta = record.count - exported;
        Seen::New { previous: exported }
    }

    /// Remembers `record`'s count and namespace as its uid's last export.
    pub(crate) fn remember(&mut self, record: &ExportRecord) {
        // Records come from `ExportRecord::read`: counts at most MAX_COUNT.
        let count = u32::try_from(record.count.min(crate::MAX_COUNT)).unwrap_or(u32::MAX >> 1);
        let ns = self.known.intern(&record.namespace);
        self.known.put(&record.uid, count, ns);
    }

    /// Events known.
    pub(crate) fn live(&self) -> usize {
        self.known.len()
    }

    /// Whether `uid` is known.
    fn contains(&self, uid: &str) -> bool {
        self.known.contains(uid)
    }

    /// Forgets `uid`; whether it was known.
    fn remove(&mut self, uid: &str) -> bool {
        self.known.remove(uid)
    }

    /// Whether an event of namespace index `ns` is in the scope of namespace `scope`
    /// (`scope_ns`: its index, if any event had it; `""`: the whole cluster).
    fn in_scope(scope: &str, scope_ns: Option<u32>, ns: u32) -> bool {
        scope.is_empty() || scope_ns == Some(ns)
    }

    /// A list of scope `scope` (a namespace, `""`: the whole cluster) begins: none of its
    /// events is marked read by it yet.
    fn list_started(&mut self, scope: &str) {
        let scope_ns = self.known.namespace_index(scope);
        self.known.retain(|slot| {
            if Self::in_scope(scope, scope_ns, slot.ns()) {
                slot.set_listed(false);
            }
            true
        });
    }

    /// The list of scope `scope` read `uid`: marked, if it is an event of that scope. (An
    /// event first exported from that list is marked when remembered.)
    fn listed(&mut self, scope: &str, uid: &str) {
        let scope_ns = self.known.namespace_index(scope);
        if let Some(slot) = self.known.slot_mut(uid)
            && Self::in_scope(scope, scope_ns, slot.ns())
        {
            slot.set_listed(true);
        }
    }

    /// The list of scope `scope` ended: its events it did not read are forgotten (the uids
    /// given back), the marks of the others cleared.
    fn list_ended(&mut self, scope: &str) -> Vec<String> {
        let scope_ns = self.known.namespace_index(scope);
        self.known.retain(|slot| {
            if !Self::in_scope(scope, scope_ns, slot.ns()) {
                return true;
            }
            let listed = slot.listed();
            slot.set_listed(false);
            listed
        })
    }
}

/// Exports the events of `config`'s scopes read through `apiserver` (any
/// [`StreamTransport`]: kevents-http's `HttpSink`, kevents-kube's `KubeSink`) into `sink`, with the
/// resume point in `store`, until `shutdown` completes (then the record being delivered is
/// finished and the resourceVersions saved) or the sink or store fails. A list or watch that
/// fails is retried; it never ends the run.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use kevents_export::{ExportConfig, JetStream, JetStreamConfig, run};
/// let apiserver = kevents_http::HttpSink::infer().await?;
/// let nats = async_nats::connect("nats://127.0.0.1:4222").await?;
/// let js = JetStream::open(nats, JetStreamConfig::new("export")).await?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// # drop(stop);
/// let stats = run(apiserver, ExportConfig::default(), js.clone(), js, async {
///     let _ = stopped.await;
/// })
/// .await?;
/// println!("{} records", stats.records);
/// # Ok(()) }
/// ```
pub async fn run<T: StreamTransport, S: RecordSink, R: ResumeStore>(
    apiserver: T,
    config: ExportConfig,
    mut sink: S,
    mut store: R,
    shutdown: impl Future<Output = ()>,
) -> Result<ExportStats, ExportError> {
    let mut stats = ExportStats::default();
    let point = store.load().await?;
    let mut point = point;
    let mut state = State::from_counts(std::mem::take(&mut point.counts));
    // Records begun before a crash: delivered again with the same key (stored once).
    sink.deliver_batch(&point.pending).await?;
    store.commit_batch(&point.pending).await?;
    for record in &point.pending {
        state.remember(record);
        stats.redelivered += 1;
    }
    let point_rvs: HashSet<String> = point.resource_versions.keys().cloned().collect();
    let namespaces = if config.namespaces.is_empty() {
        vec![String::new()]
    } else {
        // One scope per namespace (a list's marks are per namespace: `State::listed`).
        let mut seen = HashSet::new();
        let mut namespaces = config.namespaces.clone();
        namespaces.retain(|ns| seen.insert(ns.clone()));
        namespaces
    };
    let (tx, mut rx) = mpsc::channel::<Item>(1024);
    let mut scopes = Vec::new();
    let mut tasks = Vec::new();
    for (i, ns) in namespaces.iter().enumerate() {
        let key = scope_key(config.api, ns);
        let cfg = ScopeConfig {
            api: config.api,
            namespace: ns.clone(),
            watch_timeout: config.watch_timeout,
            idle_timeout: config.idle_timeout,
            page_size: config.page_size,
            max_line_bytes: config.max_line_bytes,
            max_page_bytes: config.max_page_bytes,
            shard: config.shard,
        };
        let start_rv = point.resource_versions.get(&key).cloned();
        tasks.push(tokio::spawn(run_scope(
            apiserver.clone(),
            cfg,
            i,
            start_rv,
            tx.clone(),
        )));
        scopes.push((key, ns.clone()));
    }
    drop(tx);
    let aborter = Aborter(tasks);
    // The scopes whose list is in progress (their events read are marked in `state`).
    let mut listing: HashSet<usize> = HashSet::new();
    // Scopes without a resume point: their first list reads events older than the export.
    let mut fresh: HashSet<usize> = (0..scopes.len())
        .filter(|i| {
            scopes
                .get(*i)
                .is_some_and(|(key, _)| !point_rvs.contains(key))
        })
        .collect();
    let mut unsaved: HashMap<usize, String> = HashMap::new();
    let mut last_save = Instant::now();
    let mut last_progress = Instant::now();
    let started = Instant::now();
    let mut shutdown = std::pin::pin!(shutdown);
    // Saves and progress lines also while no item comes.
    let mut tick = tokio::time::interval(config.save_interval.max(Duration::from_millis(10)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let result = loop {
        let item = tokio::select! {
            biased;
            () = &mut shutdown => break Ok(()),
            _ = tick.tick() => None,
            item = rx.recv() => match item {
                Some(item) => Some(item),
                None => break Ok(()),
            },
        };
        // The items ready now (at most `batch` of them, never waiting for more), their
        // records delivered as one batch.
        let mut batch = Batch::default();
        let mut next = item;
        let mut taken = 0;
        let mut step = Ok(());
        while let Some(item) = next.take() {
            step = handle(
                item,
                &config,
                &mut state,
                &mut sink,
                &mut store,
                &mut stats,
                &mut Lists {
                    listing: &mut listing,
                    fresh: &mut fresh,
                },
                &mut unsaved,
                &scopes,
                &mut batch,
            )
            .await;
            taken += 1;
            if step.is_err() || taken >= config.batch.max(1) {
                break;
            }
            next = rx.try_recv().ok();
        }
        if step.is_ok() {
            step = flush(
                &mut batch,
                &state,
                &mut sink,
                &mut store,
                &mut stats,
                &mut unsaved,
            )
            .await;
        }
        if let Err(e) = step {
            break Err(e);
        }
        if last_save.elapsed() >= config.save_interval {
            if let Err(e) = save(&mut store, &scopes, &mut unsaved).await {
                break Err(e);
            }
            last_save = Instant::now();
        }
        if let Some(every) = config.progress
            && last_progress.elapsed() >= every
        {
            stats.live = state.live() as u64;
            progress(&stats, started);
            last_progress = Instant::now();
        }
    };
    drop(aborter);
    save(&mut store, &scopes, &mut unsaved).await?;
    stats.live = state.live() as u64;
    if config.progress.is_some() {
        progress(&stats, started);
    }
    result.map(|()| stats)
}

/// Aborts the scope tasks when dropped (the run ended, or its future was dropped).
struct Aborter(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Aborter {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

fn progress(stats: &ExportStats, started: Instant) {
    eprintln!(
        "export: {}s records={} occurrences={} live={} relists={} watch_restarts={} failures={} incomplete: before_start={} watch_gap={} deleted_unread={}",
        started.elapsed().as_secs(),
        stats.records,
        stats.occurrences,
        stats.live,
        stats.relists,
        stats.watch_restarts,
        stats.failures,
        stats.incomplete.before_start,
        stats.incomplete.watch_gap,
        stats.incomplete.deleted_unread
    );
}

async fn save<R: ResumeStore>(
    store: &mut R,
    scopes: &[(String, String)],
    unsaved: &mut HashMap<usize, String>,
) -> Result<(), ExportError> {
    for (scope, rv) in unsaved.drain() {
        if let Some((key, _)) = scopes.get(scope) {
            store.save_resource_version(key, &rv).await?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn handle<S: RecordSink, R: ResumeStore>(
    item: Item,
    config: &ExportConfig,
    state: &mut State,
    sink: &mut S,
    store: &mut R,
    stats: &mut ExportStats,
    lists: &mut Lists<'_>,
    unsaved: &mut HashMap<usize, String>,
    scopes: &[(String, String)],
    batch: &mut Batch,
) -> Result<(), ExportError> {
    // Anything but a record read is ordered after the records staged before it.
    if !matches!(item, Item::Upsert { .. }) {
        flush(batch, state, sink, store, stats, unsaved).await?;
    }
    let listing = &mut *lists.listing;
    match item {
        Item::ListStart { scope, relist } => {
            if relist {
                stats.relists += 1;
                metrics::counter!("kevents_export_relists_total").increment(1);
                // Only the first list of a scope without a resume point reads what came
                // before the export.
                lists.fresh.remove(&scope);
            }
            listing.insert(scope);
            state.list_started(scopes.get(scope).map_or("", |(_, ns)| ns.as_str()));
            // Nothing before the list's end may be saved as this scope's resume point.
            unsaved.remove(&scope);
        }
        Item::Upsert { scope, object, rv } => {
            if let Some(record) = readable(config, &object, stats) {
                let known = state.contains(&record.uid);
                let from = if listing.contains(&scope) {
                    state.listed(
                        scopes.get(scope).map_or("", |(_, ns)| ns.as_str()),
                        &record.uid,
                    );
                    if lists.fresh.contains(&scope) && !known {
                        From::BeforeStart
                    } else {
                        From::Gap
                    }
                } else {
                    From::Watch
                };
                let delta = stage(record, state, stats, batch);
                match from {
                    From::BeforeStart => {
                        stats.incomplete.before_start =
                            stats.incomplete.before_start.saturating_add(delta)
                    }
                    From::Gap => {
                        stats.incomplete.watch_gap =
                            stats.incomplete.watch_gap.saturating_add(delta)
                    }
                    From::Watch => {}
                }
                if delta > 0 && from != From::Watch {
                    let cause = if from == From::BeforeStart {
                        "before_start"
                    } else {
                        "watch_gap"
                    };
                    metrics::counter!("kevents_export_incomplete_occurrences_total", "cause" => cause)
                        .increment(delta);
                }
            }
            // Saved once the batch is stored.
            if let Some(rv) = rv
                && !listing.contains(&scope)
            {
                batch.rvs.push((scope, rv));
            }
        }
        Item::Deleted { scope, object, rv } => {
            // Its last state may carry occurrences not read yet: export them first.
            if let Some(record) = readable(config, &object, stats) {
                let uid = record.uid.clone();
                stage(record, state, stats, batch);
                flush(batch, state, sink, store, stats, unsaved).await?;
                if state.remove(&uid) {
                    store.forget(&uid).await?;
                }
            }
            unsaved.insert(scope, rv);
        }
        Item::ListEnd { scope, rv } => {
            // Events of this scope known before and not listed were deleted meanwhile.
            listing.remove(&scope);
            let gone = state.list_ended(scopes.get(scope).map_or("", |(_, ns)| ns.as_str()));
            if !gone.is_empty() {
                stats.incomplete.deleted_unread += gone.len() as u64;
                metrics::counter!("kevents_export_incomplete_events_total", "cause" => "deleted_unread")
                    .increment(gone.len() as u64);
            }
            for uid in gone {
                store.forget(&uid).await?;
            }
            lists.fresh.remove(&scope);
            unsaved.insert(scope, rv);
        }
        Item::Bookmark { scope, rv } => {
            unsaved.insert(scope, rv);
        }
        Item::WatchRestart => {
            stats.watch_restarts += 1;
            metrics::counter!("kevents_export_watch_restarts_total").increment(1);
        }
        Item::Failed { error } => {
            tracing::debug!(%error, "a list or watch failed");
            stats.failures += 1;
            metrics::counter!("kevents_export_watch_failures_total").increment(1);
        }
    }
    Ok(())
}

/// The record of a listed or watched object, or `None` counted and warned (at most one line
/// a minute per cause, with how many since) when it is malformed; `None` too when it is
/// another shard's (a server that does not filter by the shard sends every event).
fn readable(
    config: &ExportConfig,
    object: &serde_json::Value,
    stats: &mut ExportStats,
) -> Option<ExportRecord> {
    match ExportRecord::read(config.api, object) {
        Ok(record) if config.shard.is_some_and(|s| !s.owns(&record.uid)) => None,
        Ok(record) => Some(record),
        Err(why) => {
            stats.malformed = stats.malformed.saturating_add(1);
            metrics::counter!("kevents_export_malformed_objects_total", "why" => why.label())
                .increment(1);
            static LAST: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);
            let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(60)) {
                *last = Some(Instant::now());
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                tracing::warn!(name = %kevents_core::status::sanitize_server_text(name),
                    malformed_so_far = stats.malformed, error = %why,
                    "an event that cannot be exported: skipped, counted in kevents_export_malformed_objects_total");
            }
            None
        }
    }
}

/// The scopes whose list is in progress (the events they read marked in the state), and the
/// scopes whose first list reads events older than the export.
struct Lists<'a> {
    listing: &'a mut HashSet<usize>,
    fresh: &'a mut HashSet<usize>,
}

/// Where an upsert came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    /// A watch: its own record.
    Watch,
    /// The first list of a scope without a resume point, an event not known before.
    BeforeStart,
    /// Another list (after a watch gap).
    Gap,
}

/// The records staged for one delivery, and the resourceVersions to save once they are
/// stored.
#[derive(Default)]
struct Batch {
    records: Vec<ExportRecord>,
    rvs: Vec<(usize, String)>,
}

/// Stages `record` for delivery if it carries occurrences no earlier record of its uid did;
/// the occurrences staged (its delta, or 0). Its count is remembered now, so that a later
/// record of its uid in the same batch takes its delta from it (a batch that fails ends the
/// run, and its `State` with it).
fn stage(
    mut record: ExportRecord,
    state: &mut State,
    stats: &mut ExportStats,
    batch: &mut Batch,
) -> u64 {
    match state.delta(&mut record) {
        Seen::New { .. } => {}
        Seen::Nothing { lowered, exported } => {
            if lowered {
                stats.decreases = stats.decreases.saturating_add(1);
                metrics::counter!("kevents_export_count_decreases_total").increment(1);
                // Counts only grow; a lower one (an event recreated under the same uid, a
                // hostile server) exports nothing until it passes the count already exported.
                tracing::warn!(uid = %record.uid, namespace = %record.namespace,
                    count = record.count, exported,
                    "an event's count went down: nothing exported until it passes the count already exported (said once per event)");
            }
            return 0;
        }
        Seen::OtherNamespace(first) => {
            // The apiserver gives every object its own uid; one read in a second namespace is
            // not the same event, and not one this export can keep apart from the first:
            // refused, counted, warned.
            stats.malformed = stats.malformed.saturating_add(1);
            metrics::counter!("kevents_export_malformed_objects_total", "why" => "uid_reused")
                .increment(1);
            tracing::warn!(uid = %record.uid, namespace = %record.namespace,
                first_namespace = %first,
                "an event with the uid of an event in another namespace: skipped, counted in kevents_export_malformed_objects_total");
            return 0;
        }
    };
    state.remember(&record);
    let delta = record.delta;
    batch.records.push(record);
    delta
}

/// Delivers the staged records (begin, deliver, commit, each once for the batch), then
/// notes the resourceVersions read with them as to be saved.
async fn flush<S: RecordSink, R: ResumeStore>(
    batch: &mut Batch,
    state: &State,
    sink: &mut S,
    store: &mut R,
    stats: &mut ExportStats,
    unsaved: &mut HashMap<usize, String>,
) -> Result<(), ExportError> {
    if !batch.records.is_empty() {
        store.begin_batch(&batch.records).await?;
        sink.deliver_batch(&batch.records).await?;
        store.commit_batch(&batch.records).await?;
        let now = kevents_core::Clock::now(&kevents_core::SystemClock);
        for record in batch.records.drain(..) {
            stats.records = stats.records.saturating_add(1);
            stats.occurrences = stats.occurrences.saturating_add(record.delta);
            metrics::counter!("kevents_export_records_total").increment(1);
            metrics::counter!("kevents_export_occurrences_total").increment(record.delta);
            metrics::histogram!("kevents_export_lag_seconds").record(record.lag_secs(now));
        }
        metrics::gauge!("kevents_export_live_events").set(state.live() as f64);
    }
    for (scope, rv) in batch.rvs.drain(..) {
        unsaved.insert(scope, rv);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
