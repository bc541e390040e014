//! KubeSink checks what a server answers to a write, as kevents-http does (issue 27): an
//! answer naming another event is a typed error and the event keeps its own name, and a
//! namespace or name that is not a DNS-1123 label/subdomain never reaches a URL.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use kevents_core::{Event, EventSink, ObjectReference, SinkError};
use kevents_kube::KubeSink;

/// An HTTP server on loopback answering every request with `status` and `body`; returns its
/// URL and the request lines it received.
fn server(status: &'static str, body: String) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().take(16) {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            log.lock().unwrap().push(line.trim().to_owned());
            let mut length = 0usize;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).is_err() || h == "\r\n" || h.is_empty() {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut sink = vec![0; length];
            let _ = reader.read_exact(&mut sink);
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, seen)
}

async fn sink(url: &str) -> KubeSink {
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: \"{url}\"}}\nusers:\n- name: u\n  user: {{token: t}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u, namespace: ns}}\ncurrent-context: x\n"
    );
    KubeSink::new(common::kube_client(&yaml, false).await)
}

fn event(name: &str) -> Event {
    let mut e = Event::default();
    e.metadata.namespace = "ns".into();
    e.metadata.name = name.into();
    e.involved_object = ObjectReference::new("v1", "Pod", "ns", "web");
    e.reason = "BackOff".into();
    e.count = 1;
    e
}

#[tokio::test]
async fn a_write_answered_with_another_event_is_a_typed_error() {
    let mut other = event("someone-else.123");
    other.metadata.resource_version = "9".into();
    let body = serde_json::to_string(&other).expect("json");
    let (url, seen) = server("201 Created", body);
    let sink = sink(&url).await;
    let err = sink.create(&event("web.17a0")).await.expect_err("mismatch");
    assert!(matches!(err, SinkError::AnswerMismatch(_)), "{err:?}");
    let err = sink
        .patch(&event("web.17a0"), br#"{"count":2}"#)
        .await
        .expect_err("mismatch");
    assert!(matches!(err, SinkError::AnswerMismatch(_)), "{err:?}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            "POST /api/v1/namespaces/ns/events HTTP/1.1",
            "PATCH /api/v1/namespaces/ns/events/web.17a0 HTTP/1.1"
        ]
    );
}

#[tokio::test]
async fn names_that_are_not_dns_names_never_reach_a_url() {
    let (url, seen) = server("200 OK", "{}".into());
    let sink = sink(&url).await;
    for name in ["..", ".", "", "a/b", "x?y"] {
        let err = sink
            .patch(&event(name), b"{}")
            .await
            .expect_err("refused before sending");
        assert!(
            matches!(err, SinkError::Construction(_)),
            "{name:?}: {err:?}"
        );
        let err = sink.create(&event(name)).await.expect_err("refused");
        assert!(
            matches!(err, SinkError::Construction(_)),
            "{name:?}: {err:?}"
        );
    }
    let mut bad_ns = event("web.1");
    bad_ns.metadata.namespace = "..".into();
    assert!(matches!(
        sink.create(&bad_ns).await,
        Err(SinkError::Construction(_))
    ));
    assert!(seen.lock().unwrap().is_empty(), "nothing was sent");
}
