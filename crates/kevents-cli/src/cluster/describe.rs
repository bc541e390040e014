//! How a failed request and a duration are said in one short line: what the probe, the
//! health notes and the read-back print (`connection refused`, `TLS: ...`, `no answer within
//! 5 s`, `403 Forbidden: ...`), with the transport's long error chain cut to its cause.

use std::time::Duration;

use kevents_core::SinkError;

use crate::sanitize;

/// A short reason for a failed request: `connection refused`, `TLS: ...`, `no answer
/// within 5 s`, `401 Unauthorized: ...`, ... (not yet escaped;
/// [`Failure::new`](super::exit::Failure::new) and [`one_line`](super::secrets::one_line) do
/// that).
pub fn describe(e: &SinkError) -> String {
    match e {
        SinkError::Status(s) => {
            let message = sanitize::truncate(s.message.clone(), 300);
            format!("{} {}: {message}", s.code, s.reason)
        }
        SinkError::Timeout(d) => format!("no answer within {}", secs(*d)),
        SinkError::Transport(t) => {
            let lower = t.to_ascii_lowercase();
            // reqwest's chain: `error sending request for url (...): client error (Connect):
            // <cause>`; the cause is what matters.
            let cause = t
                .rsplit_once("): ")
                .map_or(t.as_str(), |(_, c)| c)
                .trim()
                .to_owned();
            if lower.contains("connection refused") {
                "connection refused".into()
            } else if lower.contains("dns error") || lower.contains("failed to lookup") {
                sanitize::truncate(cause, 300)
            } else if lower.contains("certificate")
                || lower.contains("tls")
                || lower.contains("handshake")
                || lower.contains("ssl")
            {
                sanitize::truncate(format!("TLS: {cause}"), 300)
            } else if lower.contains("connection reset") {
                "connection reset".into()
            } else {
                sanitize::truncate(t.clone(), 300)
            }
        }
        other => sanitize::truncate(other.to_string(), 300),
    }
}

/// `5 s`, `1.5 s`.
pub fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// `x` rounded to `digits` decimals (the benches' JSON figures).
pub fn round(x: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (x * m).round() / m
}

/// A failed list as the sink error it stands for: a page's own error as is; a list that
/// broke its bounds (repeated continue token, too many pages, too large) as an unexpected
/// answer, with its explanation.
pub fn list_error(e: kevents_http::ListError) -> SinkError {
    match e {
        kevents_http::ListError::Sink(e) => e,
        other => SinkError::UnexpectedObject(other.to_string()),
    }
}
