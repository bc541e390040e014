//! Replay never panics on arbitrary input or options: it either succeeds or returns a typed
//! error that names the input line (or `kubectl` item) it is about, with no raw control
//! character. For valid `kubectl` documents the streamed occurrences are exactly those of
//! materialising every count and sorting stably by time.

use kevents_core::{Event, EventSource, ObjectReference};
use kevents_sim::replay::{
    FlagError, MAX_MAX_LINE_BYTES, ReplayError, ReplayOptions, Replayer, kubectl,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Options mostly within range (so replays run), sometimes anything at all.
fn options() -> impl Strategy<Value = ReplayOptions> {
    prop_oneof![4 => valid_options(), 1 => any_options()]
}

fn valid_options() -> impl Strategy<Value = ReplayOptions> {
    let i64s = || prop::option::of(prop_oneof![4 => 1..=20i64, 1 => Just(i64::MAX)]);
    (
        prop::option::of(prop_oneof![4 => 1..=40i32, 1 => Just(i32::MAX)]),
        prop::option::of(prop_oneof![
            4 => 0.0001f32..10.0,
            1 => Just(f32::MIN_POSITIVE),
            1 => Just(f32::MAX)
        ]),
        i64s(),
        i64s(),
        i64s(),
        prop_oneof![4 => 1..=3000u64, 1 => Just(u64::MAX)],
        prop_oneof![4 => Just(1usize << 20), 1 => 40..=400usize, 1 => Just(MAX_MAX_LINE_BYTES)],
    )
        .prop_map(make_options)
}

fn any_options() -> impl Strategy<Value = ReplayOptions> {
    let i64s = || prop::option::of(prop_oneof![any::<i64>(), Just(0), Just(-1)]);
    (
        prop::option::of(prop_oneof![any::<i32>(), Just(0)]),
        prop::option::of(prop_oneof![
            any::<f32>(),
            Just(0.0),
            Just(-1.0),
            Just(f32::NAN),
            Just(f32::INFINITY),
            Just(f32::NEG_INFINITY)
        ]),
        i64s(),
        i64s(),
        i64s(),
        prop_oneof![Just(0u64), any::<u64>()],
        prop_oneof![Just(0usize), any::<usize>(), Just(MAX_MAX_LINE_BYTES + 1)],
    )
        .prop_map(make_options)
}

type RawOptions = (
    Option<i32>,
    Option<f32>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    u64,
    usize,
);

fn make_options(
    (burst, qps, max_events, max_interval, lru, max_occurrences, max_line_bytes): RawOptions,
) -> ReplayOptions {
    ReplayOptions {
        burst,
        qps,
        max_events,
        max_interval,
        lru,
        max_occurrences,
        max_line_bytes,
        client_go: Default::default(),
    }
}

/// A replayer for `o`, or the flag error (checked to name the flag and its range).
fn replayer(o: &ReplayOptions) -> Result<Replayer, FlagError> {
    match o.correlator_options() {
        Ok(c) => Ok(Replayer::new(c)),
        Err(e) => {
            let text = e.to_string();
            assert!(text.contains(e.flag.name()), "{text}");
            assert!(text.contains(e.flag.accepts()), "{text}");
            Err(e)
        }
    }
}

fn check_error(e: &ReplayError, physical_lines: usize) {
    let text = e.to_string();
    assert!(
        !text.chars().any(char::is_control),
        "raw control character: {text:?}"
    );
    assert!(text.len() < 600, "{text}");
    if let Some(n) = e.line() {
        assert!(
            n >= 1 && n <= physical_lines,
            "line {n} of {physical_lines}: {text}"
        );
        assert!(text.contains(&format!("line {n}")), "{text}");
    }
}

fn check_output(out: &[u8], written: Option<u64>) {
    let text = std::str::from_utf8(out).expect("output is UTF-8");
    let mut n = 0u64;
    for (i, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).expect("each output line is JSON");
        assert_eq!(v["i"], json!(i), "{line}");
        assert!(v["action"].is_string(), "{line}");
        n += 1;
    }
    if let Some(w) = written {
        assert_eq!(n, w);
    }
}

fn run_trace(o: &ReplayOptions, input: &[u8]) {
    let Ok(mut r) = replayer(o) else { return };
    let mut out = Vec::new();
    // A small read buffer so lines straddle reads.
    let reader = std::io::BufReader::with_capacity(7, input);
    let result = r.replay_trace(reader, &mut out, o.max_line_bytes);
    let physical = input.split(|b| *b == b'\n').count();
    match &result {
        Ok(w) => check_output(&out, Some(*w)),
        Err(e) => {
            assert!(e.line().is_some(), "a trace error names its line: {e}");
            check_error(e, physical);
            check_output(&out, None);
        }
    }
}

fn run_kubectl(o: &ReplayOptions, input: &[u8]) -> Option<Result<u64, ReplayError>> {
    let mut r = replayer(o).ok()?;
    let mut out = Vec::new();
    let result = r.replay_kubectl(input, &mut out, o.max_occurrences);
    let physical = input.split(|b| *b == b'\n').count();
    match &result {
        Ok(w) => check_output(&out, Some(*w)),
        Err(ReplayError::Kubectl(k)) => {
            // An error about an item says which.
            assert_eq!(
                k.to_string().starts_with("item "),
                k.item().is_some(),
                "{k}"
            );
            check_error(result.as_ref().unwrap_err(), physical);
            assert!(out.is_empty(), "a refused document replays nothing");
        }
        Err(e) => panic!("unexpected error from an in-memory replay: {e}"),
    }
    Some(result)
}

/// One line of a generated trace.
#[derive(Debug, Clone)]
enum Gen {
    /// An occurrence `dt` nanoseconds after the previous line.
    Occurrence {
        dt: i64,
        ns: String,
        name: String,
        type_: String,
        reason: String,
        message: String,
    },
    /// A deletion.
    Delete {
        dt: i64,
        ns: String,
        name: String,
    },
    /// A time that is anything at all.
    AnyTime(i64),
    Blank(&'static str),
    Bom(Box<Gen>),
    Bytes(Vec<u8>),
    Json(Value),
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9.-]{0,12}",
        "\\PC{0,10}",
        any::<String>().prop_map(|s| s.chars().take(20).collect()),
        Just("x".repeat(300)),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    Just("time".to_owned()),
                    Just("object".to_owned()),
                    Just("delete".to_owned()),
                    Just("type".to_owned()),
                    Just("annotations".to_owned()),
                    text()
                ],
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn gen_line() -> impl Strategy<Value = Gen> {
    let occurrence = (
        prop_oneof![0..3_000_000_000i64, Just(0), Just(i64::MAX / 4)],
        prop_oneof![Just(String::new()), Just("default".to_owned()), text()],
        prop_oneof![Just("pod".to_owned()), text()],
        prop_oneof![
            Just("Normal".to_owned()),
            Just("Warning".to_owned()),
            text()
        ],
        prop_oneof![Just("R".to_owned()), text()],
        prop_oneof![Just("m".to_owned()), Just("n".to_owned()), text()],
    )
        .prop_map(|(dt, ns, name, type_, reason, message)| Gen::Occurrence {
            dt,
            ns,
            name,
            type_,
            reason,
            message,
        });
    let leaf = prop_oneof![
        24 => occurrence,
        1 => (0..1_000_000_000i64, text(), text()).prop_map(|(dt, ns, name)| Gen::Delete { dt, ns, name }),
        1 => any::<i64>().prop_map(Gen::AnyTime),
        1 => prop_oneof![Just(""), Just("  \t"), Just("\r")].prop_map(Gen::Blank),
        1 => prop::collection::vec(any::<u8>(), 0..40).prop_map(Gen::Bytes),
        1 => json_value().prop_map(Gen::Json),
    ];
    prop_oneof![
        30 => leaf.clone(),
        1 => leaf.prop_map(|g| Gen::Bom(Box::new(g))),
    ]
}

fn render(lines: &[Gen], crlf: bool) -> Vec<u8> {
    let mut time: i64 = 1_700_000_000_000_000_000;
    let mut out = Vec::new();
    fn one(g: &Gen, time: &mut i64, out: &mut Vec<u8>) {
        match g {
            Gen::Occurrence {
                dt,
                ns,
                name,
                type_,
                reason,
                message,
            } => {
                *time = time.saturating_add(*dt);
                let v = json!({"time": *time, "source": {"component": "c"},
                    "object": {"kind": "Pod", "namespace": ns, "name": name},
                    "type": type_, "reason": reason, "message": message});
                out.extend_from_slice(v.to_string().as_bytes());
            }
            Gen::Delete { dt, ns, name } => {
                *time = time.saturating_add(*dt);
                let v = json!({"time": *time, "delete": {"namespace": ns, "name": name}});
                out.extend_from_slice(v.to_string().as_bytes());
            }
            Gen::AnyTime(t) => {
                let v = json!({"time": t, "object": {"name": "a"}, "type": "Normal"});
                out.extend_from_slice(v.to_string().as_bytes());
            }
            Gen::Blank(s) => out.extend_from_slice(s.as_bytes()),
            Gen::Bom(g) => {
                out.extend_from_slice("\u{feff}".as_bytes());
                one(g, time, out);
            }
            Gen::Bytes(b) => out.extend_from_slice(b),
            Gen::Json(v) => out.extend_from_slice(v.to_string().as_bytes()),
        }
    }
    for g in lines {
        one(g, &mut time, &mut out);
        out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
    }
    out
}

/// A stored event of a generated `kubectl` document.
fn item() -> impl Strategy<Value = Value> {
    let count = prop_oneof![
        12 => (1..=6i64).prop_map(Value::from),
        1 => Just(Value::Null),
        1 => any::<i64>().prop_map(Value::from),
        1 => Just(json!(2147483647)),
        1 => Just(json!(2.5)),
        1 => text().prop_map(Value::from),
    ];
    let time = prop_oneof![
        12 => (0..40i64).prop_map(|s| json!(format!("2023-11-14T22:00:{s:02}Z"))),
        2 => Just(Value::Null),
        1 => text().prop_map(Value::from),
        1 => Just(json!("9999-12-31T23:59:59Z")),
        1 => Just(json!("0001-01-01T00:00:00Z")),
    ];
    let kind = prop_oneof![
        10 => Just(json!("Event")),
        4 => Just(Value::Null),
        1 => Just(json!("Pod")),
    ];
    (
        count,
        time.clone(),
        time.clone(),
        time,
        kind,
        prop_oneof![Just("a".to_owned()), Just("b".to_owned()), text()],
        prop_oneof![Just("Normal"), Just("Warning"), Just("Odd")],
        prop_oneof![Just("m1"), Just("m2")],
        any::<bool>(),
    )
        .prop_map(|(count, first, last, event_time, kind, name, ty, msg, drop_count)| {
            let mut v = json!({"kind": kind, "metadata": {"name": format!("{name}.1"), "namespace": "ns"},
                "involvedObject": {"kind": "Pod", "namespace": "ns", "name": name},
                "reason": "R", "message": msg, "source": {"component": "kubelet"}, "type": ty,
                "count": count, "firstTimestamp": first, "lastTimestamp": last,
                "eventTime": event_time});
            if let Some(m) = v.as_object_mut() {
                if drop_count {
                    m.remove("count");
                }
                if m.get("kind").is_some_and(Value::is_null) {
                    m.remove("kind");
                }
            }
            v
        })
}

type Key = (i64, ObjectReference, String, String, String, EventSource);

/// The occurrences as replay produced them before streaming: every count materialised, then
/// a stable sort by time.
fn materialised(doc: &str) -> Vec<Key> {
    #[derive(serde::Deserialize)]
    struct List {
        items: Vec<Event>,
    }
    // `"count": null` counts as absent now; the event model reads it as an error.
    let mut doc: Value = serde_json::from_str(doc).expect("a valid document is JSON");
    for item in doc["items"].as_array_mut().into_iter().flatten() {
        if let Some(m) = item
            .as_object_mut()
            .filter(|m| m.get("count").is_some_and(Value::is_null))
        {
            m.remove("count");
        }
    }
    let list: List = serde_json::from_value(doc).expect("a valid document parses as events");
    let mut lines = Vec::new();
    for e in list.items {
        let last = e.last_timestamp.or(e.event_time).or(e.first_timestamp);
        let first = e.first_timestamp.or(last);
        let (Some(first), Some(last)) = (first, last) else {
            continue;
        };
        let count = i64::from(e.count.max(1));
        let span = last.nanos_since(first).max(0);
        for k in 0..count {
            let offset = if count == 1 {
                0
            } else {
                i64::try_from(i128::from(span) * i128::from(k) / i128::from(count - 1)).unwrap()
            };
            lines.push((
                first.unix_nanos().saturating_add(offset),
                e.involved_object.clone(),
                e.type_.clone(),
                e.reason.clone(),
                e.message.clone(),
                e.source.clone(),
            ));
        }
    }
    lines.sort_by_key(|l| l.0);
    lines
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_as_a_trace(o in options(), input in prop::collection::vec(any::<u8>(), 0..600)) {
        run_trace(&o, &input);
    }

    #[test]
    fn generated_traces(o in options(), lines in prop::collection::vec(gen_line(), 0..24), crlf in any::<bool>()) {
        run_trace(&o, &render(&lines, crlf));
    }

    #[test]
    fn arbitrary_bytes_as_a_kubectl_document(o in options(), input in prop::collection::vec(any::<u8>(), 0..600)) {
        run_kubectl(&o, &input);
    }

    #[test]
    fn arbitrary_json_as_a_kubectl_document(o in options(), v in json_value()) {
        run_kubectl(&o, v.to_string().as_bytes());
        let list = json!({"kind": "EventList", "items": [v]});
        run_kubectl(&o, list.to_string().as_bytes());
    }

    #[test]
    fn generated_event_lists(
        mut o in options(),
        items in prop::collection::vec(item(), 0..5),
        pretty in any::<bool>(),
    ) {
        // Counts go up to 2^31 - 1: keep the work of one case small.
        o.max_occurrences = o.max_occurrences.min(5_000);
        let list = json!({"apiVersion": "v1", "kind": "EventList", "items": items});
        let doc = if pretty { serde_json::to_string_pretty(&list).unwrap() } else { list.to_string() };
        if let Some(Ok(written)) = run_kubectl(&o, doc.as_bytes()) {
            // Valid: the stream is what materialising and sorting gave, occurrence for occurrence.
            let streamed: Vec<Key> = kubectl::occurrences(doc.as_bytes(), o.max_occurrences)
                .unwrap()
                .map(|l| (l.time, l.object.unwrap(), l.type_, l.reason, l.message, l.source))
                .collect();
            prop_assert_eq!(streamed.len() as u64, written);
            prop_assert_eq!(streamed, materialised(&doc));
        }
    }
}

#[test]
fn large_limits_and_extreme_options_do_not_panic() {
    let o = ReplayOptions {
        burst: Some(i32::MAX),
        qps: Some(f32::MIN_POSITIVE),
        max_events: Some(i64::MAX),
        max_interval: Some(i64::MAX),
        lru: Some(i64::MAX),
        max_occurrences: u64::MAX,
        max_line_bytes: MAX_MAX_LINE_BYTES,
        client_go: Default::default(),
    };
    let lines = [
        Gen::AnyTime(i64::MIN),
        Gen::AnyTime(-1),
        Gen::AnyTime(0),
        Gen::AnyTime(i64::MAX),
        Gen::AnyTime(i64::MAX),
    ];
    run_trace(&o, &render(&lines, false));
}
