//! The writes of both APIs over a transport: `POST` of an event's JSON, strategic-merge
//! `PATCH`, their answers checked; [`EventSink`] and [`events_v1::EventSink`](crate::events_v1::EventSink) for [`Client`].

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::core_v1::{Event, EventSink, SinkFuture};
use crate::events_v1::{self};
use crate::status::SinkError;
use crate::stored::Stored;

use super::client::{CORE_V1_PATH, Client, EVENTS_V1_PATH, check_path_names, events_path};
use super::transport::{APPLICATION_JSON, Method, Response, STRATEGIC_MERGE_PATCH, Transport};

/// The future of a write: the event as stored, or why not.
type WriteFuture<R> = Pin<Box<dyn Future<Output = Result<Stored<R>, SinkError>> + Send + 'static>>;

impl<T: Transport> Client<T> {
    /// `POST {prefix}/namespaces/{ns}/events` of `event`'s JSON; the answer must be the event
    /// sent, `name` in `namespace` (of `api_version` when given), and a 2xx whose echo is
    /// over the response limit counts as stored as sent ([`stored_as_sent`]).
    fn create_at<E, R>(
        &self,
        prefix: &'static str,
        namespace: &str,
        name: &str,
        event: &E,
        api_version: Option<&'static str>,
    ) -> WriteFuture<R>
    where
        E: Serialize + ?Sized,
        R: DeserializeOwned + 'static,
    {
        let this = self.clone();
        let checked = if self.checks_created_names() {
            check_path_names(namespace, Some(name))
        } else {
            Ok(())
        };
        let written = (namespace.to_owned(), name.to_owned());
        let prepared = checked
            .and_then(|()| events_path(prefix, namespace, None))
            .and_then(|path| {
                crate::json::to_vec(event)
                    .map(|body| (path, body))
                    .map_err(|e| SinkError::Construction(e.to_string()))
            });
        Box::pin(async move {
            let (path, body) = prepared?;
            let cap = this.transport().limits().max_response_bytes;
            let answer = this
                .send(Method::Post, path, Some(APPLICATION_JSON), body, cap)
                .await?;
            decode_written(&answer, "create", cap, api_version, &written.0, &written.1)
        })
    }

    /// `PATCH {prefix}/namespaces/{ns}/events/{name}` with the strategic-merge-patch bytes;
    /// the answer must be the event patched, and a 2xx whose echo is over the response
    /// limit counts as stored as sent.
    fn patch_at<R>(
        &self,
        prefix: &'static str,
        namespace: &str,
        name: &str,
        patch: &[u8],
        api_version: Option<&'static str>,
    ) -> WriteFuture<R>
    where
        R: DeserializeOwned + 'static,
    {
        let this = self.clone();
        let written = (namespace.to_owned(), name.to_owned());
        let prepared = events_path(prefix, namespace, Some(name));
        let body = patch.to_vec();
        Box::pin(async move {
            let path = prepared?;
            let cap = this.transport().limits().max_response_bytes;
            let answer = this
                .send(Method::Patch, path, Some(STRATEGIC_MERGE_PATCH), body, cap)
                .await?;
            decode_written(&answer, "patch", cap, api_version, &written.0, &written.1)
        })
    }
}

/// The answer to a write of `namespace`/`name`: a 2xx too large to read, or whose body is
/// not an event, is stored as sent ([`stored_as_sent`]); otherwise it must carry that event
/// ([`Answer::decode_written`](crate::answer::Answer::decode_written); another one is
/// [`SinkError::AnswerMismatch`], logged at debug level here: the write's caller reports it).
fn decode_written<R: DeserializeOwned>(
    answer: &Response,
    verb: &str,
    limit: usize,
    api_version: Option<&str>,
    namespace: &str,
    name: &str,
) -> Result<Stored<R>, SinkError> {
    if answer.answer().is_success() && answer.oversized {
        return Ok(stored_as_sent(answer, verb, limit));
    }
    let r = answer
        .answer()
        .decode_written::<R>(api_version, namespace, name);
    match r {
        Err(e @ SinkError::AnswerMismatch(_)) => {
            tracing::debug!(error = %e, "apiserver answered a write with another event; the answer is ignored");
            Err(e)
        }
        // A 2xx says the event is stored; only its echo cannot be read. Retrying would
        // re-POST a stored event (409) and count it failed.
        Err(SinkError::UnexpectedObject(why)) if answer.answer().is_success() => {
            tracing::warn!(
                status = answer.code,
                verb,
                why = %why,
                "apiserver answered a write 2xx with a body that is not the event: the event counts as stored, as sent"
            );
            Ok(Stored::AsSent)
        }
        r => r.map(Stored::from),
    }
}

/// A 2xx answer to a create or patch whose body is over the size limit: the server stored
/// the event (a 2xx says so), only its echo was not read. The result is
/// [`Stored::AsSent`]: the recorder learns from the event as sent (without the fields the
/// server sets: `resourceVersion` on a create, `uid`, `creationTimestamp`), and the write
/// is not retried (a retried create would be refused with 409 `AlreadyExists` and
/// counted as rejected).
fn stored_as_sent<R>(answer: &Response, verb: &str, limit: usize) -> Stored<R> {
    tracing::warn!(
        status = answer.code,
        limit,
        verb,
        "apiserver answer larger than the response size limit: the event counts as stored, as sent"
    );
    Stored::AsSent
}

/// core/v1 (client-go `tools/record`'s `EventSinkImpl`): `POST` and strategic-merge `PATCH`
/// of `/api/v1/namespaces/{ns}/events`.
impl<T: Transport> EventSink for Client<T> {
    fn create(&self, event: &Event) -> SinkFuture {
        let meta = &event.metadata;
        self.create_at(CORE_V1_PATH, &meta.namespace, &meta.name, event, None)
    }

    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        let meta = &event.metadata;
        self.patch_at(CORE_V1_PATH, &meta.namespace, &meta.name, patch, None)
    }
}

/// `events.k8s.io/v1` (client-go `tools/events`): `POST`/`PATCH` of
/// `/apis/events.k8s.io/v1/namespaces/{ns}/events[/{name}]`, answers of that API version.
impl<T: Transport> crate::events_v1::EventSink for Client<T> {
    fn create_events_v1(&self, event: &events_v1::Event) -> crate::events_v1::SinkFuture {
        let meta = &event.metadata;
        let api = Some(events_v1::API_VERSION);
        self.create_at(EVENTS_V1_PATH, &meta.namespace, &meta.name, event, api)
    }

    fn patch_events_v1(
        &self,
        event: &events_v1::Event,
        patch: &[u8],
    ) -> crate::events_v1::SinkFuture {
        let meta = &event.metadata;
        let api = Some(events_v1::API_VERSION);
        self.patch_at(EVENTS_V1_PATH, &meta.namespace, &meta.name, patch, api)
    }
}
