//! core/v1 over the kube client: [`EventSink`] for [`KubeSink`] (`POST` and strategic-merge
//! `PATCH` of `/api/v1/namespaces/{ns}/events`), and `GET`, `DELETE` and lists of core/v1
//! events.

use http::Method;
use kevents_core::{Event, EventSink, SinkError, SinkFuture};

use crate::list::ListError;
use crate::sink::{Body, KubeSink};

/// Path of the core/v1 API.
const CORE_V1: &str = "/api/v1";

impl KubeSink {
    /// `GET` of one core/v1 event.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_kube::KubeSink) -> Result<(), kevents_core::SinkError> {
    /// match sink.get_event("default", "web-1.17a0c2b5d9e5f3a1").await {
    ///     Ok(e) => println!("count {}", e.count),
    ///     Err(e) if e.is_not_found() => println!("gone"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_event(&self, namespace: &str, name: &str) -> Result<Event, SinkError> {
        let path = Self::events_path(CORE_V1, namespace, Some(name));
        let read = self.send(Method::GET, &path, Body::Empty).await?;
        read.view().decode_event(None)
    }

    /// `DELETE` of one core/v1 event (what the server's TTL does; used by tests).
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_kube::KubeSink) -> Result<(), kevents_core::SinkError> {
    /// sink.delete_event("default", "web-1.17a0c2b5d9e5f3a1").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_event(&self, namespace: &str, name: &str) -> Result<(), SinkError> {
        let path = Self::events_path(CORE_V1, namespace, Some(name));
        let read = self.send(Method::DELETE, &path, Body::Empty).await?;
        if read.view().is_success() {
            Ok(())
        } else {
            Err(read.view().status_error())
        }
    }

    /// Every core/v1 event of `namespace` (all namespaces for `""`), paginated and bounded.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_kube::KubeSink) -> Result<(), kevents_kube::ListError> {
    /// for e in sink.list_events("default").await? {
    ///     println!("{} {} x{} {}", e.type_, e.reason, e.count, e.message);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn list_events(&self, namespace: &str) -> Result<Vec<Event>, ListError> {
        self.list_all(CORE_V1, namespace).await
    }
}

impl EventSink for KubeSink {
    fn create(&self, event: &Event) -> SinkFuture {
        let meta = &event.metadata;
        self.create_at(CORE_V1, &meta.namespace, &meta.name, event, None)
    }

    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        let meta = &event.metadata;
        self.patch_at(CORE_V1, &meta.namespace, &meta.name, patch, None)
    }
}
