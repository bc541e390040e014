use std::sync::{Arc, Mutex};

use kevents_core::request::{
    ChunkFuture, ChunkSource, Limits, Request, Response, StreamFuture, Transport, TransportFuture,
};
use serde_json::json;

use super::*;

/// A scripted apiserver: list answers and watch streams in order, every path asked for kept.
#[derive(Clone, Default)]
struct Fake(Arc<Mutex<Script>>);

#[derive(Default)]
struct Script {
    lists: VecDeque<Response>,
    watches: VecDeque<(u16, Vec<Vec<u8>>)>,
    paths: Vec<String>,
}

struct Chunks(VecDeque<Vec<u8>>, bool);

impl ChunkSource for Chunks {
    fn next_chunk(&mut self) -> ChunkFuture<'_> {
        let next = self.0.pop_front();
        let hang = next.is_none() && self.1;
        Box::pin(async move {
            if hang {
                std::future::pending::<()>().await;
            }
            // An empty chunk: the server says nothing for a minute (its timeoutSeconds).
            if next.as_ref().is_some_and(Vec::is_empty) {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            Ok(next)
        })
    }
}

impl Transport for Fake {
    fn send(&self, request: Request) -> TransportFuture<'_> {
        let mut s = self.0.lock().unwrap();
        s.paths.push(request.path);
        let answer = s.lists.pop_front().unwrap_or(Response {
            code: 500,
            ..Default::default()
        });
        Box::pin(async move { Ok(answer) })
    }
    fn limits(&self) -> Limits {
        Limits::default()
    }
}

impl StreamTransport for Fake {
    fn open_lines(&self, request: StreamRequest) -> StreamFuture<'_> {
        let mut s = self.0.lock().unwrap();
        s.paths.push(request.path);
        // Without a script: a watch that never says anything.
        let (code, chunks, hang) = match s.watches.pop_front() {
            Some((code, chunks)) => (code, chunks, false),
            None => (200, Vec::new(), true),
        };
        Box::pin(async move {
            Ok(LineStream::new(
                code,
                request.max_line_bytes,
                Box::new(Chunks(chunks.into(), hang)),
            ))
        })
    }
}

impl Fake {
    fn list(&self, rv: &str, cont: &str, names: &[&str]) -> &Self {
        let items: Vec<Value> = names
            .iter()
            .map(|n| json!({"metadata": {"name": n, "resourceVersion": "1"}}))
            .collect();
        let body = json!({"metadata": {"resourceVersion": rv, "continue": cont}, "items": items});
        self.0.lock().unwrap().lists.push_back(Response {
            code: 200,
            body: serde_json::to_vec(&body).unwrap(),
            ..Default::default()
        });
        self
    }

    fn watch(&self, code: u16, lines: &[Value]) -> &Self {
        let chunks = lines
            .iter()
            .map(|l| {
                let mut v = serde_json::to_vec(l).unwrap();
                v.push(b'\n');
                v
            })
            .collect();
        self.0.lock().unwrap().watches.push_back((code, chunks));
        self
    }

    fn paths(&self) -> Vec<String> {
        self.0.lock().unwrap().paths.clone()
    }
}

fn applied(name: &str, rv: &str) -> Value {
    json!({"type": "ADDED", "object": {"metadata": {"name": name, "resourceVersion": rv}}})
}

fn config() -> WatchConfig {
    WatchConfig::new("/api/v1/namespaces/a/events")
        .with_page_size(2)
        .with_watch_timeout(Duration::from_secs(60))
}

#[tokio::test(start_paused = true)]
async fn lists_every_page_then_watches_from_the_lists_resource_version() {
    let fake = Fake::default();
    fake.list("10", "c1", &["x", "y"]).list("11", "", &["z"]);
    fake.watch(
        200,
        &[
            applied("w", "12"),
            json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "13"}}}),
        ],
    );
    let mut w = Watcher::new(fake.clone(), config(), None);
    assert_eq!(w.next().await, WatchEvent::ListStart { relist: false });
    let mut names = Vec::new();
    loop {
        match w.next().await {
            WatchEvent::Listed(o) => names.push(o["metadata"]["name"].as_str().unwrap().to_owned()),
            WatchEvent::ListEnd { rv } => {
                assert_eq!(rv, "11");
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(names, ["x", "y", "z"]);
    assert!(matches!(w.next().await, WatchEvent::Applied { rv, .. } if rv == "12"));
    assert_eq!(w.next().await, WatchEvent::Bookmark { rv: "13".into() });
    // The server ends the watch after a minute: watch again from the bookmark.
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(w.next().await, WatchEvent::Restarted);
    let paths = fake.paths();
    assert_eq!(paths[0], "/api/v1/namespaces/a/events?limit=2");
    assert_eq!(paths[1], "/api/v1/namespaces/a/events?limit=2&continue=c1");
    assert!(paths[2].contains("watch=1") && paths[2].contains("resourceVersion=11"));
    assert!(paths[2].contains("allowWatchBookmarks=true&timeoutSeconds=60"));
    // The next watch (hanging) is opened from the bookmark.
    let _ = timeout(Duration::from_secs(1), w.next()).await;
    assert!(
        fake.paths()[3].contains("resourceVersion=13"),
        "{:?}",
        fake.paths()
    );
}

#[tokio::test(start_paused = true)]
async fn gone_after_a_list_backs_off_and_gone_later_relists_at_once() {
    let fake = Fake::default();
    fake.list("10", "", &[]);
    fake.watch(410, &[]);
    fake.list("20", "", &[]);
    fake.watch(200, &[applied("a", "21")]);
    fake.watch(200, &[json!({"type": "ERROR", "object": {"code": 410}})]);
    fake.list("30", "", &[]);
    let mut w = Watcher::new(fake.clone(), config(), None);
    assert!(matches!(
        w.next().await,
        WatchEvent::ListStart { relist: false }
    ));
    assert!(matches!(w.next().await, WatchEvent::ListEnd { .. }));
    match w.next().await {
        WatchEvent::Failed {
            error: WatchError::GoneAfterList,
            verb: "watch",
            retry_in,
            failures: 1,
            warn: true,
        } => assert!(retry_in >= Duration::from_millis(400)),
        other => panic!("{other:?}"),
    }
    let before = Instant::now();
    assert_eq!(w.next().await, WatchEvent::ListStart { relist: true });
    assert!(before.elapsed() >= Duration::from_millis(400), "it waited");
    assert!(matches!(w.next().await, WatchEvent::ListEnd { rv } if rv == "20"));
    assert!(matches!(w.next().await, WatchEvent::Applied { .. }));
    // The server ends that watch; the next one says 410: the resourceVersion is old, list
    // again without a pause.
    tokio::time::advance(Duration::from_secs(5)).await;
    assert_eq!(w.next().await, WatchEvent::Restarted);
    let before = Instant::now();
    assert_eq!(w.next().await, WatchEvent::ListStart { relist: true });
    assert_eq!(before.elapsed(), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_ends_at_once_is_a_failure_with_a_pause() {
    let fake = Fake::default();
    fake.list("10", "", &[]);
    for _ in 0..5 {
        fake.watch(200, &[]);
    }
    let mut w = Watcher::new(fake.clone(), config(), None);
    w.next().await;
    w.next().await;
    let started = Instant::now();
    for n in 1..=5u32 {
        match w.next().await {
            WatchEvent::Failed {
                error: WatchError::ShortWatch(_),
                failures,
                ..
            } => assert_eq!(failures, n),
            other => panic!("{other:?}"),
        }
    }
    // 0.4 + 0.8 + 1.6 + 3.2 s at least between the five tries.
    assert!(
        started.elapsed() >= Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    // Watched again from the list's resourceVersion each time, never listed again.
    assert_eq!(
        fake.paths()
            .iter()
            .filter(|p| !p.contains("watch=1"))
            .count(),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn a_cycling_continue_token_is_bounded() {
    let fake = Fake::default();
    for i in 0..40 {
        fake.list("10", if i % 2 == 0 { "A" } else { "B" }, &["x"]);
    }
    let mut config = config();
    config.max_list_pages = 10;
    let mut w = Watcher::new(fake.clone(), config, None);
    let mut listed = 0;
    let error = loop {
        match w.next().await {
            WatchEvent::Listed(_) => listed += 1,
            WatchEvent::Failed { error, verb, .. } => {
                assert_eq!(verb, "list");
                break error;
            }
            _ => {}
        }
    };
    assert!(matches!(error, WatchError::ListTooLong(_)), "{error}");
    assert_eq!(listed, 10);
    assert_eq!(fake.paths().len(), 10);
}

#[tokio::test(start_paused = true)]
async fn a_silent_watch_is_dropped_after_its_timeout_and_the_idle_margin() {
    let fake = Fake::default();
    fake.list("10", "", &[]);
    let mut w = Watcher::new(fake.clone(), config(), None);
    w.next().await;
    w.next().await;
    let started = Instant::now();
    match w.next().await {
        WatchEvent::Failed {
            error: WatchError::Idle(d),
            ..
        } => assert_eq!(d, Duration::from_secs(90)),
        other => panic!("{other:?}"),
    }
    // A quiet scope is not a failure before the server's timeoutSeconds and the margin.
    assert_eq!(started.elapsed(), Duration::from_secs(90));
}

#[tokio::test(start_paused = true)]
async fn a_start_resource_version_is_watched_first_and_a_refusal_is_forbidden() {
    let fake = Fake::default();
    let status = json!({"kind": "Status", "code": 403, "reason": "Forbidden", "message": "no"});
    fake.0
        .lock()
        .unwrap()
        .watches
        .push_back((403, vec![serde_json::to_vec(&status).unwrap()]));
    let mut w = Watcher::new(fake.clone(), config(), Some("42".into()));
    match w.next().await {
        WatchEvent::Failed {
            error, retry_in, ..
        } => {
            assert!(error.is_forbidden(), "{error}");
            assert!(retry_in >= Duration::from_secs(60));
        }
        other => panic!("{other:?}"),
    }
    assert!(fake.paths()[0].contains("resourceVersion=42"));
}

#[tokio::test(start_paused = true)]
async fn a_dropped_next_loses_no_listed_object() {
    let fake = Fake::default();
    fake.list("10", "", &["x", "y"]);
    let mut w = Watcher::new(fake.clone(), config(), None);
    assert!(matches!(w.next().await, WatchEvent::ListStart { .. }));
    assert!(matches!(w.next().await, WatchEvent::Listed(_)));
    // A select! that took another branch.
    tokio::select! {
        biased;
        _ = std::future::ready(()) => {}
        _ = w.next() => panic!("not polled"),
    }
    assert!(matches!(w.next().await, WatchEvent::Listed(o) if o["metadata"]["name"] == "y"));
    assert!(matches!(w.next().await, WatchEvent::ListEnd { .. }));
}

impl Fake {
    fn fail(&self, code: u16) -> &Self {
        let status = json!({"kind": "Status", "code": code, "message": "scripted failure"});
        self.0.lock().unwrap().lists.push_back(Response {
            code,
            body: serde_json::to_vec(&status).unwrap(),
            ..Default::default()
        });
        self
    }
}

/// The names of the objects listed until the list's end, and every other event on the way.
async fn read_list(w: &mut Watcher<Fake>) -> (Vec<String>, Vec<WatchEvent>) {
    let (mut names, mut others) = (Vec::new(), Vec::new());
    loop {
        match w.next().await {
            WatchEvent::Listed(o) => names.push(o["metadata"]["name"].as_str().unwrap().to_owned()),
            e @ WatchEvent::ListEnd { .. } => {
                others.push(e);
                return (names, others);
            }
            other => others.push(other),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_failed_later_page_is_asked_again_with_its_continue_token() {
    let fake = Fake::default();
    fake.list("10", "c1", &["x", "y"])
        .fail(500)
        .fail(429)
        .list("10", "c2", &["z", "u"])
        .list("10", "", &["v"]);
    let mut w = Watcher::new(fake.clone(), config(), None);
    let (names, others) = read_list(&mut w).await;
    // Every object once, one ListStart: the list went on from the page that failed.
    assert_eq!(names, ["x", "y", "z", "u", "v"]);
    assert_eq!(others[0], WatchEvent::ListStart { relist: false });
    assert!(
        matches!(&others[1], WatchEvent::Failed { verb: "list", .. }),
        "{others:?}"
    );
    assert!(matches!(&others[2], WatchEvent::Failed { failures: 2, .. }));
    assert_eq!(others[3], WatchEvent::ListEnd { rv: "10".into() });
    assert_eq!(others.len(), 4, "{others:?}");
    let paths = fake.paths();
    assert_eq!(
        paths,
        [
            "/api/v1/namespaces/a/events?limit=2",
            "/api/v1/namespaces/a/events?limit=2&continue=c1",
            "/api/v1/namespaces/a/events?limit=2&continue=c1",
            "/api/v1/namespaces/a/events?limit=2&continue=c1",
            "/api/v1/namespaces/a/events?limit=2&continue=c2",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_expired_continue_token_lists_again_from_the_first_page() {
    let fake = Fake::default();
    fake.list("10", "c1", &["x", "y"])
        .fail(410)
        .list("20", "", &["x", "y", "z"]);
    let mut w = Watcher::new(fake.clone(), config(), None);
    let (names, others) = read_list(&mut w).await;
    assert_eq!(names, ["x", "y", "x", "y", "z"]);
    assert_eq!(others[0], WatchEvent::ListStart { relist: false });
    assert!(matches!(
        &others[1],
        WatchEvent::Failed { verb: "list", .. }
    ));
    // No list had ended and no watch had begun: still the first list.
    assert_eq!(others[2], WatchEvent::ListStart { relist: false });
    assert_eq!(others[3], WatchEvent::ListEnd { rv: "20".into() });
    assert_eq!(fake.paths()[2], "/api/v1/namespaces/a/events?limit=2");
}

#[tokio::test(start_paused = true)]
async fn a_relist_whose_first_page_fails_lists_again_without_a_watch_from_the_expired_version() {
    let fake = Fake::default();
    fake.list("10", "", &["x"]);
    fake.watch(
        200,
        &[
            applied("x", "11"),
            json!({"type": "ERROR", "object": {"code": 410}}),
        ],
    );
    fake.fail(503).list("30", "", &["x"]);
    let mut w = Watcher::new(fake.clone(), config(), None);
    read_list(&mut w).await;
    assert!(matches!(w.next().await, WatchEvent::Applied { .. }));
    // The watch then says 410: a relist, whose first page fails, then lists again (not a
    // watch from the expired "10", unscripted here: it would hang and fail until the bound).
    let (names, others) = timeout(Duration::from_secs(600), read_list(&mut w))
        .await
        .expect("the relist ends");
    assert_eq!(names, ["x"]);
    assert_eq!(others[0], WatchEvent::ListStart { relist: true });
    assert!(matches!(
        &others[1],
        WatchEvent::Failed { verb: "list", .. }
    ));
    assert_eq!(others[2], WatchEvent::ListStart { relist: true });
    assert_eq!(others[3], WatchEvent::ListEnd { rv: "30".into() });
    // Two watches would mean one from the expired "10" after the failure.
    let watches = fake
        .paths()
        .iter()
        .filter(|p| p.contains("watch=1"))
        .count();
    assert_eq!(watches, 1, "{:?}", fake.paths());
}

#[tokio::test(start_paused = true)]
async fn a_first_list_whose_first_page_fails_is_still_the_first() {
    let fake = Fake::default();
    fake.fail(500).list("10", "", &["x"]);
    let mut w = Watcher::new(fake.clone(), config(), None);
    let (_, others) = read_list(&mut w).await;
    assert_eq!(others[0], WatchEvent::ListStart { relist: false });
    assert_eq!(others[2], WatchEvent::ListStart { relist: false });
}

#[tokio::test(start_paused = true)]
async fn a_quiet_scope_whose_version_expired_relists_at_once_without_a_failure() {
    let fake = Fake::default();
    fake.list("10", "", &["x"]);
    // The first watch from the list's "10" runs to its timeout without a line (a quiet
    // scope: no bookmarks without the watch cache); by the next one, "10" was compacted.
    fake.0
        .lock()
        .unwrap()
        .watches
        .push_back((200, vec![Vec::new()]));
    fake.watch(200, &[json!({"type": "ERROR", "object": {"code": 410}})]);
    fake.list("40", "", &["x"]);
    let mut w = Watcher::new(fake.clone(), config(), None);
    read_list(&mut w).await;
    assert_eq!(w.next().await, WatchEvent::Restarted);
    let before = Instant::now();
    assert_eq!(w.next().await, WatchEvent::ListStart { relist: true });
    assert_eq!(before.elapsed(), Duration::ZERO, "no pause");
}

/// A list answered with `shardInfo`, for the shard-selector tests.
fn sharded_list(fake: &Fake, rv: &str, echo: Option<&str>) {
    let mut meta = json!({"resourceVersion": rv});
    if let Some(selector) = echo {
        meta["shardInfo"] = json!({"selector": selector});
    }
    let body =
        json!({"metadata": meta, "items": [{"metadata": {"name": "x", "resourceVersion": "1"}}]});
    fake.0.lock().unwrap().lists.push_back(Response {
        code: 200,
        body: serde_json::to_vec(&body).unwrap(),
        ..Default::default()
    });
}

#[tokio::test(start_paused = true)]
async fn a_shard_selector_is_kept_on_the_watch_only_when_the_list_echoed_it() {
    const SEL: &str = "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')";
    for echoed in [true, false] {
        let fake = Fake::default();
        sharded_list(&fake, "10", echoed.then_some(SEL));
        let mut w = Watcher::new(fake.clone(), config().with_shard_selector(SEL), None);
        assert_eq!(w.server_shards(), None);
        loop {
            if let WatchEvent::ListEnd { .. } = w.next().await {
                break;
            }
        }
        assert_eq!(w.server_shards(), Some(echoed));
        // The watch opens (and hangs).
        let _ = timeout(Duration::from_secs(1), w.next()).await;
        let paths = fake.paths();
        assert!(
            paths[0].contains("&shardSelector=shardRange%28"),
            "{paths:?}"
        );
        assert!(paths[1].contains("watch=1"), "{paths:?}");
        assert_eq!(paths[1].contains("shardSelector="), echoed, "{paths:?}");
    }
    // Without a selector nothing is sent and nothing is said.
    let fake = Fake::default();
    sharded_list(&fake, "10", None);
    let mut w = Watcher::new(fake.clone(), config(), None);
    while !matches!(w.next().await, WatchEvent::ListEnd { .. }) {}
    assert_eq!(w.server_shards(), None);
    assert!(!fake.paths()[0].contains("shardSelector"));
}
