//! A pipeline on the caller's arbiter dropped without [`Pipeline::shutdown`]: say what its
//! counts lack, and ask the chains to write them while their arbiter still runs (a process
//! that exits next loses them; client-go loses them silently). A pipeline on its own thread
//! is drained there (`thread.rs`).
//!
//! [`Pipeline::shutdown`]: super::running::Pipeline::shutdown

use super::local::Local;
use crate::core_v1::ReleaseTails;
use crate::events_v1::RefreshSeries;

impl Drop for Local {
    fn drop(&mut self) {
        // `shutdown` closes the intake first: it has drained, flushed and stopped everything.
        if self.intake.is_closed() {
            return;
        }
        let pending = self.env.registry.snapshot().unwritten();
        if pending == 0 {
            return;
        }
        // Its actors run on this thread: the drop cannot wait for them. Said once, on stderr
        // too, in occurrences: a process that ends now loses them.
        let message = format!(
            "kevents: pipeline on the actix arbiter dropped without shutdown: {pending} \
             occurrences are not in a stored count yet; they are written only while this \
             actix System keeps running (call Pipeline::shutdown(deadline).await before \
             leaving main; a process exit now loses them)"
        );
        tracing::warn!(unwritten = pending, "{message}");
        eprintln!("{message}");
        // `do_send` needs no runtime on this thread; the actors handle the messages while
        // their arbiter runs. Series stay open and deferred tails are written, so recorder
        // handles that outlive the pipeline keep recording as before.
        for s in &self.series {
            s.addr.do_send(RefreshSeries);
        }
        for c in &self.sinks {
            c.correlator.do_send(ReleaseTails);
        }
    }
}
