//! The types of the correlator's fast forms (`Correlator::correlate_in_place` and
//! `Correlator::update_state_with`), which the pipeline uses. Not part of the public API:
//! reached through `kevents_core::__private` only.

/// What `Correlator::correlate_in_place` decided (the event itself is changed in place):
/// the fields of `Correlated` but the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The strategic-merge patch body when the event was seen before.
    pub patch: Option<Vec<u8>>,
    /// The spam filter had no token: write nothing.
    pub skip: bool,
    /// The occurrence was folded into an aggregate event.
    pub aggregated: bool,
    /// Where the correlator keeps this event's state (see `Correlated::hint`).
    pub hint: Option<StateHint>,
}

/// Where a `Correlator` keeps the state of an event it correlated (its observer cache
/// entry). `Correlator::update_state_with` checks the entry's key against the stored
/// event field by field and uses it without building, hashing and looking up the key;
/// a hint that no longer fits (the entry was reused for another event) is ignored, so a
/// hint can never make the correlator learn the wrong event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateHint(pub(super) u32);
