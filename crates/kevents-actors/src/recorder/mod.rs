//! The recorder: the [`Recorder`] handle users call, the bounded intake behind it, and the
//! Recorder actor that takes what the intake accepted and publishes it to the broadcaster.
//!
//! ```text
//!  Recorder (handle) ─▶ Intake: closed? valid? v1 routing ─▶ [intake queue] ─▶ RecorderActor ─Publish─▶ Broadcaster
//!                                     │ full (coalesce-if-full) ─▶ [overflow table] ─┘ (drained once the queue is empty)
//!        │ FakeRecorder: FakeStore keeps FakeEvents instead
//! ```

mod actor;
mod coalesce;
mod events_v1;
mod fake;
mod fake_backend;
mod format;
mod handle;
mod intake;
mod intake_queue;
mod outcome;

pub(crate) use actor::{CloseIntake, RecorderActor, StopRecorder};
pub use events_v1::EventsV1Recorder;
pub use fake::FakeRecorder;
pub use fake_backend::FakeEvent;
pub(crate) use handle::Backend;
pub use handle::{ObjectRecorder, Recorder};
pub(crate) use intake::Intake;
pub use outcome::{DropReason, Emit, RecordError};
