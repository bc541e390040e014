//! The request layer over a scripted transport: what is sent, and how every answer is
//! classified (the classification both sinks, kevents-http's and kevents-kube's, share).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::*;
use crate::core_v1::{Event, EventSink, WriteKind, write_event};
use crate::events_v1::{self, EventSink as _};
use crate::preflight::{PreflightApi, ResourceAttributes};
use crate::status::{Disposition, SinkError};
use crate::stored::Stored;

/// Answers from a script, in order (a 500 once it is used up); records every request.
#[derive(Clone, Default)]
struct Scripted {
    answers: Arc<Mutex<VecDeque<Result<Response, SinkError>>>>,
    sent: Arc<Mutex<Vec<Request>>>,
    limits: Limits,
}

impl Scripted {
    fn new(answers: impl IntoIterator<Item = Result<Response, SinkError>>) -> Self {
        Scripted {
            answers: Arc::new(Mutex::new(answers.into_iter().collect())),
            ..Scripted::default()
        }
    }

    fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    fn client(&self) -> Client<Scripted> {
        Client::new(self.clone())
    }

    fn sent(&self) -> Vec<String> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }
}

impl Transport for Scripted {
    fn send(&self, request: Request) -> TransportFuture<'_> {
        self.sent.lock().unwrap().push(request);
        let answer = self
            .answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| Ok(answer(500, "")));
        Box::pin(async move { answer })
    }

    fn limits(&self) -> Limits {
        self.limits
    }
}

fn answer(code: u16, body: &str) -> Response {
    Response {
        code,
        retry_after: None,
        body: body.as_bytes().to_vec(),
        oversized: false,
    }
}

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fn event(name: &str) -> Event {
    let mut e = Event::default();
    e.metadata.namespace = "default".into();
    e.metadata.name = name.into();
    e.count = 1;
    e
}

/// The JSON of an event `name` in `default`, as the server echoes it.
fn echo(name: &str, resource_version: &str) -> String {
    format!(
        r#"{{"kind":"Event","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"default","resourceVersion":"{resource_version}"}},"count":2}}"#
    )
}

#[test]
fn status_body_is_decoded() {
    let body = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
        "message":"events \"x\" already exists","reason":"AlreadyExists",
        "details":{"name":"x","kind":"events"},"code":409}"#;
    let e = answer(409, body).answer().status_error();
    assert!(e.is_already_exists());
    assert_eq!(e.code(), Some(409));
    let SinkError::Status(s) = e else { panic!() };
    assert_eq!(s.details.unwrap().name, "x");
}

#[test]
fn a_redirect_is_not_called_a_server_error() {
    // Was "an error on the server has prevented the request from succeeding" (issue 36).
    let e = answer(302, "").answer().status_error();
    let SinkError::Status(s) = e else { panic!() };
    assert_eq!((s.code, s.reason.as_str()), (302, "Unknown"));
    assert_eq!(
        s.message,
        "the server responded with the status code 302 but did not return more information"
    );
}

#[test]
fn non_status_body_becomes_generic_status() {
    let mut a = answer(502, "<html>bad gateway</html>");
    a.retry_after = Some(Duration::from_secs(7));
    let e = a.answer().status_error();
    assert_eq!(e.code(), Some(502));
    assert_eq!(e.retry_after(), Some(Duration::from_secs(7)));
    let SinkError::Status(s) = e else { panic!() };
    assert_eq!(s.reason, "InternalError"); // client-go: any 5xx it does not name
    assert_eq!(
        s.details.unwrap().causes[0].message,
        "<html>bad gateway</html>"
    );
}

#[test]
fn retry_after_from_details_when_no_header() {
    let body = r#"{"kind":"Status","status":"Failure","reason":"TooManyRequests",
        "details":{"retryAfterSeconds":3},"code":429}"#;
    let e = answer(429, body).answer().status_error();
    assert_eq!(e.retry_after(), Some(Duration::from_secs(3)));
    assert_eq!(e.disposition(), Disposition::Retry);
}

#[test]
fn success_body_must_be_an_event() {
    let get = |a: Response| block_on(Scripted::new([Ok(a)]).client().get_event("default", "a"));
    assert!(matches!(
        get(answer(200, r#"{"kind":"Status"}"#)),
        Err(SinkError::UnexpectedObject(_))
    ));
    assert!(matches!(
        get(answer(201, "nope")),
        Err(SinkError::UnexpectedObject(_))
    ));
    let e = get(answer(
        201,
        r#"{"kind":"Event","metadata":{"name":"a","resourceVersion":"5"},"count":1}"#,
    ))
    .unwrap();
    assert_eq!(e.metadata.resource_version, "5");
}

#[test]
fn paths_are_built_from_checked_names() {
    assert_eq!(
        events_path("/api/v1", "default", Some("a.b")).unwrap(),
        "/api/v1/namespaces/default/events/a.b"
    );
    assert_eq!(events_path("/api/v1", "", None).unwrap(), "/api/v1/events");
    assert!(matches!(
        events_path("/api/v1", "x/y", Some("a")),
        Err(SinkError::Construction(_))
    ));
    assert_eq!(encode_segment("a b?/é"), "a%20b%3F%2F%C3%A9");
    assert_eq!(
        encode_path("/apis/events.k8s.io/v1"),
        "/apis/events.k8s.io/v1"
    );
}

#[test]
fn create_and_patch_send_the_event_and_its_patch() {
    let t = Scripted::new([
        Ok(answer(201, &echo("web.1", "5"))),
        Ok(answer(200, &echo("web.1", "6"))),
    ]);
    let e = event("web.1");
    let stored = block_on(t.client().create(&e)).unwrap();
    assert_eq!(stored.returned().unwrap().metadata.resource_version, "5");
    let stored = block_on(t.client().patch(&e, br#"{"count":2}"#)).unwrap();
    assert_eq!(stored.returned().unwrap().count, 2);
    assert_eq!(
        t.sent(),
        [
            "POST /api/v1/namespaces/default/events",
            "PATCH /api/v1/namespaces/default/events/web.1"
        ]
    );
    let sent = t.sent.lock().unwrap();
    assert_eq!(sent[0].content_type, Some(APPLICATION_JSON));
    assert_eq!(sent[0].body, crate::json::to_vec(&e).unwrap());
    assert_eq!(sent[1].content_type, Some(STRATEGIC_MERGE_PATCH));
    assert_eq!(sent[1].body, br#"{"count":2}"#);
    assert_eq!(sent[1].timeout, DEFAULT_REQUEST_TIMEOUT);
    assert_eq!(sent[1].max_response_bytes, DEFAULT_MAX_RESPONSE_BYTES);
}

#[test]
fn a_patch_answered_404_is_recreated() {
    let t = Scripted::new([Ok(answer(404, "")), Ok(answer(201, &echo("web.1", "9")))]);
    let mut e = event("web.1");
    e.count = 2;
    e.metadata.resource_version = "3".into();
    let out = block_on(write_event(&t.client(), &mut e, Some(br#"{"count":2}"#)));
    assert_eq!(out.kind, WriteKind::Recreate);
    assert!(out.result.is_ok(), "{:?}", out.result);
    assert_eq!(
        t.sent(),
        [
            "PATCH /api/v1/namespaces/default/events/web.1",
            "POST /api/v1/namespaces/default/events"
        ]
    );
}

#[test]
fn a_create_answered_409_is_dropped_quietly() {
    let body = r#"{"kind":"Status","status":"Failure","reason":"AlreadyExists","code":409}"#;
    let t = Scripted::new([Ok(answer(409, body))]);
    let err = block_on(t.client().create(&event("web.1"))).unwrap_err();
    assert!(err.is_already_exists());
    assert_eq!(err.disposition(), Disposition::Drop { quiet: true });
}

#[test]
fn throttling_and_server_errors_are_retried_after_the_servers_pause() {
    let mut throttled = answer(429, "slow down");
    throttled.retry_after = Some(Duration::from_secs(4));
    let t = Scripted::new([
        Ok(throttled),
        Ok(answer(503, "")),
        Err(SinkError::Transport("reset".into())),
    ]);
    let e = event("web.1");
    let err = block_on(t.client().create(&e)).unwrap_err();
    assert_eq!(err.code(), Some(429));
    assert_eq!(err.retry_after(), Some(Duration::from_secs(4)));
    assert_eq!(err.disposition(), Disposition::Retry);
    let err = block_on(t.client().patch(&e, b"{}")).unwrap_err();
    assert_eq!(
        (err.code(), err.disposition()),
        (Some(503), Disposition::Retry)
    );
    let err = block_on(t.client().create(&e)).unwrap_err();
    assert!(matches!(err, SinkError::Transport(_)), "{err:?}");
    assert_eq!(err.disposition(), Disposition::Retry);
}

#[test]
fn server_text_is_sanitised() {
    let body = "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"no \\u001b[2J way\",\"reason\":\"Forbidden\",\"code\":403}";
    let t = Scripted::new([Ok(answer(403, body))]);
    let err = block_on(t.client().create(&event("web.1"))).unwrap_err();
    assert!(!err.to_string().contains('\u{1b}'), "{err}");
    assert!(err.to_string().contains("way"), "{err}");
}

#[test]
fn an_oversized_answer_to_a_write_is_stored_as_sent_otherwise_an_error() {
    let big = Response {
        code: 201,
        oversized: true,
        ..Response::default()
    };
    let t = Scripted::new([Ok(big.clone()), Ok(big.clone()), Ok(big.clone()), Ok(big)]);
    let e = event("web.1");
    assert!(matches!(
        block_on(t.client().create(&e)),
        Ok(Stored::AsSent)
    ));
    assert!(matches!(
        block_on(t.client().patch(&e, b"{}")),
        Ok(Stored::AsSent)
    ));
    let err = block_on(t.client().review(&question())).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "unexpected response object: response body larger than {DEFAULT_MAX_RESPONSE_BYTES} bytes"
        )
    );
    let err = block_on(t.client().get("/version", 10)).unwrap_err();
    assert!(matches!(err, SinkError::UnexpectedObject(_)), "{err:?}");
    // An oversized error answer is the generic status of its code.
    let t = Scripted::new([Ok(Response {
        code: 500,
        oversized: true,
        ..Response::default()
    })]);
    let err = block_on(t.client().create(&e)).unwrap_err();
    assert_eq!(err.code(), Some(500));
}

#[test]
fn the_answer_must_name_the_event_sent() {
    let v1 = r#"{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"other.1","namespace":"default"}}"#;
    let t = Scripted::new([Ok(answer(201, &echo("other.1", "5"))), Ok(answer(200, v1))]);
    let err = block_on(t.client().create(&event("web.1"))).unwrap_err();
    assert!(matches!(err, SinkError::AnswerMismatch(_)), "{err:?}");
    let mut e = events_v1::Event::default();
    e.metadata.namespace = "default".into();
    e.metadata.name = "web.1".into();
    let err = block_on(t.client().patch_events_v1(&e, b"{}")).unwrap_err();
    assert!(matches!(err, SinkError::AnswerMismatch(_)), "{err:?}");
    assert_eq!(
        t.sent(),
        [
            "POST /api/v1/namespaces/default/events",
            "PATCH /apis/events.k8s.io/v1/namespaces/default/events/web.1"
        ]
    );
}

#[test]
fn names_that_are_not_dns_names_never_reach_a_path() {
    let t = Scripted::new([Ok(answer(422, ""))]);
    for name in ["..", ".", "", "a/b", "x?y", "a%2Fb"] {
        let err = block_on(t.client().patch(&event(name), b"{}")).unwrap_err();
        assert!(
            matches!(err, SinkError::Construction(_)),
            "{name:?}: {err:?}"
        );
        let err = block_on(t.client().check_created_names(true).create(&event(name))).unwrap_err();
        assert!(
            matches!(err, SinkError::Construction(_)),
            "{name:?}: {err:?}"
        );
    }
    let mut elsewhere = event("ok.1");
    elsewhere.metadata.namespace = "..".into();
    assert!(matches!(
        block_on(t.client().create(&elsewhere)),
        Err(SinkError::Construction(_))
    ));
    assert!(block_on(t.client().get_event("default", "..")).is_err());
    assert!(block_on(t.client().delete_event("..", "x")).is_err());
    assert!(block_on(t.client().list_events("a/b")).is_err());
    assert!(t.sent().is_empty(), "nothing was sent");
    // Without the check, the name of a create (not in its path) goes to the server.
    let err = block_on(t.client().create(&event("a/b"))).unwrap_err();
    assert_eq!(err.code(), Some(422));
    assert_eq!(t.sent(), ["POST /api/v1/namespaces/default/events"]);
}

#[test]
fn discovery_answers_served_not_served_or_the_error() {
    let t = Scripted::new([
        Ok(answer(
            200,
            r#"{"kind":"APIResourceList","groupVersion":"events.k8s.io/v1","resources":[{"name":"events","namespaced":true,"kind":"Event"}]}"#,
        )),
        Ok(answer(404, "")),
        Ok(answer(403, "")),
    ]);
    assert!(block_on(t.client().events_v1_served()).unwrap());
    assert!(!block_on(t.client().api_served("/apis/events.k8s.io/v1")).unwrap());
    let err = block_on(t.client().served("/apis/x y/v1")).unwrap_err();
    assert_eq!(err.code(), Some(403));
    assert_eq!(
        t.sent(),
        [
            "GET /apis/events.k8s.io/v1",
            "GET /apis/events.k8s.io/v1",
            "GET /apis/x%20y/v1"
        ]
    );
}

fn question() -> ResourceAttributes {
    ResourceAttributes {
        namespace: "default".into(),
        verb: "create".into(),
        group: String::new(),
        resource: "events".into(),
    }
}

fn page(names: &[&str], cont: &str) -> Response {
    let items: Vec<String> = names.iter().map(|n| echo(n, "1")).collect();
    answer(
        200,
        &format!(
            r#"{{"kind":"EventList","metadata":{{"continue":"{cont}"}},"items":[{}]}}"#,
            items.join(",")
        ),
    )
}

#[test]
fn lists_follow_continue_tokens_within_their_limits() {
    let t = Scripted::new([Ok(page(&["a", "b"], "k+/=")), Ok(page(&["c"], ""))]);
    let listed = block_on(t.client().list_events("default")).unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(
        t.sent(),
        [
            "GET /api/v1/namespaces/default/events?limit=250",
            "GET /api/v1/namespaces/default/events?limit=250&continue=k%2B%2F%3D"
        ]
    );
    // The same token twice: an error, not an endless list.
    let t = Scripted::new([Ok(page(&["a"], "t")), Ok(page(&["b"], "t"))]);
    let err = block_on(t.client().events_v1().list_events("")).unwrap_err();
    assert!(
        matches!(err, ListError::RepeatedContinue { pages: 2, items: 2 }),
        "{err:?}"
    );
    assert_eq!(t.sent()[0], "GET /apis/events.k8s.io/v1/events?limit=250");
    // More pages than allowed.
    let limits = Limits {
        max_list_pages: 2,
        ..Limits::default()
    };
    let t = Scripted::new([Ok(page(&["a"], "1")), Ok(page(&["b"], "2"))]).with_limits(limits);
    let err = block_on(t.client().list_events("default")).unwrap_err();
    assert!(
        matches!(err, ListError::TooManyPages { limit: 2, items: 2 }),
        "{err:?}"
    );
    assert_eq!(t.sent().len(), 2);
    // All pages together over the byte budget: the second page may use what is left.
    let first = page(&["a"], "1");
    let limits = Limits {
        max_list_bytes: first.body.len() + 10,
        ..Limits::default()
    };
    let over = Response {
        code: 200,
        oversized: true,
        ..Response::default()
    };
    let t = Scripted::new([Ok(first.clone()), Ok(over)]).with_limits(limits);
    let err = block_on(t.client().list_events("default")).unwrap_err();
    assert!(
        matches!(
            err,
            ListError::TooLarge {
                pages: 1,
                items: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(t.sent.lock().unwrap()[1].max_response_bytes, 10);
    // A page answered with an error, or with something else than a list.
    let t = Scripted::new([Ok(answer(404, "")), Ok(answer(200, "[]"))]);
    let err = block_on(t.client().list_events("default")).unwrap_err();
    assert!(err.is_not_found());
    let err = block_on(t.client().list_events("default")).unwrap_err();
    assert!(
        matches!(err, ListError::Sink(SinkError::UnexpectedObject(_))),
        "{err:?}"
    );
}

#[test]
fn reviews_are_posted_and_decoded() {
    let allowed = r#"{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","status":{"allowed":true}}"#;
    let t = Scripted::new([Ok(answer(201, allowed)), Ok(answer(401, ""))]);
    let question = question();
    assert!(block_on(t.client().review(&question)).unwrap().allowed);
    assert_eq!(
        block_on(t.client().review(&question)).unwrap_err().code(),
        Some(401)
    );
    let sent = t.sent.lock().unwrap();
    assert_eq!(sent[0].method, Method::Post);
    assert_eq!(sent[0].path, crate::preflight::ACCESS_REVIEW_PATH);
    assert_eq!(sent[0].body, question.review_body());
}

#[test]
fn bounded_reads() {
    let mut r = ResponseReader::new(4, None);
    r.push(b"ab");
    r.push(b"cd");
    assert!(r.wants_more());
    r.push(b"e");
    assert!(!r.wants_more());
    r.push(b"");
    let r = r.finish(200, Some("soon"));
    assert_eq!(
        (r.body.as_slice(), r.oversized, r.retry_after),
        (&b"abcd"[..], true, None)
    );
    assert!(!ResponseReader::new(4, Some(" 5")).wants_more());
    assert!(ResponseReader::new(4, Some("4")).wants_more());
}

/// A 2xx answer to a write whose body cannot be read as the event (not JSON, another kind:
/// a proxy's page, a broken server) says the server stored it: the write counts as stored
/// as sent, and is not retried (issue 36: it was retried as an unexpected object, so a
/// stored event was counted failed and its re-POST got 409).
#[test]
fn an_undecodable_2xx_answer_to_a_write_counts_as_stored_as_sent() {
    for body in [
        "<html>ok</html>",
        r#"{"kind":"Status","apiVersion":"v1"}"#,
        "",
    ] {
        let t = Scripted::new([Ok(answer(201, body)), Ok(answer(200, body))]);
        let created = block_on(t.client().create(&event("e1")));
        assert!(
            matches!(created, Ok(Stored::AsSent)),
            "{body:?}: {created:?}"
        );
        let patched = block_on(t.client().patch(&event("e1"), b"{}"));
        assert!(
            matches!(patched, Ok(Stored::AsSent)),
            "{body:?}: {patched:?}"
        );
        assert_eq!(t.sent().len(), 2, "{body:?}: one request each");
    }
    // A 2xx naming another event is still the typed mismatch (the caller reports it).
    let t = Scripted::new([Ok(answer(201, &echo("other", "3")))]);
    assert!(matches!(
        block_on(t.client().create(&event("e1"))),
        Err(SinkError::AnswerMismatch(_))
    ));
}

/// Issue 36: a 200 discovery answer counted as "served" whatever its body. Only an
/// APIResourceList naming `events` is; one without it is "not served"; another body (a
/// proxy's page, `{}`, another kind, nothing) is a lying server, an error.
#[test]
fn a_discovery_answer_is_served_only_if_it_names_events() {
    let t = Scripted::new([
        Ok(answer(
            200,
            r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods"},{"name":"events"}]}"#,
        )),
        Ok(answer(
            200,
            r#"{"kind":"APIResourceList","groupVersion":"events.k8s.io/v1","resources":[{"name":"leases"}]}"#,
        )),
        Ok(answer(200, "<html>welcome to the proxy</html>")),
        Ok(answer(200, "{}")),
        Ok(answer(200, r#"{"kind":"Status","status":"Success"}"#)),
        Ok(answer(200, "")),
    ]);
    assert!(block_on(t.client().api_served("/api/v1")).unwrap());
    assert!(!block_on(t.client().events_v1_served()).unwrap());
    for _ in 0..4 {
        let err = block_on(t.client().events_v1_served()).unwrap_err();
        assert!(matches!(err, SinkError::UnexpectedObject(_)), "{err:?}");
        assert!(err.to_string().contains("not an APIResourceList"), "{err}");
    }
}
