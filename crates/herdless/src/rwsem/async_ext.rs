//! [`RwSemAsyncExt`]: `read_async`, `write_async` and
//! `upgradable_read_async` on [`RwSem`], the futures that return the same
//! `lock_api` guards as the blocking calls.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::acquire_async::RawAcquire;
use super::upgrade_async::RawUpgrade;
use super::{RwSem, RwSemReadGuard, RwSemUpgradableReadGuard, RwSemWriteGuard};

/// Waiting for an [`RwSem`] from a task, in the same FIFO queue as the
/// threads: `use herdless::*;` (or `use herdless::RwSemAsyncExt;`) brings
/// these methods onto every `RwSem`.
///
/// - **One queue.** A task waits in the semaphore's wait list as a thread
///   does, is granted by the same releases (a reader batch, one writer),
///   and may wait for a hold a thread has, or the reverse.
/// - **No spinning in `poll`.** A poll tries the lock once, then queues;
///   later polls look at the grant (and a queued writer, woken without a
///   grant, tries once, as a thread does after its nudge).
/// - **Guards held across `.await`.** The futures return the blocking
///   calls' guards, borrowed from the semaphore and `Send` (the holds
///   belong to no thread: `lock_api::GuardSend`), so a guard may be held
///   across an `.await`, and the future is `Send` when `T: Send + Sync`.
///   For a task spawned with `'static` bounds, share the semaphore in an
///   `Arc` and move a clone into the task (see the example).
///   (clippy's `await_holding_lock` lint flags every `lock_api` guard held
///   across an `.await`, these included: allow it where you do so.)
/// - **Cancellation.** Dropping a future before it was granted leaves the
///   queue in O(1) (and lets whoever it held back proceed); dropping it
///   after a grant gives the hold back with the fair unlock, which hands
///   it to the next waiter. Polling with a different waker replaces the
///   stored one.
/// - **A future polled once and then set aside** (neither polled nor
///   dropped) holds its place in the queue and, once granted, the lock,
///   as a blocked thread would: it holds up exactly the waiters FIFO
///   hand-off puts behind it, and no more (async-lock #91's case).
/// - With [`Counting::AtomicCount`](crate::variants::Counting::AtomicCount),
///   running threads and tasks may take a free lock ahead of the queue;
///   a waiting writer task asks for strict hand-off as soon as it finds
///   readers holding (it has no timer to wake it), and any waiting task
///   after [`HANDOFF_AFTER`](super::HANDOFF_AFTER) at its next poll.
/// - [`upgrade_async`](Self::upgrade_async) upgrades an upgradable guard
///   from a task (the guard's own `upgrade` is the blocking call).
///
/// # Examples
/// A thread and a task on one lock:
/// ```
/// use std::sync::Arc;
/// use herdless::*;
///
/// let sem = Arc::new(RwSem::new(Vec::new()));
/// let held = sem.write(); // a thread holds it
/// let task = {
///     let sem = sem.clone();
///     async move {
///         let mut w = sem.write_async().await; // queued behind the thread
///         w.push("task");
///         let w = RwSemWriteGuard::downgrade(w);
///         w.len() // the guard lives across this point
///     }
/// };
/// let runner = std::thread::spawn(move || futures::executor::block_on(task));
/// while sem.waiters() == 0 {
///     std::thread::yield_now(); // until the task waits
/// }
/// drop(held); // the release grants the task
/// assert_eq!(runner.join().unwrap(), 1);
/// assert_eq!(*sem.read(), ["task"]);
/// ```
pub trait RwSemAsyncExt<T: ?Sized> {
    /// Shared access, as a task: the async form of `read`.
    ///
    /// # Examples
    /// ```
    /// use herdless::*;
    ///
    /// let sem = RwSem::new(5);
    /// futures::executor::block_on(async {
    ///     let a = sem.read_async().await;
    ///     let b = sem.read_async().await; // readers share
    ///     assert_eq!(*a + *b, 10);
    /// });
    /// ```
    fn read_async(&self) -> RwSemReadFuture<'_, T>;

    /// Exclusive access, as a task: the async form of `write`.
    ///
    /// # Examples
    /// ```
    /// use herdless::*;
    ///
    /// let sem = RwSem::new(0);
    /// futures::executor::block_on(async {
    ///     *sem.write_async().await += 1;
    /// });
    /// assert_eq!(*sem.read(), 1);
    /// ```
    fn write_async(&self) -> RwSemWriteFuture<'_, T>;

    /// Upgradable shared access, as a task: the async form of
    /// `upgradable_read`.
    ///
    /// # Examples
    /// ```
    /// use herdless::*;
    ///
    /// let sem = RwSem::new(1);
    /// futures::executor::block_on(async {
    ///     let u = sem.upgradable_read_async().await;
    ///     let r = sem.read_async().await; // shares with readers
    ///     assert_eq!(*u + *r, 2);
    ///     drop(r);
    ///     let mut w = RwSemUpgradableReadGuard::try_upgrade(u).ok().unwrap();
    ///     *w = 3;
    /// });
    /// assert_eq!(*sem.read(), 3);
    /// ```
    fn upgradable_read_async(&self) -> RwSemUpgradableReadFuture<'_, T>;

    /// Turns an upgradable read guard into a write guard, as a task: the
    /// async form of `RwSemUpgradableReadGuard::upgrade`. Waits ahead of
    /// every queued waiter for the readers to leave (new readers are kept
    /// out meanwhile); no writer gets in between. Dropping the future
    /// before it completed releases the upgradable hold (it owns the
    /// guard).
    ///
    /// # Examples
    /// ```
    /// use herdless::*;
    ///
    /// let sem = RwSem::new(1);
    /// futures::executor::block_on(async {
    ///     let u = sem.upgradable_read_async().await;
    ///     let mut w = RwSem::upgrade_async(u).await;
    ///     *w += 1;
    /// });
    /// assert_eq!(*sem.read(), 2);
    /// ```
    fn upgrade_async(guard: RwSemUpgradableReadGuard<'_, T>) -> RwSemUpgradeFuture<'_, T>;
}

impl<T: ?Sized> RwSemAsyncExt<T> for RwSem<T> {
    fn read_async(&self) -> RwSemReadFuture<'_, T> {
        RwSemReadFuture {
            sem: self,
            acquire: raw(self).read_async(),
        }
    }

    fn write_async(&self) -> RwSemWriteFuture<'_, T> {
        RwSemWriteFuture {
            sem: self,
            acquire: raw(self).write_async(),
        }
    }

    fn upgradable_read_async(&self) -> RwSemUpgradableReadFuture<'_, T> {
        RwSemUpgradableReadFuture {
            sem: self,
            acquire: raw(self).upgradable_read_async(),
        }
    }

    fn upgrade_async(guard: RwSemUpgradableReadGuard<'_, T>) -> RwSemUpgradeFuture<'_, T> {
        let sem = RwSemUpgradableReadGuard::rwlock(&guard);
        RwSemUpgradeFuture {
            // SAFETY: `guard` holds the lock upgradable, and the future
            // keeps it (dropped after `upgrade`, field order) until the
            // upgrade completes, when it is forgotten.
            upgrade: unsafe { raw(sem).upgrade_async() },
            guard: Some(guard),
        }
    }
}

/// The future of [`RwSemAsyncExt::upgrade_async`]: a write guard once the
/// readers have left. Dropping it before releases the upgradable hold.
///
/// # Panics
/// If polled again after it returned `Ready`.
///
/// # Examples
/// While it waits, new readers are kept out; dropped, it releases the
/// upgradable hold it owns:
/// ```
/// use std::future::Future;
/// use std::task::{Context, Waker};
/// use herdless::*;
///
/// let sem = RwSem::new(0);
/// let reader = sem.read();
/// let mut upgrade = Box::pin(RwSem::upgrade_async(sem.upgradable_read()));
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(upgrade.as_mut().poll(&mut cx).is_pending(), "a reader holds the lock");
/// assert!(sem.try_read().is_none(), "new readers wait behind the upgrade");
/// drop(upgrade);
/// drop(reader);
/// assert!(!sem.is_locked());
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct RwSemUpgradeFuture<'a, T: ?Sized> {
    /// Dropped first: a dropped upgrade leaves the upgradable hold ...
    upgrade: RawUpgrade<'a>,
    /// ... which this guard then releases. `None` once the upgrade is done.
    guard: Option<RwSemUpgradableReadGuard<'a, T>>,
}

impl<'a, T: ?Sized> Future for RwSemUpgradeFuture<'a, T> {
    type Output = RwSemWriteGuard<'a, T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<RwSemWriteGuard<'a, T>> {
        // SAFETY: `upgrade` is structurally pinned (never moved out, dropped
        // in place); `guard` is not.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        let upgrade = unsafe { Pin::new_unchecked(&mut this.upgrade) };
        match upgrade.poll(cx) {
            Poll::Ready(()) => {
                let guard = this.guard.take().expect("polled after completion");
                let sem: &'a RwSem<T> = RwSemUpgradableReadGuard::rwlock(&guard);
                // The hold is exclusive now: the upgradable guard must not
                // release it.
                std::mem::forget(guard);
                // SAFETY: we hold the lock exclusive, and no other guard
                // does (the upgradable one was just forgotten).
                Poll::Ready(unsafe { sem.make_write_guard_unchecked(lock_api::GuardSend::new()) })
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: ?Sized> std::fmt::Debug for RwSemUpgradeFuture<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwSemUpgradeFuture").finish_non_exhaustive()
    }
}

fn raw<T: ?Sized>(sem: &RwSem<T>) -> &super::RawRwSem {
    // SAFETY: `raw` is unsafe because the raw lock could be unlocked behind
    // the guards' back; the futures only acquire through it, and make a
    // guard for exactly the hold they acquired.
    unsafe { sem.raw() }
}

/// Declares a future over [`RawAcquire`] that makes a guard when it is ready.
macro_rules! lock_future {
    ($(#[$doc:meta])* $name:ident, $guard:ident, $make:ident) => {
        $(#[$doc])*
        #[must_use = "futures do nothing unless polled"]
        pub struct $name<'a, T: ?Sized> {
            sem: &'a RwSem<T>,
            acquire: RawAcquire<'a>,
        }

        impl<'a, T: ?Sized> Future for $name<'a, T> {
            type Output = $guard<'a, T>;

            #[inline]
            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<$guard<'a, T>> {
                // SAFETY: `acquire` is structurally pinned: never moved out
                // of the future, dropped in place.
                let this = unsafe { self.get_unchecked_mut() };
                // SAFETY: as above.
                let acquire = unsafe { Pin::new_unchecked(&mut this.acquire) };
                match acquire.poll(cx) {
                    // SAFETY: the lock is now held in this guard's mode by
                    // this future, which will not release it (its `Drop`
                    // releases only a hold it never returned).
                    Poll::Ready(()) => Poll::Ready(unsafe {
                        this.sem.$make(lock_api::GuardSend::new())
                    }),
                    Poll::Pending => Poll::Pending,
                }
            }
        }

        impl<T: ?Sized> std::fmt::Debug for $name<'_, T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name)).finish_non_exhaustive()
            }
        }
    };
}

lock_future!(
    /// The future of [`RwSemAsyncExt::read_async`]: a read guard once the
    /// shared hold is granted. Dropping it leaves the queue, or gives back
    /// a hold granted to it.
    ///
    /// # Panics
    /// If polled again after it returned `Ready`.
    ///
    /// # Examples
    /// Polled by hand: pending behind a writer, ready once the writer's
    /// release granted it:
    /// ```
    /// use std::future::Future;
    /// use std::task::{Context, Poll, Waker};
    /// use herdless::*;
    ///
    /// let sem = RwSem::new(1);
    /// let writer = sem.write();
    /// let mut read = Box::pin(sem.read_async());
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(read.as_mut().poll(&mut cx).is_pending());
    /// drop(writer); // grants the queued future
    /// let Poll::Ready(guard) = read.as_mut().poll(&mut cx) else {
    ///     panic!("the release granted the future");
    /// };
    /// assert_eq!(*guard, 1);
    /// ```
    RwSemReadFuture,
    RwSemReadGuard,
    make_read_guard_unchecked
);
lock_future!(
    /// The future of [`RwSemAsyncExt::write_async`]: a write guard once the
    /// exclusive hold is granted. Dropping it leaves the queue, or hands a
    /// hold granted to it to the next waiter.
    ///
    /// # Panics
    /// If polled again after it returned `Ready`.
    ///
    /// # Examples
    /// A future dropped while it waits leaves the queue:
    /// ```
    /// use std::future::Future;
    /// use std::task::{Context, Waker};
    /// use herdless::*;
    ///
    /// let sem = RwSem::new(0);
    /// let reader = sem.read();
    /// let mut write = Box::pin(sem.write_async());
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(write.as_mut().poll(&mut cx).is_pending());
    /// assert_eq!(sem.waiters(), 1);
    /// drop(write);
    /// assert_eq!(sem.waiters(), 0);
    /// drop(reader);
    /// assert!(sem.try_write().is_some());
    /// ```
    RwSemWriteFuture,
    RwSemWriteGuard,
    make_write_guard_unchecked
);
lock_future!(
    /// The future of [`RwSemAsyncExt::upgradable_read_async`]: an
    /// upgradable read guard once that hold is granted. Dropping it leaves
    /// the queue, or gives back a hold granted to it.
    ///
    /// # Panics
    /// If polled again after it returned `Ready`.
    ///
    /// # Examples
    /// A future granted the hold and then dropped unpolled gives it back:
    /// ```
    /// use std::future::Future;
    /// use std::task::{Context, Waker};
    /// use herdless::*;
    ///
    /// let sem = RwSem::new(0);
    /// let writer = sem.write();
    /// let mut upgradable = Box::pin(sem.upgradable_read_async());
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(upgradable.as_mut().poll(&mut cx).is_pending());
    /// drop(writer); // grants the future the upgradable hold
    /// assert!(sem.is_locked(), "held for the future");
    /// drop(upgradable);
    /// assert!(!sem.is_locked());
    /// ```
    RwSemUpgradableReadFuture,
    RwSemUpgradableReadGuard,
    make_upgradable_guard_unchecked
);
