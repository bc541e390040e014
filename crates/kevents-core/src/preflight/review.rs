//! `SelfSubjectAccessReview` (`authorization.k8s.io/v1`): the question "may I?" asked of the
//! apiserver for the identity of the request, and its answer.

use serde::{Deserialize, Serialize};

use crate::status::SinkError;

/// Path of the `SelfSubjectAccessReview` resource (`POST`, any authenticated user may create
/// one: the `system:basic-user` role).
pub const ACCESS_REVIEW_PATH: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

/// One question: may this identity `verb` `resource` in API group `group` in `namespace`
/// (`spec.resourceAttributes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceAttributes {
    /// The namespace.
    pub namespace: String,
    /// `create`, `patch`, ...
    pub verb: String,
    /// `events.k8s.io`, or `""` for core/v1.
    pub group: String,
    /// `events`.
    pub resource: String,
}

/// The apiserver's answer (`status` of the review).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccessReview {
    /// Whether the action is allowed.
    #[serde(default)]
    pub allowed: bool,
    /// Whether an authorizer denied it explicitly (RBAC never does: not allowed is enough).
    #[serde(default)]
    pub denied: bool,
    /// The authorizer's reason, often empty.
    #[serde(default)]
    pub reason: String,
    /// An authorizer's error (the answer may then be wrong).
    #[serde(default)]
    pub evaluation_error: String,
}

impl ResourceAttributes {
    /// The `SelfSubjectAccessReview` to `POST` to [`ACCESS_REVIEW_PATH`].
    ///
    /// ```
    /// use kevents_core::preflight::ResourceAttributes;
    /// let q = ResourceAttributes {
    ///     namespace: "team-a".into(),
    ///     verb: "create".into(),
    ///     group: "events.k8s.io".into(),
    ///     resource: "events".into(),
    /// };
    /// let body = String::from_utf8(q.review_body()).unwrap();
    /// assert!(body.starts_with(r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview""#));
    /// assert!(body.contains(r#""verb":"create","group":"events.k8s.io""#));
    /// ```
    pub fn review_body(&self) -> Vec<u8> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Spec<'a> {
            resource_attributes: &'a ResourceAttributes,
        }
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Review<'a> {
            api_version: &'static str,
            kind: &'static str,
            spec: Spec<'a>,
        }
        // Serialising plain strings cannot fail.
        serde_json::to_vec(&Review {
            api_version: "authorization.k8s.io/v1",
            kind: "SelfSubjectAccessReview",
            spec: Spec {
                resource_attributes: self,
            },
        })
        .unwrap_or_default()
    }
}

impl AccessReview {
    /// Decodes a 2xx answer to a review: its `status`.
    ///
    /// ```
    /// use kevents_core::preflight::AccessReview;
    /// let a = AccessReview::decode(br#"{"kind":"SelfSubjectAccessReview","status":{"allowed":true}}"#).unwrap();
    /// assert!(a.allowed);
    /// assert!(AccessReview::decode(b"[]").is_err());
    /// ```
    pub fn decode(body: &[u8]) -> Result<AccessReview, SinkError> {
        #[derive(Deserialize)]
        struct Answer {
            kind: Option<String>,
            status: Option<AccessReview>,
        }
        let answer: Answer = serde_json::from_slice(body).map_err(|e| {
            SinkError::UnexpectedObject(format!("not a SelfSubjectAccessReview: {e}"))
        })?;
        match (answer.kind.as_deref(), answer.status) {
            (Some("SelfSubjectAccessReview") | None, Some(status)) => Ok(status),
            (kind, _) => Err(SinkError::UnexpectedObject(format!(
                "not a SelfSubjectAccessReview answer (kind {kind:?}, no status)"
            ))),
        }
    }
}
