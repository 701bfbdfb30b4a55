//! A blocking multi-producer, multi-reader queue on a [`WaitQueue`]: the
//! user-space shape of many threads blocked in `read()` on one file (seed
//! 000: userfaultfd handler threads reading fault messages).
//!
//! Readers block as *exclusive* waiters, so each [`send`](Channel::send)
//! wakes one reader ([`WakeMode::Exclusive`], the seed's "after"), or every
//! reader ([`WakeMode::WakeAll`], the "before"), chosen at construction so
//! the lab can compare the two. Pollers ([`Channel::wait_readable`], and
//! callbacks registered on [`Channel::wait_queue`]) are never exclusive:
//! every send wakes them all, as `poll_wait` does.
//!
//! # How every item reaches a reader
//! `send` pushes the item under the channel lock, drops it, then calls
//! `wake_up(1)`: one exclusive wakeup per item. A blocked reader's attempt
//! pops under the same lock and returns [`Attempt::Done`], so each attempt
//! consumes exactly the one unit a wakeup announced. A reader chosen by a
//! wake that then times out still attempts once (the wake wins), and one
//! that leaves without looking (only the test hook does) passes the wakeup
//! on: see [`wait_queue`](crate::wait_queue), "The consumption contract".
//!
//! `close` marks the channel closed under the lock, then wakes everybody.
//! Readers keep receiving until the queue is drained and only then see
//! [`RecvError::Closed`]; `send` after `close` fails and returns the item.
//! So every item sent before the close is delivered exactly once (items are
//! popped under the lock, and never dropped while a reader is left).
//!
//! Statistics (with the `stats` feature): items sent and received, and the
//! queue's wakeups, wasted wakeups (a woken reader or poller that found
//! nothing) and passed-on wakeups.

mod error;

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

pub use error::{RecvError, RecvTimeoutError, SendError, TryRecvError};

use crate::lock::SpinParkLock;
use crate::stats::Counter;
use crate::variants::WakeMode;
use crate::wait_queue::{Attempt, TimedOut, WaitQueue};

/// Event counts of a channel (all zero without the `stats` feature).
///
/// ```
/// let ch = herdless::Channel::new();
/// ch.send("job").unwrap();
/// assert_eq!(ch.try_recv(), Ok("job"));
/// let stats = ch.stats();
/// if herdless::stats::ENABLED {
///     assert_eq!((stats.sent, stats.received), (1, 1));
/// } else {
///     assert_eq!(stats, herdless::channel::ChannelStats::default());
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    /// Items accepted by `send`.
    pub sent: u64,
    /// Items handed to readers.
    pub received: u64,
    /// Readers and pollers woken (threads unparked, callbacks called).
    pub wakeups: u64,
    /// Woken readers or pollers that found nothing and slept again.
    pub wasted_wakeups: u64,
    /// Wakeups passed on by a chosen reader that left without reading.
    pub passed_on: u64,
}

struct State<T> {
    items: VecDeque<T>,
    closed: bool,
}

/// A blocking MPMC queue whose readers wait on a [`WaitQueue`].
///
/// ```
/// use std::sync::Arc;
/// use herdless::channel::{Channel, RecvError};
///
/// let ch = Arc::new(Channel::new());
/// let reader = {
///     let ch = ch.clone();
///     std::thread::spawn(move || {
///         let mut got = Vec::new();
///         while let Ok(x) = ch.recv() {
///             got.push(x);
///         }
///         got
///     })
/// };
/// ch.send(1).unwrap();
/// ch.send(2).unwrap();
/// ch.close();
/// assert_eq!(reader.join().unwrap(), [1, 2]);
/// assert_eq!(ch.recv(), Err(RecvError::Closed));
/// assert_eq!(ch.send(3).unwrap_err().into_inner(), 3);
/// ```
pub struct Channel<T> {
    state: SpinParkLock<State<T>>,
    queue: WaitQueue,
    sent: Counter,
    received: Counter,
}

impl<T> Default for Channel<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for Channel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (len, closed) = {
            let state = self.state.lock();
            (state.items.len(), state.closed)
        };
        f.debug_struct("Channel")
            .field("mode", &self.queue.mode())
            .field("len", &len)
            .field("closed", &closed)
            .finish_non_exhaustive()
    }
}

impl<T> Channel<T> {
    /// An open, empty channel whose sends wake one reader (see [`Channel`]
    /// for an example).
    pub fn new() -> Self {
        Self::with_mode(WakeMode::Exclusive)
    }

    /// An open, empty channel with the given wake mode: the lab's "before"
    /// ([`WakeMode::WakeAll`]) next to the default.
    ///
    /// ```
    /// use herdless::variants::WakeMode;
    /// use herdless::Channel;
    ///
    /// let herd: Channel<u32> = Channel::with_mode(WakeMode::WakeAll);
    /// assert_eq!(herd.mode(), WakeMode::WakeAll);
    /// assert_eq!(Channel::<u32>::new().mode(), WakeMode::Exclusive);
    /// ```
    pub fn with_mode(mode: WakeMode) -> Self {
        Channel {
            state: SpinParkLock::new(State {
                items: VecDeque::new(),
                closed: false,
            }),
            queue: WaitQueue::with_mode(mode),
            sent: Counter::new(),
            received: Counter::new(),
        }
    }

    /// The wake mode chosen at construction.
    pub fn mode(&self) -> WakeMode {
        self.queue.mode()
    }

    /// The queue readers and pollers wait on: a poller registers its
    /// callback here ([`WaitQueue::register`]), then checks
    /// [`is_readable`](Self::is_readable). An [`EventPoll`](crate::EventPoll)
    /// watches a channel this way (see [`Pollable`](crate::Pollable)).
    pub fn wait_queue(&self) -> &WaitQueue {
        &self.queue
    }

    /// Queues `item` and wakes one blocked reader (every reader in
    /// [`WakeMode::WakeAll`]) and every poller. Never blocks: the queue is
    /// unbounded.
    ///
    /// # Errors
    /// [`SendError`], holding `item`, once the channel is closed.
    ///
    /// # Examples
    /// ```
    /// let ch = herdless::Channel::new();
    /// ch.send(1).unwrap();
    /// ch.close();
    /// assert_eq!(ch.send(2).unwrap_err().into_inner(), 2);
    /// assert_eq!(ch.try_recv(), Ok(1)); // items sent before the close stay
    /// ```
    pub fn send(&self, item: T) -> Result<(), SendError<T>> {
        {
            let mut state = self.state.lock();
            if state.closed {
                return Err(SendError(item));
            }
            state.items.push_back(item);
        }
        // After the item is queued and the channel lock dropped: the
        // lost-wakeup argument (wait_queue module docs) needs the state
        // change before the wake, and the woken reader should not run into
        // a lock we still hold.
        self.queue.wake_up(1);
        self.sent.add(1);
        Ok(())
    }

    /// Takes the oldest item without blocking.
    ///
    /// # Errors
    /// [`TryRecvError::Empty`] when no item is queued,
    /// [`TryRecvError::Closed`] when the channel is closed and drained.
    ///
    /// # Examples
    /// ```
    /// use herdless::channel::{Channel, TryRecvError};
    ///
    /// let ch = Channel::new();
    /// assert_eq!(ch.try_recv(), Err(TryRecvError::Empty));
    /// ch.send('a').unwrap();
    /// ch.close();
    /// assert_eq!(ch.try_recv(), Ok('a'));
    /// assert_eq!(ch.try_recv(), Err(TryRecvError::Closed));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let taken = {
            let mut state = self.state.lock();
            match state.items.pop_front() {
                Some(item) => Ok(item),
                None if state.closed => Err(TryRecvError::Closed),
                None => Err(TryRecvError::Empty),
            }
        };
        if taken.is_ok() {
            self.received.add(1);
        }
        taken
    }

    /// One exclusive reader's attempt: take an item, or see the channel
    /// closed and drained (final for everybody: `Done`, nothing to pass on).
    fn attempt(&self) -> Attempt<Result<T, RecvError>> {
        match self.try_recv() {
            Ok(item) => Attempt::Done(Ok(item)),
            Err(TryRecvError::Closed) => Attempt::Done(Err(RecvError::Closed)),
            Err(TryRecvError::Empty) => Attempt::Wait,
        }
    }

    /// Blocks, as an exclusive waiter, until an item arrives (returns it)
    /// or the channel is closed and drained. Each item wakes one blocked
    /// reader; see [`Channel`] for an example with a reader thread.
    ///
    /// # Errors
    /// [`RecvError::Closed`] once the channel is closed and every item sent
    /// before the close has been received.
    pub fn recv(&self) -> Result<T, RecvError> {
        self.queue.wait_event_exclusive(|| self.attempt())
    }

    /// [`recv`](Self::recv) for at most `timeout` (`Duration::ZERO`: one
    /// try; `Duration::MAX`: forever). A reader that a send chose just as
    /// its timeout fired takes the item rather than report `Timeout`.
    ///
    /// # Errors
    /// [`RecvTimeoutError::Timeout`] when `timeout` passed with no item for
    /// this reader, [`RecvTimeoutError::Closed`] when the channel is closed
    /// and drained.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use herdless::channel::{Channel, RecvTimeoutError};
    ///
    /// let ch = Channel::new();
    /// let wait = Duration::from_millis(1);
    /// assert_eq!(ch.recv_timeout(wait), Err(RecvTimeoutError::Timeout));
    /// ch.send(7).unwrap();
    /// assert_eq!(ch.recv_timeout(Duration::ZERO), Ok(7));
    /// ```
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        match self
            .queue
            .wait_event_exclusive_timeout(|| self.attempt(), timeout)
        {
            Ok(result) => result.map_err(RecvTimeoutError::from),
            Err(TimedOut) => Err(RecvTimeoutError::Timeout),
        }
    }

    /// [`recv`](Self::recv) for a task: waits, as an exclusive waiter in
    /// the same FIFO queue as the threads blocked in `recv`, until an item
    /// arrives (returns it) or the channel is closed and drained.
    ///
    /// Each send wakes one reader, thread or task, oldest first. Dropping
    /// the future stops waiting: before a send chose it, it leaves the
    /// queue; after, the wakeup goes to the next reader, so the item is
    /// never stranded. `Send` when `T` is.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use herdless::Channel;
    ///
    /// let ch = Arc::new(Channel::new());
    /// let thread_reader = {
    ///     let ch = ch.clone();
    ///     std::thread::spawn(move || ch.recv())
    /// };
    /// let task = {
    ///     let ch = ch.clone();
    ///     async move { ch.recv_async().await }
    /// };
    /// ch.send(1).unwrap();
    /// ch.send(2).unwrap();
    /// let from_task = futures::executor::block_on(task).unwrap();
    /// let from_thread = thread_reader.join().unwrap().unwrap();
    /// assert_eq!(from_task + from_thread, 3);
    /// ```
    pub fn recv_async(&self) -> impl Future<Output = Result<T, RecvError>> + '_ {
        self.queue.wait_event_exclusive_async(|| self.attempt())
    }

    /// [`send`](Self::send) for a task. The channel is unbounded, so this
    /// never waits: it is `send`, as a future, for code that awaits both
    /// sides. Fails, returning the item, once the channel is closed.
    ///
    /// ```
    /// use herdless::Channel;
    ///
    /// let ch = Channel::new();
    /// futures::executor::block_on(async {
    ///     ch.send_async(5).await.unwrap();
    ///     assert_eq!(ch.recv_async().await, Ok(5));
    /// });
    /// ```
    pub async fn send_async(&self, item: T) -> Result<(), SendError<T>> {
        self.send(item)
    }

    /// Whether a [`try_recv`](Self::try_recv) would not return `Empty` now:
    /// an item is queued, or the channel is closed (`poll`'s `EPOLLIN`, with
    /// closed as `EPOLLHUP`).
    ///
    /// ```
    /// let ch = herdless::Channel::new();
    /// assert!(!ch.is_readable());
    /// ch.send(()).unwrap();
    /// assert!(ch.is_readable());
    /// ```
    pub fn is_readable(&self) -> bool {
        let state = self.state.lock();
        !state.items.is_empty() || state.closed
    }

    /// Waits, as a *non-exclusive* poller, until the channel is readable
    /// (see [`is_readable`](Self::is_readable)); takes nothing. Readiness is
    /// level-triggered and may be gone by the time the caller reads: another
    /// reader may take the item. Every send wakes every poller, so a poller
    /// that never reads cannot starve another one.
    ///
    /// # Errors
    /// [`TimedOut`] when `timeout` passed and the channel never became
    /// readable.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use herdless::Channel;
    ///
    /// let ch = Arc::new(Channel::new());
    /// let poller = {
    ///     let ch = ch.clone();
    ///     std::thread::spawn(move || {
    ///         ch.wait_readable(Duration::MAX).unwrap();
    ///         ch.try_recv().ok() // the item, unless another reader took it
    ///     })
    /// };
    /// ch.send(5).unwrap();
    /// assert_eq!(poller.join().unwrap(), Some(5));
    /// assert!(ch.wait_readable(Duration::ZERO).is_err()); // drained again
    /// ```
    pub fn wait_readable(&self, timeout: Duration) -> Result<(), TimedOut> {
        self.queue
            .wait_event_timeout(|| self.is_readable(), timeout)
    }

    /// Closes the channel: later sends fail, and readers get
    /// [`RecvError::Closed`] once the queued items are drained. Wakes every
    /// reader and poller. Returns `false` if it was already closed.
    ///
    /// ```
    /// let ch = herdless::Channel::<u8>::new();
    /// assert!(ch.close());
    /// assert!(!ch.close());
    /// assert!(ch.is_closed() && ch.is_readable());
    /// ```
    pub fn close(&self) -> bool {
        let was_closed = std::mem::replace(&mut self.state.lock().closed, true);
        if !was_closed {
            self.queue.wake_up_all();
        }
        !was_closed
    }

    /// Whether [`close`](Self::close) has been called.
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    /// Number of queued items (a snapshot).
    ///
    /// ```
    /// let ch = herdless::Channel::new();
    /// assert!(ch.is_empty());
    /// ch.send(1).unwrap();
    /// assert_eq!(ch.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.state.lock().items.len()
    }

    /// Whether no item is queued (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Event counts since construction (zeros without the `stats` feature;
    /// see [`ChannelStats`] for an example).
    pub fn stats(&self) -> ChannelStats {
        let queue = self.queue.stats();
        ChannelStats {
            sent: self.sent.sum(),
            received: self.received.sum(),
            wakeups: queue.wakeups,
            wasted_wakeups: queue.wasted_wakeups,
            passed_on: queue.passed_on,
        }
    }
}
