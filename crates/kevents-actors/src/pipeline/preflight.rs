//! The pipeline's preflight: what its chains write with (core/v1 sink chains; series chains
//! while events.k8s.io/v1 is served) and its reporting names, checked through the client
//! that will write ([`kevents_core::preflight`]).

use kevents_core::preflight::{
    ApiChoice, EventsApi, InvalidPlan, PreflightApi, PreflightPlan, PreflightReport,
};

use super::running::Pipeline;

impl Pipeline {
    /// Checks before recording that this pipeline's events would be written, asking the
    /// apiserver through `api` (kevents-http's `HttpSink`, kevents-kube's `KubeSink`, the
    /// client its chains write with): the event APIs its chains write with are served, the
    /// client's identity may `create` and `patch` `events` in their groups in each of
    /// `namespaces` and in the namespaces of cluster-scoped objects' events (`default` for
    /// core/v1, the factory's for events.k8s.io/v1), and the reporting controller and
    /// instance are valid. The report's `Display` names every problem;
    /// [`PreflightReport::is_ok`] says whether events would be lost.
    ///
    /// ```
    /// use kevents_actors::{EventsV1Config, Pipeline};
    /// use kevents_core::events_v1::Reporter;
    /// use kevents_core::preflight::{AccessReview, PreflightApi, PreflightFuture, ResourceAttributes};
    /// use kevents_core::{EventSource, SinkError};
    /// use kevents_actors::events_v1::SinkOptions;
    ///
    /// /// An apiserver where this identity may write events.k8s.io/v1 events in `team-a` only.
    /// struct TeamA;
    /// impl PreflightApi for TeamA {
    ///     fn served<'a>(&'a self, _: &'a str) -> PreflightFuture<'a, Result<bool, SinkError>> {
    ///         Box::pin(async { Ok(true) })
    ///     }
    ///     fn review<'a>(&'a self, q: &'a ResourceAttributes)
    ///         -> PreflightFuture<'a, Result<AccessReview, SinkError>> {
    ///         let allowed = q.namespace == "team-a";
    ///         Box::pin(async move { Ok(AccessReview { allowed, ..Default::default() }) })
    ///     }
    /// }
    ///
    /// # actix::System::new().block_on(async {
    /// let pipeline = Pipeline::builder(EventSource::new("ctl", "node-1"))
    ///     .events_v1(EventsV1Config::new(Reporter::with_instance("example.com/ctl", "ctl-0")))
    ///     .sink_events_v1("apiserver", kevents_sim::MemoryApiServer::new(), SinkOptions::default())
    ///     .start();
    /// let report = pipeline.preflight(&TeamA, ["team-a"]).await.unwrap();
    /// // Cluster-scoped objects' events go to kube-system, where it may not write.
    /// assert!(!report.is_ok());
    /// assert!(report.to_string().contains("may not create events in API group \"events.k8s.io\" in namespace \"kube-system\""));
    /// pipeline.shutdown(std::time::Duration::from_secs(1)).await;
    /// # });
    /// ```
    ///
    /// [`PreflightReport::is_ok`]: kevents_core::preflight::PreflightReport::is_ok
    pub async fn preflight<I, S>(
        &self,
        api: &dyn PreflightApi,
        namespaces: I,
    ) -> Result<PreflightReport, InvalidPlan>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        // A pipeline's recorder always has an intake (only a FakeRecorder has none).
        let Some(intake) = self.recorder.intake() else {
            return Err(InvalidPlan::NoApi);
        };
        let v1 = intake.v1();
        let chains = self.registry.snapshot();
        let mut apis = Vec::new();
        if !chains.sinks_events_v1.is_empty() && v1.served() {
            apis.push(EventsApi::EventsV1);
        }
        // core/v1 chains get core calls, and v1 calls while events.k8s.io/v1 is not served.
        if !chains.sinks.is_empty() {
            apis.push(EventsApi::CoreV1);
        }
        let factory = v1.factory();
        let mut plan = PreflightPlan::discover(namespaces)
            .api(ApiChoice::Use(apis))
            .reporter(
                factory.reporter.controller.clone(),
                factory.reporter.instance.clone(),
            );
        plan.cluster_scoped_events_v1 = factory.cluster_scoped_namespace;
        kevents_core::preflight::run(api, &plan).await
    }
}
