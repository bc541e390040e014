//! Real NATS servers for tests: one JetStream server ([`NatsServer`]) or a three-node
//! JetStream cluster ([`NatsCluster`]), on free loopback ports, each store in a temporary
//! directory, killed (SIGKILL) and restarted on demand with the same ports and store.
//!
//! Which `nats-server` ([`nats_server_binary`]) is chosen by `KEVENTS_NATS_VERSION`:
//!
//! - unset, empty, `2.9`, `2.9.N` or `debian`: Debian 12's `nats-server` (2.9.10) on `PATH`
//!   (`scripts/apiserver/provision.sh` installs it);
//! - `current`: `${KEVENTS_CACHE:-/var/cache/kevents}/nats-current/nats-server`, today's
//!   release built from Go modules by `bash scripts/nats/provision.sh` (v2.15.3);
//! - `X.Y` or `X.Y.Z` (e.g. `2.15`, `2.15.3`): `${KEVENTS_CACHE}/nats-X.Y[.Z]/nats-server`,
//!   which the same script links.
//!
//! `KEVENTS_NATS_SERVER=/path/to/nats-server` overrides the choice. A binary that is missing is
//! an error naming the command that provisions it: tests fail, they do not skip.
//!
//! Every server runs with a configuration file whose `jetstream` block holds the store
//! directory (what `-sd` sets) and, on servers that know it (2.10 and later),
//! `sync_interval: always`: without it JetStream acknowledges a message before it is written
//! to disk with fsync (every 2 minutes by default; Jepsen's analysis of NATS 2.12.1 lost
//! acknowledged messages this way), so a SIGKILLed node and a power loss are not the same
//! fault. nats-server 2.9 refuses the field ("unknown field") and syncs every 60 s, fixed.
//!
//! ```no_run
//! use kevents_testkit::nats::NatsServer;
//! let mut nats = NatsServer::start().expect("nats-server starts");
//! println!("{} at {}", nats.version(), nats.url());
//! nats.kill().expect("SIGKILL");
//! nats.restart().expect("restarted with the same store");
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use thiserror::Error;

/// How long a server has to accept TCP connections after it was spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a cluster has to agree on a JetStream meta leader with every running peer current.
const CLUSTER_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a NATS server could not be chosen, started, stopped or waited for.
#[derive(Debug, Error)]
pub enum NatsError {
    /// The chosen binary is not there.
    #[error("{0}")]
    NotProvisioned(String),
    /// `KEVENTS_NATS_VERSION` names nothing this harness knows.
    #[error(
        "KEVENTS_NATS_VERSION={0:?} is not understood: use nothing or 2.9 (Debian's nats-server), current, or a version X.Y[.Z] that bash scripts/nats/provision.sh provisions"
    )]
    UnknownVersion(String),
    /// The binary runs, but says another version than `KEVENTS_NATS_VERSION` asks for.
    #[error("KEVENTS_NATS_VERSION={wanted} but {binary} is nats-server {found}")]
    WrongVersion {
        /// What `KEVENTS_NATS_VERSION` asks for.
        wanted: String,
        /// The binary.
        binary: PathBuf,
        /// What its `--version` says.
        found: String,
    },
    /// A server did not become ready in time, or exited.
    #[error("{what}\n--- the server's log (tail) ---\n{log}")]
    NotReady {
        /// What did not happen.
        what: String,
        /// The tail of the server's log.
        log: String,
    },
    /// An IO error (temporary directory, spawning, signalling).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NatsError {
    let what = what.into();
    move |source| NatsError::Io { what, source }
}

/// The binary `KEVENTS_NATS_VERSION` chooses (see the module's documentation); an error if it
/// is not there, naming what provisions it.
///
/// ```no_run
/// let bin = kevents_testkit::nats::nats_server_binary().expect("nats-server is there");
/// assert!(bin.ends_with("nats-server"));
/// ```
pub fn nats_server_binary() -> Result<PathBuf, NatsError> {
    if let Some(p) = std::env::var_os("KEVENTS_NATS_SERVER") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(NatsError::NotProvisioned(format!(
                "KEVENTS_NATS_SERVER={} does not exist",
                p.display()
            )))
        };
    }
    let wanted = std::env::var("KEVENTS_NATS_VERSION").unwrap_or_default();
    match choice(&wanted)? {
        Choice::Debian => on_path("nats-server").ok_or_else(|| {
            NatsError::NotProvisioned(format!(
                "KEVENTS_NATS_VERSION={wanted:?} chooses Debian's nats-server, which is not on PATH: \
                 apt-get install nats-server (bash scripts/apiserver/provision.sh does it), or \
                 KEVENTS_NATS_VERSION=current after bash scripts/nats/provision.sh"
            ))
        }),
        Choice::Cache(dir) => {
            let bin = cache_dir().join(dir).join("nats-server");
            if bin.is_file() {
                Ok(bin)
            } else {
                Err(NatsError::NotProvisioned(format!(
                    "KEVENTS_NATS_VERSION={wanted}: {} is missing; run `bash scripts/nats/provision.sh` \
                     (as root, or with KEVENTS_CACHE set to a writable directory): it builds the \
                     version scripts/nats/nats-server-*/go.mod pins and links nats-current to it",
                    bin.display()
                )))
            }
        }
    }
}

/// The version of the chosen binary, as its `--version` says without the `v` (`2.9.10`,
/// `2.15.3`); an error if it is missing, or is not the version `KEVENTS_NATS_VERSION` names.
///
/// ```no_run
/// let v = kevents_testkit::nats::nats_server_version().expect("nats-server is there");
/// assert!(v.starts_with("2."));
/// ```
pub fn nats_server_version() -> Result<String, NatsError> {
    let bin = nats_server_binary()?;
    let version = binary_version(&bin)?;
    let wanted = std::env::var("KEVENTS_NATS_VERSION").unwrap_or_default();
    let wanted = wanted.trim_start_matches('v');
    if std::env::var_os("KEVENTS_NATS_SERVER").is_none()
        && is_version(wanted)
        && !version_matches(&version, wanted)
    {
        return Err(NatsError::WrongVersion {
            wanted: wanted.to_owned(),
            binary: bin,
            found: version,
        });
    }
    Ok(version)
}

/// Where a `KEVENTS_NATS_VERSION` points.
#[derive(Debug, PartialEq, Eq)]
enum Choice {
    /// `nats-server` on `PATH`.
    Debian,
    /// A directory under the cache holding `nats-server`.
    Cache(String),
}

fn choice(wanted: &str) -> Result<Choice, NatsError> {
    let v = wanted.trim().trim_start_matches('v');
    if v.is_empty() || v == "debian" || v == "2.9" || v.starts_with("2.9.") {
        Ok(Choice::Debian)
    } else if v == "current" {
        Ok(Choice::Cache("nats-current".into()))
    } else if is_version(v) {
        Ok(Choice::Cache(format!("nats-{v}")))
    } else {
        Err(NatsError::UnknownVersion(wanted.to_owned()))
    }
}

/// `X.Y` or `X.Y.Z`, digits only.
fn is_version(v: &str) -> bool {
    let parts: Vec<&str> = v.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `version` (`2.15.3`) is `wanted` (`2.15` or `2.15.3`), component by component.
fn version_matches(version: &str, wanted: &str) -> bool {
    let have: Vec<&str> = version.split('.').collect();
    let want: Vec<&str> = wanted.split('.').collect();
    want.len() <= have.len() && want.iter().zip(&have).all(|(w, h)| w == h)
}

/// (major, minor) of `2.15.3`.
fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut it = version.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// Whether a server of this version accepts `sync_interval` (added in 2.10.0).
fn knows_sync_interval(version: &str) -> bool {
    major_minor(version).is_some_and(|v| v >= (2, 10))
}

fn cache_dir() -> PathBuf {
    std::env::var_os("KEVENTS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/kevents"))
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// `nats-server: v2.9.10` -> `2.9.10`.
fn binary_version(bin: &Path) -> Result<String, NatsError> {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .map_err(io(format!("running {} --version", bin.display())))?;
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    text.split_whitespace()
        .map(|w| w.trim_start_matches('v'))
        .find(|w| major_minor(w).is_some())
        .map(str::to_owned)
        .ok_or_else(|| NatsError::Io {
            what: format!("{} --version", bin.display()),
            source: std::io::Error::other(format!("no version in {text:?}")),
        })
}

/// A free loopback port (bound, then released: another process may take it meanwhile, which
/// the server's start then reports).
fn free_port() -> Result<u16, NatsError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(io("finding a free loopback port"))
}

/// The last 40 lines of a log file.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// `GET path` on a monitoring port, the body as JSON.
fn http_json(port: u16, path: &str) -> std::io::Result<serde_json::Value> {
    let mut conn = TcpStream::connect(("127.0.0.1", port))?;
    conn.set_read_timeout(Some(Duration::from_secs(2)))?;
    conn.set_write_timeout(Some(Duration::from_secs(2)))?;
    conn.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())?;
    let mut text = String::new();
    conn.read_to_string(&mut text)?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .ok_or_else(|| std::io::Error::other("no HTTP body"))?;
    serde_json::from_str(body).map_err(std::io::Error::other)
}

/// One node's settings: everything that stays the same across a restart.
#[derive(Debug)]
struct Node {
    name: String,
    port: u16,
    http_port: u16,
    store: PathBuf,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Node {
    /// Writes the configuration file of a node (its ports, store and, in a cluster, routes).
    fn new(
        dir: &Path,
        name: &str,
        version: &str,
        cluster: Option<(&str, u16, &[u16])>,
        extra: &str,
    ) -> Result<Node, NatsError> {
        let port = free_port()?;
        let http_port = free_port()?;
        let store = dir.join(format!("{name}-store"));
        std::fs::create_dir_all(&store).map_err(io(format!("creating {}", store.display())))?;
        let sync = if knows_sync_interval(version) {
            ", sync_interval: always"
        } else {
            ""
        };
        let mut text = format!(
            "server_name: {name}\nlisten: \"127.0.0.1:{port}\"\nhttp: \"127.0.0.1:{http_port}\"\n\
             jetstream {{ store_dir: {store:?}{sync} }}\n",
            store = store.display().to_string(),
        );
        if let Some((cluster_name, route_port, peers)) = cluster {
            let routes: Vec<String> = peers
                .iter()
                .map(|p| format!("\"nats-route://127.0.0.1:{p}\""))
                .collect();
            text += &format!(
                "cluster {{\n  name: {cluster_name}\n  listen: \"127.0.0.1:{route_port}\"\n  routes: [{}]\n}}\n",
                routes.join(", ")
            );
        }
        text += extra;
        let config = dir.join(format!("{name}.conf"));
        std::fs::write(&config, text).map_err(io(format!("writing {}", config.display())))?;
        Ok(Node {
            name: name.to_owned(),
            port,
            http_port,
            store,
            log: dir.join(format!("{name}.log")),
            config,
            child: None,
        })
    }

    fn spawn(&mut self, bin: &Path) -> Result<(), NatsError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(io(format!("opening {}", self.log.display())))?;
        let err = log
            .try_clone()
            .map_err(io(format!("opening {}", self.log.display())))?;
        let child = Command::new(bin)
            .arg("-c")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(io(format!("spawning {}", bin.display())))?;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until the node accepts TCP connections (or exits, or [`READY_TIMEOUT`] passes).
    fn wait_listening(&mut self) -> Result<(), NatsError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(self.not_ready(format!("nats-server {} exited: {status}", self.name)));
            }
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(self.not_ready(format!(
                    "nats-server {} did not accept connections on 127.0.0.1:{} within {} s",
                    self.name,
                    self.port,
                    READY_TIMEOUT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn not_ready(&self, what: String) -> NatsError {
        NatsError::NotReady {
            what,
            log: log_tail(&self.log),
        }
    }

    /// SIGKILL and reap (a node not running is left alone).
    fn kill(&mut self) -> Result<(), NatsError> {
        if let Some(mut child) = self.child.take() {
            child
                .kill()
                .map_err(io(format!("SIGKILL to nats-server {}", self.name)))?;
            child
                .wait()
                .map_err(io(format!("waiting for nats-server {}", self.name)))?;
        }
        Ok(())
    }

    fn running(&self) -> bool {
        self.child.is_some()
    }
}

/// One `nats-server` with JetStream on a free loopback port, its store in a temporary
/// directory; killed with SIGKILL when dropped.
///
/// ```no_run
/// let nats = kevents_testkit::nats::NatsServer::start().expect("nats-server starts");
/// assert!(nats.url().starts_with("nats://127.0.0.1:"));
/// // then: async_nats::connect(nats.url()).await
/// ```
#[derive(Debug)]
pub struct NatsServer {
    bin: PathBuf,
    version: String,
    node: Node,
    _dir: tempfile::TempDir,
}

impl NatsServer {
    /// Starts the binary [`nats_server_binary`] chooses and waits (10 s) until it accepts
    /// connections.
    pub fn start() -> Result<NatsServer, NatsError> {
        NatsServer::start_with("")
    }

    /// [`NatsServer::start`] with `config` appended to the server's configuration file: an
    /// `authorization` block, operator mode, a `tls` block (see [`crate::nats_auth`]).
    pub fn start_with(config: &str) -> Result<NatsServer, NatsError> {
        let bin = nats_server_binary()?;
        let version = nats_server_version()?;
        let dir = tempfile::Builder::new()
            .prefix("kevents-nats-")
            .tempdir()
            .map_err(io("creating a temporary directory"))?;
        let node = Node::new(dir.path(), "kevents-nats", &version, None, config)?;
        let mut server = NatsServer {
            bin,
            version,
            node,
            _dir: dir,
        };
        server.node.spawn(&server.bin)?;
        server.node.wait_listening()?;
        Ok(server)
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.node.port)
    }

    /// The server's version (`2.9.10`, `2.15.3`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The JetStream store directory (kept across [`NatsServer::restart`]).
    pub fn store_dir(&self) -> &Path {
        &self.node.store
    }

    /// The server's log file (every run appends to it).
    pub fn log_file(&self) -> &Path {
        &self.node.log
    }

    /// Whether `sync_interval: always` is in the configuration (servers 2.10 and later).
    pub fn syncs_always(&self) -> bool {
        knows_sync_interval(&self.version)
    }

    /// SIGKILL: no chance to flush or say goodbye. Does nothing if it is not running.
    pub fn kill(&mut self) -> Result<(), NatsError> {
        self.node.kill()
    }

    /// Starts it again (after [`NatsServer::kill`]; kills it first if it is running) with the
    /// same port and store, and waits until it accepts connections.
    pub fn restart(&mut self) -> Result<(), NatsError> {
        self.node.kill()?;
        self.node.spawn(&self.bin)?;
        self.node.wait_listening()
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        let _ = self.node.kill();
    }
}

/// Three (or more) `nats-server`s forming one JetStream cluster on loopback: cluster
/// `kevents`, servers `n0`, `n1`, ..., each with its own client, route and monitoring
/// (`http`) port and store directory. All are killed with SIGKILL when dropped.
///
/// ```no_run
/// let mut cluster = kevents_testkit::nats::NatsCluster::start(3).expect("cluster starts");
/// let urls = cluster.urls(); // nats://127.0.0.1:P0,nats://127.0.0.1:P1,nats://127.0.0.1:P2
/// cluster.kill(1).expect("SIGKILL to n1");
/// cluster.restart(1).expect("n1 back, the cluster whole again");
/// # drop(urls);
/// ```
#[derive(Debug)]
pub struct NatsCluster {
    bin: PathBuf,
    version: String,
    nodes: Vec<Node>,
    _dir: tempfile::TempDir,
}

impl NatsCluster {
    /// Starts `n` servers (3 for a JetStream cluster that survives one lost node) and waits
    /// until they accept connections and agree on a JetStream meta leader that sees every
    /// peer current (60 s).
    pub fn start(n: usize) -> Result<NatsCluster, NatsError> {
        let bin = nats_server_binary()?;
        let version = nats_server_version()?;
        let dir = tempfile::Builder::new()
            .prefix("kevents-nats-cluster-")
            .tempdir()
            .map_err(io("creating a temporary directory"))?;
        let route_ports = (0..n).map(|_| free_port()).collect::<Result<Vec<_>, _>>()?;
        let nodes = (0..n)
            .map(|i| {
                let peers: Vec<u16> = route_ports
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, p)| *p)
                    .collect();
                Node::new(
                    dir.path(),
                    &format!("n{i}"),
                    &version,
                    Some(("kevents", route_ports[i], &peers)),
                    "",
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut cluster = NatsCluster {
            bin,
            version,
            nodes,
            _dir: dir,
        };
        for node in &mut cluster.nodes {
            node.spawn(&cluster.bin)?;
        }
        for node in &mut cluster.nodes {
            node.wait_listening()?;
        }
        cluster.wait_for_meta_leader()?;
        Ok(cluster)
    }

    /// The client URLs, comma-separated, as the Go client and the `nats` CLI take a server
    /// list (`nats://127.0.0.1:P0,nats://127.0.0.1:P1,...`). async-nats parses one URL per
    /// `ServerAddr`: split at `,` and pass the slice to `async_nats::connect`.
    pub fn urls(&self) -> String {
        (0..self.nodes.len())
            .map(|i| self.url(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node `i`'s client URL.
    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[i].port)
    }

    /// How many nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Never: a cluster has at least one node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The servers' version (`2.9.10`, `2.15.3`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Node `i`'s server name (`n{i}`).
    pub fn name(&self, i: usize) -> &str {
        &self.nodes[i].name
    }

    /// Node `i`'s store directory.
    pub fn store_dir(&self, i: usize) -> &Path {
        &self.nodes[i].store
    }

    /// Node `i`'s log file.
    pub fn log_file(&self, i: usize) -> &Path {
        &self.nodes[i].log
    }

    /// Node `i`'s monitoring port (`/jsz`, `/healthz`, `/varz`).
    pub fn http_port(&self, i: usize) -> u16 {
        self.nodes[i].http_port
    }

    /// SIGKILL to node `i`, then waits until the others agree on a meta leader among them
    /// that sees every other running peer current (a new election if `i` led).
    pub fn kill(&mut self, i: usize) -> Result<(), NatsError> {
        self.nodes[i].kill()?;
        self.wait_for_meta_leader()
    }

    /// Starts node `i` again (killing it first if it runs) with the same ports and store,
    /// and waits until it accepts connections and the cluster agrees on a meta leader that
    /// sees every running peer, `i` included, current.
    pub fn restart(&mut self, i: usize) -> Result<(), NatsError> {
        self.nodes[i].kill()?;
        self.nodes[i].spawn(&self.bin)?;
        self.nodes[i].wait_listening()?;
        self.wait_for_meta_leader()
    }

    /// The name of the JetStream meta leader, as the running nodes agree on it (`None` if
    /// they do not, or no node answers `/jsz`).
    pub fn meta_leader(&self) -> Option<String> {
        self.meta_state().ok().map(|(leader, _)| leader)
    }

    /// The meta leader every running node reports, with the leader's `/jsz` answer; `Err`
    /// says what is not there yet.
    fn meta_state(&self) -> Result<(String, serde_json::Value), String> {
        let mut leader: Option<String> = None;
        let mut leader_jsz = None;
        for node in self.nodes.iter().filter(|n| n.running()) {
            let jsz = http_json(node.http_port, "/jsz")
                .map_err(|e| format!("{}: GET /jsz: {e}", node.name))?;
            let said = jsz["meta_cluster"]["leader"]
                .as_str()
                .filter(|l| !l.is_empty())
                .ok_or_else(|| format!("{} knows no meta leader", node.name))?
                .to_owned();
            match &leader {
                Some(l) if *l != said => {
                    return Err(format!(
                        "{} says the leader is {said}, another says {l}",
                        node.name
                    ));
                }
                _ => leader = Some(said.clone()),
            }
            if node.name == said {
                leader_jsz = Some(jsz);
            }
        }
        let leader = leader.ok_or("no node runs")?;
        let jsz = leader_jsz.ok_or_else(|| format!("the leader {leader} is not a running node"))?;
        // The leader lists its peers (not itself) with whether each is caught up.
        let replicas = jsz["meta_cluster"]["replicas"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for node in self
            .nodes
            .iter()
            .filter(|n| n.running() && n.name != leader)
        {
            let current = replicas.iter().any(|r| {
                r["name"].as_str() == Some(node.name.as_str())
                    && r["current"].as_bool() == Some(true)
                    && r["offline"].as_bool() != Some(true)
            });
            if !current {
                return Err(format!(
                    "the leader {leader} does not see {} current: {}",
                    node.name,
                    serde_json::Value::Array(replicas)
                ));
            }
        }
        Ok((leader, jsz))
    }

    fn wait_for_meta_leader(&mut self) -> Result<(), NatsError> {
        let deadline = Instant::now() + CLUSTER_TIMEOUT;
        loop {
            for node in &mut self.nodes {
                if let Some(child) = node.child.as_mut()
                    && let Ok(Some(status)) = child.try_wait()
                {
                    node.child = None;
                    return Err(
                        node.not_ready(format!("nats-server {} exited: {status}", node.name))
                    );
                }
            }
            let last = match self.meta_state() {
                Ok(_) => return Ok(()),
                Err(e) => e,
            };
            if Instant::now() > deadline {
                let logs: Vec<String> = self
                    .nodes
                    .iter()
                    .map(|n| format!("=== {} ===\n{}", n.name, log_tail(&n.log)))
                    .collect();
                return Err(NatsError::NotReady {
                    what: format!(
                        "the NATS cluster has no JetStream meta leader with every running peer \
                         current after {} s: {last}",
                        CLUSTER_TIMEOUT.as_secs()
                    ),
                    log: logs.join("\n"),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            let _ = node.kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_variable_picks_the_binary() {
        for v in ["", "2.9", "2.9.10", "v2.9.10", "debian"] {
            assert_eq!(choice(v).unwrap(), Choice::Debian, "{v:?}");
        }
        assert_eq!(
            choice("current").unwrap(),
            Choice::Cache("nats-current".into())
        );
        assert_eq!(choice("2.15").unwrap(), Choice::Cache("nats-2.15".into()));
        assert_eq!(
            choice("v2.15.3").unwrap(),
            Choice::Cache("nats-2.15.3".into())
        );
        for v in ["latest", "2", "2.x", "../etc"] {
            assert!(choice(v).is_err(), "{v:?}");
        }
    }

    #[test]
    fn versions_match_component_by_component() {
        assert!(version_matches("2.15.3", "2.15"));
        assert!(version_matches("2.15.3", "2.15.3"));
        assert!(version_matches("2.9.10", "2.9"));
        assert!(!version_matches("2.15.3", "2.1"));
        assert!(!version_matches("2.9.10", "2.9.1"));
        assert!(!knows_sync_interval("2.9.10"));
        assert!(knows_sync_interval("2.10.0"));
        assert!(knows_sync_interval("2.15.3"));
    }
}
