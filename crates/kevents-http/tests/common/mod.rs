//! What the HTTP test binaries share: every log line they produce, captured at TRACE level
//! for all targets, so secret scans see what a user's log would.
#![allow(dead_code)]

use std::sync::{Arc, Mutex, OnceLock};

#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every log line of this test binary, at TRACE level for all targets.
pub fn logs() -> &'static Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
        captured
    })
}

pub fn log_text() -> String {
    String::from_utf8_lossy(&logs().0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
}
