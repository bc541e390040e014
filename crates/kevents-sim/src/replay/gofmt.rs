//! Go's `fmt.Sprintf(format)` with no arguments: what client-go's `tools/events` `Eventf`
//! makes of a note when it is called without arguments, as the series trace format defines
//! `note` (`"100% ready"` is sent as `"100%!r(MISSING)eady"`).

/// `fmt.Sprintf(format)` (Go 1.26's `doPrintf` with an empty argument list): `%%` is `%`,
/// every other verb prints `%!<verb>(MISSING)` (`(BADINDEX)` after an explicit argument
/// index), a `*` width or precision prints `%!(BADWIDTH)` / `%!(BADPREC)`, and a `%` without
/// a verb at the end prints `%!(NOVERB)`.
///
/// ```
/// use kevents_sim::replay::series::go_sprintf_no_args as f;
/// assert_eq!(f("100% ready"), "100%!r(MISSING)eady");
/// assert_eq!(f("50%% done, %d left"), "50% done, %!d(MISSING) left");
/// assert_eq!(f("%[2]d %-5.2f %"), "%!d(BADINDEX) %!f(MISSING) %!(NOVERB)");
/// assert_eq!(f("%*d é%é"), "%!(BADWIDTH)%!d(MISSING) é%!é(MISSING)");
/// ```
pub fn go_sprintf_no_args(format: &str) -> String {
    let b = format.as_bytes();
    let end = b.len();
    let mut out = String::with_capacity(format.len());
    let mut i = 0;
    while i < end {
        let lasti = i;
        while i < end && b[i] != b'%' {
            i += 1;
        }
        out.push_str(&format[lasti..i]);
        if i >= end {
            break;
        }
        i += 1; // the '%'
        // Flags.
        while i < end && matches!(b[i], b'#' | b'0' | b'+' | b'-' | b' ') {
            i += 1;
        }
        let mut good_arg = true;
        // An explicit argument index: with no arguments, always out of range.
        let (ni, found) = arg_number(b, i, &mut good_arg);
        i = ni;
        let mut after_index = found;
        // Width.
        if i < end && b[i] == b'*' {
            i += 1;
            out.push_str("%!(BADWIDTH)");
            after_index = false;
        } else {
            let (ni, present) = parse_num(b, i, end);
            i = ni;
            if after_index && present {
                good_arg = false;
            }
        }
        // Precision.
        if i + 1 < end && b[i] == b'.' {
            i += 1;
            if after_index {
                good_arg = false;
            }
            let (ni, found) = arg_number(b, i, &mut good_arg);
            i = ni;
            after_index = found;
            if i < end && b[i] == b'*' {
                i += 1;
                out.push_str("%!(BADPREC)");
                after_index = false;
            } else {
                i = parse_num(b, i, end).0;
            }
        }
        if !after_index {
            let (ni, _) = arg_number(b, i, &mut good_arg);
            i = ni;
        }
        if i >= end {
            out.push_str("%!(NOVERB)");
            break;
        }
        let verb = format[i..].chars().next().unwrap_or('\u{fffd}');
        i += verb.len_utf8();
        if verb == '%' {
            out.push('%');
        } else if !good_arg {
            out.push_str("%!");
            out.push(verb);
            out.push_str("(BADINDEX)");
        } else {
            out.push_str("%!");
            out.push(verb);
            out.push_str("(MISSING)");
        }
    }
    out
}

/// Go's `parsenum`: the digits at `i` (Go refuses numbers over 1e6 as "too large"; either
/// way nothing is printed for them here, as there is no argument to format).
fn parse_num(b: &[u8], mut i: usize, end: usize) -> (usize, bool) {
    let start = i;
    while i < end && b[i].is_ascii_digit() {
        i += 1;
    }
    (i, i > start)
}

/// Go's `argNumber` with no arguments: `[n]` at `i` is consumed and marks the argument
/// index bad; returns the new position and whether a well-formed index was found.
fn arg_number(b: &[u8], i: usize, good_arg: &mut bool) -> (usize, bool) {
    if i >= b.len() || b[i] != b'[' {
        return (i, false);
    }
    *good_arg = false;
    let rest = &b[i..];
    if rest.len() < 3 {
        return (i + 1, false);
    }
    for j in 1..rest.len() {
        if rest[j] == b']' {
            let digits = &rest[1..j];
            let ok = !digits.is_empty() && digits.iter().all(u8::is_ascii_digit);
            return (i + j + 1, ok);
        }
    }
    (i + 1, false)
}
