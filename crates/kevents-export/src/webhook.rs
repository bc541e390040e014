//! [`Webhook`]: records as HTTP `POST`s (JSON) to a URL, with an `Idempotency-Key: uid:count`
//! header so that the receiver stores a record delivered twice once.

use std::time::Duration;

use crate::http_out::{HttpOptions, MAX_ERROR_BODY, bounded_body, parse_url, shown};
use crate::store::RecordSink;
use crate::{ExportError, ExportRecord};

/// The header that carries [`ExportRecord::key`].
pub const IDEMPOTENCY_KEY: &str = "Idempotency-Key";

/// A [`RecordSink`] that `POST`s each record as JSON to a URL with the header
/// [`IDEMPOTENCY_KEY`] = `uid:count`. A 2xx answer is a delivery; a 5xx, 408, 429 or a
/// connection error is retried (200 ms doubling, at most `attempts` tries), anything else
/// is an error. HTTPS is verified against the system's trust store (ring, as kevents-http).
/// Pair it with a durable [`ResumeStore`](crate::ResumeStore) (e.g. [`crate::JetStream`]'s
/// bucket) for restarts.
///
/// ```
/// let hook = kevents_export::Webhook::new("https://collector.example/events", std::time::Duration::from_secs(5));
/// assert!(hook.is_ok());
/// assert!(kevents_export::Webhook::new("ftp://x", std::time::Duration::from_secs(5)).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct Webhook {
    client: reqwest::Client,
    url: reqwest::Url,
    options: HttpOptions,
    /// Tries per record before [`RecordSink::deliver`] fails.
    pub attempts: u32,
}

fn sink_err(e: impl std::fmt::Display) -> ExportError {
    ExportError::Sink(e.to_string())
}

impl Webhook {
    /// A webhook to `url` (`http` or `https`), each request bounded by `timeout`.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, ExportError> {
        Self::with_options(
            url,
            HttpOptions {
                timeout,
                ..HttpOptions::default()
            },
        )
    }

    /// A webhook to `url` with `options`: headers (secret), extra CA certificates, a client
    /// certificate, the request timeout. A URL with credentials in it is refused (send them
    /// in a header).
    ///
    /// ```
    /// let mut o = kevents_export::HttpOptions::default();
    /// o.header("Authorization", "Bearer t0ken").unwrap();
    /// let hook = kevents_export::Webhook::with_options("https://hooks.example/k", o).unwrap();
    /// assert_eq!(hook.shown(), "https://hooks.example:443/k");
    /// ```
    pub fn with_options(url: &str, options: HttpOptions) -> Result<Self, ExportError> {
        let url = parse_url("webhook", url).map_err(|e| ExportError::Sink(config_text(e)))?;
        let client = options
            .client(url.scheme() == "https")
            .map_err(|e| ExportError::Sink(config_text(e)))?;
        Ok(Webhook {
            client,
            url,
            options,
            attempts: 5,
        })
    }

    /// The URL, as it may be shown (`scheme://host:port/path`).
    pub fn shown(&self) -> String {
        shown(&self.url)
    }
}

fn config_text(e: ExportError) -> String {
    match e {
        ExportError::Config(text) => text,
        e => e.to_string(),
    }
}

impl RecordSink for Webhook {
    async fn deliver(&mut self, record: &ExportRecord) -> Result<(), ExportError> {
        let body = serde_json::to_vec(record).map_err(sink_err)?;
        let mut pause = Duration::from_millis(200);
        let mut last = String::new();
        for attempt in 1..=self.attempts.max(1) {
            let mut request = self
                .client
                .post(self.url.clone())
                .header("Content-Type", "application/json")
                .header(IDEMPOTENCY_KEY, record.key());
            for (name, value) in self.options.headers() {
                request = request.header(name, value);
            }
            match request.body(body.clone()).send().await {
                Ok(resp) if resp.status().is_success() => return Ok(()),
                Ok(resp) => {
                    let code = resp.status().as_u16();
                    let text = bounded_body(resp, MAX_ERROR_BODY).await;
                    let text = kevents_core::status::sanitize_server_text(
                        String::from_utf8_lossy(&text).trim(),
                    );
                    last = format!("the webhook {} answered {code}", self.shown());
                    if !text.is_empty() {
                        last = format!("{last}: {}", self.options.redact(&text));
                    }
                    if !(code >= 500 || code == 408 || code == 429) {
                        return Err(ExportError::Sink(last));
                    }
                }
                Err(e) => {
                    last = format!(
                        "the webhook {}: {}",
                        self.shown(),
                        self.options.redact(&kevents_core::request::error_chain(&e))
                    )
                }
            }
            if attempt < self.attempts {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
        Err(ExportError::Sink(last))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-connection-per-request HTTP server answering `codes` in turn; returns the
    /// requests' heads and bodies.
    async fn serve(codes: Vec<u16>) -> (String, tokio::task::JoinHandle<Vec<String>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            for code in codes {
                let (mut conn, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 65536];
                let mut n = 0;
                loop {
                    n += conn.read(&mut buf[n..]).await.unwrap();
                    let text = String::from_utf8_lossy(&buf[..n]).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length: ")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if body.len() >= len {
                            seen.push(text);
                            break;
                        }
                    }
                }
                let reply =
                    format!("HTTP/1.1 {code} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                conn.write_all(reply.as_bytes()).await.unwrap();
            }
            seen
        });
        (url, task)
    }

    #[tokio::test]
    async fn posts_json_with_the_idempotency_key_and_retries_a_503() {
        let (url, server) = serve(vec![503, 200]).await;
        let mut hook = Webhook::new(&url, Duration::from_secs(5)).unwrap();
        let record = ExportRecord {
            uid: "u-1".into(),
            count: 7,
            delta: 3,
            ..Default::default()
        };
        hook.deliver(&record).await.unwrap();
        let seen = server.await.unwrap();
        assert_eq!(seen.len(), 2);
        for request in &seen {
            assert!(request.starts_with("POST /hook "), "{request}");
            assert!(
                request
                    .to_ascii_lowercase()
                    .contains("idempotency-key: u-1:7"),
                "{request}"
            );
            assert!(request.contains("\"delta\":3"), "{request}");
        }
    }

    #[tokio::test]
    async fn a_4xx_is_not_retried() {
        let (url, server) = serve(vec![400]).await;
        let mut hook = Webhook::new(&url, Duration::from_secs(5)).unwrap();
        let err = hook
            .deliver(&ExportRecord {
                uid: "u".into(),
                count: 1,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("400"), "{err}");
        assert_eq!(server.await.unwrap().len(), 1);
    }
}
