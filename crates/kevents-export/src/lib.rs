//! The read side of kevents: watch a cluster's Events (core/v1 or events.k8s.io/v1, per
//! namespace or cluster-wide) and export every occurrence exactly once: one
//! [`ExportRecord`] per change of an event's count, whose `delta`s sum to its count, into a
//! [`RecordSink`] (NATS JetStream: [`JetStream`]), with the resume point in a
//! [`ResumeStore`] (JetStream's key-value store), so that a restarted process or another
//! replica continues without losing or repeating an occurrence. See docs/export.md.
//!
//! Source layout: `record.rs` ([`ExportRecord`], [`Api`]), `store.rs` (the sink and store
//! traits, [`MemoryResume`]), `counts.rs` ([`Counts`]: per live event, compact), `jetstream.rs` ([`JetStream`]), `watcher.rs` (one watch
//! scope: list, watch, relist), `run.rs` ([`run`], the loop that computes deltas), `shard.rs` ([`Shard`]: the hash
//! ranges of `--shards`, their streams' layout),
//! `actor.rs` ([`ExportActor`]), `webhook.rs` ([`Webhook`], a second sink), `otlp.rs` ([`Otlp`], OTLP logs),
//! `http_out.rs` ([`HttpOptions`]: the HTTP sinks' headers and TLS), `configmap.rs`
//! ([`ConfigMapResume`], a resume point in a ConfigMap), `feed.rs` ([`feed`]: an HTTP sink
//! fed from the stream), `history.rs` (reading the history back:
//! [`history::read_window`], [`history::HistoryReader`]), `error.rs`, `__private.rs` (the per-record steps for the
//! instruction-count guard; not public API).
//!
//! ```
//! let r = kevents_export::ExportRecord { uid: "u".into(), count: 5, delta: 2, ..Default::default() };
//! assert_eq!(r.key(), "u:5");
//! ```

#[doc(hidden)]
pub mod __private;
mod actor;
mod configmap;
mod counts;
mod error;
mod feed;
pub mod history;
mod http_out;
pub mod jetstream;
mod otlp;
mod record;
mod run;
pub mod shard;
mod store;
mod watcher;
mod webhook;

pub use actor::{ExportActor, StopExport};
pub use async_nats;
pub use configmap::ConfigMapResume;
pub use counts::Counts;
pub use error::ExportError;
pub use feed::{BatchSink, FeedConfig, FeedStats, feed, feed_position};
pub use http_out::HttpOptions;
pub use jetstream::{JetStream, JetStreamConfig};
pub use otlp::{OTLP_SCOPE, Otlp, log_request, otlp_severity};
pub use record::{Api, ExportRecord, MAX_COUNT, Malformed, Regarding};
pub use run::{ExportConfig, ExportStats, Incomplete, run, scope_key};
pub use shard::{MAX_SHARDS, Shard, fnv1a64};
pub use store::{MemoryResume, RecordSink, ResumePoint, ResumeStore};
pub use webhook::{IDEMPOTENCY_KEY, Webhook};
