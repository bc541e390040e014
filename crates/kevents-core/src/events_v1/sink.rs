//! The write side of `events.k8s.io/v1`: the [`events_v1::EventSink`](crate::events_v1::EventSink) trait and one client-go
//! `recordEvent` attempt ([`write_once`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::model::Event;
use super::series::{Step, Write, classify};
use crate::status::SinkError;
use crate::stored::Stored;

/// The future an [`events_v1::EventSink`](crate::events_v1::EventSink) call returns: the event as the server stored it
/// ([`Stored::Returned`]), [`Stored::AsSent`] for a sink with no server copy to return, or
/// why not.
pub type SinkFuture =
    Pin<Box<dyn Future<Output = Result<Stored<Event>, SinkError>> + Send + 'static>>;

/// Writes `events.k8s.io/v1` events (client-go `tools/events` `EventSink`, without `Update`).
///
/// Same shape as [`crate::EventSink`]: the event by reference in, a `'static` boxed future out,
/// so an implementation encodes the request up front and the caller keeps the event for
/// retries. The method names differ so that one type can implement both traits without
/// ambiguous calls.
///
/// ```
/// use kevents_core::events_v1::{SinkFuture, EventSink, Event};
/// use kevents_core::Stored;
///
/// /// A sink that prints events: no server, so the events are stored as sent.
/// struct Print;
/// impl EventSink for Print {
///     fn create_events_v1(&self, event: &Event) -> SinkFuture {
///         println!("{} {}: {}", event.type_, event.reason, event.note);
///         Box::pin(async { Ok(Stored::AsSent) })
///     }
///     fn patch_events_v1(&self, event: &Event, _patch: &[u8]) -> SinkFuture {
///         println!("{} {} (series): {}", event.type_, event.reason, event.note);
///         Box::pin(async { Ok(Stored::AsSent) })
///     }
/// }
/// ```
pub trait EventSink: Send + Sync + 'static {
    /// `POST /apis/events.k8s.io/v1/namespaces/{event.namespace}/events`.
    fn create_events_v1(&self, event: &Event) -> SinkFuture;
    /// `PATCH /apis/events.k8s.io/v1/namespaces/{event.namespace}/events/{event.name}` with a
    /// strategic merge patch (`application/strategic-merge-patch+json`).
    fn patch_events_v1(&self, event: &Event, patch: &[u8]) -> SinkFuture;
}

impl<S: EventSink + ?Sized> EventSink for Arc<S> {
    fn create_events_v1(&self, event: &Event) -> SinkFuture {
        (**self).create_events_v1(event)
    }
    fn patch_events_v1(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        (**self).patch_events_v1(event, patch)
    }
}

impl<S: EventSink + ?Sized> EventSink for Box<S> {
    fn create_events_v1(&self, event: &Event) -> SinkFuture {
        (**self).create_events_v1(event)
    }
    fn patch_events_v1(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        (**self).patch_events_v1(event, patch)
    }
}

/// Sends one request for `write`: POST for [`Write::Create`], PATCH for [`Write::Patch`].
pub fn send<S: EventSink + ?Sized>(sink: &S, write: &Write) -> SinkFuture {
    match write {
        Write::Create { event, .. } => sink.create_events_v1(event),
        Write::Patch { event, patch, .. } => sink.patch_events_v1(event, patch),
    }
}

/// The result of [`write_once`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The last request sent (the CREATE after a 404, or the write itself). Pass it to
    /// [`events_v1::SeriesCache::on_write_result`](crate::events_v1::SeriesCache::on_write_result), and after [`Step::Retry`] send
    /// [`Write::retry`] of it.
    pub sent: Write,
    /// What the sink answered to it.
    pub result: Result<Stored<Event>, SinkError>,
    /// Whether a PATCH answered 404 and the event was re-created.
    pub recreated: bool,
    /// What to do next, without cache bookkeeping ([`classify`] of `sent`/`result`).
    pub step: Step,
}

/// One attempt of client-go's `tools/events` `recordEvent`: the write, and if a PATCH answered 404
/// the CREATE of the full event with its series in the same attempt. No retries and no sleeping:
/// the caller retries on [`Step::Retry`] with its own back-off.
///
/// ```
/// use kevents_core::events_v1::{write_once, Event, EventSeries, Step, Write, WriteReason};
/// use kevents_core::Time;
/// use kevents_sim::MemoryApiServer;
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let waker = std::task::Waker::noop();
/// #     let mut cx = std::task::Context::from_waker(&waker);
/// #     let mut f = std::pin::pin!(f);
/// #     loop { if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
/// # }
/// let api = MemoryApiServer::new();
/// let mut e = Event::default();
/// e.metadata.name = "p.1".into();
/// e.metadata.namespace = "default".into();
/// e.event_time = Some(Time::UNIX_EPOCH);
/// e.reporting_controller = "c".into();
/// e.reporting_instance = "c-1".into();
/// e.action = "a".into();
/// e.reason = "r".into();
/// e.type_ = "Normal".into();
/// e.series = Some(EventSeries::new(2, Time::UNIX_EPOCH));
/// let w = Write::Patch { patch: kevents_core::events_v1::series_patch(&e.series.unwrap()), event: e,
///                        reason: WriteReason::SeriesStart };
/// let out = block_on(write_once(&api, w)); // nothing stored yet: PATCH 404, then CREATE
/// assert!(out.recreated && out.step == Step::Stored);
/// assert_eq!(api.get_events_v1("default", "p.1").unwrap().series.unwrap().count, 2);
/// ```
pub async fn write_once<S: EventSink + ?Sized>(sink: &S, write: Write) -> WriteOutcome {
    let result = send(sink, &write).await;
    let step = classify(&write, &result);
    if step != Step::Recreate {
        return WriteOutcome {
            sent: write,
            result,
            recreated: false,
            step,
        };
    }
    let write = write.recreate();
    let result = send(sink, &write).await;
    let step = classify(&write, &result);
    WriteOutcome {
        sent: write,
        result,
        recreated: true,
        step,
    }
}
