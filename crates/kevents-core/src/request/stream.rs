//! Streaming answers: what the request layer asks of a transport that can hold a `GET` open
//! and hand its body over as it comes ([`StreamTransport`]), and the bounded line reader
//! every such answer is read through ([`LineStream`]). A watch (`?watch=1`) is one JSON
//! object per line for as long as it lasts, so its body cannot be read whole like other
//! answers; the lines are split and bounded here, once, whatever the transport.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::status::SinkError;

use super::transport::Transport;

/// One streaming `GET`, as the request layer hands it to a [`StreamTransport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRequest {
    /// Path and query from the apiserver's root, percent-encoded:
    /// `/api/v1/events?watch=1&resourceVersion=42`.
    pub path: String,
    /// The deadline of the whole answer (for a watch: its `timeoutSeconds` plus a margin).
    /// Past it the stream ends with [`SinkError::Timeout`].
    pub timeout: Duration,
    /// The longest line read; a longer one ends the stream with an error instead of growing a
    /// buffer without limit.
    pub max_line_bytes: usize,
}

/// The future of one chunk of a streaming body ([`ChunkSource::next_chunk`]): `None` when the
/// server ended the body.
pub type ChunkFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Vec<u8>>, SinkError>> + Send + 'a>>;

/// The body of a streaming answer, chunk by chunk, as a transport reads it. Dropping the
/// future of [`ChunkSource::next_chunk`] before it completes must lose no data (reqwest's
/// and hyper's body reads are such), so a [`LineStream`] can be read inside a `select!`.
pub trait ChunkSource: Send {
    /// The next chunk of the body (`None`: the server ended it), within the stream's
    /// deadline.
    fn next_chunk(&mut self) -> ChunkFuture<'_>;
}

/// The lines of a streaming answer, each bounded, opened by
/// [`StreamTransport::open_lines`]. A non-2xx answer is a stream too
/// ([`LineStream::status`]); its body is then the apiserver's `Status` object.
///
/// ```
/// use kevents_core::request::{ChunkFuture, ChunkSource, LineStream};
///
/// /// A body given in chunks.
/// struct Chunks(Vec<&'static [u8]>);
/// impl ChunkSource for Chunks {
///     fn next_chunk(&mut self) -> ChunkFuture<'_> {
///         let next = (!self.0.is_empty()).then(|| self.0.remove(0).to_vec());
///         Box::pin(async move { Ok(next) })
///     }
/// }
///
/// let mut lines = LineStream::new(200, 16, Box::new(Chunks(vec![b"{\"a\"", b":1}\n\n{}\n"])));
/// # let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
/// # let mut next = || { let mut f = std::pin::pin!(lines.next_line());
/// #     match f.as_mut().poll(&mut cx) { std::task::Poll::Ready(r) => r, _ => panic!() } };
/// // `next()` stands for `lines.next_line().await`.
/// assert_eq!(next().unwrap(), Some(b"{\"a\":1}".to_vec()));
/// assert_eq!(next().unwrap(), Some(b"{}".to_vec()));
/// assert_eq!(next().unwrap(), None);
/// ```
pub struct LineStream {
    status: u16,
    source: Box<dyn ChunkSource>,
    buf: Vec<u8>,
    /// Where the search for the next `\n` resumes in `buf` (bytes before it hold none).
    scanned: usize,
    max_line_bytes: usize,
    done: bool,
}

impl std::fmt::Debug for LineStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineStream")
            .field("status", &self.status)
            .field("buffered", &self.buf.len())
            .field("max_line_bytes", &self.max_line_bytes)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl LineStream {
    /// The lines of an answer of status `status` whose body `source` reads, each at most
    /// `max_line_bytes` long.
    pub fn new(status: u16, max_line_bytes: usize, source: Box<dyn ChunkSource>) -> Self {
        LineStream {
            status,
            source,
            buf: Vec::new(),
            scanned: 0,
            max_line_bytes,
            done: false,
        }
    }

    /// The answer's status code (200 for a watch that started).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The next line without its `\n` (blank lines skipped); `None` when the server ended
    /// the answer (a watch's `timeoutSeconds` passed). A line over the limit, a broken
    /// connection or the stream's deadline end it with an error. A partial last line (the
    /// connection closed in the middle of it) is returned as it is: the caller's JSON
    /// decoding rejects it. Dropping the future before it completes loses nothing.
    pub async fn next_line(&mut self) -> Result<Option<Vec<u8>>, SinkError> {
        loop {
            if let Some(pos) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
                let pos = self.scanned + pos;
                let rest = self.buf.split_off(pos + 1);
                let mut line = std::mem::replace(&mut self.buf, rest);
                self.scanned = 0;
                line.pop();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Ok(Some(line));
            }
            self.scanned = self.buf.len();
            if self.buf.len() > self.max_line_bytes {
                return Err(SinkError::Transport(format!(
                    "a streamed line is longer than {} bytes",
                    self.max_line_bytes
                )));
            }
            if self.done {
                self.scanned = 0;
                if self.buf.iter().all(u8::is_ascii_whitespace) {
                    self.buf.clear();
                    return Ok(None);
                }
                return Ok(Some(std::mem::take(&mut self.buf)));
            }
            match self.source.next_chunk().await? {
                Some(chunk) => self.buf.extend_from_slice(&chunk),
                None => self.done = true,
            }
        }
    }
}

/// The future of [`StreamTransport::open_lines`].
pub type StreamFuture<'a> =
    Pin<Box<dyn Future<Output = Result<LineStream, SinkError>> + Send + 'a>>;

/// A [`Transport`] that can also hold a `GET` open and read its answer line by line: the one
/// door for streams (watches), as [`Client`](super::Client) is for requests and answers.
/// kevents-http's `HttpSink` (reqwest) and kevents-kube's `KubeSink` (a `kube::Client`)
/// implement it; kevents-runtime's watcher, leader election and the export run over any
/// implementation.
///
/// The transport sends the request with its credential, reads the answer's head within its
/// [`Limits::request_timeout`](super::Limits), and gives the body to a [`LineStream`] whose
/// chunks come within [`StreamRequest::timeout`] of the opening. It fails only when no
/// answer's head was read ([`SinkError::Timeout`], [`SinkError::Transport`]).
///
/// ```
/// use kevents_core::request::{
///     ChunkFuture, ChunkSource, Limits, LineStream, Request, Response, StreamFuture,
///     StreamRequest, StreamTransport, Transport, TransportFuture,
/// };
///
/// /// Every stream answers one line, then ends.
/// #[derive(Clone)]
/// struct OneLine;
/// struct Once(Option<Vec<u8>>);
/// impl ChunkSource for Once {
///     fn next_chunk(&mut self) -> ChunkFuture<'_> {
///         let next = self.0.take();
///         Box::pin(async move { Ok(next) })
///     }
/// }
/// impl Transport for OneLine {
///     fn send(&self, _: Request) -> TransportFuture<'_> {
///         Box::pin(async { Ok(Response { code: 404, ..Default::default() }) })
///     }
///     fn limits(&self) -> Limits {
///         Limits::default()
///     }
/// }
/// impl StreamTransport for OneLine {
///     fn open_lines(&self, request: StreamRequest) -> StreamFuture<'_> {
///         let body = Once(Some(b"{\"type\":\"BOOKMARK\"}\n".to_vec()));
///         Box::pin(async move { Ok(LineStream::new(200, request.max_line_bytes, Box::new(body))) })
///     }
/// }
/// ```
pub trait StreamTransport: Transport {
    /// Opens `request` as a stream of bounded lines.
    fn open_lines(&self, request: StreamRequest) -> StreamFuture<'_>;
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Chunks(Vec<Vec<u8>>);
    impl ChunkSource for Chunks {
        fn next_chunk(&mut self) -> ChunkFuture<'_> {
            let next = (!self.0.is_empty()).then(|| self.0.remove(0));
            Box::pin(async move { Ok(next) })
        }
    }

    fn block<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(r) => r,
            std::task::Poll::Pending => panic!("pending"),
        }
    }

    fn lines(chunks: &[&[u8]], max: usize) -> Vec<Result<Option<Vec<u8>>, SinkError>> {
        let mut s = LineStream::new(
            200,
            max,
            Box::new(Chunks(chunks.iter().map(|c| c.to_vec()).collect())),
        );
        let mut out = Vec::new();
        loop {
            let r = block(s.next_line());
            let end = !matches!(r, Ok(Some(_)));
            out.push(r);
            if end {
                return out;
            }
        }
    }

    #[test]
    fn lines_split_across_chunks_and_blank_lines_skipped() {
        let got = lines(&[b"ab", b"c\n", b"\n  \nd", b"e\nf"], 8);
        let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            got,
            vec![
                Some(b"abc".to_vec()),
                Some(b"de".to_vec()),
                Some(b"f".to_vec()),
                None
            ]
        );
    }

    #[test]
    fn a_line_over_the_limit_ends_the_stream() {
        let got = lines(&[b"0123", b"45678", b"9\n"], 8);
        assert_eq!(got.len(), 1);
        let err = got.into_iter().next().unwrap().unwrap_err();
        assert!(err.to_string().contains("longer than 8 bytes"), "{err}");
    }

    #[test]
    fn a_line_at_the_limit_is_read() {
        let got = lines(&[b"01234567", b"\n"], 8);
        assert_eq!(got[0].as_ref().unwrap(), &Some(b"01234567".to_vec()));
    }
}
