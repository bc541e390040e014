//! The run loop's per-uid state ([`State`]) over [`Counts`]' compact entries: the same
//! deltas, refusals and deleted-unread marks for uids in the apiserver's form (a canonical
//! UUID, kept as 16 bytes) and any other (kept as text).

use super::*;

const A: &str = "0b3c0001-6f1d-4f5e-9a7b-1c2d3e4f0001";
const B: &str = "7e2a0002-0c1d-4e5f-8a9b-0c1d2e3f0002";

fn record(uid: &str, ns: &str, count: u64) -> ExportRecord {
    ExportRecord {
        uid: uid.into(),
        namespace: ns.into(),
        count,
        ..Default::default()
    }
}

/// Reads `record` as the loop does: its delta, remembered when new.
fn read(state: &mut State, uid: &str, ns: &str, count: u64) -> Seen {
    let mut r = record(uid, ns, count);
    let seen = state.delta(&mut r);
    if let Seen::New { previous } = seen {
        assert_eq!(r.delta, count - previous);
        state.remember(&r);
    }
    seen
}

#[test]
fn deltas_decreases_and_reused_uids_are_the_same_for_every_kind_of_uid() {
    let upper = A.to_uppercase();
    for uid in [A, "u", "", upper.as_str(), "ns/with spaces*>"] {
        let mut s = State::with_capacity(4);
        assert_eq!(
            read(&mut s, uid, "a", 0),
            Seen::Nothing {
                lowered: false,
                exported: 0
            },
            "{uid:?}: nothing to export at count 0"
        );
        assert_eq!(s.live(), 0);
        assert_eq!(
            read(&mut s, uid, "a", 3),
            Seen::New { previous: 0 },
            "{uid:?}"
        );
        assert_eq!(
            read(&mut s, uid, "a", 5),
            Seen::New { previous: 3 },
            "{uid:?}"
        );
        assert_eq!(
            read(&mut s, uid, "a", 5),
            Seen::Nothing {
                lowered: false,
                exported: 5
            }
        );
        // A lower count: said once, nothing exported until it passes 5.
        assert_eq!(
            read(&mut s, uid, "a", 2),
            Seen::Nothing {
                lowered: true,
                exported: 5
            },
            "{uid:?}"
        );
        assert_eq!(
            read(&mut s, uid, "a", 1),
            Seen::Nothing {
                lowered: false,
                exported: 5
            },
            "{uid:?}: said once"
        );
        assert_eq!(read(&mut s, uid, "a", 7), Seen::New { previous: 5 });
        // Exported again: a later decrease is said again.
        assert_eq!(
            read(&mut s, uid, "a", 6),
            Seen::Nothing {
                lowered: true,
                exported: 7
            }
        );
        // The same uid in another namespace: refused, naming the first.
        assert_eq!(
            read(&mut s, uid, "b", 9),
            Seen::OtherNamespace("a".into()),
            "{uid:?}"
        );
        assert_eq!(s.known.get(uid), Some((7, "a")));
        assert!(s.contains(uid) && s.remove(uid) && !s.contains(uid));
        assert_eq!(read(&mut s, uid, "b", 9), Seen::New { previous: 0 });
    }
    // The canonical UUID and its uppercase form are two uids.
    let mut s = State::with_capacity(2);
    read(&mut s, A, "a", 2);
    assert_eq!(read(&mut s, &upper, "b", 4), Seen::New { previous: 0 });
    assert_eq!(s.live(), 2);
}

#[test]
fn the_largest_count_is_kept_exactly() {
    let mut s = State::with_capacity(1);
    assert_eq!(
        read(&mut s, A, "a", crate::MAX_COUNT - 1),
        Seen::New { previous: 0 }
    );
    assert_eq!(
        read(&mut s, A, "a", crate::MAX_COUNT),
        Seen::New {
            previous: crate::MAX_COUNT - 1
        }
    );
    assert_eq!(s.known.get(A), Some((crate::MAX_COUNT, "a")));
    assert_eq!(
        read(&mut s, A, "a", 1),
        Seen::Nothing {
            lowered: true,
            exported: crate::MAX_COUNT
        }
    );
    assert_eq!(
        s.known.get(A),
        Some((crate::MAX_COUNT, "a")),
        "the flag is not the count"
    );
}

/// Known: A (ns a), B (ns b), "u" (ns a), "v" (ns b).
fn four() -> State {
    let mut s = State::with_capacity(4);
    for (uid, ns) in [(A, "a"), (B, "b"), ("u", "a"), ("v", "b")] {
        read(&mut s, uid, ns, 1);
    }
    s
}

#[test]
fn a_namespace_list_forgets_only_its_own_events_not_listed() {
    let mut s = four();
    s.list_started("a");
    // The list of a reads u, an event of b's (its uid reused: refused, not marked) and a new
    // event w.
    s.listed("a", "u");
    s.listed("a", B);
    assert_eq!(read(&mut s, B, "a", 2), Seen::OtherNamespace("b".into()));
    s.listed("a", "w");
    read(&mut s, "w", "a", 1);
    let mut gone = s.list_ended("a");
    gone.sort();
    assert_eq!(gone, vec![A.to_owned()], "A was not listed");
    let mut live: Vec<String> = s.known.iter().map(|(u, _, _)| u).collect();
    live.sort();
    assert_eq!(live, vec![B.to_owned(), "u".into(), "v".into(), "w".into()]);
    // The next list of a starts from no marks: what it does not read is gone.
    s.list_started("a");
    s.listed("a", "w");
    assert_eq!(s.list_ended("a"), vec!["u".to_owned()]);
    // A namespace no event had: nothing of the others is touched.
    s.list_started("c");
    assert!(s.list_ended("c").is_empty());
    assert_eq!(s.live(), 3);
}

#[test]
fn a_cluster_list_forgets_every_event_not_listed() {
    let mut s = four();
    // Marks left by an earlier, unfinished list are cleared when a list begins.
    s.listed("", "v");
    s.list_started("");
    s.listed("", B);
    s.listed("", "u");
    // A new event read by the list (remembered after its export) is kept.
    s.listed("", "x");
    read(&mut s, "x", "c", 4);
    let mut gone = s.list_ended("");
    gone.sort();
    assert_eq!(gone, vec![A.to_owned(), "v".to_owned()]);
    assert_eq!(s.live(), 3);
    // Nothing listed: everything is gone.
    s.list_started("");
    assert_eq!(s.list_ended("").len(), 3);
    assert_eq!(s.live(), 0);
}

#[test]
fn a_resume_point_is_continued_as_it_is() {
    let counts: Counts = [(A, 4, "a"), ("u", 2, "b")].into_iter().collect();
    let mut s = State::from_counts(counts);
    assert_eq!(
        read(&mut s, A, "a", 4),
        Seen::Nothing {
            lowered: false,
            exported: 4
        }
    );
    assert_eq!(read(&mut s, "u", "b", 5), Seen::New { previous: 2 });
    assert_eq!(read(&mut s, "u", "a", 6), Seen::OtherNamespace("b".into()));
    // Loaded events are subject to the first list like any other.
    s.list_started("");
    s.listed("", "u");
    assert_eq!(s.list_ended(""), vec![A.to_owned()]);
}
