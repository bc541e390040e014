//! `kevents doctor`'s fix for a refused identity: who the identity is (the apiserver's
//! `SelfSubjectReview`), and the Role and RoleBinding that let it create and patch events
//! where the report found it may not, as `kubectl` commands or as YAML manifests.

use std::collections::BTreeMap;

use kevents_core::preflight::{EventsApi, PreflightReport, Problem};
use kevents_core::request::{APPLICATION_JSON, Client, Method, Transport};

/// The name of the Role and RoleBinding doctor proposes, in every namespace.
pub const ROLE_NAME: &str = "kevents-events-writer";

/// Largest `SelfSubjectReview` answer read.
const MAX_REVIEW_BYTES: usize = 64 * 1024;

/// Who the requests are made as, as the apiserver says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// `system:serviceaccount:NAMESPACE:NAME`.
    ServiceAccount { namespace: String, name: String },
    /// Any other user name.
    User(String),
    /// The apiserver did not say (no `SelfSubjectReview` before Kubernetes 1.26, or it was
    /// refused): the commands name a placeholder.
    Unknown(String),
}

impl Subject {
    fn from_username(username: &str) -> Subject {
        match username.strip_prefix("system:serviceaccount:") {
            Some(rest) => match rest.split_once(':') {
                Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
                    Subject::ServiceAccount {
                        namespace: namespace.to_owned(),
                        name: name.to_owned(),
                    }
                }
                _ => Subject::User(username.to_owned()),
            },
            None => Subject::User(username.to_owned()),
        }
    }

    /// `kubectl create rolebinding`'s subject flag.
    fn flag(&self) -> String {
        match self {
            Subject::ServiceAccount { namespace, name } => {
                format!("--serviceaccount={namespace}:{name}")
            }
            Subject::User(name) => format!("--user={name}"),
            Subject::Unknown(_) => "--user=<USER>".to_owned(),
        }
    }

    /// One RoleBinding subject, YAML, indented for the `subjects:` list.
    fn yaml(&self) -> String {
        match self {
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
                "- kind: User\n  apiGroup: rbac.authorization.k8s.io\n  name: \"<USER>\"\n"
                    .to_owned()
            }
        }
    }
}

/// A YAML double-quoted scalar (JSON's string syntax is valid YAML).
fn quote(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Asks the apiserver who the requests are made as: `SelfSubjectReview`,
/// `authentication.k8s.io/v1` (Kubernetes 1.28+), else `v1beta1` (1.27), else `v1alpha1`
/// (1.26 with its feature gate). Never an error: what could not be learnt is `Unknown`, with
/// why.
pub async fn who_am_i<T: Transport>(requests: &Client<T>) -> Subject {
    let mut why = String::from("the apiserver serves no SelfSubjectReview (Kubernetes 1.26+)");
    for version in ["v1", "v1beta1", "v1alpha1"] {
        let body = format!(
            r#"{{"apiVersion":"authentication.k8s.io/{version}","kind":"SelfSubjectReview"}}"#
        );
        let path = format!("/apis/authentication.k8s.io/{version}/selfsubjectreviews");
        let answer = match requests
            .send(
                Method::Post,
                path,
                Some(APPLICATION_JSON),
                body.into_bytes(),
                MAX_REVIEW_BYTES,
            )
            .await
        {
            Ok(a) => a,
            Err(e) => return Subject::Unknown(format!("SelfSubjectReview failed: {e}")),
        };
        match answer.code {
            200..=299 => {}
            404 => continue,
            code => {
                why = format!("SelfSubjectReview answered {code}");
                break;
            }
        }
        let username = serde_json::from_slice::<serde_json::Value>(&answer.body)
            .ok()
            .and_then(|v| {
                v.pointer("/status/userInfo/username")
                    .and_then(|u| u.as_str())
                    .map(str::to_owned)
            });
        return match username {
            Some(u) if !u.is_empty() => Subject::from_username(&u),
            _ => Subject::Unknown("SelfSubjectReview named no user".to_owned()),
        };
    }
    Subject::Unknown(why)
}

/// Per namespace, the resources (`events`, `events.events.k8s.io`) the identity may not
/// create or patch.
fn denied(report: &PreflightReport) -> BTreeMap<String, Vec<&'static str>> {
    let mut out: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    for p in &report.problems {
        if let Problem::Denied { api, namespace, .. } = p {
            let resource = match api {
                EventsApi::EventsV1 => "events.events.k8s.io",
                _ => "events",
            };
            let entry = out.entry(namespace.clone()).or_default();
            if !entry.contains(&resource) {
                entry.push(resource);
            }
        }
    }
    out
}

/// The fix as `kubectl` commands, one Role and one RoleBinding per namespace; `None` when
/// nothing was denied.
pub fn commands(report: &PreflightReport, subject: &Subject) -> Option<String> {
    let denied = denied(report);
    if denied.is_empty() {
        return None;
    }
    let mut out = String::from("To grant it:\n");
    if let Subject::Unknown(why) = subject {
        out.push_str(&format!(
            "  # who this identity is is not known ({why}): replace <USER> with its user \
             name (or use --serviceaccount=NAMESPACE:NAME or --group=GROUP)\n"
        ));
    }
    for (namespace, resources) in &denied {
        out.push_str(&format!(
            "  kubectl create role {ROLE_NAME} --namespace={namespace} --verb=create,patch --resource={}\n",
            resources.join(",")
        ));
        out.push_str(&format!(
            "  kubectl create rolebinding {ROLE_NAME} --namespace={namespace} --role={ROLE_NAME} {}\n",
            subject.flag()
        ));
    }
    out.push_str(
        "  (or `kevents doctor ... -o yaml` for the manifests, for `kubectl apply -f -`)\n",
    );
    Some(out)
}

/// The fix as YAML manifests (a Role and a RoleBinding per namespace,
/// `rbac.authorization.k8s.io/v1`), for `kubectl apply -f -`; `None` when nothing was
/// denied.
pub fn manifests(report: &PreflightReport, subject: &Subject) -> Option<String> {
    let denied = denied(report);
    if denied.is_empty() {
        return None;
    }
    let mut out = String::new();
    if let Subject::Unknown(why) = subject {
        out.push_str(&format!(
            "# who this identity is is not known ({why}): replace <USER> with its user name\n"
        ));
    }
    for (namespace, resources) in &denied {
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for r in resources {
            match r.split_once('.') {
                Some((resource, group)) => groups.entry(group).or_default().push(resource),
                None => groups.entry("").or_default().push(r),
            }
        }
        out.push_str("---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n");
        out.push_str(&format!(
            "  name: {ROLE_NAME}\n  namespace: {}\nrules:\n",
            quote(namespace)
        ));
        for (group, resources) in groups {
            out.push_str(&format!(
                "- apiGroups: [{}]\n  resources: [{}]\n  verbs: [\"create\", \"patch\"]\n",
                quote(group),
                resources
                    .iter()
                    .map(|r| quote(r))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        out.push_str(
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n",
        );
        out.push_str(&format!(
            "  name: {ROLE_NAME}\n  namespace: {}\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: {ROLE_NAME}\nsubjects:\n{}",
            quote(namespace),
            subject.yaml()
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(denied: &[(&'static str, EventsApi, &str)]) -> PreflightReport {
        PreflightReport {
            events_v1_served: Some(true),
            apis: vec![EventsApi::EventsV1],
            reporter: None,
            checks: Vec::new(),
            problems: denied
                .iter()
                .map(|(verb, api, ns)| Problem::Denied {
                    verb,
                    api: *api,
                    namespace: (*ns).to_owned(),
                })
                .collect(),
        }
    }

    #[test]
    fn subjects_from_user_names() {
        assert_eq!(
            Subject::from_username("system:serviceaccount:team-a:ctl"),
            Subject::ServiceAccount {
                namespace: "team-a".into(),
                name: "ctl".into()
            }
        );
        assert_eq!(
            Subject::from_username("nobody"),
            Subject::User("nobody".into())
        );
        assert_eq!(
            Subject::from_username("system:serviceaccount:broken"),
            Subject::User("system:serviceaccount:broken".into())
        );
    }

    #[test]
    fn commands_name_the_role_and_the_binding_per_namespace() {
        let r = report(&[
            ("create", EventsApi::EventsV1, "a"),
            ("patch", EventsApi::EventsV1, "a"),
            ("create", EventsApi::CoreV1, "b"),
        ]);
        let sa = Subject::ServiceAccount {
            namespace: "ops".into(),
            name: "ctl".into(),
        };
        assert_eq!(
            commands(&r, &sa).as_deref(),
            Some(
                "To grant it:\n  kubectl create role kevents-events-writer --namespace=a \
                 --verb=create,patch --resource=events.events.k8s.io\n  kubectl create \
                 rolebinding kevents-events-writer --namespace=a --role=kevents-events-writer \
                 --serviceaccount=ops:ctl\n  kubectl create role kevents-events-writer \
                 --namespace=b --verb=create,patch --resource=events\n  kubectl create \
                 rolebinding kevents-events-writer --namespace=b --role=kevents-events-writer \
                 --serviceaccount=ops:ctl\n  (or `kevents doctor ... -o yaml` for the \
                 manifests, for `kubectl apply -f -`)\n"
            )
        );
        let unknown = commands(&r, &Subject::Unknown("1.20".into())).unwrap_or_default();
        assert!(unknown.contains("--user=<USER>"), "{unknown}");
        assert!(unknown.contains("not known (1.20)"), "{unknown}");
        assert_eq!(commands(&report(&[]), &sa), None);
    }

    #[test]
    fn manifests_are_a_role_and_a_binding_per_namespace() {
        let r = report(&[
            ("create", EventsApi::EventsV1, "a"),
            ("create", EventsApi::CoreV1, "a"),
        ]);
        let yaml = manifests(&r, &Subject::User("nobody".into())).unwrap_or_default();
        assert_eq!(
            yaml,
            "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: \
             kevents-events-writer\n  namespace: \"a\"\nrules:\n- apiGroups: [\"\"]\n  \
             resources: [\"events\"]\n  verbs: [\"create\", \"patch\"]\n- apiGroups: \
             [\"events.k8s.io\"]\n  resources: [\"events\"]\n  verbs: [\"create\", \
             \"patch\"]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\n\
             metadata:\n  name: kevents-events-writer\n  namespace: \"a\"\nroleRef:\n  \
             apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: \
             kevents-events-writer\nsubjects:\n- kind: User\n  apiGroup: \
             rbac.authorization.k8s.io\n  name: \"nobody\"\n"
        );
    }
}
