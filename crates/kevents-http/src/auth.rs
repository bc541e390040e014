//! The credential of every request: the `Authorization` header, with token-file rotation,
//! and the token and/or client certificate of an exec credential plugin (cached until
//! shortly before it expires, one plugin run shared by concurrent requests, run again after
//! a 401). Header values are marked sensitive, so neither `http`'s nor `reqwest`'s `Debug`
//! shows them.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use http::HeaderValue;
use secrecy::ExposeSecret;

use crate::config::{Auth, ClientIdentity, ConfigError, MAX_TOKEN_FILE_BYTES, read_capped};
use crate::exec::ExecConfig;

/// Why the current credential could not be produced (a token file that cannot be read, an
/// exec plugin that failed). Never contains a credential.
#[derive(Debug)]
pub(crate) struct CredentialError(pub(crate) String);

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

fn sensitive(value: String) -> Option<HeaderValue> {
    let mut v = HeaderValue::try_from(value).ok()?;
    v.set_sensitive(true);
    Some(v)
}

fn bearer(token: &str) -> Option<HeaderValue> {
    sensitive(format!("Bearer {token}"))
}

struct Cached {
    header: HeaderValue,
    read_at: Instant,
    modified: Option<SystemTime>,
}

pub(crate) struct TokenFile {
    path: PathBuf,
    refresh: Duration,
    cached: Mutex<Option<Cached>>,
}

impl TokenFile {
    fn read(&self) -> Result<Cached, CredentialError> {
        let err = |m: String| CredentialError(format!("token file {}: {m}", self.path.display()));
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        // At most MAX_TOKEN_FILE_BYTES: an endless file (a device, a runaway writer) is
        // refused, not read until memory runs out.
        let bytes = read_capped("token file", &self.path, MAX_TOKEN_FILE_BYTES).map_err(|e| {
            CredentialError(match e {
                ConfigError::Read { source, .. } => {
                    format!("token file {}: {source}", self.path.display())
                }
                other => other.to_string(),
            })
        })?;
        let text = std::str::from_utf8(&bytes).map_err(|_| err("not UTF-8 text".into()))?;
        let token = text.trim();
        if token.is_empty() {
            return Err(err("empty".into()));
        }
        let header = bearer(token).ok_or_else(|| err("not a valid header value".into()))?;
        tracing::debug!(path = %self.path.display(), "read bearer token file");
        Ok(Cached {
            header,
            read_at: Instant::now(),
            modified,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Cached>> {
        // The cache is a plain value; a panic elsewhere cannot leave it inconsistent.
        self.cached.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The token, read again when older than `refresh` or when the file's mtime changed.
    fn current(&self) -> Result<HeaderValue, CredentialError> {
        let mut cached = self.lock();
        if let Some(c) = cached.as_ref() {
            let fresh = c.read_at.elapsed() < self.refresh;
            let same_file = std::fs::metadata(&self.path)
                .and_then(|m| m.modified())
                .ok()
                == c.modified;
            if fresh && same_file {
                return Ok(c.header.clone());
            }
        }
        match self.read() {
            Ok(c) => {
                let h = c.header.clone();
                *cached = Some(c);
                Ok(h)
            }
            // A file briefly missing during a rotation: keep using the last good token.
            Err(e) => match cached.as_ref() {
                Some(c) => {
                    tracing::warn!(error = %e.0, "using the previous bearer token");
                    Ok(c.header.clone())
                }
                None => Err(e),
            },
        }
    }

    /// Reads the file now; returns the new header if it differs from `used`.
    fn reload_if_changed(&self, used: &HeaderValue) -> Option<HeaderValue> {
        let fresh = self.read().ok()?;
        let h = fresh.header.clone();
        *self.lock() = Some(fresh);
        (h.as_bytes() != used.as_bytes()).then_some(h)
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
}

/// An exec credential plugin and its cached credential. The cache is behind an async mutex
/// held while the plugin runs (never during an HTTP request): concurrent requests that need
/// a credential wait for the same run and then use its result.
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

    async fn current(&self) -> Result<Credential, CredentialError> {
        let mut state = self.state.lock().await;
        if let Some(c) = &state.current
            && self.fresh(c)
        {
            return Ok(c.credential.clone());
        }
        self.refresh(&mut state).await
    }

    /// Runs the plugin (the caller holds the lock) and caches what it returned. A failed run
    /// keeps using a cached credential that has not expired yet (it was only due for a
    /// refresh).
    async fn refresh(&self, state: &mut ExecState) -> Result<Credential, CredentialError> {
        let result = self.config.run().await;
        let credential = match result {
            Ok(c) => c,
            Err(e) => {
                if let Some(c) = &state.current
                    && c.expires.is_none_or(|e| SystemTime::now() < e)
                {
                    tracing::warn!(error = %e, "exec credential plugin failed; using the previous credential until it expires");
                    return Ok(c.credential.clone());
                }
                return Err(CredentialError(e.to_string()));
            }
        };
        let header = match &credential.token {
            Some(t) => Some(bearer(t.expose_secret()).ok_or_else(|| {
                CredentialError(format!(
                    "exec credential plugin {}: the token is not a valid header value",
                    self.config.command
                ))
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
        state.current = Some(ExecCached {
            credential: fresh.clone(),
            expires: credential.expiration,
        });
        Ok(fresh)
    }

    /// After a 401 with `used`: a credential from a newer run if another request already
    /// refreshed it, else the plugin runs again; `None` if that gives the same credential (or
    /// fails).
    async fn after_unauthorized(&self, used: &Credential) -> Option<Credential> {
        let mut state = self.state.lock().await;
        if let Some(c) = &state.current
            && c.credential.generation != used.generation
            && self.fresh(c)
        {
            return Some(c.credential.clone());
        }
        // The refused credential is expired (a failed run must not fall back to it), but kept
        // so that the same certificate returned again keeps its client and connections.
        if let Some(c) = state.current.as_mut() {
            c.expires = Some(std::time::UNIX_EPOCH);
        }
        match self.refresh(&mut state).await {
            Ok(c) if !c.same_as(used) => Some(c),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e.0, "401, and the exec credential plugin failed");
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
                AuthHeader::Static(bearer(token.expose_secret().trim()).ok_or_else(invalid)?)
            }
            Auth::Basic { username, password } => {
                let raw = format!("{username}:{}", password.expose_secret());
                let encoded = base64::engine::general_purpose::STANDARD.encode(raw.as_bytes());
                AuthHeader::Static(sensitive(format!("Basic {encoded}")).ok_or_else(invalid)?)
            }
            Auth::BearerFile { path, refresh } => AuthHeader::File(TokenFile {
                path: path.clone(),
                refresh: *refresh,
                cached: Mutex::new(None),
            }),
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
            AuthHeader::File(f) => f.current().map(header),
            AuthHeader::Exec(e) => e.current().await,
        }
    }

    /// After a 401: a token file is read at once, an exec plugin run again; a changed
    /// credential is returned for one more try.
    pub(crate) async fn after_unauthorized(&self, used: &Credential) -> Option<Credential> {
        match (self, &used.header) {
            (AuthHeader::File(f), Some(h)) => f.reload_if_changed(h).map(|h| Credential {
                header: Some(h),
                ..Credential::default()
            }),
            (AuthHeader::Exec(e), _) => e.after_unauthorized(used).await,
            _ => None,
        }
    }
}
