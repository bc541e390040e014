//! Compact storage of a series cache entry: the first occurrence of an event packed into one
//! heap buffer, plus a fingerprint of its isomorphism key.
//!
//! A cached `Event` costs about 1.3 KB (the struct itself, a dozen separately allocated
//! strings, an `Option<ObjectReference>`). Packed, it is one allocation of the string bytes
//! with a one-byte length prefix each (two from 128 bytes on), a two-byte flag word, and the
//! optional timestamps only when set. [`PackedKey::to_event`] rebuilds the identical `Event`
//! when a write needs it (series start, heartbeat, finish, flush, eviction).
//!
//! Lookups never build a key: [`Probe`] views an incoming `Event` in place, and both implement
//! [`KeyView`], through which `LruCache` compares them (`PackedKey: Borrow<dyn KeyView>`).

use std::borrow::{Borrow, Cow};
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hash, Hasher};

use foldhash::fast::RandomState;

use super::model::{API_VERSION, Event};
use crate::core_v1::EventSource;
use crate::meta::ObjectMeta;
use crate::reference::ObjectReference;
use crate::time::Time;

/// Identity strings: action, reason, reportingController, reportingInstance, type, the seven
/// fields of regarding, the seven of related (none = empty).
const IDENT: usize = 19;

const RELATED: u16 = 1;
const NOTE_IN_IDENTITY: u16 = 1 << 1;
const EVENT_TIME: u16 = 1 << 2;
const CREATION: u16 = 1 << 3;
const DEPRECATED_FIRST: u16 = 1 << 4;
const DEPRECATED_LAST: u16 = 1 << 5;
const DEPRECATED_COUNT: u16 = 1 << 6;
const ANNOTATIONS: u16 = 1 << 7;
const CUSTOM_KIND: u16 = 1 << 8;

static EMPTY_REF: ObjectReference = ObjectReference {
    kind: String::new(),
    namespace: String::new(),
    name: String::new(),
    uid: String::new(),
    api_version: String::new(),
    resource_version: String::new(),
    field_path: String::new(),
};

/// The isomorphism key of client-go 1.27+'s series cache as byte strings: action, reason,
/// reportingController, reportingInstance, type, the whole regarding reference, the related
/// reference (`None` equals an empty one), and the note when it is part of the identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Ident<'a> {
    fields: [&'a [u8]; IDENT],
    note: Option<&'a [u8]>,
}

fn ref_fields(r: &ObjectReference) -> [&[u8]; 7] {
    [
        r.kind.as_bytes(),
        r.namespace.as_bytes(),
        r.name.as_bytes(),
        r.uid.as_bytes(),
        r.api_version.as_bytes(),
        r.resource_version.as_bytes(),
        r.field_path.as_bytes(),
    ]
}

impl<'a> Ident<'a> {
    fn of(e: &'a Event, note: bool) -> Self {
        let r = ref_fields(&e.regarding);
        let q = ref_fields(e.related.as_ref().unwrap_or(&EMPTY_REF));
        Ident {
            fields: [
                e.action.as_bytes(),
                e.reason.as_bytes(),
                e.reporting_controller.as_bytes(),
                e.reporting_instance.as_bytes(),
                e.type_.as_bytes(),
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[6],
                q[0],
                q[1],
                q[2],
                q[3],
                q[4],
                q[5],
                q[6],
            ],
            note: note.then_some(e.note.as_bytes()),
        }
    }

    fn fingerprint(&self, state: &RandomState) -> u64 {
        state.hash_one(self)
    }
}

/// What the cache's maps compare: a stored [`PackedKey`] or a [`Probe`] of an incoming event.
pub(super) trait KeyView {
    /// The hash of [`KeyView::ident`] with the cache's hasher.
    fn fingerprint(&self) -> u64;
    /// The identity fields.
    fn ident(&self) -> Ident<'_>;
}

impl Hash for dyn KeyView + '_ {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.fingerprint());
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, o: &Self) -> bool {
        self.fingerprint() == o.fingerprint() && self.ident() == o.ident()
    }
}

impl Eq for dyn KeyView + '_ {}

/// An incoming event viewed as a key, without copying anything.
pub(super) struct Probe<'a> {
    ident: Ident<'a>,
    fingerprint: u64,
}

impl<'a> Probe<'a> {
    /// The key of `event`; `note`: whether the note is part of the identity.
    pub(super) fn new(event: &'a Event, note: bool, state: &RandomState) -> Self {
        let ident = Ident::of(event, note);
        Probe {
            fingerprint: ident.fingerprint(state),
            ident,
        }
    }

    /// As the type the maps look up with.
    pub(super) fn view(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

impl KeyView for Probe<'_> {
    fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
    fn ident(&self) -> Ident<'_> {
        self.ident
    }
}

/// The first occurrence of a series cache entry, packed: 24 bytes inline plus one buffer.
#[derive(Debug, Clone)]
pub(super) struct PackedKey {
    fingerprint: u64,
    buf: Box<[u8]>,
}

impl<'a> Borrow<dyn KeyView + 'a> for PackedKey {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

impl KeyView for PackedKey {
    fn fingerprint(&self) -> u64 {
        self.fingerprint
    }
    fn ident(&self) -> Ident<'_> {
        let mut r = Reader::new(&self.buf);
        let flags = r.flags();
        let mut fields: [&[u8]; IDENT] = [&[]; IDENT];
        for f in &mut fields {
            *f = r.bytes();
        }
        let note = r.bytes();
        Ident {
            fields,
            note: (flags & NOTE_IN_IDENTITY != 0).then_some(note),
        }
    }
}

impl Hash for PackedKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        (self as &dyn KeyView).hash(h);
    }
}

impl PartialEq for PackedKey {
    fn eq(&self, o: &Self) -> bool {
        (self as &dyn KeyView) == (o as &dyn KeyView)
    }
}

impl Eq for PackedKey {}

fn put_len(buf: &mut Vec<u8>, mut n: usize) {
    loop {
        let low = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            buf.push(low);
            return;
        }
        buf.push(low | 0x80);
    }
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    put_len(buf, s.len());
    buf.extend_from_slice(s.as_bytes());
}

fn put_time(buf: &mut Vec<u8>, t: Option<Time>) {
    if let Some(t) = t {
        buf.extend_from_slice(&t.unix_nanos().to_le_bytes());
    }
}

impl PackedKey {
    /// Packs `event` (its series is not kept: every write sets its own). `fingerprint` is the
    /// one of `Probe::new(event, note, ..)`.
    pub(super) fn new(event: &Event, note: bool, fingerprint: u64) -> Self {
        let Event {
            kind,
            api_version,
            metadata,
            event_time,
            series: _,
            reporting_controller: _,
            reporting_instance: _,
            action: _,
            reason: _,
            regarding: _,
            related,
            note: note_text,
            type_: _,
            deprecated_source,
            deprecated_first_timestamp,
            deprecated_last_timestamp,
            deprecated_count,
        } = event;
        let ObjectMeta {
            name,
            namespace,
            uid,
            resource_version,
            creation_timestamp,
            annotations,
        } = metadata;
        let EventSource { component, host } = deprecated_source;
        let custom_kind = kind != "Event" || api_version != API_VERSION;
        let flag = |on: bool, f: u16| if on { f } else { 0 };
        let flags = flag(related.is_some(), RELATED)
            | flag(note, NOTE_IN_IDENTITY)
            | flag(event_time.is_some(), EVENT_TIME)
            | flag(creation_timestamp.is_some(), CREATION)
            | flag(deprecated_first_timestamp.is_some(), DEPRECATED_FIRST)
            | flag(deprecated_last_timestamp.is_some(), DEPRECATED_LAST)
            | flag(*deprecated_count != 0, DEPRECATED_COUNT)
            | flag(!annotations.is_empty(), ANNOTATIONS)
            | flag(custom_kind, CUSTOM_KIND);

        let ident = Ident::of(event, false);
        let strings: usize = ident.fields.iter().map(|f| f.len() + 2).sum::<usize>()
            + [
                note_text,
                name,
                namespace,
                uid,
                resource_version,
                component,
                host,
            ]
            .iter()
            .map(|s| s.len() + 2)
            .sum::<usize>();
        let mut buf = Vec::with_capacity(2 + strings + 8 * 4);
        buf.extend_from_slice(&flags.to_le_bytes());
        for f in ident.fields {
            put_len(&mut buf, f.len());
            buf.extend_from_slice(f);
        }
        for s in [
            note_text,
            name,
            namespace,
            uid,
            resource_version,
            component,
            host,
        ] {
            put_str(&mut buf, s);
        }
        if custom_kind {
            put_str(&mut buf, kind);
            put_str(&mut buf, api_version);
        }
        put_time(&mut buf, *event_time);
        put_time(&mut buf, *creation_timestamp);
        put_time(&mut buf, *deprecated_first_timestamp);
        put_time(&mut buf, *deprecated_last_timestamp);
        if *deprecated_count != 0 {
            buf.extend_from_slice(&deprecated_count.to_le_bytes());
        }
        if !annotations.is_empty() {
            put_len(&mut buf, annotations.len());
            for (k, v) in annotations {
                put_str(&mut buf, k);
                put_str(&mut buf, v);
            }
        }
        PackedKey {
            fingerprint,
            buf: buf.into_boxed_slice(),
        }
    }

    /// Heap bytes held (the packed buffer).
    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        self.buf.len()
    }

    /// `metadata.name` of the packed event.
    #[cfg(test)]
    pub(super) fn name(&self) -> &[u8] {
        let mut r = Reader::new(&self.buf);
        r.flags();
        for _ in 0..=IDENT {
            r.bytes();
        }
        r.bytes()
    }

    /// The packed event, as it was given to [`PackedKey::new`], without a series.
    pub(super) fn to_event(&self) -> Event {
        let mut r = Reader::new(&self.buf);
        let flags = r.flags();
        let on = |f: u16| flags & f != 0;
        let action = r.string();
        let reason = r.string();
        let reporting_controller = r.string();
        let reporting_instance = r.string();
        let type_ = r.string();
        let regarding = r.reference();
        let related = r.reference();
        let note = r.string();
        let name = r.string();
        let namespace = r.string();
        let uid = r.string();
        let resource_version = r.string();
        let component = r.string();
        let host = r.string();
        let (kind, api_version) = if on(CUSTOM_KIND) {
            (Cow::Owned(r.string()), Cow::Owned(r.string()))
        } else {
            (Cow::Borrowed("Event"), Cow::Borrowed(API_VERSION))
        };
        let event_time = on(EVENT_TIME).then(|| r.time());
        let creation_timestamp = on(CREATION).then(|| r.time());
        let deprecated_first_timestamp = on(DEPRECATED_FIRST).then(|| r.time());
        let deprecated_last_timestamp = on(DEPRECATED_LAST).then(|| r.time());
        let deprecated_count = if on(DEPRECATED_COUNT) { r.i32() } else { 0 };
        let mut annotations = BTreeMap::new();
        if on(ANNOTATIONS) {
            for _ in 0..r.len() {
                let k = r.string();
                annotations.insert(k, r.string());
            }
        }
        Event {
            kind,
            api_version,
            metadata: ObjectMeta {
                name,
                namespace,
                uid,
                resource_version,
                creation_timestamp,
                annotations,
            },
            event_time,
            series: None,
            reporting_controller,
            reporting_instance,
            action,
            reason,
            regarding,
            related: on(RELATED).then_some(related),
            note,
            type_,
            deprecated_source: EventSource { component, host },
            deprecated_first_timestamp,
            deprecated_last_timestamp,
            deprecated_count,
        }
    }
}

/// Reads a packed buffer front to back. The buffer is always one [`PackedKey::new`] wrote, so
/// nothing here fails; a short read gives empty values rather than a panic.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.buf.len());
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        head
    }

    fn flags(&mut self) -> u16 {
        let b = self.take(2);
        u16::from_le_bytes([
            b.first().copied().unwrap_or(0),
            b.get(1).copied().unwrap_or(0),
        ])
    }

    fn len(&mut self) -> usize {
        let mut n = 0usize;
        let mut shift = 0u32;
        while let Some((&b, tail)) = self.buf.split_first() {
            self.buf = tail;
            n |= usize::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        n
    }

    fn bytes(&mut self) -> &'a [u8] {
        let n = self.len();
        self.take(n)
    }

    fn string(&mut self) -> String {
        String::from_utf8_lossy(self.bytes()).into_owned()
    }

    fn reference(&mut self) -> ObjectReference {
        ObjectReference {
            kind: self.string(),
            namespace: self.string(),
            name: self.string(),
            uid: self.string(),
            api_version: self.string(),
            resource_version: self.string(),
            field_path: self.string(),
        }
    }

    fn time(&mut self) -> Time {
        let mut a = [0u8; 8];
        let b = self.take(8);
        a[..b.len()].copy_from_slice(b);
        Time::from_unix_nanos(i64::from_le_bytes(a))
    }

    fn i32(&mut self) -> i32 {
        let mut a = [0u8; 4];
        let b = self.take(4);
        a[..b.len()].copy_from_slice(b);
        i32::from_le_bytes(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Event {
        let mut e = Event::default();
        e.metadata.name = "pod-1.1655f29dd1e42f00".into();
        e.metadata.namespace = "ns".into();
        e.metadata.uid = "u".into();
        e.metadata.resource_version = "42".into();
        e.metadata.creation_timestamp = Some(Time::from_unix_secs(5));
        e.metadata.annotations.insert("a/b".into(), "c".into());
        e.metadata.annotations.insert("d".into(), "é".repeat(200));
        e.event_time = Some(Time::from_unix_nanos(1_609_459_200_123_456_000));
        e.reporting_controller = "example.com/ctl".into();
        e.reporting_instance = "ctl-1".into();
        e.action = "Act".into();
        e.reason = "Why".into();
        e.regarding = ObjectReference::new("v1", "Pod", "ns", "pod-1").with_uid("uid");
        e.regarding.field_path = "spec.containers{app}".into();
        e.related = Some(ObjectReference::default());
        e.note = "n".repeat(1000);
        e.type_ = "Warning".into();
        e.deprecated_source = EventSource::new("kubelet", "node1");
        e.deprecated_first_timestamp = Some(Time::from_unix_secs(-3));
        e.deprecated_last_timestamp = Some(Time::from_unix_secs(7));
        e.deprecated_count = -9;
        e
    }

    #[test]
    fn round_trips() {
        let s = RandomState::default();
        let mut custom = full();
        custom.kind = Cow::Owned("Other".into());
        custom.api_version = Cow::Owned(String::new());
        for e in [Event::default(), full(), custom] {
            for note in [false, true] {
                let p = Probe::new(&e, note, &s);
                let k = PackedKey::new(&e, note, p.fingerprint);
                assert_eq!(k.to_event(), e);
                assert_eq!(k.name(), e.metadata.name.as_bytes());
                assert!(p.view() == Borrow::<dyn KeyView>::borrow(&k));
            }
        }
    }

    #[test]
    fn series_is_not_kept_and_identity_ignores_other_fields() {
        let s = RandomState::default();
        let mut e = full();
        e.series = Some(super::super::EventSeries::new(3, Time::UNIX_EPOCH));
        let k = PackedKey::new(&e, false, Probe::new(&e, false, &s).fingerprint);
        assert_eq!(k.to_event().series, None);
        let mut other = full();
        other.note = "different".into();
        other.metadata.name = "x".into();
        other.related = None;
        assert!(Probe::new(&other, false, &s).view() == Borrow::<dyn KeyView>::borrow(&k));
        assert!(Probe::new(&other, true, &s).view() != Borrow::<dyn KeyView>::borrow(&k));
        other.regarding.resource_version = "1".into();
        assert!(Probe::new(&other, false, &s).view() != Borrow::<dyn KeyView>::borrow(&k));
    }

    #[test]
    fn packed_size_of_a_typical_event() {
        // The series_bench example's event for pod 12345 (docs/events-v1.md, Benchmark).
        let mut e = Event::default();
        e.metadata.name = "pod-12345.1655f29d787c0000".into();
        e.metadata.namespace = "bench".into();
        e.event_time = Some(Time::from_unix_secs(1_609_459_200));
        e.reporting_controller = "example.com/bench-controller".into();
        e.reporting_instance = "bench-controller-node-1".into();
        e.action = "Scheduling".into();
        e.reason = "FailedScheduling".into();
        e.regarding = ObjectReference::new("v1", "Pod", "bench", "pod-12345").with_uid("uid-12345");
        e.note = "0/100 nodes are available: pod-12345 does not fit".into();
        e.type_ = "Warning".into();
        let k = PackedKey::new(&e, false, 0);
        // 2 flag bytes + 26 one-byte lengths + 192 bytes of text + 8 of eventTime.
        assert_eq!(k.heap_bytes(), 2 + 26 + 192 + 8);
        assert_eq!(std::mem::size_of::<PackedKey>(), 24);
        assert_eq!(k.to_event(), e);
    }
}
