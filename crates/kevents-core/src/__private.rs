//! Not part of the public API: the fast, in-place forms of kevents-core's operations, for
//! kevents' own crates (the pipeline in `kevents-actors`, the simulators and the benchmarks).
//! No semver promise: anything here may change or go in any release. Use the public doors
//! instead: [`Correlator::correlate`](crate::Correlator::correlate),
//! [`Correlator::update_state`](crate::Correlator::update_state),
//! [`EventFactory::make`](crate::EventFactory::make),
//! [`events_v1::EventFactory::check`](crate::events_v1::EventFactory::check),
//! [`validate`](crate::core_v1::validate) and [`write_event`](crate::write_event).
//!
//! Every fast form is here, and only here: [`correlate_in_place`] (of `correlate`, answers a
//! [`Decision`]), [`update_state_with`] (of `update_state`, takes a [`StateHint`]),
//! [`make_into`] (of `make`, takes an [`OccurrenceRef`]), [`check_ref`] (of `check`, takes an
//! [`EventsV1OccurrenceRef`]), [`validate_namespace`] (of `validate`) and [`WriteEvent`] (the
//! future `write_event` awaits, over shared values the pipeline holds and polls in place).

pub use crate::core_v1::correlator::fast::{Decision, StateHint};
pub use crate::core_v1::make::{OccurrenceRef, validate_namespace};
pub use crate::core_v1::write::WriteEvent;
pub use crate::events_v1::make::EventsV1OccurrenceRef;

use crate::core_v1::correlator::Correlator;
use crate::core_v1::{Event, EventFactory, InvalidEvent};

use crate::time::Time;

/// The fast form of [`Correlator::correlate`]: the event becomes, in place, what
/// `Correlated::event` would be; the rest of the decision is returned.
#[inline]
pub fn correlate_in_place(correlator: &mut Correlator, event: &mut Event) -> Decision {
    correlator.correlate_decision(event)
}

/// The fast form of [`Correlator::update_state`], with the hint of the correlation that
/// produced the write (a hint that no longer fits is ignored).
#[inline]
pub fn update_state_with(correlator: &mut Correlator, hint: Option<StateHint>, stored: &Event) {
    correlator.learn_with_hint(hint, stored)
}

/// The fast form of [`EventFactory::make`]: built into `event`, reusing its buffers.
#[inline]
pub fn make_into(
    factory: &EventFactory,
    event: &mut Event,
    now: Time,
    occ: OccurrenceRef<'_>,
) -> Result<(), InvalidEvent> {
    factory.build_into(event, now, occ)
}

/// The fast form of [`events_v1::EventFactory::check`](crate::events_v1::EventFactory::check), on borrowed strings.
#[inline]
pub fn check_ref(
    factory: &crate::events_v1::EventFactory,
    now: Time,
    occ: EventsV1OccurrenceRef<'_>,
) -> Result<(), crate::events_v1::InvalidEvent> {
    factory.check_borrowed(now, occ)
}
