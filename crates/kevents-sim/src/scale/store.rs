//! The scale simulator's store: compact events (interned strings, the object's versions as
//! `(resourceVersion, count, lastTimestamp)` triples), ordered by etcd key (`ns/name`), with
//! a bounded history of changes for watches. A list at a past resourceVersion (a continue
//! token's) reads each event's version at that resourceVersion; history older than the
//! window is compacted, as etcd compacts its revisions.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

/// Which events API a request reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// `/api/v1`.
    Core,
    /// `/apis/events.k8s.io/v1`.
    EventsV1,
}

impl Api {
    pub fn api_version(self) -> &'static str {
        match self {
            Api::Core => "v1",
            Api::EventsV1 => "events.k8s.io/v1",
        }
    }
}

/// The uid of slot `slot` of a simulator seeded `seed`.
pub(crate) fn scale_uid(seed: u32, slot: u32) -> String {
    format!("{seed:08x}-5ca1-4e00-8000-{slot:012x}")
}

pub(crate) fn slot_of_uid(seed: u32, uid: &str) -> Option<u32> {
    let rest = uid.strip_prefix(&format!("{seed:08x}-5ca1-4e00-8000-"))?;
    u32::try_from(u64::from_str_radix(rest, 16).ok()?).ok()
}

/// An event's id in a [`ScaleSim`](super::ScaleSim): its slot, stable for its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventId(pub(crate) u32);

impl EventId {
    /// Its slot number (dense from 0, in creation order).
    ///
    /// ```
    /// let id = kevents_sim::scale::EventId::from_index(3);
    /// assert_eq!(id.index(), 3);
    /// ```
    pub fn index(self) -> u32 {
        self.0
    }

    /// The id of slot `index`.
    pub fn from_index(index: u32) -> Self {
        EventId(index)
    }
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

impl ChangeKind {
    pub(crate) fn wire(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Change {
    pub rv: u64,
    pub slot: u32,
    pub kind: ChangeKind,
}

/// One state of an event: the resourceVersion that wrote it, its count, its lastTimestamp
/// (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ver {
    pub rv: u64,
    pub count: u32,
    pub last: i64,
}

/// Marks an object name derived from the event's name (`{object}.{suffix}`).
const FROM_NAME: u32 = u32::MAX;

#[derive(Debug)]
pub(crate) struct Ev {
    /// `namespace/name`: etcd's key order.
    pub key: Arc<str>,
    pub kind: u32,
    pub object: u32,
    pub reason: u32,
    pub message: u32,
    pub component: u32,
    pub warning: bool,
    pub created_rv: u64,
    pub created: i64,
    pub first: i64,
    pub cur: Ver,
    /// Older versions still readable (newer than the compacted revision, and the newest at
    /// or before it).
    pub older: Vec<Ver>,
    /// The deletion's resourceVersion, 0 while live.
    pub deleted_rv: u64,
}

impl Ev {
    pub fn namespace(&self) -> &str {
        self.key.split_once('/').map_or("", |(ns, _)| ns)
    }
    pub fn name(&self) -> &str {
        self.key.split_once('/').map_or(&*self.key, |(_, n)| n)
    }
    /// The event's state at `rv`, `None` when it did not exist then.
    pub fn at(&self, rv: u64) -> Option<Ver> {
        if self.created_rv > rv || (self.deleted_rv != 0 && self.deleted_rv <= rv) {
            return None;
        }
        if self.cur.rv <= rv {
            return Some(self.cur);
        }
        self.older.iter().rev().find(|v| v.rv <= rv).copied()
    }
}

/// A new event's fields (the simulator sets uid, resourceVersion, timestamps and count 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The involved (regarding) object's kind.
    pub object_kind: String,
    /// The involved object's name.
    pub object_name: String,
    /// The reason.
    pub reason: String,
    /// The message (core/v1) or note (events.k8s.io/v1).
    pub message: String,
    /// `source.component` (`deprecatedSource.component`).
    pub component: String,
    /// Type `Warning` (else `Normal`).
    pub warning: bool,
}

impl NewEvent {
    /// An event about Pod `object` in `namespace`, named as client-go names events
    /// (`{object}.{suffix in hex}`), reason and message as given, from component `kubelet`.
    ///
    /// ```
    /// let e = kevents_sim::scale::NewEvent::pod("default", "web-0", 7, "Pulled", "pulled");
    /// assert_eq!(e.name, "web-0.0000000000000007");
    /// ```
    pub fn pod(namespace: &str, object: &str, suffix: u64, reason: &str, message: &str) -> Self {
        NewEvent {
            namespace: namespace.into(),
            name: format!("{object}.{suffix:016x}"),
            object_kind: "Pod".into(),
            object_name: object.into(),
            reason: reason.into(),
            message: message.into(),
            component: "kubelet".into(),
            warning: false,
        }
    }
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// An event of that namespace and name exists (or its deletion is not compacted yet).
    #[error("event {0:?} already exists")]
    AlreadyExists(String),
    /// No such live event.
    #[error("no such live event")]
    NotFound,
    /// A namespace or name that is empty or holds `/`.
    #[error("invalid namespace or name {0:?}")]
    Invalid(String),
}

#[derive(Debug, Default)]
struct Interner {
    strings: Vec<Box<str>>,
    index: HashMap<Box<str>, u32>,
}

impl Interner {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.strings.len() as u32;
        self.strings.push(s.into());
        self.index.insert(s.into(), i);
        i
    }
    fn get(&self, i: u32) -> &str {
        self.strings.get(i as usize).map_or("", |s| s)
    }
}

/// A list's scope: every namespace (`prefix` empty) or one (`ns/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scope {
    pub prefix: String,
}

impl Scope {
    pub fn all() -> Self {
        Scope {
            prefix: String::new(),
        }
    }
    pub fn namespace(ns: &str) -> Self {
        Scope {
            prefix: format!("{ns}/"),
        }
    }
    pub fn holds(&self, key: &str) -> bool {
        key.starts_with(&self.prefix)
    }
}

/// A rendered page: the items' JSON, comma-separated, how many, and the last key when more
/// items follow.
pub(crate) struct Page {
    pub json: Vec<u8>,
    pub items: usize,
    pub more_after: Option<Arc<str>>,
}

pub(crate) struct ScaleStore {
    events: Vec<Ev>,
    keys: BTreeMap<Arc<str>, u32>,
    strings: Interner,
    history: VecDeque<Change>,
    window: usize,
    /// The newest resourceVersion written.
    pub rv: u64,
    /// Changes at or before this resourceVersion are gone (watches and lists from older
    /// ones get 410 Gone).
    pub compacted: u64,
    live: usize,
    uid_seed: u32,
}

impl ScaleStore {
    pub fn new(window: usize, uid_seed: u32) -> Self {
        ScaleStore {
            events: Vec::new(),
            keys: BTreeMap::new(),
            strings: Interner::default(),
            history: VecDeque::new(),
            window: window.max(1),
            rv: 1000,
            compacted: 1000,
            live: 0,
            uid_seed,
        }
    }

    pub fn live(&self) -> usize {
        self.live
    }

    pub fn uid(&self, slot: u32) -> String {
        scale_uid(self.uid_seed, slot)
    }

    pub fn slot_of_uid(&self, uid: &str) -> Option<u32> {
        let slot = slot_of_uid(self.uid_seed, uid)?;
        ((slot as usize) < self.events.len()).then_some(slot)
    }

    #[cfg(test)]
    pub fn ev(&self, slot: u32) -> Option<&Ev> {
        self.events.get(slot as usize)
    }

    pub fn str(&self, i: u32) -> &str {
        self.strings.get(i)
    }

    pub fn object_name<'a>(&'a self, ev: &'a Ev) -> &'a str {
        if ev.object == FROM_NAME {
            let name = ev.name();
            name.rsplit_once('.').map_or(name, |(o, _)| o)
        } else {
            self.strings.get(ev.object)
        }
    }

    pub fn count(&self, slot: u32) -> Option<u32> {
        let ev = self.events.get(slot as usize)?;
        (ev.deleted_rv == 0).then_some(ev.cur.count)
    }

    fn push_change(&mut self, change: Change, record: bool) {
        if !record {
            self.compacted = change.rv;
            return;
        }
        self.history.push_back(change);
        while self.history.len() > self.window {
            if let Some(old) = self.history.pop_front() {
                self.compact_one(old);
            }
        }
    }

    fn compact_one(&mut self, old: Change) {
        self.compacted = old.rv;
        if old.kind == ChangeKind::Deleted
            && let Some(ev) = self.events.get_mut(old.slot as usize)
        {
            ev.older = Vec::new();
            let key = ev.key.clone();
            if self.keys.get(&key) == Some(&old.slot) {
                self.keys.remove(&key);
            }
        }
    }

    /// Compacts every change at or before `rv` (as `etcdctl compact` does).
    pub fn compact_to(&mut self, rv: u64) {
        while self.history.front().is_some_and(|c| c.rv <= rv) {
            if let Some(old) = self.history.pop_front() {
                self.compact_one(old);
            }
        }
        self.compacted = self.compacted.max(rv.min(self.rv));
    }

    /// Creates an event at `now` (Unix seconds); `record`: keep the change in the history
    /// (else it is compacted at once, as a preloaded past).
    pub fn create(&mut self, e: &NewEvent, now: i64, record: bool) -> Result<u32, WriteError> {
        let valid = |s: &str| !s.is_empty() && !s.contains('/');
        if !valid(&e.namespace) || !valid(&e.name) {
            return Err(WriteError::Invalid(format!("{}/{}", e.namespace, e.name)));
        }
        let key: Arc<str> = format!("{}/{}", e.namespace, e.name).into();
        if self.keys.contains_key(&key) {
            return Err(WriteError::AlreadyExists(key.to_string()));
        }
        let derived = e
            .name
            .rsplit_once('.')
            .is_some_and(|(o, _)| o == e.object_name);
        let object = if derived {
            FROM_NAME
        } else {
            self.strings.intern(&e.object_name)
        };
        self.rv += 1;
        let rv = self.rv;
        let slot = self.events.len() as u32;
        self.events.push(Ev {
            key: key.clone(),
            kind: self.strings.intern(&e.object_kind),
            object,
            reason: self.strings.intern(&e.reason),
            message: self.strings.intern(&e.message),
            component: self.strings.intern(&e.component),
            warning: e.warning,
            created_rv: rv,
            created: now,
            first: now,
            cur: Ver {
                rv,
                count: 1,
                last: now,
            },
            older: Vec::new(),
            deleted_rv: 0,
        });
        self.keys.insert(key, slot);
        self.live += 1;
        self.push_change(
            Change {
                rv,
                slot,
                kind: ChangeKind::Added,
            },
            record,
        );
        Ok(slot)
    }

    /// Raises a live event's count by `by` at `now`; its new count.
    pub fn raise(&mut self, slot: u32, by: u32, now: i64) -> Result<u32, WriteError> {
        let compacted = self.compacted;
        let ev = self
            .events
            .get_mut(slot as usize)
            .filter(|e| e.deleted_rv == 0)
            .ok_or(WriteError::NotFound)?;
        self.rv += 1;
        let rv = self.rv;
        // Keep the versions newer than the compacted revision and the newest before it.
        let keep_from = ev
            .older
            .iter()
            .rposition(|v| v.rv <= compacted)
            .unwrap_or(0);
        if keep_from > 0 {
            ev.older.drain(..keep_from);
        }
        if ev.cur.rv <= compacted {
            ev.older.clear();
        }
        ev.older.push(ev.cur);
        ev.cur = Ver {
            rv,
            count: ev.cur.count.saturating_add(by),
            last: now,
        };
        let count = ev.cur.count;
        self.push_change(
            Change {
                rv,
                slot,
                kind: ChangeKind::Modified,
            },
            true,
        );
        Ok(count)
    }

    /// Deletes a live event.
    pub fn delete(&mut self, slot: u32) -> Result<(), WriteError> {
        let ev = self
            .events
            .get_mut(slot as usize)
            .filter(|e| e.deleted_rv == 0)
            .ok_or(WriteError::NotFound)?;
        self.rv += 1;
        ev.deleted_rv = self.rv;
        self.live -= 1;
        let rv = self.rv;
        self.push_change(
            Change {
                rv,
                slot,
                kind: ChangeKind::Deleted,
            },
            true,
        );
        Ok(())
    }

    /// The live event of `namespace`/`name`.
    pub fn find(&self, namespace: &str, name: &str) -> Option<u32> {
        let key = format!("{namespace}/{name}");
        let slot = *self.keys.get(key.as_str())?;
        (self.events[slot as usize].deleted_rv == 0).then_some(slot)
    }

    /// Up to `limit` (0: all) items of `scope` as they were at `rv`, after key `after`, each
    /// written by `item` (comma-separated).
    pub fn page(
        &self,
        scope: &Scope,
        after: Option<&str>,
        rv: u64,
        limit: usize,
        mut item: impl FnMut(&mut Vec<u8>, &ScaleStore, u32, &Ev, Ver),
    ) -> Page {
        let lower = match after {
            Some(k) => Bound::Excluded(k),
            None => Bound::Included(scope.prefix.as_str()),
        };
        let mut json = Vec::new();
        let mut items = 0usize;
        let mut last: Option<&Arc<str>> = None;
        let mut more = false;
        for (key, &slot) in self
            .keys
            .range::<str, _>((lower, Bound::Unbounded))
            .take_while(|(k, _)| scope.holds(k))
        {
            let ev = &self.events[slot as usize];
            let Some(ver) = ev.at(rv) else { continue };
            if limit > 0 && items == limit {
                more = true;
                break;
            }
            if items > 0 {
                json.push(b',');
            }
            item(&mut json, self, slot, ev, ver);
            items += 1;
            last = Some(key);
        }
        Page {
            json,
            items,
            more_after: if more { last.cloned() } else { None },
        }
    }

    /// The changes of `scope` after `rv`, at most `max`, and the resourceVersion read up to;
    /// `None` when changes after `rv` were compacted.
    pub fn changes_after(&self, rv: u64, max: usize) -> Option<Vec<Change>> {
        if rv < self.compacted {
            return None;
        }
        let from = self.history.partition_point(|c| c.rv <= rv);
        Some(self.history.range(from..).take(max).copied().collect())
    }

    /// A change's object as a watch event line (`{"type":..,"object":..}\n`), the object
    /// written by `object`.
    pub fn watch_line(
        &self,
        out: &mut Vec<u8>,
        change: &Change,
        object: impl FnOnce(&mut Vec<u8>, &ScaleStore, u32, &Ev, Ver),
    ) {
        let ev = &self.events[change.slot as usize];
        let ver = match change.kind {
            ChangeKind::Deleted => Ver {
                rv: change.rv,
                ..ev.at(change.rv - 1).unwrap_or(ev.cur)
            },
            _ => ev.at(change.rv).unwrap_or(ev.cur),
        };
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(change.kind.wire().as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        object(out, self, change.slot, ev, ver);
        out.extend_from_slice(b"}\n");
    }

    pub fn key_of(&self, slot: u32) -> &str {
        self.events.get(slot as usize).map_or("", |e| &e.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(out: &mut Vec<u8>, _: &ScaleStore, _: u32, ev: &Ev, _: Ver) {
        out.extend_from_slice(ev.name().as_bytes());
    }

    fn ev(i: u64) -> NewEvent {
        NewEvent::pod("ns", &format!("p{i}"), i, "R", "m")
    }

    #[test]
    fn versions_read_at_a_past_resource_version() {
        let mut s = ScaleStore::new(100, 1);
        let a = s.create(&ev(1), 10, true).unwrap();
        let rv1 = s.rv;
        s.raise(a, 1, 11).unwrap();
        let rv2 = s.rv;
        s.raise(a, 2, 12).unwrap();
        s.delete(a).unwrap();
        let e = s.ev(a).unwrap();
        assert_eq!(e.at(rv1).unwrap().count, 1);
        assert_eq!(e.at(rv2).unwrap().count, 2);
        assert_eq!(e.at(rv2 + 1).unwrap().count, 4);
        assert!(e.at(s.rv).is_none());
        assert!(e.at(rv1 - 1).is_none());
    }

    #[test]
    fn the_window_compacts_the_oldest_changes_and_tombstones() {
        let mut s = ScaleStore::new(3, 1);
        let a = s.create(&ev(1), 0, true).unwrap();
        let b = s.create(&ev(2), 0, true).unwrap();
        s.delete(a).unwrap();
        assert!(s.changes_after(1000, 10).is_some());
        s.raise(b, 1, 0).unwrap();
        s.raise(b, 1, 0).unwrap();
        assert_eq!(s.compacted, 1002);
        assert!(
            s.create(&ev(1), 0, true).is_err(),
            "a's deletion is not compacted yet"
        );
        s.raise(b, 1, 0).unwrap();
        // a's create, b's create and a's delete fell out: a's key is free again.
        assert_eq!(s.compacted, 1003);
        assert!(s.changes_after(1002, 10).is_none());
        assert_eq!(s.changes_after(1003, 10).unwrap().len(), 3);
        assert!(s.find("ns", "p1.0000000000000001").is_none());
        assert!(s.create(&ev(1), 0, true).is_ok());
        // b's versions before the compacted revision are pruned on its next write.
        s.raise(b, 1, 0).unwrap();
        assert!(s.ev(b).unwrap().older.len() <= 3);
        assert_eq!(s.count(b), Some(5));
    }

    #[test]
    fn pages_follow_key_order_and_say_when_more_follow() {
        let mut s = ScaleStore::new(100, 1);
        for i in [3u64, 1, 2] {
            s.create(&ev(i), 0, true).unwrap();
        }
        let p = s.page(&Scope::all(), None, s.rv, 2, names);
        assert_eq!(p.items, 2);
        let after = p.more_after.unwrap();
        assert_eq!(&*after, "ns/p2.0000000000000002");
        let p = s.page(&Scope::all(), Some(&after), s.rv, 2, names);
        assert_eq!(p.items, 1);
        assert!(p.more_after.is_none());
        let p = s.page(&Scope::namespace("other"), None, s.rv, 2, names);
        assert_eq!(p.items, 0);
    }
}
