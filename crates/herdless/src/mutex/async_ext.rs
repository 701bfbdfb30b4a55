//! [`MutexAsyncExt`]: `lock_async` on [`Mutex`], the future that returns
//! the same `lock_api` guard as `lock`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::lock_async::RawLock;
use super::{Mutex, MutexGuard};

/// Locking a [`Mutex`] from a task, in the same FIFO queue as the
/// threads: `use herdless::*;` (or `use herdless::MutexAsyncExt;`) brings
/// [`lock_async`](Self::lock_async) onto every `Mutex`.
///
/// - **One queue.** A task waits in the futex table's list for the mutex
///   word beside the threads, is woken by the same unlocks (one wake per
///   hand-off), and may wait for a lock a thread holds, or the reverse.
/// - **No spinning in `poll`.** The first poll is the threads' fast path
///   (one `fetch_or`); if the lock is held, the task queues. A woken task
///   tries once at its next poll and, if a running thread or task took
///   the lock first, goes back to the head of the queue, to be woken by
///   that holder's unlock.
/// - **Guards held across `.await`.** The future returns the blocking
///   call's [`MutexGuard`], which is `Send`: the lock belongs to no thread
///   (any thread may unlock it), so a guard may be held across an
///   `.await` in a task that moves between worker threads, and the future
///   is `Send` when `T: Send`. For a task spawned with `'static` bounds,
///   share the mutex in an `Arc` and move a clone into the task. (clippy's
///   `await_holding_lock` lint flags every `lock_api` guard held across an
///   `.await`, these included: allow it where you do so.)
/// - **Cancellation.** Dropping the future before it was woken leaves the
///   queue in O(1). Dropping it after an unlock woke it passes the wake on
///   to the next sleeper; after an unlock handed it the lock (a fair
///   unlock, or eventual fairness), releases the lock. Polling with a
///   different waker replaces the stored one.
/// - **A future polled once and then set aside** (neither polled nor
///   dropped) holds its place in the queue. Woken, it holds back the
///   sleepers queued behind it (not the lock: running threads and tasks
///   still take it) until it is polled or dropped; handed the lock, it
///   holds the lock until then: exactly what FIFO hand-off puts behind a
///   waiter, and no more (async-lock #91's case).
/// - **In a task, lock with `lock_async`.** The blocking `lock` would
///   block the worker thread (and every task on it) while it waits, as
///   std's does; `try_lock` never waits and is fine anywhere.
/// - **The async condition wait** is
///   [`WaitQueue::wait_unlocked_async`](crate::WaitQueue::wait_unlocked_async)
///   with the guard: it queues the task, then drops the guard, and
///   completes when a wake chooses it (see the example there; the
///   notifier changes the state under the mutex, then wakes). The
///   [`Condvar`](crate::Condvar) is for threads.
///
/// A thread and a task on one lock:
/// ```
/// use std::sync::Arc;
/// use herdless::*;
///
/// let jobs = Arc::new(Mutex::new(Vec::new()));
/// let held = jobs.lock(); // a thread holds it
/// let task = {
///     let jobs = jobs.clone();
///     async move {
///         let mut guard = jobs.lock_async().await; // queued behind the thread
///         guard.push("task");
///         guard.len() // the guard lives across this point
///     }
/// };
/// let runner = std::thread::spawn(move || futures::executor::block_on(task));
/// while jobs.waiters() == 0 {
///     std::thread::yield_now(); // until the task waits
/// }
/// drop(held); // the unlock wakes the task
/// assert_eq!(runner.join().unwrap(), 1);
/// assert_eq!(*jobs.lock(), ["task"]);
/// ```
pub trait MutexAsyncExt<T: ?Sized> {
    /// Locks the mutex, as a task: the async form of `lock`.
    ///
    /// ```
    /// use herdless::*;
    ///
    /// let m = Mutex::new(0);
    /// futures::executor::block_on(async {
    ///     *m.lock_async().await += 1;
    /// });
    /// assert_eq!(*m.lock(), 1);
    /// ```
    fn lock_async(&self) -> MutexLockFuture<'_, T>;
}

impl<T: ?Sized> MutexAsyncExt<T> for Mutex<T> {
    #[inline]
    fn lock_async(&self) -> MutexLockFuture<'_, T> {
        // SAFETY: `raw` is unsafe because the raw lock could be unlocked
        // behind the guards' back; the future only acquires through it and
        // makes a guard for exactly the hold it acquired.
        let raw = unsafe { self.raw() };
        MutexLockFuture {
            mutex: self,
            lock: raw.lock_async(),
        }
    }
}

/// The future of [`MutexAsyncExt::lock_async`]: a [`MutexGuard`] once the
/// lock is held. Dropping it leaves the queue, or passes on the wake or
/// the lock an unlock gave it.
///
/// ```
/// use std::future::Future;
/// use herdless::{Mutex, MutexAsyncExt};
///
/// let m = Mutex::new(0);
/// let held = m.lock();
/// let mut waiting = Box::pin(m.lock_async());
/// // Polled once, it queues behind the holder; dropped, it leaves the queue.
/// let waker = futures::task::noop_waker();
/// let mut cx = std::task::Context::from_waker(&waker);
/// assert!(waiting.as_mut().poll(&mut cx).is_pending());
/// drop(waiting);
/// drop(held);
/// assert!(m.try_lock().is_some());
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct MutexLockFuture<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    lock: RawLock<'a>,
}

impl<'a, T: ?Sized> Future for MutexLockFuture<'a, T> {
    type Output = MutexGuard<'a, T>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<MutexGuard<'a, T>> {
        // SAFETY: `lock` is structurally pinned: never moved out of the
        // future, dropped in place.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let lock = unsafe { Pin::new_unchecked(&mut this.lock) };
        match lock.poll(cx) {
            // SAFETY: the lock is now held by this future, which will not
            // release it (its `Drop` releases only a hold it never
            // returned).
            Poll::Ready(()) => {
                Poll::Ready(unsafe { this.mutex.make_guard_unchecked(lock_api::GuardSend::new()) })
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: ?Sized> std::fmt::Debug for MutexLockFuture<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutexLockFuture")
            .field("lock", &self.lock)
            .finish_non_exhaustive()
    }
}
