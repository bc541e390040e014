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

/// One request with a JSON body; a non-2xx answer fails the test.
pub async fn send(admin: &HttpSink, method: Method, path: String, ct: &'static str, body: Value) {
    let answer = admin
        .requests()
        .send(
            method,
            path.clone(),
            Some(ct),
            body.to_string().into_bytes(),
            1 << 20,
        )
        .await
        .expect("the apiserver answers");
    assert!(
        (200..300).contains(&answer.code),
        "{method} {path}: {} {}",
        answer.code,
        String::from_utf8_lossy(&answer.body)
    );
}

/// The real kube-apiserver (fails when it is not provisioned).
pub async fn real() -> Target {
    match Target::real().await {
        Ok(Some(t)) => t,
        Ok(None) => panic!("kube-apiserver is not provisioned"),
        Err(e) => panic!("starting kube-apiserver: {e}"),
    }
}
