//! The two traits an export delivers through: [`RecordSink`] (where records go, idempotent on
//! `uid:count`) and [`ResumeStore`] (the durable resume point: per uid the last exported
//! count, a pending record, and per watch scope the resourceVersion), with
//! [`MemoryResume`], a resume point that lasts as long as the process.

use std::collections::HashMap;
use std::future::Future;

use crate::{Counts, ExportError, ExportRecord};

/// Where records go. `deliver` returns once the record is stored durably (acknowledged); a
/// record delivered twice (after a crash, with the same [`ExportRecord::key`]) must be stored
/// once, which the destination's idempotency (JetStream's `Nats-Msg-Id`, a webhook's
/// `Idempotency-Key`) gives.
///
/// ```
/// use kevents_export::{ExportError, ExportRecord, RecordSink};
/// /// Prints records as JSON lines.
/// struct Stdout;
/// impl RecordSink for Stdout {
///     async fn deliver(&mut self, record: &ExportRecord) -> Result<(), ExportError> {
///         let line = serde_json::to_string(record).map_err(|e| ExportError::Sink(e.to_string()))?;
///         println!("{line}");
///         Ok(())
///     }
/// }
/// ```
pub trait RecordSink {
    /// Stores `record`, returning once it is durable.
    fn deliver(&mut self, record: &ExportRecord) -> impl Future<Output = Result<(), ExportError>>;

    /// Stores `records` in their order, returning once all are durable. The run loop hands a
    /// sink every record that is ready at once (a uid may appear more than once, each record
    /// with its own key and delta). The default delivers them one by one; a sink that can
    /// keep several in flight ([`crate::JetStream`]) does so. On an error, any prefix of the
    /// batch may be stored: the run ends, and the resume point's pending records (begun
    /// with [`ResumeStore::begin_batch`]) are delivered again, with the same keys, at the
    /// next start.
    ///
    /// ```
    /// # async fn f() -> Result<(), kevents_export::ExportError> {
    /// use kevents_export::{ExportError, ExportRecord, RecordSink};
    /// struct Count(usize);
    /// impl RecordSink for Count {
    ///     async fn deliver(&mut self, _record: &ExportRecord) -> Result<(), ExportError> {
    ///         self.0 += 1;
    ///         Ok(())
    ///     }
    /// }
    /// let mut sink = Count(0);
    /// sink.deliver_batch(&[ExportRecord::default(), ExportRecord::default()]).await?;
    /// assert_eq!(sink.0, 2);
    /// # Ok(()) }
    /// ```
    fn deliver_batch(
        &mut self,
        records: &[ExportRecord],
    ) -> impl Future<Output = Result<(), ExportError>> {
        async move {
            for record in records {
                self.deliver(record).await?;
            }
            Ok(())
        }
    }
}

/// What a [`ResumeStore`] holds: per uid the last exported count and its namespace, the
/// records whose delivery was begun and maybe not finished, and per watch scope the
/// resourceVersion up to which everything was exported.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResumePoint {
    /// uid -> (last exported count, namespace), compact ([`Counts`]: a million events in
    /// about 50 MB); the run loop continues from it as it is, without a copy.
    pub counts: Counts,
    /// Records begun ([`ResumeStore::begin`]) and not committed: delivered again, with the
    /// same key, before anything else.
    pub pending: Vec<ExportRecord>,
    /// Watch scope (see [`crate::scope_key`]) -> resourceVersion.
    pub resource_versions: HashMap<String, String>,
}

/// The durable resume point. The run loop calls, per record: [`ResumeStore::begin`] (the
/// record, before it is delivered), [`RecordSink::deliver`], then [`ResumeStore::commit`]:
/// after a crash anywhere in between, [`ResumeStore::load`] returns the record as pending and
/// it is delivered again with the same key, so every `(uid, count)` is stored once and the
/// deltas still sum to the count.
///
/// ```
/// # async fn f() -> Result<(), kevents_export::ExportError> {
/// use kevents_export::{ExportRecord, MemoryResume, ResumeStore};
/// let mut store = MemoryResume::default();
/// let record = ExportRecord { uid: "u".into(), count: 2, delta: 2, ..Default::default() };
/// store.begin(&record, 0).await?;
/// assert_eq!(store.load().await?.pending, vec![record.clone()]);
/// store.commit(&record).await?;
/// assert_eq!(store.load().await?.counts.get("u"), Some((2, "")));
/// # Ok(()) }
/// ```
pub trait ResumeStore {
    /// The resume point as stored.
    fn load(&mut self) -> impl Future<Output = Result<ResumePoint, ExportError>>;
    /// Notes that `record` is about to be delivered (`previous`: the count exported before).
    fn begin(
        &mut self,
        record: &ExportRecord,
        previous: u64,
    ) -> impl Future<Output = Result<(), ExportError>>;
    /// Notes that `record` was delivered: its count is the uid's last exported count.
    fn commit(&mut self, record: &ExportRecord) -> impl Future<Output = Result<(), ExportError>>;
    /// Notes that `records` (in their order) are about to be delivered, as
    /// [`ResumeStore::begin`] does for one (`previous` is each record's `count - delta`). The
    /// default begins them one by one; a store that writes ([`crate::ConfigMapResume`])
    /// writes them all at once.
    fn begin_batch(
        &mut self,
        records: &[ExportRecord],
    ) -> impl Future<Output = Result<(), ExportError>> {
        async move {
            for record in records {
                self.begin(record, record.count.saturating_sub(record.delta))
                    .await?;
            }
            Ok(())
        }
    }
    /// Notes that `records` were delivered, as [`ResumeStore::commit`] does for one, in their
    /// order (the last record of a uid gives its count).
    fn commit_batch(
        &mut self,
        records: &[ExportRecord],
    ) -> impl Future<Output = Result<(), ExportError>> {
        async move {
            for record in records {
                self.commit(record).await?;
            }
            Ok(())
        }
    }
    /// Forgets a uid (the event was deleted).
    fn forget(&mut self, uid: &str) -> impl Future<Output = Result<(), ExportError>>;
    /// Records that everything of `scope` up to `resource_version` was exported.
    fn save_resource_version(
        &mut self,
        scope: &str,
        resource_version: &str,
    ) -> impl Future<Output = Result<(), ExportError>>;
}

/// A [`ResumeStore`] in memory: a restarted process starts from nothing (every live event's
/// first record then carries its whole count again). For tests and for sinks whose
/// destination deduplicates by key forever.
/// Clones share one resume point (keep a clone to look at it, or to run again from it).
#[derive(Debug, Clone, Default)]
pub struct MemoryResume {
    point: std::sync::Arc<std::sync::Mutex<ResumePoint>>,
}

impl MemoryResume {
    /// A store that starts from `point`.
    ///
    /// ```
    /// let store = kevents_export::MemoryResume::from_point(Default::default());
    /// assert!(store.point().counts.is_empty());
    /// ```
    pub fn from_point(point: ResumePoint) -> Self {
        MemoryResume {
            point: std::sync::Arc::new(std::sync::Mutex::new(point)),
        }
    }

    /// A copy of the resume point now.
    pub fn point(&self) -> ResumePoint {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ResumePoint> {
        self.point.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ResumeStore for MemoryResume {
    async fn load(&mut self) -> Result<ResumePoint, ExportError> {
        Ok(self.point())
    }
    async fn begin(&mut self, record: &ExportRecord, _previous: u64) -> Result<(), ExportError> {
        let mut point = self.lock();
        // A batch may begin several records of one uid: each stays pending.
        point
            .pending
            .retain(|p| p.uid != record.uid || p.count != record.count);
        point.pending.push(record.clone());
        Ok(())
    }
    async fn commit(&mut self, record: &ExportRecord) -> Result<(), ExportError> {
        let mut point = self.lock();
        // Delivered, and so every record of its uid up to its count.
        point
            .pending
            .retain(|p| p.uid != record.uid || p.count > record.count);
        point
            .counts
            .insert(&record.uid, record.count, &record.namespace);
        Ok(())
    }
    async fn forget(&mut self, uid: &str) -> Result<(), ExportError> {
        self.lock().counts.remove(uid);
        Ok(())
    }
    async fn save_resource_version(&mut self, scope: &str, rv: &str) -> Result<(), ExportError> {
        self.lock()
            .resource_versions
            .insert(scope.to_owned(), rv.to_owned());
        Ok(())
    }
}
