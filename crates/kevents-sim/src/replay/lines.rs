//! Reading a trace one physical line at a time, with a cap on the length of a line.

use std::io::{self, BufRead};

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineRead {
    /// The input ended before any byte of a new line.
    Eof,
    /// A line (without its `\n` or `\r\n`) is in the buffer.
    Line,
    /// The line holds more than the cap; the buffer holds its beginning.
    TooLong,
}

/// Reads the next line into `buf` (cleared first), holding at most `max` bytes of it plus a
/// `\r`, so memory stays bounded however long the line is.
pub(crate) fn read_line<R: BufRead + ?Sized>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<LineRead> {
    buf.clear();
    let mut started = false;
    loop {
        let available = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(if started {
                within(buf, max)
            } else {
                LineRead::Eof
            });
        }
        started = true;
        // Room for the cap plus one byte: a `\r` before the `\n` does not count.
        let room = max.saturating_add(1).saturating_sub(buf.len());
        match available.iter().position(|b| *b == b'\n') {
            Some(i) => {
                if i > room {
                    return Ok(LineRead::TooLong);
                }
                buf.extend_from_slice(&available[..i]);
                r.consume(i + 1);
                if buf.last() == Some(&b'\r') {
                    buf.pop();
                }
                return Ok(within(buf, max));
            }
            None => {
                let n = available.len();
                if n > room {
                    return Ok(LineRead::TooLong);
                }
                buf.extend_from_slice(available);
                r.consume(n);
            }
        }
    }
}

fn within(buf: &[u8], max: usize) -> LineRead {
    if buf.len() > max {
        LineRead::TooLong
    } else {
        LineRead::Line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8], max: usize) -> Vec<(LineRead, Vec<u8>)> {
        // A tiny buffer so lines span many `fill_buf` calls.
        let mut r = io::BufReader::with_capacity(3, input);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let got = read_line(&mut r, &mut buf, max).unwrap();
            let stop = got != LineRead::Line;
            out.push((got, buf.clone()));
            if stop {
                return out;
            }
        }
    }

    #[test]
    fn splits_lines_and_strips_terminators() {
        let got = all(b"ab\r\n\ncd\r\nef", 10);
        let lines: Vec<&[u8]> = got[..4].iter().map(|(_, b)| b.as_slice()).collect();
        assert_eq!(lines, [&b"ab"[..], b"", b"cd", b"ef"]);
        assert_eq!(got[4].0, LineRead::Eof);
        assert_eq!(all(b"", 10), [(LineRead::Eof, vec![])]);
    }

    #[test]
    fn the_cap_excludes_the_terminator() {
        assert_eq!(all(b"abcd\r\n", 4)[0], (LineRead::Line, b"abcd".to_vec()));
        assert_eq!(all(b"abcd", 4)[0], (LineRead::Line, b"abcd".to_vec()));
        assert_eq!(all(b"abcde\n", 4)[0].0, LineRead::TooLong);
        assert_eq!(all(b"abcde", 4)[0].0, LineRead::TooLong);
        assert_eq!(all(b"abcd\r", 4)[0].0, LineRead::TooLong);
        let long = vec![b'x'; 1 << 16];
        let got = all(&long, 100);
        assert_eq!(got[0].0, LineRead::TooLong);
        assert!(got[0].1.len() <= 101, "the buffer stays bounded");
    }
}
