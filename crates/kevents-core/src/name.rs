//! Event names and the Kubernetes name rules they must follow.

use crate::time::Time;

/// client-go's event name: `<object name>.<unix nanos in lower-case hex>` (Go's `"%v.%x"`).
///
/// ```
/// use kevents_core::{name::event_name, Time};
/// let t = Time::parse_rfc3339("2021-01-01T00:02:25Z").unwrap();
/// assert_eq!(event_name("my-pod", t), "my-pod.1655f2bf3b286a00");
/// ```
pub fn event_name(object_name: &str, t: Time) -> String {
    let mut s = String::with_capacity(object_name.len() + 18);
    push_event_name(&mut s, object_name, t);
    s
}

/// Appends [`event_name`] to `out` (an event built again in place reuses its buffer).
pub(crate) fn push_event_name(out: &mut String, object_name: &str, t: Time) {
    out.push_str(object_name);
    out.push('.');
    let n = t.unix_nanos();
    if n < 0 {
        out.push('-');
    }
    // Lower-case hex without leading zeros, as Go's `%x`; by hand, because `write!` through
    // the formatting machinery was a quarter of building an event (callgrind: 440
    // instructions of the broadcaster's 1 270 per event in `make`).
    let mut v = n.unsigned_abs();
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b"0123456789abcdef"[(v & 0xf) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    // Hex digits are ASCII, so always UTF-8.
    out.push_str(std::str::from_utf8(&digits[i..]).unwrap_or_default());
}

/// client-go 1.33's `GenerateEventName`: [`event_name`], or a random UUID v4 when that is not
/// a valid DNS-1123 subdomain (upper case, `:` in IP-named objects, longer than 253).
///
/// ```
/// use kevents_core::{name::{generate_event_name, is_dns1123_subdomain}, Time};
/// let t = Time::from_unix_nanos(105_999_103_295_324_396);
/// assert_eq!(generate_event_name("test-pod", t), "test-pod.178959f726d80ec");
/// let n = generate_event_name("test.POD", t);
/// assert!(is_dns1123_subdomain(&n) && !n.starts_with("test"));
/// ```
pub fn generate_event_name(object_name: &str, t: Time) -> String {
    let mut name = String::with_capacity(object_name.len() + 18);
    push_generated_event_name(&mut name, object_name, t);
    name
}

/// Appends [`generate_event_name`] to `out` (an event built again in place reuses its
/// buffer).
pub(crate) fn push_generated_event_name(out: &mut String, object_name: &str, t: Time) {
    let start = out.len();
    push_event_name(out, object_name, t);
    if !is_dns1123_subdomain(&out[start..]) {
        out.truncate(start);
        out.push_str(&uuid::Uuid::new_v4().to_string());
    }
}

/// Whether `s` is a DNS-1123 label: at most 63 of `[a-z0-9-]`, alphanumeric at both ends.
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Whether `s` is a DNS-1123 subdomain: at most 253 characters, dot-separated labels of
/// `[a-z0-9-]` that start and end alphanumerically.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// Whether `s` is a Kubernetes qualified name: an optional `<DNS-1123 subdomain>/` prefix and
/// a name part of 1-63 characters matching `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
///
/// ```
/// use kevents_core::name::is_qualified_name;
/// assert!(is_qualified_name("example.com/my-controller"));
/// assert!(!is_qualified_name("-bad"));
/// ```
pub fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix
        && !is_dns1123_subdomain(p)
    {
        return false;
    }
    is_qualified_name_part(name)
}

/// Whether `s` is the name part of a qualified name (what follows the optional prefix):
/// 1-63 characters matching `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
///
/// ```
/// use kevents_core::name::is_qualified_name_part;
/// assert!(is_qualified_name_part("My_name.1"));
/// assert!(!is_qualified_name_part("example.com/x"));
/// ```
pub fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// The legacy (core/v1) name rule: not `.` or `..`, no `/` or `%`, not empty.
pub fn is_valid_legacy_name(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '%'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_generate_event_name_d21() {
        let t = Time::from_unix_nanos(105_999_103_295_324_396);
        assert_eq!(
            generate_event_name("test-pod", t),
            "test-pod.178959f726d80ec"
        );
        for bad in [
            "x".repeat(300).as_str(),
            "test.POD",
            "test.pod/invalid!chars?",
            "--test.pod/invalid!chars?",
        ] {
            let n = generate_event_name(bad, t);
            assert!(is_dns1123_subdomain(&n), "{n}");
            assert!(uuid::Uuid::parse_str(&n).is_ok(), "{n}");
        }
    }

    #[test]
    fn push_event_name_appends() {
        let mut s = String::from("x");
        push_event_name(
            &mut s,
            "my-pod",
            Time::parse_rfc3339("2021-01-01T00:02:25Z").unwrap(),
        );
        assert_eq!(s, "xmy-pod.1655f2bf3b286a00");
    }

    #[test]
    fn negative_nanos_format_like_go() {
        assert_eq!(event_name("a", Time::from_unix_nanos(-26)), "a.-1a");
        assert_eq!(
            event_name("a", Time::from_unix_nanos(i64::MIN)),
            "a.-8000000000000000"
        );
    }

    proptest::proptest! {
        /// The hand-written hex is `format!`'s `{:x}` (what it replaced), sign included.
        #[test]
        fn event_name_hex_is_formats(n in proptest::prelude::any::<i64>()) {
            let sign = if n < 0 { "-" } else { "" };
            proptest::prop_assert_eq!(
                event_name("p", Time::from_unix_nanos(n)),
                format!("p.{sign}{:x}", n.unsigned_abs())
            );
        }
    }

    #[test]
    fn label_and_subdomain_rules() {
        assert!(is_dns1123_label("team-a"));
        assert!(!is_dns1123_label("Team"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_dns1123_subdomain("a.b-c.d"));
        assert!(!is_dns1123_subdomain("a..b"));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
    }
}
