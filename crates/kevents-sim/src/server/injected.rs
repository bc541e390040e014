//! The fault plan's say on one request: a reset, an error answer, or how the answer is
//! shaped (endless lists, padded successes, a stored message of its own).

use std::time::Duration;

use serde_json::Value;

use super::shared::{Shared, lock};
use crate::faults::{FaultBody, ListFault};
use crate::store::Reply;

/// What the fault plan says about one request.
pub(super) enum Injected {
    None,
    Reset,
    Error(u16, Option<u32>, FaultBody, Vec<(String, String)>),
}

/// The faults that shape a handled request's answer.
#[derive(Default)]
pub(super) struct Shaping {
    pub(super) list: Option<ListFault>,
    pub(super) pad_success_to: usize,
    pub(super) stored_message: Option<String>,
}

pub(super) fn draw_fault(shared: &Shared) -> (Duration, Injected, Shaping) {
    let mut f = lock(&shared.faults);
    let latency = f.latency;
    let shaping = Shaping {
        list: f.list,
        pad_success_to: f.pad_success_to,
        stored_message: f.stored_message.clone(),
    };
    if f.resets > 0 {
        f.resets -= 1;
        return (latency, Injected::Reset, shaping);
    }
    if let Some(e) = f.error.as_mut().filter(|e| e.times > 0) {
        e.times -= 1;
        return (
            latency,
            Injected::Error(e.code, e.retry_after, e.body.clone(), e.headers.clone()),
            shaping,
        );
    }
    (latency, Injected::None, shaping)
}

/// The request body of an event create with its message (`field`) replaced by `message`.
pub(super) fn with_message(body: &[u8], field: &str, message: &str) -> Vec<u8> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut m)) => {
            m.insert(field.into(), message.into());
            serde_json::to_vec(&Value::Object(m)).unwrap_or_else(|_| body.to_vec())
        }
        _ => body.to_vec(),
    }
}

/// A list answer that never ends: the first page with a `continue` token that is always the
/// same ([`ListFault::RepeatContinue`]) or always new ([`ListFault::EndlessContinue`]).
pub(super) fn endless(reply: Reply, kind: ListFault, request_number: u64) -> Reply {
    let (code, mut body) = reply;
    if code == 200
        && let Some(Value::Object(meta)) = body.get_mut("metadata")
    {
        let token = match kind {
            ListFault::RepeatContinue => "kevents-sim-repeated-continue".to_owned(),
            ListFault::EndlessContinue => format!("kevents-sim-endless-{request_number}"),
        };
        meta.insert("continue".into(), token.into());
    }
    (code, body)
}
