//! [`ObjectReference`], the reference to the object an event is about (core/v1
//! `involvedObject`, events.k8s.io/v1 `regarding` and `related`), and [`Reference`]: building
//! it from whatever object a user has, as client-go's `GetReference` does.
//!
//! * An [`ObjectReference`] is used as given (its `fieldPath` kept).
//! * With the `kube` feature, any `kube::Resource` with a static type (every `k8s-openapi`
//!   type such as `Pod`, and every `#[derive(CustomResource)]` type) gets kind and apiVersion
//!   from its type, and name, namespace, uid and resourceVersion from its metadata.
//! * Any other type can implement [`Reference`] itself.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A reference to the object an event is about (`involvedObject`), as client-go's
/// `GetReference` builds it.
///
/// ```
/// use kevents_core::ObjectReference;
/// let r = ObjectReference::new("v1", "Pod", "default", "web-1").with_uid("u1");
/// assert_eq!(
///     serde_json::to_string(&r).unwrap(),
///     r#"{"kind":"Pod","namespace":"default","name":"web-1","uid":"u1","apiVersion":"v1"}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectReference {
    /// Kind of the referent, e.g. `Pod`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Namespace of the referent; empty for cluster-scoped objects.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name of the referent.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// UID of the referent.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// API version of the referent, `group/version` or `v1` for the core group.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The referent's resourceVersion when the event was recorded.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// A field inside the object, e.g. `spec.containers{app}`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field_path: String,
}

/// An object reference's fields, borrowed (the recorder's packed calls hold them in one
/// buffer), from which the recorder builds an event's `involvedObject`.
///
/// ```
/// use kevents_core::{ObjectReference, reference::ReferenceRef};
/// let pod = ObjectReference::new("v1", "Pod", "ns", "web-1");
/// let mut copy = ObjectReference::new("apps/v1", "Deployment", "other", "d").with_uid("u");
/// ReferenceRef::from(&pod).copy_to(&mut copy);
/// assert_eq!(copy, pod);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReferenceRef<'a> {
    /// Kind, e.g. `Pod`.
    pub kind: &'a str,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// UID.
    pub uid: &'a str,
    /// API version.
    pub api_version: &'a str,
    /// The referent's resourceVersion.
    pub resource_version: &'a str,
    /// A field inside the object.
    pub field_path: &'a str,
}

impl<'a> From<&'a ObjectReference> for ReferenceRef<'a> {
    fn from(r: &'a ObjectReference) -> Self {
        ReferenceRef::from(
            [
                &r.kind,
                &r.namespace,
                &r.name,
                &r.uid,
                &r.api_version,
                &r.resource_version,
                &r.field_path,
            ]
            .map(String::as_str),
        )
    }
}

impl<'a> From<[&'a str; 7]> for ReferenceRef<'a> {
    /// The fields in declaration order: kind, namespace, name, uid, API version,
    /// resourceVersion, field path.
    fn from(
        [
            kind,
            namespace,
            name,
            uid,
            api_version,
            resource_version,
            field_path,
        ]: [&'a str; 7],
    ) -> Self {
        ReferenceRef {
            kind,
            namespace,
            name,
            uid,
            api_version,
            resource_version,
            field_path,
        }
    }
}

impl<'a> ReferenceRef<'a> {
    /// The fields in declaration order (as [`ReferenceRef::from`] an array takes them).
    pub fn fields(self) -> [&'a str; 7] {
        [
            self.kind,
            self.namespace,
            self.name,
            self.uid,
            self.api_version,
            self.resource_version,
            self.field_path,
        ]
    }

    /// An owned copy.
    pub fn to_reference(self) -> ObjectReference {
        let mut r = ObjectReference::default();
        self.copy_to(&mut r);
        r
    }

    /// Overwrites `out` with these fields, reusing its strings' buffers.
    pub fn copy_to(self, out: &mut ObjectReference) {
        let ObjectReference {
            kind,
            namespace,
            name,
            uid,
            api_version,
            resource_version,
            field_path,
        } = out;
        let to = [
            kind,
            namespace,
            name,
            uid,
            api_version,
            resource_version,
            field_path,
        ];
        for (to, from) in to.into_iter().zip(self.fields()) {
            to.clear();
            to.push_str(from);
        }
    }
}

impl ObjectReference {
    /// A reference with api version, kind, namespace and name set.
    pub fn new(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        ObjectReference {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Default::default()
        }
    }
    /// Sets the UID.
    pub fn with_uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = uid.into();
        self
    }
    /// Sets the field path (what client-go's `GetPartialReference` does).
    pub fn with_field_path(mut self, field_path: impl Into<String>) -> Self {
        self.field_path = field_path.into();
        self
    }
    /// Sets the resourceVersion.
    pub fn with_resource_version(mut self, rv: impl Into<String>) -> Self {
        self.resource_version = rv.into();
        self
    }
}

/// Why no reference could be built for an object.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("cannot build an object reference: {0}")]
pub struct ReferenceError(pub String);

/// Objects events can be about.
///
/// ```
/// use kevents_core::{ObjectReference, Reference, ReferenceError};
///
/// // A custom type implements it directly.
/// struct Widget { name: String, namespace: String }
/// impl Reference for Widget {
///     fn object_reference(&self) -> Result<ObjectReference, ReferenceError> {
///         Ok(ObjectReference::new("example.com/v1", "Widget", &self.namespace, &self.name))
///     }
/// }
///
/// let w = Widget { name: "w1".into(), namespace: "ns".into() };
/// assert_eq!(w.object_reference().unwrap().kind, "Widget");
/// ```
pub trait Reference {
    /// The reference the event's `involvedObject` is set to.
    fn object_reference(&self) -> Result<ObjectReference, ReferenceError>;

    /// The same reference, borrowed, when `self` can lend its fields: a recorder then copies
    /// them straight into its intake instead of building an [`ObjectReference`] first (for
    /// a k8s-openapi object, seven strings fewer per call). `None` by default, and for an
    /// object that has no valid reference: [`object_reference`](Self::object_reference)
    /// then says why.
    ///
    /// When it is `Some(r)`, `object_reference()` must be `Ok(r.to_reference())`.
    fn reference_ref(&self) -> Option<ReferenceRef<'_>> {
        None
    }
}

impl Reference for ObjectReference {
    fn object_reference(&self) -> Result<ObjectReference, ReferenceError> {
        Ok(self.clone())
    }

    fn reference_ref(&self) -> Option<ReferenceRef<'_>> {
        Some(ReferenceRef::from(self))
    }
}

/// Borrowed fields record as the reference they describe, with nothing copied before the
/// recorder's intake.
///
/// ```
/// use kevents_core::{reference::ReferenceRef, ObjectReference, Reference};
/// let name = format!("web-{}", 1);
/// let pod = ReferenceRef { api_version: "v1", kind: "Pod", namespace: "default", name: &name,
///                          ..ReferenceRef::default() };
/// assert_eq!(pod.object_reference().unwrap(), ObjectReference::new("v1", "Pod", "default", "web-1"));
/// ```
impl Reference for ReferenceRef<'_> {
    fn object_reference(&self) -> Result<ObjectReference, ReferenceError> {
        Ok(self.to_reference())
    }

    fn reference_ref(&self) -> Option<ReferenceRef<'_>> {
        Some(*self)
    }
}

#[cfg(feature = "kube")]
mod kube_impl {
    use super::*;
    use kube_core::Resource;
    use std::borrow::Cow;

    /// Any statically typed `kube` resource: `k8s-openapi` types and custom resources.
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use kevents_core::Reference;
    /// let mut pod = Pod::default();
    /// pod.metadata.name = Some("web-1".into());
    /// pod.metadata.namespace = Some("default".into());
    /// pod.metadata.uid = Some("u1".into());
    /// pod.metadata.resource_version = Some("42".into());
    /// let r = pod.object_reference().unwrap();
    /// assert_eq!((r.kind.as_str(), r.api_version.as_str(), r.name.as_str()), ("Pod", "v1", "web-1"));
    /// assert_eq!((r.uid.as_str(), r.resource_version.as_str()), ("u1", "42"));
    /// // The same fields, borrowed from the pod: what a recorder copies into its intake.
    /// assert_eq!(pod.reference_ref().unwrap().to_reference(), r);
    /// ```
    impl<K: Resource<DynamicType = ()>> Reference for K {
        /// Borrowed from the object's metadata, when its kind and apiVersion are static
        /// strings (every k8s-openapi type and derived custom resource) and its kind is set.
        fn reference_ref(&self) -> Option<ReferenceRef<'_>> {
            let (Cow::Borrowed(kind), Cow::Borrowed(api_version)) =
                (K::kind(&()), K::api_version(&()))
            else {
                return None;
            };
            (!kind.is_empty()).then(|| fields(self.meta(), kind, api_version))
        }

        fn object_reference(&self) -> Result<ObjectReference, ReferenceError> {
            let (kind, api_version) = (K::kind(&()), K::api_version(&()));
            if kind.is_empty() {
                return Err(ReferenceError("object has no kind".into()));
            }
            Ok(fields(self.meta(), &kind, &api_version).to_reference())
        }
    }

    /// The reference to an object with `meta`, of `kind` and `api_version`: what both of
    /// `Reference`'s methods give, so that they agree.
    fn fields<'a>(
        meta: &'a kube_core::ObjectMeta,
        kind: &'a str,
        api_version: &'a str,
    ) -> ReferenceRef<'a> {
        let field = |f: &'a Option<String>| f.as_deref().unwrap_or_default();
        ReferenceRef {
            kind,
            namespace: field(&meta.namespace),
            name: field(&meta.name),
            uid: field(&meta.uid),
            api_version,
            resource_version: field(&meta.resource_version),
            field_path: "",
        }
    }

    impl From<k8s_openapi::api::core::v1::ObjectReference> for ObjectReference {
        fn from(r: k8s_openapi::api::core::v1::ObjectReference) -> Self {
            ObjectReference {
                kind: r.kind.unwrap_or_default(),
                namespace: r.namespace.unwrap_or_default(),
                name: r.name.unwrap_or_default(),
                uid: r.uid.unwrap_or_default(),
                api_version: r.api_version.unwrap_or_default(),
                resource_version: r.resource_version.unwrap_or_default(),
                field_path: r.field_path.unwrap_or_default(),
            }
        }
    }
}
