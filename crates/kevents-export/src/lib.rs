//! The read side of kevents: watch a cluster's Events (core/v1 or events.k8s.io/v1, per
//! namespace or cluster-wide) and export every occurrence exactly once: one
//! [`ExportRecord`] per change of an event's count, whose `delta`s sum to its count, into a
//! [`RecordSink`] (NATS JetStream: [`JetStream`]), with the resume point in a
//! [`ResumeStore`] (JetStream's key-value store), so that a restarted process or another
//! replica continues without losing or repeating an occurrence. See docs/export.md.
//!
//! Source layout: `record.rs` ([`ExportRecord`], [`Api`]), `store.rs` (the sink and store
//! traits, [`MemoryResume`]), `jetstream.rs` ([`JetStream`]), `watcher.rs` (one watch
//! scope: list, watch, relist), `run.rs` ([`run`], the loop that computes deltas),
//! `actor.rs` ([`ExportActor`]), `webhook.rs` ([`Webhook`], a second sink), `history.rs` (reading the
//! history back: [`history::read_window`], [`history::HistoryReader`]), `error.rs`.
//!
//! ```
//! let r = kevents_export::ExportRecord { uid: "u".into(), count: 5, delta: 2, ..Default::default() };
//! assert_eq!(r.key(), "u:5");
//! ```

mod actor;
mod error;
pub mod history;
pub mod jetstream;
mod record;
mod run;
mod store;
mod watcher;
mod webhook;

pub use actor::{ExportActor, StopExport};
pub use async_nats;
pub use error::ExportError;
pub use jetstream::{JetStream, JetStreamConfig};
pub use record::{Api, ExportRecord, MAX_COUNT, Malformed, Regarding};
pub use run::{ExportConfig, ExportStats, Incomplete, run, scope_key};
pub use store::{MemoryResume, RecordSink, ResumePoint, ResumeStore};
pub use webhook::{IDEMPOTENCY_KEY, Webhook};
