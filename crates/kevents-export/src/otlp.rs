//! [`Otlp`]: records as OpenTelemetry log records, sent with OTLP/HTTP (protobuf) to a
//! Collector or any OTLP logs endpoint (`{endpoint}/v1/logs`), with the attribute names of
//! the Collector's `k8s_events` receiver; [`log_request`] is the mapping.

use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs, SeverityNumber};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;

use crate::http_out::{HttpOptions, MAX_ERROR_BODY, bounded_body, parse_url, shown};
use crate::store::RecordSink;
use crate::{ExportError, ExportRecord};

/// The instrumentation scope's name of the log records.
pub const OTLP_SCOPE: &str = "kevents-export";

fn kv(key: &str, value: any_value::Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    }
}

fn string(key: &str, value: &str) -> KeyValue {
    kv(key, any_value::Value::StringValue(value.to_owned()))
}

fn int(key: &str, value: u64) -> KeyValue {
    kv(
        key,
        any_value::Value::IntValue(i64::try_from(value).unwrap_or(i64::MAX)),
    )
}

fn unix_nanos(rfc3339: Option<&str>) -> u64 {
    rfc3339
        .and_then(|t| kevents_core::Time::parse_rfc3339(t).ok())
        .map_or(0, |t| u64::try_from(t.unix_nanos()).unwrap_or(0))
}

/// The severity of an event type, as the `k8s_events` receiver maps it: `Normal` INFO,
/// `Warning` WARN (`Error` ERROR, `Critical` FATAL), anything else unspecified.
///
/// ```
/// use kevents_export::otlp_severity;
/// assert_eq!(otlp_severity("Warning"), 13);
/// assert_eq!(otlp_severity("Normal"), 9);
/// assert_eq!(otlp_severity("Odd"), 0);
/// ```
pub fn otlp_severity(type_: &str) -> i32 {
    let s = match type_.to_ascii_lowercase().as_str() {
        "normal" => SeverityNumber::Info,
        "warning" => SeverityNumber::Warn,
        "error" => SeverityNumber::Error,
        "critical" => SeverityNumber::Fatal,
        _ => SeverityNumber::Unspecified,
    };
    s as i32
}

/// One log record of `record`, in a resource of its own (the object it is about), as the
/// `k8s_events` receiver lays it out (docs/export.md has the table).
fn resource_logs(record: &ExportRecord, observed: u64) -> ResourceLogs {
    let r = &record.regarding;
    let resource = Resource {
        attributes: vec![
            string("k8s.object.kind", &r.kind),
            string("k8s.object.name", &r.name),
            string("k8s.object.uid", &r.uid),
            string("k8s.object.fieldpath", &r.field_path),
            string("k8s.object.api_version", &r.api_version),
            string("k8s.object.resource_version", &r.resource_version),
        ],
        ..Default::default()
    };
    let mut attributes = vec![
        string("k8s.event.reason", &record.reason),
        string("k8s.event.action", &record.action),
        string(
            "k8s.event.start_time",
            record.created.as_deref().unwrap_or_default(),
        ),
        string("k8s.event.name", &record.name),
        string("k8s.event.uid", &record.uid),
        string("k8s.namespace.name", &r.namespace),
        int("k8s.event.count", record.count),
        int("kevents.event.delta", record.delta),
    ];
    if let Some(api) = &record.api {
        attributes.push(string("kevents.event.api", api));
    }
    attributes.push(string("kevents.event.key", &record.key()));
    let severity = otlp_severity(&record.type_);
    let log = LogRecord {
        time_unix_nano: unix_nanos(record.last_time.as_deref().or(record.first_time.as_deref())),
        observed_time_unix_nano: observed,
        severity_number: severity,
        severity_text: if severity == 0 {
            String::new()
        } else {
            record.type_.clone()
        },
        body: Some(AnyValue {
            value: Some(any_value::Value::StringValue(record.note.clone())),
        }),
        attributes,
        ..Default::default()
    };
    ResourceLogs {
        resource: Some(resource),
        scope_logs: vec![ScopeLogs {
            scope: Some(InstrumentationScope {
                name: OTLP_SCOPE.to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                ..Default::default()
            }),
            log_records: vec![log],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The OTLP logs request of `records`: one log record each (body: the note; severity from
/// the type; the `k8s_events` receiver's attributes, plus `k8s.event.count`,
/// `kevents.event.delta`, `kevents.event.api` and `kevents.event.key` = `uid:count`).
///
/// ```
/// let r = kevents_export::ExportRecord { uid: "u".into(), count: 3, delta: 1, note: "hi".into(), ..Default::default() };
/// let req = kevents_export::log_request(&[r]);
/// let log = &req.resource_logs[0].scope_logs[0].log_records[0];
/// assert!(log.attributes.iter().any(|a| a.key == "kevents.event.key"));
/// ```
pub fn log_request(records: &[ExportRecord]) -> ExportLogsServiceRequest {
    let observed = u64::try_from(kevents_core::Clock::now(&kevents_core::SystemClock).unix_nanos())
        .unwrap_or(0);
    ExportLogsServiceRequest {
        resource_logs: records.iter().map(|r| resource_logs(r, observed)).collect(),
    }
}

/// A [`RecordSink`] that sends records as OTLP log records (OTLP/HTTP, protobuf) to
/// `{endpoint}/v1/logs`. A 2xx answer is a delivery (a partial success that rejected records
/// is an error); 429, 502, 503, 504 and transport errors are retried, waiting what
/// `Retry-After` says (at most [`Otlp::max_retry_after`]) or else 200 ms doubling to
/// [`Otlp::max_backoff`], for up to [`Otlp::retry_for`]; anything else is an error, with the
/// answer's first 64 KiB (sanitised, header values redacted). The Collector does not
/// deduplicate: a record sent again after a crash carries the same `kevents.event.key`.
///
/// ```
/// let otlp = kevents_export::Otlp::new("http://127.0.0.1:4318", Default::default()).unwrap();
/// assert_eq!(otlp.shown(), "http://127.0.0.1:4318/v1/logs");
/// assert!(kevents_export::Otlp::new("http://u:p@h:4318", Default::default()).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct Otlp {
    client: reqwest::Client,
    url: reqwest::Url,
    options: HttpOptions,
    /// How long a request is retried before the delivery fails.
    pub retry_for: Duration,
    /// The longest pause between tries without `Retry-After`.
    pub max_backoff: Duration,
    /// The longest `Retry-After` honoured (a longer one waits this long).
    pub max_retry_after: Duration,
}

impl Otlp {
    /// A sink to the OTLP endpoint `endpoint` (`http` or `https`; `/v1/logs` is appended
    /// unless the path already ends with it).
    pub fn new(endpoint: &str, options: HttpOptions) -> Result<Self, ExportError> {
        let mut url = parse_url("OTLP", endpoint)?;
        if !url.path().ends_with("/v1/logs") {
            let path = format!("{}/v1/logs", url.path().trim_end_matches('/'));
            url.set_path(&path);
        }
        let client = options.client(url.scheme() == "https")?;
        Ok(Otlp {
            client,
            url,
            options,
            retry_for: Duration::from_secs(300),
            max_backoff: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(60),
        })
    }

    /// The URL the logs go to, as it may be shown (`scheme://host:port/path`).
    pub fn shown(&self) -> String {
        shown(&self.url)
    }

    /// Sends `records` in one request, retried as [`Otlp`] says; returns once the endpoint
    /// accepted them all.
    pub async fn export(&self, records: &[ExportRecord]) -> Result<(), ExportError> {
        if records.is_empty() {
            return Ok(());
        }
        let body = log_request(records).encode_to_vec();
        let started = Instant::now();
        let mut pause = Duration::from_millis(200);
        loop {
            let mut request = self
                .client
                .post(self.url.clone())
                .header("Content-Type", "application/x-protobuf");
            for (name, value) in self.options.headers() {
                request = request.header(name, value);
            }
            let (cause, wait, last) = match request.body(body.clone()).send().await {
                Ok(resp) if resp.status().is_success() => {
                    let answer = bounded_body(resp, MAX_ERROR_BODY).await;
                    metrics::counter!("kevents_export_otlp_requests_total", "outcome" => "accepted")
                        .increment(1);
                    return self.partial(&answer);
                }
                Ok(resp) => {
                    let code = resp.status().as_u16();
                    let retry_after = resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(kevents_core::answer::retry_after_header);
                    let text = self.error_text(bounded_body(resp, MAX_ERROR_BODY).await);
                    let last = format!("{} answered {code}{text}", self.shown());
                    if !matches!(code, 429 | 502 | 503 | 504) {
                        metrics::counter!("kevents_export_otlp_requests_total", "outcome" => "refused")
                            .increment(1);
                        return Err(ExportError::Sink(last));
                    }
                    let cause = match code {
                        429 => "429",
                        503 => "503",
                        _ => "5xx",
                    };
                    (
                        cause,
                        retry_after.map(|w| w.min(self.max_retry_after)),
                        last,
                    )
                }
                Err(e) => (
                    "transport",
                    None,
                    format!(
                        "{}: {}",
                        self.shown(),
                        self.options.redact(&kevents_core::request::error_chain(&e))
                    ),
                ),
            };
            metrics::counter!("kevents_export_otlp_retries_total", "cause" => cause).increment(1);
            let wait = wait.unwrap_or(pause);
            if started.elapsed() + wait > self.retry_for {
                metrics::counter!("kevents_export_otlp_requests_total", "outcome" => "failed")
                    .increment(1);
                return Err(ExportError::Sink(format!(
                    "{last} (retried for {}s)",
                    started.elapsed().as_secs()
                )));
            }
            tracing::debug!("OTLP: {last}; again in {wait:?}");
            tokio::time::sleep(wait).await;
            pause = (pause * 2).min(self.max_backoff);
        }
    }

    /// A 2xx answer: a partial success that rejected records is an error (not retried: the
    /// same request would be rejected again).
    fn partial(&self, answer: &[u8]) -> Result<(), ExportError> {
        let Ok(response) = ExportLogsServiceResponse::decode(answer) else {
            return Ok(());
        };
        match response.partial_success {
            Some(p) if p.rejected_log_records > 0 => Err(ExportError::Sink(format!(
                "{} rejected {} log records: {}",
                self.shown(),
                p.rejected_log_records,
                self.options
                    .redact(&kevents_core::status::sanitize_server_text(
                        &p.error_message
                    ))
            ))),
            _ => Ok(()),
        }
    }

    fn error_text(&self, body: Vec<u8>) -> String {
        let text = String::from_utf8_lossy(&body);
        let text = kevents_core::status::sanitize_server_text(text.trim());
        if text.is_empty() {
            String::new()
        } else {
            format!(": {}", self.options.redact(&text))
        }
    }
}

impl RecordSink for Otlp {
    async fn deliver(&mut self, record: &ExportRecord) -> Result<(), ExportError> {
        self.export(std::slice::from_ref(record)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsPartialSuccess;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn record() -> ExportRecord {
        ExportRecord {
            uid: "3f1c".into(),
            api: Some("events.k8s.io/v1".into()),
            namespace: "web".into(),
            name: "web-1.17a0".into(),
            regarding: crate::Regarding {
                kind: "Pod".into(),
                namespace: "web".into(),
                name: "web-1".into(),
                uid: "p1".into(),
                field_path: "spec.containers{app}".into(),
                api_version: "v1".into(),
                resource_version: "981".into(),
            },
            reason: "BackOff".into(),
            type_: "Warning".into(),
            note: "Back-off restarting failed container".into(),
            action: "Restart".into(),
            last_time: Some("2026-11-28T12:00:00.000000Z".into()),
            created: Some("2026-11-28T11:58:00Z".into()),
            count: 7,
            delta: 2,
            ..Default::default()
        }
    }

    fn attrs(list: &[KeyValue]) -> HashMap<String, any_value::Value> {
        list.iter()
            .map(|kv| {
                let v = kv.value.clone().and_then(|v| v.value).expect("a value");
                (kv.key.clone(), v)
            })
            .collect()
    }

    use std::collections::HashMap;

    #[test]
    fn the_mapping_uses_the_k8s_events_receivers_names() {
        let req = log_request(&[record()]);
        assert_eq!(req.resource_logs.len(), 1);
        let rl = &req.resource_logs[0];
        let resource = attrs(&rl.resource.as_ref().expect("a resource").attributes);
        let s = |v: &str| any_value::Value::StringValue(v.into());
        assert_eq!(resource["k8s.object.kind"], s("Pod"));
        assert_eq!(resource["k8s.object.name"], s("web-1"));
        assert_eq!(resource["k8s.object.uid"], s("p1"));
        assert_eq!(resource["k8s.object.fieldpath"], s("spec.containers{app}"));
        assert_eq!(resource["k8s.object.api_version"], s("v1"));
        assert_eq!(resource["k8s.object.resource_version"], s("981"));
        let sl = &rl.scope_logs[0];
        assert_eq!(sl.scope.as_ref().map(|s| s.name.as_str()), Some(OTLP_SCOPE));
        let log = &sl.log_records[0];
        assert_eq!(log.severity_number, SeverityNumber::Warn as i32);
        assert_eq!(log.severity_text, "Warning");
        assert_eq!(
            log.body.as_ref().and_then(|b| b.value.clone()),
            Some(s("Back-off restarting failed container"))
        );
        // 2026-11-28T12:00:00Z
        assert_eq!(log.time_unix_nano, 1_795_867_200_000_000_000);
        assert!(log.observed_time_unix_nano > 0);
        let a = attrs(&log.attributes);
        assert_eq!(a["k8s.event.reason"], s("BackOff"));
        assert_eq!(a["k8s.event.action"], s("Restart"));
        assert_eq!(a["k8s.event.start_time"], s("2026-11-28T11:58:00Z"));
        assert_eq!(a["k8s.event.name"], s("web-1.17a0"));
        assert_eq!(a["k8s.event.uid"], s("3f1c"));
        assert_eq!(a["k8s.namespace.name"], s("web"));
        assert_eq!(a["k8s.event.count"], any_value::Value::IntValue(7));
        assert_eq!(a["kevents.event.delta"], any_value::Value::IntValue(2));
        assert_eq!(a["kevents.event.api"], s("events.k8s.io/v1"));
        assert_eq!(a["kevents.event.key"], s("3f1c:7"));
        assert_eq!(a.len(), 10);
        // Normal is INFO; an unknown type has no severity.
        let mut normal = record();
        normal.type_ = "Normal".into();
        normal.api = None;
        let log = &log_request(&[normal]).resource_logs[0].scope_logs[0].log_records[0];
        assert_eq!(
            (log.severity_number, log.severity_text.as_str()),
            (SeverityNumber::Info as i32, "Normal")
        );
        assert!(!attrs(&log.attributes).contains_key("kevents.event.api"));
        // One log record per export record, in order.
        let mut second = record();
        second.uid = "other".into();
        let req = log_request(&[record(), second]);
        let keys: Vec<_> = req
            .resource_logs
            .iter()
            .map(|rl| {
                attrs(&rl.scope_logs[0].log_records[0].attributes)["kevents.event.key"].clone()
            })
            .collect();
        assert_eq!(keys, vec![s("3f1c:7"), s("other:7")]);
    }

    /// A one-connection-per-request HTTP server answering `replies` (status, extra head
    /// lines, body) in turn; returns each request's head and body and when it came.
    async fn serve(
        replies: Vec<(u16, &'static str, Vec<u8>)>,
    ) -> (
        String,
        tokio::task::JoinHandle<Vec<(String, Vec<u8>, std::time::Instant)>>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            for (code, head, body) in replies {
                let (mut conn, _) = listener.accept().await.unwrap();
                let mut buf = Vec::new();
                let mut chunk = vec![0u8; 65536];
                loop {
                    let n = conn.read(&mut chunk).await.unwrap();
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let text = String::from_utf8_lossy(&buf[..end]).to_string();
                        let len: usize = text
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length: ")
                                    .map(|v| v.trim().parse().unwrap())
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            seen.push((text, buf[end + 4..].to_vec(), std::time::Instant::now()));
                            break;
                        }
                    }
                }
                let reply = format!(
                    "HTTP/1.1 {code} X\r\n{head}content-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                conn.write_all(reply.as_bytes()).await.unwrap();
                conn.write_all(&body).await.unwrap();
            }
            seen
        });
        (url, task)
    }

    #[tokio::test]
    async fn a_429_waits_its_retry_after_and_a_503_is_retried() {
        let accepted = ExportLogsServiceResponse::default().encode_to_vec();
        let (url, server) = serve(vec![
            (429, "retry-after: 1\r\n", b"slow down".to_vec()),
            (503, "", Vec::new()),
            (200, "content-type: application/x-protobuf\r\n", accepted),
        ])
        .await;
        let mut options = HttpOptions::default();
        options
            .header("Authorization", "Bearer s3cr3t-t0ken")
            .unwrap();
        let mut otlp = Otlp::new(&url, options).unwrap();
        otlp.max_backoff = Duration::from_millis(50);
        otlp.deliver(&record()).await.unwrap();
        let seen = server.await.unwrap();
        assert_eq!(seen.len(), 3);
        // Retry-After: 1 was honoured (the 503 had none: the back-off, 200 ms).
        let after_429 = seen[1].2 - seen[0].2;
        assert!(after_429 >= Duration::from_millis(950), "{after_429:?}");
        for (head, body, _) in &seen {
            assert!(head.starts_with("POST /v1/logs "), "{head}");
            let lower = head.to_ascii_lowercase();
            assert!(
                lower.contains("content-type: application/x-protobuf"),
                "{head}"
            );
            assert!(
                lower.contains("authorization: bearer s3cr3t-t0ken"),
                "{head}"
            );
            // The same request each time: the protobuf of the record.
            let req = ExportLogsServiceRequest::decode(body.as_slice()).unwrap();
            let log = &req.resource_logs[0].scope_logs[0].log_records[0];
            assert_eq!(
                attrs(&log.attributes)["kevents.event.key"],
                any_value::Value::StringValue("3f1c:7".into())
            );
        }
    }

    #[tokio::test]
    async fn retries_end_at_the_deadline_and_a_400_is_not_retried_nor_leaks_a_header() {
        let (url, server) = serve(vec![
            (429, "retry-after: 1\r\n", Vec::new()),
            (400, "", b"bad request from token s3cr3t-t0ken".to_vec()),
        ])
        .await;
        let mut options = HttpOptions::default();
        options
            .header("Authorization", "Bearer s3cr3t-t0ken")
            .unwrap();
        let mut otlp = Otlp::new(&url, options.clone()).unwrap();
        otlp.retry_for = Duration::from_millis(100);
        // The deadline is shorter than the Retry-After: no second try.
        let err = otlp.deliver(&record()).await.unwrap_err().to_string();
        assert!(err.contains("429") && err.contains("retried"), "{err}");
        let mut otlp = Otlp::new(&url, options).unwrap();
        let err = otlp.deliver(&record()).await.unwrap_err().to_string();
        assert!(err.contains("400"), "{err}");
        assert!(!err.contains("s3cr3t"), "{err}");
        assert!(err.contains("<redacted>"), "{err}");
        assert_eq!(server.await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_partial_success_that_rejected_records_is_an_error() {
        let partial = ExportLogsServiceResponse {
            partial_success: Some(ExportLogsPartialSuccess {
                rejected_log_records: 1,
                error_message: "too old".into(),
            }),
        }
        .encode_to_vec();
        let (url, server) = serve(vec![(200, "", partial)]).await;
        let mut otlp = Otlp::new(&url, HttpOptions::default()).unwrap();
        let err = otlp.deliver(&record()).await.unwrap_err().to_string();
        assert!(
            err.contains("rejected 1") && err.contains("too old"),
            "{err}"
        );
        assert_eq!(server.await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_transport_error_is_retried() {
        // Nothing listens at first; the server comes up after 300 ms.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let mut otlp = Otlp::new(&url, HttpOptions::default()).unwrap();
        otlp.max_backoff = Duration::from_millis(100);
        let server = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .unwrap();
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 65536];
            let _ = conn.read(&mut buf).await.unwrap();
            conn.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
        });
        otlp.deliver(&record()).await.unwrap();
        server.await.unwrap();
    }
}
