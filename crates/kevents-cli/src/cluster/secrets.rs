//! The credentials the process knows (tokens, passwords, key lines of the kubeconfig in use)
//! and the one function every text from outside goes through before it is printed
//! ([`one_line`]): server messages, error chains and kubectl's output can quote a
//! credential, and may carry control characters that would rewrite the terminal.

use std::sync::{Mutex, MutexGuard};

use crate::sanitize;

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

/// Standard error with every known credential ([`add_secret`]) removed from each write: the
/// log's writer, so that a dependency's trace (async-nats logs its CONNECT, with the
/// password or token, at `trace`) never prints one. The log formats each line whole and
/// writes it at once, so a secret is never split between two writes.
pub struct RedactedStderr;

impl std::io::Write for RedactedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(redact(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
