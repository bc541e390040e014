//! The intake's queue: the items pushed, in chunks of one batch each, behind one mutex;
//! the Recorder actor takes a whole chunk at a time.
//!
//! Purpose-built instead of tokio's mpsc channel, which the intake used before:
//! - a push is one uncontended lock and unlock (two atomic operations), against four to
//!   five atomic read-modify-writes in the channel (semaphore, tail, ready bits, receiver
//!   waker);
//! - the receiver takes a batch as the chunk it was pushed into (no copy of the items into
//!   a buffer of its own), holding the lock only to move the chunk out, so pushes rarely
//!   wait for it; a backlog grows by one chunk at a time, never by copying what it holds;
//! - the receiver is woken only when it found the queue empty and waits: while it works
//!   through a backlog, pushes wake nobody.
//!
//! `kevents bench emit`, interleaved A/B runs: docs/benchmarks.md.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

use tokio::sync::Notify;

/// Why an item could not be pushed; the item is handed back.
pub(crate) enum PushError<T> {
    /// A bounded queue holds its capacity.
    Full(T),
    /// The queue is closed: [`IntakeQueue::close`] was called.
    Closed(T),
}

/// A multi-producer, single-consumer queue, optionally bounded by a count of items.
pub(crate) struct IntakeQueue<T> {
    state: Mutex<State<T>>,
    /// At most this many items held (`None`: unbounded).
    capacity: Option<usize>,
    /// Items per chunk: the most one [`Receiver::recv`] returns.
    chunk: usize,
    /// Pushers waiting for room in a bounded queue; notified whenever a chunk is taken and
    /// when the queue closes.
    room: Notify,
}

struct State<T> {
    /// Full chunks, oldest first.
    full: VecDeque<Vec<T>>,
    /// The chunk pushes go into (no capacity yet after the receiver took it).
    open: Vec<T>,
    /// Items queued: what a bounded queue's capacity counts.
    held: usize,
    closed: bool,
    /// The receiver, registered when it found the queue empty (taken by the push that wakes
    /// it, so later pushes do not wake it again).
    receiver: Option<Waker>,
}

impl<T> IntakeQueue<T> {
    /// A queue that holds at most `capacity` items (`None`: unbounded) and hands them out
    /// in batches of at most `chunk` (at least 1), and its receiver.
    pub(crate) fn new(capacity: Option<usize>, chunk: usize) -> (Arc<Self>, Receiver<T>) {
        let queue = Arc::new(IntakeQueue {
            state: Mutex::new(State {
                full: VecDeque::new(),
                open: Vec::new(),
                held: 0,
                closed: false,
                receiver: None,
            }),
            capacity,
            chunk: chunk.max(1),
            room: Notify::new(),
        });
        let rx = Receiver {
            queue: Arc::clone(&queue),
        };
        (queue, rx)
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Nothing panics while the lock is held (a push that cannot allocate aborts), so a
        // poisoned lock still guards a consistent queue.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `item` unless the queue is closed or full; never waits.
    pub(crate) fn try_push(&self, item: T) -> Result<(), PushError<T>> {
        let waiting = {
            let mut st = self.lock();
            if st.closed {
                return Err(PushError::Closed(item));
            }
            if self.capacity.is_some_and(|c| st.held >= c) {
                return Err(PushError::Full(item));
            }
            if st.open.len() >= self.chunk {
                let next = Vec::with_capacity(self.chunk);
                let done = std::mem::replace(&mut st.open, next);
                st.full.push_back(done);
            } else if st.open.capacity() == 0 {
                st.open.reserve_exact(self.chunk);
            }
            st.open.push(item);
            st.held += 1;
            st.receiver.take()
        };
        // Woken outside the lock: the receiver's first act is to take it.
        if let Some(w) = waiting {
            w.wake();
        }
        Ok(())
    }

    /// Queues `item`, waiting for room in a bounded queue; hands it back if the queue is
    /// (or becomes) closed.
    pub(crate) async fn push(&self, mut item: T) -> Result<(), T> {
        loop {
            // Registered before the attempt, so room made between the two is not missed.
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            match self.try_push(item) {
                Ok(()) => return Ok(()),
                Err(PushError::Closed(i)) => return Err(i),
                Err(PushError::Full(i)) => item = i,
            }
            room.await;
        }
    }

    /// Refuses every later push; what is queued stays to be taken, after which
    /// [`Receiver::recv`] returns `None`.
    pub(crate) fn close(&self) {
        let waiting = {
            let mut st = self.lock();
            st.closed = true;
            st.receiver.take()
        };
        if let Some(w) = waiting {
            w.wake();
        }
        self.room.notify_waiters();
    }
}

/// The receiving end of an [`IntakeQueue`]. Dropping it closes the queue: nothing would
/// take what is pushed later, so pushes are refused instead of accepted and lost.
pub(crate) struct Receiver<T> {
    queue: Arc<IntakeQueue<T>>,
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.queue.close();
    }
}

impl<T> Receiver<T> {
    /// The oldest chunk of items (at most the queue's chunk size, in push order), waiting
    /// while there is none; `None` once the queue is closed and empty. Cancel-safe: nothing
    /// is taken unless the future completes.
    pub(crate) async fn recv(&mut self) -> Option<Vec<T>> {
        let queue = &*self.queue;
        let batch = poll_fn(|cx| {
            let mut st = queue.lock();
            let batch = match st.full.pop_front() {
                Some(chunk) => chunk,
                None if !st.open.is_empty() => std::mem::take(&mut st.open),
                None if st.closed => return Poll::Ready(None),
                None => {
                    match &mut st.receiver {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        slot => *slot = Some(cx.waker().clone()),
                    }
                    return Poll::Pending;
                }
            };
            st.held -= batch.len();
            Poll::Ready(Some(batch))
        })
        .await;
        if batch.is_some() && queue.capacity.is_some() {
            queue.room.notify_waiters();
        }
        batch
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.lock().held == 0
    }

    /// Closes the queue ([`IntakeQueue::close`]).
    pub(crate) fn close(&self) {
        self.queue.close();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn hands_out_chunks_in_push_order() {
        let (q, mut rx) = IntakeQueue::new(None, 4);
        for i in 0..10 {
            assert!(q.try_push(i).is_ok());
        }
        assert_eq!(rx.recv().await, Some(vec![0, 1, 2, 3]));
        assert_eq!(rx.recv().await, Some(vec![4, 5, 6, 7]));
        assert!(!rx.is_empty());
        // The open chunk, not yet full.
        assert_eq!(rx.recv().await, Some(vec![8, 9]));
        assert!(rx.is_empty());
        assert!(q.try_push(10).is_ok());
        assert_eq!(rx.recv().await, Some(vec![10]));
    }

    #[tokio::test]
    async fn a_bounded_queue_refuses_when_full_and_hands_the_item_back() {
        let (q, mut rx) = IntakeQueue::new(Some(2), 4);
        assert!(q.try_push(1).is_ok());
        assert!(q.try_push(2).is_ok());
        assert!(matches!(q.try_push(3), Err(PushError::Full(3))));
        assert_eq!(rx.recv().await, Some(vec![1, 2]));
        assert!(q.try_push(3).is_ok());
        assert!(q.try_push(4).is_ok());
        assert!(matches!(q.try_push(5), Err(PushError::Full(5))));
    }

    #[tokio::test]
    async fn closing_keeps_what_is_queued_and_refuses_the_rest() {
        let (q, mut rx) = IntakeQueue::new(None, 4);
        assert!(q.try_push(1).is_ok());
        rx.close();
        assert!(matches!(q.try_push(2), Err(PushError::Closed(2))));
        assert_eq!(q.push(3).await, Err(3));
        assert_eq!(rx.recv().await, Some(vec![1]));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn pushes_are_refused_once_the_receiver_is_gone() {
        let (q, rx) = IntakeQueue::new(None, 4);
        assert!(q.try_push(1).is_ok());
        drop(rx);
        assert!(matches!(q.try_push(2), Err(PushError::Closed(2))));
        assert_eq!(q.push(3).await, Err(3));
    }

    #[tokio::test]
    async fn a_waiting_receiver_is_woken_by_a_push_from_another_thread() {
        let (q, mut rx) = IntakeQueue::new(None, 4);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            assert!(q.try_push(7).is_ok());
        });
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("the push woke the receiver");
        assert_eq!(got, Some(vec![7]));
        t.join().expect("pusher");
    }

    #[tokio::test]
    async fn a_waiting_receiver_is_woken_by_close() {
        let (q, mut rx) = IntakeQueue::<u8>::new(None, 4);
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            q.close();
        });
        let got = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await;
        assert_eq!(got.expect("close woke the receiver"), None);
        t.join().expect("closer");
    }

    #[tokio::test]
    async fn a_waiting_pusher_gets_room_when_items_are_taken_or_its_item_back_on_close() {
        let (q, mut rx) = IntakeQueue::new(Some(1), 4);
        assert!(q.try_push(0).is_ok());
        let pusher = Arc::clone(&q);
        let waiting = tokio::spawn(async move { pusher.push(1).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "no room yet");
        assert_eq!(rx.recv().await, Some(vec![0]));
        let pushed = tokio::time::timeout(Duration::from_secs(10), waiting).await;
        assert_eq!(pushed.expect("woken").expect("task"), Ok(()));

        let pusher = Arc::clone(&q);
        let waiting = tokio::spawn(async move { pusher.push(2).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "no room yet");
        q.close();
        let refused = tokio::time::timeout(Duration::from_secs(10), waiting).await;
        assert_eq!(refused.expect("woken").expect("task"), Err(2));
    }

    #[test]
    fn every_item_pushed_by_many_threads_is_taken_once_in_each_pushers_order() {
        let (q, mut rx) = IntakeQueue::new(Some(64), 16);
        let producers: Vec<_> = (0..4u64)
            .map(|p| {
                let q = Arc::clone(&q);
                std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .expect("runtime");
                    rt.block_on(async {
                        for i in 0..10_000u64 {
                            assert!(q.push(p * 1_000_000 + i).await.is_ok());
                        }
                    });
                })
            })
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let mut got = Vec::new();
        rt.block_on(async {
            while got.len() < 40_000 {
                let batch = rx.recv().await.expect("open");
                assert!((1..=16).contains(&batch.len()));
                got.extend(batch);
            }
        });
        for p in producers {
            p.join().expect("producer");
        }
        for p in 0..4u64 {
            let mine: Vec<u64> = got.iter().copied().filter(|v| v / 1_000_000 == p).collect();
            assert_eq!(
                mine,
                (0..10_000).map(|i| p * 1_000_000 + i).collect::<Vec<_>>()
            );
        }
        assert!(rx.is_empty());
    }

    /// Against a model (a plain deque with the same bound): any sequence of pushes, takes
    /// and a close gives the same answers, takes return the oldest items in order and at
    /// most a chunk at a time, and `is_empty` agrees throughout.
    mod model {
        use std::collections::VecDeque;

        use proptest::prelude::*;

        use super::super::*;

        #[derive(Debug, Clone)]
        enum Op {
            Push,
            Take,
            Close,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![6 => Just(Op::Push), 3 => Just(Op::Take), 1 => Just(Op::Close)]
        }

        proptest! {
            #[test]
            fn the_queue_behaves_as_a_bounded_deque(
                capacity in proptest::option::of(1usize..12),
                chunk in 1usize..6,
                ops in proptest::collection::vec(op(), 0..200),
            ) {
                let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
                let (q, mut rx) = IntakeQueue::new(capacity, chunk);
                let mut model: VecDeque<u32> = VecDeque::new();
                let mut closed = false;
                let mut next = 0u32;
                for op in ops {
                    match op {
                        Op::Push => {
                            let got = q.try_push(next);
                            if closed {
                                prop_assert!(matches!(got, Err(PushError::Closed(v)) if v == next));
                            } else if capacity.is_some_and(|c| model.len() >= c) {
                                prop_assert!(matches!(got, Err(PushError::Full(v)) if v == next));
                            } else {
                                prop_assert!(got.is_ok());
                                model.push_back(next);
                            }
                            next += 1;
                        }
                        Op::Take => {
                            if model.is_empty() && !closed {
                                // Would wait: nothing to check but that it has nothing.
                                prop_assert!(rx.is_empty());
                                continue;
                            }
                            let batch = rt.block_on(rx.recv());
                            if model.is_empty() {
                                prop_assert_eq!(batch, None);
                            } else {
                                let batch = batch.expect("items");
                                prop_assert!(!batch.is_empty() && batch.len() <= chunk);
                                let expected: Vec<u32> = model.drain(..batch.len()).collect();
                                prop_assert_eq!(batch, expected);
                            }
                        }
                        Op::Close => {
                            q.close();
                            closed = true;
                        }
                    }
                    prop_assert_eq!(rx.is_empty(), model.is_empty());
                }
            }
        }
    }
}
