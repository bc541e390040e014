//! The Prometheus export end to end: `kevents::prometheus::install`, a pipeline with a
//! core/v1 sink chain (`api`) and an events.k8s.io/v1 series chain (`v1`) writing to the
//! in-memory apiserver, a few occurrences, then `GET /metrics` over HTTP. Every counter served
//! has the value of the pipeline's own snapshot, and the metrics served are exactly the ones
//! `docs/metrics.md` lists, with the type it gives.
//!
//! `src/prometheus.rs` is compiled into this test (the facade's `prometheus` feature is off in
//! `cargo test --workspace`), so the README's test command tests the helper itself. A
//! `metrics` recorder is process-wide, so this binary holds exactly one test.
#![allow(missing_docs)]

#[path = "../src/prometheus.rs"]
mod prometheus;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use kevents::actors::StatsSnapshot;
use kevents::events_v1::Reporter;
use kevents::{EventSource, EventType, EventsV1Config, ObjectReference, Pipeline, SinkOptions};
use kevents_sim::MemoryApiServer;

/// A core/v1 apiserver that refuses every write (403 Forbidden: a token without rights).
struct Forbidden;

impl kevents::core::EventSink for Forbidden {
    fn create(&self, _: &kevents::core::Event) -> kevents::core::SinkFuture {
        Box::pin(async { Err(forbidden()) })
    }
    fn patch(&self, _: &kevents::core::Event, _: &[u8]) -> kevents::core::SinkFuture {
        Box::pin(async { Err(forbidden()) })
    }
}

fn forbidden() -> kevents::core::SinkError {
    kevents::core::SinkError::Status(Box::new(kevents::core::Status::failure(
        403,
        "Forbidden",
        "events is forbidden",
    )))
}

/// One sample: metric name and labels (sorted).
type Series = (String, BTreeMap<String, String>);

/// The scrape, parsed: samples, `# TYPE` and `# HELP` lines.
#[derive(Debug, Default)]
struct Scrape {
    samples: BTreeMap<Series, f64>,
    types: BTreeMap<String, String>,
    help: BTreeMap<String, String>,
}

impl Scrape {
    fn parse(text: &str) -> Scrape {
        let mut s = Scrape::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
                s.types.insert(name.to_owned(), kind.to_owned());
            } else if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').expect("# HELP name text");
                s.help.insert(name.to_owned(), help.to_owned());
            } else if !line.starts_with('#') {
                let (series, value) = line.rsplit_once(' ').expect("sample: series value");
                let value: f64 = value.parse().expect("sample value is a number");
                let (name, labels) = match series.split_once('{') {
                    Some((name, labels)) => (name, parse_labels(labels.trim_end_matches('}'))),
                    None => (series, BTreeMap::new()),
                };
                s.samples.insert((name.to_owned(), labels), value);
            }
        }
        s
    }

    /// The value of `name{labels}`; panics with what was served if there is none.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let key = (
            name.to_owned(),
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        match self.samples.get(&key) {
            Some(v) => *v,
            None => panic!(
                "{name} {labels:?} was not served; served: {:#?}",
                self.samples.keys().collect::<Vec<_>>()
            ),
        }
    }

    fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        let v = self.get(name, labels);
        assert!(v >= 0.0 && v.fract() == 0.0, "{name} {labels:?} = {v}");
        v as u64
    }
}

/// `a="x",b="y"` (values without quotes or backslashes, as every kevents label value).
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").expect("label: key=\"value\"");
        let (value, after) = after
            .split_once('"')
            .expect("label value ends with a quote");
        labels.insert(key.to_owned(), value.to_owned());
        rest = after.strip_prefix(',').unwrap_or(after);
    }
    labels
}

/// `GET /metrics` over HTTP/1.1: the body of a 200 response.
fn scrape(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the exporter");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send the request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read the response");
    let (head, body) = response.split_once("\r\n\r\n").expect("head and body");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{head}"
    );
    body.to_owned()
}

/// The metrics table of docs/metrics.md: name -> type (`counter` or `gauge`).
fn documented() -> BTreeMap<String, String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md"))
        .expect("docs/metrics.md");
    // The pipeline's metrics: the export's (`kevents export`, its own section) are served by
    // the CLI, not by the pipeline.
    let pipeline = doc
        .split("\n## The export's metrics")
        .next()
        .unwrap_or_default();
    pipeline
        .lines()
        .filter(|l| l.starts_with("| `kevents_"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].trim_matches('`').to_owned(), cells[2].to_owned())
        })
        .collect()
}

/// Every counter of the snapshot has the value served.
fn assert_served(m: &Scrape, s: &StatsSnapshot) {
    assert_eq!(m.counter("kevents_recorded_total", &[]), s.recorded);
    assert_eq!(m.counter("kevents_broadcast_total", &[]), s.broadcast);
    for (reason, value) in [
        ("invalid", s.dropped_invalid),
        ("intake_full", s.dropped_intake_full),
        ("after_shutdown", s.dropped_after_shutdown),
    ] {
        assert_eq!(
            m.counter("kevents_dropped_total", &[("reason", reason)]),
            value
        );
    }
    assert_eq!(
        m.counter("kevents_coalesced_total", &[("queue", "intake")]),
        s.intake_coalesced
    );
    for w in &s.watchers {
        let n = w.name.as_str();
        assert_eq!(
            m.counter("kevents_watcher_accepted_total", &[("watcher", n)]),
            w.accepted,
            "watcher {n}"
        );
        assert_eq!(
            m.counter(
                "kevents_coalesced_total",
                &[("queue", &format!("watcher:{n}"))]
            ),
            w.coalesced,
            "watcher {n}"
        );
        for (reason, value) in [("full", w.dropped_full), ("closed", w.dropped_closed)] {
            assert_eq!(
                m.counter(
                    "kevents_watcher_dropped_total",
                    &[("watcher", n), ("reason", reason)]
                ),
                value,
                "watcher {n} {reason}"
            );
        }
    }
    for k in &s.sinks {
        let n = k.name.as_str();
        for (outcome, value) in [
            ("correlated", k.correlated),
            ("aggregated", k.aggregated),
            ("spam_filtered", k.spam_filtered),
        ] {
            let labels = [("sink", n), ("outcome", outcome)];
            assert_eq!(m.counter("kevents_sink_events_total", &labels), value);
        }
        for (outcome, value) in [
            ("created", k.created),
            ("patched", k.patched),
            ("recreated", k.recreated),
            ("rejected", k.rejected),
            ("retry_exhausted", k.retry_exhausted),
            ("abandoned", k.abandoned),
            ("superseded", k.superseded),
        ] {
            let labels = [("sink", n), ("outcome", outcome)];
            assert_eq!(m.counter("kevents_sink_writes_total", &labels), value);
        }
        assert_eq!(
            m.counter("kevents_sink_attempts_total", &[("sink", n)]),
            k.attempts
        );
        assert_eq!(
            m.counter("kevents_sink_restarts_total", &[("sink", n)]),
            k.restarts
        );
        if k.not_stored > 0 {
            let labels = [
                ("sink", n),
                ("status", "403"),
                ("verb", "create"),
                ("api", "core/v1"),
            ];
            assert_eq!(
                m.counter("kevents_occurrences_not_stored_total", &labels),
                k.not_stored
            );
        }
    }
    for b in &s.budgets {
        let n = b.name.as_str();
        for (reason, value) in [
            ("rate", b.deferred_rate),
            ("retry_after", b.deferred_retry_after),
            ("circuit", b.deferred_circuit),
        ] {
            let labels = [("budget", n), ("reason", reason)];
            assert_eq!(m.counter("kevents_budget_deferred_total", &labels), value);
        }
        assert_eq!(
            m.counter("kevents_budget_pauses_total", &[("budget", n)]),
            b.pauses
        );
        assert_eq!(
            m.counter("kevents_circuit_opens_total", &[("budget", n)]),
            b.circuit_opens
        );
        assert_eq!(
            m.counter("kevents_circuit_probes_total", &[("budget", n)]),
            b.probes
        );
        for (how, value) in [
            ("proposed", b.fleet_laws_proposed),
            ("adopted", b.fleet_laws_adopted),
        ] {
            let labels = [("budget", n), ("how", how)];
            assert_eq!(m.counter("kevents_budget_fleet_laws_total", &labels), value);
        }
    }
    for v in &s.sinks_events_v1 {
        let n = v.name.as_str();
        let c = &v.cache;
        for (kind, value) in [
            ("singleton", c.evicted_singletons),
            ("series", c.evicted_series),
        ] {
            let labels = [("sink", n), ("kind", kind)];
            assert_eq!(m.counter("kevents_series_evicted_total", &labels), value);
        }
        for (reason, value) in [
            ("heartbeat", c.heartbeats),
            ("finish", c.finished),
            ("flush", c.flushed),
        ] {
            let labels = [("sink", n), ("reason", reason)];
            assert_eq!(m.counter("kevents_series_writes_total", &labels), value);
        }
        assert_eq!(
            m.counter("kevents_series_counted_in_memory_total", &[("sink", n)]),
            c.counted_in_memory
        );
        for (outcome, value) in [("delivered", v.delivered()), ("failed", v.failed())] {
            let labels = [("sink", n), ("outcome", outcome)];
            assert_eq!(m.counter("kevents_series_requests_total", &labels), value);
        }
    }
}

#[test]
fn metrics_are_served_to_prometheus() {
    // A free port: bound, read, released, then given to the exporter.
    let addr = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port");
    // Before the pipeline: it takes its metric handles from the recorder installed now.
    let handle = prometheus::install(addr).expect("the exporter starts");
    // Installing a second recorder is refused.
    let again = prometheus::install(
        TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("another free port"),
    );
    assert!(
        matches!(again, Err(prometheus::PrometheusError::Build(_))),
        "{again:?}"
    );

    let api = MemoryApiServer::new();
    let stats = actix::System::new().block_on(async {
        let pipeline = Pipeline::builder(EventSource::new("prometheus-test", "node-1"))
            .events_v1(EventsV1Config::new(Reporter::with_instance(
                "prometheus-test",
                "node-1",
            )))
            // One write per correlator result (the sequence counted below).
            .sink(
                "api",
                api.clone(),
                SinkOptions {
                    coalesce: false,
                    ..SinkOptions::default()
                },
            )
            .sink_events_v1(
                "v1",
                api.clone(),
                kevents::events_v1::SinkOptions::default(),
            )
            // Refuses every write: the core/v1 occurrences are not stored there.
            .sink("refused", Forbidden, SinkOptions::default())
            .start();
        let recorder = pipeline.recorder();
        let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
        // core/v1: one CREATE, then two PATCHes of the count.
        for _ in 0..3 {
            recorder
                .event(&pod, EventType::Warning, "BackOff", "Back-off restarting")
                .expect("recorded");
        }
        // events.k8s.io/v1: one CREATE.
        recorder
            .events_v1()
            .emit(kevents::events_v1::Occurrence::new(
                ObjectReference::new("v1", "Pod", "default", "web-2"),
                None,
                EventType::Normal,
                "Pulled",
                "Pull",
                "image pulled",
            ))
            .expect("recorded");
        let report = pipeline.shutdown(Duration::from_secs(30)).await;
        assert!(report.completed, "{report:?}");
        report.stats
    });
    // The in-memory apiserver keeps the events of both APIs in one store, as kube-apiserver.
    let mut stored: Vec<(String, i32)> = api
        .list()
        .into_iter()
        .map(|e| (e.involved_object.name, e.count))
        .collect();
    stored.sort();
    assert_eq!(stored, [("web-1".to_owned(), 3), ("web-2".to_owned(), 0)]);

    let text = scrape(addr);
    let m = Scrape::parse(&text);

    // The values this scenario must give.
    assert_eq!(m.counter("kevents_recorded_total", &[]), 4, "{text}");
    let api_writes = |outcome| {
        m.counter(
            "kevents_sink_writes_total",
            &[("sink", "api"), ("outcome", outcome)],
        )
    };
    assert_eq!(
        (
            api_writes("created"),
            api_writes("patched"),
            api_writes("rejected")
        ),
        (1, 2, 0)
    );
    assert_eq!(
        m.counter(
            "kevents_series_requests_total",
            &[("sink", "v1"), ("outcome", "delivered")]
        ),
        1
    );
    // The three core/v1 occurrences the refusing apiserver does not have, by cause.
    let refused = [
        ("sink", "refused"),
        ("status", "403"),
        ("verb", "create"),
        ("api", "core/v1"),
    ];
    assert_eq!(
        m.counter("kevents_occurrences_not_stored_total", &refused),
        3,
        "{text}"
    );
    assert_eq!(stats.not_stored(), 3);
    assert_eq!(
        stats.not_stored_by_cause(),
        [(
            "403 Forbidden: create core/v1 events in namespace \"default\"".to_owned(),
            3
        )]
    );
    assert_eq!(m.get("kevents_queue_depth", &[("queue", "intake")]), 0.0);
    assert_eq!(m.get("kevents_queue_depth", &[("queue", "sink:api")]), 0.0);
    // And every counter equals the pipeline's own snapshot.
    assert_served(&m, &stats);

    // Served: exactly the documented metrics, with their documented types and a help text.
    let docs = documented();
    assert_eq!(docs.len(), 30, "docs/metrics.md lists 30 metrics: {docs:?}");
    let served: BTreeSet<&String> = m
        .samples
        .keys()
        .map(|(name, _)| name)
        .filter(|n| n.starts_with("kevents_"))
        .collect();
    assert_eq!(served, docs.keys().collect::<BTreeSet<_>>());
    for (name, kind) in &docs {
        assert_eq!(m.types.get(name), Some(kind), "# TYPE of {name}");
        assert!(m.help.contains_key(name), "# HELP of {name}");
    }

    // The handle renders the same samples.
    let rendered = Scrape::parse(&handle.render());
    assert_eq!(rendered.samples, m.samples);
}
