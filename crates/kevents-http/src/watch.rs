//! A watch's streaming answer read line by line ([`WatchLines`]), each line bounded: the
//! apiserver writes one JSON watch event per line (`?watch=1`), for as long as the watch
//! lasts, so the body cannot be read whole like other answers.

use std::time::Duration;

use kevents_core::SinkError;

use crate::HttpSink;

/// The lines of a streaming `GET` (a watch: one JSON object per line), opened by
/// [`HttpSink::watch_lines`]. Every line is bounded by the `max_line_bytes` given there: a
/// longer one ends the stream with an error instead of growing a buffer without limit.
///
/// ```no_run
/// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_core::SinkError> {
/// use std::time::Duration;
/// let path = "/api/v1/events?watch=1&allowWatchBookmarks=true&timeoutSeconds=60";
/// let mut lines = sink.watch_lines(path, Duration::from_secs(70), 1 << 20).await?;
/// assert_eq!(lines.status(), 200);
/// while let Some(line) = lines.next_line().await? {
///     println!("{}", String::from_utf8_lossy(&line));
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct WatchLines {
    status: u16,
    response: reqwest::Response,
    buf: Vec<u8>,
    max_line_bytes: usize,
    timeout: Duration,
    done: bool,
}

impl HttpSink {
    /// Opens a streaming `GET` of `path_and_query` (from the apiserver's root, e.g.
    /// `/api/v1/events?watch=1&resourceVersion=42`) with the sink's credential and TLS, the
    /// whole response bounded by `timeout` (give the watch's `timeoutSeconds` plus a margin)
    /// and every line by `max_line_bytes`. A non-2xx answer is returned as a stream too
    /// ([`WatchLines::status`]); its body is then the apiserver's `Status` object.
    ///
    /// ```no_run
    /// # async fn f(sink: kevents_http::HttpSink) -> Result<(), kevents_core::SinkError> {
    /// let lines = sink
    ///     .watch_lines("/api/v1/events?watch=1", std::time::Duration::from_secs(30), 1 << 20)
    ///     .await?;
    /// # drop(lines);
    /// # Ok(()) }
    /// ```
    pub async fn watch_lines(
        &self,
        path_and_query: &str,
        timeout: Duration,
        max_line_bytes: usize,
    ) -> Result<WatchLines, SinkError> {
        let (status, response) = self.open_stream(path_and_query, timeout).await?;
        Ok(WatchLines {
            status,
            response,
            buf: Vec::new(),
            max_line_bytes,
            timeout,
            done: false,
        })
    }
}

impl WatchLines {
    /// The answer's status code (200 for a watch that started).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The next line without its `\n` (blank lines skipped); `None` when the server ended the
    /// response (a watch's `timeoutSeconds` passed). A line over the limit, a broken
    /// connection or the timeout given at opening end it with an error. A partial last line
    /// (the connection closed in the middle of it) is returned as it is: the caller's JSON
    /// decoding rejects it.
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, SinkError> {
        loop {
            if let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
                let rest = self.buf.split_off(pos + 1);
                let mut line = std::mem::replace(&mut self.buf, rest);
                line.pop();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Ok(Some(line));
            }
            if self.buf.len() > self.max_line_bytes {
                return Err(SinkError::Transport(format!(
                    "a watch line is longer than {} bytes",
                    self.max_line_bytes
                )));
            }
            if self.done {
                if self.buf.iter().all(u8::is_ascii_whitespace) {
                    return Ok(None);
                }
                return Ok(Some(std::mem::take(&mut self.buf)));
            }
            let timeout = self.timeout;
            match self.response.chunk().await.map_err(|e| {
                if e.is_timeout() {
                    SinkError::Timeout(timeout)
                } else {
                    SinkError::Transport(kevents_core::request::error_chain(&e))
                }
            })? {
                Some(chunk) => self.buf.extend_from_slice(&chunk),
                None => self.done = true,
            }
        }
    }
}
