//! The [`Recorder`] handle: the pipeline-backed drop-in, or a [`FakeRecorder`]'s.
//!
//! [`FakeRecorder`]: crate::FakeRecorder

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference as K8sReference;
use kevents_actors::{Emit, EventsV1Config, Pipeline, ShutdownReport, SinkOptions, StatsSnapshot};
use kevents_core::EventSource;

use kube::runtime::events::{Event, Reporter};
use tokio::sync::Mutex;

use super::convert::{factory, occurrence, reporter};
use super::error::{PublishError, StartError};
use super::fake_store::FakeStore;
use super::options::{Notes, RecorderOptions};
use crate::sink::KubeSink;

/// The name of the series chain in [`StatsSnapshot::sinks_events_v1`] (and of the core/v1 chain in
/// [`StatsSnapshot::sinks`] when `events.k8s.io/v1` is not served).
///
/// ```no_run
/// # async fn f(recorder: kevents_kube::Recorder) -> Result<(), kevents_kube::PublishError> {
/// let stats = recorder.stats().await?;
/// let series = stats.sink_events_v1(kevents_kube::SINK_NAME).expect("the recorder's chain");
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
/// The pipeline runs in an actix `System` on a dedicated thread (`kevents-pipeline`,
/// `PipelineBuilder::start_thread`) that the recorder starts, so a plain tokio application
/// needs nothing else. The requests go through the given `kube::Client` (its tower service
/// keeps running on the application's runtime).
///
/// **At the process's edges:** [`Recorder::shutdown`] writes the final counts within its
/// deadline and reports them; on SIGTERM, end with it ([`terminated`](crate::terminated),
/// `docs/kube-rs.md`). Dropping the last clone without it (a `?` out of `main`) drains the
/// pipeline within [`RecorderOptions::drop_deadline`] and waits for that drain, on a
/// multi-thread runtime (`#[tokio::main]`'s default): returning from `main` right after stores
/// every count. On a current-thread runtime (`#[tokio::test]`'s default) the drop cannot wait
/// (the client's requests need that runtime): call `shutdown` there.
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
/// println!("{} writes, {} failed", report.stats.sinks_events_v1[0].delivered(), report.stats.sinks_events_v1[0].failed());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Backend,
    keep_resource_version: bool,
    /// What `preflight` checks (`None` for a fake).
    target: Option<super::preflight::Target>,
}

impl Drop for Inner {
    /// The last clone is gone without [`Recorder::shutdown`]: the pipeline's drop drains it
    /// within `drop_deadline` and waits for that (`Pipeline`'s drop). Except on a
    /// current-thread runtime: the `kube::Client`'s requests run on the runtime being blocked,
    /// so waiting there could only end at the deadline with nothing written. The drain goes
    /// on while that runtime runs (a helper thread waits for it), and stderr says what a
    /// process exit now would lose.
    fn drop(&mut self) {
        let Backend::Pipeline { pipeline, .. } = &mut self.backend else {
            return;
        };
        let Some(pipeline) = pipeline.get_mut().take() else {
            return;
        };
        let current_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
        if !current_thread {
            drop(pipeline);
            return;
        }
        let unwritten = pipeline.stats().unwritten();
        if unwritten > 0 {
            let message = format!(
                "kevents-kube: the last Recorder was dropped without shutdown on a \
                 current-thread runtime, where the drop cannot wait for the writes (they need \
                 this runtime): {unwritten} occurrences are written only while it keeps \
                 running; call Recorder::shutdown(deadline).await before it ends"
            );
            tracing::warn!("{message}");
            eprintln!("{message}");
        }
        let _ = std::thread::Builder::new()
            .name("kevents-kube-drop".into())
            .spawn(move || drop(pipeline));
    }
}

/// Where publishes go.
enum Backend {
    /// The pipeline on its own thread.
    Pipeline {
        recorder: kevents_actors::Recorder,
        /// On its own thread (`PipelineBuilder::start_thread`); taken by `shutdown`.
        pipeline: Mutex<Option<Pipeline>>,
    },
    /// A [`FakeRecorder`](crate::FakeRecorder)'s store.
    Fake(Arc<FakeStore>),
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (kind, shut_down) = match &self.inner.backend {
            Backend::Pipeline { recorder, .. } => ("pipeline", recorder.is_shut_down()),
            Backend::Fake(store) => ("fake", store.is_shut_down()),
        };
        f.debug_struct("Recorder")
            .field("backend", &kind)
            .field("shut_down", &shut_down)
            .finish_non_exhaustive()
    }
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
        let factory = factory(v1_reporter.clone(), &options);
        let target = super::preflight::Target {
            sink: sink.clone(),
            reporter: v1_reporter.clone(),
            api: if options.events_v1_served {
                kevents_core::preflight::EventsApi::EventsV1
            } else {
                kevents_core::preflight::EventsApi::CoreV1
            },
            cluster_scoped_events_v1: factory.cluster_scoped_namespace,
        };
        let mut series = kevents_actors::events_v1::SinkOptions {
            retry: options.retry.clone(),
            max_in_flight: options.max_in_flight,
            delivery: options.delivery,
            ..kevents_actors::events_v1::SinkOptions::default()
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
        .sink_events_v1(SINK_NAME, sink.clone(), series);
        let builder = if options.events_v1_served {
            builder
        } else {
            builder.sink(SINK_NAME, sink, core)
        };
        let pipeline = builder
            .drop_deadline(options.drop_deadline)
            .start_thread()
            .map_err(|e| match e {
                kevents_actors::StartError::Thread(e) => StartError::Thread(e),
                _ => StartError::Stopped,
            })?;
        let recorder = pipeline.recorder();
        Ok(Recorder {
            inner: Arc::new(Inner {
                backend: Backend::Pipeline {
                    recorder,
                    pipeline: Mutex::new(Some(pipeline)),
                },
                keep_resource_version: options.keep_resource_version,
                target: Some(target),
            }),
        })
    }

    /// Checks before recording that this recorder's events would be written: the event API
    /// it was built for is served, its client's identity may `create` and `patch` `events`
    /// in that API's group in each of `namespaces` and in the namespace of cluster-scoped
    /// objects' events (`kube-system` for events.k8s.io/v1), and the reporting controller
    /// and instance are valid (a qualified name; at most 128 bytes). Two requests per
    /// namespace (`SelfSubjectAccessReview`, which every authenticated user may make) plus
    /// one discovery request; `kevents doctor` runs the same checks from a kubeconfig. A
    /// [`FakeRecorder`](crate::FakeRecorder)'s recorder has no apiserver to ask
    /// (`InvalidPlan::NoApi`).
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
        match &self.inner.target {
            Some(target) => target.check(namespaces).await,
            None => Err(kevents_core::preflight::InvalidPlan::NoApi),
        }
    }

    /// A recorder publishing into a fake's store ([`FakeRecorder::recorder`]).
    ///
    /// [`FakeRecorder::recorder`]: crate::FakeRecorder::recorder
    pub(super) fn from_fake(store: Arc<FakeStore>, keep_resource_version: bool) -> Self {
        Recorder {
            inner: Arc::new(Inner {
                backend: Backend::Fake(store),
                keep_resource_version,
                target: None,
            }),
        }
    }

    fn occurrence(
        &self,
        ev: &Event,
        regarding: &K8sReference,
    ) -> kevents_core::events_v1::Occurrence {
        occurrence(ev, regarding, self.inner.keep_resource_version)
    }

    /// `kube::runtime::events::Recorder::publish`: records `ev` about `reference`. Returns
    /// once the occurrence is in the pipeline's intake (waiting only while the bounded intake
    /// is full, so nothing is dropped); the write happens later on the pipeline's thread.
    ///
    /// Errors are returned at the call and nothing is queued: the event breaks the
    /// apiserver's validation ([`PublishError::Invalid`]) or the recorder is shut down.
    /// `PublishError` converts into `kube::Error`, so `?` works in a function returning
    /// `kube::Error`; an error type with `From<kube::Error>` needs a
    /// `Publish(#[from] PublishError)` variant or `.map_err(kube::Error::from)?`
    /// ([`PublishError`]).
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
        match &self.inner.backend {
            Backend::Pipeline { recorder, .. } => Ok(recorder.events_v1().emit_wait(occ).await?),
            Backend::Fake(store) => store.publish(ev, reference, occ),
        }
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
        match &self.inner.backend {
            Backend::Pipeline { recorder, .. } => Ok(recorder.events_v1().emit(occ)?),
            Backend::Fake(store) => store.publish(ev, reference, occ).map(|()| Emit::Queued),
        }
    }

    /// The pipeline's recorder handle, for kevents' own calls (`events_v1().event`, `eventf_events_v1!`,
    /// core/v1 style `event`).
    ///
    /// ```no_run
    /// # fn f(recorder: kevents_kube::Recorder) {
    /// let handle: kevents_actors::Recorder = recorder.handle();
    /// # }
    /// ```
    ///
    /// A [`FakeRecorder`](crate::FakeRecorder)'s handle records into
    /// [`FakeRecorder::handle_fake`](crate::FakeRecorder::handle_fake).
    pub fn handle(&self) -> kevents_actors::Recorder {
        match &self.inner.backend {
            Backend::Pipeline { recorder, .. } => recorder.clone(),
            Backend::Fake(store) => store.core.recorder(),
        }
    }

    /// What a fake answers to `stats` and `shutdown`: everything published was "recorded".
    fn fake_stats(store: &FakeStore) -> StatsSnapshot {
        StatsSnapshot {
            recorded: store.lock().len() as u64,
            ..StatsSnapshot::default()
        }
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
        match &self.inner.backend {
            Backend::Fake(_) => Ok(()),
            Backend::Pipeline { pipeline, .. } => match pipeline.lock().await.as_ref() {
                Some(p) => p.flush().await.map_err(|_| PublishError::Shutdown),
                None => Err(PublishError::Shutdown),
            },
        }
    }

    /// Every counter of the pipeline, now (the series chain is
    /// `stats.sink_events_v1(SINK_NAME)`).
    ///
    /// ```no_run
    /// # async fn f(recorder: kevents_kube::Recorder) -> Result<(), kevents_kube::PublishError> {
    /// let stats = recorder.stats().await?;
    /// println!("{} recorded", stats.recorded);
    /// # Ok(()) }
    /// ```
    pub async fn stats(&self) -> Result<StatsSnapshot, PublishError> {
        match &self.inner.backend {
            Backend::Fake(store) => Ok(Self::fake_stats(store)),
            Backend::Pipeline { pipeline, .. } => pipeline
                .lock()
                .await
                .as_ref()
                .map(Pipeline::stats)
                .ok_or(PublishError::Shutdown),
        }
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
        match &self.inner.backend {
            Backend::Fake(store) => {
                if store.is_shut_down() {
                    return Err(PublishError::Shutdown);
                }
                store.shut_down();
                Ok(ShutdownReport {
                    completed: true,
                    pending_intake: 0,
                    pending_watchers: Vec::new(),
                    live_actors: 0,
                    stats: Self::fake_stats(store),
                })
            }
            Backend::Pipeline { pipeline, .. } => {
                let taken = pipeline.lock().await.take();
                match taken {
                    Some(p) => Ok(p.shutdown(deadline).await),
                    None => Err(PublishError::Shutdown),
                }
            }
        }
    }
}
