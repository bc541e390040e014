//! Not part of the public API: the export's per-record steps without a network, for
//! kevents' own instruction-count guard (`crates/kevents-icount`, docs/benchmarks.md). No
//! semver promise: anything here may change or go in any release.
//!
//! [`Deltas`] is the run loop's per-uid state ([`run`](crate::run) computes each record's
//! delta with it) and [`publication`] is what [`JetStream`](crate::JetStream) publishes for a
//! record: the same code, called directly.

use bytes::Bytes;

use crate::{ExportError, ExportRecord, JetStreamConfig};

/// The last exported count of every live event, as the run loop keeps it.
///
/// ```
/// use kevents_export::ExportRecord;
/// use kevents_export::__private::Deltas;
/// let mut d = Deltas::with_capacity(1);
/// let mut r = ExportRecord { uid: "u".into(), count: 3, ..Default::default() };
/// assert_eq!(d.delta(&mut r), Some(0));
/// d.remember(&r);
/// r.count = 5;
/// assert_eq!((d.delta(&mut r), r.delta), (Some(3), 2));
/// r.count = 3;
/// assert_eq!(d.delta(&mut r), None);
/// ```
pub struct Deltas(crate::run::State);

impl Deltas {
    /// Nothing known, room for `live` events.
    pub fn with_capacity(live: usize) -> Self {
        Deltas(crate::run::State::with_capacity(live))
    }

    /// Sets `record.delta` against its uid's last exported count and returns that count;
    /// `None` when the record carries nothing new (not exported).
    pub fn delta(&mut self, record: &mut ExportRecord) -> Option<u64> {
        match self.0.delta(record) {
            crate::run::Seen::New { previous } => Some(previous),
            _ => None,
        }
    }

    /// Remembers `record` as its uid's last export (after its delivery).
    pub fn remember(&mut self, record: &ExportRecord) {
        self.0.remember(record)
    }

    /// Events known.
    pub fn live(&self) -> usize {
        self.0.live()
    }
}

/// What [`JetStream`](crate::JetStream) publishes for `record` under `config`, before the
/// fence's headers: its subject, its `Nats-Msg-Id` and its JSON payload.
///
/// ```
/// use kevents_export::{ExportRecord, JetStreamConfig};
/// let r = ExportRecord { uid: "u1".into(), namespace: "ns".into(), count: 2, ..Default::default() };
/// let (subject, key, payload) =
///     kevents_export::__private::publication(&JetStreamConfig::new("ev"), &r).unwrap();
/// assert_eq!((subject.as_str(), key.as_str()), ("ev.ns.u1", "u1:2"));
/// let back: ExportRecord = serde_json::from_slice(&payload).unwrap();
/// assert_eq!(back, r);
/// ```
pub fn publication(
    config: &JetStreamConfig,
    record: &ExportRecord,
) -> Result<(String, String, Bytes), ExportError> {
    crate::jetstream::publication(config, record)
}
