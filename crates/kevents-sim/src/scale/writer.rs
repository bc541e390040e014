//! The scale simulator's built-in writer: raises counts at a set rate, round robin over a
//! set of events, on its own thread, logging each write's time when asked.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kevents_core::{Clock as _, SystemClock, Time};

use super::store::EventId;
use super::{Shared, lock, now_secs};

/// What the writer does.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriterConfig {
    /// Occurrences per second (each raises one event's count by one).
    pub rate: u64,
    /// The events raised, round robin (deleted ones are skipped).
    pub events: Vec<EventId>,
    /// Log each write (event, new count, time) for [`Writer::stop`] to return.
    pub log: bool,
}

impl WriterConfig {
    /// `rate` occurrences per second over `events`, logged.
    ///
    /// ```
    /// let c = kevents_sim::scale::WriterConfig::new(5000, Vec::new());
    /// assert!(c.log);
    /// ```
    pub fn new(rate: u64, events: Vec<EventId>) -> Self {
        WriterConfig {
            rate,
            events,
            log: true,
        }
    }
}

/// One logged write: the event raised, its count after the write, when (the sim's clock,
/// just after the store took it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The event.
    pub id: EventId,
    /// Its count after the write.
    pub count: u32,
    /// When it was written.
    pub at: Time,
}

/// A running writer ([`ScaleSim::start_writer`](super::ScaleSim::start_writer)).
#[derive(Debug)]
pub struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<WriterReport>>,
}

/// What a writer did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriterReport {
    /// Occurrences written.
    pub written: u64,
    /// How long it ran.
    pub elapsed: Duration,
    /// The writes, when logged.
    pub log: Vec<Written>,
}

/// How often the writer wakes to write what is due.
const TICK: Duration = Duration::from_millis(2);
/// Writes per lock taken.
const BATCH: u64 = 64;

impl Writer {
    pub(crate) fn start(shared: Arc<Shared>, config: WriterConfig) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("kevents-scale-writer".into())
            .spawn(move || run(&shared, &config, &flag))
            .ok();
        Writer { stop, thread }
    }

    /// Stops it; what it wrote.
    pub fn stop(mut self) -> WriterReport {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(shared: &Shared, config: &WriterConfig, stop: &AtomicBool) -> WriterReport {
    let started = Instant::now();
    let mut report = WriterReport::default();
    if config.events.is_empty() || config.rate == 0 {
        return report;
    }
    let mut next = 0usize;
    let mut misses = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let due = (started.elapsed().as_secs_f64() * config.rate as f64) as u64;
        while report.written < due && !stop.load(Ordering::Relaxed) {
            let mut store = lock(&shared.store);
            let now = now_secs();
            let upto = (report.written + BATCH).min(due);
            while report.written < upto {
                let id = config.events[next % config.events.len()];
                next = next.wrapping_add(1);
                match store.raise(id.0, 1, now) {
                    Ok(count) => {
                        report.written += 1;
                        misses = 0;
                        if config.log {
                            report.log.push(Written {
                                id,
                                count,
                                at: SystemClock.now(),
                            });
                        }
                    }
                    Err(_) => {
                        misses += 1;
                        if misses > config.events.len() {
                            // Every event is gone.
                            report.elapsed = started.elapsed();
                            return report;
                        }
                    }
                }
            }
            let rv = store.rv;
            drop(store);
            shared.notify(rv);
        }
        std::thread::sleep(TICK);
    }
    report.elapsed = started.elapsed();
    report
}
