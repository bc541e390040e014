//! `events.k8s.io/v1` over the kube client: [`EventsV1Sink`] for [`KubeSink`], `GET` and
//! lists of `events.k8s.io/v1` events, and discovery ([`KubeSink::events_v1_served`]).

use http::Method;
use kevents_core::SinkError;
use kevents_core::events_v1::{self, EventsV1Sink, V1SinkFuture};

use crate::list::ListError;
use crate::sink::{Body, KubeSink};

/// Path of the `events.k8s.io/v1` API.
const EVENTS_V1: &str = "/apis/events.k8s.io/v1";

impl KubeSink {
    /// Whether `events.k8s.io/v1` is served (`GET /apis/events.k8s.io/v1` answers 2xx).
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_kube::KubeSink) -> Result<(), kevents_core::SinkError> {
    /// if !sink.events_v1_served().await? {
    ///     println!("falling back to core/v1 events");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn events_v1_served(&self) -> Result<bool, SinkError> {
        self.api_served(EVENTS_V1).await
    }

    /// `GET` of one `events.k8s.io/v1` event.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_kube::KubeSink) -> Result<(), kevents_core::SinkError> {
    /// let e = sink.get_event_v1("default", "web-1.17a0c2b5d9e5f3a1").await?;
    /// println!("series {:?}", e.series);
    /// # Ok(()) }
    /// ```
    pub async fn get_event_v1(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<events_v1::Event, SinkError> {
        let path = Self::events_path(EVENTS_V1, namespace, Some(name));
        let read = self.send(Method::GET, &path, Body::Empty).await?;
        read.view().decode_event(Some(events_v1::API_VERSION))
    }

    /// Every `events.k8s.io/v1` event of a namespace (all for `""`), paginated and bounded.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_kube::KubeSink) -> Result<(), kevents_kube::ListError> {
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

impl EventsV1Sink for KubeSink {
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
