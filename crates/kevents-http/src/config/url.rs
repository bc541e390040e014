//! Apiserver URLs: parsed and checked, and shown without their user information.

use std::net::IpAddr;

use kevents_core::status::sanitize_server_text_to;
use reqwest::Url;

use super::ConfigError;

/// A URL as text for messages and logs: user information (`user:password@`) replaced by
/// `***`, control characters escaped, at most 512 characters. Works on text that does not
/// parse as a URL too.
///
/// ```
/// use kevents_http::config::redact_url_text;
/// assert_eq!(redact_url_text("https://admin:s3cr3t@k8s.example:6443/x"), "https://***@k8s.example:6443/x");
/// assert_eq!(redact_url_text("https://user:bad token@host"), "https://***@host");
/// assert_eq!(redact_url_text("https://k8s.example"), "https://k8s.example");
/// ```
pub fn redact_url_text(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let text = match url[start..end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..start], &url[start + at..]),
        None => url.to_owned(),
    };
    sanitize_server_text_to(&text, 512)
}

/// [`redact_url_text`] of a parsed URL.
pub fn redact_url(url: &Url) -> String {
    redact_url_text(url.as_str())
}

/// A proxy URL kevents can use: `http://` or `https://` (client-go also takes `socks5://`,
/// which kevents' HTTP client is built without). Anything else is refused when the
/// configuration is loaded, rather than ignored (a direct connection past the proxy the user
/// configured) or failing at the first request.
pub(crate) fn check_proxy_scheme(proxy: &Url, origin: &str) -> Result<(), ConfigError> {
    match proxy.scheme() {
        "http" | "https" => Ok(()),
        scheme => Err(ConfigError::Url {
            origin: origin.to_owned(),
            url: redact_url(proxy),
            reason: if scheme.starts_with("socks") {
                format!(
                    "proxy scheme {scheme:?} is not supported by kevents (client-go's SOCKS5 \
                     proxies are not); use an http:// or https:// proxy"
                )
            } else {
                format!("proxy scheme {scheme:?} is not supported; use http:// or https://")
            },
        }),
    }
}

/// Parses an apiserver URL: absolute `http(s)://` with a host and no user information;
/// query and fragment dropped. Errors name `origin`.
pub(crate) fn parse_cluster_url(url: &str, origin: &str) -> Result<Url, ConfigError> {
    let bad = |reason: &str| ConfigError::Url {
        origin: origin.to_owned(),
        url: redact_url_text(url),
        reason: reason.to_owned(),
    };
    let authority_has_at = {
        let start = url.find("://").map_or(0, |i| i + 3);
        let end = url[start..]
            .find(['/', '?', '#'])
            .map_or(url.len(), |i| start + i);
        url[start..end].contains('@')
    };
    if authority_has_at {
        return Err(ConfigError::CredentialsInUrl {
            origin: origin.to_owned(),
            url: redact_url_text(url),
        });
    }
    let mut parsed = Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("scheme must be http or https"));
    }
    if parsed.host().is_none() {
        return Err(bad("no host"));
    }
    parsed.set_query(None);
    parsed.set_fragment(None);
    Ok(parsed)
}

/// Whether `url`'s host is a loopback address or `localhost`.
pub(super) fn is_loopback(url: &Url) -> bool {
    let host = url.host_str().unwrap_or("");
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    }
}
