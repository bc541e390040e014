//! Servers that answer oddly (issue 27): a write answered with another event (another name,
//! `..`, an empty name, another namespace), `Retry-After` as an HTTP date or a number beyond
//! 2^64, an out-of-range `retryAfterSeconds`. The servers are written here: plain HTTP on
//! loopback, one canned answer per request, every request line recorded.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kevents_core::answer::MAX_RETRY_AFTER;
use kevents_core::{Event, EventSink, SinkError, write_event};
use kevents_http::{HttpConfig, HttpSink};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

/// What the fake server answers to a request line (`POST /api/v1/...`): status line tail,
/// extra headers, body.
type Handler = dyn Fn(&str) -> (String, Vec<String>, String) + Send + Sync;

/// A plain-HTTP server on loopback answering with `handler`; returns its URL and the
/// request lines it got.
async fn fake_server(handler: Arc<Handler>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handler = Arc::clone(&handler);
            let log = Arc::clone(&log);
            tokio::spawn(async move {
                let mut r = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let request = line.trim().to_owned();
                    let mut len = 0usize;
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let h = h.trim();
                        if h.is_empty() {
                            break;
                        }
                        if let Some((k, v)) = h.split_once(':')
                            && k.eq_ignore_ascii_case("content-length")
                        {
                            len = v.trim().parse().unwrap_or(0);
                        }
                    }
                    let mut body = vec![0; len];
                    if r.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    log.lock().unwrap().push(request.clone());
                    let (status, headers, body) = handler(&request);
                    let mut out = format!(
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
                        body.len()
                    );
                    for h in headers {
                        out.push_str(&h);
                        out.push_str("\r\n");
                    }
                    out.push_str("\r\n");
                    out.push_str(&body);
                    if r.get_mut().write_all(out.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, seen)
}

fn event(name: &str) -> Event {
    let mut e = Event::default();
    e.metadata.name = name.into();
    e.metadata.namespace = "ns".into();
    e.involved_object.namespace = "ns".into();
    e.involved_object.kind = "Pod".into();
    e.involved_object.name = "web".into();
    e.reason = "BackOff".into();
    e.count = 1;
    e
}

fn stored(name: &str, namespace: &str) -> String {
    serde_json::json!({"kind": "Event", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": "7"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": namespace},
        "reason": "BackOff", "count": 1})
    .to_string()
}

/// A server that answers every write with the event `name` in `namespace`.
async fn answering(
    name: &'static str,
    namespace: &'static str,
) -> (HttpSink, Arc<Mutex<Vec<String>>>) {
    let (url, seen) = fake_server(Arc::new(move |req: &str| {
        let code = if req.starts_with("POST") {
            "201 Created"
        } else {
            "200 OK"
        };
        (code.into(), vec![], stored(name, namespace))
    }))
    .await;
    (HttpSink::new(HttpConfig::new(&url).unwrap()).unwrap(), seen)
}

#[tokio::test]
async fn a_write_answered_with_another_event_is_a_typed_error_and_the_event_keeps_its_name() {
    common::logs();
    for (name, namespace) in [
        ("someone-else.123", "ns"),
        ("..", "ns"),
        ("", "ns"),
        ("web.17a0", "other-ns"),
        ("a/b", "ns"),
    ] {
        let (sink, seen) = answering(name, namespace).await;
        let mut e = event("web.17a0");
        // CREATE: the answer names another event.
        let out = write_event(&sink, &mut e, None).await;
        let err = out.result.unwrap_err();
        assert!(
            matches!(err, SinkError::AnswerMismatch(_)),
            "{name}: {err:?}"
        );
        assert_eq!(
            err.disposition(),
            kevents_core::Disposition::Drop { quiet: false }
        );
        assert_eq!(e.metadata.name, "web.17a0");
        // PATCH of the event: to its own name, whatever the server said before; the answer
        // is refused again.
        e.count = 2;
        let err = sink.patch(&e, b"{\"count\":2}").await.unwrap_err();
        assert!(matches!(err, SinkError::AnswerMismatch(_)), "{err:?}");
        let lines = seen.lock().unwrap().clone();
        assert_eq!(
            lines,
            [
                "POST /api/v1/namespaces/ns/events HTTP/1.1",
                "PATCH /api/v1/namespaces/ns/events/web.17a0 HTTP/1.1"
            ],
            "{name}"
        );
    }
    // The answer that names the event written is learnt from.
    let (sink, _) = answering("web.17a0", "ns").await;
    let stored = sink.create(&event("web.17a0")).await.unwrap();
    assert_eq!(stored.returned().unwrap().metadata.resource_version, "7");
}

#[tokio::test]
async fn retry_after_dates_and_huge_numbers_are_honoured_and_keep_the_message() {
    common::logs();
    let in_30s = {
        // An IMF-fixdate 30 s from now, built by hand (the test must not trust the parser).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 30;
        let t = kevents_core::Time::from_unix_secs(now as i64).to_rfc3339();
        // 2026-11-26T10:00:00Z -> Thu, 26 Nov 2026 10:00:00 GMT
        let (date, time) = t.trim_end_matches('Z').split_once('T').unwrap();
        let mut p = date.split('-');
        let (y, m, d) = (p.next().unwrap(), p.next().unwrap(), p.next().unwrap());
        let months = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let days = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
        let weekday = days[((now / 86_400) % 7) as usize];
        let month = months[m.parse::<usize>().unwrap() - 1];
        format!("{weekday}, {d} {month} {y} {time} GMT")
    };
    let status = |seconds: &str| {
        format!(
            r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd is compacting","reason":"TooManyRequests","details":{{"retryAfterSeconds":{seconds}}},"code":429}}"#
        )
    };
    let cases: Vec<(Option<String>, String, Duration, Duration)> = vec![
        // An HTTP date: about 30 s from now.
        (
            Some(in_30s),
            status("1"),
            Duration::from_secs(27),
            Duration::from_secs(31),
        ),
        // A number beyond 2^64: the longest, not ignored.
        (
            Some("184467440737095516160000".into()),
            status("1"),
            MAX_RETRY_AFTER,
            MAX_RETRY_AFTER,
        ),
        // No header, retryAfterSeconds beyond int32: clamped, message kept.
        (
            None,
            status("99999999999999"),
            MAX_RETRY_AFTER,
            MAX_RETRY_AFTER,
        ),
    ];
    for (header, body, low, high) in cases {
        let h = header.clone();
        let (url, _) = fake_server(Arc::new(move |_: &str| {
            (
                "429 Too Many Requests".into(),
                h.iter().map(|v| format!("Retry-After: {v}")).collect(),
                body.clone(),
            )
        }))
        .await;
        let sink = HttpSink::new(HttpConfig::new(&url).unwrap()).unwrap();
        let err = sink.create(&event("web.1")).await.unwrap_err();
        let d = err
            .retry_after()
            .unwrap_or_else(|| panic!("{header:?}: no Retry-After"));
        assert!(low <= d && d <= high, "{header:?}: {d:?}");
        let SinkError::Status(s) = &err else {
            panic!("{err:?}")
        };
        assert_eq!(s.message, "etcd is compacting", "{header:?}");
        assert_eq!(s.reason, "TooManyRequests");
    }
}
