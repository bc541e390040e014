//! Not part of the public API: the fast, in-place forms of kevents-core's operations, for
//! kevents' own crates (the pipeline in `kevents-actors`, the simulators and the benchmarks).
//! No semver promise: anything here may change or go in any release. Use the public doors
//! instead: [`Correlator::correlate`](crate::Correlator::correlate),
//! [`Correlator::update_state`](crate::Correlator::update_state),
//! [`EventFactory::make`](crate::EventFactory::make),
//! [`EventFactoryV1::check`](crate::events_v1::EventFactoryV1::check),
//! [`validate`](crate::core_v1::validate) and [`write_event`](crate::write_event).
//!
//! The fast forms that must stay methods of their types are hidden from the documentation
//! there: `Correlator::correlate_in_place` (of `correlate`, answers a [`Decision`]),
//! `Correlator::update_state_with` (of `update_state`, takes a [`StateHint`]),
//! `EventFactory::make_into` (of `make`, takes an [`OccurrenceRef`]), `Event::reset` and
//! `ObjectMeta::reset` (what `make_into` starts from), `EventFactoryV1::check_ref` (of
//! `check`, takes an [`OccurrenceV1Ref`]). Their types, the free function
//! [`validate_namespace`] (of `validate`) and [`WriteEvent`] (the future `write_event`
//! awaits, over shared values the pipeline holds and polls in place) are here.

pub use crate::core_v1::correlator::fast::{Decision, StateHint};
pub use crate::core_v1::make::{OccurrenceRef, validate_namespace};
pub use crate::core_v1::write::WriteEvent;
pub use crate::events_v1::make::OccurrenceV1Ref;
