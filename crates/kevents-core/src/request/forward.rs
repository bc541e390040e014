//! [`impl_request_sink!`](crate::impl_request_sink): a sink type that is a [`Transport`](super::Transport)
//! answers every event API through [`Client`](super::Client), with its methods and trait
//! implementations written once, here.

/// Makes a [`Transport`](crate::request::Transport) type a sink of both event APIs through
/// the request layer: implements [`EventSink`](crate::EventSink),
/// [`EventSinkV1`](crate::events_v1::EventSinkV1) and
/// [`PreflightApi`](crate::preflight::PreflightApi) for it, and gives it the methods
/// `api_served`, `events_v1_served`, `get_event`, `get_event_v1`, `delete_event`,
/// `list_events`, `list_events_v1` and `preflight` of [`Client`](crate::request::Client).
/// The type must have a method `fn requests(&self) -> Client<Self>` (the request layer over
/// it, with its options). kevents-http's `HttpSink` and kevents-kube's `KubeSink` are made
/// so.
///
/// ```
/// use kevents_core::request::{Client, Limits, Request, Response, Transport, TransportFuture};
///
/// /// Answers every request with 503.
/// #[derive(Clone)]
/// struct Down;
/// impl Transport for Down {
///     fn send(&self, _request: Request) -> TransportFuture<'_> {
///         Box::pin(async { Ok(Response { code: 503, ..Default::default() }) })
///     }
///     fn limits(&self) -> Limits {
///         Limits::default()
///     }
/// }
/// impl Down {
///     fn requests(&self) -> Client<Down> {
///         Client::new(self.clone())
///     }
/// }
/// kevents_core::impl_request_sink!(Down);
///
/// fn takes_a_sink(_: impl kevents_core::EventSink + kevents_core::events_v1::EventSinkV1) {}
/// takes_a_sink(Down);
/// let served = Down.events_v1_served(); // a future: Err(503)
/// ```
// Hidden: kevents' own sinks use it; a transport of a user's own is used through
// `Client::new(transport)`, which is a sink of both APIs already (one door).
#[doc(hidden)]
#[macro_export]
macro_rules! impl_request_sink {
    ($sink:ty) => {
        impl $sink {
            /// Whether the apiserver serves an API group version: `GET path` answered 2xx
            /// (`true`) or 404 (`false`); any other answer is an error.
            pub async fn api_served(
                &self,
                path: &str,
            ) -> ::std::result::Result<bool, $crate::SinkError> {
                self.requests().api_served(path).await
            }

            /// Whether `events.k8s.io/v1` is served (`GET /apis/events.k8s.io/v1` answers
            /// 2xx); decides between the events.k8s.io/v1 API and the core/v1 fallback.
            pub async fn events_v1_served(&self) -> ::std::result::Result<bool, $crate::SinkError> {
                self.requests().events_v1_served().await
            }

            /// `GET` of one core/v1 event.
            pub async fn get_event(
                &self,
                namespace: &str,
                name: &str,
            ) -> ::std::result::Result<$crate::Event, $crate::SinkError> {
                self.requests().get_event(namespace, name).await
            }

            /// `DELETE` of one core/v1 event (what the server's TTL does; used by tests).
            pub async fn delete_event(
                &self,
                namespace: &str,
                name: &str,
            ) -> ::std::result::Result<(), $crate::SinkError> {
                self.requests().delete_event(namespace, name).await
            }

            /// Every core/v1 event of `namespace` (all namespaces for `""`), read in pages of
            /// [`LIST_PAGE_SIZE`](kevents_core::request::LIST_PAGE_SIZE), within the sink's list
            /// limits; a server that repeats a `continue` token is an error
            /// ([`ListError::RepeatedContinue`](kevents_core::request::ListError::RepeatedContinue)),
            /// not an endless loop.
            pub async fn list_events(
                &self,
                namespace: &str,
            ) -> ::std::result::Result<::std::vec::Vec<$crate::Event>, $crate::request::ListError>
            {
                self.requests().list_events(namespace).await
            }

            /// `GET` of one `events.k8s.io/v1` event.
            pub async fn get_event_v1(
                &self,
                namespace: &str,
                name: &str,
            ) -> ::std::result::Result<$crate::events_v1::Event, $crate::SinkError> {
                self.requests().get_event_v1(namespace, name).await
            }

            /// Every `events.k8s.io/v1` event of a namespace (all for `""`), paginated and
            /// bounded like `list_events`.
            pub async fn list_events_v1(
                &self,
                namespace: &str,
            ) -> ::std::result::Result<
                ::std::vec::Vec<$crate::events_v1::Event>,
                $crate::request::ListError,
            > {
                self.requests().list_events_v1(namespace).await
            }

            /// Checks, before recording, that events would be written with this sink's
            /// identity: the event API served, `create` and `patch` on `events` in its group
            /// in every namespace of `plan` (and the cluster-scoped objects' one), the
            /// reporting names ([`kevents_core::preflight`](kevents_core::preflight)).
            pub async fn preflight(
                &self,
                plan: &$crate::preflight::PreflightPlan,
            ) -> ::std::result::Result<
                $crate::preflight::PreflightReport,
                $crate::preflight::InvalidPlan,
            > {
                self.requests().preflight(plan).await
            }
        }

        /// core/v1 (client-go `tools/record`'s `EventSinkImpl`): `POST` and strategic-merge
        /// `PATCH` of `/api/v1/namespaces/{ns}/events`, by the request layer.
        impl $crate::EventSink for $sink {
            fn create(&self, event: &$crate::Event) -> $crate::SinkFuture {
                $crate::EventSink::create(&self.requests(), event)
            }

            fn patch(&self, event: &$crate::Event, patch: &[u8]) -> $crate::SinkFuture {
                $crate::EventSink::patch(&self.requests(), event, patch)
            }
        }

        /// `events.k8s.io/v1` (client-go `tools/events`): `POST` and strategic-merge `PATCH`
        /// of `/apis/events.k8s.io/v1/namespaces/{ns}/events`, by the request layer.
        impl $crate::events_v1::EventSinkV1 for $sink {
            fn create_v1(
                &self,
                event: &$crate::events_v1::Event,
            ) -> $crate::events_v1::SinkFutureV1 {
                $crate::events_v1::EventSinkV1::create_v1(&self.requests(), event)
            }

            fn patch_v1(
                &self,
                event: &$crate::events_v1::Event,
                patch: &[u8],
            ) -> $crate::events_v1::SinkFutureV1 {
                $crate::events_v1::EventSinkV1::patch_v1(&self.requests(), event, patch)
            }
        }

        /// Discovery and `SelfSubjectAccessReview`s with the sink's own requests, so
        /// [`kevents_core::preflight::run`](kevents_core::preflight::run) checks exactly the
        /// identity that will write the events.
        impl $crate::preflight::PreflightApi for $sink {
            fn served<'a>(
                &'a self,
                path: &'a str,
            ) -> $crate::preflight::PreflightFuture<
                'a,
                ::std::result::Result<bool, $crate::SinkError>,
            > {
                ::std::boxed::Box::pin(self.api_served(path))
            }

            fn review<'a>(
                &'a self,
                question: &'a $crate::preflight::ResourceAttributes,
            ) -> $crate::preflight::PreflightFuture<
                'a,
                ::std::result::Result<$crate::preflight::AccessReview, $crate::SinkError>,
            > {
                let requests = self.requests();
                ::std::boxed::Box::pin(async move {
                    $crate::preflight::PreflightApi::review(&requests, question).await
                })
            }
        }
    };
}
