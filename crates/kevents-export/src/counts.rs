//! [`Counts`]: per live event (uid), the last exported count and the namespace, kept compact
//! for a million events: a uid in the apiserver's form (a lowercase canonical UUID) is kept as
//! its 16 bytes, any other as its text; a count in 31 bits ([`crate::MAX_COUNT`]); a
//! namespace as an index into the namespaces seen (each name kept once). 24 bytes of table per
//! UUID event (plus the table's spare room), where a `String` key and value took about 150.

use std::collections::HashMap;
use std::fmt;

use crate::MAX_COUNT;

/// Bit 31 of a [`Slot`]'s `count`: a lower count was read and warned about (the run loop's
/// `lowered`). Counts are at most [`MAX_COUNT`] = 2^31 - 1, so they never reach it.
const LOWERED: u32 = 1 << 31;
/// Bit 31 of a [`Slot`]'s `ns`: the event was read by the list of its scope in progress
/// (or came after that list began), the run loop's mark for events deleted unread.
const LISTED: u32 = 1 << 31;

/// One event's entry: 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot {
    /// The last exported count (bits 0..31) and [`LOWERED`].
    count: u32,
    /// The namespace's index (bits 0..31) and [`LISTED`].
    ns: u32,
}

impl Slot {
    pub(crate) fn count(self) -> u64 {
        u64::from(self.count & !LOWERED)
    }

    pub(crate) fn ns(self) -> u32 {
        self.ns & !LISTED
    }

    pub(crate) fn lowered(self) -> bool {
        self.count & LOWERED != 0
    }

    pub(crate) fn set_lowered(&mut self) {
        self.count |= LOWERED;
    }

    pub(crate) fn listed(self) -> bool {
        self.ns & LISTED != 0
    }

    pub(crate) fn set_listed(&mut self, listed: bool) {
        if listed {
            self.ns |= LISTED;
        } else {
            self.ns &= !LISTED;
        }
    }
}

/// A uid as a key: the 16 bytes of a lowercase canonical UUID (`8-4-4-4-12` hex digits, the
/// apiserver's form), or the text of any other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key<'a> {
    Uuid([u64; 2]),
    Other(&'a str),
}

impl<'a> Key<'a> {
    fn of(uid: &'a str) -> Self {
        match parse_uuid(uid) {
            Some(u) => Key::Uuid(u),
            None => Key::Other(uid),
        }
    }
}

/// Each byte's hex digit value, `0xff` for a byte that is none (uppercase too: the
/// apiserver writes lowercase, and only a form that comes back the same is kept as bytes).
const HEX: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

/// Where a canonical UUID's 32 hex digits are (around its hyphens at 8, 13, 18 and 23).
const DIGITS: [usize; 32] = [
    0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 14, 15, 16, 17, 19, 20, 21, 22, 24, 25, 26, 27, 28, 29,
    30, 31, 32, 33, 34, 35,
];

/// The 16 bytes of `uid` when it is a lowercase canonical UUID (exactly what
/// [`format_uuid`] gives back); else `None`.
fn parse_uuid(uid: &str) -> Option<[u64; 2]> {
    let b: &[u8; 36] = uid.as_bytes().try_into().ok()?;
    if b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let (mut hi, mut lo, mut bad) = (0u64, 0u64, 0u8);
    for &at in &DIGITS[..16] {
        let d = HEX[b[at] as usize];
        bad |= d;
        hi = (hi << 4) | u64::from(d & 0xf);
    }
    for &at in &DIGITS[16..] {
        let d = HEX[b[at] as usize];
        bad |= d;
        lo = (lo << 4) | u64::from(d & 0xf);
    }
    (bad & 0xf0 == 0).then_some([hi, lo])
}

/// The text of a UUID key: lowercase, `8-4-4-4-12`.
fn format_uuid(u: [u64; 2]) -> String {
    let v = (u128::from(u[0]) << 64) | u128::from(u[1]);
    let hex = format!("{v:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Per live event (uid): the last exported count and the event's namespace, as a
/// [`crate::ResumeStore`] loads them ([`crate::ResumePoint::counts`]) and as the run loop keeps
/// them, in little memory: about 24 bytes of table per event whose uid is a lowercase
/// canonical UUID (every uid the apiserver gives), each namespace's name once. Any other uid
/// is kept too, as its text. A count above [`MAX_COUNT`] is not kept (no event holds one).
///
/// ```
/// let mut c = kevents_export::Counts::default();
/// assert!(c.insert("0b3c0000-6f1d-4f5e-9a7b-1c2d3e4f0000", 3, "default"));
/// assert!(c.insert("not-a-uuid", 1, "kube-system"));
/// assert!(!c.insert("x", 1 << 40, "default"), "no event holds such a count");
/// assert_eq!(c.get("0b3c0000-6f1d-4f5e-9a7b-1c2d3e4f0000"), Some((3, "default")));
/// assert_eq!(c.len(), 2);
/// assert!(c.remove("not-a-uuid"));
/// assert_eq!(c.get("not-a-uuid"), None);
/// ```
#[derive(Clone, Default)]
pub struct Counts {
    /// foldhash, seeded at random per process and per map (as kevents-core's caches): its
    /// collisions cannot be chosen in advance, at a fraction of SipHash's cost.
    uuids: HashMap<[u64; 2], Slot, foldhash::fast::RandomState>,
    others: HashMap<Box<str>, Slot>,
    namespaces: Vec<Box<str>>,
    ns_index: HashMap<Box<str>, u32>,
}

impl Counts {
    /// Nothing yet, with room for `events` uids in the apiserver's form.
    ///
    /// ```
    /// assert!(kevents_export::Counts::with_capacity(10).is_empty());
    /// ```
    pub fn with_capacity(events: usize) -> Self {
        Counts {
            uuids: HashMap::with_capacity_and_hasher(events, Default::default()),
            ..Counts::default()
        }
    }

    /// Sets `uid`'s last exported count and namespace; `false` (nothing kept) when `count`
    /// is above [`MAX_COUNT`].
    pub fn insert(&mut self, uid: &str, count: u64, namespace: &str) -> bool {
        let Ok(count) = u32::try_from(count) else {
            return false;
        };
        if u64::from(count) > MAX_COUNT {
            return false;
        }
        let ns = self.intern(namespace);
        self.put(uid, count, ns);
        true
    }

    /// `uid`'s last exported count and namespace.
    pub fn get(&self, uid: &str) -> Option<(u64, &str)> {
        self.slot(uid).map(|s| (s.count(), self.namespace(s.ns())))
    }

    /// Forgets `uid`; whether it was known.
    pub fn remove(&mut self, uid: &str) -> bool {
        match Key::of(uid) {
            Key::Uuid(u) => self.uuids.remove(&u).is_some(),
            Key::Other(s) => self.others.remove(s).is_some(),
        }
    }

    /// Whether `uid` is known.
    pub fn contains(&self, uid: &str) -> bool {
        self.slot(uid).is_some()
    }

    /// How many uids are known.
    pub fn len(&self) -> usize {
        self.uuids.len() + self.others.len()
    }

    /// Whether no uid is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every uid known, with its count and namespace (in no particular order).
    ///
    /// ```
    /// let mut c = kevents_export::Counts::default();
    /// c.insert("u", 2, "ns");
    /// let all: Vec<(String, u64, &str)> = c.iter().collect();
    /// assert_eq!(all, vec![("u".to_owned(), 2, "ns")]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (String, u64, &str)> + '_ {
        let uuids = self.uuids.iter().map(|(u, s)| (format_uuid(*u), *s));
        let others = self.others.iter().map(|(u, s)| (u.to_string(), *s));
        uuids
            .chain(others)
            .map(|(uid, s)| (uid, s.count(), self.namespace(s.ns())))
    }

    /// Room for `more` uids in the apiserver's form.
    pub(crate) fn reserve(&mut self, more: usize) {
        self.uuids.reserve(more);
    }

    /// `uid`'s entry.
    pub(crate) fn slot(&self, uid: &str) -> Option<Slot> {
        match Key::of(uid) {
            Key::Uuid(u) => self.uuids.get(&u).copied(),
            Key::Other(s) => self.others.get(s).copied(),
        }
    }

    /// `uid`'s entry, to change its flags.
    pub(crate) fn slot_mut(&mut self, uid: &str) -> Option<&mut Slot> {
        match Key::of(uid) {
            Key::Uuid(u) => self.uuids.get_mut(&u),
            Key::Other(s) => self.others.get_mut(s),
        }
    }

    /// Sets `uid`'s count (at most [`MAX_COUNT`]) and namespace index: the lowered flag
    /// cleared, the listed flag kept, set for a uid not known before.
    pub(crate) fn put(&mut self, uid: &str, count: u32, ns: u32) {
        let fresh = Slot {
            count: count & !LOWERED,
            ns: ns | LISTED,
        };
        let update = |slot: &mut Slot| {
            let listed = slot.listed();
            *slot = fresh;
            slot.set_listed(listed);
        };
        match Key::of(uid) {
            Key::Uuid(u) => {
                self.uuids.entry(u).and_modify(update).or_insert(fresh);
            }
            Key::Other(s) => match self.others.get_mut(s) {
                Some(slot) => update(slot),
                None => {
                    self.others.insert(s.into(), fresh);
                }
            },
        }
    }

    /// The name of namespace index `i` (`""` for none).
    pub(crate) fn namespace(&self, i: u32) -> &str {
        self.namespaces.get(i as usize).map_or("", |s| s)
    }

    /// The index of namespace `ns`, if any event had it.
    pub(crate) fn namespace_index(&self, ns: &str) -> Option<u32> {
        self.ns_index.get(ns).copied()
    }

    /// The index of namespace `ns`, interned.
    pub(crate) fn intern(&mut self, ns: &str) -> u32 {
        if let Some(&i) = self.ns_index.get(ns) {
            return i;
        }
        // 2^31 namespaces never fit in memory; the last index is shared past that.
        let i = u32::try_from(self.namespaces.len())
            .unwrap_or(u32::MAX)
            .min(LISTED - 1);
        self.namespaces.push(ns.into());
        self.ns_index.insert(ns.into(), i);
        i
    }

    /// Calls `keep` on every entry; removes those for which it returns `false` and gives
    /// their uids.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&mut Slot) -> bool) -> Vec<String> {
        let mut removed = Vec::new();
        self.uuids.retain(|u, s| {
            let kept = keep(s);
            if !kept {
                removed.push(format_uuid(*u));
            }
            kept
        });
        self.others.retain(|u, s| {
            let kept = keep(s);
            if !kept {
                removed.push(u.to_string());
            }
            kept
        });
        removed
    }
}

impl fmt::Debug for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.iter().map(|(uid, count, ns)| (uid, (count, ns))))
            .finish()
    }
}

/// The same uids with the same counts and namespaces.
impl PartialEq for Counts {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self.uuids.iter().all(|(u, s)| {
                other.uuids.get(u).is_some_and(|o| {
                    o.count() == s.count() && other.namespace(o.ns()) == self.namespace(s.ns())
                })
            })
            && self.others.iter().all(|(u, s)| {
                other.others.get(u).is_some_and(|o| {
                    o.count() == s.count() && other.namespace(o.ns()) == self.namespace(s.ns())
                })
            })
    }
}

impl Eq for Counts {}

impl<'a> FromIterator<(&'a str, u64, &'a str)> for Counts {
    /// Counts of `(uid, count, namespace)`s (a count above [`MAX_COUNT`] left out).
    ///
    /// ```
    /// let c: kevents_export::Counts = [("u", 4, "ns")].into_iter().collect();
    /// assert_eq!(c.get("u"), Some((4, "ns")));
    /// ```
    fn from_iter<I: IntoIterator<Item = (&'a str, u64, &'a str)>>(iter: I) -> Self {
        let mut c = Counts::default();
        for (uid, count, ns) in iter {
            c.insert(uid, count, ns);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &str = "0b3c0001-6f1d-4f5e-9a7b-1c2d3e4f0001";

    #[test]
    fn a_canonical_uuid_is_kept_as_16_bytes_and_given_back_as_it_was() {
        let key = parse_uuid(U).expect("canonical");
        assert_eq!(format_uuid(key), U);
        assert_eq!(
            format_uuid(parse_uuid("ffffffff-ffff-ffff-ffff-ffffffffffff").expect("max")),
            "ffffffff-ffff-ffff-ffff-ffffffffffff"
        );
        assert_eq!(
            format_uuid(parse_uuid("00000000-0000-0000-0000-000000000000").expect("nil")),
            "00000000-0000-0000-0000-000000000000"
        );
        let mut c = Counts::default();
        assert!(c.insert(U, 7, "a"));
        assert_eq!((c.uuids.len(), c.others.len()), (1, 0));
        assert_eq!(c.iter().collect::<Vec<_>>(), vec![(U.to_owned(), 7, "a")]);
    }

    #[test]
    fn any_other_uid_is_kept_as_text() {
        let upper = U.to_uppercase();
        let others = [
            "u",
            "",
            upper.as_str(),
            "0b3c0001-6f1d-4f5e-9a7b-1c2d3e4f000",   // 35
            "0b3c0001-6f1d-4f5e-9a7b-1c2d3e4f00011", // 37
            "0b3c00016-f1d-4f5e-9a7b-1c2d3e4f0001",  // hyphen moved
            "0b3c0001-6f1d-4f5e-9a7b-1c2d3e4f000g",
            "0b3c0001+6f1d-4f5e-9a7b-1c2d3e4f0001",
            "é3c0001-6f1d-4f5e-9a7b-1c2d3e4f0001",
        ];
        let mut c = Counts::default();
        for (i, uid) in others.iter().enumerate() {
            assert_eq!(parse_uuid(uid), None, "{uid:?}");
            assert!(c.insert(uid, i as u64 + 1, "ns"));
        }
        // The canonical form is a different uid from its uppercase form.
        assert!(c.insert(U, 100, "ns"));
        assert_eq!((c.uuids.len(), c.others.len()), (1, others.len()));
        for (i, uid) in others.iter().enumerate() {
            assert_eq!(c.get(uid), Some((i as u64 + 1, "ns")), "{uid:?}");
        }
        assert_eq!(c.get(U), Some((100, "ns")));
        let mut all: Vec<String> = c.iter().map(|(u, _, _)| u).collect();
        all.sort();
        let mut want: Vec<String> = others.iter().map(|s| (*s).to_owned()).collect();
        want.push(U.to_owned());
        want.sort();
        assert_eq!(all, want);
        assert!(c.remove(&upper));
        assert!(!c.remove(&upper));
        assert_eq!(c.get(U), Some((100, "ns")), "the lowercase uid stays");
    }

    #[test]
    fn counts_up_to_max_count_are_kept_and_flags_do_not_leak_into_them() {
        let mut c = Counts::default();
        assert!(c.insert(U, MAX_COUNT, "a"));
        assert!(!c.insert("v", MAX_COUNT + 1, "a"));
        assert!(!c.insert("w", u64::MAX, "a"));
        assert_eq!(c.len(), 1);
        let slot = c.slot_mut(U).expect("known");
        slot.set_lowered();
        slot.set_listed(true);
        assert_eq!(c.get(U), Some((MAX_COUNT, "a")));
        let slot = c.slot(U).expect("known");
        assert!(slot.lowered() && slot.listed());
        // An update clears the lowered flag and keeps the listed one.
        c.slot_mut(U).expect("known").set_listed(false);
        c.put(U, 5, 0);
        let slot = c.slot(U).expect("known");
        assert_eq!(
            (slot.count(), slot.lowered(), slot.listed()),
            (5, false, false)
        );
        // A uid not known before is marked listed.
        c.put("fresh", 1, 0);
        assert!(c.slot("fresh").expect("known").listed());
    }

    #[test]
    fn namespaces_are_kept_once_and_equality_ignores_their_order() {
        let mut a = Counts::default();
        a.insert("u1", 1, "x");
        a.insert(U, 2, "y");
        a.insert("u3", 3, "x");
        a.insert("u4", 4, "");
        assert_eq!(a.namespaces.len(), 3);
        let mut b = Counts::default();
        b.insert("u4", 4, "");
        b.insert(U, 2, "y");
        b.insert("u3", 3, "x");
        b.insert("u1", 1, "x");
        assert_eq!(a, b);
        b.insert("u1", 1, "y");
        assert_ne!(a, b);
        assert_eq!(a.get("u4"), Some((4, "")));
        assert_eq!(
            format!("{:?}", Counts::from_iter([("u", 1, "n")])),
            r#"{"u": (1, "n")}"#
        );
    }
}
