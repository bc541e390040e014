//! The fault plan a test sets on a running simulator ([`Faults`]): latency, error answers,
//! connection resets, endless lists and the hostile-server modes. The server applies it to
//! every request in order and counts its counters down; the constructors here are the
//! common plans.

use std::time::Duration;

/// The body of an injected error answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum FaultBody {
    /// A `metav1.Status` with the code, a matching reason and `retryAfterSeconds`.
    #[default]
    Status,
    /// Plain text, as a proxy or load balancer in front of the apiserver would send.
    Text(String),
    /// This JSON text as it is (`Content-Type: application/json`), e.g. a `Status` with a
    /// hostile message ([`Faults::error_status`]).
    Json(String),
}

/// Event lists that never end (`GET` of the events of either API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListFault {
    /// Every list answer is the first page with the same `continue` token.
    RepeatContinue,
    /// Every list answer is the first page with a fresh `continue` token, forever.
    EndlessContinue,
}

/// An error answer injected instead of handling the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFault {
    /// HTTP status code (429, 500, 503, ... or even 200 or 307).
    pub code: u16,
    /// `Retry-After` header (seconds), also put in the Status' `retryAfterSeconds`.
    pub retry_after: Option<u32>,
    /// How many more requests get this answer (`u64::MAX`: until changed).
    pub times: u64,
    /// The body.
    pub body: FaultBody,
    /// Extra headers (e.g. `Location` for a redirect).
    pub headers: Vec<(String, String)>,
}

/// The fault plan, applied to every request in order: latency, then a reset (if any are
/// left), then an error answer (if any are left). Counters count down as requests arrive.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Faults {
    /// Delay before every request is handled.
    pub latency: Duration,
    /// Reset the TCP connection (RST, no response) in the middle of this many requests.
    pub resets: u64,
    /// Answer requests with an error instead of handling them.
    pub error: Option<ErrorFault>,
    /// Event lists never end.
    pub list: Option<ListFault>,
    /// Successful answers (2xx) are padded with trailing spaces to at least this many bytes
    /// (0: off), as an echo larger than a client's response size limit. The request itself
    /// is handled normally (the event is stored).
    pub pad_success_to: usize,
    /// Events created while this is set are stored (and echoed) with this message (core/v1
    /// `message`, events.k8s.io/v1 `note`) instead of the one sent, e.g. text with escapes,
    /// CR or LF.
    pub stored_message: Option<String>,
    /// Accept connections but never answer: no TLS handshake and no HTTP answer on new
    /// connections, no answer to requests on open ones, until the connection is closed or the
    /// fault is removed (requests already waiting stay unanswered).
    pub unresponsive: bool,
}

impl Faults {
    /// No faults.
    pub fn none() -> Self {
        Faults::default()
    }

    /// The next `times` requests are answered `code` with a Status body.
    ///
    /// ```
    /// let f = kevents_sim::Faults::error(500, 2);
    /// assert_eq!(f.error.unwrap().times, 2);
    /// ```
    pub fn error(code: u16, times: u64) -> Self {
        Faults {
            error: Some(ErrorFault {
                code,
                retry_after: None,
                times,
                body: FaultBody::Status,
                headers: Vec::new(),
            }),
            ..Faults::default()
        }
    }

    /// The next `times` requests are answered 429 with `Retry-After: retry_after_secs`.
    ///
    /// ```
    /// let f = kevents_sim::Faults::too_many_requests(1, 10);
    /// assert_eq!(f.error.unwrap().retry_after, Some(1));
    /// ```
    pub fn too_many_requests(retry_after_secs: u32, times: u64) -> Self {
        let mut f = Faults::error(429, times);
        if let Some(e) = f.error.as_mut() {
            e.retry_after = Some(retry_after_secs);
        }
        f
    }

    /// Every request is delayed by `latency`.
    ///
    /// ```
    /// let f = kevents_sim::Faults::latency(std::time::Duration::from_millis(50));
    /// assert!(f.error.is_none());
    /// ```
    pub fn latency(latency: Duration) -> Self {
        Faults {
            latency,
            ..Faults::default()
        }
    }

    /// The next `times` requests are answered `code` with a `Status` of this reason and
    /// message (any text: escapes, CR/LF, ...).
    ///
    /// ```
    /// let f = kevents_sim::Faults::error_status(500, 1, "InternalError", "\u{1b}[2Jboom\r\n");
    /// assert!(matches!(f.error.unwrap().body, kevents_sim::FaultBody::Json(_)));
    /// ```
    pub fn error_status(code: u16, times: u64, reason: &str, message: &str) -> Self {
        let body = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code,
            "details": {"causes": [{"reason": reason, "message": message, "field": message}]},
        });
        let mut f = Faults::error(code, times);
        if let Some(e) = f.error.as_mut() {
            e.body = FaultBody::Json(body.to_string());
        }
        f
    }

    /// Event lists never end (see [`ListFault`]).
    ///
    /// ```
    /// use kevents_sim::{Faults, ListFault};
    /// assert_eq!(Faults::endless_list(ListFault::RepeatContinue).list, Some(ListFault::RepeatContinue));
    /// ```
    pub fn endless_list(kind: ListFault) -> Self {
        Faults {
            list: Some(kind),
            ..Faults::default()
        }
    }

    /// Accept connections, never answer.
    ///
    /// ```
    /// assert!(kevents_sim::Faults::unresponsive().unresponsive);
    /// ```
    pub fn unresponsive() -> Self {
        Faults {
            unresponsive: true,
            ..Faults::default()
        }
    }

    /// The next `times` requests have their connection reset after the request was read.
    ///
    /// ```
    /// assert_eq!(kevents_sim::Faults::resets(3).resets, 3);
    /// ```
    pub fn resets(times: u64) -> Self {
        Faults {
            resets: times,
            ..Faults::default()
        }
    }
}
