//! JSON of the scale simulator's events, written on the fly from the compact store: a core/v1
//! Event or its events.k8s.io/v1 form (the same object in both APIs, as kube-apiserver
//! converts one stored Event), list bodies, watch bookmarks and `Status` bodies.

use kevents_core::Time;

use super::store::{Api, Ev, ScaleStore, Ver};

pub(crate) fn write_json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b < 0x7f)
    {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else if serde_json::to_writer(&mut *out, s).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

fn write_time(out: &mut Vec<u8>, secs: i64) {
    out.push(b'"');
    out.extend_from_slice(Time::from_unix_secs(secs).to_rfc3339().as_bytes());
    out.push(b'"');
}

fn write_field(out: &mut Vec<u8>, name: &str) {
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// One event as `api` serves it at version `ver`; `with_kind`: with `kind` and `apiVersion`
/// (watch events and single objects; list items go without, as kube-apiserver sends them).
pub(crate) fn write_event(
    out: &mut Vec<u8>,
    store: &ScaleStore,
    slot: u32,
    ev: &Ev,
    ver: Ver,
    api: Api,
    with_kind: bool,
) {
    out.push(b'{');
    if with_kind {
        out.extend_from_slice(b"\"kind\":\"Event\",\"apiVersion\":\"");
        out.extend_from_slice(api.api_version().as_bytes());
        out.extend_from_slice(b"\",");
    }
    let ns = ev.namespace();
    write_field(out, "metadata");
    out.push(b'{');
    write_field(out, "name");
    write_json_str(out, ev.name());
    out.push(b',');
    write_field(out, "namespace");
    write_json_str(out, ns);
    out.push(b',');
    write_field(out, "uid");
    write_json_str(out, &store.uid(slot));
    out.push(b',');
    write_field(out, "resourceVersion");
    out.extend_from_slice(format!("\"{}\"", ver.rv).as_bytes());
    out.push(b',');
    write_field(out, "creationTimestamp");
    write_time(out, ev.created);
    out.extend_from_slice(b"},");
    let (regarding, message, source, first, last, count) = match api {
        Api::Core => (
            "involvedObject",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
        ),
        Api::EventsV1 => (
            "regarding",
            "note",
            "deprecatedSource",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
        ),
    };
    if api == Api::EventsV1 {
        out.extend_from_slice(b"\"eventTime\":null,");
    }
    write_field(out, regarding);
    out.push(b'{');
    write_field(out, "kind");
    write_json_str(out, store.str(ev.kind));
    out.push(b',');
    write_field(out, "namespace");
    write_json_str(out, ns);
    out.push(b',');
    write_field(out, "name");
    write_json_str(out, store.object_name(ev));
    out.extend_from_slice(b"},");
    write_field(out, "reason");
    write_json_str(out, store.str(ev.reason));
    out.push(b',');
    write_field(out, message);
    write_json_str(out, store.str(ev.message));
    out.push(b',');
    if api == Api::EventsV1 {
        write_field(out, "type");
        write_json_str(out, if ev.warning { "Warning" } else { "Normal" });
        out.push(b',');
    }
    write_field(out, source);
    out.push(b'{');
    write_field(out, "component");
    write_json_str(out, store.str(ev.component));
    out.extend_from_slice(b"},");
    write_field(out, first);
    write_time(out, ev.first);
    out.push(b',');
    write_field(out, last);
    write_time(out, ver.last);
    out.push(b',');
    write_field(out, count);
    out.extend_from_slice(ver.count.to_string().as_bytes());
    if api == Api::Core {
        out.extend_from_slice(b",\"type\":");
        write_json_str(out, if ev.warning { "Warning" } else { "Normal" });
        out.extend_from_slice(
            b",\"eventTime\":null,\"reportingComponent\":\"\",\"reportingInstance\":\"\"",
        );
    }
    out.push(b'}');
}

/// A list body around `items` (their JSON, comma-separated).
pub(crate) fn write_list(api: Api, rv: u64, cont: Option<&str>, items: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.len() + 160);
    out.extend_from_slice(b"{\"kind\":\"EventList\",\"apiVersion\":\"");
    out.extend_from_slice(api.api_version().as_bytes());
    out.extend_from_slice(b"\",\"metadata\":{\"resourceVersion\":\"");
    out.extend_from_slice(rv.to_string().as_bytes());
    out.push(b'"');
    if let Some(c) = cont {
        out.extend_from_slice(b",\"continue\":");
        write_json_str(&mut out, c);
    }
    out.extend_from_slice(b"},\"items\":[");
    out.extend_from_slice(items);
    out.extend_from_slice(b"]}");
    out
}

/// A watch bookmark at `rv`: an empty Event with only its resourceVersion, as kube-apiserver
/// sends one.
pub(crate) fn write_bookmark(out: &mut Vec<u8>, api: Api, rv: u64) {
    out.extend_from_slice(
        b"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Event\",\"apiVersion\":\"",
    );
    out.extend_from_slice(api.api_version().as_bytes());
    out.extend_from_slice(b"\",\"metadata\":{\"resourceVersion\":\"");
    out.extend_from_slice(rv.to_string().as_bytes());
    out.extend_from_slice(b"\",\"creationTimestamp\":null}");
    match api {
        Api::Core => out.extend_from_slice(
            b",\"involvedObject\":{},\"reason\":\"\",\"message\":\"\",\"source\":{},\"firstTimestamp\":null,\"lastTimestamp\":null,\"count\":0,\"type\":\"\",\"eventTime\":null,\"reportingComponent\":\"\",\"reportingInstance\":\"\"}}\n",
        ),
        Api::EventsV1 => out.extend_from_slice(
            b",\"eventTime\":null,\"regarding\":{},\"reason\":\"\",\"note\":\"\",\"type\":\"\",\"deprecatedSource\":{},\"deprecatedFirstTimestamp\":null,\"deprecatedLastTimestamp\":null}}\n",
        ),
    }
}

/// A `metav1.Status` failure body.
pub(crate) fn status_body(code: u16, reason: &str, message: &str) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(
        b"{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":",
    );
    write_json_str(&mut out, message);
    out.extend_from_slice(b",\"reason\":");
    write_json_str(&mut out, reason);
    out.extend_from_slice(format!(",\"code\":{code}}}").as_bytes());
    out
}

/// A watch `ERROR` line holding a Status.
pub(crate) fn write_error_line(code: u16, reason: &str, message: &str) -> Vec<u8> {
    let mut out = b"{\"type\":\"ERROR\",\"object\":".to_vec();
    out.extend_from_slice(&status_body(code, reason, message));
    out.extend_from_slice(b"}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale::store::{NewEvent, scale_uid, slot_of_uid};

    #[test]
    fn an_event_renders_as_json_of_both_apis() {
        let mut s = ScaleStore::new(10, 7);
        let mut e = NewEvent::pod("ns", "web", 1, "Pulled", "say \"hi\"\n");
        e.object_name = "web".into();
        let slot = s.create(&e, 1_700_000_000, true).unwrap();
        let ev = s.ev(slot).unwrap();
        for api in [Api::Core, Api::EventsV1] {
            let mut out = Vec::new();
            write_event(&mut out, &s, slot, ev, ev.cur, api, true);
            let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(v["apiVersion"], api.api_version());
            assert_eq!(v["metadata"]["uid"], scale_uid(7, slot));
            assert_eq!(v["metadata"]["resourceVersion"], "1001");
            assert_eq!(v["reason"], "Pulled");
            let (obj, msg, count) = match api {
                Api::Core => ("involvedObject", "message", "count"),
                Api::EventsV1 => ("regarding", "note", "deprecatedCount"),
            };
            assert_eq!(v[obj]["name"], "web");
            assert_eq!(v[msg], "say \"hi\"\n");
            assert_eq!(v[count], 1);
            let mut b = Vec::new();
            write_bookmark(&mut b, api, 5);
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            assert_eq!(v["object"]["metadata"]["resourceVersion"], "5");
        }
        assert_eq!(slot_of_uid(7, &scale_uid(7, slot)), Some(slot));
        assert_eq!(slot_of_uid(8, &scale_uid(7, slot)), None);
    }
}
