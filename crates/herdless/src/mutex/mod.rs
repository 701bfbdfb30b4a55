//! A mutual-exclusion lock with `lock_api` guards, sleeping in the
//! [`FutexTable`](crate::FutexTable): use it as `parking_lot::Mutex` or
//! `std::sync::Mutex` (same API as parking_lot's, plus
//! `unlock_fair`/`bump` and timed locks; no poisoning).
//!
//! Seed lineage: 004 (its sleepers park in the futex table, whose
//! waiter-count check keeps wakes that find nobody lock-free) and 001 (its
//! unlock wakes after the table's bucket lock is dropped, and wakes one
//! thread per hand-off, not one per unlock).
//!
//! # How it behaves
//! - Uncontended, `lock` and `unlock` are one atomic read-modify-write
//!   each.
//! - A thread that finds the lock held spins for a moment (on many CPUs;
//!   on two it also yields, see `spin.rs`), then sleeps in the futex table.
//! - An unlock wakes a sleeper only when nobody is awake for the lock
//!   already: under contention most unlocks stay one atomic operation, and
//!   the woken thread spins for the lock as std's woken threads do. The
//!   state word and its protocol are in `raw.rs`.
//! - Unlocks are unfair (a running thread may take the lock ahead of a
//!   woken one), with eventual fairness: a woken thread that loses goes
//!   back to the head of the queue, so does a thread that rarely finds a
//!   mutex taken (an occasional locker does not wait behind the busy ones,
//!   `rare_parker.rs`), and every 0.5 ms an unlock hands the
//!   lock straight to the oldest sleeper;
//!   [`unlock_fair`](lock_api::MutexGuard::unlock_fair) always does.
//! - Tasks wait in the same queue ([`MutexAsyncExt::lock_async`]): one
//!   `fetch_or` when the lock is free, no spinning in `poll`, a woken task
//!   tries once and otherwise goes back to the head of the queue; the
//!   guard is the same [`MutexGuard`], `Send`, so it may be held across an
//!   `.await`. The task side is `lock_async.rs`; it costs the threads
//!   nothing on their paths (the futex table's records carry a thread's
//!   `Unparker` or a task's waker in the same 64 bytes).
//! - Guards are `Send` (`lock_api::GuardSend`): the lock belongs to no
//!   thread (it is one bit, released by a `fetch_sub` from wherever the
//!   guard is), so a guard may be dropped on another thread than the one
//!   that locked, as tokio's `MutexGuard` may. (std's is not `Send`
//!   because some platforms' mutexes must be unlocked by their owner;
//!   herdless's never looks at who unlocks.)
//!
//! ```
//! use std::sync::Arc;
//! use herdless::Mutex;
//!
//! let counter = Arc::new(Mutex::new(0));
//! let threads: Vec<_> = (0..4)
//!     .map(|_| {
//!         let counter = counter.clone();
//!         std::thread::spawn(move || {
//!             for _ in 0..1000 {
//!                 *counter.lock() += 1;
//!             }
//!         })
//!     })
//!     .collect();
//! for t in threads {
//!     t.join().unwrap();
//! }
//! assert_eq!(*counter.lock(), 4000);
//! ```

#[cfg(not(loom))]
mod async_ext;
mod fair_release;
mod lock_async;
mod marks;
mod rare_parker;
mod raw;
mod spin;
mod spin_ask;

#[cfg(not(loom))]
pub use async_ext::{MutexAsyncExt, MutexLockFuture};
pub use lock_async::RawLock;
pub use raw::RawMutex;
pub(crate) use raw::HANDOFF;

#[cfg(not(loom))]
use std::time::{Duration, Instant};

/// A mutual-exclusion lock with `lock_api` guards.
///
/// The methods are `lock_api::Mutex`'s: `lock`, `try_lock`, the timed
/// `try_lock_for` / `try_lock_until`, `is_locked`, `get_mut`,
/// `into_inner`; the guard adds `unlock_fair`, `unlocked_fair` and `bump`
/// ([`MutexGuard`]). None of them panics; a thread that locks again
/// while it holds the lock deadlocks (not reentrant). No poisoning: a
/// panic while the lock is held releases it.
///
/// # Examples
/// ```
/// let m = herdless::Mutex::new(1);
/// *m.lock() += 1;
/// assert_eq!(*m.lock(), 2);
/// assert!(m.try_lock_for(std::time::Duration::ZERO).is_some());
/// ```
///
/// A timed lock gives up while another thread holds the lock:
/// ```
/// use std::time::Duration;
///
/// let m = herdless::Mutex::new(0);
/// let held = m.lock();
/// std::thread::scope(|s| {
///     s.spawn(|| assert!(m.try_lock_for(Duration::from_millis(1)).is_none()));
/// });
/// drop(held);
/// assert!(m.try_lock_for(Duration::from_millis(1)).is_some());
/// ```
///
/// A fair unlock hands the lock to the thread asleep on it, ahead of the
/// unlocking thread's own next `lock`:
/// ```
/// use herdless::{Mutex, MutexGuard};
///
/// let order = Mutex::new(Vec::new());
/// std::thread::scope(|s| {
///     let held = order.lock();
///     s.spawn(|| order.lock().push("sleeper"));
///     // SAFETY: `raw` is only used to read the number of sleepers.
///     while unsafe { order.raw() }.waiters() == 0 {
///         std::thread::yield_now(); // until the thread sleeps on the lock
///     }
///     MutexGuard::unlock_fair(held);
///     order.lock().push("unlocker");
/// });
/// assert_eq!(*order.lock(), ["sleeper", "unlocker"]);
/// ```
#[cfg(not(loom))]
pub type Mutex<T> = lock_api::Mutex<RawMutex, T>;

/// The guard of [`Mutex`]: the lock is held until it is dropped.
///
/// # Examples
/// ```
/// use herdless::{Mutex, MutexGuard};
///
/// fn push(list: &Mutex<Vec<u32>>, x: u32) -> MutexGuard<'_, Vec<u32>> {
///     let mut guard = list.lock();
///     guard.push(x);
///     guard
/// }
/// let list = Mutex::new(Vec::new());
/// assert_eq!(push(&list, 7).len(), 1);
/// ```
#[cfg(not(loom))]
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;

/// A [`MutexGuard`] narrowed to a part of the protected value
/// ([`MutexGuard::map`](lock_api::MutexGuard::map)).
///
/// # Examples
/// ```
/// use herdless::{MappedMutexGuard, Mutex, MutexGuard};
///
/// let pair = Mutex::new((1, String::from("one")));
/// let mut name: MappedMutexGuard<'_, String> = MutexGuard::map(pair.lock(), |p| &mut p.1);
/// name.push('!');
/// drop(name);
/// assert_eq!(pair.lock().1, "one!");
/// ```
#[cfg(not(loom))]
pub type MappedMutexGuard<'a, T> = lock_api::MappedMutexGuard<'a, RawMutex, T>;

/// What [`Mutex`] adds to `lock_api::Mutex` beyond the async form
/// ([`MutexAsyncExt`]): a look at its queue.
///
/// ```
/// use herdless::{Mutex, MutexExt};
///
/// let m = Mutex::new(());
/// let held = m.lock();
/// std::thread::scope(|s| {
///     s.spawn(|| drop(m.lock()));
///     while m.waiters() == 0 {
///         std::thread::yield_now(); // until the thread sleeps on the mutex
///     }
///     drop(held);
/// });
/// assert_eq!(m.waiters(), 0);
/// ```
#[cfg(not(loom))]
pub trait MutexExt {
    /// Threads and tasks queued asleep on the mutex right now (a snapshot,
    /// for diagnostics and tests; it takes the futex table's bucket lock).
    fn waiters(&self) -> usize;
}

#[cfg(not(loom))]
impl<T: ?Sized> MutexExt for Mutex<T> {
    fn waiters(&self) -> usize {
        // SAFETY: only a look at the queue; the lock is not touched.
        unsafe { self.raw() }.waiters()
    }
}

// SAFETY: `lock`/`try_lock` grant exclusive ownership (an Acquire RMW
// setting LOCKED, or a hand-off grant) until `unlock` releases it with
// Release (or hands it over with a grant). The hold belongs to no thread:
// `release` is a `fetch_sub` on the word that any thread may issue, and no
// part of the protocol records or checks who holds the lock, so the guard
// may move to another thread (`GuardSend`) and unlock there.
#[cfg(not(loom))]
unsafe impl lock_api::RawMutex for RawMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = RawMutex::new();
    type Guard = lock_api::GuardSend;

    #[inline]
    fn lock(&self) -> Self::Guard {
        self.acquire();
        lock_api::GuardSend::new()
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        self.try_acquire().then(lock_api::GuardSend::new)
    }

    #[inline]
    unsafe fn unlock(&self, _guard: Self::Guard) {
        // SAFETY: the guard proves the lock is held.
        unsafe { self.release() }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.is_held()
    }
}

// SAFETY: a fair unlock releases the lock as `unlock` does, or hands it,
// still held, to a sleeper that then owns it (token HANDOFF).
#[cfg(not(loom))]
unsafe impl lock_api::RawMutexFair for RawMutex {
    unsafe fn unlock_fair(&self, _guard: Self::Guard) {
        // SAFETY: the guard proves the lock is held.
        unsafe { self.release_fair() }
    }

    #[inline]
    unsafe fn bump(&self, _guard: &mut Self::Guard) {
        // SAFETY: the guard proves the lock is held; `bump` holds it again
        // when it returns, as the trait requires.
        unsafe { RawMutex::bump(self) }
    }
}

// SAFETY: as for `RawMutex`; the timed forms only add a way to give up.
#[cfg(not(loom))]
unsafe impl lock_api::RawMutexTimed for RawMutex {
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_for(&self, timeout: Duration) -> Option<Self::Guard> {
        self.acquire_timeout(Some(timeout))
            .then(lock_api::GuardSend::new)
    }

    fn try_lock_until(&self, deadline: Instant) -> Option<Self::Guard> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        self.acquire_timeout(Some(timeout))
            .then(lock_api::GuardSend::new)
    }
}
