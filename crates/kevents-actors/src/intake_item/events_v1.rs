//! How the recorder handles `events.k8s.io/v1` calls: built and validated at the call, or
//! routed to the core/v1 path when the API is not served (client-go's adapter), and whether
//! core/v1 style calls go to the new API.

use std::sync::Arc;

use kevents_core::Time;
use kevents_core::events_v1::{ApiBridge, CoreFallback, Reporter, Route};

/// What core/v1 style calls (`event`, `eventf!`, `emit`, ...) record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CoreCalls {
    /// core/v1 events through the correlator chains, as client-go `tools/record`. The default.
    #[default]
    CoreV1,
    /// `events.k8s.io/v1` events through the series chains
    /// ([`from_core_occurrence`](kevents_core::events_v1::from_core_occurrence)): the object
    /// becomes `regarding`, the message the `note`; `action` is this value, or the reason
    /// when `None`. Only while events.k8s.io/v1 is served ([`EventsV1Config::served`]).
    EventsV1 {
        /// The action of every such event (`None`: the reason).
        action: Option<String>,
    },
}

/// How the recorder handles `events.k8s.io/v1` calls ([`Recorder::events_v1`],
/// [`eventf_events_v1!`](crate::eventf_events_v1)), and core/v1 calls when they should go to the new API.
///
/// ```
/// use kevents_actors::{CoreCalls, EventsV1Config};
/// use kevents_core::events_v1::{CoreFallback, Reporter};
///
/// // Discovery said events.k8s.io/v1 is missing (e.g. `HttpSink::events_v1_served()` was
/// // false): v1 calls become core/v1 events, keeping action/related in annotations.
/// let old = EventsV1Config::new(Reporter::with_instance("example.com/ctl", "ctl-0"))
///     .served(false)
///     .fallback(CoreFallback::KeepInAnnotations);
/// assert!(!old.served);
/// // Everything into the new API, including `recorder.event(..)` calls.
/// let all_v1 = EventsV1Config::new(Reporter::new("example.com/ctl"))
///     .core_calls(CoreCalls::EventsV1 { action: None });
/// assert!(all_v1.served);
/// ```
///
/// [`Recorder::events_v1`]: crate::Recorder::events_v1
#[derive(Debug, Clone)]
pub struct EventsV1Config {
    /// Builds and validates the events (reporter, naming, cluster-scoped namespace, note
    /// policy).
    pub factory: kevents_core::events_v1::EventFactory,
    /// Whether the server serves `events.k8s.io/v1` (discovery). `true` by default; when
    /// `false`, v1 calls fall back to core/v1 through the correlator path.
    pub served: bool,
    /// What the core/v1 fallback does with `action` and `related`.
    pub fallback: CoreFallback,
    /// What core/v1 style calls record.
    pub core_calls: CoreCalls,
}

impl EventsV1Config {
    /// Events reported by `reporter` (`Reporter::new(controller)` gives
    /// `<controller>-<hostname>` as the instance), served, dropping action/related on a
    /// fallback, core calls kept on core/v1.
    pub fn new(reporter: Reporter) -> Self {
        EventsV1Config {
            factory: kevents_core::events_v1::EventFactory::new(reporter),
            served: true,
            fallback: CoreFallback::Drop,
            core_calls: CoreCalls::CoreV1,
        }
    }

    /// Replaces the factory (naming, cluster-scoped namespace, note policy).
    pub fn factory(mut self, factory: kevents_core::events_v1::EventFactory) -> Self {
        self.factory = factory;
        self
    }

    /// Sets whether events.k8s.io/v1 is served.
    pub fn served(mut self, served: bool) -> Self {
        self.served = served;
        self
    }

    /// Sets the core/v1 fallback of action and related.
    pub fn fallback(mut self, fallback: CoreFallback) -> Self {
        self.fallback = fallback;
        self
    }

    /// Sets what core/v1 style calls record.
    pub fn core_calls(mut self, core_calls: CoreCalls) -> Self {
        self.core_calls = core_calls;
        self
    }
}

/// The recorder side of [`EventsV1Config`], shared by every handle.
#[derive(Debug, Clone)]
pub(crate) struct V1Intake(Arc<EventsV1Config>);

impl Default for V1Intake {
    fn default() -> Self {
        V1Intake(Arc::new(EventsV1Config::new(Reporter::with_instance(
            "kevents", "kevents",
        ))))
    }
}

impl V1Intake {
    pub(crate) fn new(config: EventsV1Config) -> Self {
        V1Intake(Arc::new(config))
    }

    /// Routes one v1 call made at `now`.
    pub(crate) fn route(
        &self,
        now: Time,
        occ: kevents_core::events_v1::Occurrence,
    ) -> Result<Route, kevents_core::events_v1::InvalidEvent> {
        let bridge = ApiBridge {
            events_v1_served: self.0.served,
            fallback: self.0.fallback,
        };
        bridge.route(&self.0.factory, now, occ)
    }

    /// The factory that builds and checks the events.
    pub(crate) fn factory(&self) -> &kevents_core::events_v1::EventFactory {
        &self.0.factory
    }

    /// Whether events.k8s.io/v1 calls go to that API (not routed to core/v1).
    pub(crate) fn served(&self) -> bool {
        self.0.served
    }

    /// Whether core/v1 calls are to be recorded into events.k8s.io/v1 (what
    /// [`core_calls_action`](Self::core_calls_action) says, without copying the action).
    pub(crate) fn routes_core_calls(&self) -> bool {
        matches!(self.0.core_calls, CoreCalls::EventsV1 { .. }) && self.0.served
    }

    /// `Some(action)` when core/v1 calls are to be recorded into events.k8s.io/v1.
    pub(crate) fn core_calls_action(&self) -> Option<Option<String>> {
        match &self.0.core_calls {
            CoreCalls::EventsV1 { action } if self.0.served => Some(action.clone()),
            _ => None,
        }
    }
}
