//! The waiting side for tasks: [`WaitQueue::wait_event_async`] and
//! [`WaitQueue::wait_event_exclusive_async`], futures whose entry waits in
//! the same lists as the threads' entries, granted by the same wakes.
//!
//! A future's entry is the threads' record with a waker slot instead of an
//! `Unparker` (`util::sleeper`), pinned inside the future. The protocol is
//! the threads' one (`wait.rs`), with `poll` for the sleep and `Drop` for
//! every early exit:
//! - **First poll**: attempt; if that finishes, done without queueing.
//!   Otherwise store the waker, queue, attempt again (the lost-wakeup rule:
//!   a waker that changed the state before we queued is seen by this look),
//!   and return `Pending`.
//! - **Later polls**: not granted yet: if the stored waker is this task's,
//!   `Pending` without a lock; else store the new one under the queue lock
//!   (where a grant is final). Granted (a wake dequeued the entry): attempt;
//!   `Wait` queues again as above.
//! - **Cancellation** (the future dropped): a queued entry is removed in
//!   O(1) under the queue lock; an exclusive entry that a wake chose (it
//!   was dequeued and granted, whether or not the future was polled since)
//!   passes its wakeup on to the next exclusive waiter (ARCHITECTURE
//!   contract 6). A chosen future that is neither polled nor dropped holds
//!   its wakeup, as a chosen thread that has not run yet does: it holds up
//!   the one event it was chosen for, and nothing else (other wakes choose
//!   other waiters).

use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

use super::entry::{entry, Entry, Notify};
use super::queue::{WaitQueue, WakeMode};
use super::wait::Attempt;
use crate::util::sleeper::Sleeper;

impl WaitQueue {
    /// Waits, as a task, until `cond()` returns `true`, as a
    /// *non-exclusive* waiter (woken by every wake): the async form of
    /// [`wait_event`](Self::wait_event), in the same queue as the threads.
    ///
    /// `cond` is called on each poll that could find it true (first poll,
    /// after queueing, after each wake), never under the queue lock.
    /// Dropping the future leaves the queue.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use herdless::WaitQueue;
    ///
    /// let queue = WaitQueue::new();
    /// let ready = AtomicBool::new(false);
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         ready.store(true, Ordering::Release); // the state first,
    ///         queue.wake_up_all(); // then the wake
    ///     });
    ///     futures::executor::block_on(queue.wait_event_async(|| ready.load(Ordering::Acquire)));
    /// });
    /// assert!(queue.is_empty());
    /// ```
    pub fn wait_event_async<F: FnMut() -> bool>(&self, cond: F) -> WaitEvent<'_, F> {
        WaitEvent {
            waiting: Waiting::new(self, false),
            cond,
        }
    }

    /// Waits, as a task, as an *exclusive* waiter until `attempt()` returns
    /// [`Attempt::Done`] or [`Attempt::PassOn`], and returns its value: the
    /// async form of [`wait_event_exclusive`](Self::wait_event_exclusive),
    /// with the same consumption contract (module docs). Threads and tasks
    /// wait in one FIFO list; a wake chooses the oldest, thread or task.
    ///
    /// A chosen future that is dropped before it attempted again (a
    /// timeout, `select!`) passes its wakeup on to the next exclusive
    /// waiter, as a chosen thread whose timeout fires does. One that is
    /// neither polled nor dropped keeps it: it holds up the one event it
    /// was chosen for, and nothing else.
    ///
    /// # Examples
    /// ```
    /// use herdless::{Attempt, Mutex, WaitQueue};
    ///
    /// let jobs = Mutex::new(Vec::new());
    /// let queue = WaitQueue::new();
    /// let take = || {
    ///     queue.wait_event_exclusive_async(|| match jobs.lock().pop() {
    ///         Some(job) => Attempt::Done(job),
    ///         None => Attempt::Wait,
    ///     })
    /// };
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         jobs.lock().push(7);
    ///         queue.wake_up(1);
    ///     });
    ///     assert_eq!(futures::executor::block_on(take()), 7);
    /// });
    /// ```
    pub fn wait_event_exclusive_async<R, F: FnMut() -> Attempt<R>>(
        &self,
        attempt: F,
    ) -> WaitEventExclusive<'_, F> {
        WaitEventExclusive {
            waiting: Waiting::new(self, self.mode() == WakeMode::Exclusive),
            attempt,
        }
    }
}

impl WaitQueue {
    /// The async condition wait: queues this task as an exclusive waiter,
    /// *then* drops `release` (a lock guard: the kernel's `prepare_to_wait`,
    /// unlock, `schedule`), and completes when a wake chooses it. A waker
    /// that changes the state under that lock and then calls
    /// [`wake_up`](Self::wake_up)`(1)` (notify one) or
    /// [`wake_up_all`](Self::wake_up_all) (notify all) cannot slip between
    /// the unlock and the wait. No spurious completions: only a wake ends
    /// it. Threads wait on the same queue with
    /// [`wait_event_exclusive`](Self::wait_event_exclusive).
    ///
    /// Re-take the lock after it completes and check the condition again
    /// (another waiter may have changed it first). Dropping the future
    /// after a wake chose it passes the wakeup on (as with any exclusive
    /// waiter); dropping it before its first poll drops `release` too.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use herdless::*;
    ///
    /// struct Shared { jobs: Mutex<Vec<u32>>, posted: WaitQueue }
    /// let shared = Arc::new(Shared { jobs: Mutex::new(Vec::new()), posted: WaitQueue::new() });
    /// let consumer = {
    ///     let shared = shared.clone();
    ///     async move {
    ///         let mut jobs = shared.jobs.lock_async().await;
    ///         while jobs.is_empty() {
    ///             shared.posted.wait_unlocked_async(jobs).await; // unlock, wait
    ///             jobs = shared.jobs.lock_async().await; // relock, look again
    ///         }
    ///         jobs.pop().unwrap()
    ///     }
    /// };
    /// let consumer = std::thread::spawn(move || futures::executor::block_on(consumer));
    /// shared.jobs.lock().push(42); // change the state under the lock,
    /// shared.posted.wake_up(1); // then notify one
    /// assert_eq!(consumer.join().unwrap(), 42);
    /// ```
    pub fn wait_unlocked_async<G>(&self, release: G) -> WaitUnlocked<'_, G> {
        WaitUnlocked {
            waiting: Waiting::new(self, self.mode() == WakeMode::Exclusive),
            release: Some(release),
            looks: 0,
        }
    }
}

/// The future of [`WaitQueue::wait_unlocked_async`].
///
/// `Send` when the guard is.
///
/// # Panics
/// If polled again after it returned `Ready`.
///
/// # Examples
/// The guard is dropped once the future has queued, not before:
/// ```
/// use std::future::Future;
/// use std::task::{Context, Waker};
/// use herdless::{Mutex, WaitQueue};
///
/// let (state, queue) = (Mutex::new(0), WaitQueue::new());
/// let mut wait = Box::pin(queue.wait_unlocked_async(state.lock()));
/// assert!(state.is_locked(), "not polled yet: the guard is held");
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(wait.as_mut().poll(&mut cx).is_pending());
/// assert!(!state.is_locked() && queue.len() == 1, "queued, then unlocked");
/// *state.lock() = 1; // the state changes under the lock,
/// assert_eq!(queue.wake_up(1), 1); // then the wake chooses the future
/// assert!(wait.as_mut().poll(&mut cx).is_ready());
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct WaitUnlocked<'a, G> {
    waiting: Waiting<'a>,
    release: Option<G>,
    /// How many times `Waiting` looked (called the attempt): the first look
    /// is before queueing, the second right after it, later ones after a
    /// wake chose us.
    looks: u32,
}

impl<G> Future for WaitUnlocked<'_, G> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: as in `WaitEvent::poll` (`release` and `looks` are not
        // structurally pinned).
        let this = unsafe { self.get_unchecked_mut() };
        let (release, looks) = (&mut this.release, &mut this.looks);
        // SAFETY: as above.
        let waiting = unsafe { Pin::new_unchecked(&mut this.waiting) };
        // `Waiting` looks before queueing (we wait anyway), right after
        // queueing (now nobody can wake the queue without choosing or
        // waking us: drop the guard), and after a wake chose us (done).
        waiting.poll_attempt(cx, || {
            *looks += 1;
            match *looks {
                1 => Attempt::Wait,
                2 => {
                    drop(release.take());
                    Attempt::Wait
                }
                _ => Attempt::Done(()),
            }
        })
    }
}

impl<G> std::fmt::Debug for WaitUnlocked<'_, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitUnlocked")
            .field("queued", &self.waiting.queued)
            .field("released", &self.release.is_none())
            .finish_non_exhaustive()
    }
}

/// The future of [`WaitQueue::wait_event_async`].
///
/// Dropping it leaves the queue. `Send` when the condition is.
///
/// # Panics
/// If polled again after it returned `Ready`; if the condition panics (the
/// panic propagates).
///
/// # Examples
/// ```
/// use std::future::Future;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::task::{Context, Waker};
/// use herdless::WaitQueue;
///
/// let (queue, ready) = (WaitQueue::new(), AtomicBool::new(false));
/// let mut wait = Box::pin(queue.wait_event_async(|| ready.load(Ordering::Acquire)));
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(wait.as_mut().poll(&mut cx).is_pending());
/// assert_eq!(queue.len(), 1);
/// drop(wait); // leaves the queue
/// assert!(queue.is_empty());
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct WaitEvent<'a, F> {
    waiting: Waiting<'a>,
    cond: F,
}

/// The future of [`WaitQueue::wait_event_exclusive_async`].
///
/// Dropping it leaves the queue, passing on a wakeup it was chosen for and
/// did not use. `Send` when the closure is.
///
/// # Panics
/// If polled again after it returned `Ready`; if the attempt panics (the
/// panic propagates, and a wakeup the future held is passed on).
///
/// # Examples
/// A future chosen by a wake and dropped before it looked passes the
/// wakeup on to the next exclusive waiter:
/// ```
/// use std::future::Future;
/// use std::task::{Context, Waker};
/// use herdless::{Attempt, Mutex, WaitQueue};
///
/// let (jobs, queue) = (Mutex::new(Vec::new()), WaitQueue::new());
/// let take = || match jobs.lock().pop() {
///     Some(job) => Attempt::Done(job),
///     None => Attempt::Wait,
/// };
/// let mut cx = Context::from_waker(Waker::noop());
/// let mut first = Box::pin(queue.wait_event_exclusive_async(take));
/// let mut second = Box::pin(queue.wait_event_exclusive_async(take));
/// assert!(first.as_mut().poll(&mut cx).is_pending());
/// assert!(second.as_mut().poll(&mut cx).is_pending());
/// jobs.lock().push(7);
/// assert_eq!(queue.wake_up(1), 1); // chooses the oldest: `first`
/// drop(first); // cancelled: the wakeup goes to `second`
/// assert!(queue.is_empty(), "the pass-on dequeued `second` too");
/// assert_eq!(second.as_mut().poll(&mut cx), std::task::Poll::Ready(7));
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct WaitEventExclusive<'a, F> {
    waiting: Waiting<'a>,
    attempt: F,
}

impl<F: FnMut() -> bool> Future for WaitEvent<'_, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: `waiting` is structurally pinned (never moved out of
        // `self`, dropped in place); `cond` is not (only called by `&mut`).
        let this = unsafe { self.get_unchecked_mut() };
        let cond = &mut this.cond;
        // SAFETY: as above.
        let waiting = unsafe { Pin::new_unchecked(&mut this.waiting) };
        waiting.poll_attempt(cx, || {
            if cond() {
                Attempt::Done(())
            } else {
                Attempt::Wait
            }
        })
    }
}

impl<R, F: FnMut() -> Attempt<R>> Future for WaitEventExclusive<'_, F> {
    type Output = R;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<R> {
        // SAFETY: as in `WaitEvent::poll`.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let waiting = unsafe { Pin::new_unchecked(&mut this.waiting) };
        waiting.poll_attempt(cx, &mut this.attempt)
    }
}

impl<F> std::fmt::Debug for WaitEvent<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitEvent")
            .field("queued", &self.waiting.queued)
            .finish_non_exhaustive()
    }
}

impl<F> std::fmt::Debug for WaitEventExclusive<'_, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitEventExclusive")
            .field("queued", &self.waiting.queued)
            .field("chosen", &self.waiting.chosen)
            .finish_non_exhaustive()
    }
}

/// One task's wait in progress: the entry pinned in the future, and what
/// the future knows about it. Dropping it leaves the queue and passes on a
/// wakeup it still holds (the only place a task's wakeup is passed on).
struct Waiting<'a> {
    queue: &'a WaitQueue,
    /// Whether the entry waits exclusively.
    exclusive: bool,
    /// The entry, built the first time the future queues (a wait whose
    /// first look succeeds never builds one). Pinned: never moved out of
    /// the future, dropped in place.
    entry: Option<Entry>,
    /// The first attempt (before queueing) has been made.
    started: bool,
    /// The entry may be in the queue: we queued it and have not seen it
    /// leave (by our `remove` or by observing its grant).
    queued: bool,
    /// A wake chose this exclusive entry and no attempt made after the
    /// choice has run: the wakeup must be used or passed on.
    chosen: bool,
    /// The future returned `Ready`.
    finished: bool,
}

impl<'a> Waiting<'a> {
    fn new(queue: &'a WaitQueue, exclusive: bool) -> Self {
        Waiting {
            queue,
            exclusive,
            entry: None,
            started: false,
            queued: false,
            chosen: false,
            finished: false,
        }
    }

    /// The entry of a future that queued.
    fn entry(&self) -> &Entry {
        self.entry.as_ref().expect("a queued future has its entry")
    }

    fn poll_attempt<R>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut attempt: impl FnMut() -> Attempt<R>,
    ) -> Poll<R> {
        // SAFETY: the entry is never moved out of `self` (we only take
        // shared references to it, and `Drop` runs in place).
        let this = unsafe { self.get_unchecked_mut() };
        assert!(
            !this.finished,
            "a wait_event future polled after it completed"
        );
        if this.queued {
            if !this.entry().is_granted() && this.still_queued_with(cx) {
                return Poll::Pending;
            }
            // A wake dequeued and granted the entry (the Acquire in
            // `is_granted` makes the event visible to the attempt below).
            this.queued = false;
            this.chosen = this.entry().exclusive();
            match attempt() {
                Attempt::Done(r) => {
                    this.chosen = false;
                    return this.ready(r);
                }
                Attempt::PassOn(r) => {
                    this.pass_on_if_chosen();
                    return this.ready(r);
                }
                Attempt::Wait => {
                    // Someone else consumed the event: nothing to pass on.
                    this.chosen = false;
                    this.queue.counters.wasted.add(1);
                }
            }
        } else if !this.started {
            // Most waits never queue: look first. Not queued, so not
            // chosen, so nothing to pass on whatever the attempt says.
            this.started = true;
            if let Some(r) = finished(attempt()) {
                return this.ready(r);
            }
        }
        // Queue with this task's waker, then look again (the lost-wakeup
        // rule, as for threads: `wait.rs`).
        let exclusive = this.exclusive;
        // Built in place on the first queueing (the future is pinned);
        // later ones reuse it.
        let entry = this
            .entry
            .get_or_insert_with(|| entry(exclusive, Notify::Sleeper(Sleeper::task())));
        let slot = entry.task_slot().expect("a task's entry");
        // SAFETY: we own the entry and it is in no list (never queued, or
        // a wake dequeued it: we saw its grant), so nobody reads the slot.
        unsafe { slot.set(cx.waker()) };
        // SAFETY: the entry is pinned in this future and in no list; it
        // stays live until removed: `Drop` removes it if it may still be
        // queued, and a waker's last touch is the grant's store.
        unsafe { this.queue.enqueue(NonNull::from(&*entry)) };
        this.queued = true;
        if let Some(r) = finished(attempt()) {
            // If a wake chose us meanwhile, this attempt may have run
            // before the event it announced: pass the wakeup on.
            this.leave();
            this.pass_on_if_chosen();
            return this.ready(r);
        }
        Poll::Pending
    }

    /// The entry is queued and was not granted when we looked: make sure
    /// the stored waker is this task's. Returns `false` if a grant got
    /// there first (seen under the queue lock, where it is final).
    fn still_queued_with(&mut self, cx: &mut Context<'_>) -> bool {
        let slot = self.entry().task_slot().expect("a task's entry");
        if slot.will_wake(cx.waker()) {
            // A grant after our look wakes this very waker.
            return true;
        }
        // SAFETY: queued on this queue by us and not seen leaving.
        unsafe { self.queue.set_task_waker(self.entry(), cx.waker()) }
    }

    fn ready<R>(&mut self, r: R) -> Poll<R> {
        self.finished = true;
        Poll::Ready(r)
    }

    /// Takes the entry off the queue; if a wake had already dequeued it,
    /// an exclusive entry holds the wakeup (`chosen`).
    fn leave(&mut self) {
        debug_assert!(self.queued);
        // SAFETY: queued by `poll_attempt` and not removed since (`queued`).
        let woken = unsafe { self.queue.remove(self.entry()) };
        self.queued = false;
        self.chosen = woken && self.exclusive;
    }

    fn pass_on_if_chosen(&mut self) {
        if std::mem::take(&mut self.chosen) {
            self.queue.pass_on();
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.queued {
            if self.entry().is_granted() {
                // Dequeued by a wake: no lock needed to know it left.
                self.queued = false;
                self.chosen = self.exclusive;
            } else {
                self.leave();
            }
        }
        self.pass_on_if_chosen();
    }
}

fn finished<R>(attempt: Attempt<R>) -> Option<R> {
    match attempt {
        Attempt::Done(r) | Attempt::PassOn(r) => Some(r),
        Attempt::Wait => None,
    }
}
