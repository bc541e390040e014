//! Shards of the export ([`Shard`]): the events split into N hash ranges of their uid, with
//! KEP-5866's hash (FNV-1a 64-bit of `metadata.uid`; shard `i` of `N` owns
//! `[i·2^64/N, (i+1)·2^64/N)`), so that a server that serves sharded list and watch
//! (`shardSelector=shardRange(object.metadata.uid,'0x…','0x…')`) filters exactly as the
//! client does. Each shard has its own stream `{stream}-{i}of{N}` (subjects
//! `{stream}-{i}of{N}.{ns}.{uid}`, bucket `{stream}-{i}of{N}-resume`): its resume point
//! and its fence are its own ([`Shard::stream`], [`layout`]). See docs/export.md, "Shards".

use async_nats::jetstream;
use futures_util::StreamExt;

use crate::ExportError;

/// The most shards an export may be split into.
pub const MAX_SHARDS: u32 = 256;

/// FNV-1a, 64-bit, of `bytes` (KEP-5866's and `k8s.io/apimachinery/pkg/sharding`'s hash).
///
/// ```
/// assert_eq!(kevents_export::fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
/// // A uid as kube-apiserver v1.37 hashed it (its shardSelector put it in the upper half).
/// assert_eq!(kevents_export::fnv1a64(b"831ffabb-8049-4dc8-82af-23ce3b9f3708"), 0xcdb2_caff_bd8f_9b0c);
/// ```
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Shard `index` of `count`: the events whose uid hashes into `[start, end)`.
///
/// ```
/// use kevents_export::Shard;
/// let s = Shard::new(1, 2).unwrap();
/// assert_eq!(s.range(), (0x8000_0000_0000_0000, 1 << 64));
/// assert_eq!(s.selector(),
///     "shardRange(object.metadata.uid,'0x8000000000000000','0x10000000000000000')");
/// assert!(s.owns("831ffabb-8049-4dc8-82af-23ce3b9f3708"));
/// assert_eq!(s.stream("export"), "export-1of2");
/// assert!(Shard::new(2, 2).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Shard {
    /// Shard `index` (from 0) of `count` (1 to [`MAX_SHARDS`]).
    pub fn new(index: u32, count: u32) -> Result<Self, ExportError> {
        if count == 0 || count > MAX_SHARDS {
            return Err(ExportError::Config(format!(
                "shards: {count} is not between 1 and {MAX_SHARDS}"
            )));
        }
        if index >= count {
            return Err(ExportError::Config(format!(
                "shard {index} of {count} does not exist"
            )));
        }
        Ok(Shard { index, count })
    }

    /// Every shard of `count`.
    ///
    /// ```
    /// assert_eq!(kevents_export::Shard::all(8).unwrap().len(), 8);
    /// ```
    pub fn all(count: u32) -> Result<Vec<Shard>, ExportError> {
        (0..count).map(|i| Shard::new(i, count)).collect()
    }

    /// Its index (from 0).
    pub fn index(&self) -> u32 {
        self.index
    }

    /// How many shards there are.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Its hash range, `[start, end)` (`end` up to 2^64).
    pub fn range(&self) -> (u128, u128) {
        let bound = |i: u32| (u128::from(i) << 64) / u128::from(self.count);
        (bound(self.index), bound(self.index + 1))
    }

    /// Whether the event of `uid` belongs to it.
    pub fn owns(&self, uid: &str) -> bool {
        let (start, end) = self.range();
        let h = u128::from(fnv1a64(uid.as_bytes()));
        start <= h && h < end
    }

    /// Its KEP-5866 `shardSelector` (bounds as 16 hex digits, 2^64 as `0x10000000000000000`,
    /// as kube-apiserver v1.37 accepts and echoes them).
    pub fn selector(&self) -> String {
        let (start, end) = self.range();
        format!("shardRange(object.metadata.uid,'0x{start:016x}','0x{end:016x}')")
    }

    /// Its stream's name for an export named `stream`: `{stream}-{i}of{N}`.
    pub fn stream(&self, stream: &str) -> String {
        format!("{stream}-{}of{}", self.index, self.count)
    }

    /// Its Lease's name for the export's Lease `lease`: `{lease}-{i}`.
    pub fn lease(&self, lease: &str) -> String {
        format!("{lease}-{}", self.index)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// How the export named `stream` is laid out in a JetStream ([`layout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// No stream of it yet.
    Empty,
    /// One stream, `{stream}` (an export without shards).
    Single,
    /// Streams `{stream}-{i}of{N}` (some of them may not exist yet).
    Sharded(u32),
}

/// The streams of the export named `stream` in `context`: [`Layout`], or
/// [`ExportError::Config`] when they were made by runs with different numbers of shards
/// (with and without, or two N): one history split two ways is not exact (an event would be
/// exported once in each).
pub async fn layout(context: &jetstream::Context, stream: &str) -> Result<Layout, ExportError> {
    let mut names = context.stream_names();
    let mut found: Vec<Layout> = Vec::new();
    let prefix = format!("{stream}-");
    while let Some(name) = names.next().await {
        let name = name.map_err(|e| ExportError::Store(format!("listing the streams: {e}")))?;
        let this = if name == stream {
            Some(Layout::Single)
        } else {
            name.strip_prefix(&prefix)
                .and_then(|rest| rest.split_once("of"))
                .and_then(|(i, n)| Some((i.parse::<u32>().ok()?, n.parse::<u32>().ok()?)))
                .filter(|(i, n)| i < n && *n <= MAX_SHARDS)
                .map(|(_, n)| Layout::Sharded(n))
        };
        if let Some(this) = this
            && !found.contains(&this)
        {
            found.push(this);
        }
    }
    match found.as_slice() {
        [] => Ok(Layout::Empty),
        [one] => Ok(*one),
        many => Err(ExportError::Config(format!(
            "the export {stream:?} has streams of several layouts ({}): one history cannot be split two ways; delete the streams of the layout not wanted",
            many.iter()
                .map(|l| match l {
                    Layout::Sharded(n) => format!("{n} shards"),
                    _ => "no shards".to_owned(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Checks that a run with `shards` (`None`: without) may write the export named `stream`:
/// [`ExportError::Config`] when its streams were made with another number of shards.
pub async fn check_layout(
    context: &jetstream::Context,
    stream: &str,
    shards: Option<u32>,
) -> Result<(), ExportError> {
    let found = layout(context, stream).await?;
    let ok = match (found, shards) {
        (Layout::Empty, _) => true,
        (Layout::Single, None) => true,
        (Layout::Sharded(n), Some(m)) => n == m,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    let was = match found {
        Layout::Sharded(n) => format!("--shards {n}"),
        _ => "no --shards".to_owned(),
    };
    let now = shards.map_or_else(|| "no --shards".to_owned(), |n| format!("--shards {n}"));
    Err(ExportError::Config(format!(
        "the export {stream:?} was written with {was} and this export has {now}: the same N is needed (or another --stream)"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_hash_space_without_overlap() {
        for n in [1, 2, 3, 7, 8, 256] {
            let shards = Shard::all(n).unwrap();
            assert_eq!(shards[0].range().0, 0);
            assert_eq!(shards[n as usize - 1].range().1, 1u128 << 64);
            for w in shards.windows(2) {
                assert_eq!(w[0].range().1, w[1].range().0);
            }
            for uid in ["a", "b", "831ffabb-8049-4dc8-82af-23ce3b9f3708", ""] {
                assert_eq!(
                    shards.iter().filter(|s| s.owns(uid)).count(),
                    1,
                    "{uid} in {n}"
                );
            }
        }
    }

    #[test]
    fn the_hash_matches_the_apiservers() {
        // kube-apiserver v1.37.2 with ShardedListAndWatch listed the first two uids in
        // [0, 2^63) and the third in [2^63, 2^64).
        assert_eq!(
            fnv1a64(b"498848a2-464e-4492-8a8d-9917d2261f22"),
            0x0a20_10e9_b574_de8f
        );
        assert_eq!(
            fnv1a64(b"4d95c2f2-6e03-4ba3-bcd1-549bfcd60989"),
            0x2347_3d1e_a89c_3d4f
        );
        let upper = Shard::new(1, 2).unwrap();
        assert!(!upper.owns("498848a2-464e-4492-8a8d-9917d2261f22"));
        assert!(upper.owns("831ffabb-8049-4dc8-82af-23ce3b9f3708"));
        assert_eq!(
            Shard::new(0, 8).unwrap().selector(),
            "shardRange(object.metadata.uid,'0x0000000000000000','0x2000000000000000')"
        );
    }

    #[test]
    fn bad_shards_are_refused() {
        assert!(Shard::new(0, 0).is_err());
        assert!(Shard::new(0, MAX_SHARDS + 1).is_err());
        assert!(Shard::new(3, 3).is_err());
    }
}
