//! Making text from outside (a server, another tenant's events, error messages) safe to
//! print on a terminal: every character that could move the cursor, start an escape
//! sequence, end a line or reorder text is shown as a visible escape, and long cells are cut
//! with an ellipsis, so that nothing read from a server can forge table rows or recolour the
//! terminal.

/// `s` with every control or invisible format character escaped visibly (`\n`, `\r`, `\t`,
/// otherwise `\u{..}`, e.g. ESC as `\u{1b}`): kevents-core's
/// [`sanitize_server_text_to`](kevents_core::status::sanitize_server_text_to), the same
/// rule the HTTP sink applies to server text in errors and logs, without its length limit
/// (cells are cut by [`cell`]).
pub fn escape(s: &str) -> String {
    kevents_core::status::sanitize_server_text_to(s, usize::MAX)
}

/// [`escape`], then cut to at most `max` characters (at least 1), the last being `…` when
/// something was cut.
pub fn cell(s: &str, max: usize) -> String {
    let escaped = escape(s);
    truncate(escaped, max)
}

/// `s` cut to at most `max` characters (at least 1), ending in `…` when something was cut.
pub fn truncate(s: String, max: usize) -> String {
    let max = max.max(1);
    if s.chars().count() <= max {
        return s;
    }
    let mut cut: String = s.chars().take(max - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_visibly() {
        assert_eq!(
            escape("a\x1b[31mred\r\nfake row\tx\x7f\x00"),
            "a\\u{1b}[31mred\\r\\nfake row\\tx\\u{7f}\\u{0}"
        );
        // C1 controls, CSI (U+009B) included.
        assert_eq!(escape("\u{9b}31m\u{85}"), "\\u{9b}31m\\u{85}");
        // Line separators and bidi overrides.
        assert_eq!(
            escape("a\u{2028}b\u{202e}c\u{2066}"),
            "a\\u{2028}b\\u{202e}c\\u{2066}"
        );
    }

    #[test]
    fn ordinary_text_is_unchanged() {
        for s in [
            "Back-off restarting failed container web in pod web-7d4c9b6f5-x2x7q_demo(uid)",
            "Pulling image \"registry.example.com/team/api:v2.4.1\"",
            "Überprüfung fehlgeschlagen: 容器 重启 ✓",
            "path C:\\temp\\x",
        ] {
            assert_eq!(escape(s), s);
        }
    }

    #[test]
    fn escaped_text_has_no_control_character_left() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let out = escape(&all);
        assert!(
            !out.chars().any(|c| c.is_control()
                || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
            "{out:?}"
        );
    }

    #[test]
    fn long_cells_are_cut_with_an_ellipsis() {
        assert_eq!(cell("abcdef", 6), "abcdef");
        assert_eq!(cell("abcdefg", 6), "abcde…");
        assert_eq!(cell("abc", 0), "…");
        // The cut counts the escapes: a hidden newline cannot push text past the width.
        assert_eq!(cell("ab\ncdef", 5), "ab\\n…");
        assert_eq!(cell(&"x".repeat(10_000), 90).chars().count(), 90);
    }
}
