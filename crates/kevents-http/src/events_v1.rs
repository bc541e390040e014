//! `events.k8s.io/v1` over HTTP (client-go `tools/events`): [`EventsV1Sink`] for [`HttpSink`],
//! `GET` and lists of `events.k8s.io/v1` events, and the discovery that decides between this
//! API and the core/v1 fallback ([`HttpSink::events_v1_served`]), with the same request
//! building, authentication and error decoding as the core/v1 sink ([`crate::client`]).

use http::Method;
use kevents_core::SinkError;
use kevents_core::events_v1::{self, EventsV1Sink, V1SinkFuture};

use crate::client::{Answer, Body, HttpSink, decode_event_of};
use crate::list::ListError;

/// Path segments of the `events.k8s.io/v1` API.
const EVENTS_V1: &[&str] = &["apis", "events.k8s.io", "v1"];

impl HttpSink {
    /// `/apis/events.k8s.io/v1/namespaces/{ns}/events[/{name}]` (`/apis/events.k8s.io/v1/events`
    /// for an empty namespace).
    fn events_v1_url(
        &self,
        namespace: &str,
        name: Option<&str>,
    ) -> Result<reqwest::Url, SinkError> {
        self.events_url_at(EVENTS_V1, namespace, name)
    }

    /// Whether `events.k8s.io/v1` is served (`GET /apis/events.k8s.io/v1` answers 200);
    /// decides between the events.k8s.io/v1 API and the core/v1 fallback.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_core::SinkError> {
    /// if !sink.events_v1_served().await? {
    ///     println!("falling back to core/v1 events");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn events_v1_served(&self) -> Result<bool, SinkError> {
        self.api_served("/apis/events.k8s.io/v1").await
    }

    /// `GET` of one `events.k8s.io/v1` event.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_core::SinkError> {
    /// let e = sink.get_event_v1("default", "web-1.17a0c2b5d9e5f3a1").await?;
    /// println!("series {:?}", e.series);
    /// # Ok(()) }
    /// ```
    pub async fn get_event_v1(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<events_v1::Event, SinkError> {
        let url = self.events_v1_url(namespace, Some(name))?;
        decode_event_v1(self.send(Method::GET, url, &Body::Empty).await?)
    }

    /// Every `events.k8s.io/v1` event of a namespace (all for `""`), paginated and bounded
    /// like [`HttpSink::list_events`].
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_http::ListError> {
    /// for e in sink.list_events_v1("default").await? {
    ///     println!("{} {:?}", e.metadata.name, e.series.map(|s| s.count));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_events_v1(
        &self,
        namespace: &str,
    ) -> Result<Vec<events_v1::Event>, ListError> {
        self.list_all(EVENTS_V1, namespace).await
    }
}

/// A 2xx answer must carry an `events.k8s.io/v1` Event; anything else is the server's error.
fn decode_event_v1(answer: Answer) -> Result<events_v1::Event, SinkError> {
    decode_event_of(answer, Some(events_v1::API_VERSION))
}

/// `POST`/`PATCH /apis/events.k8s.io/v1/namespaces/{ns}/events[/{name}]`: the event's JSON,
/// the series patch as `application/strategic-merge-patch+json`; answers decoded as for
/// core/v1 (a `Status` body becomes [`SinkError::Status`], transport problems
/// [`SinkError::Transport`], ...).
///
/// ```no_run
/// use kevents_core::events_v1::{write_once, EventFactoryV1, OccurrenceV1, Reporter, SeriesCache,
///                            SeriesOptions};
/// use kevents_core::{Clock, EventType, ObjectReference, SystemClock};
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let now = SystemClock.now();
/// let sink = kevents_http::HttpSink::infer().await?;
/// let factory = EventFactoryV1::new(Reporter::new("example.com/ctl"));
/// let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
/// let e = factory.make(now, OccurrenceV1::new(pod, None, EventType::Normal,
///                      "Scheduled", "Binding", "bound"))?;
/// let mut cache = SeriesCache::new(SeriesOptions::default());
/// for w in cache.observe(e, now) {
///     let out = write_once(&sink, w).await;
///     cache.on_write_result(&out.sent, &out.result);
/// }
/// # Ok(()) }
/// ```
impl EventsV1Sink for HttpSink {
    fn create_v1(&self, event: &events_v1::Event) -> V1SinkFuture {
        let meta = &event.metadata;
        self.create_at(
            EVENTS_V1,
            &meta.namespace,
            &meta.name,
            event,
            Some(events_v1::API_VERSION),
        )
    }

    fn patch_v1(&self, event: &events_v1::Event, patch: &[u8]) -> V1SinkFuture {
        let meta = &event.metadata;
        self.patch_at(
            EVENTS_V1,
            &meta.namespace,
            &meta.name,
            patch,
            Some(events_v1::API_VERSION),
        )
    }
}
