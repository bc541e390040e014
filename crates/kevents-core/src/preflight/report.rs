//! What a preflight found: every question asked, its answer, and the problems that would
//! lose events, with a readable [`Display`](std::fmt::Display).

use std::fmt;

/// The event API a recorder writes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventsApi {
    /// `events.k8s.io/v1` (client-go `tools/events`; the drop-in and `events_v1().event` calls).
    EventsV1,
    /// core/v1 `Event` (client-go `tools/record`; the fallback when events.k8s.io/v1 is not
    /// served).
    CoreV1,
}

impl EventsApi {
    /// The API group RBAC rules name: `events.k8s.io` or `""` (core).
    pub const fn group(self) -> &'static str {
        match self {
            EventsApi::EventsV1 => "events.k8s.io",
            EventsApi::CoreV1 => "",
        }
    }

    /// `events.k8s.io/v1` or `v1`.
    pub const fn api_version(self) -> &'static str {
        match self {
            EventsApi::EventsV1 => "events.k8s.io/v1",
            EventsApi::CoreV1 => "v1",
        }
    }

    /// The discovery path that says whether it is served.
    pub const fn discovery_path(self) -> &'static str {
        match self {
            EventsApi::EventsV1 => "/apis/events.k8s.io/v1",
            EventsApi::CoreV1 => "/api/v1",
        }
    }

    fn group_name(self) -> &'static str {
        match self {
            EventsApi::EventsV1 => "\"events.k8s.io\"",
            EventsApi::CoreV1 => "\"\" (core)",
        }
    }
}

/// One permission asked: `verb` on `events` of `api` in `namespace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessCheck {
    /// The namespace.
    pub namespace: String,
    /// `create` or `patch`.
    pub verb: &'static str,
    /// The API (its group is what RBAC checks).
    pub api: EventsApi,
    /// The answer: allowed or not, or why there is none.
    pub answer: Result<bool, String>,
    /// The authorizer's reason, if any.
    pub reason: String,
}

/// A reason events would be lost (or could not be checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// This identity may not `verb` `events` of `api` in `namespace`: every such write
    /// would be refused with 403.
    Denied {
        /// `create` or `patch`.
        verb: &'static str,
        /// The API (group).
        api: EventsApi,
        /// The namespace.
        namespace: String,
    },
    /// The review itself failed (the apiserver refused or did not answer it).
    Unchecked {
        /// `create` or `patch`.
        verb: &'static str,
        /// The API (group).
        api: EventsApi,
        /// The namespace.
        namespace: String,
        /// Why.
        error: String,
    },
    /// Discovery of the event APIs failed.
    Discovery {
        /// The API asked about.
        api: EventsApi,
        /// Why.
        error: String,
    },
    /// The API the recorder is set to write with is not served.
    NotServed {
        /// The API.
        api: EventsApi,
    },
    /// `reportingController` is not a qualified name (too long, empty or bad characters):
    /// every events.k8s.io/v1 write would be refused with 422.
    ReportingController {
        /// The value.
        value: String,
    },
    /// `reportingInstance` is empty or longer than 128 bytes: every events.k8s.io/v1 write
    /// would be refused with 422.
    ReportingInstance {
        /// Its length in bytes.
        length: usize,
    },
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Denied {
                verb,
                api,
                namespace,
            } => write!(
                f,
                "may not {verb} events in API group {} in namespace {namespace:?}: those \
                 writes would be refused (403); grant it with a Role, e.g. `kubectl create \
                 role event-writer -n {namespace} --verb=create,patch --resource=events{}` \
                 and a RoleBinding",
                api.group_name(),
                if *api == EventsApi::EventsV1 {
                    ".events.k8s.io"
                } else {
                    ""
                }
            ),
            Problem::Unchecked {
                verb,
                api,
                namespace,
                error,
            } => write!(
                f,
                "could not check whether {verb} events in API group {} in namespace \
                 {namespace:?} is allowed: {error}",
                api.group_name()
            ),
            Problem::Discovery { api, error } => write!(
                f,
                "could not find out whether {} is served: {error}",
                api.api_version()
            ),
            Problem::NotServed { api } => write!(
                f,
                "{} is not served by this apiserver: every write would fail",
                api.api_version()
            ),
            Problem::ReportingController { value } => write!(
                f,
                "reportingController {value:?} ({} bytes) is not a qualified name \
                 ([prefix/]name, the name part at most 63 characters of [-A-Za-z0-9_.], \
                 alphanumeric at both ends): the apiserver refuses every events.k8s.io/v1 \
                 event (422)",
                value.len()
            ),
            Problem::ReportingInstance { length: 0 } => write!(
                f,
                "reportingInstance is empty: the apiserver refuses every events.k8s.io/v1 \
                 event (422)"
            ),
            Problem::ReportingInstance { length } => write!(
                f,
                "reportingInstance is {length} bytes, more than 128: the apiserver refuses \
                 every events.k8s.io/v1 event (422)"
            ),
        }
    }
}

/// What a preflight found ([`crate::preflight::run`]).
///
/// ```
/// use kevents_core::preflight::{EventsApi, PreflightReport, Problem};
/// let mut r = PreflightReport::default();
/// assert!(r.is_ok());
/// r.problems.push(Problem::NotServed { api: EventsApi::EventsV1 });
/// assert!(!r.is_ok());
/// assert!(r.to_string().contains("events.k8s.io/v1 is not served"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreflightReport {
    /// Whether `events.k8s.io/v1` is served (`None`: not asked or discovery failed).
    pub events_v1_served: Option<bool>,
    /// The APIs the recorder writes with, each checked (both when discovery failed).
    pub apis: Vec<EventsApi>,
    /// The `reportingController` and `reportingInstance` checked, if any.
    pub reporter: Option<(String, String)>,
    /// Every permission asked, in order.
    pub checks: Vec<AccessCheck>,
    /// Everything that would lose events, in order; empty when all is well.
    pub problems: Vec<Problem>,
}

impl PreflightReport {
    /// Whether no problem was found: events would be written.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    /// The namespaces checked, in order, without repeats.
    pub fn namespaces(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for c in &self.checks {
            if !out.contains(&c.namespace.as_str()) {
                out.push(&c.namespace);
            }
        }
        out
    }
}

impl fmt::Display for PreflightReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // core/v1 by its name: its apiVersion, "v1", reads as if it were events.k8s.io/v1's.
        let apis: Vec<&str> = self
            .apis
            .iter()
            .map(|a| match a {
                EventsApi::CoreV1 => "core/v1",
                EventsApi::EventsV1 => a.api_version(),
            })
            .collect();
        match self.events_v1_served {
            None if self.apis.len() > 1 => write!(
                f,
                "the event API is unknown (discovery failed); checked {}",
                apis.join(" and ")
            )?,
            Some(false) if self.apis == [EventsApi::CoreV1] => write!(
                f,
                "events are written with core/v1 (events.k8s.io/v1 is not served)"
            )?,
            _ => write!(f, "events are written with {}", apis.join(" and "))?,
        }
        if let Some((controller, instance)) = &self.reporter {
            write!(
                f,
                "; reportingController {controller:?}, reportingInstance {instance:?}"
            )?;
        }
        writeln!(f, ".")?;
        for c in &self.checks {
            let answer = match &c.answer {
                Ok(true) => "allowed".to_owned(),
                Ok(false) => "DENIED".to_owned(),
                Err(e) => format!("not checked: {e}"),
            };
            write!(
                f,
                "  {:<6} events ({}) in namespace {:<20} {answer}",
                c.verb,
                c.api.api_version(),
                format!("{:?}", c.namespace)
            )?;
            if !c.reason.is_empty() {
                write!(f, " ({})", c.reason)?;
            }
            writeln!(f)?;
        }
        if self.problems.is_empty() {
            return write!(f, "no problem found: events will be written");
        }
        writeln!(
            f,
            "{} problem{} (events would be lost):",
            self.problems.len(),
            if self.problems.len() == 1 { "" } else { "s" }
        )?;
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "  - {p}")?;
        }
        Ok(())
    }
}
