//! What the intake carries and how it becomes an event, below both the recorder (which
//! accepts items) and the broadcaster (which builds their events when the first watcher takes
//! them): the intake [`Item`], the events.k8s.io/v1 configuration the items are built with
//! ([`EventsV1Config`], [`V1Intake`]), and [`build`].
//!
//! ```text
//!  recorder/ (Intake, RecorderActor) ──Item──▶ broadcaster/ ──build(Factories, Item, EventPool)──▶ Arc<Recorded>
//!        └────────────── both use intake_item/, which uses neither ──────────────┘
//! ```

mod events_v1;
mod item;

pub(crate) use events_v1::V1Intake;
pub use events_v1::{CoreCalls, EventsV1Config};
pub(crate) use item::{BoundCore, Factories, Item, PackedCore, PackedV1, build};
