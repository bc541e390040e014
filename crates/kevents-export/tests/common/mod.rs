//! Shared by the export's integration tests: records collected in memory, one plain request
//! to the apiserver (as any program writes events), the real apiserver.

#![allow(dead_code)] // each test binary uses part of it

use std::sync::{Arc, Mutex};

use kevents_core::request::Method;
use kevents_export::{ExportError, ExportRecord, RecordSink};
use kevents_http::HttpSink;
use kevents_testkit::Target;
use serde_json::Value;

/// The records a run exported.
#[derive(Clone, Default)]
pub struct Collected(pub Arc<Mutex<Vec<ExportRecord>>>);

impl RecordSink for Collected {
    async fn deliver(&mut self, record: &ExportRecord) -> Result<(), ExportError> {
        self.0.lock().expect("lock").push(record.clone());
        Ok(())
    }
}

/// One request with a JSON body; a non-2xx answer fails the test (kevents-testkit's).
pub async fn send(admin: &HttpSink, method: Method, path: String, ct: &'static str, body: Value) {
    kevents_testkit::send_json(admin, method, path, ct, &body).await;
}

/// The real kube-apiserver (fails when it is not provisioned).
pub async fn real() -> Target {
    match Target::real().await {
        Ok(Some(t)) => t,
        Ok(None) => panic!("kube-apiserver is not provisioned"),
        Err(e) => panic!("starting kube-apiserver: {e}"),
    }
}
