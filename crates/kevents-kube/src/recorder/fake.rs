//! A fake of the drop-in for reconcilers' unit tests.

use std::sync::Arc;

use kube::runtime::events::Reporter;

use super::convert::{factory, reporter};
use super::fake_store::{FakeStore, Published};
use super::handle::Recorder;
use super::options::RecorderOptions;

/// A [`Recorder`] for unit tests: no client, no apiserver, no thread. Hand
/// [`FakeRecorder::recorder`] (the same `Recorder` type the reconciler holds) to the code
/// under test, then assert on what it published. Each call is checked and built exactly as by
/// the real recorder (an invalid event is refused with the same [`PublishError`]), and kept,
/// never dropped; as the facade's `kevents_actors::FakeRecorder` for the core/v1 calls.
///
/// [`PublishError`]: crate::PublishError
///
/// ```
/// use k8s_openapi::api::core::v1::ObjectReference;
/// use kevents_kube::{FakeRecorder, PublishError, Recorder};
/// use kube::runtime::events::{Event, EventType};
///
/// async fn reconcile(name: &str, recorder: &Recorder) -> Result<(), PublishError> {
///     let cm = ObjectReference {
///         api_version: Some("v1".into()), kind: Some("ConfigMap".into()),
///         namespace: Some("default".into()), name: Some(name.into()),
///         ..Default::default()
///     };
///     let ev = Event { type_: EventType::Normal, reason: "Synced".into(),
///                      note: Some("configuration applied".into()), action: "Reconcile".into(),
///                      secondary: None };
///     recorder.publish(&ev, &cm).await
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let fake = FakeRecorder::new("example.com/cm-controller".into());
/// reconcile("app-config", &fake.recorder()).await.unwrap();
/// let published = fake.published();
/// assert_eq!(published.len(), 1);
/// assert_eq!(published[0].reason, "Synced");
/// assert_eq!(published[0].regarding.name.as_deref(), Some("app-config"));
/// assert_eq!(published[0].event.reporting_controller, "example.com/cm-controller");
/// assert_eq!(fake.strings(), ["Normal Synced configuration applied"]);
/// # });
/// ```
#[derive(Clone)]
pub struct FakeRecorder {
    store: Arc<FakeStore>,
    keep_resource_version: bool,
}

impl std::fmt::Debug for FakeRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeRecorder")
            .field("published", &self.len())
            .finish_non_exhaustive()
    }
}

impl FakeRecorder {
    /// A fake reporting as `reporter`, with [`RecorderOptions::default`].
    pub fn new(reporter: Reporter) -> Self {
        Self::with_options(reporter, RecorderOptions::default())
    }

    /// A fake reporting as `reporter` that checks and builds events per `options` (note
    /// length rule, `resourceVersion` kept or not).
    pub fn with_options(reporter: Reporter, options: RecorderOptions) -> Self {
        let factory = factory(self::reporter(&reporter), &options);
        FakeRecorder {
            store: Arc::new(FakeStore::new(factory)),
            keep_resource_version: options.keep_resource_version,
        }
    }

    /// A recorder handle publishing into this fake. Its `flush` and `stats` answer at once;
    /// its `shutdown` refuses later publishes, as the real recorder's.
    pub fn recorder(&self) -> Recorder {
        Recorder::from_fake(Arc::clone(&self.store), self.keep_resource_version)
    }

    /// Every publish so far, in call order.
    pub fn published(&self) -> Vec<Published> {
        self.store.lock().clone()
    }

    /// Removes and returns every publish so far.
    pub fn take(&self) -> Vec<Published> {
        std::mem::take(&mut *self.store.lock())
    }

    /// client-go's fake strings (`"<type> <reason> <note>"`) of every publish so far.
    pub fn strings(&self) -> Vec<String> {
        self.store
            .lock()
            .iter()
            .map(Published::client_go_string)
            .collect()
    }

    /// The number of publishes so far.
    pub fn len(&self) -> usize {
        self.store.lock().len()
    }

    /// Whether nothing was published.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The facade's fake behind [`Recorder::handle`]: kevents' own calls made through the
    /// handle (`event`, `events_v1().event`) are recorded there.
    pub fn handle_fake(&self) -> &kevents_actors::FakeRecorder {
        &self.store.core
    }
}
