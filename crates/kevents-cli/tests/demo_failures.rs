//! `kevents demo` against broken, hostile and dying apiservers: it fails within seconds with
//! one clear line and a documented exit code, keeps moving (and says why writes wait) when
//! the cluster dies mid-run, always prints its counters once the story was played, escapes
//! whatever the server sends back, and never prints a credential.
//!
//! The servers are built here: a closed port, a listener that never answers, a tiny HTTP
//! responder (401 echoing the token, a small in-memory apiserver that can stop answering,
//! forge events or fail the read-back), and the simulator from `kevents-sim`.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A recognisable fake credential: it must never appear in any output.
const TOKEN: &str = "kevents-fake-token-7f3a9c1e5b";

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn all(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }

    fn assert_no_secret(&self) {
        assert!(
            !self.all().contains(TOKEN),
            "token printed:\n{}",
            self.all()
        );
        assert!(
            !self.all().contains("7f3a9c1e5b"),
            "part of the token printed:\n{}",
            self.all()
        );
    }

    fn assert_code(&self, code: i32) {
        assert_eq!(
            self.code,
            Some(code),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
    }
}

/// Runs `kevents args`; fails the test if it has not finished within `limit` (it is
/// killed). `on_stderr` sees every standard-error line as it comes.
fn kevents_with(args: &[&str], limit: Duration, mut on_stderr: impl FnMut(&str)) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kevents"))
        .args(args)
        // The fake apiservers here speak plain HTTP on loopback; the kubeconfigs carry a
        // token (to check it is never printed), which kevents otherwise refuses to send
        // over plain HTTP.
        .env("KEVENTS_ALLOW_CREDENTIALS_OVER_LOOPBACK_HTTP", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting kevents");
    let mut out = child.stdout.take().expect("stdout");
    let err = child.stderr.take().expect("stderr");
    let stdout = thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    thread::spawn(move || {
        for line in BufReader::new(err).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let mut stderr = String::new();
    let code = loop {
        while let Ok(line) = rx.try_recv() {
            on_stderr(&line);
            stderr.push_str(&line);
            stderr.push('\n');
        }
        if let Some(status) = child.try_wait().expect("waiting for kevents") {
            break status.code();
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "kevents {args:?} did not finish within {limit:?} (it hangs); stderr so far:\n{stderr}"
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    // The rest of standard error (the reader ends when the pipe closes).
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        on_stderr(&line);
        stderr.push_str(&line);
        stderr.push('\n');
    }
    Run {
        code,
        stdout: stdout.join().unwrap_or_default(),
        stderr,
    }
}

fn kevents(args: &[&str], limit: Duration) -> Run {
    kevents_with(args, limit, |_| {})
}

/// A kubeconfig file for `server` whose user is `user` (YAML lines under `user:`).
fn kubeconfig_with_user(server: &str, user: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let path = std::env::temp_dir().join(format!(
        "kevents-demo-test-{}-{}.kubeconfig",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\nusers:\n- name: u\n  user:\n{user}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
    );
    std::fs::write(&path, yaml).expect("writing a kubeconfig");
    path
}

fn kubeconfig(server: &str) -> PathBuf {
    kubeconfig_with_user(server, &format!("    token: {TOKEN}"))
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Accepts connections and never answers; counts them.
fn silent_server() -> (String, Arc<AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", l.local_addr().expect("addr"));
    let count = Arc::new(AtomicU64::new(0));
    let c = Arc::clone(&count);
    thread::spawn(move || {
        let mut held = Vec::new();
        for stream in l.incoming().flatten() {
            c.fetch_add(1, Ordering::SeqCst);
            held.push(stream);
        }
    });
    (url, count)
}

struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut r = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_owned();
    let path = parts.next()?.to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

/// `None`: never answer (the connection is held open).
type Handler = dyn Fn(&Request) -> Option<(u16, String)> + Send + Sync;

/// An HTTP/1.1 server answering every request with `handler` (one connection per request).
fn responder(handler: Arc<Handler>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", l.local_addr().expect("addr"));
    thread::spawn(move || {
        for stream in l.incoming().flatten() {
            let handler = Arc::clone(&handler);
            thread::spawn(move || {
                let mut stream = stream;
                let Some(req) = read_request(&stream) else {
                    return;
                };
                match handler(&req) {
                    Some((code, body)) => {
                        let _ = write!(
                            stream,
                            "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                    None => thread::sleep(Duration::from_secs(3600)),
                }
            });
        }
    });
    url
}

fn status(code: u16, reason: &str, message: &str) -> String {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
    .to_string()
}

/// A small in-memory apiserver for the demo: `/version`, event lists, creates (a nameless
/// event is refused with 422, as the real one does) and patches (merged key by key).
#[derive(Default)]
struct MiniApiserver {
    events: Mutex<BTreeMap<String, Value>>,
    writes: AtomicU64,
    /// After this many event writes, nothing is answered any more.
    silent_after: Option<u64>,
    /// Lists fail with 500 once an event was stored.
    fail_read_back: bool,
    /// Extra events every list returns (another tenant's, or the server's own forgeries).
    /// Once an event is stored, a forged event's name takes the stored event's nanosecond
    /// suffix (the demo's run identifier), as a forger that copies the run would.
    forged: Vec<Value>,
    /// Named event writes are refused with 403 (the probe's nameless create still gets 422).
    forbid_writes: bool,
    gone_silent: AtomicBool,
}

impl MiniApiserver {
    fn handle(&self, req: &Request) -> Option<(u16, String)> {
        if self.gone_silent.load(Ordering::SeqCst) {
            return None;
        }
        let path = req.path.split('?').next().unwrap_or_default();
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        match (req.method.as_str(), segs.as_slice()) {
            ("GET", ["version"]) => Some((
                200,
                json!({"major": "1", "minor": "20", "gitVersion": "v1.20.2-mini"}).to_string(),
            )),
            ("GET", ["api", "v1", "namespaces", _, "events"]) => {
                let events = self.events.lock().unwrap_or_else(|p| p.into_inner());
                if self.fail_read_back && !events.is_empty() {
                    return Some((500, "upstream exploded\r\n\x1b[31mred".into()));
                }
                let mut items: Vec<Value> = events.values().cloned().collect();
                let suffix = events
                    .keys()
                    .next()
                    .and_then(|n| n.rsplit_once('.'))
                    .map(|(_, s)| s.to_owned());
                items.extend(self.forged.iter().cloned().map(|mut f| {
                    if let Some(s) = &suffix {
                        f["metadata"]["name"] = json!(format!("forged.{s}"));
                    }
                    f
                }));
                Some((
                    200,
                    json!({"kind": "EventList", "apiVersion": "v1", "metadata": {}, "items": items})
                        .to_string(),
                ))
            }
            ("POST", ["api", "v1", "namespaces", _, "events"]) => {
                let mut e: Value = serde_json::from_slice(&req.body).ok()?;
                let name = e["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                if name.is_empty() {
                    return Some((422, status(422, "Invalid", "metadata.name: Required value")));
                }
                if self.forbid_writes {
                    return Some((
                        403,
                        status(403, "Forbidden", "events is forbidden: User cannot create"),
                    ));
                }
                if self.count_write() {
                    return None;
                }
                // As the apiserver: a name taken is refused.
                if self
                    .events
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .contains_key(&name)
                {
                    return Some((
                        409,
                        status(
                            409,
                            "AlreadyExists",
                            &format!("events \"{name}\" already exists"),
                        ),
                    ));
                }
                e["kind"] = json!("Event");
                e["apiVersion"] = json!("v1");
                e["metadata"]["resourceVersion"] = json!("1");
                self.events
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(name, e.clone());
                Some((201, e.to_string()))
            }
            ("PATCH", ["api", "v1", "namespaces", _, "events", name]) => {
                if self.count_write() {
                    return None;
                }
                let patch: Value = serde_json::from_slice(&req.body).ok()?;
                let mut events = self.events.lock().unwrap_or_else(|p| p.into_inner());
                let Some(e) = events.get_mut(*name) else {
                    return Some((404, status(404, "NotFound", "not found")));
                };
                if let (Some(obj), Some(p)) = (e.as_object_mut(), patch.as_object()) {
                    for (k, v) in p {
                        obj.insert(k.clone(), v.clone());
                    }
                }
                Some((200, e.to_string()))
            }
            _ => Some((404, status(404, "NotFound", "the server could not find it"))),
        }
    }

    /// Counts one event write; true when the server has gone silent.
    fn count_write(&self) -> bool {
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if self.silent_after.is_some_and(|limit| n > limit) {
            self.gone_silent.store(true, Ordering::SeqCst);
            return true;
        }
        false
    }

    fn start(self) -> (String, Arc<MiniApiserver>) {
        let server = Arc::new(self);
        let s = Arc::clone(&server);
        let url = responder(Arc::new(move |req: &Request| s.handle(req)));
        (url, server)
    }
}

/// The counters block: `  name   value` lines after "pipeline counters".
fn counters(stdout: &str) -> BTreeMap<String, u64> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("pipeline counters"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| {
            let (name, value) = l.trim().rsplit_once(' ')?;
            Some((name.trim().to_owned(), value.parse().ok()?))
        })
        .collect()
}

const QUICK: Duration = Duration::from_secs(60);

#[test]
fn closed_port_fails_within_seconds_with_connection_refused_and_no_secret() {
    let kc = kubeconfig(&format!("http://127.0.0.1:{}", closed_port()));
    let run = kevents(
        &["demo", "--kubeconfig", path_str(&kc), "--pace-ms", "0"],
        QUICK,
    );
    run.assert_code(3);
    assert!(run.stderr.contains("connection refused"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    run.assert_no_secret();
}

#[test]
fn silent_server_fails_within_seconds_with_a_timeout() {
    let (url, connections) = silent_server();
    let kc = kubeconfig(&url);
    let run = kevents(
        &["demo", "--kubeconfig", path_str(&kc), "--pace-ms", "0"],
        QUICK,
    );
    run.assert_code(3);
    assert!(
        run.stderr.contains("no answer within 5 s"),
        "{}",
        run.stderr
    );
    assert!(connections.load(Ordering::SeqCst) >= 1);
    run.assert_no_secret();
}

#[test]
fn unauthorized_server_echoing_the_token_cannot_make_it_print() {
    // A hostile (or merely chatty) server that puts the credential it received, and an
    // escape sequence, in its 401 answer.
    let url = responder(Arc::new(|req: &Request| {
        let auth = req.header("authorization").unwrap_or_default().to_owned();
        Some((
            401,
            status(
                401,
                "Unauthorized",
                &format!("token rejected: {auth}\u{1b}[2J\r\nkevents: all good"),
            ),
        ))
    }));
    let kc = kubeconfig(&url);
    let run = kevents(
        &["demo", "--kubeconfig", path_str(&kc), "--pace-ms", "0"],
        QUICK,
    );
    run.assert_code(3);
    assert!(run.stderr.contains("401 Unauthorized"), "{}", run.stderr);
    assert!(run.stderr.contains("[REDACTED]"), "{}", run.stderr);
    assert!(!run.all().contains('\u{1b}'), "{:?}", run.all());
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    run.assert_no_secret();
}

#[test]
fn untrusted_certificate_is_a_tls_failure() {
    let sim = kevents_sim::Simulator::start_blocking(kevents_sim::SimConfig {
        tls: true,
        ..kevents_sim::SimConfig::default()
    })
    .expect("simulator");
    // No certificate-authority: the simulator's self-signed certificate is not trusted.
    let kc = kubeconfig(&sim.url());
    let run = kevents(
        &["demo", "--kubeconfig", path_str(&kc), "--pace-ms", "0"],
        QUICK,
    );
    run.assert_code(3);
    assert!(run.stderr.contains("TLS: "), "{}", run.stderr);
    assert!(sim.events().is_empty());
    run.assert_no_secret();
}

#[test]
fn forbidden_user_is_refused_before_anything_is_written() {
    let sim = kevents_sim::Simulator::start_blocking(kevents_sim::SimConfig {
        auth: Some(kevents_sim::SimAuth::random()),
        ..kevents_sim::SimConfig::default()
    })
    .expect("simulator");
    let nobody = sim.nobody_token().expect("auth on").to_owned();
    let kc = std::env::temp_dir().join(format!(
        "kevents-demo-nobody-{}.kubeconfig",
        std::process::id()
    ));
    std::fs::write(&kc, sim.kubeconfig(Some(&nobody), "default")).expect("kubeconfig");
    let run = kevents(
        &[
            "demo",
            "--kubeconfig",
            path_str(&kc),
            "--namespace",
            "team-a",
            "--pace-ms",
            "0",
        ],
        QUICK,
    );
    run.assert_code(3);
    assert!(run.stderr.contains("403 Forbidden"), "{}", run.stderr);
    assert!(run.stderr.contains("team-a"), "{}", run.stderr);
    assert!(sim.events().is_empty());
    assert!(
        !run.all().contains(&nobody),
        "token printed:\n{}",
        run.all()
    );
}

#[test]
fn missing_token_file_is_a_configuration_error_and_nothing_is_sent() {
    let (url, connections) = silent_server();
    let missing = std::env::temp_dir().join("kevents-no-such-dir/token");
    let kc = kubeconfig_with_user(&url, &format!("    tokenFile: {}", missing.display()));
    let run = kevents(
        &["demo", "--kubeconfig", path_str(&kc), "--pace-ms", "0"],
        QUICK,
    );
    run.assert_code(2);
    assert!(
        run.stderr.contains("token file") && run.stderr.contains("kevents-no-such-dir/token"),
        "{}",
        run.stderr
    );
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}

#[test]
fn invalid_namespace_is_a_configuration_error_and_nothing_is_sent() {
    let (url, connections) = silent_server();
    let kc = kubeconfig(&url);
    let run = kevents(
        &[
            "demo",
            "--kubeconfig",
            path_str(&kc),
            "--namespace",
            "Bad_NS",
            "--pace-ms",
            "0",
        ],
        QUICK,
    );
    run.assert_code(2);
    assert!(
        run.stderr.contains("invalid --namespace \"Bad_NS\"") && run.stderr.contains("DNS-1123"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert_eq!(connections.load(Ordering::SeqCst), 0);

    // The same against the embedded simulator.
    let run = kevents(&["demo", "--namespace", "Bad_NS", "--pace-ms", "0"], QUICK);
    run.assert_code(2);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

#[test]
fn cluster_dying_mid_run_keeps_moving_explains_and_prints_the_counters() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let sim = kevents_sim::Simulator::start_blocking(kevents_sim::SimConfig::default())
        .expect("simulator");
    let kc = std::env::temp_dir().join(format!(
        "kevents-demo-dying-{}.kubeconfig",
        std::process::id()
    ));
    std::fs::write(&kc, sim.kubeconfig(None, "demo")).expect("kubeconfig");
    let mut killed = false;
    let run = kevents_with(
        &[
            "demo",
            "--kubeconfig",
            path_str(&kc),
            "--namespace",
            "demo",
            "--pace-ms",
            "100",
        ],
        Duration::from_secs(120),
        |line| {
            // Five simulated minutes in, the apiserver goes away for good.
            if !killed && line.starts_with("[05:00") {
                rt.block_on(sim.refuse_connections(None));
                killed = true;
            }
        },
    );
    assert!(killed, "no progress line seen:\n{}", run.stderr);
    run.assert_code(4);
    assert!(run.stderr.contains("writes waiting:"), "{}", run.stderr);
    assert!(run.stderr.contains("connection refused"), "{}", run.stderr);
    assert!(
        run.stderr.contains("the story was not fully written"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains("reading the events back from") && run.stdout.contains("failed"),
        "{}",
        run.stdout
    );
    let c = counters(&run.stdout);
    assert_eq!(c.get("emitted"), Some(&596), "{c:?}\n{}", run.stdout);
    assert!(c.get("failed").is_some_and(|f| *f > 0), "{c:?}");
    assert!(
        run.stdout
            .contains("accounting: every occurrence is accounted for"),
        "{}",
        run.stdout
    );
}

#[test]
fn server_going_silent_mid_run_cannot_hang_the_demo() {
    let (url, server) = MiniApiserver {
        silent_after: Some(20),
        ..MiniApiserver::default()
    }
    .start();
    let kc = kubeconfig(&url);
    let run = kevents(
        &[
            "demo",
            "--kubeconfig",
            path_str(&kc),
            "--namespace",
            "demo",
            "--pace-ms",
            "0",
        ],
        Duration::from_secs(120),
    );
    assert!(server.gone_silent.load(Ordering::SeqCst));
    run.assert_code(4);
    assert!(run.stderr.contains("writes waiting:"), "{}", run.stderr);
    assert!(run.stderr.contains("unanswered"), "{}", run.stderr);
    let c = counters(&run.stdout);
    assert_eq!(c.get("emitted"), Some(&596), "{c:?}\n{}", run.stdout);
    assert!(c.get("failed: abandoned").is_some_and(|a| *a > 0), "{c:?}");
    assert!(
        run.stdout
            .contains("accounting: every occurrence is accounted for"),
        "{}",
        run.stdout
    );
    run.assert_no_secret();
}

#[test]
fn failed_read_back_still_prints_the_counters() {
    let (url, _server) = MiniApiserver {
        fail_read_back: true,
        ..MiniApiserver::default()
    }
    .start();
    let kc = kubeconfig(&url);
    let run = kevents(
        &[
            "demo",
            "--kubeconfig",
            path_str(&kc),
            "--namespace",
            "demo",
            "--pace-ms",
            "0",
        ],
        QUICK,
    );
    run.assert_code(5);
    assert!(
        run.stderr.contains("reading the events back") && run.stderr.contains("500"),
        "{}",
        run.stderr
    );
    let c = counters(&run.stdout);
    assert_eq!(c.get("emitted"), Some(&596), "{c:?}\n{}", run.stdout);
    assert_eq!(c.get("failed"), Some(&0), "{c:?}");
    assert!(!c.contains_key("stored events"), "{c:?}");
    assert!(
        run.stdout
            .contains("accounting: every occurrence is accounted for"),
        "{}",
        run.stdout
    );
    assert!(!run.all().contains('\u{1b}'), "{:?}", run.all());
    run.assert_no_secret();
}

#[test]
fn events_read_back_cannot_forge_table_rows_or_reach_the_terminal() {
    let now = {
        use kevents_core::Clock as _;
        kevents_core::SystemClock.now().unix_secs()
    };
    let ts = |secs: i64| kevents_core::Time::from_unix_secs(secs).to_rfc3339();
    let forged = json!({
        "kind": "Event", "apiVersion": "v1",
        "metadata": {"name": "forged.1", "namespace": "demo"},
        "involvedObject": {"kind": "Pod\u{1b}]0;pwned\u{7}", "name": "web", "namespace": "demo"},
        "reason": "BackOff\r\n1s          Normal    Healthy   pod/web   1   all good",
        "message": format!("\u{1b}[2J\u{1b}[Hscreen cleared\nforged row {}\u{9b}31m", "x".repeat(400)),
        "source": {"component": "kubelet"},
        "firstTimestamp": ts(now - 10), "lastTimestamp": ts(now - 5),
        "count": 1, "type": "Warning\u{7f}",
    });
    let (url, _server) = MiniApiserver {
        forged: vec![forged],
        ..MiniApiserver::default()
    }
    .start();
    let kc = kubeconfig(&url);
    let run = kevents(
        &[
            "demo",
            "--kubeconfig",
            path_str(&kc),
            "--namespace",
            "demo",
            "--pace-ms",
            "0",
        ],
        QUICK,
    );
    run.assert_code(0);
    let out = run.all();
    assert!(
        !out.chars().any(|c| c != '\n' && c.is_control()),
        "a control character reached the terminal: {out:?}"
    );
    let rows: Vec<&str> = run
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("LAST SEEN"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    let c = counters(&run.stdout);
    assert_eq!(
        Some(&(rows.len() as u64)),
        c.get("stored events"),
        "{}",
        run.stdout
    );
    let forged_row = rows
        .iter()
        .find(|r| r.contains("BackOff\\r\\n1s"))
        .unwrap_or_else(|| panic!("forged row not shown escaped:\n{}", run.stdout));
    assert!(
        forged_row.contains("\\u{1b}[2J\\u{1b}[Hscreen cleared\\nforged row"),
        "{forged_row}"
    );
    assert!(
        forged_row.contains("pod\\u{1b}]0;pwned\\u{7}/web"),
        "{forged_row}"
    );
    assert!(forged_row.ends_with('…'), "{forged_row}");
    assert!(!rows.iter().any(|r| r.starts_with("1s ")), "{}", run.stdout);
    run.assert_no_secret();
}

#[test]
fn bench_apiserver_probes_before_it_runs() {
    let kc = kubeconfig(&format!("http://127.0.0.1:{}", closed_port()));
    let run = kevents(
        &["bench", "apiserver", "--kubeconfig", path_str(&kc)],
        QUICK,
    );
    run.assert_code(3);
    assert!(run.stderr.contains("connection refused"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    run.assert_no_secret();

    let (url, connections) = silent_server();
    let kc = kubeconfig(&url);
    let run = kevents(
        &[
            "bench",
            "apiserver",
            "--kubeconfig",
            path_str(&kc),
            "--namespace",
            "Bad_NS",
        ],
        QUICK,
    );
    run.assert_code(2);
    assert!(run.stderr.contains("invalid --namespace"), "{}", run.stderr);
    assert_eq!(connections.load(Ordering::SeqCst), 0);
    let run = kevents(
        &["bench", "apiserver", "--kubeconfig", path_str(&kc)],
        QUICK,
    );
    run.assert_code(3);
    assert!(
        run.stderr.contains("no answer within 5 s"),
        "{}",
        run.stderr
    );
    run.assert_no_secret();
}

// --- issue 27 --------------------------------------------------------------------------------

/// Rows of the events table.
fn table_rows(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("LAST SEEN"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

#[test]
fn repeated_runs_into_one_namespace_never_collide_and_show_their_own_events() {
    let (url, server) = MiniApiserver::default().start();
    let kc = kubeconfig(&url);
    let mut runs = Vec::new();
    for _ in 0..3 {
        let run = kevents(
            &[
                "demo",
                "--kubeconfig",
                path_str(&kc),
                "--namespace",
                "demo",
                "--pace-ms",
                "0",
            ],
            QUICK,
        );
        run.assert_code(0);
        let c = counters(&run.stdout);
        assert_eq!(c.get("failed: rejected"), Some(&0), "{}", run.stdout);
        assert_eq!(c.get("stored events"), Some(&38), "{}", run.stdout);
        assert_eq!(table_rows(&run.stdout).len(), 38, "{}", run.stdout);
        assert!(!run.all().contains("AlreadyExists"), "{}", run.all());
        runs.push(run);
    }
    // Every run's events are on the server, none overwritten.
    assert_eq!(
        server
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len(),
        3 * 38
    );
    // Each run says its identifier, and they differ.
    let ids: std::collections::BTreeSet<String> = runs
        .iter()
        .map(|r| {
            let line = r.stdout.lines().next().unwrap_or_default();
            line.split(", run ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .unwrap_or_else(|| panic!("no run identifier in {line}"))
                .to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
}

#[test]
fn a_token_file_that_blocks_is_a_configuration_error_within_seconds() {
    let (url, connections) = silent_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("token");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    let kc = kubeconfig_with_user(&url, &format!("    tokenFile: {}", fifo.display()));
    let started = Instant::now();
    let run = kevents(
        &["demo", "--kubeconfig", path_str(&kc), "--pace-ms", "0"],
        Duration::from_secs(30),
    );
    run.assert_code(2);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(
        run.stderr.contains("did not finish") && run.stderr.contains(&fifo.display().to_string()),
        "{}",
        run.stderr
    );
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}

/// A kubeconfig whose user runs `script` (bash) as its exec credential plugin.
fn exec_kubeconfig(server: &str, dir: &Path, script: &str) -> PathBuf {
    let plugin = dir.join("plugin.sh");
    std::fs::write(&plugin, format!("#!/bin/bash\n{script}\n")).expect("plugin");
    kubeconfig_with_user(
        server,
        &format!(
            "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n      command: /bin/bash\n      args: [\"{}\"]",
            plugin.display()
        ),
    )
}

#[test]
fn exec_plugin_problems_are_configuration_errors_that_name_the_plugin() {
    let (url, connections) = silent_server();
    let dir = tempfile::tempdir().expect("tempdir");
    // Missing.
    let kc = kubeconfig_with_user(
        &url,
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      interactiveMode: Never\n      command: kevents-no-such-plugin-27",
    );
    let run = kevents(
        &["demo", "--kubeconfig", path_str(&kc), "--pace-ms", "0"],
        QUICK,
    );
    run.assert_code(2);
    assert!(
        run.stderr
            .contains("exec credential plugin kevents-no-such-plugin-27 not found"),
        "{}",
        run.stderr
    );
    // Failing, a refresh token in its stderr: named, the stderr nowhere in the output.
    let kc = exec_kubeconfig(
        &url,
        dir.path(),
        "echo 'refresh_token=rt-7f3a9c1e5b-secret expired' >&2; exit 1",
    );
    let run = kevents(
        &["demo", "--kubeconfig", path_str(&kc), "--pace-ms", "0"],
        QUICK,
    );
    run.assert_code(2);
    assert!(
        run.stderr
            .contains("exec credential plugin /bin/bash failed (exit status: 1)"),
        "{}",
        run.stderr
    );
    assert!(!run.all().contains("rt-7f3a9c1e5b"), "{}", run.all());
    // Hanging: killed at its timeout (30 s), and said so.
    let kc = exec_kubeconfig(&url, dir.path(), "sleep 120");
    let run = kevents(
        &["demo", "--kubeconfig", path_str(&kc), "--pace-ms", "0"],
        Duration::from_secs(90),
    );
    run.assert_code(2);
    assert!(
        run.stderr
            .contains("exec credential plugin /bin/bash did not finish within 30 s"),
        "{}",
        run.stderr
    );
    assert_eq!(connections.load(Ordering::SeqCst), 0);
}

#[test]
fn kubeconfig_errors_name_the_file_once() {
    let (url, _) = silent_server();
    let dir = tempfile::tempdir().expect("tempdir");
    let missing_ca = dir.path().join("no-such-ca.crt");
    let cases = [
        (kubeconfig(&url), vec!["--context", "nope"]),
        (
            kubeconfig_with_user(
                &url,
                &format!(
                    "    token: {TOKEN}\n    exec: {{apiVersion: client.authentication.k8s.io/v1beta1, command: x}}"
                ),
            ),
            vec![],
        ),
        (
            {
                let p = dir.path().join("ca.kubeconfig");
                std::fs::write(
                    &p,
                    format!(
                        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\n    certificate-authority: {}\ncontexts:\n- name: c\n  context: {{cluster: c}}\ncurrent-context: c\n",
                        missing_ca.display()
                    ),
                )
                .expect("kubeconfig");
                p
            },
            vec![],
        ),
    ];
    for (kc, extra) in cases {
        let mut args = vec!["demo", "--kubeconfig", path_str(&kc), "--pace-ms", "0"];
        args.extend(extra);
        let run = kevents(&args, QUICK);
        run.assert_code(2);
        let name = format!("kubeconfig {}", kc.display());
        assert_eq!(run.stderr.matches(&name).count(), 1, "{}", run.stderr);
        run.assert_no_secret();
    }
}

#[test]
fn a_refused_write_is_not_said_to_be_retried() {
    let (url, _server) = MiniApiserver {
        forbid_writes: true,
        ..MiniApiserver::default()
    }
    .start();
    let kc = kubeconfig(&url);
    let run = kevents(
        &[
            "demo",
            "--kubeconfig",
            path_str(&kc),
            "--namespace",
            "demo",
            "--pace-ms",
            "0",
        ],
        QUICK,
    );
    run.assert_code(4);
    let notes: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("writes waiting:") && l.contains("403"))
        .collect();
    assert!(!notes.is_empty(), "{}", run.stderr);
    for n in notes {
        assert!(!n.contains("retrying"), "{n}");
        assert!(n.contains("not retried"), "{n}");
    }
    let c = counters(&run.stdout);
    assert_eq!(c.get("retries"), Some(&0), "{c:?}");
}

/// Issue 36: a CR or LF inside a bearer token (inline, or in a token file) is an invalid
/// token named by where it comes from, at load (exit 2, nothing sent), never printed; it was
/// reported as a TLS problem (inline) or failed at the first request (a token file).
#[test]
fn a_line_break_inside_a_token_is_an_invalid_token_and_nothing_is_sent() {
    let (url, connections) = silent_server();
    let dir = std::env::temp_dir().join(format!("kevents-demo-crlf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "s3cr3t-part1\nsecond-line\n").expect("token file");
    for (user, origin) in [
        (
            "    token: \"s3cr3t-part1\\r\\nsecond-line\"".to_owned(),
            "users[\"u\"].user.token".to_owned(),
        ),
        (
            format!("    tokenFile: {}", token_file.display()),
            format!("token file {}", token_file.display()),
        ),
    ] {
        let kc = kubeconfig_with_user(&url, &user);
        let run = kevents(
            &["demo", "--kubeconfig", path_str(&kc), "--pace-ms", "0"],
            QUICK,
        );
        run.assert_code(2);
        assert!(
            run.stderr.contains(&origin)
                && run
                    .stderr
                    .contains("invalid bearer token: it contains a line break"),
            "{}",
            run.stderr
        );
        assert!(!run.stderr.contains("TLS"), "{}", run.stderr);
        assert!(
            !run.stderr.contains("s3cr3t-part1") && !run.stderr.contains("second-line"),
            "{}",
            run.stderr
        );
    }
    assert_eq!(connections.load(Ordering::SeqCst), 0);
    let _ = std::fs::remove_dir_all(&dir);
}
