//! The drop-in for `kube::runtime::events::Recorder`: [`Recorder::new`]`(client, reporter)`
//! and [`Recorder::publish`]`(&Event, &ObjectReference)` with kube's own types, backed by the
//! kevents actor pipeline's `events.k8s.io/v1` series chain writing through a [`KubeSink`].
//!
//! Files: `options.rs` ([`RecorderOptions`], [`Notes`], [`NoteLength`]), `error.rs`
//! ([`PublishError`], [`StartError`]), `thread.rs` (the pipeline's actix `System` on its own
//! thread), this file (the handle).

mod error;
mod options;
mod preflight;
mod thread;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference as K8sReference;
use kevents_actors::{
    Emit, EventsV1Config, Pipeline, SeriesSinkOptions, ShutdownReport, SinkOptions, StatsSnapshot,
};
use kevents_core::events_v1::{EventFactoryV1, NotePolicy, OccurrenceV1, Reporter as V1Reporter};
use kevents_core::{EventSource, EventType, ObjectReference};
use kube::runtime::events::{Event, EventType as KubeEventType, Reporter};
use tokio::sync::{mpsc, oneshot};

pub use error::{PublishError, StartError};
pub use options::{NoteLength, Notes, RecorderOptions};
use thread::Command;

use crate::sink::KubeSink;

/// The name of the series chain in [`StatsSnapshot::series`] (and of the core/v1 chain in
/// [`StatsSnapshot::sinks`] when `events.k8s.io/v1` is not served).
///
/// ```no_run
/// # async fn f(recorder: kevents_kube::Recorder) -> Result<(), kevents_kube::PublishError> {
/// let stats = recorder.stats().await?;
/// let series = stats.series_sink(kevents_kube::SINK_NAME).expect("the recorder's chain");
/// println!("{} creates, {} patches", series.created, series.patched);
/// # Ok(()) }
/// ```
pub const SINK_NAME: &str = "kube";

/// A drop-in for `kube::runtime::events::Recorder`, backed by the kevents pipeline.
///
/// Same construction (`Recorder::new(client, reporter)`) and same call
/// (`recorder.publish(&event, &reference).await`) with kube's own
/// [`Event`], [`Reporter`] and `k8s_openapi` `ObjectReference`. What differs
/// (`docs/kube-rs.md`):
///
/// * **Non-blocking.** `publish` checks the event against the apiserver's rules (a typed
///   [`PublishError`] at the call), puts it into the pipeline's intake and returns; it waits
///   only while the bounded intake is full. Writing happens on the pipeline's own thread,
///   with retries (429, 5xx, transport errors), never in the reconciler.
/// * **Counted exactly.** Repeats are counted in the series cache of one actor: the first
///   occurrence is a CREATE, the second a PATCH starting the series at 2, later ones are
///   counted in memory and written by the heartbeat, the finish (6 min idle) or
///   [`Recorder::shutdown`]. Concurrent callers cannot create duplicates or lose counts.
/// * **Notes**: the first note of a series is kept, as kube-rs does ([`Notes::First`]);
///   [`Notes::Distinct`] makes every distinct note its own event.
///
/// The pipeline runs in an actix `System` on a dedicated thread (`kevents-recorder`) that the
/// recorder starts, so a plain tokio application needs nothing else. The requests go through
/// the given `kube::Client` (its tower service keeps running on the application's runtime), so
/// call [`Recorder::shutdown`] before that runtime ends, to write the final counts.
///
/// Create one recorder per controller (e.g. in the controller's context) and clone it: clones
/// share the pipeline, and the series are per pipeline.
///
/// ```no_run
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kevents_kube::Recorder;
/// use kube::runtime::events::{Event, EventType, Reporter};
/// use kube::Resource;
/// # async fn f(cm: ConfigMap) -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube::Client::try_default().await?;
/// let reporter = Reporter { controller: "example.com/cm-controller".into(), instance: None };
/// let recorder = Recorder::new(client, reporter);
/// recorder
///     .publish(
///         &Event {
///             type_: EventType::Normal,
///             reason: "Synced".into(),
///             note: Some("configuration applied".into()),
///             action: "Reconcile".into(),
///             secondary: None,
///         },
///         &cm.object_ref(&()),
///     )
///     .await?;
/// let report = recorder.shutdown(std::time::Duration::from_secs(10)).await?;
/// println!("{} writes, {} failed", report.stats.series[0].delivered(), report.stats.series[0].failed());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

struct Inner {
    recorder: kevents_actors::Recorder,
    commands: mpsc::UnboundedSender<Command>,
    keep_resource_version: bool,
    /// What `preflight` checks.
    target: preflight::Target,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("shut_down", &self.inner.recorder.is_shut_down())
            .finish_non_exhaustive()
    }
}

/// kube's reporter as kevents': the instance defaults to the controller, as kube's recorder
/// fills `reportingInstance`.
fn reporter(r: &Reporter) -> V1Reporter {
    let instance = r.instance.clone().unwrap_or_else(|| r.controller.clone());
    V1Reporter::with_instance(r.controller.clone(), instance)
}

fn reference(r: &K8sReference, keep_resource_version: bool) -> ObjectReference {
    let mut r = ObjectReference::from(r.clone());
    if !keep_resource_version {
        r.resource_version.clear();
    }
    r
}

impl Recorder {
    /// `kube::runtime::events::Recorder::new`: events reported by `reporter` (an instance of
    /// `None` reports the controller name as the instance, as kube-rs does), written through
    /// `client`, with [`RecorderOptions::default`].
    ///
    /// Starts the pipeline thread. Panics only if the operating system cannot start a thread
    /// (as `std::thread::spawn`); [`Recorder::try_new`] returns that as an error.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), kube::Error> {
    /// let client = kube::Client::try_default().await?;
    /// let recorder = kevents_kube::Recorder::new(client, "example.com/my-controller".into());
    /// # Ok(()) }
    /// ```
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        match Self::try_new(client, reporter, RecorderOptions::default()) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`Recorder::new`] with options.
    ///
    /// ```no_run
    /// use kevents_kube::{Notes, Recorder, RecorderOptions};
    /// # async fn f() -> Result<(), kube::Error> {
    /// let client = kube::Client::try_default().await?;
    /// let recorder = Recorder::with_options(client, "example.com/ctl".into(),
    ///                                       RecorderOptions::default().notes(Notes::Distinct));
    /// # Ok(()) }
    /// ```
    pub fn with_options(
        client: kube::Client,
        reporter: Reporter,
        options: RecorderOptions,
    ) -> Self {
        match Self::try_new(client, reporter, options) {
            Ok(r) => r,
            Err(e) => panic!("{e}"),
        }
    }

    /// [`Recorder::with_options`], returning an error instead of panicking when the pipeline
    /// thread cannot be started.
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = kube::Client::try_default().await?;
    /// let recorder = kevents_kube::Recorder::try_new(client, "example.com/ctl".into(),
    ///                                                Default::default())?;
    /// # Ok(()) }
    /// ```
    pub fn try_new(
        client: kube::Client,
        reporter: Reporter,
        options: RecorderOptions,
    ) -> Result<Self, StartError> {
        Self::from_sink(KubeSink::new(client), reporter, options)
    }

    /// A recorder writing through a configured [`KubeSink`] (request deadline, response
    /// limits).
    ///
    /// ```no_run
    /// use kevents_kube::{KubeSink, Recorder};
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let sink = KubeSink::new(kube::Client::try_default().await?)
    ///     .with_request_timeout(std::time::Duration::from_secs(5));
    /// let recorder = Recorder::from_sink(sink, "example.com/ctl".into(), Default::default())?;
    /// # Ok(()) }
    /// ```
    pub fn from_sink(
        sink: KubeSink,
        reporter: Reporter,
        options: RecorderOptions,
    ) -> Result<Self, StartError> {
        let v1_reporter = self::reporter(&reporter);
        let mut factory = EventFactoryV1::new(v1_reporter.clone());
        let (preflight_sink, preflight_reporter) = (sink.clone(), v1_reporter.clone());
        let preflight_cluster_ns = factory.cluster_scoped_namespace;
        factory.note_policy = match options.note_length {
            NoteLength::Truncate => NotePolicy::default(),
            NoteLength::Reject => NotePolicy::Reject,
        };
        let mut series = SeriesSinkOptions {
            retry: options.retry.clone(),
            max_in_flight: options.max_in_flight,
            delivery: options.delivery,
            ..SeriesSinkOptions::default()
        };
        series.series.note_in_identity = options.notes == Notes::Distinct;
        series.series.max_entries = options.max_series.max(1);
        let core = SinkOptions {
            retry: options.retry.clone(),
            delivery: options.delivery,
            ..SinkOptions::default()
        };
        let builder = Pipeline::builder(EventSource::new(
            v1_reporter.controller.clone(),
            v1_reporter.instance.clone(),
        ))
        .intake(options.intake)
        .events_v1(
            EventsV1Config::new(v1_reporter)
                .factory(factory)
                .served(options.events_v1_served),
        )
        .series_sink(SINK_NAME, sink.clone(), series);
        let builder = if options.events_v1_served {
            builder
        } else {
            builder.sink(SINK_NAME, sink, core)
        };
        let (recorder, commands) = thread::start_thread(builder, options.drop_deadline)?;
        let target = preflight::Target {
            sink: preflight_sink,
            reporter: preflight_reporter,
            api: if options.events_v1_served {
                kevents_core::preflight::EventsApi::EventsV1
            } else {
                kevents_core::preflight::EventsApi::CoreV1
            },
            cluster_scoped_v1: preflight_cluster_ns,
        };
        Ok(Recorder {
            inner: Arc::new(Inner {
                recorder,
                commands,
                keep_resource_version: options.keep_resource_version,
                target,
            }),
        })
    }

    /// Checks before recording that this recorder's events would be written: the event API
    /// it was built for is served, its client's identity may `create` and `patch` `events`
    /// in that API's group in each of `namespaces` and in the namespace of cluster-scoped
    /// objects' events (`kube-system` for events.k8s.io/v1), and the reporting controller
    /// and instance are valid (a qualified name; at most 128 bytes). Two requests per
    /// namespace (`SelfSubjectAccessReview`, which every authenticated user may make) plus
    /// one discovery request; `kevents doctor` runs the same checks from a kubeconfig.
    ///
    /// ```no_run
    /// # async fn f(recorder: kevents_kube::Recorder) -> Result<(), Box<dyn std::error::Error>> {
    /// let report = recorder.preflight(["team-a"]).await?;
    /// if !report.is_ok() {
    ///     // e.g. "may not patch events in API group "events.k8s.io" in namespace "team-a" ..."
    ///     tracing::warn!("events would be lost:\n{report}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn preflight<I, S>(
        &self,
        namespaces: I,
    ) -> Result<kevents_core::preflight::PreflightReport, kevents_core::preflight::InvalidPlan>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.inner.target.check(namespaces).await
    }

    fn occurrence(&self, ev: &Event, regarding: &K8sReference) -> OccurrenceV1 {
        let keep = self.inner.keep_resource_version;
        let type_ = match ev.type_ {
            KubeEventType::Normal => EventType::Normal,
            KubeEventType::Warning => EventType::Warning,
        };
        OccurrenceV1::new(
            reference(regarding, keep),
            ev.secondary.as_ref().map(|r| reference(r, keep)),
            type_,
            ev.reason.clone(),
            ev.action.clone(),
            ev.note.clone().unwrap_or_default(),
        )
    }

    /// `kube::runtime::events::Recorder::publish`: records `ev` about `reference`. Returns
    /// once the occurrence is in the pipeline's intake (waiting only while the bounded intake
    /// is full, so nothing is dropped); the write happens later on the pipeline's thread.
    ///
    /// Errors are returned at the call and nothing is queued: the event breaks the
    /// apiserver's validation ([`PublishError::Invalid`]) or the recorder is shut down.
    /// `PublishError` converts into `kube::Error`, so `?` works where it did with kube's
    /// recorder.
    ///
    /// ```no_run
    /// use k8s_openapi::api::core::v1::ObjectReference;
    /// use kube::runtime::events::{Event, EventType};
    /// # async fn f(recorder: kevents_kube::Recorder) -> Result<(), kube::Error> {
    /// let pod = ObjectReference {
    ///     api_version: Some("v1".into()), kind: Some("Pod".into()),
    ///     namespace: Some("default".into()), name: Some("web-1".into()),
    ///     ..Default::default()
    /// };
    /// let ev = Event { type_: EventType::Warning, reason: "BackOff".into(),
    ///                  note: Some("restarting".into()), action: "Restart".into(), secondary: None };
    /// recorder.publish(&ev, &pod).await?;
    /// # Ok(()) }
    /// ```
    pub async fn publish(&self, ev: &Event, reference: &K8sReference) -> Result<(), PublishError> {
        let occ = self.occurrence(ev, reference);
        Ok(self.inner.recorder.event_v1_wait(occ).await?)
    }

    /// [`publish`](Recorder::publish) without waiting, callable outside async code: when the
    /// intake is full the occurrence is dropped, counted
    /// ([`StatsSnapshot::dropped_intake_full`]) and `Ok(Emit::Dropped(..))` is returned.
    ///
    /// ```no_run
    /// # fn f(recorder: kevents_kube::Recorder, pod: k8s_openapi::api::core::v1::ObjectReference)
    /// # -> Result<(), kevents_kube::PublishError> {
    /// use kube::runtime::events::{Event, EventType};
    /// let ev = Event { type_: EventType::Normal, reason: "Started".into(), note: None,
    ///                  action: "Start".into(), secondary: None };
    /// if !recorder.try_publish(&ev, &pod)?.is_queued() {
    ///     eprintln!("event dropped: intake full");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_publish(&self, ev: &Event, reference: &K8sReference) -> Result<Emit, PublishError> {
        let occ = self.occurrence(ev, reference);
        Ok(self.inner.recorder.event_v1(occ)?)
    }

    /// The pipeline's recorder handle, for kevents' own calls (`event_v1`, `eventf_v1!`,
    /// core/v1 style `event`).
    ///
    /// ```no_run
    /// # fn f(recorder: kevents_kube::Recorder) {
    /// let handle: kevents_actors::Recorder = recorder.handle();
    /// # }
    /// ```
    pub fn handle(&self) -> kevents_actors::Recorder {
        self.inner.recorder.clone()
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, PublishError> {
        let (tx, rx) = oneshot::channel();
        self.inner
            .commands
            .send(make(tx))
            .map_err(|_| PublishError::Shutdown)?;
        rx.await.map_err(|_| PublishError::Shutdown)
    }

    /// Waits until everything published so far has been written (or given up after its
    /// retries). Counts of open series stay in memory (they are written by the heartbeat,
    /// the finish after 6 idle minutes, or [`shutdown`](Recorder::shutdown)).
    ///
    /// ```no_run
    /// # async fn f(recorder: kevents_kube::Recorder) -> Result<(), kevents_kube::PublishError> {
    /// recorder.flush().await?;
    /// # Ok(()) }
    /// ```
    pub async fn flush(&self) -> Result<(), PublishError> {
        self.ask(Command::Flush)
            .await?
            .map_err(|_| PublishError::Shutdown)
    }

    /// Every counter of the pipeline, now (the series chain is
    /// `stats.series_sink(SINK_NAME)`).
    ///
    /// ```no_run
    /// # async fn f(recorder: kevents_kube::Recorder) -> Result<(), kevents_kube::PublishError> {
    /// let stats = recorder.stats().await?;
    /// println!("{} recorded", stats.recorded);
    /// # Ok(()) }
    /// ```
    pub async fn stats(&self) -> Result<StatsSnapshot, PublishError> {
        self.ask(Command::Stats).await
    }

    /// Shuts the pipeline down: refuses new events, writes everything queued and the latest
    /// count of every open series within `deadline`, stops the pipeline thread and reports
    /// what was delivered, dropped and left pending. Later calls on any clone return
    /// [`PublishError::Shutdown`].
    ///
    /// It returns once the pipeline thread's runtime is gone, with the connections its
    /// requests opened: the `kube::Client` can be used again right away (a request made
    /// before that could take one of those connections and never be answered). Dropping
    /// the runtime waits for its blocking tasks (a DNS lookup, say); that wait ends at
    /// `deadline` (at least 100 ms after the pipeline's own shutdown), and the report comes
    /// then.
    ///
    /// ```no_run
    /// # async fn f(recorder: kevents_kube::Recorder) -> Result<(), kevents_kube::PublishError> {
    /// let report = recorder.shutdown(std::time::Duration::from_secs(10)).await?;
    /// assert!(report.completed, "{report:?}");
    /// # Ok(()) }
    /// ```
    pub async fn shutdown(&self, deadline: Duration) -> Result<ShutdownReport, PublishError> {
        self.ask(|tx| Command::Shutdown(deadline, tx)).await
    }
}
