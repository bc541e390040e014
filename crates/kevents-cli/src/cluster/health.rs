//! The health of the writes to an apiserver while a story or benchmark runs: [`WatchedSink`]
//! wraps the sink and reports every request's fate to a [`Health`] (requests without an
//! answer, the last error, the last success), from which the wait notes and the failure
//! checks read whether the server is in trouble.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kevents_core::{Event, EventSink, SinkError, SinkFuture};

use super::describe::describe;

/// Whether a failed write says something about the apiserver's health (it cannot be
/// reached, does not answer, refuses us, or is overloaded), as opposed to a refusal of
/// one event (404 before a re-create, 409, 422).
fn is_trouble(e: &SinkError) -> bool {
    match e {
        SinkError::Status(s) => matches!(s.code, 401 | 403 | 429) || s.code >= 500,
        SinkError::Transport(_)
        | SinkError::Timeout(_)
        | SinkError::UnexpectedObject(_)
        | SinkError::AnswerMismatch(_) => true,
        SinkError::Construction(_) => false,
    }
}

#[derive(Default)]
struct HealthState {
    next_id: u64,
    /// Requests started and not finished, by id, with their start.
    outstanding: BTreeMap<u64, Instant>,
    last_success: Option<Instant>,
    first_request: Option<Instant>,
    first_answer: Option<Instant>,
    /// When, why, and whether the write is retried.
    last_error: Option<(Instant, String, bool)>,
    /// The pause the last failed request's answer asked for (a 429's Retry-After).
    last_retry_after: Option<Duration>,
    troubles_since_success: u64,
}

/// What the writes to an apiserver went through: requests without an answer yet, the last
/// error, the last success. Fed by [`WatchedSink`].
#[derive(Default)]
pub struct Health {
    state: Mutex<HealthState>,
}

/// A copy of [`Health`] at one instant.
#[derive(Debug, Clone, Default)]
pub struct HealthReport {
    /// How long the oldest of them has been waiting.
    pub oldest: Option<Duration>,
    /// The last failed request: how long ago, and why ([`describe`]).
    pub last_error: Option<(Duration, String)>,
    /// Whether the last failed request's error is retried (a 403 or a 422 is not).
    pub last_error_retried: bool,
    /// The pause the last failed request's answer asked for (a 429's Retry-After), if any.
    pub last_error_retry_after: Option<Duration>,
    /// How long ago the last request succeeded.
    pub since_success: Option<Duration>,
    /// Failures that say the server is in trouble since the last success.
    pub troubles_since_success: u64,
}

impl Health {
    fn lock(&self) -> MutexGuard<'_, HealthState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When the first request was sent (a fleet's processes started together do not send
    /// their first write together: the benches report how far apart they did).
    pub fn first_request(&self) -> Option<Instant> {
        self.lock().first_request
    }

    /// When the first answer (of any kind, a 429 too) came back: kube-apiserver on 2 cores
    /// answered the first writes of 8 processes started together 21-155 ms apart.
    pub fn first_answer(&self) -> Option<Instant> {
        self.lock().first_answer
    }

    /// Now.
    pub fn report(&self) -> HealthReport {
        let s = self.lock();
        HealthReport {
            oldest: s.outstanding.values().min().map(Instant::elapsed),
            last_error: s
                .last_error
                .as_ref()
                .map(|(t, e, _)| (t.elapsed(), e.clone())),
            last_error_retried: s.last_error.as_ref().is_some_and(|(_, _, r)| *r),
            last_error_retry_after: s.last_retry_after,
            since_success: s.last_success.map(|t| t.elapsed()),
            troubles_since_success: s.troubles_since_success,
        }
    }

    fn start(self: &Arc<Self>) -> Outstanding {
        let mut s = self.lock();
        let id = s.next_id;
        s.next_id += 1;
        let now = Instant::now();
        s.first_request.get_or_insert(now);
        s.outstanding.insert(id, now);
        Outstanding {
            health: Arc::clone(self),
            id,
        }
    }

    fn finish<T>(&self, result: &Result<T, SinkError>) {
        let mut s = self.lock();
        let now = Instant::now();
        s.first_answer.get_or_insert(now);
        match result {
            Ok(_) => {
                s.last_success = Some(now);
                s.troubles_since_success = 0;
            }
            Err(e) => {
                if is_trouble(e) {
                    s.troubles_since_success += 1;
                }
                let retried = e.disposition() == kevents_core::Disposition::Retry;
                s.last_error = Some((now, describe(e), retried));
                s.last_retry_after = e.retry_after();
            }
        }
    }
}

impl HealthReport {
    /// Whether writes are in trouble: a failure that says so since the last success, or a
    /// request without an answer for longer than `slow`.
    pub fn failing(&self, slow: Duration) -> bool {
        self.troubles_since_success > 0 || self.oldest.is_some_and(|d| d > slow)
    }
}

/// Removes a request from [`Health`]'s outstanding set when it ends or is dropped.
struct Outstanding {
    health: Arc<Health>,
    id: u64,
}

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.health.lock().outstanding.remove(&self.id);
    }
}

/// An [`EventSink`] that reports every request's fate to a [`Health`].
#[derive(Clone)]
pub struct WatchedSink<S> {
    sink: S,
    health: Arc<Health>,
}

impl<S: EventSink> WatchedSink<S> {
    /// Watches `sink`'s requests into `health`.
    pub fn new(sink: S, health: Arc<Health>) -> Self {
        WatchedSink { sink, health }
    }

    fn watch(&self, fut: SinkFuture) -> SinkFuture {
        let health = Arc::clone(&self.health);
        Box::pin(async move {
            let outstanding = health.start();
            let result = fut.await;
            health.finish(&result);
            drop(outstanding);
            result
        })
    }
}

impl<S: EventSink> EventSink for WatchedSink<S> {
    fn create(&self, event: &Event) -> SinkFuture {
        self.watch(self.sink.create(event))
    }

    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        self.watch(self.sink.patch(event, patch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevents_sim::MemoryApiServer;
    use kevents_sim::rate_limit::{EventRateLimits, RateLimit};

    fn event(name: &str) -> Event {
        let mut e = Event::default();
        (e.metadata.namespace, e.metadata.name, e.count) = ("default".into(), name.into(), 1);
        e
    }

    /// The first request and the first answer are kept, a 429 being an answer, and later
    /// ones do not move them.
    #[actix_rt::test]
    async fn first_request_and_first_answer() {
        let api = MemoryApiServer::new().with_event_rate_limits(&EventRateLimits::from(vec![
            RateLimit {
                kind: kevents_sim::LimitType::Server,
                qps: 1,
                burst: 1,
                cache_size: 0,
            },
        ]));
        let health = Arc::new(Health::default());
        let sink = WatchedSink::new(api, Arc::clone(&health));
        assert!(health.first_request().is_none() && health.first_answer().is_none());
        let before = Instant::now();
        assert!(sink.create(&event("a")).await.is_ok());
        let (request, answer) = (health.first_request(), health.first_answer());
        assert!(request.is_some_and(|t| t >= before));
        assert!(answer >= request);
        // Refused (the bucket is empty): an answer, but not the first.
        assert!(sink.create(&event("b")).await.is_err());
        assert_eq!(health.first_request(), request);
        assert_eq!(health.first_answer(), answer);
        assert!(health.report().troubles_since_success > 0);
    }
}
