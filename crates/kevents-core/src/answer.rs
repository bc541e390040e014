//! An apiserver's answer to an event request, decoded the way every kevents sink decodes it
//! (the HTTP sink in `kevents-http`, the `kube::Client` sink in `kevents-kube`): a 2xx must
//! carry an Event (of the expected API version), anything else becomes a [`SinkError::Status`]
//! built from the server's `Status` body, or, for any other body, a generic status as
//! client-go's `NewGenericServerResponse` builds it. Every text the server sent is sanitised
//! ([`Status::sanitized`], [`sanitize_server_text_to`]) before it can reach an error message
//! or a log line. Pure: the transport reads the body (with its size limit) and hands it here.

use std::time::Duration;

use serde::de::DeserializeOwned;

use crate::status::{SinkError, Status, StatusCause, StatusDetails, sanitize_server_text_to};

/// What a sink read of one answer: the status code, the `Retry-After` header, the body (read up
/// to the sink's limit) and whether the body was larger than that limit.
///
/// ```
/// use kevents_core::answer::Answer;
/// let a = Answer { code: 429, retry_after: None, body: b"slow down", oversized: false };
/// let e = a.status_error();
/// assert_eq!(e.code(), Some(429));
/// assert_eq!(e.disposition(), kevents_core::Disposition::Retry);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer<'a> {
    /// HTTP status code.
    pub code: u16,
    /// The `Retry-After` header in seconds ([`retry_after_header`]).
    pub retry_after: Option<Duration>,
    /// The body as read (at most the limit).
    pub body: &'a [u8],
    /// The body was larger than the limit and was not read (fully).
    pub oversized: bool,
}

/// Longest `Retry-After` a sink reports: the largest `retryAfterSeconds` a `Status` can
/// carry (an `int32`, about 68 years). A larger number, in the header or in the body, is
/// clamped to it rather than ignored: the server asked for a long pause, and the retry
/// policy and the write budget cut it to their own maximum (60 s by default).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(i32::MAX as u64);

/// A `Retry-After` header value (RFC 9110, section 10.2.3): a number of seconds (the
/// apiserver's form; beyond [`MAX_RETRY_AFTER`], however many digits, it is clamped to it)
/// or an HTTP date ([`crate::http_date`]), turned into the time from now until then (zero
/// for a date in the past). Anything else gives `None`.
///
/// ```
/// use std::time::Duration;
/// use kevents_core::answer::{retry_after_header, MAX_RETRY_AFTER};
/// assert_eq!(retry_after_header(" 3 "), Some(Duration::from_secs(3)));
/// assert_eq!(retry_after_header("99999999999999999999999"), Some(MAX_RETRY_AFTER));
/// assert_eq!(retry_after_header("Thu, 01 Jan 1970 00:00:00 GMT"), Some(Duration::ZERO));
/// assert_eq!(retry_after_header("soon"), None);
/// ```
pub fn retry_after_header(value: &str) -> Option<Duration> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    retry_after_header_at(value, now)
}

/// [`retry_after_header`] with the current time given (Unix seconds), for tests and replay.
///
/// ```
/// use std::time::Duration;
/// use kevents_core::answer::retry_after_header_at;
/// let now = 784_111_770.0; // Sun, 06 Nov 1994 08:49:30 GMT
/// assert_eq!(retry_after_header_at("Sun, 06 Nov 1994 08:49:37 GMT", now), Some(Duration::from_secs(7)));
/// assert_eq!(retry_after_header_at("Sunday, 06-Nov-94 08:49:40 GMT", now), Some(Duration::from_secs(10)));
/// assert_eq!(retry_after_header_at("-5", now), None);
/// ```
pub fn retry_after_header_at(value: &str, now_unix_secs: f64) -> Option<Duration> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Every digit string is a delay; one too large for a u64 is the maximum too.
        let secs = v.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER));
    }
    let at = crate::http_date::parse_http_date(v)? as f64;
    let wait = (at - now_unix_secs).max(0.0);
    Some(Duration::from_secs_f64(
        wait.min(MAX_RETRY_AFTER.as_secs_f64()),
    ))
}

/// A [`SinkError::UnexpectedObject`] whose message may quote the server (a JSON decoding
/// error names the value it did not expect): sanitised and bounded (512 characters).
///
/// ```
/// let e = kevents_core::answer::unexpected_object("bad \u{1b}[2J value");
/// assert_eq!(e.to_string(), "unexpected response object: bad \\u{1b}[2J value");
/// ```
pub fn unexpected_object(message: impl std::fmt::Display) -> SinkError {
    SinkError::UnexpectedObject(sanitize_server_text_to(&message.to_string(), 512))
}

/// The reason client-go's `NewGenericServerResponse` gives a status code, and its message:
/// the codes it names, `InternalError` for any other 5xx, and for anything else (a 3xx, which
/// is not followed, or another 4xx) `Unknown` with the code.
///
/// ```
/// use kevents_core::answer::generic_reason;
/// assert_eq!(generic_reason(429).0, "TooManyRequests");
/// assert_eq!(generic_reason(502).0, "InternalError");
/// assert_eq!(
///     generic_reason(302),
///     ("Unknown", "the server responded with the status code 302 but did not return more information".to_owned())
/// );
/// ```
pub fn generic_reason(code: u16) -> (&'static str, String) {
    let (reason, message) = match code {
        400 => (
            "BadRequest",
            "the server rejected our request for an unknown reason",
        ),
        401 => (
            "Unauthorized",
            "the server has asked for the client to provide credentials",
        ),
        403 => (
            "Forbidden",
            "the server does not allow access to the requested resource",
        ),
        404 => (
            "NotFound",
            "the server could not find the requested resource",
        ),
        405 => (
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        ),
        406 => (
            "NotAcceptable",
            "the server was unable to respond with a content type that the client supports",
        ),
        409 => ("Conflict", "the server reported a conflict"),
        410 => ("Expired", "the server no longer has the requested resource"),
        413 => (
            "RequestEntityTooLarge",
            "the server rejected the request because it is too large",
        ),
        415 => (
            "UnsupportedMediaType",
            "the server was unable to understand the content type of the request",
        ),
        422 => (
            "Invalid",
            "the server rejected our request due to an error in our request",
        ),
        429 => (
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        ),
        500 => (
            "InternalError",
            "an error on the server has prevented the request from succeeding",
        ),
        503 => (
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        ),
        504 => (
            "Timeout",
            "the server was unable to return a response in the time allotted, but may still be processing the request",
        ),
        _ if code >= 500 => (
            "InternalError",
            "an error on the server has prevented the request from succeeding",
        ),
        // A 3xx (not followed) or another 4xx: client-go says what it got, not a server error.
        _ => {
            return (
                "Unknown",
                format!(
                    "the server responded with the status code {code} but did not return more information"
                ),
            );
        }
    };
    (reason, message.to_owned())
}

impl Answer<'_> {
    /// Whether the code is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// A non-2xx answer as a [`SinkError::Status`]: the server's `Status` if the body is one,
    /// else a generic one built from the code (as client-go's REST client does) with a
    /// sanitised body excerpt (at most 256 characters) as cause `UnexpectedServerResponse`.
    /// `retry_after` is the header, else `details.retryAfterSeconds`.
    ///
    /// ```
    /// use kevents_core::answer::Answer;
    /// use std::time::Duration;
    /// let body = br#"{"kind":"Status","status":"Failure","reason":"AlreadyExists","code":409}"#;
    /// let a = Answer { code: 409, retry_after: None, body, oversized: false };
    /// assert!(a.status_error().is_already_exists());
    /// let proxy = Answer { code: 502, retry_after: Some(Duration::from_secs(7)),
    ///                      body: b"<html>bad gateway</html>", oversized: false };
    /// let e = proxy.status_error();
    /// assert_eq!((e.code(), e.retry_after()), (Some(502), Some(Duration::from_secs(7))));
    /// ```
    pub fn status_error(&self) -> SinkError {
        let code = self.code;
        let decoded = (!self.oversized)
            .then(|| serde_json::from_slice::<serde_json::Value>(self.body).ok())
            .flatten()
            .filter(|v| v.get("kind").and_then(|k| k.as_str()) == Some("Status"))
            .and_then(|v| serde_json::from_value::<Status>(v).ok())
            .map(Status::sanitized);
        let mut status = match decoded {
            Some(mut s) => {
                if s.code == 0 {
                    s.code = code;
                }
                s
            }
            None => {
                let (reason, message) = generic_reason(code);
                let mut s = Status::failure(code, reason, message);
                let excerpt = String::from_utf8_lossy(&self.body[..self.body.len().min(256)]);
                let snippet = sanitize_server_text_to(excerpt.trim(), 256);
                if !snippet.is_empty() || self.oversized {
                    s.details = Some(StatusDetails {
                        causes: vec![StatusCause {
                            type_: "UnexpectedServerResponse".into(),
                            message: if self.oversized {
                                "(response body exceeds the size limit)".into()
                            } else {
                                snippet
                            },
                            field: String::new(),
                        }],
                        ..Default::default()
                    });
                }
                s
            }
        };
        status.retry_after = self.retry_after.or_else(|| {
            status
                .details
                .as_ref()
                .and_then(|d| d.retry_after_seconds)
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(s as u64).min(MAX_RETRY_AFTER))
        });
        SinkError::Status(Box::new(status))
    }

    /// A 2xx answer must carry an Event (of `api_version` when given: its `apiVersion` is
    /// checked too); anything else is the server's error ([`Answer::status_error`]) or
    /// [`SinkError::UnexpectedObject`].
    ///
    /// ```
    /// use kevents_core::answer::Answer;
    /// use kevents_core::{Event, SinkError};
    /// let ok = Answer { code: 201, retry_after: None, oversized: false,
    ///                   body: br#"{"kind":"Event","metadata":{"name":"a","resourceVersion":"5"}}"# };
    /// let e: Event = ok.decode_event(None)?;
    /// assert_eq!(e.metadata.resource_version, "5");
    /// let status = Answer { code: 200, retry_after: None, oversized: false, body: br#"{"kind":"Status"}"# };
    /// assert!(matches!(status.decode_event::<Event>(None), Err(SinkError::UnexpectedObject(_))));
    /// # Ok::<(), SinkError>(())
    /// ```
    pub fn decode_event<T: DeserializeOwned>(
        &self,
        api_version: Option<&str>,
    ) -> Result<T, SinkError> {
        from_event_value(self.event_value(api_version)?)
    }

    /// The answer's body as a JSON value, once it is checked to be a 2xx answer carrying an
    /// Event of `api_version` (any core/v1 `Event` for `None`). Decoded once: the typed event
    /// is made from this value (`from_event_value`), not from a second tree.
    fn event_value(&self, api_version: Option<&str>) -> Result<serde_json::Value, SinkError> {
        if !self.is_success() {
            return Err(self.status_error());
        }
        if self.oversized {
            return Err(SinkError::UnexpectedObject(
                "response body exceeds the size limit".into(),
            ));
        }
        let value: serde_json::Value = serde_json::from_slice(self.body)
            .map_err(|e| unexpected_object(format_args!("response is not JSON: {e}")))?;
        let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or("");
        match api_version {
            None if kind != "Event" => {
                return Err(unexpected_object(format_args!(
                    "expected an Event, got kind {kind:?}"
                )));
            }
            None => {}
            Some(want) => {
                let api = value
                    .get("apiVersion")
                    .and_then(|k| k.as_str())
                    .unwrap_or("");
                if kind != "Event" || api != want {
                    return Err(unexpected_object(format_args!(
                        "expected an {want} Event, got {api:?} kind {kind:?}"
                    )));
                }
            }
        }
        Ok(value)
    }

    /// [`Answer::decode_event`] of the answer to a write (create or patch) of the event
    /// `namespace`/`name`: the event the server answers with must be that one. Another
    /// namespace or name, or a name that is not a DNS-1123 subdomain, is
    /// [`SinkError::AnswerMismatch`], so that a server's answer can never rename an event (a
    /// later PATCH would go to that name) nor put `..` or an empty segment into a URL. When
    /// `name` is empty (a create without a name, which the apiserver refuses), any valid
    /// name the server gave it is accepted.
    ///
    /// ```
    /// use kevents_core::answer::Answer;
    /// use kevents_core::{Event, SinkError};
    /// let body = br#"{"kind":"Event","metadata":{"name":"someone-else.1","namespace":"ns"}}"#;
    /// let a = Answer { code: 201, retry_after: None, oversized: false, body };
    /// let r = a.decode_written::<Event>(None, "ns", "web.17a0");
    /// assert!(matches!(r, Err(SinkError::AnswerMismatch(_))));
    /// let ok = a.decode_written::<Event>(None, "ns", "someone-else.1")?;
    /// assert_eq!(ok.metadata.name, "someone-else.1");
    /// # Ok::<(), SinkError>(())
    /// ```
    pub fn decode_written<T: DeserializeOwned>(
        &self,
        api_version: Option<&str>,
        namespace: &str,
        name: &str,
    ) -> Result<T, SinkError> {
        let value = self.event_value(api_version)?;
        let meta = value.get("metadata");
        let field = |f: &str| meta.and_then(|m| m.get(f)).and_then(|v| v.as_str());
        let got_name = field("name").unwrap_or("");
        let got_namespace = field("namespace").unwrap_or("");
        let shown = |s: &str| sanitize_server_text_to(s, 100);
        if got_namespace != namespace {
            return Err(SinkError::AnswerMismatch(format!(
                "wrote an event in namespace {namespace:?}, the answer is in namespace {:?}",
                shown(got_namespace)
            )));
        }
        if !crate::name::is_dns1123_subdomain(got_name) {
            return Err(SinkError::AnswerMismatch(format!(
                "wrote event {name:?}, the answer names {:?}, which is not a valid event name",
                shown(got_name)
            )));
        }
        if !name.is_empty() && got_name != name {
            return Err(SinkError::AnswerMismatch(format!(
                "wrote event {name:?}, the answer names {:?}",
                shown(got_name)
            )));
        }
        from_event_value(value)
    }
}

/// The typed event of a checked answer's JSON value.
fn from_event_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, SinkError> {
    serde_json::from_value(value)
        .map_err(|e| unexpected_object(format_args!("malformed Event: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_body_is_decoded_and_sanitised() {
        let body = br#"{"kind":"Status","status":"Failure","message":"a\u001b[2Jb",
            "reason":"TooManyRequests","details":{"retryAfterSeconds":3},"code":429}"#;
        let a = Answer {
            code: 429,
            retry_after: None,
            body,
            oversized: false,
        };
        let SinkError::Status(s) = a.status_error() else {
            panic!("not a status")
        };
        assert_eq!(s.message, "a\\u{1b}[2Jb");
        assert_eq!(s.retry_after, Some(Duration::from_secs(3)));
    }

    #[test]
    fn oversized_error_body_gets_a_cause() {
        let a = Answer {
            code: 500,
            retry_after: None,
            body: b"",
            oversized: true,
        };
        let SinkError::Status(s) = a.status_error() else {
            panic!("not a status")
        };
        assert_eq!(s.reason, "InternalError");
        assert_eq!(
            s.details.unwrap().causes[0].message,
            "(response body exceeds the size limit)"
        );
    }

    #[test]
    fn retry_after_numbers_are_clamped_and_dates_read() {
        let now = 1_764_150_000.0; // Wed, 26 Nov 2025 09:40:00 GMT
        for (v, want) in [
            ("0", Some(Duration::ZERO)),
            ("99999", Some(Duration::from_secs(99_999))),
            ("18446744073709551616", Some(MAX_RETRY_AFTER)),
            ("2147483648", Some(MAX_RETRY_AFTER)),
            (
                "Wed, 26 Nov 2025 09:40:30 GMT",
                Some(Duration::from_secs(30)),
            ),
            (
                "Wednesday, 26-Nov-25 09:41:00 GMT",
                Some(Duration::from_secs(60)),
            ),
            ("Wed Nov 26 09:40:05 2025", Some(Duration::from_secs(5))),
            ("Wed, 26 Nov 2025 09:00:00 GMT", Some(Duration::ZERO)),
            ("Fri, 31 Dec 9999 23:59:59 GMT", Some(MAX_RETRY_AFTER)),
            ("1.5", None),
            ("", None),
            ("+3", None),
        ] {
            assert_eq!(retry_after_header_at(v, now), want, "{v}");
        }
    }

    #[test]
    fn an_out_of_range_retry_after_seconds_keeps_the_message() {
        let body = br#"{"kind":"Status","status":"Failure","message":"etcd is compacting",
            "reason":"TooManyRequests","details":{"retryAfterSeconds":99999999999999},"code":429}"#;
        let a = Answer {
            code: 429,
            retry_after: None,
            body,
            oversized: false,
        };
        let SinkError::Status(s) = a.status_error() else {
            panic!("not a status")
        };
        assert_eq!(s.message, "etcd is compacting");
        assert_eq!(s.reason, "TooManyRequests");
        assert_eq!(s.retry_after, Some(MAX_RETRY_AFTER));
    }

    #[test]
    fn a_written_answer_must_name_the_event_sent() {
        let answer = |body: &'static str| Answer {
            code: 201,
            retry_after: None,
            body: body.as_bytes(),
            oversized: false,
        };
        let decode = |body: &'static str, ns: &str, name: &str| {
            answer(body).decode_written::<serde_json::Value>(None, ns, name)
        };
        let ok = r#"{"kind":"Event","metadata":{"name":"web.1","namespace":"ns"}}"#;
        assert!(decode(ok, "ns", "web.1").is_ok());
        for (body, ns, name) in [
            (ok, "ns", "web.2"),
            (ok, "other", "web.1"),
            (
                r#"{"kind":"Event","metadata":{"name":"..","namespace":"ns"}}"#,
                "ns",
                "..",
            ),
            (
                r#"{"kind":"Event","metadata":{"name":"","namespace":"ns"}}"#,
                "ns",
                "",
            ),
            (
                r#"{"kind":"Event","metadata":{"namespace":"ns"}}"#,
                "ns",
                "web.1",
            ),
            (
                r#"{"kind":"Event","metadata":{"name":"web.1"}}"#,
                "ns",
                "web.1",
            ),
            (
                r#"{"kind":"Event","metadata":{"name":"a/b","namespace":"ns"}}"#,
                "ns",
                "",
            ),
        ] {
            let r = decode(body, ns, name);
            assert!(
                matches!(r, Err(SinkError::AnswerMismatch(_))),
                "{body}: {r:?}"
            );
        }
        // A nameless create: a valid name the server chose is accepted.
        assert!(decode(ok, "ns", "").is_ok());
        // A server error stays the server's error.
        let refused = Answer {
            code: 409,
            retry_after: None,
            body: b"",
            oversized: false,
        };
        assert!(
            refused
                .decode_written::<serde_json::Value>(None, "ns", "web.1")
                .is_err_and(|e| e.code() == Some(409))
        );
    }

    #[test]
    fn wrong_api_version_is_unexpected() {
        let a = Answer {
            code: 200,
            retry_after: None,
            body: br#"{"kind":"Event","apiVersion":"v1"}"#,
            oversized: false,
        };
        let r: Result<serde_json::Value, _> = a.decode_event(Some("events.k8s.io/v1"));
        assert!(matches!(r, Err(SinkError::UnexpectedObject(_))));
    }
}
