//! Each write attempt of a sink chain runs in a `kevents.write` span whose fields say which
//! sink, which event, which verb and which attempt it was, and how it settled.
#![allow(missing_docs)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kevents_actors::{EventsV1Config, Pipeline, SinkOptions};
use kevents_core::events_v1::Reporter;
use kevents_core::{EventSource, EventType, ObjectReference};
use kevents_sim::MemoryApiServer;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One span: its name and its fields' values as text.
#[derive(Debug, Clone)]
struct SpanRecord {
    name: &'static str,
    fields: BTreeMap<String, String>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// Keeps every span in creation order, with the values recorded later.
#[derive(Clone, Default)]
struct Spans {
    spans: Arc<Mutex<Vec<SpanRecord>>>,
}

impl Spans {
    fn named(&self, name: &str) -> Vec<BTreeMap<String, String>> {
        self.spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.fields.clone())
            .collect()
    }
}

impl Subscriber for Spans {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut fields = BTreeMap::new();
        span.record(&mut Fields(&mut fields));
        let mut spans = self.spans.lock().unwrap();
        spans.push(SpanRecord {
            name: span.metadata().name(),
            fields,
        });
        Id::from_u64(spans.len() as u64)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        let i = usize::try_from(span.into_u64()).unwrap() - 1;
        values.record(&mut Fields(&mut spans[i].fields));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn every_write_attempt_has_a_span_with_its_status() {
    let spans = Spans::default();
    let _guard = tracing::subscriber::set_default(spans.clone());

    let api = MemoryApiServer::new();
    actix::System::new().block_on(async {
        let pipeline = Pipeline::builder(EventSource::new("span-test", "node-1"))
            .events_v1(EventsV1Config::new(Reporter::with_instance(
                "span-test",
                "node-1",
            )))
            // Every write made (the spans compared below), none coalesced.
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
                kevents_actors::events_v1::SinkOptions {
                    coalesce: false,
                    ..kevents_actors::events_v1::SinkOptions::default()
                },
            )
            .start();
        let recorder = pipeline.recorder();
        let pod = ObjectReference::new("v1", "Pod", "default", "web-1");
        for _ in 0..2 {
            recorder
                .event(&pod, EventType::Warning, "BackOff", "Back-off restarting")
                .unwrap();
        }
        recorder
            .events_v1()
            .emit(kevents_core::events_v1::Occurrence::new(
                ObjectReference::new("v1", "Pod", "default", "web-2"),
                None,
                EventType::Normal,
                "Pulled",
                "Pull",
                "image pulled",
            ))
            .unwrap();
        let report = pipeline.shutdown(Duration::from_secs(30)).await;
        assert!(report.completed, "{report:?}");
    });

    let mut writes = spans.named("kevents.write");
    // The event keys are `namespace/<object>.<unique suffix>`: check the prefix, then drop
    // them to compare the rest exactly.
    for w in &mut writes {
        let event = w.remove("event").expect("an event field");
        let prefix = if w["sink"] == "api" {
            "default/web-1."
        } else {
            "default/web-2."
        };
        assert!(event.starts_with(prefix), "{event}");
    }
    let core: Vec<_> = writes.iter().filter(|w| w["sink"] == "api").collect();
    assert_eq!(
        core,
        [
            &fields(&[
                ("sink", "api"),
                ("verb", "create"),
                ("attempt", "1"),
                ("status", "created")
            ]),
            &fields(&[
                ("sink", "api"),
                ("verb", "patch"),
                ("attempt", "1"),
                ("status", "patched")
            ]),
        ]
    );
    let v1: Vec<_> = writes.iter().filter(|w| w["sink"] == "v1").collect();
    assert_eq!(
        v1,
        [&fields(&[
            ("sink", "v1"),
            ("verb", "create"),
            ("reason", "first"),
            ("attempt", "1"),
            ("status", "created")
        ])]
    );
}
