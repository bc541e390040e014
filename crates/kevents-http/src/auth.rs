//! The credential of every request: the `Authorization` header, with token-file rotation,
//! and the token and/or client certificate of an exec credential plugin (cached until
//! shortly before it expires, one plugin run shared by concurrent requests, run again after
//! a 401). Header values are marked sensitive, so neither `http`'s nor `reqwest`'s `Debug`
//! shows them.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use http::HeaderValue;
use secrecy::ExposeSecret;

use crate::config::{Auth, ClientIdentity, ConfigError, check_bearer_token};
use crate::exec::{EXEC_INITIAL_BACKOFF, EXEC_MAX_BACKOFF, ExecConfig, ExecError};
use crate::token_file::{TokenFile, bearer_header, sensitive};

/// Why the current credential could not be produced (a token file that cannot be read, an
/// exec plugin that failed). Never contains a credential.
#[derive(Debug, Clone)]
pub(crate) enum CredentialError {
    /// A token file (its path is in the message).
    File(String),
    /// An exec credential plugin (its command is in the error).
    Exec(ExecError),
}

impl std::fmt::Display for CredentialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialError::File(m) => f.write_str(m),
            CredentialError::Exec(e) => e.fmt(f),
        }
    }
}

impl From<CredentialError> for ConfigError {
    fn from(e: CredentialError) -> Self {
        match e {
            CredentialError::File(m) => ConfigError::Credential(m),
            CredentialError::Exec(e) => ConfigError::ExecRun(e),
        }
    }
}

/// What one request is sent with.
#[derive(Clone, Default)]
pub(crate) struct Credential {
    /// The `Authorization` header.
    pub(crate) header: Option<HeaderValue>,
    /// A client certificate from an exec plugin; it replaces the configuration's.
    pub(crate) identity: Option<Arc<ClientIdentity>>,
    /// The exec plugin run it comes from (0: not from a plugin).
    generation: u64,
}

impl Credential {
    fn same_as(&self, other: &Credential) -> bool {
        let headers = match (&self.header, &other.header) {
            (Some(a), Some(b)) => a.as_bytes() == b.as_bytes(),
            (None, None) => true,
            _ => false,
        };
        let identities = match (&self.identity, &other.identity) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        headers && identities
    }
}

struct ExecCached {
    credential: Credential,
    expires: Option<SystemTime>,
}

#[derive(Default)]
struct ExecState {
    current: Option<ExecCached>,
    /// Runs that returned a credential.
    generation: u64,
    /// No run before this (a back-off after a troubled run: failed, expired, due at once).
    not_before: Option<Instant>,
    /// The back-off after the next troubled run (doubled each time, reset by a good run).
    backoff: Duration,
    /// The last run's error, given to requests during its back-off.
    last_error: Option<ExecError>,
}

/// An exec credential plugin and its cached credential. The cache is behind an async mutex
/// held while the plugin runs (never during an HTTP request): concurrent requests that need
/// a credential wait for the same run and then use its result. A run that fails, or returns a
/// credential already expired or due for a refresh at once, is followed by a back-off
/// ([`EXEC_INITIAL_BACKOFF`] doubling up to [`EXEC_MAX_BACKOFF`]) during which the plugin is
/// not run again, whatever the number of requests: they use the credential while it has not
/// expired, else fail with the last run's error (a transport error, retried).
pub(crate) struct ExecAuth {
    config: ExecConfig,
    state: tokio::sync::Mutex<ExecState>,
}

impl ExecAuth {
    /// Usable without a refresh: no expiry, or more than the margin before it.
    fn fresh(&self, c: &ExecCached) -> bool {
        c.expires
            .is_none_or(|e| SystemTime::now() + self.config.refresh_margin < e)
    }

    /// Usable at all: not expired yet.
    fn unexpired(c: &ExecCached) -> bool {
        c.expires.is_none_or(|e| SystemTime::now() < e)
    }

    /// Whether a back-off forbids running the plugin now.
    fn backing_off(state: &ExecState) -> bool {
        state.not_before.is_some_and(|t| Instant::now() < t)
    }

    /// A troubled run: no run for the current back-off, the next one twice as long.
    fn troubled(state: &mut ExecState) {
        let wait = state
            .backoff
            .max(EXEC_INITIAL_BACKOFF)
            .min(EXEC_MAX_BACKOFF);
        state.not_before = Some(Instant::now() + wait);
        state.backoff = (wait * 2).min(EXEC_MAX_BACKOFF);
        tracing::debug!(
            backoff_ms = wait.as_millis() as u64,
            "exec credential plugin: backing off"
        );
    }

    async fn current(&self) -> Result<Credential, CredentialError> {
        let mut state = self.state.lock().await;
        if let Some(c) = &state.current
            && self.fresh(c)
        {
            return Ok(c.credential.clone());
        }
        if Self::backing_off(&state) {
            if let Some(c) = state.current.as_ref().filter(|c| Self::unexpired(c)) {
                return Ok(c.credential.clone());
            }
            let e = state
                .last_error
                .clone()
                .unwrap_or_else(|| ExecError::Expired {
                    command: self.config.command.clone(),
                });
            return Err(CredentialError::Exec(e));
        }
        self.refresh(&mut state).await
    }

    /// Runs the plugin (the caller holds the lock) and caches what it returned. A failed run
    /// keeps using a cached credential that has not expired yet (it was only due for a
    /// refresh). A failed run, or a credential already expired or due for a refresh, starts
    /// (or lengthens) the back-off; a good run ends it.
    async fn refresh(&self, state: &mut ExecState) -> Result<Credential, CredentialError> {
        let result = self.config.run().await.and_then(|c| match c.expiration {
            Some(e) if e <= SystemTime::now() => Err(ExecError::Expired {
                command: self.config.command.clone(),
            }),
            _ => Ok(c),
        });
        let credential = match result {
            Ok(c) => c,
            Err(e) => {
                Self::troubled(state);
                state.last_error = Some(e.clone());
                if let Some(c) = &state.current
                    && Self::unexpired(c)
                {
                    tracing::warn!(error = %e, "exec credential plugin failed; using the previous credential until it expires");
                    return Ok(c.credential.clone());
                }
                return Err(CredentialError::Exec(e));
            }
        };
        let header = match &credential.token {
            Some(t) => Some(bearer_header(t.expose_secret()).ok_or_else(|| {
                CredentialError::Exec(ExecError::BadOutput {
                    command: self.config.command.clone(),
                    problem: "the token is not a valid header value".into(),
                })
            })?),
            None => None,
        };
        // The same certificate as before keeps the same identity (and the same connections).
        let identity = credential.client_identity.map(|new| {
            match state
                .current
                .as_ref()
                .and_then(|c| c.credential.identity.clone())
            {
                Some(old)
                    if old.cert_pem == new.cert_pem
                        && old.key_pem.expose_secret() == new.key_pem.expose_secret() =>
                {
                    old
                }
                _ => Arc::new(new),
            }
        });
        state.generation += 1;
        let fresh = Credential {
            header,
            identity,
            generation: state.generation,
        };
        tracing::debug!(
            generation = state.generation,
            token = fresh.header.is_some(),
            client_certificate = fresh.identity.is_some(),
            expires_in_s = credential
                .expiration
                .and_then(|e| e.duration_since(SystemTime::now()).ok())
                .map(|d| d.as_secs()),
            "exec credential plugin returned a credential"
        );
        let cached = ExecCached {
            credential: fresh.clone(),
            expires: credential.expiration,
        };
        state.last_error = None;
        if self.fresh(&cached) {
            state.not_before = None;
            state.backoff = Duration::ZERO;
        } else {
            // Due for a refresh at once (it expires within the margin): used, but the plugin
            // is not run again for every request.
            state.last_error = Some(ExecError::Expired {
                command: self.config.command.clone(),
            });
            Self::troubled(state);
        }
        state.current = Some(cached);
        Ok(fresh)
    }

    /// After a 401 with `used`: a credential from a newer run if another request already
    /// refreshed it, else the plugin runs again (unless backing off); `None` if that gives the
    /// same credential (which starts a back-off) or fails.
    async fn after_unauthorized(&self, used: &Credential) -> Option<Credential> {
        let mut state = self.state.lock().await;
        if let Some(c) = &state.current
            && c.credential.generation != used.generation
            && self.fresh(c)
        {
            return Some(c.credential.clone());
        }
        if Self::backing_off(&state) {
            tracing::debug!(
                "401, and the exec credential plugin is backing off: not run again yet"
            );
            return None;
        }
        // The refused credential is expired (a failed run must not fall back to it), but kept
        // so that the same certificate returned again keeps its client and connections.
        if let Some(c) = state.current.as_mut() {
            c.expires = Some(std::time::UNIX_EPOCH);
        }
        match self.refresh(&mut state).await {
            Ok(c) if !c.same_as(used) => Some(c),
            Ok(_) => {
                Self::troubled(&mut state);
                None
            }
            Err(e) => {
                tracing::warn!(error = %e, "401, and the exec credential plugin failed");
                None
            }
        }
    }
}

/// Most exec plugin configurations whose credential cache is kept.
const MAX_SHARED_EXEC: usize = 64;

/// The cache of an exec plugin configuration, shared by every sink built with an equal
/// configuration (client-go keeps one authenticator per configuration too): a probe sink, the
/// pipeline's sink and a list sink run the plugin once between them.
fn shared_exec(config: &ExecConfig) -> Arc<ExecAuth> {
    static SHARED: Mutex<Vec<Arc<ExecAuth>>> = Mutex::new(Vec::new());
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(found) = shared.iter().find(|a| &a.config == config) {
        return found.clone();
    }
    if shared.len() >= MAX_SHARED_EXEC {
        shared.remove(0);
    }
    let auth = Arc::new(ExecAuth {
        config: config.clone(),
        state: tokio::sync::Mutex::new(ExecState::default()),
    });
    shared.push(auth.clone());
    auth
}

/// The credential source of a sink.
pub(crate) enum AuthHeader {
    None,
    Static(HeaderValue),
    File(TokenFile),
    Exec(Arc<ExecAuth>),
}

impl AuthHeader {
    pub(crate) fn new(auth: &Auth) -> Result<Self, ConfigError> {
        let invalid = || ConfigError::Tls("credential is not a valid HTTP header value".into());
        Ok(match auth {
            Auth::None => AuthHeader::None,
            Auth::Bearer(token) => {
                let token = token.expose_secret().trim();
                check_bearer_token(token, "bearer token")?;
                AuthHeader::Static(bearer_header(token).ok_or_else(|| {
                    ConfigError::InvalidToken {
                        origin: "bearer token".into(),
                        problem: "it is not a valid HTTP header value".into(),
                    }
                })?)
            }
            Auth::Basic { username, password } => {
                let raw = format!("{username}:{}", password.expose_secret());
                let encoded = base64::engine::general_purpose::STANDARD.encode(raw.as_bytes());
                AuthHeader::Static(sensitive(format!("Basic {encoded}")).ok_or_else(invalid)?)
            }
            Auth::BearerFile { path, refresh } => {
                AuthHeader::File(TokenFile::new(path.clone(), *refresh))
            }
            Auth::Exec(config) => AuthHeader::Exec(shared_exec(config)),
        })
    }

    pub(crate) fn kind(&self) -> &'static str {
        match self {
            AuthHeader::None => "none",
            AuthHeader::Static(_) => "static",
            AuthHeader::File(_) => "token-file",
            AuthHeader::Exec(_) => "exec",
        }
    }

    pub(crate) async fn current(&self) -> Result<Credential, CredentialError> {
        let header = |h| Credential {
            header: Some(h),
            ..Credential::default()
        };
        match self {
            AuthHeader::None => Ok(Credential::default()),
            AuthHeader::Static(h) => Ok(header(h.clone())),
            AuthHeader::File(f) => f.current().await.map(header).map_err(CredentialError::File),
            AuthHeader::Exec(e) => e.current().await,
        }
    }

    /// After a 401: a token file is read at once, an exec plugin run again; a changed
    /// credential is returned for one more try.
    pub(crate) async fn after_unauthorized(&self, used: &Credential) -> Option<Credential> {
        match (self, &used.header) {
            (AuthHeader::File(f), Some(h)) => f.reload_if_changed(h).await.map(|h| Credential {
                header: Some(h),
                ..Credential::default()
            }),
            (AuthHeader::Exec(e), _) => e.after_unauthorized(used).await,
            _ => None,
        }
    }
}
