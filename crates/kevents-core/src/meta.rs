//! What the models of both APIs share: the part of `metav1.ObjectMeta` an event uses, and
//! the `serde` adapters for Kubernetes' two time encodings (`metav1.Time`, `metav1.MicroTime`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::time::Time;

/// The part of `metav1.ObjectMeta` an event uses. Unknown fields from the server are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    /// Object name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Object namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// UID assigned by the server.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// resourceVersion assigned by the server.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// Set by the server; clients send `null`.
    #[serde(with = "serde_time::secs")]
    pub creation_timestamp: Option<Time>,
    /// Annotations (sorted by key on the wire, as Go sorts map keys).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl ObjectMeta {
    /// Every field back to its default, keeping the strings' buffers: part of the pipeline's
    /// fast form of [`EventFactory::make`](crate::EventFactory::make) (not part of the public
    /// API).
    pub(crate) fn reset(&mut self) {
        let ObjectMeta {
            name,
            namespace,
            uid,
            resource_version,
            creation_timestamp,
            annotations,
        } = self;
        name.clear();
        namespace.clear();
        uid.clear();
        resource_version.clear();
        *creation_timestamp = None;
        annotations.clear();
    }
}

/// `serde` adapters for `Option<Time>` in Kubernetes' two encodings.
pub mod serde_time {
    use crate::time::Time;
    use serde::{Deserialize, Deserializer, Serializer};

    fn de<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
        match Option::<String>::deserialize(d)? {
            None => Ok(None),
            Some(s) if s.is_empty() => Ok(None),
            Some(s) => Time::parse_rfc3339(&s)
                .map(Some)
                .map_err(serde::de::Error::custom),
        }
    }

    /// `metav1.Time`: whole seconds, `null` when zero.
    pub mod secs {
        use super::*;
        /// Serialises as `"2021-01-01T00:00:01Z"` or `null`.
        pub fn serialize<S: Serializer>(t: &Option<Time>, s: S) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.serialize_str(&t.to_rfc3339()),
                None => s.serialize_none(),
            }
        }
        /// Parses RFC 3339 or `null`.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
            de(d)
        }
    }

    /// `metav1.MicroTime`: six fractional digits, `null` when zero.
    pub mod micros {
        use super::*;
        /// Serialises as `"2021-01-01T00:00:01.123456Z"` or `null`.
        pub fn serialize<S: Serializer>(t: &Option<Time>, s: S) -> Result<S::Ok, S::Error> {
            match t {
                Some(t) => s.serialize_str(&t.to_rfc3339_micros()),
                None => s.serialize_none(),
            }
        }
        /// Parses RFC 3339 or `null`.
        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
            de(d)
        }
    }
}
