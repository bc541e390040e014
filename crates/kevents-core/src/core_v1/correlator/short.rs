//! Appending and comparing the short fields keys are made of, inline.
//!
//! A key is a dozen fields, most under 16 bytes (`Pod`, `v1`, `Normal`, a namespace, a
//! name). `extend_from_slice` and `==` call libc's `memcpy` and `memcmp` for a length the
//! compiler cannot see, and on fields this short the call and its size dispatch are most of
//! the work. Up to 16 bytes, two overlapping fixed-size moves (what `memcpy` itself does
//! for such sizes) do it without the call. A 32-byte window (u128 moves and compares) was
//! slower: 0.78 and 0.88 of the 16-byte one's `wide` throughput (10 and 8 A/B rounds).

/// Appends `src` to `buf`.
#[inline]
pub(super) fn extend(buf: &mut Vec<u8>, src: &[u8]) {
    let n = src.len();
    if n > 16 {
        buf.extend_from_slice(src);
        return;
    }
    let at = buf.len();
    // Room for a whole 16-byte window, trimmed to `n` below: fixed-size stores only.
    buf.extend_from_slice(&[0; 16]);
    copy(&mut buf[at..at + n], src);
    buf.truncate(at + n);
}

/// Copies `src` into `dst`, of the same length (`copy_from_slice`).
#[inline]
fn copy(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n > 16 {
        dst.copy_from_slice(src);
    } else if let (Some(a), Some(b)) = (src.first_chunk::<8>(), src.last_chunk::<8>()) {
        copy_ends(dst, a, b);
    } else if let (Some(a), Some(b)) = (src.first_chunk::<4>(), src.last_chunk::<4>()) {
        copy_ends(dst, a, b);
    } else if n > 0 {
        // 1 to 3 bytes: first, middle and last cover them all.
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

/// Writes `a` at the start of `dst` and `b` at its end (they overlap when `dst` is shorter
/// than both together).
#[inline(always)]
fn copy_ends<const K: usize>(dst: &mut [u8], a: &[u8; K], b: &[u8; K]) {
    if let Some(d) = dst.first_chunk_mut::<K>() {
        *d = *a;
    }
    if let Some(d) = dst.last_chunk_mut::<K>() {
        *d = *b;
    }
}

/// `a == b`.
#[inline]
pub(super) fn eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n > 16 {
        return a == b;
    }
    if let Some(eq) = ends_eq::<8>(a, b).or_else(|| ends_eq::<4>(a, b)) {
        return eq;
    }
    n == 0 || (a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1])
}

/// Whether `a` and `b` (of one length) have the same first and the same last `K` bytes
/// (fixed-size loads); `None` if they are shorter than `K`.
#[inline(always)]
fn ends_eq<const K: usize>(a: &[u8], b: &[u8]) -> Option<bool> {
    Some(
        a.first_chunk::<K>()? == b.first_chunk::<K>()?
            && a.last_chunk::<K>()? == b.last_chunk::<K>()?,
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// The same bytes as `extend_from_slice` on every length around the windows' edges,
        /// after any prefix.
        #[test]
        fn extend_appends_exactly(prefix in prop::collection::vec(any::<u8>(), 0..40),
                                  src in prop::collection::vec(any::<u8>(), 0..40)) {
            let mut ours = prefix.clone();
            super::extend(&mut ours, &src);
            let mut theirs = prefix;
            theirs.extend_from_slice(&src);
            prop_assert_eq!(ours, theirs);
        }

        /// The same answer as `==`, on equal lengths with one byte changed anywhere (the
        /// case the windows must not miss) and on any two strings.
        #[test]
        fn eq_agrees_with_slices(a in prop::collection::vec(any::<u8>(), 0..40),
                                 at in any::<prop::sample::Index>(), flip in 1u8..,
                                 b in prop::collection::vec(any::<u8>(), 0..40)) {
            prop_assert!(super::eq(&a, &a.clone()));
            if !a.is_empty() {
                let mut c = a.clone();
                c[at.index(a.len())] ^= flip;
                prop_assert!(!super::eq(&a, &c));
            }
            prop_assert_eq!(super::eq(&a, &b), a == b);
        }
    }
}
