//! A real OpenTelemetry Collector for tests ([`Otelcol`]): the binary that
//! `bash scripts/otelcol/provision.sh` builds from Go modules (core v0.161.0, OTLP receiver,
//! contrib file exporter), started with a temporary configuration: an OTLP/HTTP receiver on a
//! free loopback port and a file exporter to a temporary file, flushed every 100 ms, the
//! Collector's own telemetry off (no fixed port). [`Otelcol::log_records`] reads what it
//! wrote back.
//!
//! The binary: `KEVENTS_OTELCOL=/path/to/otelcol`, else
//! `${KEVENTS_CACHE:-/var/cache/kevents}/otelcol-current/otelcol`. A missing one is an error
//! naming the script: tests fail, they do not skip.
//!
//! ```no_run
//! let col = kevents_testkit::otelcol::Otelcol::start().expect("the Collector starts");
//! println!("send OTLP/HTTP to {}", col.endpoint());
//! let records = col.log_records().expect("its output");
//! ```

use std::collections::HashMap;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use thiserror::Error;

/// Why the Collector could not be found, started or read.
#[derive(Debug, Error)]
pub enum OtelcolError {
    /// The binary is not there.
    #[error("{0}")]
    NotProvisioned(String),
    /// It did not accept connections in time, or exited.
    #[error("{what}\n--- the Collector's log (tail) ---\n{log}")]
    NotReady {
        /// What did not happen.
        what: String,
        /// The tail of its log.
        log: String,
    },
    /// An IO error.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A line of the output file is not OTLP JSON.
    #[error("the Collector's output line {line}: {error}")]
    Output {
        /// The line number (1-based).
        line: usize,
        /// What is wrong.
        error: String,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> OtelcolError {
    let what = what.into();
    move |source| OtelcolError::Io { what, source }
}

/// The Collector binary (see the module's documentation).
///
/// ```no_run
/// assert!(kevents_testkit::otelcol::otelcol_binary().expect("provisioned").ends_with("otelcol"));
/// ```
pub fn otelcol_binary() -> Result<PathBuf, OtelcolError> {
    if let Some(p) = std::env::var_os("KEVENTS_OTELCOL") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(OtelcolError::NotProvisioned(format!(
                "KEVENTS_OTELCOL={} does not exist",
                p.display()
            )))
        };
    }
    let cache = std::env::var_os("KEVENTS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/kevents"));
    let bin = cache.join("otelcol-current").join("otelcol");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(OtelcolError::NotProvisioned(format!(
            "{} is missing: run bash scripts/otelcol/provision.sh",
            bin.display()
        )))
    }
}

/// One log record as the Collector wrote it, with its resource's attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRecord {
    /// The body (a string body; empty otherwise).
    pub body: String,
    /// `severityNumber` (0 when absent).
    pub severity_number: i64,
    /// `severityText`.
    pub severity_text: String,
    /// `timeUnixNano` (0 when absent).
    pub time_unix_nano: u64,
    /// The record's attributes: strings as strings, integers as numbers.
    pub attributes: HashMap<String, Value>,
    /// Its resource's attributes.
    pub resource: HashMap<String, Value>,
}

impl LogRecord {
    /// A string attribute (`None` when absent or not a string).
    pub fn str(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).and_then(Value::as_str)
    }

    /// An integer attribute (`None` when absent or not an integer).
    pub fn int(&self, key: &str) -> Option<i64> {
        self.attributes.get(key).and_then(Value::as_i64)
    }
}

/// OTLP JSON attributes (`[{"key", "value": {"stringValue"|"intValue"|...}}]`) as a map.
fn attributes(list: Option<&Value>) -> HashMap<String, Value> {
    let mut out = HashMap::new();
    for kv in list.and_then(Value::as_array).into_iter().flatten() {
        let Some(key) = kv.get("key").and_then(Value::as_str) else {
            continue;
        };
        let value = kv.get("value").cloned().unwrap_or(Value::Null);
        let v = if let Some(s) = value.get("stringValue") {
            s.clone()
        } else if let Some(i) = value.get("intValue") {
            // OTLP JSON writes 64-bit integers as strings.
            match i {
                Value::String(s) => s.parse::<i64>().map(Value::from).unwrap_or(Value::Null),
                other => other.clone(),
            }
        } else {
            value
        };
        out.insert(key.to_owned(), v);
    }
    out
}

/// Parses the file exporter's output (one OTLP JSON `ExportLogsServiceRequest` a line).
pub fn parse_output(text: &str) -> Result<Vec<LogRecord>, OtelcolError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).map_err(|e| OtelcolError::Output {
            line: i + 1,
            error: e.to_string(),
        })?;
        for rl in v
            .get("resourceLogs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let resource = attributes(rl.pointer("/resource/attributes"));
            for sl in rl
                .get("scopeLogs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                for lr in sl
                    .get("logRecords")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let num = |k: &str| -> u64 {
                        match lr.get(k) {
                            Some(Value::String(s)) => s.parse().unwrap_or(0),
                            Some(n) => n.as_u64().unwrap_or(0),
                            None => 0,
                        }
                    };
                    out.push(LogRecord {
                        body: lr
                            .pointer("/body/stringValue")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        severity_number: lr
                            .get("severityNumber")
                            .and_then(Value::as_i64)
                            .unwrap_or(0),
                        severity_text: lr
                            .get("severityText")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        time_unix_nano: num("timeUnixNano"),
                        attributes: attributes(lr.get("attributes")),
                        resource: resource.clone(),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// A running Collector; killed (SIGKILL) when dropped.
pub struct Otelcol {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Otelcol {
    /// Starts the Collector and waits until its OTLP/HTTP port accepts connections.
    pub fn start() -> Result<Self, OtelcolError> {
        let bin = otelcol_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("kevents-otelcol")
            .tempdir()
            .map_err(io("a temporary directory"))?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(io("a free port"))?
            .port();
        let output = dir.path().join("logs.jsonl");
        let config = format!(
            "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:{port}\n\
             exporters:\n  file:\n    path: {}\n    flush_interval: 100ms\n\
             service:\n  telemetry:\n    metrics:\n      level: none\n\
             \x20 pipelines:\n    logs:\n      receivers: [otlp]\n      exporters: [file]\n",
            output.display()
        );
        let config_path = dir.path().join("config.yaml");
        std::fs::write(&config_path, config).map_err(io("writing the Collector's config"))?;
        let log = std::fs::File::create(dir.path().join("otelcol.log"))
            .map_err(io("the Collector's log"))?;
        let child = Command::new(&bin)
            .arg("--config")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(io("the Collector's log"))?)
            .stderr(log)
            .spawn()
            .map_err(io(format!("spawning {}", bin.display())))?;
        let mut col = Otelcol { child, dir, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(col);
            }
            if let Ok(Some(status)) = col.child.try_wait() {
                return Err(OtelcolError::NotReady {
                    what: format!("the Collector exited ({status})"),
                    log: col.log_tail(),
                });
            }
            if Instant::now() > deadline {
                return Err(OtelcolError::NotReady {
                    what: format!("the Collector did not listen on 127.0.0.1:{port} in 20 s"),
                    log: col.log_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The OTLP/HTTP endpoint (`http://127.0.0.1:PORT`; logs go to `/v1/logs`).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The file the Collector writes the logs to.
    pub fn output(&self) -> PathBuf {
        self.dir.path().join("logs.jsonl")
    }

    /// The last 4 KiB of the Collector's own log.
    pub fn log_tail(&self) -> String {
        tail(&self.dir.path().join("otelcol.log"))
    }

    /// Every log record in the output file so far.
    pub fn log_records(&self) -> Result<Vec<LogRecord>, OtelcolError> {
        let text = match std::fs::read_to_string(self.output()) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(io("reading the Collector's output")(e)),
        };
        // A line being written when read is cut: only whole lines count.
        let whole = match text.rfind('\n') {
            Some(i) => &text[..=i],
            None => "",
        };
        parse_output(whole)
    }
}

fn tail(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let start = text.len().saturating_sub(4096);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    text[start..].to_owned()
}

impl Drop for Otelcol {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
