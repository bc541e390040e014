//! [`PreflightApi`] for [`Client`]: discovery and `SelfSubjectAccessReview`s with the
//! transport's own requests (its credentials, deadline, bounded reads, sanitised errors), so
//! [`crate::preflight::run`] checks exactly the identity that will write the events.

use crate::preflight::{
    ACCESS_REVIEW_PATH, AccessReview, InvalidPlan, PreflightApi, PreflightFuture, PreflightPlan,
    PreflightReport, ResourceAttributes,
};
use crate::status::SinkError;

use super::client::{Client, success_body};
use super::transport::{APPLICATION_JSON, Method, Transport};

impl<T: Transport> PreflightApi for Client<T> {
    fn served<'a>(&'a self, path: &'a str) -> PreflightFuture<'a, Result<bool, SinkError>> {
        Box::pin(self.api_served(path))
    }

    fn review<'a>(
        &'a self,
        question: &'a ResourceAttributes,
    ) -> PreflightFuture<'a, Result<AccessReview, SinkError>> {
        Box::pin(async move {
            let cap = self.transport().limits().max_response_bytes;
            let body = question.review_body();
            let path = ACCESS_REVIEW_PATH.to_owned();
            let answer = self
                .send(Method::Post, path, Some(APPLICATION_JSON), body, cap)
                .await?;
            AccessReview::decode(&success_body(answer, cap)?)
        })
    }
}

impl<T: Transport> Client<T> {
    /// Checks, before recording, that events would be written with this transport's
    /// identity: the event API served, `create` and `patch` on `events` in its group in every
    /// namespace of `plan` (and the cluster-scoped objects' one), the reporting names
    /// ([`crate::preflight::run`]).
    pub async fn preflight(&self, plan: &PreflightPlan) -> Result<PreflightReport, InvalidPlan> {
        crate::preflight::run(self, plan).await
    }
}
