//! Occurrences the server does not have because it refused a write for good (a 4xx that
//! retrying cannot fix), counted by both chains, by cause ([`WriteRefusal`], [`NotStored`]).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use kevents_core::{Disposition, SinkError};

use super::names;

pub use crate::stats::{MAX_NOT_STORED_CAUSES, OTHER_CAUSES};

/// Longest reason kept in a cause (characters); a longer one is cut.
const MAX_REASON_CHARS: usize = 48;

/// A write the server refused for good, as counted: its status code, the request's verb
/// and API, and the short stable text of its cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WriteRefusal {
    /// The HTTP status (400..=499).
    pub(crate) code: u16,
    /// `create` or `patch`.
    pub(crate) verb: &'static str,
    /// `core/v1` or `events.k8s.io/v1`.
    pub(crate) api: &'static str,
    /// `403 Forbidden: create events.k8s.io/v1 events in namespace "default"`.
    pub(crate) cause: String,
}

impl WriteRefusal {
    /// The refusal `err` is, for a `verb` request of `api` in `namespace`, if it is one: a
    /// status answer 400..=499 the chain does not retry (`disposition`), other than
    /// AlreadyExists (the event is there). A 404 on a PATCH never gets here (it is
    /// re-created); 429 and transport errors are retried. The cause holds the status code,
    /// the server's reason (sanitized, at most 48 characters), the verb, the API and the
    /// namespace, never the server's message (which may name users or tokens).
    pub(crate) fn of(
        err: &SinkError,
        disposition: Disposition,
        verb: &'static str,
        api: &'static str,
        namespace: &str,
    ) -> Option<WriteRefusal> {
        let SinkError::Status(status) = err else {
            return None;
        };
        if !(400..500).contains(&status.code)
            || err.is_already_exists()
            || disposition == Disposition::Retry
        {
            return None;
        }
        let mut reason =
            kevents_core::status::sanitize_server_text_to(&status.reason, MAX_REASON_CHARS);
        if reason.is_empty() {
            reason = "refused".into();
        }
        let cause = format!(
            "{} {reason}: {verb} {api} events in namespace {namespace:?}",
            status.code
        );
        Some(WriteRefusal {
            code: status.code,
            verb,
            api,
            cause,
        })
    }
}

/// The occurrences one chain could not store, in total and by cause (bounded:
/// [`MAX_NOT_STORED_CAUSES`] causes, the rest under [`OTHER_CAUSES`]). Mirrored to
/// `kevents_occurrences_not_stored_total{sink,status,verb,api}` (no namespace label: bounded).
#[derive(Debug)]
pub(crate) struct NotStored {
    sink: String,
    total: AtomicU64,
    causes: Mutex<BTreeMap<String, u64>>,
}

impl NotStored {
    pub(crate) fn new(sink: &str) -> Self {
        NotStored {
            sink: sink.to_owned(),
            total: AtomicU64::new(0),
            causes: Mutex::new(BTreeMap::new()),
        }
    }

    /// `n` occurrences will never be stored because of `refusal`.
    pub(crate) fn add(&self, refusal: &WriteRefusal, n: u64) {
        if n == 0 {
            return;
        }
        self.total.fetch_add(n, Ordering::Relaxed);
        {
            let mut causes = self.causes.lock().unwrap_or_else(|p| p.into_inner());
            let known = causes.contains_key(refusal.cause.as_str());
            // OTHER_CAUSES is one of the entries once it exists: MAX + 1 at most.
            let key = if known || causes.len() < MAX_NOT_STORED_CAUSES {
                refusal.cause.as_str()
            } else {
                OTHER_CAUSES
            };
            match causes.get_mut(key) {
                Some(v) => *v += n,
                None => {
                    causes.insert(key.to_owned(), n);
                }
            }
        }
        metrics::counter!(
            names::NOT_STORED,
            "sink" => self.sink.clone(),
            "status" => refusal.code.to_string(),
            "verb" => refusal.verb,
            "api" => refusal.api,
        )
        .increment(n);
        tracing::warn!(
            target: "kevents::drops",
            sink = %self.sink,
            occurrences = n,
            cause = %refusal.cause,
            "the apiserver refused a write for good: occurrences not stored"
        );
    }

    /// Occurrences not stored so far.
    pub(crate) fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// By cause, most occurrences first (then by cause), [`OTHER_CAUSES`] last.
    pub(crate) fn by_cause(&self) -> Vec<(String, u64)> {
        let causes = self.causes.lock().unwrap_or_else(|p| p.into_inner());
        sorted(causes.iter().map(|(k, v)| (k.clone(), *v)))
    }
}

pub(crate) use crate::stats::sorted;

#[cfg(test)]
mod tests {
    use super::*;
    use kevents_core::Status;

    fn status(code: u16, reason: &str) -> SinkError {
        SinkError::Status(Box::new(Status::failure(
            code,
            reason,
            "user \"x\" token abc",
        )))
    }

    #[test]
    fn a_refusal_is_a_permanent_4xx_named_without_the_message() {
        let drop = Disposition::Drop { quiet: false };
        let r = WriteRefusal::of(
            &status(403, "Forbidden"),
            drop,
            "create",
            "events.k8s.io/v1",
            "default",
        )
        .expect("a refusal");
        assert_eq!(
            r.cause,
            "403 Forbidden: create events.k8s.io/v1 events in namespace \"default\""
        );
        assert!(!r.cause.contains("token"));
        let none = |e: &SinkError, d| WriteRefusal::of(e, d, "create", "core/v1", "ns").is_none();
        assert!(none(
            &status(409, "AlreadyExists"),
            Disposition::Drop { quiet: true }
        ));
        assert!(none(&status(500, "InternalError"), drop));
        assert!(none(&status(429, "TooManyRequests"), Disposition::Retry));
        assert!(none(&SinkError::Transport("reset".into()), drop));
        assert!(!none(&status(422, "Invalid"), drop));
    }

    #[test]
    fn the_tally_is_bounded() {
        let t = NotStored::new("s");
        for i in 0..MAX_NOT_STORED_CAUSES + 10 {
            let r = WriteRefusal::of(
                &status(403, "Forbidden"),
                Disposition::Drop { quiet: false },
                "create",
                "core/v1",
                &format!("ns-{i}"),
            )
            .expect("refusal");
            t.add(&r, 2);
        }
        let by = t.by_cause();
        assert_eq!(by.len(), MAX_NOT_STORED_CAUSES + 1);
        assert_eq!(by.last(), Some(&(OTHER_CAUSES.to_owned(), 20)));
        assert_eq!(t.total(), 2 * (MAX_NOT_STORED_CAUSES as u64 + 10));
    }
}
