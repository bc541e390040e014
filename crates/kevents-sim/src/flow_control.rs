//! API Priority and Fairness (APF) of kube-apiserver for one priority level, reproduced from
//! its source (`k8s.io/apiserver/pkg/util/flowcontrol`: `apf_controller.go`, the queue set
//! of `fairqueuing/queueset`, `util/shufflesharding`, and the filter
//! `pkg/server/filters/priority-and-fairness.go`) so that the simulators hold, queue and
//! refuse event writes as a busy apiserver does ([`FlowControl`], [`FlowController`]).
//!
//! What the server does, and so what this does:
//!
//! * **Seats.** The server's concurrency limit is `--max-requests-inflight` +
//!   `--max-mutating-requests-inflight` (400 + 200 by default). A priority level gets
//!   `ceil(limit × shares / Σ shares)` seats, the shares summed over every bootstrap level:
//!   205 on 1.20 (`assuredConcurrencyShares` of system 30, leader-election 10, workload-high
//!   40, workload-low 100, global-default 20, catch-all 5) and 245 on 1.36
//!   (`nominalConcurrencyShares`, node-high 40 added, exempt 0) ([`FlowControl::seats`]). An
//!   event create or patch occupies 1 seat from the moment it is dispatched until its answer
//!   is written: while the server reads its body, admits and stores it (the simulators: while
//!   they read the body and wait out their latency).
//! * **Queues and shuffle sharding.** A request's flow is its flow schema and its flow
//!   distinguisher, the user name for the `global-default` and `service-accounts`
//!   (`workload-low`) schemas: `sha256(schema, 0, user)`'s first 8 bytes, little-endian,
//!   dealt into a hand of `handSize` of the level's `queues` (the shuffle-sharding dealer);
//!   the request joins the queue of its hand with the fewest requests waiting (the hand
//!   walked in the dealt order on 1.20, from a rotating offset on 1.36, so ties spread). Both bootstrap levels have 128 queues, hands of
//!   6 and a `queueLengthLimit` of 50 on 1.20 and 1.36: one user can have 300 writes waiting
//!   and `seats` executing before the next is refused.
//! * **Refusal.** A request is refused at once when every seat is in use and its queue holds
//!   `queueLengthLimit` requests; a queued request is refused when it waited longer than the
//!   request wait limit, 15 s (a quarter of the 60 s request timeout): on 1.20 checked only
//!   when another request joins the same queue, on 1.36 by the request's own deadline. The
//!   answer is `429 Too Many Requests`, `Retry-After: 1`, `text/plain; charset=utf-8` body
//!   `Too many requests, please try again later.\n` (not a `Status`), as both versions send
//!   ([`TOO_MANY_REQUESTS_BODY`], [`RETRY_AFTER_SECONDS`]); 1.36.3 was also seen asking for
//!   `Retry-After: 2` under load, which this does not emulate.
//! * **Fair queuing.** Whenever a seat is free, the queue whose oldest request has the
//!   earliest virtual finish time is served (the queue's `nextDispatchR` plus the request's
//!   work, in seat-seconds, queues visited round-robin from the last served), the virtual
//!   clock advancing at `min(seats asked, seats) / active queues` per second (1.20 counts
//!   only the seats in use, the same whenever a request waits, as every seat is then in
//!   use); a dispatch advances the queue's `nextDispatchR` by the estimated work (60 s on
//!   1.20, 3 ms on 1.36), a finished request corrects it by the actual service time, and a
//!   queue that lags the virtual clock is moved up: on 1.20 the queue chosen for dispatch
//!   to the clock plus its work executing, since 1.22 never before its oldest request
//!   arrived. A queue's virtual start is the virtual time
//!   when it last became busy, so a flow that waited longer is owed more: with service
//!   times of a few milliseconds, as on a real server (give the simulators a latency), two
//!   users flooding one level at once share its seats about evenly, whatever their numbers
//!   of writes.
//!
//! **What is emulated, and why only event writes.** One priority level: the HTTP simulator
//! ([`SimConfig::flow_control`](crate::SimConfig::flow_control)) puts every event write
//! (core/v1 and `events.k8s.io/v1` create and patch) of every user through it, the
//! [`MemoryApiServer`](crate::MemoryApiServer)
//! ([`with_flow_control`](crate::MemoryApiServer::with_flow_control)) the core/v1 creates
//! and patches made through its `EventSink` trait, as kube-apiserver puts a user's writes through `global-default` (an authenticated
//! user outside `system:masters`) or `workload-low` (a service account). Event writes are the
//! load a recorder makes and the one whose refusals it must survive; reads, discovery and
//! namespaces are few and would only take seats the real server gives them from the same
//! level. Not emulated: the other priority levels and their flow schemas (the `exempt` level
//! of `system:masters` is not limited at all on the real server), 1.36's borrowing of seats
//! between levels (every 10 s a level's limit moves between its lower and upper bound with
//! the seats demanded: with 2 server seats `global-default` nominally has 1, lends it while
//! idle, so that requests queue until an adjustment gives a seat back, and borrows up to 3),
//! the width of lists and watches (a list can take several seats, a watch takes seats while
//! it initialises), the `X-Kubernetes-PF-FlowSchema-UID` and `-PriorityLevel-UID` headers
//! both versions put on the answers of a limited level (seen on 1.20.2's 201, 403 and 504
//! and 1.36.3's 201 and 400), and 1.20's request timeout: 1.20 has no request deadline for
//! APF to wait by, so its timeout filter answers a request still executing (seen: a body
//! that never comes) or, by the same filter, still waiting at 60 s with `504` and a
//! `Timeout` `Status` (`Timeout: request did not complete within 1m0s`, as `text/plain`),
//! which frees the seat; the emulation refuses a request still waiting at 60 s with the 429
//! and lets a seat be held as long as its request lasts.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;
// tokio's clock, so that a paused runtime's time is the queues' time too.
use tokio::time::Instant;

/// The body of the 429 of a refused request, as kube-apiserver writes it (plain text).
pub const TOO_MANY_REQUESTS_BODY: &str = "Too many requests, please try again later.\n";

/// The `Retry-After` of that 429.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// Which kube-apiserver's defaults (bootstrap configuration, wait limit, virtual clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApfVersion {
    /// kube-apiserver 1.20 (`flowcontrol.apiserver.k8s.io/v1beta1`, assured shares).
    V1_20,
    /// kube-apiserver 1.36 (`flowcontrol.apiserver.k8s.io/v1`, nominal shares, borrowing).
    V1_36,
}

impl ApfVersion {
    /// The sum of the shares of every bootstrap priority level.
    ///
    /// ```
    /// use kevents_sim::flow_control::ApfVersion;
    /// assert_eq!(ApfVersion::V1_20.total_shares(), 205);
    /// assert_eq!(ApfVersion::V1_36.total_shares(), 245);
    /// ```
    pub fn total_shares(self) -> u32 {
        match self {
            ApfVersion::V1_20 => 30 + 10 + 40 + 100 + 20 + 5,
            ApfVersion::V1_36 => 30 + 40 + 10 + 40 + 100 + 20 + 5,
        }
    }

    /// The work a request is estimated to be when dispatched (the queue set's `G`).
    fn estimated_service(self) -> Duration {
        match self {
            ApfVersion::V1_20 => Duration::from_secs(60),
            ApfVersion::V1_36 => Duration::from_millis(3),
        }
    }
}

/// A priority level's queuing configuration (its `PriorityLevelConfiguration`'s
/// `limited` part).
///
/// ```
/// use kevents_sim::flow_control::PriorityLevel;
/// let l = PriorityLevel::global_default();
/// assert_eq!((l.shares, l.queues, l.hand_size, l.queue_length_limit), (20, 128, 6, 50));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PriorityLevel {
    /// Its name.
    pub name: String,
    /// The flow schema that sends requests to it (part of the flow's hash).
    pub flow_schema: String,
    /// Its (assured or nominal) concurrency shares.
    pub shares: u32,
    /// Number of queues.
    pub queues: u32,
    /// Queues dealt to each flow.
    pub hand_size: u32,
    /// Requests a queue holds.
    pub queue_length_limit: u32,
}

impl PriorityLevel {
    /// `global-default` (flow schema `global-default`): authenticated users outside
    /// `system:masters` that no other schema matches. The same on 1.20 and 1.36.
    pub fn global_default() -> Self {
        PriorityLevel {
            name: "global-default".into(),
            flow_schema: "global-default".into(),
            shares: 20,
            queues: 128,
            hand_size: 6,
            queue_length_limit: 50,
        }
    }

    /// `workload-low` (flow schema `service-accounts`): service accounts outside
    /// `kube-system`. The same on 1.20 and 1.36.
    ///
    /// ```
    /// assert_eq!(kevents_sim::flow_control::PriorityLevel::workload_low().shares, 100);
    /// ```
    pub fn workload_low() -> Self {
        PriorityLevel {
            name: "workload-low".into(),
            flow_schema: "service-accounts".into(),
            shares: 100,
            queues: 128,
            hand_size: 6,
            queue_length_limit: 50,
        }
    }
}

/// APF as configured: the server's in-flight limits, the version and the priority level
/// event writes go to. Default: kube-apiserver 1.20's defaults (400 + 200 in flight,
/// `global-default`: 59 seats).
///
/// ```
/// use kevents_sim::flow_control::{ApfVersion, FlowControl};
/// assert_eq!(FlowControl::default().seats(), 59);
/// let tiny = FlowControl::new(ApfVersion::V1_36, 1, 1);
/// assert_eq!(tiny.seats(), 1);
/// assert_eq!(tiny.capacity_per_flow(), 301);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowControl {
    /// Whose defaults.
    pub version: ApfVersion,
    /// `--max-requests-inflight`.
    pub max_requests_inflight: u32,
    /// `--max-mutating-requests-inflight`.
    pub max_mutating_requests_inflight: u32,
    /// The level every event write goes to.
    pub level: PriorityLevel,
    /// How long a request may wait in its queue (15 s: a quarter of the request timeout).
    pub request_wait_limit: Duration,
}

impl Default for FlowControl {
    fn default() -> Self {
        FlowControl::new(ApfVersion::V1_20, 400, 200)
    }
}

impl FlowControl {
    /// `version`'s defaults with these in-flight limits, event writes in `global-default`.
    pub fn new(version: ApfVersion, max_requests_inflight: u32, max_mutating: u32) -> Self {
        FlowControl {
            version,
            max_requests_inflight,
            max_mutating_requests_inflight: max_mutating,
            level: PriorityLevel::global_default(),
            request_wait_limit: Duration::from_secs(15),
        }
    }

    /// The same, writes in `level`.
    ///
    /// ```
    /// use kevents_sim::flow_control::{FlowControl, PriorityLevel};
    /// let f = FlowControl::default().with_level(PriorityLevel::workload_low());
    /// assert_eq!(f.seats(), 293); // ceil(600 * 100 / 205)
    /// ```
    pub fn with_level(mut self, level: PriorityLevel) -> Self {
        self.level = level;
        self
    }

    /// The level's concurrency limit: `ceil(server limit × shares / Σ shares)`.
    pub fn seats(&self) -> u32 {
        let server =
            u64::from(self.max_requests_inflight) + u64::from(self.max_mutating_requests_inflight);
        let total = u64::from(self.version.total_shares());
        let seats = (server * u64::from(self.level.shares)).div_ceil(total);
        u32::try_from(seats).unwrap_or(u32::MAX)
    }

    /// Requests one flow can have in the level before the next is refused: every seat
    /// and `handSize` full queues.
    pub fn capacity_per_flow(&self) -> u32 {
        self.seats().saturating_add(
            self.level
                .hand_size
                .saturating_mul(self.level.queue_length_limit),
        )
    }
}

/// Why a request was refused (answered 429).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    /// Every seat in use and the request's queue full.
    #[error("queue full: {}", TOO_MANY_REQUESTS_BODY.trim_end())]
    QueueFull,
    /// It waited in its queue longer than the request wait limit.
    #[error("timed out in its queue: {}", TOO_MANY_REQUESTS_BODY.trim_end())]
    TimedOut,
}

/// How often each outcome happened so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowStats {
    /// Requests given a seat.
    pub dispatched: u64,
    /// Requests refused because their queue was full.
    pub rejected_queue_full: u64,
    /// Requests refused after waiting too long.
    pub rejected_timed_out: u64,
    /// Requests that gave up while waiting (their caller went away).
    pub cancelled: u64,
}

struct Waiter {
    id: u64,
    arrival: Instant,
    arrival_r: f64,
    decision: oneshot::Sender<Result<(), Rejected>>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiter>,
    executing: u32,
    next_dispatch_r: f64,
}

struct State {
    config: FlowControl,
    seats: u32,
    queues: Vec<Queue>,
    seats_in_use: u32,
    waiting: usize,
    current_r: f64,
    last_real: Instant,
    robin_index: usize,
    enqueues: u64,
    next_id: u64,
    stats: FlowStats,
}

/// The first 8 bytes, little-endian, of `sha256(flow schema, 0, distinguisher)` (the
/// controller's `hashFlowID`).
///
/// ```
/// let a = kevents_sim::flow_control::hash_flow_id("global-default", "alice");
/// assert_ne!(a, kevents_sim::flow_control::hash_flow_id("global-default", "bob"));
/// ```
pub fn hash_flow_id(flow_schema: &str, distinguisher: &str) -> u64 {
    let mut input = Vec::with_capacity(flow_schema.len() + 1 + distinguisher.len());
    input.extend_from_slice(flow_schema.as_bytes());
    input.push(0);
    input.extend_from_slice(distinguisher.as_bytes());
    let sum = ring::digest::digest(&ring::digest::SHA256, &input);
    let mut first = [0u8; 8];
    first.copy_from_slice(&sum.as_ref()[..8]);
    u64::from_le_bytes(first)
}

/// The queues a hash is dealt (the shuffle-sharding dealer's `Deal`): `hand_size` distinct
/// indices below `queues`.
///
/// ```
/// let hand = kevents_sim::flow_control::deal(12345, 128, 6);
/// assert_eq!(hand.len(), 6);
/// let mut sorted = hand.clone();
/// sorted.sort();
/// sorted.dedup();
/// assert_eq!(sorted.len(), 6);
/// assert!(hand.iter().all(|&q| q < 128));
/// ```
pub fn deal(hash: u64, queues: u32, hand_size: u32) -> Vec<usize> {
    let hand_size = hand_size.min(queues) as usize;
    let mut remainders = Vec::with_capacity(hand_size);
    let mut h = hash;
    for i in 0..hand_size as u64 {
        let deck = u64::from(queues) - i;
        remainders.push((h % deck) as usize);
        h /= deck;
    }
    let mut hand = Vec::with_capacity(hand_size);
    for i in 0..hand_size {
        let mut candidate = remainders[i];
        for j in (1..=i).rev() {
            if candidate >= remainders[j - 1] {
                candidate += 1;
            }
        }
        hand.push(candidate);
    }
    hand
}

impl State {
    fn new(config: FlowControl, now: Instant) -> Self {
        let queues = (0..config.level.queues.max(1))
            .map(|_| Queue::default())
            .collect();
        State {
            seats: config.seats(),
            config,
            queues,
            seats_in_use: 0,
            waiting: 0,
            current_r: 0.0,
            last_real: now,
            robin_index: 0,
            enqueues: 0,
            next_id: 0,
            stats: FlowStats::default(),
        }
    }

    fn work(&self) -> f64 {
        self.config.version.estimated_service().as_secs_f64()
    }

    /// Advances the virtual clock to `now` (the queue set's `syncTimeLocked`).
    fn sync_time(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last_real).as_secs_f64();
        if now > self.last_real {
            self.last_real = now;
        }
        let mut active = 0u32;
        let mut asked = 0u64;
        for q in &self.queues {
            asked += u64::from(q.executing) + q.waiting.len() as u64;
            if !q.waiting.is_empty() || q.executing > 0 {
                active += 1;
            }
        }
        if active > 0 {
            let rate = (asked as f64).min(f64::from(self.seats)) / f64::from(active);
            self.current_r += rate * elapsed;
        }
    }

    /// The queue of `hash`'s hand with the least work waiting, the hand walked from a
    /// rotating offset.
    fn shuffle_shard(&mut self, hash: u64) -> usize {
        let hand = deal(hash, self.queues.len() as u32, self.config.level.hand_size);
        // 1.20 walks the hand in the dealt order; later versions from a rotating offset.
        let offset = match self.config.version {
            ApfVersion::V1_20 => 0,
            ApfVersion::V1_36 => (self.enqueues % hand.len() as u64) as usize,
        };
        self.enqueues += 1;
        let mut best = hand[offset];
        let mut least = usize::MAX;
        for i in 0..hand.len() {
            let q = hand[(offset + i) % hand.len()];
            if self.queues[q].waiting.len() < least {
                least = self.queues[q].waiting.len();
                best = q;
            }
        }
        best
    }

    /// 1.20's wait limit: requests of `queue` that waited too long are refused when another
    /// request arrives at it.
    fn remove_timed_out(&mut self, queue: usize, now: Instant) {
        let limit = self.config.request_wait_limit;
        while let Some(w) = self.queues[queue].waiting.front() {
            if now.saturating_duration_since(w.arrival) <= limit {
                break;
            }
            if let Some(w) = self.queues[queue].waiting.pop_front() {
                self.waiting -= 1;
                self.stats.rejected_timed_out += 1;
                let _ = w.decision.send(Err(Rejected::TimedOut));
            }
        }
    }

    /// The anti-windup bound (not in 1.20): a queue's virtual start is never before its
    /// oldest request's arrival.
    fn bound_next_dispatch(&mut self, queue: usize) {
        if self.config.version == ApfVersion::V1_20 {
            return;
        }
        let q = &mut self.queues[queue];
        if let Some(w) = q.waiting.front()
            && q.next_dispatch_r < w.arrival_r
        {
            q.next_dispatch_r = w.arrival_r;
        }
    }

    /// 1.20's anti-windup (its `selectQueueLocked`, not in later versions, which bound a
    /// queue by its oldest request's arrival instead): the queue chosen for dispatch, if its
    /// virtual start less the work it has executing is behind the virtual clock, is moved
    /// up to the clock plus that work, so a queue that waited long does not carry its lag
    /// as a credit into its next requests.
    fn refresh_virtual_start(&mut self, queue: usize) {
        if self.config.version != ApfVersion::V1_20 {
            return;
        }
        let executing = f64::from(self.queues[queue].executing) * self.work();
        let q = &mut self.queues[queue];
        if self.current_r > q.next_dispatch_r - executing {
            q.next_dispatch_r = self.current_r + executing;
        }
    }

    /// Serves waiting requests while seats are free (`dispatchAsMuchAsPossibleLocked`).
    fn dispatch_as_much_as_possible(&mut self) {
        while self.waiting > 0 && self.seats_in_use < self.seats {
            let n = self.queues.len();
            let mut best: Option<(usize, f64)> = None;
            let mut index = self.robin_index;
            for _ in 0..n {
                index = (index + 1) % n;
                let q = &self.queues[index];
                if !q.waiting.is_empty() {
                    let finish = q.next_dispatch_r + self.work();
                    if best.is_none_or(|(_, f)| finish < f) {
                        best = Some((index, finish));
                    }
                }
            }
            let Some((chosen, _)) = best else {
                return;
            };
            self.robin_index = chosen;
            self.refresh_virtual_start(chosen);
            let Some(w) = self.queues[chosen].waiting.pop_front() else {
                return;
            };
            self.waiting -= 1;
            if w.decision.send(Ok(())).is_ok() {
                self.seats_in_use += 1;
                let work = self.work();
                let q = &mut self.queues[chosen];
                q.executing += 1;
                q.next_dispatch_r += work;
                self.stats.dispatched += 1;
            } else {
                self.stats.cancelled += 1;
            }
            self.bound_next_dispatch(chosen);
        }
    }

    fn finish(&mut self, queue: usize, started: Instant, now: Instant) {
        self.sync_time(now);
        self.seats_in_use = self.seats_in_use.saturating_sub(1);
        let g = self.work();
        let actual = now.saturating_duration_since(started).as_secs_f64();
        let q = &mut self.queues[queue];
        q.executing = q.executing.saturating_sub(1);
        q.next_dispatch_r -= g - actual;
        self.bound_next_dispatch(queue);
        self.dispatch_as_much_as_possible();
    }

    fn cancel(&mut self, queue: usize, id: u64) {
        let q = &mut self.queues[queue];
        if let Some(pos) = q.waiting.iter().position(|w| w.id == id) {
            q.waiting.remove(pos);
            self.waiting -= 1;
            self.stats.cancelled += 1;
            self.bound_next_dispatch(queue);
        }
    }
}

/// APF at work for one priority level: [`FlowController::admit`] gives a request a
/// [`Seat`] (at once or after waiting in its queue) or refuses it. Clones share the level.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use kevents_sim::flow_control::{ApfVersion, FlowControl, FlowController, Rejected};
/// let apf = FlowController::new(FlowControl::new(ApfVersion::V1_20, 1, 1)); // 1 seat
/// let seat = apf.admit("alice").await.unwrap(); // served at once
/// // 300 more of alice's wait in her 6 queues of 50...
/// let waiting: Vec<_> = (0..300).map(|_| { let a = apf.clone(); tokio::spawn(async move { a.admit("alice").await }) }).collect();
/// while apf.waiting() < 300 { tokio::task::yield_now().await; }
/// // ...and the next is refused at once.
/// assert_eq!(apf.admit("alice").await.unwrap_err(), Rejected::QueueFull);
/// drop(seat); // the seat goes to the next in line
/// drop(waiting);
/// assert_eq!(apf.stats().rejected_queue_full, 1);
/// # }
/// ```
#[derive(Clone)]
pub struct FlowController {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for FlowController {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.locked();
        f.debug_struct("FlowController")
            .field("level", &s.config.level.name)
            .field("seats", &s.seats)
            .field("seats_in_use", &s.seats_in_use)
            .field("waiting", &s.waiting)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the queues consistent, so a poisoned lock is usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A seat held by a dispatched request; dropping it ends the request and serves the next
/// waiting one.
#[derive(Debug)]
pub struct Seat {
    ctl: FlowController,
    queue: usize,
    started: Instant,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.ctl
            .locked()
            .finish(self.queue, self.started, Instant::now());
    }
}

/// Takes a queued request out of its queue if its caller stops waiting.
struct WaitGuard {
    ctl: FlowController,
    queue: usize,
    id: u64,
    done: bool,
}

impl Drop for WaitGuard {
    fn drop(&mut self) {
        if !self.done {
            self.ctl.locked().cancel(self.queue, self.id);
        }
    }
}

impl FlowController {
    /// Empty queues and free seats for `config`.
    pub fn new(config: FlowControl) -> Self {
        FlowController {
            state: Arc::new(Mutex::new(State::new(config, Instant::now()))),
        }
    }

    fn locked(&self) -> MutexGuard<'_, State> {
        // Every critical section leaves the queues consistent.
        lock(&self.state)
    }

    /// The configuration.
    pub fn config(&self) -> FlowControl {
        self.locked().config.clone()
    }

    /// Seats in use now.
    pub fn seats_in_use(&self) -> u32 {
        self.locked().seats_in_use
    }

    /// Requests waiting in the queues now.
    pub fn waiting(&self) -> usize {
        self.locked().waiting
    }

    /// What happened so far.
    pub fn stats(&self) -> FlowStats {
        self.locked().stats
    }

    /// A request of flow `user` (the flow distinguisher): a seat once the fair-queuing order
    /// reaches it, or the reason it is refused. Waiting is a tokio timer and channel: call
    /// it inside a tokio runtime. Dropping the future while it waits takes the request out of
    /// its queue.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// use kevents_sim::flow_control::{ApfVersion, FlowControl, FlowController, Rejected};
    /// let apf = FlowController::new(FlowControl::new(ApfVersion::V1_36, 1, 1));
    /// let seat = apf.admit("alice").await.unwrap();
    /// assert_eq!(apf.seats_in_use(), 1);
    /// // 1.36 refuses a request still waiting after 15 s.
    /// assert_eq!(apf.admit("bob").await.unwrap_err(), Rejected::TimedOut);
    /// drop(seat);
    /// assert_eq!(apf.seats_in_use(), 0);
    /// assert_eq!(apf.stats().rejected_timed_out, 1);
    /// # }
    /// ```
    pub async fn admit(&self, user: &str) -> Result<Seat, Rejected> {
        let (queue, id, rx, version, wait_limit) = {
            let mut s = self.locked();
            let now = Instant::now();
            s.sync_time(now);
            let hash = hash_flow_id(&s.config.level.flow_schema, user);
            let queue = s.shuffle_shard(hash);
            if s.config.version == ApfVersion::V1_20 {
                s.remove_timed_out(queue, now);
            }
            if s.seats_in_use >= s.seats
                && s.queues[queue].waiting.len() >= s.config.level.queue_length_limit as usize
            {
                s.stats.rejected_queue_full += 1;
                s.bound_next_dispatch(queue);
                return Err(Rejected::QueueFull);
            }
            let (tx, rx) = oneshot::channel();
            let id = s.next_id;
            s.next_id += 1;
            let arrival_r = s.current_r;
            let q = &mut s.queues[queue];
            if q.waiting.is_empty() && q.executing == 0 {
                q.next_dispatch_r = arrival_r;
            }
            q.waiting.push_back(Waiter {
                id,
                arrival: now,
                arrival_r,
                decision: tx,
            });
            s.waiting += 1;
            s.bound_next_dispatch(queue);
            s.dispatch_as_much_as_possible();
            (queue, id, rx, s.config.version, s.config.request_wait_limit)
        };
        let mut guard = WaitGuard {
            ctl: self.clone(),
            queue,
            id,
            done: false,
        };
        // 1.36 refuses a request at its own wait deadline; 1.20 only when another arrives
        // at its queue (above), or at the 60 s request timeout.
        let deadline = match version {
            ApfVersion::V1_36 => wait_limit,
            ApfVersion::V1_20 => Duration::from_secs(60),
        };
        let decision = tokio::time::timeout(deadline, rx).await;
        guard.done = true;
        match decision {
            Ok(Ok(Ok(()))) => Ok(Seat {
                ctl: self.clone(),
                queue,
                started: Instant::now(),
            }),
            Ok(Ok(Err(r))) => Err(r),
            // The sender went away without a word: cannot happen while the state lives.
            Ok(Err(_)) => Err(Rejected::TimedOut),
            Err(_) => {
                let mut s = self.locked();
                let still_waiting = s.queues[queue].waiting.iter().any(|w| w.id == id);
                if still_waiting {
                    s.cancel(queue, id);
                    s.stats.cancelled -= 1;
                    s.stats.rejected_timed_out += 1;
                    Err(Rejected::TimedOut)
                } else {
                    // Dispatched just as the deadline passed: the seat is ours.
                    drop(s);
                    Ok(Seat {
                        ctl: self.clone(),
                        queue,
                        started: Instant::now(),
                    })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(version: ApfVersion) -> FlowController {
        FlowController::new(FlowControl::new(version, 1, 1))
    }

    #[test]
    fn seats_are_the_servers_limit_shared_as_the_server_does() {
        // Read on the servers' metrics with --max-requests-inflight=1
        // --max-mutating-requests-inflight=1: 1 seat for both levels on both versions.
        for v in [ApfVersion::V1_20, ApfVersion::V1_36] {
            assert_eq!(FlowControl::new(v, 1, 1).seats(), 1);
            assert_eq!(
                FlowControl::new(v, 1, 1)
                    .with_level(PriorityLevel::workload_low())
                    .seats(),
                1
            );
        }
        // With the default 400 + 200, read on the servers' /metrics
        // (apiserver_flowcontrol_request_concurrency_limit on 1.20.2: global-default 59,
        // workload-low 293, system 88, workload-high 118, leader-election 30, catch-all 15;
        // apiserver_flowcontrol_nominal_limit_seats on 1.36.3: global-default 49,
        // workload-low 245, node-high 98, workload-high 98, system 74, leader-election 25,
        // catch-all 13, exempt 0). Every level's share, so the totals 205 and 245 too.
        let default = |v, shares| {
            let mut level = PriorityLevel::global_default();
            level.shares = shares;
            FlowControl::new(v, 400, 200).with_level(level).seats()
        };
        let v1_20: Vec<u32> = [20, 100, 30, 40, 10, 5]
            .map(|s| default(ApfVersion::V1_20, s))
            .into();
        assert_eq!(v1_20, [59, 293, 88, 118, 30, 15]);
        let v1_36: Vec<u32> = [20, 100, 40, 40, 30, 10, 5, 0]
            .map(|s| default(ApfVersion::V1_36, s))
            .into();
        assert_eq!(v1_36, [49, 245, 98, 98, 74, 25, 13, 0]);
        let low = |v| {
            FlowControl::new(v, 400, 200)
                .with_level(PriorityLevel::workload_low())
                .seats()
        };
        assert_eq!((low(ApfVersion::V1_20), low(ApfVersion::V1_36)), (293, 245));
    }

    #[test]
    fn the_dealer_deals_distinct_queues_as_go_does() {
        // Deal(hash, 128, 6) worked by hand: remainders of successive divisions by 128, 127,
        // ..., each bumped past the smaller earlier ones.
        assert_eq!(deal(0, 128, 6), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(deal(1, 128, 6), vec![1, 0, 2, 3, 4, 5]);
        assert_eq!(deal(128, 128, 6), vec![0, 2, 1, 3, 4, 5]);
        for h in [7u64, 99, u64::MAX, 1 << 40] {
            let mut hand = deal(h, 128, 6);
            hand.sort_unstable();
            hand.dedup();
            assert_eq!(hand.len(), 6);
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn one_flow_fills_its_hand_then_is_refused() {
        let apf = tiny(ApfVersion::V1_20);
        let seat = apf.admit("alice").await.expect("a free seat");
        let mut waiting = Vec::new();
        for _ in 0..300 {
            let a = apf.clone();
            waiting.push(tokio::spawn(async move { a.admit("alice").await.is_ok() }));
        }
        while apf.waiting() < 300 {
            tokio::task::yield_now().await;
        }
        assert_eq!(apf.admit("alice").await.unwrap_err(), Rejected::QueueFull);
        // Another user has a hand of its own (or partly shared): it still gets in line.
        let bob = {
            let a = apf.clone();
            tokio::spawn(async move { a.admit("bob").await.is_ok() })
        };
        while apf.waiting() < 301 {
            tokio::task::yield_now().await;
        }
        drop(seat);
        let mut served = 0;
        for w in waiting {
            served += usize::from(w.await.expect("task"));
        }
        assert_eq!(served, 300);
        assert!(bob.await.expect("task"));
        assert_eq!(apf.stats().rejected_queue_full, 1);
        assert_eq!(apf.seats_in_use(), 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn fair_queuing_alternates_between_flows() {
        let apf = tiny(ApfVersion::V1_36);
        let seat = apf.admit("alice").await.expect("seat");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (user, n) in [("alice", 40), ("bob", 5)] {
            for _ in 0..n {
                let (a, order) = (apf.clone(), order.clone());
                tasks.push(tokio::spawn(async move {
                    let seat = a.admit(user).await.expect("queued");
                    order.lock().expect("order").push(user);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    drop(seat);
                }));
            }
        }
        while apf.waiting() < 45 {
            tokio::task::yield_now().await;
        }
        drop(seat);
        for t in tasks {
            t.await.expect("task");
        }
        let order = order.lock().expect("order").clone();
        // Bob's 5 are served among the first 12, not after alice's 40.
        let last_bob = order.iter().rposition(|u| *u == "bob").expect("bob served");
        assert!(last_bob < 12, "{order:?}");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn v1_20_brings_the_chosen_queue_up_to_the_virtual_clock() {
        // 1.20's selectQueueLocked: a queue chosen for dispatch whose virtual start (less
        // the work it has executing) is behind the virtual clock is moved up to it. Carol's
        // C1 waits 10 s behind bob's B1 (the clock runs at 1/2: 5 s), then runs 1 s while
        // B2 and C2 arrive. With the refresh carol's queue starts at 5 + 1, after bob's
        // (reset to 5 when B2 arrived): B2 goes first. Without it carol's queue keeps its
        // start of 0 + 1 and C2 goes first.
        let first = |user: &str| deal(hash_flow_id("global-default", user), 128, 6)[0];
        assert_ne!(first("bob"), first("carol"));
        let apf = tiny(ApfVersion::V1_20);
        let b1 = apf.admit("bob").await.expect("a free seat");
        let c1 = {
            let a = apf.clone();
            tokio::spawn(async move { a.admit("carol").await })
        };
        while apf.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
        drop(b1);
        let c1 = c1.await.expect("task").expect("C1 served");
        let (tx, mut served) = tokio::sync::mpsc::unbounded_channel();
        for (n, user) in [(1, "bob"), (2, "carol")] {
            let (a, tx) = (apf.clone(), tx.clone());
            tokio::spawn(async move {
                let seat = a.admit(user).await;
                let _ = tx.send((user, seat));
            });
            while apf.waiting() < n {
                tokio::task::yield_now().await;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(c1);
        let (user, seat) = served.recv().await.expect("one served");
        assert!(seat.is_ok());
        assert_eq!(user, "bob");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_request_waiting_past_the_limit_is_refused() {
        let apf = tiny(ApfVersion::V1_36);
        let _seat = apf.admit("alice").await.expect("seat");
        let r = apf.admit("alice").await;
        assert_eq!(r.unwrap_err(), Rejected::TimedOut);
        assert_eq!(apf.waiting(), 0);
        assert_eq!(apf.stats().rejected_timed_out, 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_caller_that_stops_waiting_leaves_its_queue() {
        let apf = tiny(ApfVersion::V1_20);
        let seat = apf.admit("alice").await.expect("seat");
        let a = apf.clone();
        let t = tokio::spawn(async move { a.admit("alice").await.is_ok() });
        while apf.waiting() < 1 {
            tokio::task::yield_now().await;
        }
        t.abort();
        let _ = t.await;
        assert_eq!(apf.waiting(), 0);
        drop(seat);
        assert_eq!(apf.seats_in_use(), 0);
        assert!(apf.admit("alice").await.is_ok());
    }
}
