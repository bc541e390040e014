//! `SelfSubjectAccessReview` (`POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews`)
//! as the simulator answers it: every authenticated user may ask (kube-apiserver's
//! `system:basic-user` role); the answer is the simulator's all-or-nothing authorisation of
//! that user (a token without rights is allowed nothing), echoing the question.

use serde_json::{Value, json};

use crate::store::Reply;

/// Whether `segs` is the review's path.
pub(crate) fn is_review(segs: &[&str]) -> bool {
    segs == [
        "apis",
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
    ]
}

/// The answer to a review sent by a user whose rights are `authorized`.
pub(crate) fn answer(authorized: bool, body: &[u8]) -> Reply {
    let Ok(review) = serde_json::from_slice::<Value>(body) else {
        return bad_request("the body is not a JSON object");
    };
    let attributes = &review["spec"]["resourceAttributes"];
    let non_resource = &review["spec"]["nonResourceAttributes"];
    if !attributes.is_object() && !non_resource.is_object() {
        return bad_request(
            "spec.resourceAttributes: Invalid value: exactly one of nonResourceAttributes or resourceAttributes must be specified",
        );
    }
    let mut status = json!({"allowed": authorized});
    if authorized {
        status["reason"] = "the simulator allows this user everything".into();
    }
    (
        201,
        json!({
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": null},
            "spec": review["spec"].clone(),
            "status": status,
        }),
    )
}

fn bad_request(message: &str) -> Reply {
    (
        400,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": "BadRequest", "code": 400}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_without_rights_is_allowed_nothing_and_the_question_is_echoed() {
        let q = br#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"namespace":"a","verb":"patch","group":"events.k8s.io","resource":"events"}}}"#;
        let (code, body) = answer(false, q);
        assert_eq!(code, 201);
        assert_eq!(body["status"]["allowed"], false);
        assert_eq!(body["spec"]["resourceAttributes"]["verb"], "patch");
        assert_eq!(answer(true, q).1["status"]["allowed"], true);
        assert_eq!(answer(true, b"{}").0, 400);
        assert_eq!(answer(true, b"[").0, 400);
    }
}
