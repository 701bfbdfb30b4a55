//! The waiting side: `wait_event` and `wait_event_exclusive`, and the
//! pass-on of a wakeup a chosen waiter does not use.

use std::convert::Infallible;
use std::pin::{pin, Pin};
use std::ptr::NonNull;
use std::time::Duration;

use thiserror::Error;

use super::entry::{entry, Entry, Notify};
use super::queue::{WaitQueue, WakeMode};
use crate::deadline::Deadline;
use crate::parker::{self, Parker};
use crate::util::sleeper::Sleeper;
use crate::util::waiter::Slept;

/// What an exclusive waiter's attempt found; the closure passed to
/// [`WaitQueue::wait_event_exclusive`] returns it. See the module docs,
/// "The consumption contract".
///
/// # Examples
/// A consumer that takes a job (`Done`), or leaves when cancelled without
/// taking one (`PassOn`: a wakeup meant for a job goes to another
/// consumer):
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use herdless::{Attempt, Mutex, WaitQueue};
///
/// let (jobs, queue, cancelled) = (Mutex::new(vec![1]), WaitQueue::new(), AtomicBool::new(false));
/// let next = || {
///     queue.wait_event_exclusive(|| {
///         if cancelled.load(Ordering::Acquire) {
///             return Attempt::PassOn(None);
///         }
///         match jobs.lock().pop() {
///             Some(job) => Attempt::Done(Some(job)),
///             None => Attempt::Wait,
///         }
///     })
/// };
/// assert_eq!(next(), Some(1));
/// cancelled.store(true, Ordering::Release);
/// assert_eq!(next(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use]
pub enum Attempt<R> {
    /// Stop waiting and return `R`; the wakeup, if this waiter was chosen
    /// for one, is used up. Return it when the attempt consumed the event
    /// (took the item), or saw a state every waiter sees alike and that
    /// needs nobody woken (closed and drained).
    Done(R),
    /// Stop waiting and return `R` *without* consuming (cancelled, shutting
    /// down, not interested any more). If this waiter was chosen by a wake,
    /// the queue wakes the next exclusive waiter in its place.
    PassOn(R),
    /// Nothing to take yet: keep waiting.
    Wait,
}

/// A timed wait ended because its timeout elapsed before the condition held
/// (and, for an exclusive waiter, before a wake chose it).
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use herdless::{wait_queue::TimedOut, WaitQueue};
///
/// let queue = WaitQueue::new();
/// assert_eq!(queue.wait_event_timeout(|| false, Duration::from_millis(1)), Err(TimedOut));
/// assert_eq!(TimedOut.to_string(), "the wait timed out");
/// ```
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq, Hash)]
#[error("the wait timed out")]
pub struct TimedOut;

impl WaitQueue {
    /// Sleeps until `cond()` returns `true`, as a non-exclusive waiter
    /// (woken by every wake).
    ///
    /// `cond` is called before sleeping, after queueing, and after each
    /// wake; never concurrently with itself, and never under the queue lock.
    ///
    /// # Panics
    /// If `cond` panics: the panic propagates, after the waiter has left
    /// the queue.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use herdless::WaitQueue;
    ///
    /// let (queue, ready) = (WaitQueue::new(), AtomicBool::new(false));
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         ready.store(true, Ordering::Release); // the state first,
    ///         queue.wake_up_all(); // then the wake
    ///     });
    ///     queue.wait_event(|| ready.load(Ordering::Acquire));
    /// });
    /// assert!(queue.is_empty());
    /// ```
    pub fn wait_event(&self, mut cond: impl FnMut() -> bool) {
        let result = self.wait(false, || ready(cond()), None);
        debug_assert!(result.is_ok(), "an untimed wait cannot time out");
    }

    /// [`wait_event`](Self::wait_event) with a timeout.
    ///
    /// `Duration::ZERO` checks `cond` once and never sleeps;
    /// `Duration::MAX` (or any timeout too large for the clock) waits
    /// forever. If the timeout fires after a wake dequeued this waiter, the
    /// wake wins: `cond` is checked once more.
    ///
    /// # Errors
    /// [`TimedOut`] if `cond()` was still `false` when `timeout` had passed.
    ///
    /// # Panics
    /// If `cond` panics: the panic propagates, after the waiter has left
    /// the queue.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::time::Duration;
    /// use herdless::{wait_queue::TimedOut, WaitQueue};
    ///
    /// let (queue, ready) = (WaitQueue::new(), AtomicBool::new(false));
    /// let cond = || ready.load(Ordering::Acquire);
    /// assert_eq!(queue.wait_event_timeout(cond, Duration::from_millis(1)), Err(TimedOut));
    /// ready.store(true, Ordering::Release);
    /// assert_eq!(queue.wait_event_timeout(cond, Duration::ZERO), Ok(()));
    /// ```
    pub fn wait_event_timeout(
        &self,
        mut cond: impl FnMut() -> bool,
        timeout: Duration,
    ) -> Result<(), TimedOut> {
        self.wait(false, || ready(cond()), Some(timeout))
    }

    /// Sleeps as an exclusive waiter until `attempt()` returns
    /// [`Attempt::Done`] or [`Attempt::PassOn`], and returns its value.
    ///
    /// A wake chooses at most `nr_exclusive` exclusive waiters; a chosen
    /// waiter calls `attempt` again and, unless it returns `Done` or
    /// `Wait`, its wakeup is passed on to the next exclusive waiter (see
    /// the module docs). `attempt` should test *and consume* under the
    /// lock that guards the state, so that the two cannot be separated.
    /// It is never called under the queue lock. If it panics while this
    /// waiter holds a wakeup, the wakeup is passed on.
    ///
    /// # Panics
    /// If `attempt` panics: the panic propagates, after the waiter has left
    /// the queue and passed on a wakeup it held.
    ///
    /// # Examples
    /// Each posted job wakes one consumer, which takes it under the jobs'
    /// lock:
    /// ```
    /// use herdless::{Attempt, Mutex, WaitQueue};
    ///
    /// let (jobs, posted) = (Mutex::new(Vec::new()), WaitQueue::new());
    /// let sum = std::thread::scope(|s| {
    ///     let consumers: Vec<_> = (0..3)
    ///         .map(|_| {
    ///             s.spawn(|| {
    ///                 posted.wait_event_exclusive(|| match jobs.lock().pop() {
    ///                     Some(job) => Attempt::Done(job),
    ///                     None => Attempt::Wait,
    ///                 })
    ///             })
    ///         })
    ///         .collect();
    ///     for job in 1..=3 {
    ///         jobs.lock().push(job);
    ///         posted.wake_up(1); // one consumer per job
    ///     }
    ///     consumers.into_iter().map(|c| c.join().unwrap()).sum::<i32>()
    /// });
    /// assert_eq!(sum, 6);
    /// ```
    pub fn wait_event_exclusive<R>(&self, attempt: impl FnMut() -> Attempt<R>) -> R {
        match self.wait(true, attempt, None) {
            Ok(r) => r,
            Err(TimedOut) => unreachable!("an untimed wait cannot time out"),
        }
    }

    /// [`wait_event_exclusive`](Self::wait_event_exclusive) with a timeout
    /// (`Duration::ZERO`: one attempt, never queued; `Duration::MAX`:
    /// forever).
    ///
    /// A timeout that fires after a wake chose this waiter does not lose
    /// that wakeup: the wake wins and `attempt` is called once more
    /// (ARCHITECTURE contract 4); `Err(TimedOut)` is returned only if it still says
    /// [`Attempt::Wait`], i.e. the event was consumed by someone else.
    ///
    /// # Errors
    /// [`TimedOut`] if `attempt` still returned [`Attempt::Wait`] when
    /// `timeout` had passed.
    ///
    /// # Panics
    /// If `attempt` panics: the panic propagates, after the waiter has left
    /// the queue and passed on a wakeup it held.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use herdless::{wait_queue::TimedOut, Attempt, Mutex, WaitQueue};
    ///
    /// let (jobs, posted) = (Mutex::new(Vec::new()), WaitQueue::new());
    /// let take = || match jobs.lock().pop() {
    ///     Some(job) => Attempt::Done(job),
    ///     None => Attempt::Wait,
    /// };
    /// let wait = Duration::from_millis(1);
    /// assert_eq!(posted.wait_event_exclusive_timeout(take, wait), Err(TimedOut));
    /// jobs.lock().push(7);
    /// posted.wake_up(1);
    /// assert_eq!(posted.wait_event_exclusive_timeout(take, wait), Ok(7));
    /// ```
    pub fn wait_event_exclusive_timeout<R>(
        &self,
        attempt: impl FnMut() -> Attempt<R>,
        timeout: Duration,
    ) -> Result<R, TimedOut> {
        self.wait(true, attempt, Some(timeout))
    }

    fn wait<R>(
        &self,
        exclusive: bool,
        mut attempt: impl FnMut() -> Attempt<R>,
        timeout: Option<Duration>,
    ) -> Result<R, TimedOut> {
        // Most waits never sleep: look before queueing. Not queued, so not
        // chosen, so nothing to pass on whatever the attempt says.
        if let Some(r) = finished(attempt()) {
            return Ok(r);
        }
        // Recognised from the Duration itself: under loom every finite
        // deadline reads as passed, so `Deadline` cannot tell zero apart.
        if timeout == Some(Duration::ZERO) {
            return Err(TimedOut);
        }
        let deadline = Deadline::after(timeout);
        let exclusive = exclusive && self.mode() == WakeMode::Exclusive;
        parker::with_current(|parker| {
            let entry = pin!(entry(
                exclusive,
                Notify::Sleeper(Sleeper::Thread(parker.unparker())),
            ));
            let mut waiter = Waiter {
                queue: self,
                entry: entry.as_ref(),
                queued: false,
                chosen: false,
            };
            waiter.run(parker, deadline, attempt)
        })
    }
}

fn ready(cond: bool) -> Attempt<()> {
    if cond {
        Attempt::Done(())
    } else {
        Attempt::Wait
    }
}

fn finished<R>(attempt: Attempt<R>) -> Option<R> {
    match attempt {
        Attempt::Done(r) | Attempt::PassOn(r) => Some(r),
        Attempt::Wait => None,
    }
}

/// One thread's wait in progress. Dropping it (on return or unwind) leaves
/// the queue and passes on a wakeup it still holds: that single `Drop` is
/// the only place a wakeup is passed on.
struct Waiter<'a> {
    queue: &'a WaitQueue,
    entry: Pin<&'a Entry>,
    /// The entry may be in the queue: we queued it and have not seen it
    /// leave (by our `remove` or by observing its grant).
    queued: bool,
    /// A wake chose this (exclusive) waiter and no attempt made after the
    /// choice has told whether the event is still there: we hold a wakeup
    /// that must be used or passed on.
    chosen: bool,
}

impl Waiter<'_> {
    fn run<R>(
        &mut self,
        parker: &Parker,
        deadline: Deadline,
        mut attempt: impl FnMut() -> Attempt<R>,
    ) -> Result<R, TimedOut> {
        loop {
            // (1) Queue, then (2) look again: the lost-wakeup rule. A waker
            // that changed the state before we queued is seen by this look;
            // one that changes it after finds us queued.
            self.enqueue();
            if let Some(r) = finished(attempt()) {
                // If a wake chose us meanwhile, this attempt may have run
                // before the event that wake announced (it may have taken an
                // older one): pass the wakeup on, whatever the attempt said.
                self.leave();
                return Ok(r);
            }

            // (3) Sleep until a wake dequeues us or the deadline passes.
            let mut timed_out = false;
            match self.entry.sleep(parker, deadline, || None::<Infallible>) {
                Slept::Granted(_) => {}
                Slept::Stopped(never) => match never {},
                Slept::DeadlinePassed => {
                    if !self.leave() {
                        // Removed ourselves before any wake chose us: no
                        // wakeup is ours. One last look, as the kernel's
                        // `wait_event_timeout` does.
                        return finished(attempt()).ok_or(TimedOut);
                    }
                    // A wake dequeued us first: the wake wins (contract 4).
                    timed_out = true;
                }
            }

            // (4) Woken: the waker dequeued the entry. An exclusive waiter
            // now holds the wakeup until an attempt made after the choice
            // has run (the Acquire in `sleep`'s grant check makes the event visible to
            // it).
            self.queued = false;
            self.chosen = self.entry.exclusive();
            if self.chosen && !deadline.is_never() && self.queue.take_give_up_hook() {
                // Test hook: leave without looking; `drop` passes it on.
                return Err(TimedOut);
            }
            match attempt() {
                Attempt::Done(r) => {
                    self.chosen = false;
                    return Ok(r);
                }
                // `drop` passes the wakeup on.
                Attempt::PassOn(r) => return Ok(r),
                Attempt::Wait => {
                    // Someone else consumed the event: nothing to pass on.
                    self.chosen = false;
                    self.queue.counters.wasted.add(1);
                    if timed_out {
                        return Err(TimedOut);
                    }
                }
            }
        }
    }

    fn enqueue(&mut self) {
        // SAFETY: the entry is pinned on the waiting thread's stack in
        // `WaitQueue::wait`, which outlives this `Waiter`; it is in no list
        // (first queueing, or a wake dequeued it: we saw its grant). It stays
        // live until removed: `Drop` below removes it if it may still be
        // queued, and a waker's last touch is the grant's store.
        unsafe { self.queue.enqueue(NonNull::from(&*self.entry)) };
        self.queued = true;
    }

    /// Takes the entry off the queue; returns whether a wake had already
    /// dequeued it, and if so records the wakeup as held (exclusive only).
    fn leave(&mut self) -> bool {
        debug_assert!(self.queued);
        // SAFETY: queued by `enqueue` and not removed since (`queued`).
        let woken = unsafe { self.queue.remove(&self.entry) };
        self.queued = false;
        self.chosen = woken && self.entry.exclusive();
        woken
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        if self.queued {
            self.leave();
        }
        if self.chosen {
            self.queue.pass_on();
        }
    }
}
