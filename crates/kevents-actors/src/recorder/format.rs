//! Formatting a call's message (`eventf!`, `eventf_events_v1!`) without allocating a `String` per
//! call: into a buffer each thread keeps, from which the call copies it into the intake.

use std::cell::Cell;
use std::fmt::{self, Write};

/// A thread's buffer is kept only up to this capacity (a larger one is freed after use, so
/// one long message does not pin its memory).
const KEPT: usize = 4 << 10;

thread_local! {
    static SCRATCH: Cell<String> = const { Cell::new(String::new()) };
}

/// `f` of `args` formatted: the literal itself when there is nothing to format, else the
/// text in the thread's buffer. The buffer is taken out while in use, so a `Display`
/// implementation that records an event itself formats into a new `String` of its own.
pub(crate) fn with_formatted<T>(args: fmt::Arguments<'_>, f: impl FnOnce(&str) -> T) -> T {
    if let Some(s) = args.as_str() {
        return f(s);
    }
    let mut buf = SCRATCH.try_with(Cell::take).unwrap_or_default();
    buf.clear();
    // Writing into a `String` fails only if a `Display` implementation does; the text
    // written so far is kept (`format!` would panic instead).
    let _ = buf.write_fmt(args);
    let out = f(&buf);
    if buf.capacity() <= KEPT {
        // Fails only while the thread is exiting: the buffer is then freed.
        let _ = SCRATCH.try_with(|cell| cell.set(buf));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text is what `format!` gives, literal or formatted, also when formatting
    /// re-enters (a `Display` that formats through the same buffer), and a long text does
    /// not stay in the buffer.
    #[test]
    fn formats_as_format_does_and_nests() {
        assert_eq!(
            with_formatted(format_args!("plain"), str::to_owned),
            "plain"
        );
        let n = 3;
        assert_eq!(
            with_formatted(format_args!("{n} replicas"), str::to_owned),
            "3 replicas"
        );
        struct Nested;
        impl fmt::Display for Nested {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let inner = with_formatted(format_args!("<{}>", 7), str::to_owned);
                f.write_str(&inner)
            }
        }
        assert_eq!(
            with_formatted(format_args!("a{}b", Nested), str::to_owned),
            "a<7>b"
        );
        let long = "x".repeat(KEPT + 1);
        assert_eq!(with_formatted(format_args!("{long}"), str::len), KEPT + 1);
        let kept = SCRATCH.with(Cell::take);
        assert!(kept.capacity() <= KEPT);
        // A short text is formatted into the buffer kept from before.
        with_formatted(format_args!("{n}"), str::len);
        assert!(SCRATCH.with(Cell::take).capacity() > 0);
    }
}
