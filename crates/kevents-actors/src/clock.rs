//! A clock on tokio's time, so that event stamps, series deadlines and actix timers move
//! together under `tokio::time::pause`/`advance`.

use kevents_core::{Clock, Time};

/// A [`Clock`] that reads tokio's clock, so that events, series and the actix timers all
/// follow `tokio::time::pause`/`advance` in tests (with real time it is the system clock's
/// pace from `base`).
///
/// ```
/// use kevents_actors::TokioClock;
/// use kevents_core::{Clock, Time};
/// # actix::System::new().block_on(async {
/// let clock = TokioClock::new(Time::from_unix_secs(1_609_459_200));
/// assert!(clock.now() >= Time::from_unix_secs(1_609_459_200));
/// # });
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base: Time,
    start: tokio::time::Instant,
}

impl TokioClock {
    /// A clock reading `base` now. Must be called inside a tokio runtime when time is
    /// paused (the start instant is tokio's `Instant::now()`).
    pub fn new(base: Time) -> Self {
        TokioClock {
            base,
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Time {
        self.base
            .saturating_add(tokio::time::Instant::now().duration_since(self.start))
    }
}
