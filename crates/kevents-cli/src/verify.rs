//! Checks what the apiserver stored against what the pipeline delivered and against what
//! the correlation says it should hold, event by event. The pipelines' outcome counters
//! cannot see a count that was written lower than it should have been (a rolled-back count
//! is still one successful write), so the demo and the benchmarks read the events back and
//! compare their counts.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use kevents_core::{
    Clock as _, Correlator, CorrelatorOptions, Event, EventFactory, EventSink, EventSource,
    Occurrence, SinkFuture, Stored, Time, VirtualClock,
};
use kevents_sim::MemoryApiServer;

/// `namespace/name` -> count.
pub type Counts = BTreeMap<String, i64>;

fn key(e: &Event) -> String {
    format!("{}/{}", e.metadata.namespace, e.metadata.name)
}

/// The counts of a list of events, by `namespace/name`.
pub fn counts(events: &[Event]) -> Counts {
    events
        .iter()
        .map(|e| (key(e), i64::from(e.count)))
        .collect()
}

/// What a sink's successful answers say was stored: per event, the count of its latest
/// answered write (writes of one event are answered in order: one at a time per event).
#[derive(Clone, Default)]
pub struct Ledger(Arc<Mutex<Counts>>);

impl Ledger {
    fn record(&self, event: &Event) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        m.insert(key(event), i64::from(event.count));
    }

    /// The counts delivered so far.
    pub fn counts(&self) -> Counts {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A sink that records every successful write's stored count in a [`Ledger`].
#[derive(Clone)]
pub struct LedgerSink<S> {
    sink: S,
    ledger: Ledger,
}

impl<S: EventSink> LedgerSink<S> {
    /// Records `sink`'s successful writes into `ledger`.
    pub fn new(sink: S, ledger: Ledger) -> Self {
        LedgerSink { sink, ledger }
    }

    fn watch(&self, sent: &Event, fut: SinkFuture) -> SinkFuture {
        let ledger = self.ledger.clone();
        let sent = sent.clone();
        Box::pin(async move {
            let result = fut.await;
            match &result {
                Ok(Stored::Returned(e)) => ledger.record(e),
                Ok(Stored::AsSent) => ledger.record(&sent),
                Err(_) => {}
            }
            result
        })
    }
}

impl<S: EventSink> EventSink for LedgerSink<S> {
    fn create(&self, event: &Event) -> SinkFuture {
        self.watch(event, self.sink.create(event))
    }

    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        self.watch(event, self.sink.patch(event, patch))
    }
}

/// Events whose stored count is not the expected one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// What the stored counts were compared with.
    pub against: &'static str,
    /// `(event, expected, stored)`; `None` where the event is missing on that side.
    pub events: Vec<(String, Option<i64>, Option<i64>)>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |c: Option<i64>| c.map_or_else(|| "none".to_owned(), |c| c.to_string());
        write!(
            f,
            "{} events' stored counts differ from {}:",
            self.events.len(),
            self.against
        )?;
        for (name, expected, stored) in self.events.iter().take(5) {
            write!(
                f,
                " {name} stored {} expected {};",
                show(*stored),
                show(*expected)
            )?;
        }
        if self.events.len() > 5 {
            write!(f, " ...")?;
        }
        Ok(())
    }
}

/// Compares the stored counts with `expected`, event by event: every expected event stored
/// with its count, and no other stored.
pub fn compare(stored: &Counts, expected: &Counts, against: &'static str) -> Result<(), Mismatch> {
    compare_in(stored, expected, against, true)
}

/// [`compare`], ignoring stored events `expected` does not name when `strict` is false (a
/// namespace other writers use too).
pub fn compare_in(
    stored: &Counts,
    expected: &Counts,
    against: &'static str,
    strict: bool,
) -> Result<(), Mismatch> {
    let mut events = Vec::new();
    for (name, &want) in expected {
        let got = stored.get(name).copied();
        if got != Some(want) {
            events.push((name.clone(), Some(want), got));
        }
    }
    for (name, &got) in stored {
        if strict && !expected.contains_key(name) {
            events.push((name.clone(), None, Some(got)));
        }
    }
    if events.is_empty() {
        Ok(())
    } else {
        Err(Mismatch { against, events })
    }
}

/// The sum of the counts.
pub fn sum(c: &Counts) -> i64 {
    c.values().sum()
}

/// The sum of the counts of a list of events per object they are about, not per name:
/// names carry the instant of an event's first occurrence, which a run on the real clock
/// cannot reproduce, and a coalesce-if-full queue merges an identity's repeats into its
/// first position, which may change which of an object's occurrences the spam filter (one
/// bucket per source and object) skips, though not how many.
pub fn by_object(events: &[Event]) -> Counts {
    let mut out = Counts::new();
    for e in events {
        let o = &e.involved_object;
        let k = format!("{}/{}/{}", o.namespace, o.kind, o.name);
        *out.entry(k).or_default() += i64::from(e.count);
    }
    out
}

/// What client-go's serial path stores for `occurrences` made by `source`, all at `now`
/// (correlate, write at once, learn the answer), per object; with `tails`, what every
/// occurrence correlated adds up to instead (the pipeline's deferred spam tails write the
/// skipped ones' counts too).
pub fn serial_by_object(
    source: EventSource,
    occurrences: &[Occurrence],
    now: Time,
    options: CorrelatorOptions,
    tails: bool,
) -> Counts {
    let clock = VirtualClock::new(now);
    let mut c = Correlator::new(CorrelatorOptions {
        clock: Some(Arc::new(clock.clone())),
        ..options
    });
    let factory = EventFactory::new(source);
    let api = MemoryApiServer::new();
    let mut latest: BTreeMap<String, Event> = BTreeMap::new();
    for (i, o) in occurrences.iter().enumerate() {
        // Distinct instants: distinct names, as on a real clock.
        clock.set(Time::from_unix_nanos(now.unix_nanos() + i as i64));
        let Ok(event) = factory.make(clock.now(), o.clone()) else {
            continue;
        };
        let d = c.correlate(event);
        if tails {
            latest.insert(d.event.metadata.name.clone(), d.event.clone());
        }
        if d.skip {
            continue;
        }
        let ns = d.event.metadata.namespace.clone();
        let stored = match &d.patch {
            Some(p) => api.patch_now(&ns, &d.event.metadata.name, p),
            None => api.create_now(&d.event),
        };
        if let Ok(stored) = stored {
            c.update_state(&stored);
        }
    }
    if tails {
        by_object(&latest.into_values().collect::<Vec<_>>())
    } else {
        by_object(&api.list())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kevents_core::ObjectReference;
    use kevents_sim::MemoryApiServer;

    fn event(name: &str, count: i32) -> Event {
        let mut e = Event::default();
        e.metadata.namespace = "ns".into();
        e.metadata.name = name.into();
        e.involved_object = ObjectReference::new("v1", "Pod", "ns", "p");
        e.count = count;
        e.reason = "R".into();
        e
    }

    #[test]
    fn a_lower_stored_count_is_a_mismatch_naming_the_event() {
        let stored = counts(&[event("a.1", 4), event("b.1", 2)]);
        let expected = counts(&[event("a.1", 4), event("b.1", 3), event("c.1", 1)]);
        let m = compare(&stored, &expected, "the in-memory run").unwrap_err();
        assert_eq!(
            m.events,
            [
                ("ns/b.1".to_owned(), Some(3), Some(2)),
                ("ns/c.1".to_owned(), Some(1), None)
            ]
        );
        let text = m.to_string();
        assert!(text.contains("ns/b.1 stored 2 expected 3"), "{text}");
        assert!(compare(&stored, &stored, "itself").is_ok());
        // Another writer's event in the namespace: only a strict comparison names it.
        let mut more = stored.clone();
        more.insert("ns/other.1".into(), 1);
        assert!(compare(&more, &stored, "x").is_err());
        assert!(compare_in(&more, &stored, "x", false).is_ok());
        assert_eq!(sum(&expected), 8);
    }

    /// Workload `api`'s reference: 100 objects whose counts add up to the 2 500
    /// occurrences that pass the spam filter; all 3 000 with tails.
    #[test]
    fn the_serial_reference_of_workload_api() {
        let w = kevents_sim::workload::Workload::API;
        let occ: Vec<_> = (0..w.n)
            .map(|i| w.occurrence(i, kevents_core::EventType::Warning))
            .collect();
        let source = || EventSource::new("bench", "node");
        let now = Time::from_unix_secs(1_700_000_000);
        let plain = serial_by_object(source(), &occ, now, CorrelatorOptions::default(), false);
        assert_eq!((plain.len(), sum(&plain)), (100, 2500));
        let tails = serial_by_object(source(), &occ, now, CorrelatorOptions::default(), true);
        assert_eq!((tails.len(), sum(&tails)), (100, 3000));
    }

    #[actix_rt::test]
    async fn the_ledger_keeps_the_latest_answered_count() {
        let api = MemoryApiServer::new();
        let ledger = Ledger::default();
        let sink = LedgerSink::new(api.clone(), ledger.clone());
        let e = event("a.1", 1);
        sink.create(&e).await.unwrap();
        let mut again = e.clone();
        again.count = 3;
        sink.patch(&again, br#"{"count":3}"#).await.unwrap();
        // A failed write records nothing.
        assert!(sink.patch(&event("gone.1", 9), b"{}").await.is_err());
        assert_eq!(ledger.counts(), counts(&[again]));
        assert_eq!(counts(&api.list()), ledger.counts());
    }
}
