//! [`PreflightApi`] for [`HttpSink`]: discovery and `SelfSubjectAccessReview`s with the
//! sink's own requests (authentication, TLS, timeouts, bounded reads, sanitised errors), so
//! [`kevents_core::preflight::run`] checks exactly the identity that will write the events.

use bytes::Bytes;
use http::Method;
use kevents_core::SinkError;
use kevents_core::preflight::{
    ACCESS_REVIEW_PATH, AccessReview, PreflightApi, PreflightFuture, PreflightPlan,
    PreflightReport, ResourceAttributes,
};

use crate::client::{Body, HttpSink, oversized, status_error};

impl PreflightApi for HttpSink {
    fn served<'a>(&'a self, path: &'a str) -> PreflightFuture<'a, Result<bool, SinkError>> {
        Box::pin(self.api_served(path))
    }

    fn review<'a>(
        &'a self,
        question: &'a ResourceAttributes,
    ) -> PreflightFuture<'a, Result<AccessReview, SinkError>> {
        Box::pin(async move {
            let segs: Vec<&str> = ACCESS_REVIEW_PATH
                .split('/')
                .filter(|s| !s.is_empty())
                .collect();
            let url = self.url(&segs, None)?;
            let body = Body::Json(Bytes::from(question.review_body()));
            let answer = self.send(Method::POST, url, &body).await?;
            if !answer.status.is_success() {
                return Err(status_error(&answer));
            }
            if answer.oversized {
                return Err(oversized(self.inner.max_body));
            }
            AccessReview::decode(&answer.body)
        })
    }
}

impl HttpSink {
    /// Checks, before recording, that events would be written with this sink's identity:
    /// the event API served, `create` and `patch` on `events` in its group in every
    /// namespace of `plan` (and the cluster-scoped objects' one), the reporting names
    /// ([`kevents_core::preflight`]). `kevents doctor` prints the report.
    ///
    /// ```no_run
    /// use kevents_core::preflight::PreflightPlan;
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), Box<dyn std::error::Error>> {
    /// let report = sink
    ///     .preflight(&PreflightPlan::discover(["team-a"]).reporter("example.com/ctl", "ctl-1"))
    ///     .await?;
    /// if !report.is_ok() {
    ///     eprintln!("{report}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn preflight(
        &self,
        plan: &PreflightPlan,
    ) -> Result<PreflightReport, kevents_core::preflight::InvalidPlan> {
        kevents_core::preflight::run(self, plan).await
    }
}
