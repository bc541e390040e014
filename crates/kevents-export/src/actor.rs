//! [`ExportActor`]: the run loop as an actix actor, for applications that already run an
//! actix system: started with a sink and resume store of their own, stopped by
//! [`StopExport`] (or by stopping the system).

use actix::prelude::*;
use kevents_core::request::StreamTransport;
use tokio::sync::oneshot;

use crate::store::{RecordSink, ResumeStore};
use crate::{ExportConfig, ExportError, ExportStats, run};

/// The run loop ([`crate::run`]) in an actor: it starts when the actor starts and the actor
/// stops when it ends. Its outcome is sent to the `done` channel given to
/// [`ExportActor::new`].
///
/// ```no_run
/// # async fn f(apiserver: kevents_http::HttpSink) {
/// use actix::Actor;
/// use kevents_export::{ExportActor, ExportConfig, MemoryResume, StopExport};
/// # struct Print;
/// # impl kevents_export::RecordSink for Print {
/// #     async fn deliver(&mut self, r: &kevents_export::ExportRecord) -> Result<(), kevents_export::ExportError> { println!("{}", r.key()); Ok(()) }
/// # }
/// let (done, outcome) = tokio::sync::oneshot::channel();
/// let addr = ExportActor::new(apiserver, ExportConfig::default(), Print, MemoryResume::default(), done).start();
/// addr.do_send(StopExport);
/// let stats = outcome.await.expect("the actor reports").expect("export ran");
/// # let _ = stats;
/// # }
/// ```
pub struct ExportActor<T, S, R> {
    parts: Option<(T, ExportConfig, S, R)>,
    done: Option<oneshot::Sender<Result<ExportStats, ExportError>>>,
    stop: Option<oneshot::Sender<()>>,
}

impl<T, S, R> std::fmt::Debug for ExportActor<T, S, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExportActor")
            .field("running", &self.parts.is_none())
            .finish_non_exhaustive()
    }
}

impl<T, S, R> ExportActor<T, S, R> {
    /// An actor that exports `config`'s events read through `apiserver` (any
    /// [`StreamTransport`]) into `sink`, with the resume point in `store`; the run's outcome
    /// goes to `done`.
    pub fn new(
        apiserver: T,
        config: ExportConfig,
        sink: S,
        store: R,
        done: oneshot::Sender<Result<ExportStats, ExportError>>,
    ) -> Self {
        ExportActor {
            parts: Some((apiserver, config, sink, store)),
            done: Some(done),
            stop: None,
        }
    }
}

impl<T, S, R> Actor for ExportActor<T, S, R>
where
    T: StreamTransport + Unpin,
    S: RecordSink + Unpin + 'static,
    R: ResumeStore + Unpin + 'static,
{
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        let Some((apiserver, config, sink, store)) = self.parts.take() else {
            return;
        };
        let (stop, stopped) = oneshot::channel();
        self.stop = Some(stop);
        let fut = run(apiserver, config, sink, store, async move {
            let _ = stopped.await;
        });
        ctx.spawn(fut.into_actor(self).map(|outcome, actor, ctx| {
            if let Some(done) = actor.done.take() {
                let _ = done.send(outcome);
            }
            ctx.stop();
        }));
    }
}

/// Asks an [`ExportActor`] to stop: the record being delivered is finished and the resume
/// point saved, then the actor stops.
#[derive(Debug, Clone, Copy, Message)]
#[rtype(result = "()")]
pub struct StopExport;

impl<T, S, R> Handler<StopExport> for ExportActor<T, S, R>
where
    T: StreamTransport + Unpin,
    S: RecordSink + Unpin + 'static,
    R: ResumeStore + Unpin + 'static,
{
    type Result = ();

    fn handle(&mut self, _: StopExport, _: &mut Self::Context) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
