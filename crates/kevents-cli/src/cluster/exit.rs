//! What a failed command tells: a [`FailureKind`] for each exit code of `docs/demo.md` and a
//! [`Failure`] carrying it with one line saying why. Every message is made a safe line when
//! the failure is built ([`one_line`]), so no caller can print a credential or a control
//! character by accident.

use std::fmt;

use super::secrets::one_line;

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
    /// `kevents export`: the history's store cannot keep the history (its stream or bucket
    /// was deleted, or is configured to drop records), or another writer holds it: exit
    /// code 6. Nothing exported before was lost.
    Store,
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
            FailureKind::Store => 6,
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
