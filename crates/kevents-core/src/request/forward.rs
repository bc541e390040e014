//! [`__request_sink!`](crate::__request_sink): the event sink traits of a type whose
//! requests are [`Client`](super::Client)'s, written once for kevents' own sinks.

/// Implements [`EventSink`](crate::EventSink), [`events_v1::EventSink`](crate::events_v1::EventSink)
/// and [`PreflightApi`](crate::preflight::PreflightApi) for a sink type by forwarding them to
/// its request layer: the type must have a method `fn requests(&self) -> Client<T>` (its
/// [`Client`](crate::request::Client), with its options). kevents-http's `HttpSink` and
/// kevents-kube's `KubeSink` are made so; everything else they request (lists, gets,
/// discovery, preflight) is asked of `requests()`, the one door.
///
/// Not part of the public API (kevents' own sink crates use it; see
/// [`kevents_core::__private`](crate::__private)): a transport of your own is a sink through
/// `Client::new(transport)`, which implements the traits already.
///
/// ```
/// use kevents_core::request::{Client, Limits, Request, Response, Transport, TransportFuture};
/// use kevents_core::events_v1::EventSink;
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
/// kevents_core::__request_sink!(Down);
///
/// fn takes_a_sink(_: impl kevents_core::EventSink + EventSink) {}
/// takes_a_sink(Down);
/// let requests = Down.requests();
/// let served = requests.events_v1_served(); // a future: Err(503)
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! __request_sink {
    ($sink:ty) => {
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
        impl $crate::events_v1::EventSink for $sink {
            fn create_events_v1(
                &self,
                event: &$crate::events_v1::Event,
            ) -> $crate::events_v1::SinkFuture {
                $crate::events_v1::EventSink::create_events_v1(&self.requests(), event)
            }

            fn patch_events_v1(
                &self,
                event: &$crate::events_v1::Event,
                patch: &[u8],
            ) -> $crate::events_v1::SinkFuture {
                $crate::events_v1::EventSink::patch_events_v1(&self.requests(), event, patch)
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
                let requests = self.requests();
                ::std::boxed::Box::pin(async move { requests.api_served(path).await })
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
