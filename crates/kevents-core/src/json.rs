//! JSON encoding identical to Go's `encoding/json`, which is what client-go sends.
//!
//! Go escapes `<`, `>`, `&`, U+2028 and U+2029 as `\u003c`-style sequences and writes
//! backspace and form feed as `\u0008`/`\u000c`; `serde_json` does neither. Field order
//! comes from the struct definitions in [`crate::core_v1`] and [`crate::events_v1`], which
//! follow Go's.

use std::io;

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter, Serializer};

/// A compact `serde_json` formatter that escapes strings exactly like Go.
#[derive(Debug, Default, Clone, Copy)]
pub struct GoFormatter;

impl Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let esc: &[u8] = match c {
                '<' => b"\\u003c",
                '>' => b"\\u003e",
                '&' => b"\\u0026",
                '\u{2028}' => b"\\u2028",
                '\u{2029}' => b"\\u2029",
                _ => continue,
            };
            writer.write_all(&fragment.as_bytes()[start..i])?;
            writer.write_all(esc)?;
            start = i + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        char_escape: CharEscape,
    ) -> io::Result<()> {
        let s: &[u8] = match char_escape {
            CharEscape::Quote => b"\\\"",
            CharEscape::ReverseSolidus => b"\\\\",
            CharEscape::Solidus => b"\\/",
            CharEscape::LineFeed => b"\\n",
            CharEscape::CarriageReturn => b"\\r",
            CharEscape::Tab => b"\\t",
            CharEscape::Backspace => b"\\u0008",
            CharEscape::FormFeed => b"\\u000c",
            CharEscape::AsciiControl(byte) => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let buf = [
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(byte >> 4) as usize],
                    HEX[(byte & 0xF) as usize],
                ];
                return writer.write_all(&buf);
            }
        };
        writer.write_all(s)
    }
}

/// Serialises `value` as Go's `json.Marshal` would.
///
/// ```
/// let v = serde_json::json!({"message": "a<b & c>d"});
/// assert_eq!(kevents_core::json::to_vec(&v).unwrap(), br#"{"message":"a\u003cb \u0026 c\u003ed"}"#);
/// ```
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    to_writer(&mut out, value)?;
    Ok(out)
}

/// Serialises `value` as Go would into `writer`.
pub fn to_writer<W: io::Write, T: Serialize + ?Sized>(
    writer: W,
    value: &T,
) -> serde_json::Result<()> {
    let mut ser = Serializer::with_formatter(writer, GoFormatter);
    value.serialize(&mut ser)
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_match_go() {
        let v = serde_json::json!("\u{8}\u{c}\n\t\u{1}\u{2028}é");
        assert_eq!(
            String::from_utf8(super::to_vec(&v).unwrap()).unwrap(),
            r#""\u0008\u000c\n\t\u0001\u2028é""#
        );
    }
}
