//! Preflight: before recording, ask the apiserver whether events would be written. Events
//! that go missing because of RBAC are the most reported problem of controllers moving to
//! events.k8s.io/v1 (no `create`/`patch` on `events` in group `events.k8s.io`, cluster-scoped
//! objects' events in a namespace without a Role, reporting names too long), found only once
//! events are missing. [`run`] checks, for the identity of the client:
//!
//! * which event API is served (discovery of `events.k8s.io/v1`), hence which API and group
//!   the recorder writes with;
//! * with one `SelfSubjectAccessReview` each, whether it may `create` and `patch` `events` in
//!   that group in every namespace it will write to, the namespace of cluster-scoped
//!   objects' events included (core/v1: `default`; events.k8s.io/v1: kevents'
//!   [`ClusterScopedNamespace`], `kube-system` by default);
//! * whether `reportingController` is a qualified name and `reportingInstance` at most 128
//!   bytes (events.k8s.io/v1 refuses the event otherwise).
//!
//! The requests go through [`PreflightApi`], implemented by kevents-http's `HttpSink` and
//! kevents-kube's `KubeSink`; `kevents doctor` prints the [`PreflightReport`].
//!
//! ```
//! use kevents_core::preflight::{self, AccessReview, PreflightApi, PreflightFuture,
//!                               PreflightPlan, ResourceAttributes};
//! use kevents_core::SinkError;
//!
//! /// An apiserver that serves events.k8s.io/v1 and allows everything but `patch`.
//! struct NoPatch;
//! impl PreflightApi for NoPatch {
//!     fn served<'a>(&'a self, _path: &'a str) -> PreflightFuture<'a, Result<bool, SinkError>> {
//!         Box::pin(async { Ok(true) })
//!     }
//!     fn review<'a>(&'a self, q: &'a ResourceAttributes)
//!         -> PreflightFuture<'a, Result<AccessReview, SinkError>> {
//!         let allowed = q.verb != "patch";
//!         Box::pin(async move { Ok(AccessReview { allowed, ..Default::default() }) })
//!     }
//! }
//!
//! let plan = PreflightPlan::discover(["team-a"]).reporter("example.com/ctl", "ctl-7f9c");
//! let report = futures_executor_block_on(preflight::run(&NoPatch, &plan)).unwrap();
//! assert!(!report.is_ok());
//! // team-a, and kube-system for cluster-scoped objects: patch denied in both.
//! assert_eq!(report.problems.len(), 2);
//! assert!(report.to_string().contains("may not patch events in API group \"events.k8s.io\""));
//! # fn futures_executor_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     // A one-future executor: the fake answers at once.
//! #     use std::task::{Context, Poll, Waker};
//! #     let mut f = std::pin::pin!(f);
//! #     let mut cx = Context::from_waker(Waker::noop());
//! #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } }
//! # }
//! ```

mod report;
mod review;

use std::future::Future;
use std::pin::Pin;

use thiserror::Error;

use crate::events_v1::ClusterScopedNamespace;
use crate::name;
use crate::status::{SinkError, sanitize_server_text_to};
pub use report::{AccessCheck, EventsApi, PreflightReport, Problem};
pub use review::{ACCESS_REVIEW_PATH, AccessReview, ResourceAttributes};

/// The future of one preflight request.
pub type PreflightFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The two requests a preflight makes, over a client's transport (authentication, TLS,
/// timeouts and error decoding are the client's).
pub trait PreflightApi: Send + Sync {
    /// Whether the API group version at `path` (`/apis/events.k8s.io/v1`) is served: `GET`
    /// answered 2xx (`true`) or 404 (`false`).
    fn served<'a>(&'a self, path: &'a str) -> PreflightFuture<'a, Result<bool, SinkError>>;

    /// `POST` of [`ResourceAttributes::review_body`] to [`ACCESS_REVIEW_PATH`]; a 2xx answer
    /// decoded with [`AccessReview::decode`], any other as the client's error.
    fn review<'a>(
        &'a self,
        question: &'a ResourceAttributes,
    ) -> PreflightFuture<'a, Result<AccessReview, SinkError>>;
}

/// Which event API the recorder writes with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiChoice {
    /// events.k8s.io/v1 when served, else core/v1 (the drop-in's and client-go's fallback).
    Discover,
    /// Exactly these (a pipeline with core/v1 sink chains and events.k8s.io/v1 series
    /// chains writes with both); each must be served.
    Use(Vec<EventsApi>),
}

/// What to check ([`run`]).
///
/// ```
/// use kevents_core::preflight::{ApiChoice, EventsApi, PreflightPlan};
/// let plan = PreflightPlan::discover(["team-a", "team-b"]);
/// assert_eq!(plan.api, ApiChoice::Discover);
/// assert!(plan.cluster_scoped);
/// let core_only = PreflightPlan::discover(["team-a"]).api(ApiChoice::Use(vec![EventsApi::CoreV1]));
/// assert_eq!(core_only.namespaces_for(EventsApi::CoreV1), ["team-a", "default"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreflightPlan {
    /// The event API(s).
    pub api: ApiChoice,
    /// The namespaces the recorder writes to (those of the objects it records about).
    pub namespaces: Vec<String>,
    /// Whether it records about cluster-scoped objects (nodes, namespaces, cluster roles):
    /// their events go to `default` (core/v1) or [`PreflightPlan::cluster_scoped_events_v1`]
    /// (events.k8s.io/v1). On by default.
    pub cluster_scoped: bool,
    /// The events.k8s.io/v1 namespace of cluster-scoped objects' events (kevents' default
    /// `kube-system`).
    pub cluster_scoped_events_v1: ClusterScopedNamespace,
    /// `reportingController` and `reportingInstance`, checked when events.k8s.io/v1 is used.
    pub reporter: Option<(String, String)>,
}

/// A plan that cannot be checked (nothing was sent).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidPlan {
    /// A namespace is not a DNS-1123 label.
    #[error(
        "namespace {0:?} is not a DNS-1123 label (lower-case letters, digits and '-', at most 63)"
    )]
    Namespace(String),
    /// No namespace to check and no cluster-scoped objects.
    #[error("no namespace to check: name at least one, or include cluster-scoped objects")]
    Empty,
    /// `ApiChoice::Use` with no API.
    #[error("no event API to check")]
    NoApi,
}

impl PreflightPlan {
    /// Discover the API; check `namespaces` and the cluster-scoped objects' namespace.
    pub fn discover<I, S>(namespaces: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PreflightPlan {
            api: ApiChoice::Discover,
            namespaces: namespaces.into_iter().map(Into::into).collect(),
            cluster_scoped: true,
            cluster_scoped_events_v1: ClusterScopedNamespace::default(),
            reporter: None,
        }
    }

    /// With this API choice.
    pub fn api(mut self, api: ApiChoice) -> Self {
        self.api = api;
        self
    }

    /// With these reporting names checked.
    pub fn reporter(mut self, controller: impl Into<String>, instance: impl Into<String>) -> Self {
        self.reporter = Some((controller.into(), instance.into()));
        self
    }

    /// Whether cluster-scoped objects are recorded about.
    pub fn cluster_scoped(mut self, yes: bool) -> Self {
        self.cluster_scoped = yes;
        self
    }

    /// The namespaces to check for `api`, in order, without repeats.
    pub fn namespaces_for(&self, api: EventsApi) -> Vec<&str> {
        let cluster = match api {
            EventsApi::CoreV1 => "default",
            EventsApi::EventsV1 => self.cluster_scoped_events_v1.as_str(),
        };
        let mut out: Vec<&str> = Vec::new();
        let extra = self.cluster_scoped.then_some(cluster);
        for ns in self.namespaces.iter().map(String::as_str).chain(extra) {
            if !out.contains(&ns) {
                out.push(ns);
            }
        }
        out
    }

    fn validate(&self) -> Result<(), InvalidPlan> {
        if let Some(bad) = self.namespaces.iter().find(|n| !name::is_dns1123_label(n)) {
            return Err(InvalidPlan::Namespace(bad.clone()));
        }
        if self.namespaces.is_empty() && !self.cluster_scoped {
            return Err(InvalidPlan::Empty);
        }
        if self.api == ApiChoice::Use(Vec::new()) {
            return Err(InvalidPlan::NoApi);
        }
        Ok(())
    }
}

/// The verbs a recorder needs on `events`: `create` (first occurrence) and `patch` (repeats,
/// series counts).
pub const VERBS: [&str; 2] = ["create", "patch"];

/// Runs the checks of `plan` through `api`, one request at a time; every problem found is in
/// the report (none stops the others). An invalid plan is refused before any request.
pub async fn run(
    api: &dyn PreflightApi,
    plan: &PreflightPlan,
) -> Result<PreflightReport, InvalidPlan> {
    plan.validate()?;
    let mut report = PreflightReport::default();
    let apis = match &plan.api {
        ApiChoice::Discover => {
            match api.served(EventsApi::EventsV1.discovery_path()).await {
                Ok(served) => {
                    report.events_v1_served = Some(served);
                    vec![if served {
                        EventsApi::EventsV1
                    } else {
                        EventsApi::CoreV1
                    }]
                }
                Err(e) => {
                    report.problems.push(Problem::Discovery {
                        api: EventsApi::EventsV1,
                        error: sanitize_server_text_to(&e.to_string(), 300),
                    });
                    // Unknown: check both, so the report names what each would need.
                    vec![EventsApi::EventsV1, EventsApi::CoreV1]
                }
            }
        }
        ApiChoice::Use(list) => {
            let mut out = Vec::new();
            for &a in list {
                if out.contains(&a) {
                    continue;
                }
                match api.served(a.discovery_path()).await {
                    Ok(true) => {}
                    Ok(false) => report.problems.push(Problem::NotServed { api: a }),
                    Err(e) => report.problems.push(Problem::Discovery {
                        api: a,
                        error: sanitize_server_text_to(&e.to_string(), 300),
                    }),
                }
                if a == EventsApi::EventsV1 {
                    report.events_v1_served = match report.problems.last() {
                        Some(Problem::NotServed { .. }) => Some(false),
                        Some(Problem::Discovery { .. }) => None,
                        _ => Some(true),
                    };
                }
                out.push(a);
            }
            out
        }
    };
    report.apis = apis.clone();
    if apis.contains(&EventsApi::EventsV1)
        && let Some((controller, instance)) = &plan.reporter
    {
        report.reporter = Some((controller.clone(), instance.clone()));
        if !name::is_qualified_name(controller) {
            report.problems.push(Problem::ReportingController {
                value: controller.clone(),
            });
        }
        let n = instance.len();
        if n == 0 || n > crate::events_v1::REPORTING_INSTANCE_LIMIT {
            report
                .problems
                .push(Problem::ReportingInstance { length: n });
        }
    }
    for &a in &apis {
        for ns in plan.namespaces_for(a) {
            for verb in VERBS {
                let question = ResourceAttributes {
                    namespace: ns.to_owned(),
                    verb: verb.to_owned(),
                    group: a.group().to_owned(),
                    resource: "events".to_owned(),
                };
                let (answer, reason) = match api.review(&question).await {
                    Ok(r) => {
                        let reason = if r.evaluation_error.is_empty() {
                            r.reason
                        } else if r.reason.is_empty() {
                            r.evaluation_error
                        } else {
                            format!("{}; {}", r.reason, r.evaluation_error)
                        };
                        // Server text: escaped and bounded before anyone prints it.
                        (
                            Ok(r.allowed && !r.denied),
                            sanitize_server_text_to(&reason, 300),
                        )
                    }
                    Err(e) => (
                        Err(sanitize_server_text_to(&e.to_string(), 300)),
                        String::new(),
                    ),
                };
                match &answer {
                    Ok(true) => {}
                    Ok(false) => report.problems.push(Problem::Denied {
                        verb,
                        api: a,
                        namespace: ns.to_owned(),
                    }),
                    Err(e) => report.problems.push(Problem::Unchecked {
                        verb,
                        api: a,
                        namespace: ns.to_owned(),
                        error: e.clone(),
                    }),
                }
                report.checks.push(AccessCheck {
                    namespace: ns.to_owned(),
                    verb,
                    api: a,
                    answer,
                    reason,
                });
            }
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::task::{Context, Poll, Waker};

    use super::*;
    use crate::status::Status;

    /// Answers from a script; records every request.
    struct Fake {
        served: Result<bool, SinkError>,
        review: fn(&ResourceAttributes) -> Result<AccessReview, SinkError>,
        asked: Mutex<Vec<String>>,
    }

    impl PreflightApi for Fake {
        fn served<'a>(&'a self, path: &'a str) -> PreflightFuture<'a, Result<bool, SinkError>> {
            self.asked.lock().unwrap().push(format!("GET {path}"));
            let r = self.served.clone();
            Box::pin(async move { r })
        }
        fn review<'a>(
            &'a self,
            q: &'a ResourceAttributes,
        ) -> PreflightFuture<'a, Result<AccessReview, SinkError>> {
            self.asked
                .lock()
                .unwrap()
                .push(format!("{} {:?} {}", q.verb, q.group, q.namespace));
            let r = (self.review)(q);
            Box::pin(async move { r })
        }
    }

    fn fake(
        served: Result<bool, SinkError>,
        review: fn(&ResourceAttributes) -> Result<AccessReview, SinkError>,
    ) -> Fake {
        Fake {
            served,
            review,
            asked: Mutex::new(Vec::new()),
        }
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }

    fn allowed(_: &ResourceAttributes) -> Result<AccessReview, SinkError> {
        Ok(AccessReview {
            allowed: true,
            ..Default::default()
        })
    }

    #[test]
    fn not_served_events_v1_falls_back_to_core_and_its_namespace() {
        let api = fake(Ok(false), allowed);
        let r = block_on(run(&api, &PreflightPlan::discover(["default", "a"]))).unwrap();
        assert!(r.is_ok(), "{r}");
        assert_eq!(r.apis, [EventsApi::CoreV1]);
        assert_eq!(r.events_v1_served, Some(false));
        // `default` named once, though it is also the cluster-scoped namespace.
        assert_eq!(
            *api.asked.lock().unwrap(),
            [
                "GET /apis/events.k8s.io/v1",
                "create \"\" default",
                "patch \"\" default",
                "create \"\" a",
                "patch \"\" a"
            ]
        );
        // core/v1 by its name ("written with v1" read as events.k8s.io/v1).
        assert!(
            r.to_string()
                .contains("events are written with core/v1 (events.k8s.io/v1 is not served)"),
            "{r}"
        );
    }

    #[test]
    fn failed_discovery_checks_both_apis_and_says_so() {
        let api = fake(Err(SinkError::Transport("reset".into())), allowed);
        let r = block_on(run(&api, &PreflightPlan::discover(["a"]))).unwrap();
        assert!(
            matches!(&r.problems[..], [Problem::Discovery { .. }]),
            "{r}"
        );
        assert_eq!(r.apis, [EventsApi::EventsV1, EventsApi::CoreV1]);
        assert_eq!(r.checks.len(), 8);
        assert!(r.to_string().contains("the event API is unknown"), "{r}");
    }

    #[test]
    fn a_failed_review_is_unchecked_and_a_forced_api_not_served_is_named() {
        let api = fake(Ok(false), |_| {
            Err(SinkError::Status(Box::new(Status::failure(
                403,
                "Forbidden",
                "no reviews \u{1b}[31m for you",
            ))))
        });
        let plan = PreflightPlan::discover(["a"])
            .api(ApiChoice::Use(vec![EventsApi::EventsV1]))
            .cluster_scoped(false);
        let r = block_on(run(&api, &plan)).unwrap();
        assert_eq!(
            r.problems[0],
            Problem::NotServed {
                api: EventsApi::EventsV1
            }
        );
        assert!(matches!(
            r.problems[1],
            Problem::Unchecked { verb: "create", .. }
        ));
        assert_eq!(r.problems.len(), 3);
        assert!(!r.to_string().contains('\u{1b}'), "server text escaped");
    }

    #[test]
    fn names_and_an_explicit_deny_are_problems() {
        let api = fake(Ok(true), |q| {
            Ok(AccessReview {
                allowed: true,
                denied: q.verb == "patch",
                reason: "policy \n says no".into(),
                ..Default::default()
            })
        });
        let plan = PreflightPlan::discover(["a"])
            .cluster_scoped(false)
            .reporter("", "i".repeat(129));
        let r = block_on(run(&api, &plan)).unwrap();
        assert_eq!(
            r.problems,
            [
                Problem::ReportingController { value: "".into() },
                Problem::ReportingInstance { length: 129 },
                Problem::Denied {
                    verb: "patch",
                    api: EventsApi::EventsV1,
                    namespace: "a".into()
                },
            ]
        );
        assert_eq!(r.checks[1].reason, "policy \\n says no");
    }

    #[test]
    fn bad_plans_are_refused_before_any_request() {
        let api = fake(Ok(true), allowed);
        let bad = block_on(run(&api, &PreflightPlan::discover(["Bad_NS"])));
        assert_eq!(bad, Err(InvalidPlan::Namespace("Bad_NS".into())));
        let empty = PreflightPlan::discover(Vec::<String>::new()).cluster_scoped(false);
        assert_eq!(block_on(run(&api, &empty)), Err(InvalidPlan::Empty));
        let none = PreflightPlan::discover(["a"]).api(ApiChoice::Use(vec![]));
        assert_eq!(block_on(run(&api, &none)), Err(InvalidPlan::NoApi));
        assert!(api.asked.lock().unwrap().is_empty());
    }
}
