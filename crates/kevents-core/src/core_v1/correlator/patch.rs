//! The observer's strategic-merge patch body, byte for byte as client-go builds it.

use crate::core_v1::model::Event;
use crate::json::GoFormatter;

/// The observer's patch body (client-go `eventLogger.eventObserve` in
/// `tools/record/events_cache.go`): the two-way strategic merge diff between the
/// event with `count = 0`, `lastTimestamp = 1970-01-01T00:00:00Z`, `message = ""` and the event
/// itself, so it holds exactly the keys among `count`, `lastTimestamp` and `message` whose
/// JSON differs, sorted, as Go's encoder writes them.
///
/// ```
/// use kevents_core::{Event, Time};
/// let mut e = Event::default();
/// e.count = 2;
/// e.last_timestamp = Some(Time::parse_rfc3339("2021-01-01T00:00:20Z").unwrap());
/// e.message = "me again".into();
/// assert_eq!(kevents_core::core_v1::correlator::observation_patch(&e),
///            br#"{"count":2,"lastTimestamp":"2021-01-01T00:00:20Z","message":"me again"}"#);
/// e.message.clear();
/// e.last_timestamp = None;
/// assert_eq!(kevents_core::core_v1::correlator::observation_patch(&e), br#"{"count":2,"lastTimestamp":null}"#);
/// ```
pub fn observation_patch(event: &Event) -> Vec<u8> {
    use serde::Serializer as _;
    let mut out = Vec::with_capacity(96 + event.message.len());
    out.push(b'{');
    let mut first = true;
    let mut sep = |out: &mut Vec<u8>| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
    };
    if event.count != 0 {
        sep(&mut out);
        out.extend_from_slice(b"\"count\":");
        out.extend_from_slice(event.count.to_string().as_bytes());
    }
    match event.last_timestamp {
        // Whole seconds on the wire: anything within the epoch's second equals the old value.
        Some(t) if t.unix_secs() == 0 => {}
        Some(t) => {
            sep(&mut out);
            out.extend_from_slice(b"\"lastTimestamp\":\"");
            out.extend_from_slice(t.to_rfc3339().as_bytes());
            out.push(b'"');
        }
        None => {
            sep(&mut out);
            out.extend_from_slice(b"\"lastTimestamp\":null");
        }
    }
    if !event.message.is_empty() {
        sep(&mut out);
        out.extend_from_slice(b"\"message\":");
        let mut ser = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
        // Writing a str into a Vec cannot fail.
        let _ = ser.serialize_str(&event.message);
    }
    out.push(b'}');
    out
}
