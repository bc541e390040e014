//! Short, sanitised quotes of input for error messages: control and bidirectional-formatting
//! characters are escaped, quoted parts are cut after a few dozen characters, so an error
//! never carries a whole line of input (which may hold a secret) or a terminal escape.

/// Longest quoted part of the input an error message keeps, in characters.
pub(crate) const MAX_QUOTE_CHARS: usize = 32;
/// Longest error message built from a parser's text, in characters.
const MAX_MESSAGE_CHARS: usize = 300;

/// `s` quoted (`"..."`), escaped and cut to [`MAX_QUOTE_CHARS`] characters (`…` marks a cut).
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_QUOTE_CHARS * 2) + 2);
    out.push('"');
    shorten_into(&mut out, s, true);
    out.push('"');
    out
}

/// `s` escaped and cut like [`quote`], without the quotes (for names in messages).
pub(crate) fn cut(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_QUOTE_CHARS * 2));
    shorten_into(&mut out, s, false);
    out
}

fn shorten_into(out: &mut String, s: &str, in_quote: bool) {
    for (n, c) in s.chars().enumerate() {
        if n == MAX_QUOTE_CHARS {
            out.push('…');
            break;
        }
        push_escaped(out, c, in_quote);
    }
}

/// A `serde_json` error's message without its ` at line L column C` suffix, sanitised.
pub(crate) fn json_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    sanitize(full.strip_suffix(&suffix).unwrap_or(&full))
}

/// A parser's message made safe to print: every part inside backticks or double quotes (where
/// serde puts pieces of the input) is cut to [`MAX_QUOTE_CHARS`] characters, control characters
/// are escaped, and the whole is cut to a few hundred characters.
pub(crate) fn sanitize(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE_CHARS + 8));
    // The closing delimiter of the quoted part we are in, and how many characters it kept.
    let mut open: Option<char> = None;
    let mut kept = 0usize;
    let mut escaped = false;
    for (n, c) in message.chars().enumerate() {
        if n >= MAX_MESSAGE_CHARS {
            out.push('…');
            break;
        }
        match open {
            None => {
                if c == '`' || c == '"' {
                    open = Some(c);
                    kept = 0;
                }
                push_escaped(&mut out, c, false);
            }
            Some(close) => {
                let ends = c == close && !escaped;
                escaped = close == '"' && c == '\\' && !escaped;
                if ends {
                    if kept > MAX_QUOTE_CHARS {
                        out.push('…');
                    }
                    out.push(c);
                    open = None;
                } else {
                    kept += 1;
                    if kept <= MAX_QUOTE_CHARS {
                        push_escaped(&mut out, c, false);
                    }
                }
            }
        }
    }
    out
}

/// Whether `c` would be dangerous or invisible on a terminal.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
}

fn push_escaped(out: &mut String, c: char, in_quote: bool) {
    if needs_escape(c) {
        out.extend(c.escape_default());
    } else if in_quote && (c == '"' || c == '\\') {
        out.push('\\');
        out.push(c);
    } else {
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_cuts_and_escapes() {
        assert_eq!(quote("abc"), "\"abc\"");
        assert_eq!(quote("a\u{1b}[31m\"b"), "\"a\\u{1b}[31m\\\"b\"");
        let long = "x".repeat(100);
        let q = quote(&long);
        assert_eq!(q, format!("\"{}…\"", "x".repeat(MAX_QUOTE_CHARS)));
        assert_eq!(cut("\"a\"\n"), "\"a\"\\n");
        assert_eq!(cut(&long).chars().count(), MAX_QUOTE_CHARS + 1);
    }

    #[test]
    fn sanitize_cuts_every_quoted_part() {
        let secret = "s".repeat(80);
        let m = format!("unknown field `{secret}`, expected one of `time`, `source`");
        let s = sanitize(&m);
        assert!(!s.contains(&secret[..MAX_QUOTE_CHARS + 1]), "{s}");
        assert!(s.ends_with("expected one of `time`, `source`"), "{s}");
        let m = format!(r#"invalid type: string "a\"{secret}", expected i64"#);
        let s = sanitize(&m);
        assert!(!s.contains(&secret[..MAX_QUOTE_CHARS]), "{s}");
        assert!(s.ends_with("…\", expected i64"), "{s}");
    }

    #[test]
    fn sanitize_escapes_control_characters_and_bounds_length() {
        let s = sanitize("bad \u{1b}[2J `k\u{7}ey` \u{202e}");
        assert!(!s.chars().any(needs_escape), "{s}");
        assert!(s.contains("\\u{1b}[2J"), "{s}");
        let s = sanitize(&"word ".repeat(1000));
        assert!(s.chars().count() <= MAX_MESSAGE_CHARS + 1);
    }
}
