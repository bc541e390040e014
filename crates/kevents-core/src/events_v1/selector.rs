//! client-go's `events.GetFieldSelector` (`tools/events`, 1.22): the field selector that lists
//! or watches the events about one object, for whichever events API the caller talks to.

use thiserror::Error;

use crate::reference::ObjectReference;

/// The events API version has no known field-selector prefix (client-go: `unknown version`).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown version {0}")]
pub struct UnknownEventsVersion(pub String);

/// The prefix of the selector's keys for an events API version, as client-go's mapping:
/// `events.k8s.io/v1` and `events.k8s.io/v1beta1` select on `regarding`, core `v1` on
/// `involvedObject`.
fn prefix(events_api_version: &str) -> Option<&'static str> {
    match events_api_version {
        "events.k8s.io/v1" | "events.k8s.io/v1beta1" => Some("regarding"),
        "v1" => Some("involvedObject"),
        _ => None,
    }
}

/// Escapes a selector value as apimachinery's `fields.EscapeValue` does: `\` first, then `,`
/// and `=`, so that the value parses back unambiguously.
fn escape_value(out: &mut String, value: &str) {
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
}

/// The field selector (`fieldSelector=` query value) that lists or watches the events about
/// `regarding`, like client-go's `events.GetFieldSelector`.
///
/// `events_api_version` is the API the list goes to: `events.k8s.io/v1` or
/// `events.k8s.io/v1beta1` (keys `regarding.*`) or core `v1` (keys `involvedObject.*`); any
/// other value is an [`UnknownEventsVersion`].
///
/// The keys `name`, `kind`, `apiVersion` (`group/version`, e.g. `apps/v1`, or `v1` for the
/// core group) and `uid` of `regarding` are included only when non-empty; the namespace,
/// resourceVersion and fieldPath never are (list in a namespace to restrict by it). Values are
/// escaped as apimachinery does (`\`, `,` and `=` get a backslash).
///
/// Order: client-go builds a `fields.Set` (a Go map), so its string's term order is not
/// specified (it follows map iteration); the server treats the terms as a set. kevents writes
/// them in the order client-go fills the set: name, kind, apiVersion, uid. An object reference
/// with every key empty gives the empty selector (everything).
///
/// ```
/// use kevents_core::ObjectReference;
/// use kevents_core::events_v1::field_selector;
///
/// let deploy = ObjectReference::new("apps/v1", "Deployment", "default", "web").with_uid("1234");
/// assert_eq!(
///     field_selector("events.k8s.io/v1", &deploy).unwrap(),
///     "regarding.name=web,regarding.kind=Deployment,regarding.apiVersion=apps/v1,regarding.uid=1234"
/// );
/// let pod = ObjectReference::new("v1", "Pod", "default", "web-0");
/// assert_eq!(
///     field_selector("v1", &pod).unwrap(),
///     "involvedObject.name=web-0,involvedObject.kind=Pod,involvedObject.apiVersion=v1"
/// );
/// assert!(field_selector("events.k8s.io/v2", &pod).is_err());
/// ```
pub fn field_selector(
    events_api_version: &str,
    regarding: &ObjectReference,
) -> Result<String, UnknownEventsVersion> {
    let prefix = prefix(events_api_version)
        .ok_or_else(|| UnknownEventsVersion(events_api_version.to_owned()))?;
    let mut out = String::new();
    for (key, value) in [
        ("name", &regarding.name),
        ("kind", &regarding.kind),
        ("apiVersion", &regarding.api_version),
        ("uid", &regarding.uid),
    ] {
        if value.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(prefix);
        out.push('.');
        out.push_str(key);
        out.push('=');
        escape_value(&mut out, value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> ObjectReference {
        let mut r = ObjectReference::new("apps/v1", "Deployment", "ns", "web").with_uid("u-1");
        r.resource_version = "42".into();
        r.field_path = "spec".into();
        r
    }

    #[test]
    fn events_v1_and_v1beta1_use_regarding() {
        let want = "regarding.name=web,regarding.kind=Deployment,regarding.apiVersion=apps/v1,regarding.uid=u-1";
        assert_eq!(field_selector("events.k8s.io/v1", &full()).unwrap(), want);
        assert_eq!(
            field_selector("events.k8s.io/v1beta1", &full()).unwrap(),
            want
        );
    }

    #[test]
    fn core_v1_uses_involved_object() {
        assert_eq!(
            field_selector("v1", &full()).unwrap(),
            "involvedObject.name=web,involvedObject.kind=Deployment,\
             involvedObject.apiVersion=apps/v1,involvedObject.uid=u-1"
        );
    }

    #[test]
    fn namespace_resource_version_and_field_path_are_never_included() {
        let s = field_selector("v1", &full()).unwrap();
        assert!(!s.contains("namespace"), "{s}");
        assert!(!s.contains("resourceVersion"), "{s}");
        assert!(!s.contains("fieldPath"), "{s}");
    }

    #[test]
    fn empty_keys_are_left_out() {
        // client-go's test cases: only the non-empty of name, kind, apiVersion, uid.
        let mut r = ObjectReference::new("", "", "ns", "");
        assert_eq!(field_selector("events.k8s.io/v1", &r).unwrap(), "");
        r.name = "foo".into();
        assert_eq!(
            field_selector("events.k8s.io/v1", &r).unwrap(),
            "regarding.name=foo"
        );
        r.uid = "uid".into();
        assert_eq!(
            field_selector("events.k8s.io/v1", &r).unwrap(),
            "regarding.name=foo,regarding.uid=uid"
        );
        let r = ObjectReference::new("v1", "Pod", "", "");
        assert_eq!(
            field_selector("v1", &r).unwrap(),
            "involvedObject.kind=Pod,involvedObject.apiVersion=v1"
        );
    }

    #[test]
    fn values_are_escaped_like_apimachinery() {
        let r = ObjectReference::new("", "", "", r"a,b=c\d");
        assert_eq!(
            field_selector("v1", &r).unwrap(),
            r"involvedObject.name=a\,b\=c\\d"
        );
    }

    #[test]
    fn unknown_versions_are_an_error() {
        for v in [
            "",
            "events.k8s.io/v2",
            "events.k8s.io",
            "core/v1",
            "apps/v1",
            "v1beta1",
        ] {
            let err = field_selector(v, &full()).unwrap_err();
            assert_eq!(err, UnknownEventsVersion(v.to_owned()));
            assert_eq!(err.to_string(), format!("unknown version {v}"));
        }
    }
}
