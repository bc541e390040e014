//! Test doubles shared by the integration tests.
#![allow(dead_code, missing_docs)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix::prelude::*;
use kevents_actors::{EventMessage, IntakePolicy, Pipeline, WatcherPolicy};
use kevents_core::{
    Event, EventSink, EventType, ObjectReference, Occurrence, SinkError, SinkFuture, Stored,
};
use kevents_sim::MemoryApiServer;

pub fn pod(name: &str) -> ObjectReference {
    ObjectReference::new("v1", "Pod", "ns", name).with_uid(format!("uid-{name}"))
}

pub fn occ(i: usize) -> Occurrence {
    Occurrence::new(pod("p"), EventType::Normal, "Reason", format!("m{i}"))
}

/// One request a [`ScriptedSink`] received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub verb: &'static str,
    pub name: String,
    pub count: i32,
    pub message: String,
    pub ok: bool,
}

/// A sink over a [`MemoryApiServer`] that records every call and can fail, panic or hang on
/// command.
#[derive(Clone, Default)]
pub struct ScriptedSink {
    pub api: MemoryApiServer,
    pub calls: Arc<Mutex<Vec<Call>>>,
    /// Fail the first N creates of each event name with a transport error.
    pub fail_first_creates: usize,
    pub creates_per_name: Arc<Mutex<HashMap<String, usize>>>,
    /// Panic (once) on this call number (1-based).
    pub panic_on_call: Option<usize>,
    pub n_calls: Arc<AtomicUsize>,
    /// Every call fails with this error.
    pub always_fail: Option<SinkError>,
    /// Fail the first call with this error, then succeed.
    pub fail_once: Option<SinkError>,
    /// Answer after this (tokio) delay.
    pub delay: Option<Duration>,
    /// Never answer.
    pub hang: bool,
    /// Answer the stored writes of these verbs (`create`, `patch`) with `Stored::AsSent`
    /// instead of the server's copy.
    pub as_sent: &'static [&'static str],
}

impl ScriptedSink {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn call(&self, verb: &'static str, event: &Event, patch: &[u8]) -> SinkFuture {
        let n = self.n_calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.panic_on_call == Some(n) {
            panic!("scripted panic on call {n}");
        }
        let mut result = None;
        if let Some(e) = &self.always_fail {
            result = Some(Err(e.clone()));
        }
        if n == 1
            && let Some(e) = &self.fail_once
        {
            result = Some(Err(e.clone()));
        }
        if verb == "create" && self.fail_first_creates > 0 {
            let mut m = self.creates_per_name.lock().unwrap();
            let c = m.entry(event.metadata.name.clone()).or_default();
            *c += 1;
            if *c <= self.fail_first_creates {
                result = Some(Err(SinkError::Transport("connection refused".into())));
            }
        }
        let result = result.unwrap_or_else(|| {
            match verb {
                "create" => self.api.create_now(event),
                _ => self
                    .api
                    .patch_now(&event.metadata.namespace, &event.metadata.name, patch),
            }
            .map(|stored| {
                if self.as_sent.contains(&verb) {
                    Stored::AsSent
                } else {
                    Stored::from(stored)
                }
            })
        });
        self.calls.lock().unwrap().push(Call {
            verb,
            name: event.metadata.name.clone(),
            count: event.count,
            message: event.message.clone(),
            ok: result.is_ok(),
        });
        let delay = self.delay;
        let hang = self.hang;
        Box::pin(async move {
            if hang {
                std::future::pending::<()>().await;
            }
            if let Some(d) = delay {
                tokio::time::sleep(d).await;
            }
            result
        })
    }
}

impl EventSink for ScriptedSink {
    fn create(&self, event: &Event) -> SinkFuture {
        self.call("create", event, b"")
    }
    fn patch(&self, event: &Event, patch: &[u8]) -> SinkFuture {
        self.call("patch", event, patch)
    }
}

/// A watcher that records what it receives.
#[derive(Clone, Default)]
pub struct Collector {
    pub seen: Arc<Mutex<Vec<(u64, Event)>>>,
}

impl Collector {
    pub fn len(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
    pub fn seqs(&self) -> Vec<u64> {
        self.seen.lock().unwrap().iter().map(|s| s.0).collect()
    }
    pub fn messages(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.1.message.clone())
            .collect()
    }
}

impl Actor for Collector {
    type Context = Context<Self>;
}

impl Handler<EventMessage> for Collector {
    type Result = ();
    fn handle(&mut self, msg: EventMessage, _: &mut Context<Self>) {
        let e = msg.event().cloned().unwrap_or_default();
        self.seen.lock().unwrap().push((msg.seq(), e));
    }
}

/// A watcher that keeps every message (and so its queue slot) until told to let go.
#[derive(Default)]
pub struct Holder {
    pub held: Arc<Mutex<Vec<EventMessage>>>,
    pub released: Arc<AtomicUsize>,
}

#[derive(Message)]
#[rtype(result = "()")]
pub struct Release;

impl Actor for Holder {
    type Context = Context<Self>;
}

impl Handler<EventMessage> for Holder {
    type Result = ();
    fn handle(&mut self, msg: EventMessage, _: &mut Context<Self>) {
        self.held.lock().unwrap().push(msg);
    }
}

impl Handler<Release> for Holder {
    type Result = ();
    fn handle(&mut self, _: Release, _: &mut Context<Self>) {
        let n = self.held.lock().unwrap().drain(..).count();
        self.released.fetch_add(n, Ordering::SeqCst);
    }
}

/// Lets the actors run until `cond` holds; fails the test after `max_rounds` rounds.
pub async fn run_until(max_rounds: usize, mut cond: impl FnMut() -> bool) {
    for _ in 0..max_rounds {
        if cond() {
            return;
        }
        actix_rt::task::yield_now().await;
    }
    assert!(
        cond(),
        "condition not reached after {max_rounds} scheduler rounds"
    );
}

/// Lets the actors run until the broadcaster distributed `n` events.
pub async fn until_broadcast(p: &Pipeline, n: u64) {
    run_until(1_000_000, || p.stats().broadcast >= n).await;
}

/// How occurrences reach a sink chain in the property tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queues {
    /// Unbounded intake, backpressure delivery: nothing is merged or dropped.
    Lossless,
    /// The defaults (coalesce-if-full, 1000 slots): a short trace never overflows.
    Defaults,
    /// Coalesce-if-full with 2 slots in the intake and in the chain's queue: most of a
    /// burst goes through the overflow tables, merged.
    Tight,
    /// Drop-if-full, large enough that nothing is dropped.
    DropIfFull,
}

impl Queues {
    /// The intake and delivery policies.
    pub fn policies(self) -> (IntakePolicy, WatcherPolicy) {
        match self {
            Queues::Lossless => (
                IntakePolicy::Unbounded,
                WatcherPolicy::Backpressure { capacity: 1000 },
            ),
            Queues::Defaults => (IntakePolicy::default(), WatcherPolicy::sink_default()),
            Queues::Tight => (
                IntakePolicy::CoalesceIfFull {
                    capacity: 2,
                    overflow: 1000,
                },
                WatcherPolicy::CoalesceIfFull {
                    capacity: 2,
                    overflow: 1000,
                },
            ),
            Queues::DropIfFull => (
                IntakePolicy::DropIfFull { capacity: 10_000 },
                WatcherPolicy::DropIfFull { capacity: 10_000 },
            ),
        }
    }
}
