//! [`PreflightApi`] for [`KubeSink`]: discovery and `SelfSubjectAccessReview`s through the
//! application's `kube::Client` (its credentials, proxy, TLS and middleware), with the
//! sink's deadline, bounded reads and error mapping; the same checks as kevents-http's
//! ([`kevents_core::preflight::run`]).

use bytes::Bytes;
use http::Method;
use kevents_core::SinkError;
use kevents_core::preflight::{
    ACCESS_REVIEW_PATH, AccessReview, InvalidPlan, PreflightApi, PreflightFuture, PreflightPlan,
    PreflightReport, ResourceAttributes,
};

use crate::sink::{Body, KubeSink};

impl PreflightApi for KubeSink {
    fn served<'a>(&'a self, path: &'a str) -> PreflightFuture<'a, Result<bool, SinkError>> {
        Box::pin(self.api_served(path))
    }

    fn review<'a>(
        &'a self,
        question: &'a ResourceAttributes,
    ) -> PreflightFuture<'a, Result<AccessReview, SinkError>> {
        Box::pin(async move {
            let body = Body::Json(Bytes::from(question.review_body()));
            let read = self.send(Method::POST, ACCESS_REVIEW_PATH, body).await?;
            let answer = read.view();
            if !answer.is_success() {
                return Err(answer.status_error());
            }
            if read.oversized {
                return Err(SinkError::UnexpectedObject(
                    "the SelfSubjectAccessReview answer is larger than the response limit".into(),
                ));
            }
            AccessReview::decode(&read.body)
        })
    }
}

impl KubeSink {
    /// Checks, before recording, that events would be written with this client's identity
    /// ([`kevents_core::preflight`]): the event API served, `create` and `patch` on `events`
    /// in its group in every namespace of `plan` (and the cluster-scoped objects' one), the
    /// reporting names.
    ///
    /// ```no_run
    /// use kevents_core::preflight::PreflightPlan;
    /// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
    /// let sink = kevents_kube::KubeSink::new(kube::Client::try_default().await?);
    /// let report = sink.preflight(&PreflightPlan::discover(["team-a"])).await?;
    /// println!("{report}");
    /// # Ok(()) }
    /// ```
    pub async fn preflight(&self, plan: &PreflightPlan) -> Result<PreflightReport, InvalidPlan> {
        kevents_core::preflight::run(self, plan).await
    }
}
