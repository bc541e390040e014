//! Unit tests of the events.k8s.io/v1 internals (the golden scenarios live in
//! `tests/events_v1.rs`).

use std::time::Duration;

use super::validate::NotePolicy;
use super::*;
use crate::reference::ObjectReference;
use crate::time::Time;

fn event(name: &str) -> Event {
    let mut e = Event::default();
    e.metadata.name = format!("{name}.1");
    e.regarding = ObjectReference::new("v1", "Pod", "ns", name);
    e.reason = "r".into();
    e
}

#[test]
fn a_marker_longer_than_the_limit_is_cut_too() {
    let p = NotePolicy::Truncate {
        marker: "€".repeat(400), // 1200 bytes
    };
    let out = p.apply("x".repeat(2000)).unwrap();
    // The marker is cut to 341 whole euro signs (1023 bytes); one byte of the note fits.
    assert_eq!(out.len(), 1024);
    assert_eq!(out, format!("x{}", "€".repeat(341)));
    let p = NotePolicy::Truncate {
        marker: String::new(),
    };
    assert_eq!(p.apply("é".repeat(600)).unwrap().len(), 1024);
}

#[test]
fn heartbeats_are_per_series_and_deadline_tracks_them() {
    let t0 = Time::from_unix_secs(1_000_000);
    let at = |s: u64| t0.saturating_add(Duration::from_secs(s));
    let mut c = SeriesCache::new(SeriesOptions {
        finish_after: Duration::from_secs(3600 * 24),
        ..Default::default()
    });
    let (a, b) = (event("a"), event("b"));
    c.observe(a.clone(), at(0));
    c.observe(a.clone(), at(0)); // series a starts at 0
    c.observe(b.clone(), at(600));
    c.observe(b.clone(), at(600)); // series b starts at 600
    assert_eq!(c.next_deadline(), Some(at(1800)));
    assert!(c.tick(at(1799)).is_empty());
    let hb = c.tick(at(1800));
    assert_eq!(hb.len(), 1);
    assert_eq!(hb[0].event().metadata.name, "a.1");
    assert_eq!(c.next_deadline(), Some(at(2400)));
    let hb = c.tick(at(2400));
    assert_eq!(hb.len(), 1);
    assert_eq!(hb[0].event().metadata.name, "b.1");
    assert_eq!(c.stats().heartbeats, 2);
}

#[test]
fn a_late_result_for_a_finished_incarnation_does_not_touch_the_new_one() {
    let t0 = Time::from_unix_secs(1_000_000);
    let mut c = SeriesCache::new(SeriesOptions::default());
    let a = event("a");
    for _ in 0..3 {
        c.observe(a.clone(), t0);
    }
    let fin = c.tick(t0.saturating_add(Duration::from_secs(400)));
    assert_eq!(fin.len(), 1);
    // A new incarnation (new name) starts before the finish result arrives.
    let mut a2 = a.clone();
    a2.metadata.name = "a.2".into();
    let now = t0.saturating_add(Duration::from_secs(401));
    c.observe(a2.clone(), now);
    c.observe(a2.clone(), now);
    let err = crate::status::SinkError::Transport("reset".into());
    assert_eq!(
        c.on_write_result(&fin[0], &Err(err)),
        Step::Dropped { quiet: false }
    );
    assert_eq!(c.series_of(&a2).map(|s| s.count), Some(2));
    assert_eq!(c.len(), 1);
}

#[test]
fn time_going_backwards_never_finishes_early() {
    let t0 = Time::from_unix_secs(1_000_000);
    let mut c = SeriesCache::new(SeriesOptions::default());
    c.observe(event("a"), t0);
    assert!(c.tick(Time::from_unix_secs(0)).is_empty());
    assert_eq!(c.len(), 1);
}
