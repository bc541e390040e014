//! [`KubeSink`] as a [`StreamTransport`]: a streaming `GET` (a watch) through the
//! application's `kube::Client`, its body handed frame by frame to kevents-core's bounded
//! [`LineStream`], so kevents-runtime's watcher, leader election and the export run over it.

use std::time::Instant;

use http::Request as HttpRequest;
use http::header::ACCEPT;
use http_body_util::BodyExt;
use kevents_core::SinkError;
use kevents_core::request::{
    APPLICATION_JSON, ChunkFuture, ChunkSource, LineStream, StreamFuture, StreamRequest,
    StreamTransport, Transport, error_chain,
};

use crate::sink::{KubeSink, kube_error};

/// A kube answer's body, frame by frame, within the stream's deadline (a frame's future
/// loses nothing when dropped: it polls the body).
struct Body {
    body: kube::client::Body,
    deadline: tokio::time::Instant,
    timeout: std::time::Duration,
}

impl ChunkSource for Body {
    fn next_chunk(&mut self) -> ChunkFuture<'_> {
        Box::pin(async move {
            loop {
                let frame = tokio::time::timeout_at(self.deadline, self.body.frame())
                    .await
                    .map_err(|_| SinkError::Timeout(self.timeout))?;
                let Some(frame) = frame else {
                    return Ok(None);
                };
                let frame = frame.map_err(|e| kube_error(&e))?;
                // Trailers carry no data: read on.
                if let Ok(data) = frame.into_data() {
                    return Ok(Some(data.to_vec()));
                }
            }
        })
    }
}

/// A streaming `GET` through the kube client: the answer's head within the sink's request
/// timeout, the whole answer within the request's.
///
/// ```no_run
/// # async fn f(sink: kevents_kube::KubeSink) -> Result<(), kevents_core::SinkError> {
/// use kevents_core::request::{StreamRequest, StreamTransport};
/// let mut lines = sink
///     .open_lines(StreamRequest {
///         path: "/api/v1/events?watch=1&allowWatchBookmarks=true&timeoutSeconds=60".into(),
///         timeout: std::time::Duration::from_secs(70),
///         max_line_bytes: 1 << 20,
///     })
///     .await?;
/// while let Some(line) = lines.next_line().await? {
///     println!("{}", String::from_utf8_lossy(&line));
/// }
/// # Ok(()) }
/// ```
impl StreamTransport for KubeSink {
    fn open_lines(&self, request: StreamRequest) -> StreamFuture<'_> {
        Box::pin(async move {
            let started = Instant::now();
            let head = Transport::limits(self).request_timeout;
            let deadline = tokio::time::Instant::now() + request.timeout;
            let req = HttpRequest::builder()
                .method("GET")
                .uri(request.path.as_str())
                .header(ACCEPT, APPLICATION_JSON)
                .body(kube::client::Body::empty())
                .map_err(|e| SinkError::Construction(error_chain(&e)))?;
            let client = self.client().clone();
            let opened = match tokio::time::timeout(head, client.send(req)).await {
                Err(_) => Err(SinkError::Timeout(head)),
                Ok(Err(e)) => Err(kube_error(&e)),
                Ok(Ok(resp)) => Ok(resp),
            };
            let log = opened
                .as_ref()
                .map(|r| kevents_core::request::Response {
                    code: r.status().as_u16(),
                    ..Default::default()
                })
                .map_err(Clone::clone);
            kevents_core::request::log_exchange(
                "kube",
                kevents_core::request::Method::Get,
                &request.path,
                started,
                &log,
            );
            let resp = opened?;
            let status = resp.status().as_u16();
            let body = Body {
                body: resp.into_body(),
                deadline,
                timeout: request.timeout,
            };
            Ok(LineStream::new(
                status,
                request.max_line_bytes,
                Box::new(body),
            ))
        })
    }
}
