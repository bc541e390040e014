//! The observation stage's cache entry: what the correlator knows of a stored event (its
//! count, firstTimestamp, name and resourceVersion; client-go `eventLog` in
//! `tools/record/events_cache.go`).

use crate::core_v1::model::Event;
use crate::time::Time;

#[derive(Debug)]
pub(super) struct Observation {
    // Go keeps `uint(event.Count)`; wrapping behaviour for hand-built negative counts follows.
    pub(super) count: u64,
    pub(super) first_timestamp: Option<Time>,
    /// The name, then the resourceVersion: one buffer, so a recycled entry overwritten in
    /// the `wide` workload touches one cold heap block instead of two.
    pub(super) text: String,
    pub(super) name_len: usize,
}

impl Observation {
    pub(super) fn new(count: u64, e: &Event) -> Self {
        let mut o = Observation {
            count,
            first_timestamp: None,
            text: String::new(),
            name_len: 0,
        };
        o.learn(count, e);
        o
    }

    /// Overwrites this observation with `e`'s, reusing the buffer.
    pub(super) fn learn(&mut self, count: u64, e: &Event) {
        self.count = count;
        self.first_timestamp = e.first_timestamp;
        self.text.clear();
        self.text.push_str(&e.metadata.name);
        self.text.push_str(&e.metadata.resource_version);
        self.name_len = e.metadata.name.len();
    }

    /// Learns the server's copy of an event after a write was answered: its name,
    /// resourceVersion and firstTimestamp, but never a count below the one observed. A
    /// pipeline correlates while its writes are in flight, so occurrences observed after the
    /// write was sent (spam-filtered ones included, which only the observer counts) are not
    /// in the answer; taking its count would silently roll them back. Serially (client-go)
    /// the observed count is the count sent, so this is `learn`.
    pub(super) fn learn_stored(&mut self, count: u64, e: &Event) {
        let observed = self.count;
        self.learn(count.max(observed), e);
    }

    /// The name and the resourceVersion.
    pub(super) fn name_and_version(&self) -> (&str, &str) {
        // `name_len` is where the name ends in `text`, so the split cannot fail.
        self.text
            .split_at_checked(self.name_len)
            .unwrap_or_default()
    }
}
