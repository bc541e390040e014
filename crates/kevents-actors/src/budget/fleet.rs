//! A write budget as a member of a fleet that shares its law ([`BudgetMember`]): the laws
//! it decides after a 429 go out to the fleet's link, the laws the link reads come in.

use std::sync::{Arc, Weak};
use std::time::{SystemTime, UNIX_EPOCH};

use kevents_core::fleet::{FleetLaw, FleetMember, FleetPhase};
use tokio::sync::watch;
use tokio::time::Instant;

use super::throttle::Law;
use super::{Inner, WriteBudget};

/// The fleet's side of a budget's state: the law it follows and where its proposals go.
#[derive(Debug)]
pub(super) struct Joined {
    pub proposals: watch::Sender<Option<FleetLaw>>,
    /// The law followed (proposed or adopted), as the fleet knows it.
    pub law: Option<FleetLaw>,
}

/// A [`WriteBudget`] in a fleet that shares its write law, from
/// [`WriteBudget::join_fleet`]: hand it to the fleet's link
/// (`kevents_runtime::fleet::FleetLease`), which writes the laws this budget decides after a
/// 429 ([`FleetMember::proposal`]) and makes it follow the others' ([`FleetMember::adopt`]).
/// It holds the budget weakly: once every handle of the budget is dropped, `proposal`
/// returns `None` and the link ends.
#[derive(Debug)]
pub struct BudgetMember {
    budget: Weak<Inner>,
    proposals: watch::Receiver<Option<FleetLaw>>,
}

impl BudgetMember {
    pub(super) fn new(budget: &WriteBudget, proposals: watch::Receiver<Option<FleetLaw>>) -> Self {
        BudgetMember {
            budget: Arc::downgrade(&budget.0),
            proposals,
        }
    }

    /// The budget, while it lives.
    pub fn budget(&self) -> Option<WriteBudget> {
        self.budget.upgrade().map(WriteBudget)
    }
}

impl FleetMember for BudgetMember {
    fn adopt(&self, law: &FleetLaw) {
        if let Some(inner) = self.budget.upgrade() {
            WriteBudget(inner).adopt(law);
        }
    }

    async fn proposal(&mut self) -> Option<FleetLaw> {
        loop {
            self.proposals.changed().await.ok()?;
            if let Some(law) = *self.proposals.borrow_and_update() {
                return Some(law);
            }
        }
    }
}

/// `law` on this process's clocks (`now` and `wall` read together).
pub(super) fn to_local_law(law: &FleetLaw, now: Instant, wall: SystemTime) -> Law {
    let since = law.since();
    let since = match wall.duration_since(since) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(now),
        Err(ahead) => now + ahead.duration(),
    };
    Law {
        epoch: law.epoch,
        slow_start: law.phase == FleetPhase::SlowStart,
        from: law.from,
        since,
    }
}

/// `law` as the fleet shares it (`now` and `wall` read together).
pub(super) fn to_shared_law(law: &Law, now: Instant, wall: SystemTime) -> FleetLaw {
    let since = if law.since <= now {
        wall.checked_sub(now - law.since).unwrap_or(UNIX_EPOCH)
    } else {
        wall.checked_add(law.since - now).unwrap_or(wall)
    };
    FleetLaw {
        epoch: law.epoch,
        phase: if law.slow_start {
            FleetPhase::SlowStart
        } else {
            FleetPhase::Adapted
        },
        from: law.from,
        since_micros: FleetLaw::micros_of(since),
    }
}
