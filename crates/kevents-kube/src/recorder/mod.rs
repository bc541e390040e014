//! The drop-in for `kube::runtime::events::Recorder`: [`Recorder::new`]`(client, reporter)`
//! and [`Recorder::publish`]`(&Event, &ObjectReference)` with kube's own types, backed by the
//! kevents actor pipeline's `events.k8s.io/v1` series chain writing through a
//! [`KubeSink`](crate::KubeSink); and [`FakeRecorder`], its fake for unit tests.
//!
//! Files: `options.rs` ([`RecorderOptions`], [`Notes`], [`NoteLength`]), `error.rs`
//! ([`PublishError`], [`StartError`]), `convert.rs` (kube's types as kevents'), `fake_store.rs` ([`Published`]),
//! `handle.rs` (the [`Recorder`] handle), `fake.rs` ([`FakeRecorder`]).

mod convert;
mod error;
mod fake;
mod fake_store;
mod handle;
mod options;
mod preflight;

pub use error::{PublishError, StartError};
pub use fake::FakeRecorder;
pub use fake_store::Published;
pub use handle::{Recorder, SINK_NAME};
pub use options::{NoteLength, Notes, RecorderOptions};
