//! `kubectl get events -o json` output as a stream of occurrences, in time order.
//!
//! Each stored event of `count` n stands for n occurrences: the first at `firstTimestamp`,
//! the last at `lastTimestamp` (or `eventTime`), the others evenly spaced between. The
//! occurrences are produced one at a time by merging the events' sequences, so memory depends
//! on the number of events, never on their counts; the total is capped up front.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use kevents_core::meta::serde_time;
use kevents_core::{EventSource, ObjectReference, Time};
use serde::Deserialize;
use serde_json::Value;
use thiserror::Error;

use super::excerpt;
use super::trace::TraceLine;

/// A `kubectl` document that cannot be replayed. Nothing of it is replayed then.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum KubectlError {
    /// Nothing but whitespace.
    #[error("the input is empty: expected `kubectl get events -o json` output")]
    Empty,
    /// A UTF-16 byte-order mark.
    #[error(
        "line 1: the input is UTF-16 (it starts with a UTF-16 byte-order mark); replay reads UTF-8"
    )]
    Utf16,
    /// The document is not a JSON object.
    #[error("line {line}, column {column}: not a JSON object (it starts with {found})")]
    NotAnObject {
        /// 1-based line of the document.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The first character, shown safely.
        found: String,
    },
    /// Not JSON, or a field of the wrong type.
    #[error("line {line}, column {column}: {message}")]
    Json {
        /// 1-based line of the document.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message, sanitised.
        message: String,
    },
    /// Neither `kind` nor `items`.
    #[error("not an EventList or an Event: no \"kind\" and no \"items\"")]
    Unrecognised,
    /// Another kind of object or list.
    #[error("not an EventList or an Event: kind {kind}")]
    WrongKind {
        /// The kind, quoted and shortened.
        kind: String,
    },
    /// An API version other than core/v1.
    #[error(
        "apiVersion {api_version} is not supported: replay reads core/v1 events (`kubectl get events -o json`)"
    )]
    ApiVersion {
        /// The version, quoted and shortened.
        api_version: String,
    },
    /// A list without `items`.
    #[error("{kind} has no \"items\"")]
    NoItems {
        /// The list's kind.
        kind: String,
    },
    /// A list item of another kind.
    #[error("item {index} is not an Event (kind {kind})")]
    ItemKind {
        /// 0-based index in `items`.
        index: usize,
        /// The kind, quoted and shortened.
        kind: String,
    },
    /// A list item of another API version.
    #[error(
        "item {index}{name}: apiVersion {api_version} is not supported: replay reads core/v1 events"
    )]
    ItemApiVersion {
        /// 0-based index in `items`.
        index: usize,
        /// ` (namespace/name)` of the item, shortened, or empty.
        name: String,
        /// The version, quoted and shortened.
        api_version: String,
    },
    /// A `count` that is not a whole number from 1 to 2147483647.
    #[error("item {index}{name}: count {count} is not a whole number from 1 to 2147483647")]
    BadCount {
        /// 0-based index in `items`.
        index: usize,
        /// ` (namespace/name)` of the item, shortened, or empty.
        name: String,
        /// The count as given, shortened.
        count: String,
    },
    /// No timestamp at all.
    #[error("item {index}{name}: no firstTimestamp, lastTimestamp or eventTime")]
    NoTime {
        /// 0-based index in `items`.
        index: usize,
        /// ` (namespace/name)` of the item, shortened, or empty.
        name: String,
    },
    /// The counts add up to more occurrences than allowed.
    #[error(
        "item {index}{name}: count {count} brings the occurrences to replay to {total}, over the \
         limit of --max-occurrences {max}"
    )]
    TooManyOccurrences {
        /// 0-based index in `items` of the item that crosses the limit.
        index: usize,
        /// ` (namespace/name)` of the item, shortened, or empty.
        name: String,
        /// Its count.
        count: u64,
        /// Occurrences of the items up to and including it.
        total: u64,
        /// The limit.
        max: u64,
    },
}

impl KubectlError {
    /// The 1-based line of the document the error is on, when it is about a position.
    pub fn line(&self) -> Option<usize> {
        match self {
            KubectlError::Utf16 => Some(1),
            KubectlError::NotAnObject { line, .. } | KubectlError::Json { line, .. } => Some(*line),
            _ => None,
        }
    }

    /// The 0-based index in `items` of the event the error is about, when it is about one.
    pub fn item(&self) -> Option<usize> {
        match self {
            KubectlError::ItemKind { index, .. }
            | KubectlError::ItemApiVersion { index, .. }
            | KubectlError::BadCount { index, .. }
            | KubectlError::NoTime { index, .. }
            | KubectlError::TooManyOccurrences { index, .. } => Some(*index),
            _ => None,
        }
    }

    fn json(e: &serde_json::Error) -> Self {
        KubectlError::Json {
            line: e.line(),
            column: e.column(),
            message: excerpt::json_message(e),
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Meta {
    name: String,
    namespace: String,
}

/// What is needed to check kinds before reading the events themselves.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    items: Option<Vec<ItemHead>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ItemHead {
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    metadata: Meta,
}

#[derive(Deserialize)]
struct Items {
    #[serde(default)]
    items: Vec<Item>,
}

/// The fields of a stored event that replay uses.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct Item {
    involved_object: ObjectReference,
    reason: String,
    message: String,
    source: EventSource,
    #[serde(rename = "type")]
    type_: String,
    #[serde(with = "serde_time::secs")]
    first_timestamp: Option<Time>,
    #[serde(with = "serde_time::secs")]
    last_timestamp: Option<Time>,
    #[serde(with = "serde_time::micros")]
    event_time: Option<Time>,
    count: Option<Value>,
}

/// One stored event and the occurrences it stands for.
struct Stored {
    first: i64,
    span: i64,
    count: u64,
    item: Item,
}

impl Stored {
    /// Time of occurrence `k` (0-based) of `count`.
    fn time(&self, k: u64) -> i64 {
        if self.count <= 1 {
            return self.first;
        }
        let offset = i128::from(self.span) * i128::from(k) / i128::from(self.count - 1);
        self.first
            .saturating_add(i64::try_from(offset).unwrap_or(i64::MAX))
    }
}

/// The occurrences of a `kubectl` document in time order (stable: for equal times, in the
/// order of the items, then of the occurrences of one item).
///
/// ```
/// let list = r#"{"kind":"EventList","items":[{"metadata":{"name":"p.1","namespace":"ns"},
///   "involvedObject":{"kind":"Pod","name":"p","namespace":"ns"},"reason":"BackOff",
///   "message":"m","source":{"component":"kubelet"},"count":3,"type":"Warning",
///   "firstTimestamp":"2023-11-14T22:13:20Z","lastTimestamp":"2023-11-14T22:13:40Z"}]}"#;
/// let occurrences = kevents_sim::replay::kubectl::occurrences(list.as_bytes(), 1_000_000).unwrap();
/// assert_eq!(occurrences.remaining(), 3);
/// let lines: Vec<_> = occurrences.collect();
/// assert_eq!(lines[1].time, 1_700_000_010_000_000_000);
///
/// // Counts are capped in total, before anything is replayed.
/// let err = kevents_sim::replay::kubectl::occurrences(list.as_bytes(), 2).unwrap_err();
/// assert_eq!(err.item(), Some(0));
/// ```
pub struct Occurrences {
    items: Vec<Stored>,
    // (time, item index, occurrence index) of every item's next occurrence.
    next: BinaryHeap<Reverse<(i64, usize, u64)>>,
    remaining: u64,
}

impl std::fmt::Debug for Occurrences {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Occurrences")
            .field("events", &self.items.len())
            .field("remaining", &self.remaining)
            .finish()
    }
}

impl Occurrences {
    /// Occurrences not yet produced.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Stored events in the document.
    pub fn events(&self) -> usize {
        self.items.len()
    }
}

impl Iterator for Occurrences {
    type Item = TraceLine;

    fn next(&mut self) -> Option<TraceLine> {
        let Reverse((time, index, k)) = self.next.pop()?;
        let stored = self.items.get(index)?;
        if k + 1 < stored.count {
            self.next.push(Reverse((stored.time(k + 1), index, k + 1)));
        }
        self.remaining = self.remaining.saturating_sub(1);
        let e = &stored.item;
        Some(TraceLine {
            time,
            source: e.source.clone(),
            object: Some(e.involved_object.clone()),
            type_: e.type_.clone(),
            reason: e.reason.clone(),
            message: e.message.clone(),
            annotations: Default::default(),
            delete: None,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, usize::try_from(self.remaining).ok())
    }
}

/// Reads `kubectl get events -o json` output (an `EventList`, a `List` of events, or one
/// `Event`; a UTF-8 byte-order mark at the start is skipped) and checks every event before
/// anything is replayed: kinds, API version, counts (absent means 1; otherwise a whole number
/// from 1 to 2147483647), a timestamp, and at most `max_occurrences` occurrences in all.
pub fn occurrences(input: &[u8], max_occurrences: u64) -> Result<Occurrences, KubectlError> {
    let input = input.strip_prefix(b"\xef\xbb\xbf").unwrap_or(input);
    if input.starts_with(b"\xff\xfe") || input.starts_with(b"\xfe\xff") {
        return Err(KubectlError::Utf16);
    }
    let Some(start) = input
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    else {
        return Err(KubectlError::Empty);
    };
    if input[start] != b'{' {
        let before = &input[..start];
        let line = before.iter().filter(|b| **b == b'\n').count() + 1;
        let column = start
            - before
                .iter()
                .rposition(|b| *b == b'\n')
                .map_or(0, |p| p + 1)
            + 1;
        let b = input[start];
        let found = if b.is_ascii_graphic() {
            format!("'{}'", char::from(b))
        } else {
            format!("byte 0x{b:02x}")
        };
        return Err(KubectlError::NotAnObject {
            line,
            column,
            found,
        });
    }
    let head: Head = serde_json::from_slice(input).map_err(|e| KubectlError::json(&e))?;
    check_version(head.api_version.as_deref())?;
    let single = match (head.kind.as_deref(), &head.items) {
        (Some("Event"), _) => true,
        (Some("EventList" | "List") | None, Some(_)) => false,
        (None, None) => return Err(KubectlError::Unrecognised),
        (Some(kind @ ("EventList" | "List")), None) => {
            return Err(KubectlError::NoItems {
                kind: kind.to_owned(),
            });
        }
        (Some(kind), _) => {
            return Err(KubectlError::WrongKind {
                kind: excerpt::quote(kind),
            });
        }
    };
    let names: Vec<String>;
    let items = if single {
        names = vec![String::new()];
        vec![serde_json::from_slice::<Item>(input).map_err(|e| KubectlError::json(&e))?]
    } else {
        let heads = head.items.unwrap_or_default();
        for (index, h) in heads.iter().enumerate() {
            if let Some(kind) = h.kind.as_deref().filter(|k| *k != "Event") {
                return Err(KubectlError::ItemKind {
                    index,
                    kind: excerpt::quote(kind),
                });
            }
            if let Some(v) = h.api_version.as_deref().filter(|v| *v != "v1") {
                return Err(KubectlError::ItemApiVersion {
                    index,
                    name: item_name(&h.metadata),
                    api_version: excerpt::quote(v),
                });
            }
        }
        names = heads.iter().map(|h| item_name(&h.metadata)).collect();
        drop(heads);
        serde_json::from_slice::<Items>(input)
            .map_err(|e| KubectlError::json(&e))?
            .items
    };
    let mut stored = Vec::with_capacity(items.len());
    let mut total: u64 = 0;
    for (index, item) in items.into_iter().enumerate() {
        let name = || names.get(index).cloned().unwrap_or_default();
        let count = match &item.count {
            None | Some(Value::Null) => 1,
            Some(v) => match v.as_i64().filter(|n| (1..=i64::from(i32::MAX)).contains(n)) {
                Some(n) => n.unsigned_abs(),
                None => {
                    return Err(KubectlError::BadCount {
                        index,
                        name: name(),
                        count: excerpt::cut(&v.to_string()),
                    });
                }
            },
        };
        let last = item
            .last_timestamp
            .or(item.event_time)
            .or(item.first_timestamp);
        let first = item.first_timestamp.or(last);
        let (Some(first), Some(last)) = (first, last) else {
            return Err(KubectlError::NoTime {
                index,
                name: name(),
            });
        };
        total = total.saturating_add(count);
        if total > max_occurrences {
            return Err(KubectlError::TooManyOccurrences {
                index,
                name: name(),
                count,
                total,
                max: max_occurrences,
            });
        }
        stored.push(Stored {
            first: first.unix_nanos(),
            span: last.nanos_since(first).max(0),
            count,
            item,
        });
    }
    let next = stored
        .iter()
        .enumerate()
        .map(|(i, s)| Reverse((s.time(0), i, 0)))
        .collect();
    tracing::debug!(
        events = stored.len(),
        occurrences = total,
        "kubectl document read; replaying its occurrences in time order"
    );
    Ok(Occurrences {
        items: stored,
        next,
        remaining: total,
    })
}

fn check_version(v: Option<&str>) -> Result<(), KubectlError> {
    match v {
        Some(v) if v != "v1" => Err(KubectlError::ApiVersion {
            api_version: excerpt::quote(v),
        }),
        _ => Ok(()),
    }
}

/// ` (namespace/name)`, shortened and escaped, or empty when both are.
fn item_name(m: &Meta) -> String {
    if m.name.is_empty() && m.namespace.is_empty() {
        return String::new();
    }
    format!(
        " ({}/{})",
        excerpt::cut(&m.namespace),
        excerpt::cut(&m.name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(count: &str, first: &str, last: &str) -> String {
        format!(
            r#"{{"metadata":{{"name":"e","namespace":"n"}},"involvedObject":{{"name":"o"}},
            "reason":"R","message":"m","type":"Normal","count":{count},
            "firstTimestamp":"{first}","lastTimestamp":"{last}"}}"#
        )
    }

    fn list(items: &[String]) -> Vec<u8> {
        format!(r#"{{"kind":"EventList","items":[{}]}}"#, items.join(",")).into_bytes()
    }

    #[test]
    fn a_count_of_i32_max_streams_without_materialising() {
        let doc = list(&[event(
            "2147483647",
            "2023-11-14T22:00:00Z",
            "2023-11-14T22:05:00Z",
        )]);
        let mut occ = occurrences(&doc, u64::MAX).unwrap();
        assert_eq!(occ.remaining(), 2_147_483_647);
        let first = occ.next().unwrap();
        let second = occ.next().unwrap();
        assert_eq!(first.time, 1_699_999_200_000_000_000);
        // 300 s spread over 2^31 - 2 gaps: the second occurrence is 139 ns later.
        assert_eq!(second.time - first.time, 139);
        assert_eq!(occ.remaining(), 2_147_483_645);
        assert_eq!(occ.next.len(), 1, "one pending occurrence per event");
    }

    #[test]
    fn occurrences_merge_in_time_order_stably() {
        let doc = list(&[
            event("3", "2023-11-14T22:00:00Z", "2023-11-14T22:00:02Z"),
            event("2", "2023-11-14T22:00:01Z", "2023-11-14T22:00:02Z"),
            event("1", "2023-11-14T22:00:00Z", "2023-11-14T22:00:00Z"),
        ]);
        let got: Vec<(i64, String)> = occurrences(&doc, 10)
            .unwrap()
            .map(|l| (l.time - 1_699_999_200_000_000_000, l.reason))
            .collect();
        let secs: Vec<i64> = got.iter().map(|(t, _)| t / 1_000_000_000).collect();
        assert_eq!(secs, [0, 0, 1, 1, 2, 2]);
        assert_eq!(got.len(), 6);
        // Old behaviour: a stable sort of [item0 k0..2, item1 k0..1, item2 k0] by time.
        let doc_order: Vec<i64> = occurrences(&doc, 10).unwrap().map(|l| l.time).collect();
        let mut sorted = doc_order.clone();
        sorted.sort();
        assert_eq!(doc_order, sorted);
    }

    #[test]
    fn the_cap_names_the_item_that_crosses_it() {
        let doc = list(&[
            event("4", "2023-11-14T22:00:00Z", "2023-11-14T22:00:02Z"),
            event("4", "2023-11-14T22:00:00Z", "2023-11-14T22:00:02Z"),
        ]);
        assert_eq!(occurrences(&doc, 8).unwrap().count(), 8);
        let e = occurrences(&doc, 7).unwrap_err();
        assert_eq!(e.item(), Some(1));
        assert_eq!(
            e.to_string(),
            "item 1 (n/e): count 4 brings the occurrences to replay to 8, over the limit of \
             --max-occurrences 7"
        );
    }

    #[test]
    fn absent_and_null_counts_are_one() {
        let doc = list(&[event(
            "null",
            "2023-11-14T22:00:00Z",
            "2023-11-14T22:00:02Z",
        )]);
        assert_eq!(occurrences(&doc, 10).unwrap().count(), 1);
        let doc = br#"{"kind":"Event","involvedObject":{"name":"o"},"eventTime":"2023-11-14T22:00:00.5Z"}"#;
        let lines: Vec<_> = occurrences(doc, 10).unwrap().collect();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].time, 1_699_999_200_500_000_000);
    }

    #[test]
    fn other_api_versions_are_refused() {
        let doc = br#"{"kind":"EventList","apiVersion":"events.k8s.io/v1","items":[]}"#;
        assert!(matches!(
            occurrences(doc, 10),
            Err(KubectlError::ApiVersion { .. })
        ));
        let doc = br#"{"kind":"List","items":[{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"x"}}]}"#;
        let e = occurrences(doc, 10).unwrap_err();
        assert_eq!(e.item(), Some(0));
        assert!(e.to_string().contains("events.k8s.io/v1"), "{e}");
    }

    #[test]
    fn not_an_object_names_line_and_column() {
        let e = occurrences(b"\n\n   [1]", 10).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 3, column 4: not a JSON object (it starts with '[')"
        );
        let e = occurrences(b"\x01", 10).unwrap_err();
        assert!(e.to_string().contains("byte 0x01"), "{e}");
    }
}
