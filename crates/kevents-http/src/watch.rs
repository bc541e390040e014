//! [`HttpSink`] as a [`StreamTransport`]: a streaming `GET` (a watch) with the sink's
//! credential and TLS, its body handed chunk by chunk to kevents-core's bounded
//! [`LineStream`].

use std::time::Duration;

use kevents_core::SinkError;
use kevents_core::request::{
    ChunkFuture, ChunkSource, LineStream, StreamFuture, StreamRequest, StreamTransport, Transport,
    error_chain,
};

use crate::HttpSink;

/// A reqwest answer's body, chunk by chunk (`Response::chunk` loses nothing when its future
/// is dropped).
struct Body {
    response: reqwest::Response,
    timeout: Duration,
}

impl ChunkSource for Body {
    fn next_chunk(&mut self) -> ChunkFuture<'_> {
        Box::pin(async move {
            let timeout = self.timeout;
            let chunk = self.response.chunk().await.map_err(|e| {
                if e.is_timeout() {
                    SinkError::Timeout(timeout)
                } else {
                    SinkError::Transport(error_chain(&e))
                }
            })?;
            Ok(chunk.map(|c| c.to_vec()))
        })
    }
}

/// A streaming `GET` of the request's path with the sink's credential and TLS: the answer's
/// head within the sink's request timeout, the whole answer within the request's.
///
/// ```no_run
/// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_core::SinkError> {
/// use kevents_core::request::{StreamRequest, StreamTransport};
/// let mut lines = sink
///     .open_lines(StreamRequest {
///         path: "/api/v1/events?watch=1&allowWatchBookmarks=true&timeoutSeconds=60".into(),
///         timeout: std::time::Duration::from_secs(70),
///         max_line_bytes: 1 << 20,
///     })
///     .await?;
/// assert_eq!(lines.status(), 200);
/// while let Some(line) = lines.next_line().await? {
///     println!("{}", String::from_utf8_lossy(&line));
/// }
/// # Ok(()) }
/// ```
impl StreamTransport for HttpSink {
    fn open_lines(&self, request: StreamRequest) -> StreamFuture<'_> {
        Box::pin(async move {
            let head = Transport::limits(self).request_timeout;
            let (status, response) =
                tokio::time::timeout(head, self.open_stream(&request.path, request.timeout))
                    .await
                    .map_err(|_| SinkError::Timeout(head))??;
            let body = Body {
                response,
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
