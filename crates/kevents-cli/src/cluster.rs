//! What the commands that talk to an apiserver share: typed failures and the exit codes
//! they map to, loading a kubeconfig, the reachability probe, making sure a namespace
//! exists, watching the health of the writes, waiting until pipelines are idle, and summing
//! counters. Every text that reaches the terminal from outside (server messages, error
//! chains, kubectl's output) is escaped and has known secrets removed.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kevents_actors::{Pipeline, StatsSnapshot};
use kevents_core::{Event, EventSink, SinkError, SinkFuture, Stored};
use kevents_http::config::{MAX_KUBECONFIG_BYTES, MAX_TOKEN_FILE_BYTES};
use kevents_http::secrecy::ExposeSecret as _;
use kevents_http::{Auth, ConfigError, HttpConfig, HttpSink, ServerVersion, read_credential_file};

use crate::sanitize;

/// How long each request of the reachability probe may take (connect included).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `kubectl create namespace` may run.
pub const KUBECTL_LIMIT: Duration = Duration::from_secs(20);

/// What went wrong, as the exit code tells it (see `docs/demo.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Anything else (an internal error, counters that do not add up): exit code 1.
    Other,
    /// Bad options or configuration (invalid namespace, unreadable kubeconfig or token
    /// file, unknown context, missing namespace on the cluster): exit code 2, as clap's
    /// usage errors. Nothing was sent.
    Config,
    /// The apiserver cannot be used: connection refused, DNS, TLS, no answer in time,
    /// 401, 403, or an error status. Exit code 3. Nothing was written.
    Unreachable,
    /// The story was played but some occurrences were dropped or their writes failed:
    /// exit code 4.
    NotWritten,
    /// Everything was written but reading the events back failed: exit code 5.
    ReadBack,
}

impl FailureKind {
    /// The process exit code.
    pub fn exit_code(self) -> u8 {
        match self {
            FailureKind::Other => 1,
            FailureKind::Config => 2,
            FailureKind::Unreachable => 3,
            FailureKind::NotWritten => 4,
            FailureKind::ReadBack => 5,
        }
    }
}

/// A command's failure: its kind (the exit code) and one line saying why, escaped and with
/// known secrets removed ([`one_line`]).
#[derive(Debug)]
pub struct Failure {
    /// What kind of failure.
    pub kind: FailureKind,
    message: String,
}

impl Failure {
    /// A failure of `kind` saying `message` (made one safe line).
    pub fn new(kind: FailureKind, message: impl fmt::Display) -> Self {
        Failure {
            kind,
            message: one_line(&message.to_string()),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// The exit code for `e`: its [`Failure`]'s, else 1.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    e.chain()
        .find_map(|c| c.downcast_ref::<Failure>())
        .map_or(1, |f| f.kind.exit_code())
}

/// Makes every error of a command a [`Failure`] (one escaped line without secrets; kind
/// [`FailureKind::Other`] unless it already is one).
pub fn finish(result: anyhow::Result<()>) -> anyhow::Result<()> {
    result.map_err(|e| match e.downcast::<Failure>() {
        Ok(f) => f.into(),
        Err(e) => Failure::new(FailureKind::Other, format!("{e:#}")).into(),
    })
}

static SECRETS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn secrets() -> MutexGuard<'static, Vec<String>> {
    SECRETS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Remembers a credential so that [`redact`] removes it from everything printed. Values
/// shorter than 4 characters are ignored (they would mangle ordinary text).
pub fn add_secret(secret: &str) {
    let secret = secret.trim();
    if secret.chars().count() >= 4 {
        let mut s = secrets();
        if !s.iter().any(|k| k == secret) {
            s.push(secret.to_owned());
        }
    }
}

/// `text` with every known credential ([`add_secret`]) replaced by `[REDACTED]`.
pub fn redact(text: &str) -> String {
    let mut out = text.to_owned();
    for secret in secrets().iter() {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), "[REDACTED]");
        }
    }
    out
}

/// `text` made safe to print as (part of) one line: known secrets removed, then every
/// control character escaped ([`sanitize::escape`]).
pub fn one_line(text: &str) -> String {
    sanitize::escape(&redact(text))
}

/// Remembers the credentials written in a kubeconfig's text (values of `token`,
/// `password`, `client-key-data`, ...), best effort, so that even an error while parsing it
/// cannot print them.
fn scan_kubeconfig_secrets(text: &str) {
    const KEYS: [&str; 8] = [
        "token",
        "password",
        "client-key-data",
        "id-token",
        "refresh-token",
        "access-token",
        "client-secret",
        "secret",
    ];
    for line in text.lines() {
        for part in line.split([',', '{', '}']) {
            let part = part.trim().trim_start_matches("- ").trim();
            let Some((key, value)) = part.split_once(':') else {
                continue;
            };
            let key = key.trim().trim_matches(['"', '\'']);
            if KEYS.contains(&key) {
                add_secret(value.trim().trim_matches(['"', '\'']));
            }
        }
    }
}

/// Remembers the credentials `config` authenticates with ([`add_secret`]) and checks that
/// a token file it names can be read (within
/// [`CREDENTIAL_FILE_TIMEOUT`](kevents_http::CREDENTIAL_FILE_TIMEOUT): a FIFO or a hung
/// mount is reported, not waited for) and is not empty.
pub async fn register_credentials(config: &HttpConfig) -> Result<(), Failure> {
    match &config.auth {
        Auth::Bearer(token) => add_secret(token.expose_secret()),
        Auth::Basic { password, .. } => add_secret(password.expose_secret()),
        Auth::BearerFile { path, .. } => {
            match read_credential_file("token file", path, MAX_TOKEN_FILE_BYTES).await {
                Ok(token) if !String::from_utf8_lossy(&token).trim().is_empty() => {
                    add_secret(&String::from_utf8_lossy(&token));
                }
                Ok(_) => {
                    return Err(Failure::new(
                        FailureKind::Config,
                        format!("the token file {} is empty", path.display()),
                    ));
                }
                Err(ConfigError::Read { source, .. }) => {
                    return Err(Failure::new(
                        FailureKind::Config,
                        format!("cannot read the token file {}: {source}", path.display()),
                    ));
                }
                Err(e) => return Err(Failure::new(FailureKind::Config, e)),
            }
        }
        // Obtained when a request needs it; never printed by kevents.
        Auth::Exec(_) | Auth::None => {}
    }
    if let Some(id) = &config.client_identity
        && let Ok(key) = std::str::from_utf8(id.key_pem.expose_secret())
    {
        for line in key.lines().filter(|l| !l.starts_with("-----")) {
            add_secret(line);
        }
    }
    Ok(())
}

/// A kubeconfig loading error that names the file once: most errors name it already
/// (`kubeconfig F, line 3, ...`, `kubeconfig F: contexts["x"]: not found`); the others (a CA
/// file that cannot be read, bad base64) get `kubeconfig F: ` in front.
pub fn kubeconfig_message(path: &std::path::Path, e: &ConfigError) -> String {
    let text = e.to_string();
    let name = format!("kubeconfig {}", path.display());
    if text.contains(&name) {
        text
    } else {
        format!("{name}: {text}")
    }
}

/// Checks that `namespace` is a DNS-1123 label, as the apiserver requires.
pub fn validate_namespace(namespace: &str) -> Result<(), Failure> {
    if kevents_core::name::is_dns1123_label(namespace) {
        Ok(())
    } else {
        Err(Failure::new(
            FailureKind::Config,
            format!(
                "invalid --namespace {namespace:?}: a namespace is a DNS-1123 label (at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit); nothing was sent"
            ),
        ))
    }
}

/// Where to reach a real cluster.
#[derive(Debug, Clone)]
pub struct KubeTarget {
    /// The kubeconfig file.
    pub kubeconfig: PathBuf,
    /// Its context (`None`: the current context).
    pub context: Option<String>,
}

impl KubeTarget {
    /// Loads the kubeconfig and context, remembers its credentials (so no output can show
    /// them) and checks a token file it names. Any problem is a [`FailureKind::Config`].
    pub async fn config(&self) -> Result<HttpConfig, Failure> {
        let path = &self.kubeconfig;
        // Bounded in time as in size: a kubeconfig that blocks is reported just below.
        if let Ok(text) = read_credential_file("kubeconfig", path, MAX_KUBECONFIG_BYTES).await {
            scan_kubeconfig_secrets(&String::from_utf8_lossy(&text));
        }
        let config = HttpConfig::from_kubeconfig(Some(path), self.context.as_deref())
            .await
            .map_err(|e| Failure::new(FailureKind::Config, kubeconfig_message(path, &e)))?;
        register_credentials(&config).await?;
        Ok(config)
    }

    /// Makes sure `namespace` exists, with `kubectl create namespace` (an existing one is
    /// fine), each request bounded by 10 s and kubectl itself by [`KUBECTL_LIMIT`]. Never
    /// fails: without `kubectl`, or when it fails (no right to create namespaces, ...), a
    /// note says so and the probe ([`probe_events`]) finds out whether the namespace can be
    /// written.
    pub fn ensure_namespace(&self, namespace: &str) {
        let mut cmd = Command::new("kubectl");
        cmd.arg("--kubeconfig").arg(&self.kubeconfig);
        if let Some(c) = &self.context {
            cmd.arg("--context").arg(c);
        }
        cmd.args(["--request-timeout=10s", "create", "namespace", namespace])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("note: kubectl not found; namespace {namespace} must already exist");
                return;
            }
            Err(e) => {
                eprintln!("note: cannot run kubectl: {}", one_line(&e.to_string()));
                return;
            }
        };
        let reader = child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = std::io::Read::read_to_string(&mut err, &mut s);
                s
            })
        });
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if started.elapsed() < KUBECTL_LIMIT => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
            }
        };
        let stderr = reader.and_then(|r| r.join().ok()).unwrap_or_default();
        match status {
            Some(s) if s.success() => eprintln!("created namespace {namespace}"),
            Some(_) if stderr.contains("AlreadyExists") || stderr.contains("already exists") => {}
            Some(_) => {
                let why: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
                eprintln!(
                    "note: kubectl create namespace {namespace} failed: {}",
                    sanitize::truncate(one_line(why.join("; ").trim()), 300)
                );
            }
            None => eprintln!(
                "note: kubectl create namespace {namespace} did not finish within {}; stopped",
                secs(KUBECTL_LIMIT)
            ),
        }
    }
}

/// A short reason for a failed request: `connection refused`, `TLS: ...`, `no answer
/// within 5 s`, `401 Unauthorized: ...`, ... (not yet escaped; [`Failure::new`] and
/// [`one_line`] do that).
pub fn describe(e: &SinkError) -> String {
    match e {
        SinkError::Status(s) => {
            let message = sanitize::truncate(s.message.clone(), 300);
            format!("{} {}: {message}", s.code, s.reason)
        }
        SinkError::Timeout(d) => format!("no answer within {}", secs(*d)),
        SinkError::Transport(t) => {
            let lower = t.to_ascii_lowercase();
            // reqwest's chain: `error sending request for url (...): client error (Connect):
            // <cause>`; the cause is what matters.
            let cause = t
                .rsplit_once("): ")
                .map_or(t.as_str(), |(_, c)| c)
                .trim()
                .to_owned();
            if lower.contains("connection refused") {
                "connection refused".into()
            } else if lower.contains("dns error") || lower.contains("failed to lookup") {
                sanitize::truncate(cause, 300)
            } else if lower.contains("certificate")
                || lower.contains("tls")
                || lower.contains("handshake")
                || lower.contains("ssl")
            {
                sanitize::truncate(format!("TLS: {cause}"), 300)
            } else if lower.contains("connection reset") {
                "connection reset".into()
            } else {
                sanitize::truncate(t.clone(), 300)
            }
        }
        other => sanitize::truncate(other.to_string(), 300),
    }
}

/// `5 s`, `1.5 s`.
pub fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// Runs `fut`, giving up after [`PROBE_TIMEOUT`] and two seconds more (the sink's own
/// timeouts should end it first).
/// A failed list as the sink error it stands for: a page's own error as is; a list that
/// broke its bounds (repeated continue token, too many pages, too large) as an unexpected
/// answer, with its explanation.
pub fn list_error(e: kevents_http::ListError) -> SinkError {
    match e {
        kevents_http::ListError::Sink(e) => e,
        other => SinkError::UnexpectedObject(other.to_string()),
    }
}

async fn bounded<T>(fut: impl Future<Output = Result<T, SinkError>>) -> Result<T, SinkError> {
    let limit = PROBE_TIMEOUT + Duration::from_secs(2);
    actix_rt::time::timeout(limit, fut)
        .await
        .unwrap_or(Err(SinkError::Timeout(limit)))
}

fn probe_sink(config: &HttpConfig) -> Result<HttpSink, Failure> {
    HttpSink::new(
        config
            .clone()
            .with_request_timeout(PROBE_TIMEOUT)
            .with_connect_timeout(PROBE_TIMEOUT),
    )
    .map_err(|e| Failure::new(FailureKind::Config, e))
}

fn refused(url: &str, what: &str, e: &SinkError) -> Failure {
    let why = match e.code() {
        Some(401) => format!(
            "the apiserver at {url} refused the credentials of the kubeconfig ({})",
            describe(e)
        ),
        Some(403) => format!(
            "the apiserver at {url} does not allow {what} ({})",
            describe(e)
        ),
        _ => format!(
            "cannot use the apiserver at {url} ({what}): {}",
            describe(e)
        ),
    };
    Failure::new(FailureKind::Unreachable, why)
}

/// The first half of the reachability probe: `GET /version`, each request bounded by
/// [`PROBE_TIMEOUT`]. Catches connection refused, DNS, TLS, timeouts and rejected
/// credentials within seconds, as a [`FailureKind::Unreachable`].
pub async fn probe_server(config: &HttpConfig) -> Result<ServerVersion, Failure> {
    let sink = probe_sink(config)?;
    let url = sink.base_url().to_string();
    // The credential first (token file, exec plugin, within their own time limits): a
    // plugin that is missing, fails or hangs is a configuration problem and says so, rather
    // than a request without an answer. The plugin's credential is cached for the writes.
    sink.authenticate().await.map_err(|e| {
        Failure::new(
            FailureKind::Config,
            format!("cannot get a credential for the apiserver at {url}: {e}"),
        )
    })?;
    bounded(sink.server_version())
        .await
        .map_err(|e| refused(&url, "GET /version", &e))
}

/// The second half of the probe: that events of `namespace` can be listed (`GET`) and
/// created. The create check sends an Event without a name, which the apiserver refuses
/// (422) only after authorising the request: nothing is stored, and a 401, a 403 or a
/// missing namespace (404, a [`FailureKind::Config`]) shows up now instead of as hundreds
/// of failed writes.
pub async fn probe_events(config: &HttpConfig, namespace: &str) -> Result<(), Failure> {
    let sink = probe_sink(config)?;
    let url = sink.base_url().to_string();
    bounded(async { sink.list_events(namespace).await.map_err(list_error) })
        .await
        .map_err(|e| {
            refused(
                &url,
                &format!("listing events in namespace {namespace}"),
                &e,
            )
        })?;
    let mut probe = Event::default();
    probe.metadata.namespace = namespace.to_owned();
    probe.involved_object.namespace = namespace.to_owned();
    match bounded(sink.create(&probe)).await {
        // Refused after authorisation, as it must be.
        Err(SinkError::Status(s)) if matches!(s.code, 400 | 409 | 422) => Ok(()),
        Err(e) if e.is_not_found() => Err(Failure::new(
            FailureKind::Config,
            format!(
                "namespace {namespace} does not exist on the apiserver at {url} ({}); create it (kubectl create namespace {namespace}) or choose another with --namespace",
                describe(&e)
            ),
        )),
        Err(e) => Err(refused(
            &url,
            &format!("creating events in namespace {namespace}"),
            &e,
        )),
        Ok(Stored::Returned(stored)) => {
            // A server that stores a nameless event: take it away again.
            let _ = bounded(sink.delete_event(namespace, &stored.metadata.name)).await;
            Ok(())
        }
        // Stored, but its echo was over the response limit: no name to delete it by.
        Ok(Stored::AsSent) => Ok(()),
    }
}

/// Whether a failed write says something about the apiserver's health (it cannot be
/// reached, does not answer, refuses us, or is overloaded), as opposed to a refusal of
/// one event (404 before a re-create, 409, 422).
fn is_trouble(e: &SinkError) -> bool {
    match e {
        SinkError::Status(s) => matches!(s.code, 401 | 403 | 429) || s.code >= 500,
        SinkError::Transport(_)
        | SinkError::Timeout(_)
        | SinkError::UnexpectedObject(_)
        | SinkError::AnswerMismatch(_) => true,
        SinkError::Construction(_) => false,
    }
}

#[derive(Default)]
struct HealthState {
    next_id: u64,
    /// Requests started and not finished, by id, with their start.
    outstanding: BTreeMap<u64, Instant>,
    last_success: Option<Instant>,
    /// When, why, and whether the write is retried.
    last_error: Option<(Instant, String, bool)>,
    troubles_since_success: u64,
}

/// What the writes to an apiserver went through: requests without an answer yet, the last
/// error, the last success. Fed by [`WatchedSink`].
#[derive(Default)]
pub struct Health {
    state: Mutex<HealthState>,
}

/// A copy of [`Health`] at one instant.
#[derive(Debug, Clone, Default)]
pub struct HealthReport {
    /// How long the oldest of them has been waiting.
    pub oldest: Option<Duration>,
    /// The last failed request: how long ago, and why ([`describe`]).
    pub last_error: Option<(Duration, String)>,
    /// Whether the last failed request's error is retried (a 403 or a 422 is not).
    pub last_error_retried: bool,
    /// How long ago the last request succeeded.
    pub since_success: Option<Duration>,
    /// Failures that say the server is in trouble since the last success.
    pub troubles_since_success: u64,
}

impl Health {
    fn lock(&self) -> MutexGuard<'_, HealthState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Now.
    pub fn report(&self) -> HealthReport {
        let s = self.lock();
        HealthReport {
            oldest: s.outstanding.values().min().map(Instant::elapsed),
            last_error: s
                .last_error
                .as_ref()
                .map(|(t, e, _)| (t.elapsed(), e.clone())),
            last_error_retried: s.last_error.as_ref().is_some_and(|(_, _, r)| *r),
            since_success: s.last_success.map(|t| t.elapsed()),
            troubles_since_success: s.troubles_since_success,
        }
    }

    fn start(self: &Arc<Self>) -> Outstanding {
        let mut s = self.lock();
        let id = s.next_id;
        s.next_id += 1;
        s.outstanding.insert(id, Instant::now());
        Outstanding {
            health: Arc::clone(self),
            id,
        }
    }

    fn finish<T>(&self, result: &Result<T, SinkError>) {
        let mut s = self.lock();
        match result {
            Ok(_) => {
                s.last_success = Some(Instant::now());
                s.troubles_since_success = 0;
            }
            Err(e) => {
                if is_trouble(e) {
                    s.troubles_since_success += 1;
                }
                let retried = e.disposition() == kevents_core::Disposition::Retry;
                s.last_error = Some((Instant::now(), describe(e), retried));
            }
        }
    }
}

impl HealthReport {
    /// Whether writes are in trouble: a failure that says so since the last success, or a
    /// request without an answer for longer than `slow`.
    pub fn failing(&self, slow: Duration) -> bool {
        self.troubles_since_success > 0 || self.oldest.is_some_and(|d| d > slow)
    }
}

/// Removes a request from [`Health`]'s outstanding set when it ends or is dropped.
struct Outstanding {
    health: Arc<Health>,
    id: u64,
}

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.health.lock().outstanding.remove(&self.id);
    }
}

/// An [`EventSink`] that reports every request's fate to a [`Health`].
#[derive(Clone)]
pub struct WatchedSink<S> {
    sink: S,
    health: Arc<Health>,
}

impl<S: EventSink> WatchedSink<S> {
    /// Watches `sink`'s requests into `health`.
    pub fn new(sink: S, health: Arc<Health>) -> Self {
        WatchedSink { sink, health }
    }

    fn watch(&self, fut: SinkFuture) -> SinkFuture {
        let health = Arc::clone(&self.health);
        Box::pin(async move {
            let outstanding = health.start();
            let result = fut.await;
            health.finish(&result);
            drop(outstanding);
            result
        })
    }
}

impl<S: EventSink> EventSink for WatchedSink<S> {
    fn create(&self, event: &Event) -> SinkFuture {
        self.watch(self.sink.create(event))
    }

    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        self.watch(self.sink.patch(event, patch))
    }
}

/// Explains on standard error, at most every few seconds, why writes are waiting.
pub struct WaitNotes {
    every: Duration,
    last: Option<Instant>,
    retry_sleep: Duration,
    retry_attempts: u32,
    tty: bool,
    /// Notes printed.
    pub printed: u64,
}

impl WaitNotes {
    /// Notes at most every `every`, for writes retried every `retry_sleep` up to
    /// `retry_attempts` times. On a terminal a note starts on a fresh line.
    pub fn new(every: Duration, retry_sleep: Duration, retry_attempts: u32, tty: bool) -> Self {
        WaitNotes {
            every,
            last: None,
            retry_sleep,
            retry_attempts,
            tty,
            printed: 0,
        }
    }

    /// Prints a note if one is due: `writes waiting: 12 queued (4 in flight); last error 2 s
    /// ago: connection refused; retrying every 10 s, at most 12 attempts per write`.
    pub fn note(&mut self, snapshots: &[StatsSnapshot], health: &HealthReport) {
        if self.last.is_some_and(|t| t.elapsed() < self.every) {
            return;
        }
        let queued: u64 = snapshots
            .iter()
            .flat_map(|s| s.sinks.iter())
            .map(|k| k.queued)
            .sum();
        let in_flight: u64 = snapshots
            .iter()
            .flat_map(|s| s.sinks.iter())
            .map(|k| k.in_flight)
            .sum();
        let mut line = format!("writes waiting: {queued} queued ({in_flight} in flight)");
        if let Some(oldest) = health.oldest.filter(|d| *d >= Duration::from_secs(1)) {
            line.push_str(&format!(
                "; oldest request unanswered for {}",
                secs(Duration::from_secs(oldest.as_secs()))
            ));
        }
        match &health.last_error {
            Some((ago, why)) => {
                line.push_str(&format!(
                    "; last error {} ago: {}",
                    secs(Duration::from_secs(ago.as_secs())),
                    sanitize::truncate(one_line(why), 200),
                ));
                // Only what is retried is said to be: a refusal (403, 422) ends its write.
                if why.starts_with("429") {
                    // A 429 is retried as soon as the write budget (lowered by it) allows.
                    line.push_str("; throttled: retried as the write budget allows");
                } else if health.last_error_retried {
                    line.push_str(&format!(
                        "; retrying every {}, at most {} attempts per write",
                        secs(self.retry_sleep),
                        self.retry_attempts
                    ));
                } else {
                    line.push_str("; that write is not retried (the server refused it)");
                }
            }
            None => line.push_str("; no error yet"),
        }
        if self.tty {
            eprintln!();
        }
        eprintln!("{line}");
        self.last = Some(Instant::now());
        self.printed += 1;
    }
}

/// Whether a pipeline has nothing left to do: the intake is empty, everything taken from it
/// was distributed, and no watcher (sink chains included) holds an event.
pub fn is_idle(s: &StatsSnapshot) -> bool {
    s.intake_depth == 0 && s.broadcast == s.recorded && s.watchers.iter().all(|w| w.depth == 0)
}

/// Waits until every pipeline is idle ([`is_idle`]) or `timeout` passed. Returns whether they
/// all became idle. `observe` sees every snapshot taken (e.g. to track queue depths).
pub async fn wait_idle(
    pipelines: &[&Pipeline],
    timeout: Duration,
    mut observe: impl FnMut(&StatsSnapshot),
) -> bool {
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        let mut idle = true;
        for p in pipelines {
            let s = p.stats();
            observe(&s);
            idle &= is_idle(&s);
        }
        if idle {
            return true;
        }
        if start.elapsed() >= timeout {
            return false;
        }
        actix_rt::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

/// Counters of several pipelines (one sink chain each), summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Occurrences accepted into the intakes.
    pub queued: u64,
    /// Refused as invalid.
    pub dropped_invalid: u64,
    /// Refused because an intake was full.
    pub dropped_intake_full: u64,
    /// Refused after shutdown.
    pub dropped_after_shutdown: u64,
    /// Events distributed by the broadcasters.
    pub broadcast: u64,
    /// Events accepted by the sink chains' queues.
    pub accepted: u64,
    /// Events a sink chain missed because its queue was full.
    pub dropped_queue_full: u64,
    /// Events a sink chain missed because it had stopped.
    pub dropped_closed: u64,
    /// Skipped by the spam filter.
    pub spam_filtered: u64,
    /// Skipped by the spam filter, their state held to be written later (deferred spam
    /// tails; what is still held).
    pub deferred: u64,
    /// Events held in the sink chains' overflow tables (coalesce-if-full).
    pub overflow: u64,
    /// Folded into an aggregate event.
    pub aggregated: u64,
    /// Writes ending in a CREATE.
    pub created: u64,
    /// Writes ending in a PATCH.
    pub patched: u64,
    /// Writes whose PATCH found nothing and that were re-created.
    pub recreated: u64,
    /// Writes refused by the server (not retried).
    pub rejected: u64,
    /// Writes given up after the retry budget.
    pub retry_exhausted: u64,
    /// Writes still queued at the shutdown deadline.
    pub abandoned: u64,
    /// Writes replaced by a newer write of the same event before they started (their
    /// occurrences are in the newer write's count).
    pub superseded: u64,
    /// Write attempts (a re-create is one attempt of two requests).
    pub attempts: u64,
    /// Attempts that re-sent a write after a failed attempt of it.
    pub retries: u64,
    /// Supervisor restarts of sink actors.
    pub restarts: u64,
}

impl Totals {
    /// Sums the counters of `snapshots` (every watcher named `sink:*`, every sink).
    pub fn of<'a>(snapshots: impl IntoIterator<Item = &'a StatsSnapshot>) -> Totals {
        let mut t = Totals::default();
        for s in snapshots {
            t.queued += s.recorded;
            t.dropped_invalid += s.dropped_invalid;
            t.dropped_intake_full += s.dropped_intake_full;
            t.dropped_after_shutdown += s.dropped_after_shutdown;
            t.broadcast += s.broadcast;
            for w in s.watchers.iter().filter(|w| w.name.starts_with("sink:")) {
                t.accepted += w.accepted;
                t.dropped_queue_full += w.dropped_full;
                t.dropped_closed += w.dropped_closed;
                t.overflow += w.overflow;
            }
            for k in &s.sinks {
                t.spam_filtered += k.spam_filtered;
                t.deferred += k.deferred;
                t.aggregated += k.aggregated;
                t.created += k.created;
                t.patched += k.patched;
                t.recreated += k.recreated;
                t.rejected += k.rejected;
                t.retry_exhausted += k.retry_exhausted;
                t.abandoned += k.abandoned;
                t.superseded += k.superseded;
                t.attempts += k.attempts;
                t.retries += k.retries;
                t.restarts += k.restarts;
            }
        }
        t
    }

    /// Writes that reached the server.
    pub fn delivered(&self) -> u64 {
        self.created + self.patched + self.recreated
    }

    /// Writes given up.
    pub fn failed(&self) -> u64 {
        self.rejected + self.retry_exhausted + self.abandoned
    }

    /// HTTP requests made (a re-create is a PATCH and a CREATE).
    pub fn requests(&self) -> u64 {
        self.attempts + self.recreated
    }

    /// Requests that re-sent a write after a failed attempt (counted by the sink actors: a
    /// write abandoned in its first attempt made none).
    pub fn retries(&self) -> u64 {
        self.retries
    }

    /// Checks that every occurrence is accounted for exactly once, given how many calls were
    /// made (`emitted`) and how many of them the recorder refused before counting (none: the
    /// pipeline counts refusals itself). Returns the first identity that does not hold.
    pub fn check(&self, emitted: u64) -> Result<(), String> {
        let refused = self.dropped_invalid + self.dropped_intake_full + self.dropped_after_shutdown;
        let checks = [
            ("emitted = queued + refused", emitted, self.queued + refused),
            ("queued = broadcast", self.queued, self.broadcast),
            (
                "broadcast = accepted + overflow + dropped by a sink queue",
                self.broadcast,
                self.accepted + self.overflow + self.dropped_queue_full + self.dropped_closed,
            ),
            (
                "accepted = spam-filtered + deferred + delivered + failed + superseded",
                self.accepted,
                self.spam_filtered
                    + self.deferred
                    + self.delivered()
                    + self.failed()
                    + self.superseded,
            ),
        ];
        for (what, left, right) in checks {
            if left != right {
                return Err(format!("{what} does not hold: {left} != {right}"));
            }
        }
        Ok(())
    }
}
