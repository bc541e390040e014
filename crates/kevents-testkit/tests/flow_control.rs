//! kevents-sim's API Priority and Fairness (`kevents_sim::flow_control`) checked against
//! kube-apiserver's: the same load of event creates is driven against a real apiserver
//! started with `--max-requests-inflight=1 --max-mutating-requests-inflight=1` (so
//! `global-default` has 1 seat) and against the HTTP simulator configured alike, and what
//! must agree is asserted on both.
//!
//! The load: every request sends its headers and holds back its body, so a request that is
//! given a seat keeps it until the test releases the bodies (the server reads the body only
//! once APF let the request in), while the others wait in their queues; a refused request
//! is answered at once. User A sends 300 creates with user B's 45 interleaved (nothing may be
//! refused: A has 1 seat and 299 waiting in its hand of 6 queues of 50), then A sends 20
//! more (beyond A's capacity of 301: refused at once, 429; on 1.36, told not to lend its
//! seat, the level may still borrow up to 3, so 1.36 may refuse as few as 17), then every
//! body is sent and the order in which the creates are answered shows whether fair queuing
//! served B beside A's flood (asserted on 1.20.2 and the simulator; printed on 1.36.3,
//! where it depends on timing: see `check`).
//!
//! On the real server users A and B are the admin impersonating `kevents-flow-a` and
//! `kevents-flow-b` (bound to `cluster-admin`, outside `system:masters`: their requests go to
//! `global-default`, not `exempt`); on the simulator they are tokens of their own.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kevents_sim::flow_control::{ApfVersion, FlowControl};
use kevents_sim::{SimAuth, SimConfig, Simulator};
use kevents_testkit::RealApiserver;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

const USERS: [&str; 2] = ["kevents-flow-a", "kevents-flow-b"];
const FIRST_A: usize = 300;
const B_WRITES: usize = 45;
const MORE_A: usize = 20;

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Where the load goes and what the level holds now.
enum Server {
    Real {
        server: RealApiserver,
        tls: tokio_rustls::TlsConnector,
    },
    Sim {
        sim: kevents_sim::SimHandle,
        tokens: BTreeMap<&'static str, String>,
    },
}

impl Server {
    fn addr(&self) -> String {
        let url = match self {
            Server::Real { server, .. } => server.url.clone(),
            Server::Sim { sim, .. } => sim.url(),
        };
        url.split("://").nth(1).unwrap_or_default().to_owned()
    }

    async fn connect(&self) -> Box<dyn Io> {
        let tcp = TcpStream::connect(self.addr()).await.expect("connect");
        tcp.set_nodelay(true).expect("nodelay");
        match self {
            Server::Real { tls, .. } => {
                let name = rustls_pki_types::ServerName::try_from("127.0.0.1").expect("name");
                Box::new(tls.connect(name, tcp).await.expect("TLS handshake"))
            }
            Server::Sim { .. } => Box::new(tcp),
        }
    }

    fn auth(&self, user: &str) -> String {
        match self {
            Server::Real { server, .. } => format!(
                "Authorization: Bearer {}\r\nImpersonate-User: {user}\r\n",
                server.admin_token
            ),
            Server::Sim { tokens, .. } => format!("Authorization: Bearer {}\r\n", tokens[user]),
        }
    }

    /// Requests of `global-default` waiting and executing now.
    async fn in_level(&self) -> usize {
        match self {
            Server::Sim { sim, .. } => {
                let f = sim.flow_control().expect("flow control configured");
                f.waiting() + f.seats_in_use() as usize
            }
            Server::Real { .. } => {
                let dump = self
                    .admin_get("/debug/api_priority_and_fairness/dump_priority_levels")
                    .await;
                let row = dump
                    .lines()
                    .find(|l| l.starts_with("global-default,"))
                    .unwrap_or_else(|| panic!("no global-default in {dump}"));
                let cols: Vec<&str> = row.split(',').map(str::trim).collect();
                let n = |i: usize| cols[i].parse::<usize>().expect("count");
                n(4) + n(5)
            }
        }
    }

    /// The fewest and most seats `global-default` may have: 1.36's lower and upper limits
    /// (it lends and borrows seats), 1.20's limit; the simulator's seats.
    async fn seat_range(&self) -> (usize, usize) {
        match self {
            Server::Sim { sim, .. } => {
                let seats = sim
                    .flow_control()
                    .expect("flow control configured")
                    .config()
                    .seats() as usize;
                (seats, seats)
            }
            Server::Real { .. } => {
                let metrics = self.admin_get("/metrics").await;
                let find = |name: &str| {
                    metrics.lines().find_map(|l| {
                        l.strip_prefix(&format!("{name}{{priority_level=\"global-default\"}} "))
                            .and_then(|v| v.trim().parse::<f64>().ok())
                    })
                };
                let limit = find("apiserver_flowcontrol_request_concurrency_limit");
                let lower = find("apiserver_flowcontrol_lower_limit_seats").or(limit);
                let upper = find("apiserver_flowcontrol_upper_limit_seats").or(limit);
                match (lower, upper) {
                    (Some(l), Some(u)) => (l as usize, u as usize),
                    _ => panic!(
                        "no concurrency limit metric for global-default in {}",
                        metrics.get(..300).unwrap_or(&metrics)
                    ),
                }
            }
        }
    }

    /// 1.36's current limit of `global-default` (the real server only).
    async fn current_seats(&self) -> usize {
        let metrics = self.admin_get("/metrics").await;
        metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix(
                    "apiserver_flowcontrol_current_limit_seats{priority_level=\"global-default\"} ",
                )
                .and_then(|v| v.trim().parse::<f64>().ok())
            })
            .unwrap_or(0.0) as usize
    }

    async fn admin_get(&self, path: &str) -> String {
        let Server::Real { server, .. } = self else {
            unreachable!("only the real server is asked")
        };
        let mut io = self.connect().await;
        // HTTP/1.0: the answer is not chunked, so its lines arrive whole.
        let req = format!(
            "GET {path} HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
            server.admin_token
        );
        io.write_all(req.as_bytes()).await.expect("write");
        let mut out = Vec::new();
        let _ = io.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// One request's fate: answered before its body was sent (refused) or after.
#[derive(Debug)]
struct Answer {
    user: &'static str,
    early: bool,
    head: String,
    body: String,
}

fn body(i: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Event","metadata":{{"name":"flow-{i}","namespace":"default"}},"involvedObject":{{"kind":"Pod","name":"web","namespace":"default"}},"reason":"Flow","message":"m","type":"Normal","source":{{"component":"flow"}}}}"#
    )
}

/// Sends a create's headers, then waits for `release` before sending its body; reports the
/// answer (and whether it came first) on `answers`.
async fn start_request(
    server: &Server,
    user: &'static str,
    i: usize,
    mut release: watch::Receiver<bool>,
    answers: mpsc::UnboundedSender<Answer>,
) {
    let mut io = server.connect().await;
    let body = body(i);
    let head = format!(
        "POST /api/v1/namespaces/default/events HTTP/1.1\r\nHost: x\r\n{}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.auth(user),
        body.len()
    );
    io.write_all(head.as_bytes()).await.expect("write headers");
    io.flush().await.expect("flush");
    tokio::spawn(async move {
        let (mut rd, mut wr) = tokio::io::split(io);
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let early = tokio::select! {
            r = rd.read(&mut chunk) => {
                let n = r.unwrap_or(0);
                buf.extend_from_slice(&chunk[..n]);
                true
            }
            _ = release.wait_for(|r| *r) => false,
        };
        if !early {
            let _ = wr.write_all(body.as_bytes()).await;
            let _ = wr.flush().await;
        }
        let (head, body) = read_answer(&mut rd, buf).await;
        let _ = answers.send(Answer {
            user,
            early,
            head,
            body,
        });
    });
}

/// Reads an answer's head and its `Content-Length` bytes of body (`buf`: what was read
/// already), not waiting for the connection to close.
async fn read_answer(rd: &mut (impl AsyncRead + Unpin), mut buf: Vec<u8>) -> (String, String) {
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = header(head, "Content-Length").and_then(|v| v.parse::<usize>().ok());
            if len.is_some_and(|l| body.len() >= l) {
                return (head.to_owned(), body.to_owned());
            }
        }
        match rd.read(&mut chunk).await {
            Ok(0) | Err(_) => {
                let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
                return (head.to_owned(), body.to_owned());
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Waits (no deadline: the test's own timeout governs) until `n` requests are in the level
/// or answered.
async fn settle(
    server: &Server,
    answers: &mut mpsc::UnboundedReceiver<Answer>,
    got: &mut Vec<Answer>,
    n: usize,
) {
    loop {
        while let Ok(a) = answers.try_recv() {
            got.push(a);
        }
        let in_level = server.in_level().await;
        if in_level + got.len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[derive(Debug)]
struct Outcome {
    /// The level's fewest and most seats.
    seats: (usize, usize),
    refused_below_capacity: usize,
    refused_beyond: Vec<Answer>,
    answered_201: usize,
    other: Vec<String>,
    /// Position (0-based) of B's last create among all answered after release.
    last_b: usize,
    served: usize,
}

async fn drive(server: &Server) -> Outcome {
    let (release_tx, release) = watch::channel(false);
    let (tx, mut answers) = mpsc::unbounded_channel();
    let mut got = Vec::new();
    let mut i = 0;
    // Phase 1: A's 300 with B's 45 interleaved (one B after every 6 or 7 of A's).
    let mut b = 0;
    for a in 0..FIRST_A {
        start_request(server, USERS[0], i, release.clone(), tx.clone()).await;
        i += 1;
        if b < B_WRITES && a % 7 == 6 {
            start_request(server, USERS[1], i, release.clone(), tx.clone()).await;
            i += 1;
            b += 1;
        }
    }
    while b < B_WRITES {
        start_request(server, USERS[1], i, release.clone(), tx.clone()).await;
        i += 1;
        b += 1;
    }
    settle(server, &mut answers, &mut got, i).await;
    let refused_below_capacity = got.len();
    // Phase 2: A's 20 beyond its capacity.
    for _ in 0..MORE_A {
        start_request(server, USERS[0], i, release.clone(), tx.clone()).await;
        i += 1;
    }
    settle(server, &mut answers, &mut got, i).await;
    let seats = server.seat_range().await;
    let refused_beyond = got;
    // Release every body; the rest are answered in the order they are served.
    release_tx.send_replace(true);
    drop(tx);
    let mut order = Vec::new();
    while let Some(a) = answers.recv().await {
        order.push(a);
    }
    let answered_201 = order
        .iter()
        .filter(|a| a.head.starts_with("HTTP/1.1 201"))
        .count();
    let other = order
        .iter()
        .filter(|a| !a.head.starts_with("HTTP/1.1 201"))
        .map(|a| a.head.lines().next().unwrap_or("").to_owned())
        .collect();
    let last_b = order
        .iter()
        .rposition(|a| a.user == USERS[1])
        .expect("B's creates answered");
    Outcome {
        seats,
        refused_below_capacity,
        refused_beyond,
        answered_201,
        other,
        last_b,
        served: order.len(),
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// `steady`: whether the answers that depend on the real 1.36.3's load are asserted exactly
/// (the fair-queuing order, see below, and `Retry-After: 1`); 1.20.2 and the emulation are.
fn check(who: &str, o: &Outcome, nominal_seats: usize, steady: bool) {
    eprintln!(
        "{who}: refused below capacity {}, beyond {} (of {MORE_A}), seats {:?}, served {} (201: {}), B's last at {} of {}, other answers {}",
        o.refused_below_capacity,
        o.refused_beyond.len(),
        o.seats,
        o.served,
        o.answered_201,
        o.last_b,
        o.served,
        o.other.len()
    );
    assert_eq!(o.refused_below_capacity, 0, "{who}: refused below capacity");
    // A's capacity is 300 queued and the level's seats: 1, or on 1.36 anything from the
    // lower limit (it lent its seat) to the upper one (it borrowed).
    let beyond = o.refused_beyond.len();
    let (lower, upper) = o.seats;
    let expected = MORE_A - 1;
    assert!(
        beyond + upper.saturating_sub(nominal_seats) >= expected
            && beyond <= expected + nominal_seats.saturating_sub(lower),
        "{who}: {beyond} refused of {MORE_A} beyond capacity (seats {lower}..={upper})"
    );
    for a in &o.refused_beyond {
        assert!(a.early, "{who}: refused after its body");
        assert_eq!(a.user, USERS[0], "{who}: B refused");
        assert!(
            a.head.starts_with("HTTP/1.1 429 Too Many Requests"),
            "{who}: {}",
            a.head
        );
        // 1.20.2 (and the emulation) always ask for 1 s; the real 1.36.3 was seen asking
        // for 1 and for 2 (it derives the wait from the level's load): a whole number of
        // seconds, at least 1.
        let retry_after = header(&a.head, "Retry-After");
        if steady {
            assert_eq!(retry_after, Some("1"), "{who}");
        } else {
            assert!(
                retry_after
                    .and_then(|v| v.parse::<u64>().ok())
                    .is_some_and(|v| v >= 1),
                "{who}: Retry-After {retry_after:?}"
            );
        }
        assert_eq!(
            header(&a.head, "Content-Type"),
            Some("text/plain; charset=utf-8"),
            "{who}"
        );
        assert_eq!(
            header(&a.head, "X-Content-Type-Options"),
            Some("nosniff"),
            "{who}"
        );
        assert_eq!(
            header(&a.head, "Cache-Control"),
            Some("no-cache, private"),
            "{who}"
        );
        assert_eq!(
            a.body, "Too many requests, please try again later.\n",
            "{who}"
        );
    }
    assert!(
        o.other.is_empty(),
        "{who}: {} answers other than 201, the first {:?}",
        o.other.len(),
        o.other.first()
    );
    assert_eq!(
        o.answered_201,
        FIRST_A + B_WRITES + MORE_A - beyond,
        "{who}"
    );
    // Fair queuing: B's 45 are served beside A's flood, not after it (in arrival order the
    // last of B's is the last of all; 1.20.2 served it 79th to 103rd in five runs, the
    // emulation 84th or 85th). 1.36.3 served it anywhere from the 118th to the 237th in four
    // runs: with its 3 ms estimate of a request's work, a queue's virtual start credits
    // the time it waited, so where B lands depends on how long the load took to arrive and
    // on each create's real service time; there only its figure is printed.
    if !steady {
        return;
    }
    assert!(
        o.last_b < (FIRST_A + B_WRITES) * 2 / 3,
        "{who}: B's last create served at {} of {}",
        o.last_b,
        o.served
    );
}

fn tls_for(server: &RealApiserver) -> tokio_rustls::TlsConnector {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&server.ca_file).expect("CA file") {
        roots.add(cert.expect("CA certificate")).expect("add CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

fn kubectl(server: &RealApiserver, args: &[&str]) {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&server.admin_kubeconfig)
        .args(args)
        .output()
        .expect("kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

kevents_testkit::real_apiserver_tests! {
    #[test]
    fn apf_emulation_agrees_with_kube_apiserver() {
        let server = RealApiserver::start_with_args(&[
            "--max-requests-inflight=1",
            "--max-mutating-requests-inflight=1",
        ])
        .expect("starting kube-apiserver")
        .expect("kube-apiserver is provisioned");
        kubectl(&server, &[
            "create", "clusterrolebinding", "kevents-flow", "--clusterrole=cluster-admin",
            &format!("--user={}", USERS[0]), &format!("--user={}", USERS[1]),
        ]);
        let version = if server.version.starts_with("v1.20.") {
            ApfVersion::V1_20
        } else {
            ApfVersion::V1_36
        };
        let config = FlowControl::new(version, 1, 1);
        let nominal = config.seats() as usize;
        assert_eq!(nominal, 1);
        assert_eq!(config.capacity_per_flow(), 301);
        if version == ApfVersion::V1_36 {
            // 1.36 lends an idle level's seats to the others (global-default's lower limit
            // with 2 server seats is 0): queued requests would wait for the next 10 s
            // adjustment, and past the 15 s wait limit if it gives none back. The emulation
            // has no lending; the level is told not to lend either (the annotation keeps the
            // server from restoring its bootstrap spec), and the test waits until it holds
            // its seat.
            kubectl(&server, &[
                "patch", "prioritylevelconfiguration", "global-default", "--type=merge", "-p",
                r#"{"metadata":{"annotations":{"apf.kubernetes.io/autoupdate-spec":"false"}},"spec":{"limited":{"lendablePercent":0}}}"#,
            ]);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let tls = tls_for(&server);
            let real = Server::Real { server, tls };
            if version == ApfVersion::V1_36 {
                while real.current_seats().await < 1 {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            let real_outcome = drive(&real).await;
            drop(real);

            let auth = SimAuth::random();
            let sim = Simulator::start(SimConfig {
                auth: Some(auth),
                flow_control: Some(config),
                ..SimConfig::default()
            })
            .await
            .expect("simulator");
            let mut tokens = BTreeMap::new();
            for u in USERS {
                let t = format!("{u}-token");
                assert!(sim.add_token(&t, u, true));
                tokens.insert(u, t);
            }
            // A create takes a few milliseconds on kube-apiserver (3.1 ms median on 1.20.2
            // over loopback, docs/benchmarks.md): fair queuing's order depends on it.
            sim.set_faults(kevents_sim::Faults::latency(Duration::from_millis(3)));
            let emulated = Server::Sim { sim, tokens };
            let sim_outcome = drive(&emulated).await;

            let real_steady = version == ApfVersion::V1_20;
            check(&format!("kube-apiserver {version:?}"), &real_outcome, nominal, real_steady);
            check("simulator", &sim_outcome, nominal, true);
            // The emulation has no borrowing: exactly A's capacity.
            assert_eq!(sim_outcome.refused_beyond.len(), MORE_A - 1);
            let real_refused = real_outcome.refused_beyond.len();
            let (lower, upper) = real_outcome.seats;
            assert!(
                real_refused.abs_diff(sim_outcome.refused_beyond.len())
                    <= (upper - nominal).max(nominal - lower),
                "429s: real {real_refused}, emulated {}",
                sim_outcome.refused_beyond.len()
            );
        });
    }
}
