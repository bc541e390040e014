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
        tracing::warn!(
            unwritten = pending,
            "kevents pipeline dropped without shutdown: {pending} occurrences are not in a \
             stored count yet; writing them while the actix System runs (call \
             Pipeline::shutdown to wait for them; a process exit or crash loses them)"
        );
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
