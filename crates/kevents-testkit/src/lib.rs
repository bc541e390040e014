//! Test harness for kevents against apiservers: a real kube-apiserver + etcd (v1.20.2, or
//! v1.36 / v1.37 with `KEVENTS_K8S_VERSION=1.36` or `1.37`; [`RealApiserver`], started by
//! `scripts/apiserver/start.sh`), the in-process simulator,
//! and the conformance suites ([`conformance::core_v1`], [`conformance::events_v1`]) that run
//! the same scenarios against both through a [`Target`]; and real NATS JetStream servers
//! ([`nats::NatsServer`], a three-node [`nats::NatsCluster`]) for the export's tests.
//!
//! Real-apiserver tests are wrapped in [`real_apiserver_tests!`]: when the kube-apiserver
//! binary ([`apiserver_binary`]) is not provisioned at build time they are `#[ignore]`d with
//! the command that runs them, so `cargo test` lists them as `ignored` with that reason.
//! In CI (`CI` set to anything but `false`/`0`) or with `KEVENTS_REQUIRE_APISERVER=1` they
//! always run, and fail if the binary is missing ([`RealApiserver::start`] returns
//! [`TestkitError::NotProvisioned`]).
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use kevents_testkit::Target;
//! use kevents_testkit::conformance::{core_v1, events_v1};
//! let sim = Target::simulator().await?;
//! core_v1::run_all(&sim).await?;
//! events_v1::run_all(&sim).await?;
//! if let Some(real) = Target::real().await? {
//!     core_v1::run_all(&real).await?;
//!     events_v1::run_all(&real).await?;
//! }
//! # Ok(()) }
//! ```

pub mod conformance;
pub mod nats;
pub mod nats_auth;
pub mod otelcol;

/// Wraps real-apiserver tests: with the kube-apiserver binary provisioned when the crate was
/// built, or when CI or `KEVENTS_REQUIRE_APISERVER=1` require it, the items are emitted as
/// they are; otherwise each gets `#[ignore]` with the command that runs it. Decided by
/// kevents-testkit's build script, which Cargo runs again when the binary appears or
/// disappears or those variables change.
///
/// ```
/// kevents_testkit::real_apiserver_tests! {
///     #[test]
///     fn against_kube_apiserver() {
///         let server = kevents_testkit::RealApiserver::start()
///             .expect("starting kube-apiserver")
///             .expect("kube-apiserver is provisioned");
///         assert!(server.url.starts_with("https://"));
///     }
/// }
/// ```
#[cfg(kevents_apiserver)]
#[allow(clippy::test_attr_in_doctest)] // the example is what a test file holds
#[macro_export]
macro_rules! real_apiserver_tests {
    ($($item:item)*) => {
        $($item)*
    };
}

/// Wraps real-apiserver tests: with the kube-apiserver binary provisioned when the crate was
/// built, or when CI or `KEVENTS_REQUIRE_APISERVER=1` require it, the items are emitted as
/// they are; otherwise each gets `#[ignore]` with the command that runs it. Decided by
/// kevents-testkit's build script, which Cargo runs again when the binary appears or
/// disappears or those variables change.
///
/// ```
/// kevents_testkit::real_apiserver_tests! {
///     #[test]
///     fn against_kube_apiserver() {
///         let server = kevents_testkit::RealApiserver::start()
///             .expect("starting kube-apiserver")
///             .expect("kube-apiserver is provisioned");
///         assert!(server.url.starts_with("https://"));
///     }
/// }
/// ```
#[cfg(not(kevents_apiserver))]
#[allow(clippy::test_attr_in_doctest)] // the example is what a test file holds
#[macro_export]
macro_rules! real_apiserver_tests {
    ($($item:item)*) => {
        $(
            #[ignore = "needs a real kube-apiserver: run `bash scripts/apiserver/provision.sh` once (as root), then `cargo test --workspace`"]
            $item
        )*
    };
}

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kevents_http::{HttpConfig, HttpSink};
use kevents_sim::{SimConfig, SimHandle, Simulator};
use thiserror::Error;

/// Why the harness failed.
#[derive(Debug, Error)]
pub enum TestkitError {
    /// The real apiserver is required here (CI) but not provisioned.
    #[error(
        "real kube-apiserver required (CI or KEVENTS_REQUIRE_APISERVER=1) but not provisioned: {0} is missing; run scripts/apiserver/provision.sh"
    )]
    NotProvisioned(PathBuf),
    /// `start.sh` failed.
    #[error("scripts/apiserver/start.sh failed ({status}): {stderr}")]
    Start {
        /// Exit status.
        status: String,
        /// Its standard error (tail).
        stderr: String,
    },
    /// `start.sh` did not write a usable `env` file.
    #[error("start.sh wrote no {0} to its env file")]
    Env(&'static str),
    /// An IO error (temporary directory, running a script, reading a file).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The simulator did not start.
    #[error(transparent)]
    Sim(#[from] kevents_sim::SimError),
    /// An `HttpSink` could not be built.
    #[error(transparent)]
    Config(#[from] kevents_http::ConfigError),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TestkitError {
    let what = what.into();
    move |source| TestkitError::Io { what, source }
}

/// Whether the real apiserver must be present: `CI` set (and not `false`/`0`) or
/// `KEVENTS_REQUIRE_APISERVER=1`.
///
/// ```
/// let _must = kevents_testkit::apiserver_required();
/// ```
pub fn apiserver_required() -> bool {
    let ci = std::env::var("CI")
        .map(|v| !v.is_empty() && v != "false" && v != "0")
        .unwrap_or(false);
    ci || std::env::var("KEVENTS_REQUIRE_APISERVER").is_ok_and(|v| v == "1")
}

/// The repository's `scripts/apiserver` directory (override: `KEVENTS_APISERVER_SCRIPTS`).
///
/// ```
/// assert!(kevents_testkit::scripts_dir().ends_with("scripts/apiserver"));
/// ```
pub fn scripts_dir() -> PathBuf {
    match std::env::var_os("KEVENTS_APISERVER_SCRIPTS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/apiserver"),
    }
}

/// Where `start.sh` looks for kube-apiserver (`KEVENTS_KUBE_APISERVER`, else, for the version
/// `KEVENTS_K8S_VERSION` chooses, `${KEVENTS_CACHE:-/var/cache/kevents}/bin/kube-apiserver`
/// (unset or `1.20`: v1.20.2) or `${KEVENTS_CACHE:-/var/cache/kevents}/k8s-1.36/kube-apiserver`
/// (`1.36`) or `.../k8s-1.37/kube-apiserver` (`1.37`)).
///
/// ```
/// assert!(kevents_testkit::apiserver_binary().ends_with("kube-apiserver"));
/// ```
pub fn apiserver_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("KEVENTS_KUBE_APISERVER") {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("KEVENTS_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/kevents"));
    cache.join(binary_under_cache(
        std::env::var("KEVENTS_K8S_VERSION").ok().as_deref(),
    ))
}

/// The kube-apiserver binary of a `KEVENTS_K8S_VERSION` under the cache directory (the same
/// choice as `start.sh`; kevents-testkit's build script has a copy).
fn binary_under_cache(k8s_version: Option<&str>) -> &'static str {
    match k8s_version.map(|v| v.trim_start_matches('v')) {
        Some(v) if v == "1.36" || v.starts_with("1.36.") => "k8s-1.36/kube-apiserver",
        Some(v) if v == "1.37" || v.starts_with("1.37.") => "k8s-1.37/kube-apiserver",
        _ => "bin/kube-apiserver",
    }
}

/// A running etcd + kube-apiserver (v1.20.2, or v1.36 / v1.37 with `KEVENTS_K8S_VERSION`) on
/// loopback, stopped (by `stop.sh`, which signals exactly the recorded process ids) when
/// dropped.
#[derive(Debug)]
pub struct RealApiserver {
    dir: tempfile::TempDir,
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// The server's version, as its binary's `--version` says (`v1.20.2`, `v1.36.3`, `v1.37.2`).
    pub version: String,
    /// The serving certificate bundle to trust.
    pub ca_file: PathBuf,
    /// Bearer token in group `system:masters`.
    pub admin_token: String,
    /// Bearer token of user `nobody`, without any RBAC rights.
    pub nobody_token: String,
    /// kubeconfig for the admin token.
    pub admin_kubeconfig: PathBuf,
    /// kubeconfig for the nobody token.
    pub nobody_kubeconfig: PathBuf,
    /// Three more tokens in group `system:masters` (users `kevents-exec-0..2`), for tests
    /// that rotate credentials (exec credential plugins). The static token file is read once
    /// at start: tokens cannot be added later.
    pub exec_tokens: Vec<String>,
    /// A client certificate (PEM file) of user `kevents-cert-admin` in group
    /// `system:masters`, signed by the apiserver's `--client-ca-file`.
    pub client_cert: PathBuf,
    /// Its private key (PEM file).
    pub client_key: PathBuf,
    stopped: bool,
}

impl RealApiserver {
    /// Starts one (blocking, 2-10 s). `Ok(None)`: not provisioned and not required, after
    /// printing why (tests wrapped in [`real_apiserver_tests!`] are then ignored, unless run
    /// with `--ignored`, and should fail on `None`).
    pub fn start() -> Result<Option<Self>, TestkitError> {
        Self::start_with(&[])
    }

    /// [`RealApiserver::start`] with the `EventRateLimit` admission plugin enabled with
    /// `limits` (`(type, qps, burst)`, type one of `Server`, `Namespace`, `User`,
    /// `SourceAndObject`), as a hardened cluster runs it (CIS Kubernetes benchmark 1.2.9).
    ///
    /// ```no_run
    /// let server = kevents_testkit::RealApiserver::start_with_event_rate_limits(&[("Namespace", 50, 100)])
    ///     .expect("starting kube-apiserver")
    ///     .expect("kube-apiserver is provisioned");
    /// assert!(server.state_dir().join("eventratelimit.yaml").exists());
    /// ```
    pub fn start_with_event_rate_limits(
        limits: &[(&str, u32, u32)],
    ) -> Result<Option<Self>, TestkitError> {
        let spec: Vec<String> = limits
            .iter()
            .map(|(t, qps, burst)| format!("{t}:{qps}:{burst}"))
            .collect();
        Self::start_with(&[("KEVENTS_EVENT_RATE_LIMITS", spec.join(" "))])
    }

    /// [`RealApiserver::start`] with more kube-apiserver flags (e.g. the in-flight limits
    /// that API Priority and Fairness divides among its priority levels).
    ///
    /// ```no_run
    /// let server = kevents_testkit::RealApiserver::start_with_args(&["--max-requests-inflight=20"])
    ///     .expect("starting kube-apiserver")
    ///     .expect("kube-apiserver is provisioned");
    /// # drop(server);
    /// ```
    pub fn start_with_args(args: &[&str]) -> Result<Option<Self>, TestkitError> {
        Self::start_with(&[("KEVENTS_APISERVER_EXTRA_ARGS", args.join(" "))])
    }

    /// Creates namespace `ns` with `kubectl`, as the admin (event writes to a namespace
    /// that does not exist are refused).
    ///
    /// ```no_run
    /// let server = kevents_testkit::RealApiserver::start()
    ///     .expect("starting kube-apiserver")
    ///     .expect("kube-apiserver is provisioned");
    /// server.create_namespace("bench").expect("kubectl create namespace");
    /// ```
    pub fn create_namespace(&self, ns: &str) -> Result<(), TestkitError> {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.admin_kubeconfig)
            .args(["create", "namespace", ns])
            .output()
            .map_err(io("running kubectl"))?;
        if out.status.success() {
            return Ok(());
        }
        Err(TestkitError::Io {
            what: format!("kubectl create namespace {ns} ({})", out.status),
            source: std::io::Error::other(String::from_utf8_lossy(&out.stderr).into_owned()),
        })
    }

    fn start_with(env: &[(&str, String)]) -> Result<Option<Self>, TestkitError> {
        let bin = apiserver_binary();
        if !bin.exists() {
            if apiserver_required() {
                return Err(TestkitError::NotProvisioned(bin));
            }
            eprintln!(
                "real apiserver not provisioned ({} is missing), run scripts/apiserver/provision.sh",
                bin.display()
            );
            return Ok(None);
        }
        let dir = tempfile::Builder::new()
            .prefix("kevents-apiserver-")
            .tempdir()
            .map_err(io("creating a temporary directory"))?;
        let state = dir.path().join("state");
        let script = scripts_dir().join("start.sh");
        let out = Command::new("bash")
            .arg(&script)
            .arg(&state)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .map_err(io(format!("running {}", script.display())))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(TestkitError::Start {
                status: out.status.to_string(),
                stderr: tail.join("\n"),
            });
        }
        let env_text = std::fs::read_to_string(state.join("env"))
            .map_err(io("reading the env file of start.sh"))?;
        let env = parse_env(&env_text);
        let get = |k: &'static str| env.get(k).cloned().ok_or(TestkitError::Env(k));
        let mut server = RealApiserver {
            url: get("KEVENTS_APISERVER_URL")?,
            version: get("KEVENTS_APISERVER_VERSION")?,
            ca_file: PathBuf::from(get("KEVENTS_APISERVER_CA")?),
            admin_token: get("KEVENTS_ADMIN_TOKEN")?,
            nobody_token: get("KEVENTS_NOBODY_TOKEN")?,
            admin_kubeconfig: state.join("admin.kubeconfig"),
            nobody_kubeconfig: state.join("nobody.kubeconfig"),
            exec_tokens: get("KEVENTS_EXEC_TOKENS")?
                .split(',')
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
            client_cert: PathBuf::from(get("KEVENTS_CLIENT_CERT")?),
            client_key: PathBuf::from(get("KEVENTS_CLIENT_KEY")?),
            dir,
            stopped: false,
        };
        if !server.admin_kubeconfig.exists() {
            server.stop();
            return Err(TestkitError::Env("admin.kubeconfig"));
        }
        Ok(Some(server))
    }

    /// The state directory (logs: `apiserver.log`, `etcd.log`).
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// Stops etcd and the apiserver (idempotent).
    pub fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        let script = scripts_dir().join("stop.sh");
        match Command::new("bash")
            .arg(&script)
            .arg(self.state_dir())
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "warning: {} failed: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => eprintln!("warning: cannot run {}: {e}", script.display()),
        }
    }
}

impl Drop for RealApiserver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The minor release of a version string (`v1.36.3` -> 36).
fn minor_of(version: &str) -> Option<u32> {
    version
        .trim_start_matches('v')
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}

/// Parses `KEY=VALUE` lines as `start.sh` writes them (values `%q`-quoted only when needed).
fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            let v = v.trim();
            let v = v
                .strip_prefix('\'')
                .and_then(|v| v.strip_suffix('\''))
                .map(str::to_owned)
                .unwrap_or_else(|| v.replace('\\', ""));
            (k.trim().to_owned(), v)
        })
        .collect()
}

enum Backend {
    Sim(SimHandle),
    Real(RealApiserver),
}

/// Whose credentials: the all-powerful token or the one without rights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// Group `system:masters` (the simulator's admin token).
    Admin,
    /// User `nobody`, without any RBAC rights.
    Nobody,
}

/// An apiserver the conformance suite runs against, with sinks for an all-powerful token
/// and for a token without rights. The sinks are kevents-http's [`HttpSink`] by default;
/// [`Target::with_sinks`] puts others in their place (any [`SuiteSink`], e.g. a sink over a
/// `kube::Client` built from [`Target::kubeconfig`]).
///
/// [`SuiteSink`]: crate::conformance::SuiteSink
pub struct Target<S = HttpSink> {
    /// `simulator` or `kube-apiserver`.
    pub name: &'static str,
    /// Sink with the admin token.
    pub admin: S,
    /// Sink with the nobody token (403 on every event request).
    pub nobody: S,
    url: String,
    backend: Backend,
}

impl<S> std::fmt::Debug for Target<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Target {
    /// The simulator configured like a fresh apiserver (tokens, the four standard
    /// namespaces), sinks built from its kubeconfig.
    pub async fn simulator() -> Result<Self, TestkitError> {
        let sim = Simulator::start(SimConfig::like_apiserver()).await?;
        let admin = HttpSink::new(
            HttpConfig::from_kubeconfig_yaml(&sim.kubeconfig(sim.admin_token(), "default"), None)
                .await?,
        )?;
        let nobody = HttpSink::new(
            HttpConfig::from_kubeconfig_yaml(&sim.kubeconfig(sim.nobody_token(), "default"), None)
                .await?,
        )?;
        Ok(Target {
            name: "simulator",
            url: admin.base_url().to_string(),
            admin,
            nobody,
            backend: Backend::Sim(sim),
        })
    }

    /// A real apiserver (see [`RealApiserver::start`]), sinks built from the kubeconfig
    /// files `start.sh` writes.
    pub async fn real() -> Result<Option<Self>, TestkitError> {
        let started = tokio::task::spawn_blocking(RealApiserver::start)
            .await
            .map_err(|e| TestkitError::Io {
                what: "starting the apiserver".into(),
                source: std::io::Error::other(e.to_string()),
            })??;
        let Some(real) = started else {
            return Ok(None);
        };
        let admin =
            HttpSink::new(HttpConfig::from_kubeconfig(Some(&real.admin_kubeconfig), None).await?)?;
        let nobody =
            HttpSink::new(HttpConfig::from_kubeconfig(Some(&real.nobody_kubeconfig), None).await?)?;
        Ok(Some(Target {
            name: "kube-apiserver",
            url: admin.base_url().to_string(),
            admin,
            nobody,
            backend: Backend::Real(real),
        }))
    }
}

impl<S> Target<S> {
    /// The same apiserver with other sinks for the two identities (build them from
    /// [`Target::kubeconfig`]).
    ///
    /// ```no_run
    /// # async fn f() -> Result<(), kevents_testkit::TestkitError> {
    /// use kevents_testkit::{Identity, Target};
    /// let t = Target::simulator().await?;
    /// let admin_yaml = t.kubeconfig(Identity::Admin)?;
    /// // build sinks of your own from the kubeconfig, here the same HttpSinks again
    /// let (admin, nobody) = (t.admin.clone(), t.nobody.clone());
    /// let t = t.with_sinks(admin, nobody);
    /// # Ok(()) }
    /// ```
    pub fn with_sinks<T>(self, admin: T, nobody: T) -> Target<T> {
        Target {
            name: self.name,
            admin,
            nobody,
            url: self.url,
            backend: self.backend,
        }
    }

    /// The kubeconfig (YAML) of an identity: the simulator's generated one (HTTPS with its
    /// CA), or the file `start.sh` wrote for the real apiserver.
    pub fn kubeconfig(&self, who: Identity) -> Result<String, TestkitError> {
        match &self.backend {
            Backend::Sim(sim) => {
                let token = match who {
                    Identity::Admin => sim.admin_token(),
                    Identity::Nobody => sim.nobody_token(),
                };
                Ok(sim.kubeconfig(token, "default"))
            }
            Backend::Real(real) => {
                let path = match who {
                    Identity::Admin => &real.admin_kubeconfig,
                    Identity::Nobody => &real.nobody_kubeconfig,
                };
                std::fs::read_to_string(path).map_err(io(format!("reading {}", path.display())))
            }
        }
    }

    /// The Kubernetes minor release the target answers like: 20 for the simulator (it answers
    /// like kube-apiserver 1.20) and a v1.20.2 server, 36 for v1.36.x, 37 for v1.37.x. Conformance scenarios
    /// whose answer changed between the two expect each version's own.
    pub fn server_minor(&self) -> u32 {
        match &self.backend {
            Backend::Sim(_) => 20,
            Backend::Real(r) => minor_of(&r.version).unwrap_or(20),
        }
    }

    /// The apiserver URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The real apiserver, if this target is one.
    pub fn real_apiserver(&self) -> Option<&RealApiserver> {
        match &self.backend {
            Backend::Real(r) => Some(r),
            Backend::Sim(_) => None,
        }
    }

    /// The simulator, if this target is one.
    pub fn simulator_handle(&self) -> Option<&SimHandle> {
        match &self.backend {
            Backend::Sim(s) => Some(s),
            Backend::Real(_) => None,
        }
    }
}

/// One request with a JSON body through `sink`, as any program that is not kevents writes
/// events (the tests' external writer); an answer other than 2xx fails the test with it.
///
/// ```no_run
/// # async fn f(sink: kevents_http::HttpSink) {
/// use kevents_core::request::{APPLICATION_JSON, Method};
/// let body = serde_json::json!({"metadata": {"name": "e", "namespace": "default"}});
/// kevents_testkit::send_json(&sink, Method::Post, "/api/v1/namespaces/default/events".into(),
///     APPLICATION_JSON, &body).await;
/// # }
/// ```
pub async fn send_json(
    sink: &HttpSink,
    method: kevents_core::request::Method,
    path: String,
    content_type: &'static str,
    body: &serde_json::Value,
) {
    let answer = sink
        .requests()
        .send(
            method,
            path.clone(),
            Some(content_type),
            body.to_string().into_bytes(),
            1 << 20,
        )
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: no answer: {e}"));
    assert!(
        (200..300).contains(&answer.code),
        "{method} {path}: {} {}",
        answer.code,
        String::from_utf8_lossy(&answer.body)
    );
}

/// The example `name` built beside the calling test binary (`target/<profile>/examples/`),
/// for tests that run an example as a program; panics, saying how to build it, if it is not
/// there (`cargo test` builds the examples before it runs any test; `--test` alone does not).
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is not built: run the tests with `cargo test` (which builds the examples) or \
         `cargo build --examples` first",
        path.display()
    );
    path
}

#[cfg(test)]
mod tests {
    #[test]
    fn env_file_is_parsed() {
        let env = super::parse_env("A=1\nB='x y'\nC=a\\ b\n");
        assert_eq!(env["A"], "1");
        assert_eq!(env["B"], "x y");
        assert_eq!(env["C"], "a b");
    }

    #[test]
    fn minor_release_of_a_version() {
        assert_eq!(super::minor_of("v1.20.2"), Some(20));
        assert_eq!(super::minor_of("v1.36.3"), Some(36));
        assert_eq!(super::minor_of("v1.37.2"), Some(37));
        assert_eq!(super::minor_of(""), None);
    }

    #[test]
    fn k8s_version_picks_the_binary() {
        for v in [None, Some(""), Some("1.20"), Some("1.20.2")] {
            assert_eq!(super::binary_under_cache(v), "bin/kube-apiserver", "{v:?}");
        }
        for v in ["1.36", "1.36.3", "v1.36.3"] {
            assert_eq!(
                super::binary_under_cache(Some(v)),
                "k8s-1.36/kube-apiserver",
                "{v}"
            );
        }
        for v in ["1.37", "1.37.2", "v1.37.2"] {
            assert_eq!(
                super::binary_under_cache(Some(v)),
                "k8s-1.37/kube-apiserver",
                "{v}"
            );
        }
        // Not a provisioned version: 1.20's binary, as start.sh would refuse it.
        assert_eq!(super::binary_under_cache(Some("1.3")), "bin/kube-apiserver");
        assert_eq!(
            super::binary_under_cache(Some("1.370")),
            "bin/kube-apiserver"
        );
    }
}
