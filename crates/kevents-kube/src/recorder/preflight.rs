//! The drop-in's preflight: what its pipeline was built to write with (API, reporting
//! names, the events.k8s.io/v1 namespace of cluster-scoped objects) checked through its own
//! [`KubeSink`] ([`kevents_core::preflight`]).

use kevents_core::events_v1::{ClusterScopedNamespace, Reporter as V1Reporter};
use kevents_core::preflight::{ApiChoice, EventsApi, InvalidPlan, PreflightPlan, PreflightReport};

use crate::sink::KubeSink;

/// What a drop-in recorder writes with, kept for [`super::Recorder::preflight`].
#[derive(Clone)]
pub(crate) struct Target {
    pub(crate) sink: KubeSink,
    pub(crate) reporter: V1Reporter,
    pub(crate) api: EventsApi,
    pub(crate) cluster_scoped_events_v1: ClusterScopedNamespace,
}

impl Target {
    pub(crate) async fn check<I, S>(&self, namespaces: I) -> Result<PreflightReport, InvalidPlan>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut plan = PreflightPlan::discover(namespaces)
            .api(ApiChoice::Use(vec![self.api]))
            .reporter(
                self.reporter.controller.clone(),
                self.reporter.instance.clone(),
            );
        plan.cluster_scoped_events_v1 = self.cluster_scoped_events_v1;
        self.sink.requests().preflight(&plan).await
    }
}
