//! `kevents doctor`: before a controller records anything, may its identity write events
//! where it will write them? The preflight of `kevents_core::preflight` through the HTTP
//! client of a kubeconfig (docs/preflight.md). Exit code 0: events will be written; 4: events
//! would be lost (every problem is named); 2 and 3 as the demo's (configuration, apiserver
//! unusable).

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use kevents_core::events_v1::{ClusterScopedNamespace, Reporter};
use kevents_core::preflight::{ApiChoice, EventsApi, PreflightPlan};
use kevents_http::HttpSink;

use crate::cluster::{self, Failure, FailureKind};
use crate::{doctor_export, doctor_rbac};

/// How long doctor waits for all its access reviews together (and, apart, for the question
/// of who the identity is): a server that does not answer within it is exit code 3.
const REVIEWS_DEADLINE: Duration = cluster::PROBE_TIMEOUT;

/// Which event API the recorder will use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Api {
    /// events.k8s.io/v1 when the apiserver serves it, else core/v1 (the drop-in, client-go).
    Auto,
    /// events.k8s.io/v1 (series chains).
    EventsV1,
    /// core/v1 (correlator chains, client-go's `tools/record`).
    Core,
    /// Both (a pipeline with core/v1 and series chains).
    Both,
}

/// The recorder whose default reporting names are checked when none are given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RecorderKind {
    /// kevents-kube's drop-in (kube-rs's `Reporter`): the instance defaults to the
    /// controller's name.
    DropIn,
    /// A kevents pipeline (client-go's `tools/events`): the instance defaults to
    /// `<controller>-<hostname>`.
    Pipeline,
}

/// How doctor prints the fix for a refused identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The report and the `kubectl create role` / `rolebinding` commands.
    Text,
    /// The report on stderr; on stdout the Role and RoleBinding manifests, for
    /// `kubectl apply -f -`.
    Yaml,
}

/// Whose permissions doctor checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum For {
    /// A recorder's: create and patch events (the preflight).
    Writer,
    /// `kevents export`'s: list and watch events, and the Lease with `--leader-elect`.
    Export,
}

/// Where the events cluster-scoped objects go with events.k8s.io/v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ClusterNamespace {
    /// kevents' default (accepted by every apiserver version).
    KubeSystem,
    /// client-go's (refused by a 1.20 apiserver).
    Default,
}

#[derive(Args, Debug, Clone)]
pub struct DoctorArgs {
    /// The kubeconfig whose identity will record (default: KUBECONFIG, ~/.kube/config, or
    /// the in-cluster service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Its context (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Whose permissions: a recorder's (`writer`) or `kevents export`'s (`export`: list and
    /// watch events with the API of `--api`, `core` or `events-v1` (`auto` is the export's
    /// default, core), and the Lease with `--leader-elect`).
    #[arg(long = "for", value_enum, default_value_t = For::Writer)]
    pub for_: For,
    /// A namespace events will be written to (repeatable; default: the context's namespace).
    /// With `--for export`: a namespace the export watches (default: the whole cluster).
    #[arg(long = "namespace", short = 'n')]
    pub namespaces: Vec<String>,
    /// With `--for export`: the export runs with `--leader-elect` (check the Lease too).
    #[arg(long)]
    pub leader_elect: bool,
    /// With `--for export --leader-elect`: the Lease's namespace (as `kevents export`'s).
    #[arg(long, default_value = "default", requires = "leader_elect")]
    pub lease_namespace: String,
    /// With `--for export --leader-elect`: the Lease's name (as `kevents export`'s).
    #[arg(long, default_value = "kevents-export", requires = "leader_elect")]
    pub lease_name: String,
    /// The event API the recorder will use.
    #[arg(long, value_enum, default_value_t = Api::Auto)]
    pub api: Api,
    /// The recorder's `reportingController` (events.k8s.io/v1; kube-rs's
    /// `Reporter::controller`).
    #[arg(long, default_value = "kevents")]
    pub reporting_controller: String,
    /// The recorder's `reportingInstance` (default: as `--recorder` writes it).
    #[arg(long)]
    pub reporting_instance: Option<String>,
    /// Whose default `reportingInstance` to check: kevents-kube's drop-in (the controller's
    /// name, as kube-rs's `Reporter { instance: None }`) or a kevents pipeline
    /// (`<controller>-<hostname>`, client-go's).
    #[arg(long, value_enum, default_value_t = RecorderKind::DropIn)]
    pub recorder: RecorderKind,
    /// `text`: the report and the kubectl commands that fix a refused identity; `yaml`: the
    /// Role and RoleBinding manifests on stdout (the report on stderr).
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// The recorder never records about cluster-scoped objects (nodes, namespaces, ...):
    /// do not check their events' namespace.
    #[arg(long)]
    pub no_cluster_scoped: bool,
    /// The events.k8s.io/v1 namespace of cluster-scoped objects' events.
    #[arg(long, value_enum, default_value_t = ClusterNamespace::KubeSystem)]
    pub cluster_scoped_namespace: ClusterNamespace,
}

/// Runs the doctor.
pub fn run(args: DoctorArgs) -> anyhow::Result<()> {
    cluster::finish(actix::System::new().block_on(run_async(args)))
}

async fn run_async(args: DoctorArgs) -> anyhow::Result<()> {
    for ns in &args.namespaces {
        cluster::validate_namespace(ns)?;
    }
    if args.leader_elect && args.for_ != For::Export {
        return Err(Failure::new(FailureKind::Config, "--leader-elect needs --for export").into());
    }
    if args.for_ == For::Export {
        cluster::validate_namespace(&args.lease_namespace)?;
    }
    let config = cluster::cluster_config(args.kubeconfig.as_ref(), args.context.as_ref()).await?;
    let version = cluster::probe_server(&config).await?;
    let sink = HttpSink::new(config).map_err(|e| Failure::new(FailureKind::Config, e))?;
    if args.for_ == For::Export {
        let header = format!(
            "kevents doctor --for export: {} (kube-apiserver {})",
            cluster::one_line(sink.base_url().as_ref()),
            cluster::one_line(&version.git_version),
        );
        return export(&args, &sink, header).await;
    }
    let mut namespaces = args.namespaces.clone();
    if namespaces.is_empty() {
        namespaces.push(sink.default_namespace().to_owned());
    }
    let reporter = match (args.reporting_instance, args.recorder) {
        (Some(i), _) => Reporter::with_instance(args.reporting_controller, i),
        (None, RecorderKind::DropIn) => {
            let instance = args.reporting_controller.clone();
            Reporter::with_instance(args.reporting_controller, instance)
        }
        (None, RecorderKind::Pipeline) => Reporter::new(args.reporting_controller),
    };
    let api = match args.api {
        Api::Auto => ApiChoice::Discover,
        Api::EventsV1 => ApiChoice::Use(vec![EventsApi::EventsV1]),
        Api::Core => ApiChoice::Use(vec![EventsApi::CoreV1]),
        Api::Both => ApiChoice::Use(vec![EventsApi::EventsV1, EventsApi::CoreV1]),
    };
    let mut plan = PreflightPlan::discover(namespaces)
        .api(api)
        .reporter(reporter.controller, reporter.instance)
        .cluster_scoped(!args.no_cluster_scoped);
    plan.cluster_scoped_events_v1 = match args.cluster_scoped_namespace {
        ClusterNamespace::KubeSystem => ClusterScopedNamespace::KubeSystem,
        ClusterNamespace::Default => ClusterScopedNamespace::Default,
    };
    // One deadline for all the reviews together (not one per request: against a server
    // that never answers, `-n a1 -n a2 -n a3` was 80 s of silence, then exit 4).
    let report =
        match actix_rt::time::timeout(REVIEWS_DEADLINE, sink.requests().preflight(&plan)).await {
            Ok(report) => report.map_err(|e| Failure::new(FailureKind::Config, e))?,
            Err(_) => {
                return Err(Failure::new(
                    FailureKind::Unreachable,
                    format!(
                        "the apiserver at {} did not answer the access reviews within {} s \
                     (SelfSubjectAccessReview): nothing is known about the permissions",
                        cluster::one_line(sink.base_url().as_ref()),
                        REVIEWS_DEADLINE.as_secs()
                    ),
                )
                .into());
            }
        };
    let header = format!(
        "kevents doctor: {} (kube-apiserver {})\n{}",
        cluster::one_line(sink.base_url().as_ref()),
        cluster::one_line(&version.git_version),
        cluster::redact(&report.to_string())
    );
    let subject = if report.is_ok() {
        None
    } else {
        let requests = sink.requests();
        Some(
            actix_rt::time::timeout(REVIEWS_DEADLINE, doctor_rbac::who_am_i(&requests))
                .await
                .unwrap_or_else(|_| {
                    doctor_rbac::Subject::Unknown(format!(
                        "SelfSubjectReview did not answer within {} s",
                        REVIEWS_DEADLINE.as_secs()
                    ))
                }),
        )
    };
    match args.output {
        Output::Text => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{header}")?;
            if let Some(fix) = subject
                .as_ref()
                .and_then(|s| doctor_rbac::commands(&report, s))
            {
                write!(out, "{}", cluster::redact(&fix))?;
            }
        }
        Output::Yaml => {
            eprintln!("{header}");
            if let Some(yaml) = subject
                .as_ref()
                .and_then(|s| doctor_rbac::manifests(&report, s))
            {
                print!("{}", cluster::redact(&yaml));
            }
        }
    }
    if report.is_ok() {
        return Ok(());
    }
    Err(Failure::new(
        FailureKind::NotWritten,
        format!(
            "events would be lost: {} problem{} found (listed above)",
            report.problems.len(),
            if report.problems.len() == 1 { "" } else { "s" }
        ),
    )
    .into())
}

/// `--for export`: the export's permissions, and the manifests granting what is denied.
async fn export(args: &DoctorArgs, sink: &HttpSink, header: String) -> anyhow::Result<()> {
    let plan = doctor_export::ExportPlan {
        groups: match args.api {
            Api::Auto | Api::Core => vec![""],
            Api::EventsV1 => vec!["events.k8s.io"],
            Api::Both => vec!["", "events.k8s.io"],
        },
        namespaces: args.namespaces.clone(),
        lease: args
            .leader_elect
            .then(|| (args.lease_namespace.clone(), args.lease_name.clone())),
    };
    let mut checks = doctor_export::plan_checks(&plan);
    let requests = sink.requests();
    match actix_rt::time::timeout(REVIEWS_DEADLINE, doctor_export::ask(&requests, &mut checks))
        .await
    {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            return Err(Failure::new(FailureKind::Unreachable, cluster::redact(&e)).into());
        }
        Err(_) => {
            return Err(Failure::new(
                FailureKind::Unreachable,
                format!(
                    "the apiserver did not answer the access reviews within {} s \
                     (SelfSubjectAccessReview): nothing is known about the permissions",
                    REVIEWS_DEADLINE.as_secs()
                ),
            )
            .into());
        }
    }
    let text = format!("{header}\n{}", doctor_export::report_lines(&checks));
    let denied = checks.iter().filter(|c| !c.allowed).count();
    let fix = if denied == 0 {
        None
    } else {
        let subject = actix_rt::time::timeout(REVIEWS_DEADLINE, doctor_rbac::who_am_i(&requests))
            .await
            .unwrap_or_else(|_| {
                doctor_rbac::Subject::Unknown(format!(
                    "SelfSubjectReview did not answer within {} s",
                    REVIEWS_DEADLINE.as_secs()
                ))
            });
        doctor_export::manifests(&plan, &checks, &subject)
    };
    match args.output {
        Output::Text => {
            let mut out = std::io::stdout().lock();
            write!(out, "{}", cluster::redact(&text))?;
            if let Some(fix) = &fix {
                writeln!(out, "To grant it (kubectl apply -f -, or deploy/):")?;
                write!(out, "{}", cluster::redact(fix))?;
            }
        }
        Output::Yaml => {
            eprint!("{}", cluster::redact(&text));
            if let Some(fix) = &fix {
                print!("{}", cluster::redact(fix));
            }
        }
    }
    if denied == 0 {
        return Ok(());
    }
    Err(Failure::new(
        FailureKind::NotWritten,
        format!(
            "the export would fail: {denied} permission{} denied (listed above)",
            if denied == 1 { "" } else { "s" }
        ),
    )
    .into())
}
