//! The scale simulator over HTTP: paging with continue tokens read at the first page's
//! resourceVersion, resourceVersion semantics, watches (changes in order, DELETED with the
//! deletion's resourceVersion, initial ADDED events), bookmarks, 410 Expired after a
//! compaction (a watch's ERROR line, a continue token, an exact list) and a watcher left
//! behind by the history window. (Checked against kube-apiserver by kevents-cli's
//! `scale_sim_real_apiserver` test.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use kevents_sim::scale::{NewEvent, ScaleConfig, ScaleSim, WriterConfig};
use serde_json::Value;

/// A GET over HTTP/1.1: the status and the body's lines (chunked or not), read until the
/// server ends the answer or `max_lines` lines.
fn get(addr: SocketAddr, path: &str, max_lines: usize) -> (u16, Vec<String>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut chunked = false;
    let mut length = None;
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if l == "transfer-encoding: chunked" {
            chunked = true;
        }
        if let Some(v) = l.strip_prefix("content-length: ") {
            length = v.parse::<usize>().ok();
        }
    }
    let mut body = Vec::new();
    let mut lines = Vec::new();
    if chunked {
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            let n = usize::from_str_radix(line.trim(), 16).unwrap();
            if n == 0 {
                break;
            }
            let mut chunk = vec![0; n + 2];
            r.read_exact(&mut chunk).unwrap();
            body.extend_from_slice(&chunk[..n]);
            while let Some(i) = body.iter().position(|&b| b == b'\n') {
                let l: Vec<u8> = body.drain(..=i).collect();
                lines.push(String::from_utf8(l).unwrap().trim_end().to_owned());
            }
            if lines.len() >= max_lines {
                break;
            }
        }
    } else {
        let mut b = vec![0; length.unwrap_or(0)];
        r.read_exact(&mut b).unwrap();
        lines.push(String::from_utf8(b).unwrap());
    }
    (status, lines)
}

fn json(s: &str) -> Value {
    serde_json::from_str(s).unwrap()
}

fn list(addr: SocketAddr, path: &str) -> (u16, Value) {
    let (code, lines) = get(addr, path, usize::MAX);
    (code, json(&lines[0]))
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn paged_lists_read_the_first_pages_resource_version() {
    let sim = ScaleSim::start(ScaleConfig::default()).unwrap();
    let ids = sim.preload(5, 1);
    sim.preload(3, 2); // ns-0 and ns-1 get more
    let (code, p1) = list(sim.addr(), "/api/v1/namespaces/ns-0/events?limit=2");
    assert_eq!(code, 200);
    assert_eq!(names(&p1).len(), 2);
    let rv = p1["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = p1["metadata"]["continue"].as_str().unwrap().to_owned();
    // Writes after the first page: a later page does not see them.
    sim.raise(ids[4], 5).unwrap();
    sim.create(&NewEvent::pod("ns-0", "zzz", 1, "Late", "late"))
        .unwrap();
    let mut all = names(&p1);
    let mut token = token;
    while !token.is_empty() {
        let (code, p) = list(
            sim.addr(),
            &format!(
                "/api/v1/namespaces/ns-0/events?limit=2&continue={}",
                encode(&token)
            ),
        );
        assert_eq!(code, 200, "{p}");
        assert_eq!(p["metadata"]["resourceVersion"], rv.as_str());
        for item in p["items"].as_array().unwrap() {
            assert_eq!(item["count"], 1, "the count as of the first page");
        }
        all.extend(names(&p));
        token = p["metadata"]["continue"].as_str().unwrap_or("").to_owned();
    }
    // ns-0: the 5 of the first preload and 1 of the second (i = 6), in key order.
    assert_eq!(all.len(), 6);
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);
    // The whole cluster, events.k8s.io/v1, unpaged: 9 live now, items without kind.
    let (code, l) = list(sim.addr(), "/apis/events.k8s.io/v1/events");
    assert_eq!(code, 200);
    assert_eq!(l["apiVersion"], "events.k8s.io/v1");
    assert_eq!(names(&l).len(), 9);
    assert!(l["items"][0].get("kind").is_none());
    assert!(l["metadata"].get("continue").is_none());
}

#[test]
fn resource_version_semantics_of_lists() {
    let sim = ScaleSim::start(ScaleConfig::default()).unwrap();
    let ids = sim.preload(3, 1);
    let before = sim.resource_version();
    sim.raise(ids[0], 1).unwrap();
    let now = sim.resource_version();
    let count0 = |l: &Value| l["items"][0]["count"].as_u64().unwrap();
    // Exact: the state then; a paged list from N without a match: exact too.
    let (code, l) = list(
        sim.addr(),
        &format!("/api/v1/events?resourceVersion={before}&resourceVersionMatch=Exact"),
    );
    assert_eq!((code, count0(&l)), (200, 1));
    assert_eq!(l["metadata"]["resourceVersion"], before.to_string());
    let (_, l) = list(
        sim.addr(),
        &format!("/api/v1/events?resourceVersion={before}&limit=10"),
    );
    assert_eq!(count0(&l), 1);
    // NotOlderThan, "0" and "": the newest.
    for q in [
        format!("resourceVersion={before}&resourceVersionMatch=NotOlderThan"),
        "resourceVersion=0".to_owned(),
        String::new(),
    ] {
        let (code, l) = list(sim.addr(), &format!("/api/v1/events?{q}"));
        assert_eq!((code, count0(&l)), (200, 2), "{q}");
        assert_eq!(l["metadata"]["resourceVersion"], now.to_string());
    }
    // Too new: 504 Timeout; a match without a resourceVersion: 400.
    let (code, s) = list(
        sim.addr(),
        &format!(
            "/api/v1/events?resourceVersion={}&resourceVersionMatch=Exact",
            now + 10
        ),
    );
    assert_eq!((code, s["reason"].as_str()), (504, Some("Timeout")));
    let (code, _) = list(sim.addr(), "/api/v1/events?resourceVersionMatch=Exact");
    assert_eq!(code, 400);
    // After a compaction: an exact list and a continue token from before it: 410 Expired.
    let (_, p1) = list(sim.addr(), "/api/v1/events?limit=1");
    let token = p1["metadata"]["continue"].as_str().unwrap().to_owned();
    sim.raise(ids[1], 1).unwrap();
    sim.compact(sim.resource_version());
    let (code, s) = list(
        sim.addr(),
        &format!("/api/v1/events?limit=1&continue={}", encode(&token)),
    );
    assert_eq!(
        (code, s["reason"].as_str(), s["code"].as_u64()),
        (410, Some("Expired"), Some(410))
    );
    let (code, s) = list(
        sim.addr(),
        &format!("/api/v1/events?resourceVersion={before}&resourceVersionMatch=Exact"),
    );
    assert_eq!((code, s["reason"].as_str()), (410, Some("Expired")));
    assert_eq!(sim.stats().gone, 2);
}

#[test]
fn watches_stream_changes_in_order_and_410_after_compaction() {
    let sim = ScaleSim::start(ScaleConfig::default()).unwrap();
    let ids = sim.preload(2, 1);
    let rv = sim.resource_version();
    let a = sim
        .create(&NewEvent::pod("ns-0", "a", 1, "R", "m"))
        .unwrap();
    sim.raise(ids[0], 2).unwrap();
    sim.delete(a).unwrap();
    sim.create(&NewEvent::pod("other", "b", 1, "R", "m"))
        .unwrap();
    let (code, lines) = get(
        sim.addr(),
        &format!(
            "/api/v1/namespaces/ns-0/events?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=1"
        ),
        usize::MAX,
    );
    assert_eq!(code, 200);
    let seen: Vec<(String, String, u64, u64)> = lines
        .iter()
        .map(|l| {
            let v = json(l);
            let o = &v["object"];
            (
                v["type"].as_str().unwrap().to_owned(),
                o["metadata"]["name"].as_str().unwrap().to_owned(),
                o["count"].as_u64().unwrap(),
                o["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .parse()
                    .unwrap(),
            )
        })
        .collect();
    let a_name = "a.0000000000000001".to_owned();
    assert_eq!(
        seen,
        vec![
            ("ADDED".into(), a_name.clone(), 1, rv + 1),
            (
                "MODIFIED".into(),
                "pod-0.0000000000000000".into(),
                3,
                rv + 2
            ),
            ("DELETED".into(), a_name, 1, rv + 3),
        ],
        "the other namespace's event is not in this watch"
    );
    // Without a resourceVersion: the current events as ADDED, with kind and apiVersion.
    let (_, lines) = get(
        sim.addr(),
        "/apis/events.k8s.io/v1/events?watch=1&timeoutSeconds=1",
        usize::MAX,
    );
    assert_eq!(lines.len(), 3);
    for l in &lines {
        let v = json(l);
        assert_eq!(v["type"], "ADDED");
        assert_eq!(v["object"]["apiVersion"], "events.k8s.io/v1");
    }
    // From before a compaction: 200, then an ERROR line with a 410 Expired Status.
    sim.compact(sim.resource_version());
    let (code, lines) = get(
        sim.addr(),
        &format!("/api/v1/events?watch=1&resourceVersion={rv}&timeoutSeconds=5"),
        usize::MAX,
    );
    assert_eq!(code, 200);
    assert_eq!(lines.len(), 1);
    let v = json(&lines[0]);
    assert_eq!(v["type"], "ERROR");
    assert_eq!(v["object"]["code"], 410);
    assert_eq!(v["object"]["reason"], "Expired");
}

#[test]
fn bookmarks_come_at_the_interval_and_a_watcher_left_behind_gets_410() {
    let sim = ScaleSim::start(
        ScaleConfig::default()
            .with_bookmark_interval(Some(Duration::from_secs(1)))
            .with_window(100),
    )
    .unwrap();
    let ids = sim.preload(10, 1);
    let rv = sim.resource_version();
    // A quiet watch of 5 s: bookmarks at 1, 2, 3 s (the last 2 s before the end).
    let (_, lines) = get(
        sim.addr(),
        &format!(
            "/api/v1/events?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=5"
        ),
        usize::MAX,
    );
    assert!((2..=4).contains(&lines.len()), "{lines:?}");
    for l in &lines {
        let v = json(l);
        assert_eq!(v["type"], "BOOKMARK");
        assert_eq!(v["object"]["metadata"]["resourceVersion"], rv.to_string());
    }
    // Without allowWatchBookmarks: none.
    let (_, lines) = get(
        sim.addr(),
        &format!("/api/v1/events?watch=1&resourceVersion={rv}&timeoutSeconds=2"),
        usize::MAX,
    );
    assert!(lines.is_empty(), "{lines:?}");
    // A writer at 2 000/s overruns the 100-change window: a watch from the start fails 410
    // once its position is compacted (here, at once).
    let writer = sim.start_writer(WriterConfig::new(2000, ids.clone()));
    std::thread::sleep(Duration::from_millis(500));
    let report = writer.stop();
    assert!(report.written >= 500, "{}", report.written);
    assert_eq!(report.log.len() as u64, report.written);
    let total: u32 = ids.iter().map(|&id| sim.count(id).unwrap()).sum();
    assert_eq!(
        u64::from(total),
        10 + report.written,
        "every write raised a count by one"
    );
    let (_, lines) = get(
        sim.addr(),
        &format!("/api/v1/events?watch=1&resourceVersion={rv}&timeoutSeconds=2"),
        1,
    );
    assert_eq!(json(&lines[0])["object"]["code"], 410);
}
