//! [`ConfigMapResume`]: the resume point in a ConfigMap of the cluster being exported, for an
//! export without NATS (e.g. to an OpenTelemetry Collector): durable where the user already
//! has storage, written through any kevents-core [`Transport`] (kevents-http's `HttpSink`).

use std::collections::HashMap;
use std::time::Duration;

use kevents_core::request::{APPLICATION_JSON, Client, Method, Transport, check_path_names};
use serde_json::{Value, json};

use crate::store::{ResumePoint, ResumeStore};
use crate::{Counts, ExportError, ExportRecord};

/// The largest ConfigMap this store writes (the apiserver refuses objects above 1 MiB).
pub const MAX_CONFIGMAP_BYTES: usize = 900 << 10;

/// A [`ResumeStore`] in one ConfigMap (`data`: `counts` {uid: [count, namespace]},
/// `pending` (the records in flight), `resourceVersions` {scope: rv}, as JSON), read once at start and
/// written with its `resourceVersion` (optimistic concurrency):
///
/// - [`ResumeStore::begin`] writes the record as pending (and every commit before it)
///   **before** it is delivered: after a crash, [`ResumeStore::load`] gives it back and it is
///   delivered again with the same key. [`ResumeStore::begin_batch`] does so for a batch of
///   records in one write. A restart repeats at most the records in flight (the last batch
///   begun), with their keys, and the ones committed since the last write.
/// - [`ResumeStore::commit`] and [`ResumeStore::forget`] change the copy in memory; the next
///   write (the next record's begin, or a resourceVersion saved) carries them.
/// - A write answered 409 (another export wrote the ConfigMap since this one read it) is
///   [`ExportError::Fenced`]: two exports never share a resume point unnoticed.
///
/// Its size grows with the live events (about 60 bytes each: some 15 000 in the
/// 900 KiB this store allows; past that a write fails with [`ExportError::Resume`]).
/// It needs `get`, `create` and `update` on configmaps in its namespace.
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// let apiserver = kevents_http::HttpSink::infer().await?;
/// let store = kevents_export::ConfigMapResume::new(apiserver.requests(), "kevents", "kevents-export-resume")?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ConfigMapResume<T> {
    client: Client<T>,
    namespace: String,
    name: String,
    point: ResumePoint,
    /// The ConfigMap's resourceVersion as this store last read or wrote it (`None`: not
    /// created yet).
    version: Option<String>,
    /// How long a write failing with a transport error or a 429/5xx is retried.
    pub retry_for: Duration,
}

fn resume_err(e: impl std::fmt::Display) -> ExportError {
    ExportError::Resume(e.to_string())
}

impl<T: Transport> ConfigMapResume<T> {
    /// The store in the ConfigMap `namespace`/`name` (created at the first write).
    pub fn new(client: Client<T>, namespace: &str, name: &str) -> Result<Self, ExportError> {
        check_path_names(namespace, Some(name))
            .map_err(|e| ExportError::Config(format!("the resume ConfigMap: {e}")))?;
        if namespace.is_empty() {
            return Err(ExportError::Config(
                "the resume ConfigMap needs a namespace".into(),
            ));
        }
        Ok(ConfigMapResume {
            client,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            point: ResumePoint::default(),
            version: None,
            retry_for: Duration::from_secs(60),
        })
    }

    /// `namespace/name` of the ConfigMap.
    pub fn shown(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    fn path(&self, with_name: bool) -> String {
        if with_name {
            format!(
                "/api/v1/namespaces/{}/configmaps/{}",
                self.namespace, self.name
            )
        } else {
            format!("/api/v1/namespaces/{}/configmaps", self.namespace)
        }
    }

    /// One request, retried on transport errors, 429 and 5xx for up to `retry_for`.
    async fn send(
        &self,
        method: Method,
        path: String,
        body: Vec<u8>,
    ) -> Result<kevents_core::request::Response, ExportError> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(200);
        loop {
            let content = (!body.is_empty()).then_some(APPLICATION_JSON);
            let last = match self
                .client
                .send(method, path.clone(), content, body.clone(), 2 << 20)
                .await
            {
                Ok(r) if !matches!(r.code, 429 | 500 | 502 | 503 | 504) => return Ok(r),
                Ok(r) => format!("the apiserver answered {}", r.code),
                Err(e) => e.to_string(),
            };
            if started.elapsed() + pause > self.retry_for {
                return Err(ExportError::Resume(format!(
                    "the ConfigMap {}: {last}",
                    self.shown()
                )));
            }
            tracing::debug!("the resume ConfigMap {}: {last}; again", self.shown());
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    fn failed(&self, verb: &str, r: &kevents_core::request::Response) -> ExportError {
        let status = r.answer().status_error();
        if r.code == 409 {
            return ExportError::Fenced(format!(
                "the resume ConfigMap {} was written by another export since this one read it ({status})",
                self.shown()
            ));
        }
        ExportError::Resume(format!("{verb} the ConfigMap {}: {status}", self.shown()))
    }

    /// Writes the resume point (create, or update from the version read).
    async fn write(&mut self) -> Result<(), ExportError> {
        let counts: serde_json::Map<String, Value> = self
            .point
            .counts
            .iter()
            .map(|(uid, count, ns)| (uid, json!([count, ns])))
            .collect();
        let data = json!({
            "format": "kevents-export/v1",
            "counts": serde_json::to_string(&counts).map_err(resume_err)?,
            "pending": serde_json::to_string(&self.point.pending).map_err(resume_err)?,
            "resourceVersions": serde_json::to_string(&self.point.resource_versions).map_err(resume_err)?,
        });
        let mut metadata = json!({"name": self.name, "namespace": self.namespace});
        if let Some(v) = &self.version {
            metadata["resourceVersion"] = json!(v);
        }
        let object =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data});
        let body = serde_json::to_vec(&object).map_err(resume_err)?;
        if body.len() > MAX_CONFIGMAP_BYTES {
            return Err(ExportError::Resume(format!(
                "the resume ConfigMap {} would hold {} bytes ({} live events), over {MAX_CONFIGMAP_BYTES}: export into NATS for this many",
                self.shown(),
                body.len(),
                self.point.counts.len()
            )));
        }
        let (method, path, verb) = match self.version {
            Some(_) => (Method::Put, self.path(true), "updating"),
            None => (Method::Post, self.path(false), "creating"),
        };
        let r = self.send(method, path, body).await?;
        if !(200..300).contains(&r.code) {
            return Err(self.failed(verb, &r));
        }
        let stored: Value = serde_json::from_slice(&r.body).map_err(resume_err)?;
        self.version = stored
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if self.version.is_none() {
            return Err(ExportError::Resume(format!(
                "the ConfigMap {} came back without a resourceVersion",
                self.shown()
            )));
        }
        Ok(())
    }
}

fn field<V: serde::de::DeserializeOwned + Default>(
    data: &Value,
    key: &str,
) -> Result<V, ExportError> {
    match data.get(key).and_then(Value::as_str) {
        None => Ok(V::default()),
        Some(text) => serde_json::from_str(text)
            .map_err(|e| ExportError::Resume(format!("the resume ConfigMap's {key}: {e}"))),
    }
}

impl<T: Transport> ResumeStore for ConfigMapResume<T> {
    async fn load(&mut self) -> Result<ResumePoint, ExportError> {
        let r = self.send(Method::Get, self.path(true), Vec::new()).await?;
        if r.code == 404 {
            self.version = None;
            self.point = ResumePoint::default();
            return Ok(self.point.clone());
        }
        if !(200..300).contains(&r.code) {
            return Err(self.failed("reading", &r));
        }
        let object: Value = serde_json::from_slice(&r.body).map_err(resume_err)?;
        let data = object.get("data").cloned().unwrap_or(Value::Null);
        let stored: HashMap<String, (u64, String)> = field(&data, "counts")?;
        let mut counts = Counts::with_capacity(stored.len());
        for (uid, (count, ns)) in &stored {
            // A count no event can hold would silence the event for good: refused, warned.
            if !counts.insert(uid, *count, ns) {
                tracing::warn!(configmap = %self.shown(), count,
                    "the resume ConfigMap holds an impossible count for an event: ignored");
            }
        }
        drop(stored);
        let pending: Vec<ExportRecord> = field(&data, "pending")?;
        let resource_versions: HashMap<String, String> = field(&data, "resourceVersions")?;
        self.version = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.point = ResumePoint {
            counts,
            pending,
            resource_versions,
        };
        Ok(self.point.clone())
    }

    async fn begin(&mut self, record: &ExportRecord, _previous: u64) -> Result<(), ExportError> {
        self.begin_batch(std::slice::from_ref(record)).await
    }

    async fn commit(&mut self, record: &ExportRecord) -> Result<(), ExportError> {
        // Delivered, and so every record of its uid up to its count.
        self.point
            .pending
            .retain(|p| p.uid != record.uid || p.count > record.count);
        self.point
            .counts
            .insert(&record.uid, record.count, &record.namespace);
        Ok(())
    }

    /// One write for the whole batch: its records pending (with the commits before it).
    async fn begin_batch(&mut self, records: &[ExportRecord]) -> Result<(), ExportError> {
        for record in records {
            // A batch may begin several records of one uid: each stays pending.
            self.point
                .pending
                .retain(|p| p.uid != record.uid || p.count != record.count);
            self.point.pending.push(record.clone());
        }
        self.write().await
    }

    async fn forget(&mut self, uid: &str) -> Result<(), ExportError> {
        self.point.counts.remove(uid);
        Ok(())
    }

    async fn save_resource_version(&mut self, scope: &str, rv: &str) -> Result<(), ExportError> {
        self.point
            .resource_versions
            .insert(scope.to_owned(), rv.to_owned());
        self.write().await
    }
}
