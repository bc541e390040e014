//! Objects no honest apiserver serves, from a scripted one (no server needed): an event whose
//! uid is already an event's in another namespace is refused and counted (not merged into
//! the first); a count that goes down is counted once per event and exports nothing until it
//! passes the count already exported.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Collected;
use kevents_core::request::{
    ChunkFuture, ChunkSource, Limits, LineStream, Request, Response, StreamFuture, StreamRequest,
    StreamTransport, Transport, TransportFuture,
};
use kevents_export::{ExportConfig, MemoryResume};
use serde_json::{Value, json};

/// One list answer, then one watch that sends its lines and stays open.
#[derive(Clone)]
struct Scripted {
    list: Arc<Mutex<Option<Vec<u8>>>>,
    watch: Arc<Mutex<Option<Vec<u8>>>>,
}

struct Lines(VecDeque<Vec<u8>>);

impl ChunkSource for Lines {
    fn next_chunk(&mut self) -> ChunkFuture<'_> {
        let next = self.0.pop_front();
        Box::pin(async move {
            if next.is_none() {
                std::future::pending::<()>().await;
            }
            Ok(next)
        })
    }
}

impl Transport for Scripted {
    fn send(&self, _: Request) -> TransportFuture<'_> {
        let body = self.list.lock().expect("lock").take();
        Box::pin(async move {
            Ok(match body {
                Some(body) => Response {
                    code: 200,
                    body,
                    ..Default::default()
                },
                None => Response {
                    code: 500,
                    ..Default::default()
                },
            })
        })
    }
    fn limits(&self) -> Limits {
        Limits::default()
    }
}

impl StreamTransport for Scripted {
    fn open_lines(&self, request: StreamRequest) -> StreamFuture<'_> {
        let lines: VecDeque<Vec<u8>> = self
            .watch
            .lock()
            .expect("lock")
            .take()
            .into_iter()
            .collect();
        Box::pin(async move {
            Ok(LineStream::new(
                200,
                request.max_line_bytes,
                Box::new(Lines(lines)),
            ))
        })
    }
}

fn event(uid: &str, ns: &str, name: &str, count: i64, rv: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"uid": uid, "namespace": ns, "name": name, "resourceVersion": rv},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": "p", "uid": "pod-uid"},
        "reason": "Tested", "message": "m", "type": "Normal", "count": count,
        "source": {"component": "c"},
        "firstTimestamp": "2026-12-07T10:00:00Z", "lastTimestamp": "2026-12-07T10:00:00Z",
    })
}

#[tokio::test]
async fn a_reused_uid_is_refused_and_a_lower_count_counted_once() {
    let list = json!({
        "metadata": {"resourceVersion": "10"},
        "items": [event("u", "a", "e1", 3, "5"), event("u", "b", "e2", 5, "6"), event("v", "a", "e3", 4, "7")],
    });
    let mut watch = Vec::new();
    for (count, rv) in [(2, "11"), (1, "12"), (6, "13")] {
        let line = json!({"type": "MODIFIED", "object": event("v", "a", "e3", count, rv)});
        let mut line = serde_json::to_vec(&line).expect("json");
        line.push(b'\n');
        watch.push(line);
    }
    let apiserver = Scripted {
        list: Arc::new(Mutex::new(Some(serde_json::to_vec(&list).expect("json")))),
        watch: Arc::new(Mutex::new(Some(watch.concat()))),
    };
    let sink = Collected::default();
    let seen = sink.clone();
    let exported = sink.clone();
    let stats = kevents_export::run(
        apiserver,
        ExportConfig::default(),
        sink,
        MemoryResume::default(),
        async move {
            for _ in 0..200 {
                if seen.0.lock().expect("lock").len() >= 3 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        },
    )
    .await
    .expect("run");
    let records: Vec<(String, String, u64, u64)> = exported
        .0
        .lock()
        .expect("lock")
        .iter()
        .map(|r| (r.uid.clone(), r.namespace.clone(), r.count, r.delta))
        .collect();
    assert_eq!(
        records,
        vec![
            ("u".into(), "a".into(), 3, 3),
            ("v".into(), "a".into(), 4, 4),
            ("v".into(), "a".into(), 6, 2),
        ],
        "the second namespace's event is not merged into the first; 2 and 1 export nothing"
    );
    assert_eq!(stats.malformed, 1, "the reused uid, counted");
    assert_eq!(stats.decreases, 1, "4 -> 2 -> 1: one event, counted once");
    assert_eq!(stats.occurrences, 9);
}
