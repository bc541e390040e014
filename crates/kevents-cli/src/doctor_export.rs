//! `kevents doctor --for export`: may this identity run `kevents export`? The export reads
//! events (`list` and `watch` in the API group of its `--api`, across the cluster or in each
//! `--namespace`) and, with `--leader-elect`, holds a Lease (`get`, `create`, `update` on
//! `leases` in coordination.k8s.io). Each is asked of the apiserver
//! (`SelfSubjectAccessReview`); what is denied is printed with the RBAC manifests that grant
//! it (the rules of deploy/, for this identity).

use std::fmt::Write as _;

use kevents_core::preflight::{ACCESS_REVIEW_PATH, AccessReview};
use kevents_core::request::{APPLICATION_JSON, Client, Method, Transport};
use serde_json::json;

use crate::doctor_rbac::Subject;

/// Largest access review answer read.
const MAX_REVIEW_BYTES: usize = 64 * 1024;

/// The ClusterRole (or Role) granting the events, as in deploy/.
pub const EVENTS_ROLE: &str = "kevents-export-events";
/// The Role granting the Lease, as in deploy/.
pub const LEASE_ROLE: &str = "kevents-export-lease";

/// What the export will do.
#[derive(Debug, Clone)]
pub struct ExportPlan {
    /// The API groups it watches events in: `""` (core/v1) and/or `events.k8s.io`.
    pub groups: Vec<&'static str>,
    /// The namespaces it watches; empty: the whole cluster.
    pub namespaces: Vec<String>,
    /// With `--leader-elect`: the Lease's namespace and name.
    pub lease: Option<(String, String)>,
}

/// One question and its answer.
#[derive(Debug, Clone)]
pub struct Check {
    /// `list`, `watch`, `get`, `create`, `update`.
    pub verb: &'static str,
    /// `""`, `events.k8s.io` or `coordination.k8s.io`.
    pub group: &'static str,
    /// `events` or `leases`.
    pub resource: &'static str,
    /// `""`: every namespace.
    pub namespace: String,
    /// The object's name (the Lease's `get` and `update`).
    pub name: Option<String>,
    /// Allowed?
    pub allowed: bool,
}

impl Check {
    fn new(
        verb: &'static str,
        group: &'static str,
        resource: &'static str,
        namespace: &str,
        name: Option<&str>,
    ) -> Check {
        Check {
            verb,
            group,
            resource,
            namespace: namespace.to_owned(),
            name: name.map(str::to_owned),
            allowed: false,
        }
    }

    fn line(&self) -> String {
        let group = if self.group.is_empty() {
            "core".to_owned()
        } else {
            self.group.to_owned()
        };
        let what = match &self.name {
            Some(n) => format!("{}/{n}", self.resource),
            None => self.resource.to_owned(),
        };
        let scope = if self.namespace.is_empty() {
            "in every namespace".to_owned()
        } else {
            format!("in namespace {}", self.namespace)
        };
        format!(
            "  [{}] {} {what} ({group}) {scope}",
            if self.allowed { "ok" } else { "DENIED" },
            self.verb
        )
    }
}

/// The questions the plan asks, in order.
pub fn plan_checks(plan: &ExportPlan) -> Vec<Check> {
    let mut out = Vec::new();
    let scopes: Vec<&str> = if plan.namespaces.is_empty() {
        vec![""]
    } else {
        plan.namespaces.iter().map(String::as_str).collect()
    };
    for group in &plan.groups {
        for ns in &scopes {
            for verb in ["list", "watch"] {
                out.push(Check::new(verb, group, "events", ns, None));
            }
        }
    }
    if let Some((ns, name)) = &plan.lease {
        out.push(Check::new(
            "get",
            "coordination.k8s.io",
            "leases",
            ns,
            Some(name),
        ));
        out.push(Check::new(
            "create",
            "coordination.k8s.io",
            "leases",
            ns,
            None,
        ));
        out.push(Check::new(
            "update",
            "coordination.k8s.io",
            "leases",
            ns,
            Some(name),
        ));
    }
    out
}

/// Asks each check's question; an error is the request's or the answer's.
pub async fn ask<T: Transport>(requests: &Client<T>, checks: &mut [Check]) -> Result<(), String> {
    for c in checks.iter_mut() {
        let mut attributes = json!({
            "verb": c.verb, "group": c.group, "resource": c.resource, "namespace": c.namespace,
        });
        if let Some(name) = &c.name {
            attributes["name"] = json!(name);
        }
        let body = json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        });
        let answer = requests
            .send(
                Method::Post,
                ACCESS_REVIEW_PATH.to_owned(),
                Some(APPLICATION_JSON),
                body.to_string().into_bytes(),
                MAX_REVIEW_BYTES,
            )
            .await
            .map_err(|e| format!("SelfSubjectAccessReview failed: {e}"))?;
        if !(200..300).contains(&answer.code) {
            return Err(format!("SelfSubjectAccessReview answered {}", answer.code));
        }
        c.allowed = AccessReview::decode(&answer.body)
            .map_err(|e| e.to_string())?
            .allowed;
    }
    Ok(())
}

/// The report: one line per check.
pub fn report_lines(checks: &[Check]) -> String {
    let mut out = String::from("kevents export's permissions:\n");
    for c in checks {
        out.push_str(&c.line());
        out.push('\n');
    }
    out
}

/// A YAML double-quoted scalar.
fn quote(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// The RBAC manifests granting every permission of a denied resource's rule (the rules of
/// deploy/, so applying them twice or beside deploy/ changes nothing); `None` when nothing
/// was denied.
pub fn manifests(plan: &ExportPlan, checks: &[Check], subject: &Subject) -> Option<String> {
    if checks.iter().all(|c| c.allowed) {
        return None;
    }
    let mut out = String::new();
    if let Subject::Unknown(why) = subject {
        let _ = writeln!(
            out,
            "# who this identity is is not known ({why}): replace <USER> with its user name"
        );
    }
    let subjects = subject_yaml(subject);
    // Events: a rule per group with a denial, list and watch.
    let groups: Vec<&str> = plan
        .groups
        .iter()
        .copied()
        .filter(|g| {
            checks
                .iter()
                .any(|c| c.resource == "events" && c.group == *g && !c.allowed)
        })
        .collect();
    if !groups.is_empty() {
        let rules: String = groups
            .iter()
            .map(|g| {
                format!(
                    "- apiGroups: [{}]\n  resources: [\"events\"]\n  verbs: [\"list\", \"watch\"]\n",
                    quote(g)
                )
            })
            .collect();
        if plan.namespaces.is_empty() {
            let _ = write!(
                out,
                "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  \
                 name: {EVENTS_ROLE}\nrules:\n{rules}---\napiVersion: rbac.authorization.k8s.io/v1\n\
                 kind: ClusterRoleBinding\nmetadata:\n  name: {EVENTS_ROLE}\nroleRef:\n  \
                 apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: {EVENTS_ROLE}\n\
                 subjects:\n{subjects}"
            );
        } else {
            for ns in &plan.namespaces {
                let denied_here = checks
                    .iter()
                    .any(|c| c.resource == "events" && c.namespace == *ns && !c.allowed);
                if denied_here {
                    out.push_str(&role(EVENTS_ROLE, ns, &rules, &subjects));
                }
            }
        }
    }
    if let Some((ns, name)) = &plan.lease
        && checks.iter().any(|c| c.resource == "leases" && !c.allowed)
    {
        let rules = format!(
            "- apiGroups: [\"coordination.k8s.io\"]\n  resources: [\"leases\"]\n  verbs: \
             [\"create\"]\n- apiGroups: [\"coordination.k8s.io\"]\n  resources: [\"leases\"]\n  \
             resourceNames: [{}]\n  verbs: [\"get\", \"update\"]\n",
            quote(name)
        );
        out.push_str(&role(LEASE_ROLE, ns, &rules, &subjects));
    }
    Some(out)
}

fn role(name: &str, namespace: &str, rules: &str, subjects: &str) -> String {
    let ns = quote(namespace);
    format!(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: {name}\n  \
         namespace: {ns}\nrules:\n{rules}---\napiVersion: rbac.authorization.k8s.io/v1\nkind: \
         RoleBinding\nmetadata:\n  name: {name}\n  namespace: {ns}\nroleRef:\n  apiGroup: \
         rbac.authorization.k8s.io\n  kind: Role\n  name: {name}\nsubjects:\n{subjects}"
    )
}

fn subject_yaml(subject: &Subject) -> String {
    match subject {
        Subject::ServiceAccount { namespace, name } => format!(
            "- kind: ServiceAccount\n  name: {}\n  namespace: {}\n",
            quote(name),
            quote(namespace)
        ),
        Subject::User(name) => format!(
            "- kind: User\n  apiGroup: rbac.authorization.k8s.io\n  name: {}\n",
            quote(name)
        ),
        Subject::Unknown(_) => {
            "- kind: User\n  apiGroup: rbac.authorization.k8s.io\n  name: \"<USER>\"\n".to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(namespaces: &[&str], lease: bool) -> ExportPlan {
        ExportPlan {
            groups: vec![""],
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            lease: lease.then(|| ("kevents".to_owned(), "kevents-export".to_owned())),
        }
    }

    #[test]
    fn the_questions_follow_the_plan() {
        let c = plan_checks(&plan(&[], true));
        let asked: Vec<String> = c
            .iter()
            .map(|c| {
                format!(
                    "{} {}/{} {:?} {:?}",
                    c.verb, c.group, c.resource, c.namespace, c.name
                )
            })
            .collect();
        assert_eq!(
            asked,
            [
                "list /events \"\" None",
                "watch /events \"\" None",
                "get coordination.k8s.io/leases \"kevents\" Some(\"kevents-export\")",
                "create coordination.k8s.io/leases \"kevents\" None",
                "update coordination.k8s.io/leases \"kevents\" Some(\"kevents-export\")",
            ]
        );
        assert_eq!(plan_checks(&plan(&["a", "b"], false)).len(), 4);
    }

    #[test]
    fn only_denied_resources_get_manifests() {
        let p = plan(&[], true);
        let mut c = plan_checks(&p);
        let sa = Subject::User("u".into());
        c.iter_mut().for_each(|c| c.allowed = true);
        assert!(manifests(&p, &c, &sa).is_none());
        c[4].allowed = false; // update on the Lease
        let yaml = manifests(&p, &c, &sa).unwrap_or_default();
        assert!(yaml.contains("kind: Role\n"), "{yaml}");
        assert!(yaml.contains("verbs: [\"get\", \"update\"]"), "{yaml}");
        assert!(!yaml.contains("ClusterRole"), "{yaml}");
        c[1].allowed = false; // watch on events
        let yaml = manifests(&p, &c, &sa).unwrap_or_default();
        assert!(
            yaml.contains("kind: ClusterRole\nmetadata:\n  name: kevents-export-events\nrules:\n- apiGroups: [\"\"]\n  resources: [\"events\"]\n  verbs: [\"list\", \"watch\"]\n"),
            "{yaml}"
        );
        let mut nsp = plan(&["a", "b"], false);
        nsp.groups = vec!["events.k8s.io"];
        let mut c = plan_checks(&nsp);
        c.iter_mut().for_each(|c| c.allowed = c.namespace == "a");
        let yaml = manifests(&nsp, &c, &sa).unwrap_or_default();
        assert!(yaml.contains("namespace: \"b\""), "{yaml}");
        assert!(!yaml.contains("namespace: \"a\""), "{yaml}");
        assert!(yaml.contains("apiGroups: [\"events.k8s.io\"]"), "{yaml}");
    }
}
