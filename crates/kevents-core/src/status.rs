//! The apiserver's error vocabulary, shared by both APIs: `metav1.Status` ([`Status`],
//! [`StatusDetails`], [`StatusCause`]), the errors a write can end in ([`SinkError`]) and how
//! they are classified ([`Disposition`]: retry or drop).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A cause in a `Status`'s details.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusCause {
    /// Machine-readable cause, e.g. `NamespaceTerminating` or `FieldValueInvalid`.
    #[serde(rename = "reason", skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// Human-readable description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The field at fault.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field: String,
}

/// `Status.details`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StatusDetails {
    /// Name of the object concerned.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// API group.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Resource kind (`events`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// UID of the object.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Causes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Suggested wait before retrying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<i32>,
}

/// A `metav1.Status` error returned by the apiserver.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Status {
    /// Always `Status`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Always `v1`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `Failure`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Human-readable description.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Machine-readable reason: `NotFound`, `AlreadyExists`, `Forbidden`, `Invalid`, ...
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// HTTP status code.
    pub code: u16,
    /// The `Retry-After` header of the response, if any (not part of the body).
    #[serde(skip)]
    pub retry_after: Option<Duration>,
}

impl Status {
    /// A failure status as the apiserver builds one.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Status {
            kind: "Status".into(),
            api_version: "v1".into(),
            status: "Failure".into(),
            message: message.into(),
            reason: reason.into(),
            details: None,
            code,
            retry_after: None,
        }
    }

    /// Whether any detail cause has this type.
    pub fn has_cause(&self, type_: &str) -> bool {
        self.details
            .as_ref()
            .is_some_and(|d| d.causes.iter().any(|c| c.type_ == type_))
    }
}

/// Why a sink call failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SinkError {
    /// The apiserver answered with an error status (client-go `StatusError`).
    #[error("apiserver answered {code} {reason}: {message}", code = .0.code, reason = .0.reason, message = .0.message)]
    Status(Box<Status>),
    /// The request never got an answer: connection refused or reset, DNS, TLS, EOF.
    #[error("transport error: {0}")]
    Transport(String),
    /// No answer within the per-request timeout.
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// The request could not be built (client-go `RequestConstructionError`).
    #[error("cannot construct request: {0}")]
    Construction(String),
    /// The server answered 2xx with something that is not an Event.
    #[error("unexpected response object: {0}")]
    UnexpectedObject(String),
}

/// What to do after a failed write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Try again after a back-off.
    Retry,
    /// Give up on this write; `quiet` ones are expected (AlreadyExists, terminating
    /// namespace) and logged at debug level only.
    Drop {
        /// Expected outcome, not worth a warning.
        quiet: bool,
    },
}

impl SinkError {
    /// The HTTP status code, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            SinkError::Status(s) => Some(s.code),
            _ => None,
        }
    }

    /// Whether this is a 404 (client-go `IsKeyNotFoundError` checks only the code).
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// Whether the server said the object already exists.
    pub fn is_already_exists(&self) -> bool {
        matches!(self, SinkError::Status(s) if s.reason == "AlreadyExists")
    }

    /// Whether the namespace is being deleted.
    pub fn is_namespace_terminating(&self) -> bool {
        matches!(self, SinkError::Status(s) if s.has_cause("NamespaceTerminating"))
    }

    /// client-go's classification (`recordEvent` in `tools/record`): every status error is dropped,
    /// only transport-level failures and unexpected objects are retried.
    pub fn client_go_disposition(&self) -> Disposition {
        match self {
            SinkError::Construction(_) => Disposition::Drop { quiet: false },
            SinkError::Status(_) => Disposition::Drop {
                quiet: self.is_already_exists() || self.is_namespace_terminating(),
            },
            SinkError::UnexpectedObject(_) | SinkError::Transport(_) | SinkError::Timeout(_) => {
                Disposition::Retry
            }
        }
    }

    /// kevents' classification: like client-go, but the transient server answers 429, 500,
    /// 502, 503 and 504 are retried too (client-go drops them without retry).
    ///
    /// ```
    /// use kevents_core::{Disposition, SinkError, Status};
    /// let busy = SinkError::Status(Box::new(Status::failure(503, "ServiceUnavailable", "etcd")));
    /// assert_eq!(busy.disposition(), Disposition::Retry);
    /// assert_eq!(busy.client_go_disposition(), Disposition::Drop { quiet: false });
    /// let dup = SinkError::Status(Box::new(Status::failure(409, "AlreadyExists", "dup")));
    /// assert_eq!(dup.disposition(), Disposition::Drop { quiet: true });
    /// ```
    pub fn disposition(&self) -> Disposition {
        match self.code() {
            Some(429 | 500 | 502 | 503 | 504) => Disposition::Retry,
            _ => self.client_go_disposition(),
        }
    }

    /// The server's `Retry-After`, if it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            SinkError::Status(s) => s.retry_after,
            _ => None,
        }
    }
}
