//! The benchmark workload `W(n, objects, reasons, messages)` of `docs/benchmarks.md`, the
//! same one client-go was measured with.

use kevents_core::{EventType, ObjectReference, Occurrence};

/// A named workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// `hot`, `wide` or `api`.
    pub name: &'static str,
    /// Occurrences.
    pub n: usize,
    /// Distinct pods.
    pub objects: usize,
    /// Distinct reasons per pod.
    pub reasons: usize,
    /// Distinct messages per reason.
    pub messages: usize,
}

impl Workload {
    /// 200 000 occurrences on 1 000 pods, 5 reasons, 3 messages: deduplication, patches,
    /// the spam filter.
    pub const HOT: Workload = Workload {
        name: "hot",
        n: 200_000,
        objects: 1_000,
        reasons: 5,
        messages: 3,
    };
    /// 200 000 occurrences on 100 000 pods: many distinct keys, LRU eviction.
    pub const WIDE: Workload = Workload {
        name: "wide",
        n: 200_000,
        objects: 100_000,
        reasons: 1,
        messages: 1,
    };
    /// 3 000 occurrences on 100 pods, 3 reasons, 2 messages: delivery to a real apiserver.
    pub const API: Workload = Workload {
        name: "api",
        n: 3_000,
        objects: 100,
        reasons: 3,
        messages: 2,
    };

    /// Looks a workload up by name.
    ///
    /// ```
    /// assert_eq!(kevents_sim::workload::Workload::by_name("hot").unwrap().n, 200_000);
    /// ```
    pub fn by_name(name: &str) -> Option<Workload> {
        [Self::HOT, Self::WIDE, Self::API]
            .into_iter()
            .find(|w| w.name == name)
    }

    /// The object of occurrence `i` (Pod `bench/pod-<i % objects>`, uid `uid-<i % objects>`),
    /// without building its reason and message.
    ///
    /// ```
    /// use kevents_core::EventType;
    /// use kevents_sim::workload::Workload;
    /// let w = Workload::WIDE;
    /// assert_eq!(w.object(100_007), w.occurrence(100_007, EventType::Normal).object);
    /// assert_eq!(w.object(7).uid, "uid-7");
    /// ```
    pub fn object(&self, i: usize) -> ObjectReference {
        let o = i % self.objects;
        let mut object = ObjectReference::new("v1", "Pod", "bench", format!("pod-{o}"));
        object.uid = format!("uid-{o}");
        object
    }

    /// Occurrence `i` of the workload with event type `event_type`.
    ///
    /// ```
    /// use kevents_core::EventType;
    /// use kevents_sim::workload::Workload;
    /// let o = Workload::HOT.occurrence(1_234_567, EventType::Normal);
    /// assert_eq!(o.object.name, "pod-567");
    /// assert_eq!(o.reason, "Reason4");
    /// assert_eq!(o.message, "message variant 0");
    /// ```
    pub fn occurrence(&self, i: usize, event_type: EventType) -> Occurrence {
        Occurrence::new(
            self.object(i),
            event_type,
            format!("Reason{}", (i / self.objects) % self.reasons),
            format!(
                "message variant {}",
                (i / (self.objects * self.reasons)) % self.messages
            ),
        )
    }
}

/// Peak resident set size of this process in bytes (`VmHWM`), if the platform reports it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
