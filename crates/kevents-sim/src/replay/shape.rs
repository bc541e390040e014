//! The shape checks serde does not make: a trace line is one JSON object, and no value in
//! it is an array (serde's derived structs would also take a struct's fields as an array,
//! in order, so `[1700000000, {...}]` or `"object": ["v1", "Pod"]` would replay).

/// What is wrong with the shape of a line that parsed as JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ShapeError {
    /// The line is a JSON value other than an object (`found`: what it is).
    NotAnObject(&'static str),
    /// An array at this 1-based column (bytes).
    Array(usize),
}

/// Checks a line that is valid JSON: its first value is an object and holds no array. The
/// documented formats (both APIs) have no arrays anywhere, so any `[` outside a string is
/// one.
pub(crate) fn check(line: &str) -> Result<(), ShapeError> {
    let bytes = line.as_bytes();
    let start = bytes
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .unwrap_or(bytes.len());
    match bytes.get(start) {
        Some(b'{') => {}
        Some(b'[') => return Err(ShapeError::NotAnObject("an array")),
        Some(b'"') => return Err(ShapeError::NotAnObject("a string")),
        Some(b'n') => return Err(ShapeError::NotAnObject("null")),
        Some(b't' | b'f') => return Err(ShapeError::NotAnObject("a boolean")),
        _ => return Err(ShapeError::NotAnObject("a number")),
    }
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().skip(start) {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'[' {
            return Err(ShapeError::Array(i + 1));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_arrays_outside_strings_only() {
        assert_eq!(check(r#"{"a": "[x]", "b": "\"[" }"#), Ok(()));
        assert_eq!(check(r#"{"a": {"b": [1]}}"#), Err(ShapeError::Array(13)));
        assert_eq!(check(" [1]"), Err(ShapeError::NotAnObject("an array")));
        assert_eq!(check("12"), Err(ShapeError::NotAnObject("a number")));
        assert_eq!(check("null"), Err(ShapeError::NotAnObject("null")));
        assert_eq!(check(r#""s""#), Err(ShapeError::NotAnObject("a string")));
    }
}
