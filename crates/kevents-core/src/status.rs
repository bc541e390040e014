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
    /// Suggested wait before retrying. A number outside `int32` is clamped to its range when
    /// decoded, and a value that is not a number is left out, so that the rest of the
    /// server's `Status` (its message) is kept.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_seconds"
    )]
    pub retry_after_seconds: Option<i32>,
}

/// `retryAfterSeconds` as any JSON value: a number clamped to `i32`'s range, anything else
/// `None`. A strict `i32` would reject the whole `Status` (and its message) for one
/// out-of-range number.
fn lenient_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(match v {
        serde_json::Value::Number(n) => {
            let clamp = |x: f64| x.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32;
            n.as_i64()
                .map(|i| i.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32)
                .or_else(|| n.as_u64().map(|_| i32::MAX))
                .or_else(|| n.as_f64().map(clamp))
        }
        _ => None,
    })
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

    /// This status with every text field passed through [`sanitize_server_text`] and at most
    /// [`MAX_STATUS_CAUSES`] causes (a last one says how many were left out): what a status
    /// decoded from a server's answer becomes before it is shown or logged.
    ///
    /// ```
    /// use kevents_core::Status;
    /// let s = Status::failure(500, "InternalError", "\u{1b}[2Jboom\r\nfake line").sanitized();
    /// assert_eq!(s.message, "\\u{1b}[2Jboom\\r\\nfake line");
    /// assert_eq!(s.reason, "InternalError");
    /// ```
    pub fn sanitized(mut self) -> Self {
        for field in [
            &mut self.kind,
            &mut self.api_version,
            &mut self.status,
            &mut self.message,
            &mut self.reason,
        ] {
            *field = sanitize_server_text(field);
        }
        if let Some(d) = self.details.as_mut() {
            for field in [&mut d.name, &mut d.group, &mut d.kind, &mut d.uid] {
                *field = sanitize_server_text(field);
            }
            let dropped = d.causes.len().saturating_sub(MAX_STATUS_CAUSES);
            d.causes.truncate(MAX_STATUS_CAUSES);
            for c in &mut d.causes {
                for field in [&mut c.type_, &mut c.message, &mut c.field] {
                    *field = sanitize_server_text(field);
                }
            }
            if dropped > 0 {
                d.causes.push(StatusCause {
                    type_: "TooManyCauses".into(),
                    message: format!("{dropped} more causes not shown"),
                    field: String::new(),
                });
            }
        }
        self
    }
}

/// Longest text [`sanitize_server_text`] returns, in characters (escapes included), before
/// its truncation note.
pub const MAX_SERVER_TEXT_CHARS: usize = 1024;

/// Most causes [`Status::sanitized`] keeps.
pub const MAX_STATUS_CAUSES: usize = 32;

/// Whether `c` must not reach a terminal or log line as it is: control characters (C0 with
/// ESC, CR, LF and TAB, DEL, C1) and the invisible format characters that reorder or hide
/// text (bidirectional overrides and isolates, zero-width characters, line and paragraph
/// separators, the byte order mark).
fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// Text that came from a server (a `Status` message, reason or cause, a response body
/// excerpt, a stored event's message) made safe to print to a terminal or a log line: every
/// control or invisible format character is written as a visible escape (`\n`, `\r`,
/// `\t`, otherwise `\u{..}` with the code point in hex, e.g. ESC as `\u{1b}`), and the
/// result is cut at [`MAX_SERVER_TEXT_CHARS`] characters, followed by
/// `… (N more bytes)`. Other text, backslashes included, is kept as it is.
///
/// ```
/// use kevents_core::status::sanitize_server_text;
/// assert_eq!(sanitize_server_text("ok"), "ok");
/// assert_eq!(sanitize_server_text("\u{1b}[31mred\r\nnext"), "\\u{1b}[31mred\\r\\nnext");
/// let long = sanitize_server_text(&"x".repeat(5000));
/// assert!(long.starts_with("xxx") && long.ends_with("… (3976 more bytes)"));
/// ```
pub fn sanitize_server_text(text: &str) -> String {
    sanitize_server_text_to(text, MAX_SERVER_TEXT_CHARS)
}

/// [`sanitize_server_text`] with another length limit (`max_chars` characters of output,
/// escapes included, before the truncation note).
///
/// ```
/// use kevents_core::status::sanitize_server_text_to;
/// assert_eq!(sanitize_server_text_to("abcdef", 3), "abc… (3 more bytes)");
/// assert_eq!(sanitize_server_text_to("a\nb", 80), "a\\nb");
/// ```
pub fn sanitize_server_text_to(text: &str, max_chars: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len().min(max_chars));
    let mut chars = 0usize;
    for (i, c) in text.char_indices() {
        let mut escaped = String::new();
        let piece: &str = if is_unsafe_char(c) {
            match c {
                '\n' => escaped.push_str("\\n"),
                '\r' => escaped.push_str("\\r"),
                '\t' => escaped.push_str("\\t"),
                c => {
                    let _ = write!(escaped, "\\u{{{:x}}}", c as u32);
                }
            }
            &escaped
        } else {
            &text[i..i + c.len_utf8()]
        };
        let len = piece.chars().count();
        if chars + len > max_chars {
            let _ = write!(out, "… ({} more bytes)", text.len() - i);
            return out;
        }
        out.push_str(piece);
        chars += len;
    }
    out
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
    /// The server answered 2xx with an event other than the one written: another name or
    /// namespace, or a name that is not a valid object name. The answer is not learnt from
    /// (later writes keep the event's own name) and the write is not retried.
    #[error("the apiserver answered with another event: {0}")]
    AnswerMismatch(String),
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
            SinkError::Construction(_) | SinkError::AnswerMismatch(_) => {
                Disposition::Drop { quiet: false }
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_control_and_invisible_character_is_escaped() {
        assert_eq!(
            sanitize_server_text(
                "a\u{0}b\u{7f}c\u{85}d\u{9b}e\u{202e}f\u{2028}g\u{feff}h\u{200b}i"
            ),
            "a\\u{0}b\\u{7f}c\\u{85}d\\u{9b}e\\u{202e}f\\u{2028}g\\u{feff}h\\u{200b}i"
        );
        // Other text, multi-byte and backslashes included, is kept.
        assert_eq!(sanitize_server_text("é ü 日本 \\n"), "é ü 日本 \\n");
    }

    #[test]
    fn truncation_counts_escapes_and_never_splits_a_character() {
        assert_eq!(
            sanitize_server_text_to("\u{1b}\u{1b}", 7),
            "\\u{1b}… (1 more bytes)"
        );
        assert_eq!(sanitize_server_text_to("日本語", 2), "日本… (3 more bytes)");
        assert_eq!(sanitize_server_text_to("", 0), "");
        let long = sanitize_server_text(&"\u{1b}".repeat(10_000));
        assert!(
            long.chars().count() <= MAX_SERVER_TEXT_CHARS + 30,
            "{}",
            long.len()
        );
    }

    #[test]
    fn out_of_range_retry_after_seconds_keep_the_status() {
        let decode = |seconds: &str| {
            serde_json::from_str::<Status>(&format!(
                r#"{{"kind":"Status","message":"slow down","details":{{"retryAfterSeconds":{seconds}}},"code":429}}"#
            ))
            .expect("the status is kept")
        };
        let s = decode("99999999999999999999999");
        assert_eq!(s.message, "slow down");
        assert_eq!(s.details.unwrap().retry_after_seconds, Some(i32::MAX));
        assert_eq!(
            decode("4294967296").details.unwrap().retry_after_seconds,
            Some(i32::MAX)
        );
        assert_eq!(
            decode("-4294967296").details.unwrap().retry_after_seconds,
            Some(i32::MIN)
        );
        assert_eq!(decode("2.5").details.unwrap().retry_after_seconds, Some(2));
        assert_eq!(decode("\"7\"").details.unwrap().retry_after_seconds, None);
        assert_eq!(decode("12").details.unwrap().retry_after_seconds, Some(12));
    }

    #[test]
    fn a_mismatched_answer_is_dropped_not_retried() {
        let e = SinkError::AnswerMismatch("x".into());
        assert_eq!(e.disposition(), Disposition::Drop { quiet: false });
        assert_eq!(
            e.client_go_disposition(),
            Disposition::Drop { quiet: false }
        );
    }

    #[test]
    fn sanitized_status_keeps_codes_and_bounds_causes() {
        let mut s = Status::failure(422, "Invalid", "bad\nvalue");
        s.details = Some(StatusDetails {
            name: "x\u{1b}".into(),
            causes: (0..100)
                .map(|i| StatusCause {
                    type_: "FieldValueInvalid".into(),
                    message: format!("m{i}\r"),
                    field: "f".into(),
                })
                .collect(),
            ..Default::default()
        });
        let s = s.sanitized();
        assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
        assert_eq!(s.message, "bad\\nvalue");
        let d = s.details.unwrap();
        assert_eq!(d.name, "x\\u{1b}");
        assert_eq!(d.causes.len(), MAX_STATUS_CAUSES + 1);
        assert_eq!(d.causes[0].message, "m0\\r");
        assert_eq!(
            d.causes[MAX_STATUS_CAUSES].message,
            "68 more causes not shown"
        );
    }
}
