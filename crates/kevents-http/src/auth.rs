//! The `Authorization` header of every request, with token-file rotation. Header values
//! are marked sensitive, so neither `http`'s nor `reqwest`'s `Debug` shows them.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use http::HeaderValue;
use secrecy::ExposeSecret;

use crate::config::{Auth, ConfigError, MAX_TOKEN_FILE_BYTES, read_capped};

/// Why the current credential could not be produced.
#[derive(Debug)]
pub(crate) struct TokenFileError(pub(crate) String);

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
    fn read(&self) -> Result<Cached, TokenFileError> {
        let err = |m: String| TokenFileError(format!("token file {}: {m}", self.path.display()));
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        // At most MAX_TOKEN_FILE_BYTES: an endless file (a device, a runaway writer) is
        // refused, not read until memory runs out.
        let bytes = read_capped("token file", &self.path, MAX_TOKEN_FILE_BYTES).map_err(|e| {
            TokenFileError(match e {
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
    fn current(&self) -> Result<HeaderValue, TokenFileError> {
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

/// The credential source of a sink.
pub(crate) enum AuthHeader {
    None,
    Static(HeaderValue),
    File(TokenFile),
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
        })
    }

    pub(crate) fn kind(&self) -> &'static str {
        match self {
            AuthHeader::None => "none",
            AuthHeader::Static(_) => "static",
            AuthHeader::File(_) => "token-file",
        }
    }

    pub(crate) fn current(&self) -> Result<Option<HeaderValue>, TokenFileError> {
        match self {
            AuthHeader::None => Ok(None),
            AuthHeader::Static(h) => Ok(Some(h.clone())),
            AuthHeader::File(f) => f.current().map(Some),
        }
    }

    /// After a 401: a token file is read at once; a changed token is returned for one more try.
    pub(crate) fn after_unauthorized(&self, used: Option<&HeaderValue>) -> Option<HeaderValue> {
        match (self, used) {
            (AuthHeader::File(f), Some(used)) => f.reload_if_changed(used),
            _ => None,
        }
    }
}
