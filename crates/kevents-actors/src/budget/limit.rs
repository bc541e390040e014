//! What a 429 says it limits, and where a write goes as the apiserver's limits see it.
//!
//! The `EventRateLimit` admission plugin names the limit that refused a write in its
//! message (`Too many requests: limit reached on type Namespace for key NS`; several
//! limits that refused it at once are listed in one message, `[..., ...]`). A `Namespace`
//! limit covers the writes to that namespace, a `SourceAndObject` one the events of one
//! source and object; `User` and `Server` cover everything this client writes, and so does
//! a 429 that names no limit (API Priority and Fairness, max-in-flight).

pub(crate) use crate::telemetry::Limit;

/// The widest limit a 429's message names; [`Limit::Everything`] when it names none.
pub(crate) fn of_message(message: &str) -> Limit {
    let mut widest = None;
    for part in message.split("limit reached on type ").skip(1) {
        let limit = match part.split_whitespace().next() {
            Some("Namespace") => Limit::Namespace,
            Some("SourceAndObject") => Limit::Object,
            _ => Limit::Everything,
        };
        widest = Some(widest.map_or(limit, |w: Limit| w.max(limit)));
    }
    widest.unwrap_or(Limit::Everything)
}

/// Where a write goes, as the apiserver's event limits see it.
#[derive(Clone, Copy)]
pub(crate) struct WriteScope<'a> {
    /// The event's namespace.
    pub(crate) namespace: &'a str,
    /// The write, for the hash of its event's source and object: computed only when an
    /// object is paused or a `SourceAndObject` 429 names one (not on every attempt).
    pub(crate) write: &'a dyn Scoped,
}

impl WriteScope<'_> {
    /// A hash of the event's source (or reporting controller and instance) and object.
    pub(crate) fn object(&self) -> u64 {
        self.write.object_hash()
    }
}

impl std::fmt::Debug for WriteScope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteScope")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// A write that knows the object its event is about.
pub(crate) trait Scoped {
    /// A hash of the event's source and object (EventRateLimit's `SourceAndObject` key).
    fn object_hash(&self) -> u64;
}

/// Hashes the parts of a source-and-object key, each length-prefixed (no two keys share a
/// hash input).
pub(crate) fn object_hash<'a>(parts: impl IntoIterator<Item = &'a str>) -> u64 {
    use std::hash::Hasher;
    // Once per attempt of an HTTP write: SipHash's cost does not matter here.
    let mut h = std::hash::DefaultHasher::new();
    for p in parts {
        h.write_usize(p.len());
        h.write(p.as_bytes());
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_eventratelimit_messages() {
        let of = of_message;
        assert_eq!(
            of("Too many requests: limit reached on type Namespace for key bench"),
            Limit::Namespace
        );
        assert_eq!(
            of(
                "Too many requests: limit reached on type SourceAndObject for key kubeletnode-1Podnsweb"
            ),
            Limit::Object
        );
        assert_eq!(
            of("Too many requests: limit reached on type User for key admin"),
            Limit::Everything
        );
        assert_eq!(
            of("Too many requests: limit reached on type Server for key "),
            Limit::Everything
        );
        // Two limits at once: the wider one.
        assert_eq!(
            of(
                "Too many requests: [limit reached on type SourceAndObject for key k, limit reached on type Namespace for key ns]"
            ),
            Limit::Namespace
        );
        // APF, max-in-flight, anything else.
        assert_eq!(
            of("Too many requests, please try again later."),
            Limit::Everything
        );
        assert_eq!(of(""), Limit::Everything);
    }

    #[test]
    fn object_hashes_are_unambiguous() {
        assert_ne!(object_hash(["ab", "c"]), object_hash(["a", "bc"]));
        assert_eq!(object_hash(["a", "b"]), object_hash(["a", "b"]));
    }
}
