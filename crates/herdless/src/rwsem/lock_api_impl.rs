//! `lock_api` 0.5 integration: [`RawRwSem`] behind `lock_api::RwLock`
//! guards (read, write, upgradable read, their timed, fair and downgrade
//! forms), and the typed-error timed forms on [`RwSem`].

use std::time::{Duration, Instant};

use super::raw::RawRwSem;
use super::stats::RwSemStats;
use super::{RwSem, RwSemReadGuard, RwSemUpgradableReadGuard, RwSemWriteGuard};
use crate::variants::RwSemConfig;
use crate::wait_queue::TimedOut;

// SAFETY: `lock_shared`/`try_lock_shared` return only once the count (or
// `activity`) records a shared hold, which excludes writers, with Acquire;
// `lock_exclusive` only once it records the one writer, which excludes
// everybody. Releases use Release (see `raw.rs`). Holds belong to no
// thread, so guards may be sent (`GuardSend`).
unsafe impl lock_api::RawRwLock for RawRwSem {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = RawRwSem::new();
    type SharedGuard = lock_api::GuardSend;
    type ExclusiveGuard = lock_api::GuardSend;

    fn lock_shared(&self) -> Self::SharedGuard {
        self.read();
        lock_api::GuardSend::new()
    }

    fn try_lock_shared(&self) -> Option<Self::SharedGuard> {
        self.try_read().then(lock_api::GuardSend::new)
    }

    unsafe fn unlock_shared(&self, _guard: Self::SharedGuard) {
        // SAFETY: the guard proves a shared hold of this lock.
        unsafe { self.read_unlock() }
    }

    fn lock_exclusive(&self) -> Self::ExclusiveGuard {
        self.write();
        lock_api::GuardSend::new()
    }

    fn try_lock_exclusive(&self) -> Option<Self::ExclusiveGuard> {
        self.try_write().then(lock_api::GuardSend::new)
    }

    unsafe fn unlock_exclusive(&self, _guard: Self::ExclusiveGuard) {
        // SAFETY: the guard proves the exclusive hold of this lock.
        unsafe { self.write_unlock() }
    }

    fn is_locked(&self) -> bool {
        RawRwSem::is_locked(self)
    }

    fn is_locked_exclusive(&self) -> bool {
        RawRwSem::is_locked_exclusive(self)
    }
}

// SAFETY: `downgrade` turns the exclusive hold into a shared one atomically
// (no writer can get in between), as the trait requires.
unsafe impl lock_api::RawRwLockDowngrade for RawRwSem {
    unsafe fn downgrade(&self, _guard: Self::ExclusiveGuard) -> Self::SharedGuard {
        // SAFETY: the guard proves the exclusive hold of this lock.
        unsafe { RawRwSem::downgrade(self) };
        lock_api::GuardSend::new()
    }
}

// SAFETY: as for `RawRwLock`; the timed forms only add a way to give up,
// and give up only with nothing held (a racing grant wins).
unsafe impl lock_api::RawRwLockTimed for RawRwSem {
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_shared_for(&self, timeout: Duration) -> Option<Self::SharedGuard> {
        self.read_timeout(timeout)
            .ok()
            .map(|()| lock_api::GuardSend::new())
    }

    fn try_lock_shared_until(&self, deadline: Instant) -> Option<Self::SharedGuard> {
        self.try_lock_shared_for(deadline.saturating_duration_since(Instant::now()))
    }

    fn try_lock_exclusive_for(&self, timeout: Duration) -> Option<Self::ExclusiveGuard> {
        self.write_timeout(timeout)
            .ok()
            .map(|()| lock_api::GuardSend::new())
    }

    fn try_lock_exclusive_until(&self, deadline: Instant) -> Option<Self::ExclusiveGuard> {
        self.try_lock_exclusive_for(deadline.saturating_duration_since(Instant::now()))
    }
}

// SAFETY: a fair unlock releases the same hold as the plain one (with the
// same Release ordering) and only changes who gets the lock next: the head
// of the queue, granted before any running thread can take it.
unsafe impl lock_api::RawRwLockFair for RawRwSem {
    unsafe fn unlock_shared_fair(&self, _guard: Self::SharedGuard) {
        // SAFETY: the guard proves a shared hold of this lock.
        unsafe { self.read_unlock_fair() }
    }

    unsafe fn unlock_exclusive_fair(&self, _guard: Self::ExclusiveGuard) {
        // SAFETY: the guard proves the exclusive hold of this lock.
        unsafe { self.write_unlock_fair() }
    }
}

// SAFETY: the upgradable hold is recorded in the count (`UPGRADABLE`) or
// under the wait lock (`Generic`) with Acquire, excludes writers and other
// upgradable holders, and shares with readers. `upgrade` returns only once
// no reader holds, having read every leaving reader's Release with Acquire
// (the trait's "acquire from the shared-lock releases it replaces"), and
// no writer can get in between: the upgradable hold excludes writers until
// it becomes the exclusive one in the same atomic step.
unsafe impl lock_api::RawRwLockUpgrade for RawRwSem {
    type UpgradableGuard = lock_api::GuardSend;

    fn lock_upgradable(&self) -> Self::UpgradableGuard {
        self.upgradable_read();
        lock_api::GuardSend::new()
    }

    fn try_lock_upgradable(&self) -> Option<Self::UpgradableGuard> {
        self.try_upgradable_read().then(lock_api::GuardSend::new)
    }

    unsafe fn unlock_upgradable(&self, _guard: Self::UpgradableGuard) {
        // SAFETY: the guard proves the upgradable hold of this lock.
        unsafe { self.upgradable_unlock() }
    }

    unsafe fn upgrade(&self, _guard: Self::UpgradableGuard) -> Self::ExclusiveGuard {
        // SAFETY: the guard proves the upgradable hold of this lock.
        unsafe { RawRwSem::upgrade(self) };
        lock_api::GuardSend::new()
    }

    unsafe fn try_upgrade(
        &self,
        guard: Self::UpgradableGuard,
    ) -> Result<Self::ExclusiveGuard, Self::UpgradableGuard> {
        // SAFETY: the guard proves the upgradable hold of this lock; on
        // failure it is still held and handed back.
        if unsafe { RawRwSem::try_upgrade(self) } {
            Ok(lock_api::GuardSend::new())
        } else {
            Err(guard)
        }
    }
}

// SAFETY: as for `RawRwLockFair`.
unsafe impl lock_api::RawRwLockUpgradeFair for RawRwSem {
    unsafe fn unlock_upgradable_fair(&self, _guard: Self::UpgradableGuard) {
        // SAFETY: the guard proves the upgradable hold of this lock.
        unsafe { self.upgradable_unlock_fair() }
    }
}

// SAFETY: both downgrades change the hold in one atomic step (one RMW on
// the count, or one critical section of the wait lock), so no writer gets
// in between; the write -> upgradable one releases with Release.
unsafe impl lock_api::RawRwLockUpgradeDowngrade for RawRwSem {
    unsafe fn downgrade_upgradable(&self, _guard: Self::UpgradableGuard) -> Self::SharedGuard {
        // SAFETY: the guard proves the upgradable hold of this lock.
        unsafe { RawRwSem::downgrade_upgradable(self) };
        lock_api::GuardSend::new()
    }

    unsafe fn downgrade_to_upgradable(
        &self,
        _guard: Self::ExclusiveGuard,
    ) -> Self::UpgradableGuard {
        // SAFETY: the guard proves the exclusive hold of this lock.
        unsafe { RawRwSem::downgrade_to_upgradable(self) };
        lock_api::GuardSend::new()
    }
}

// SAFETY: as for `RawRwLockUpgrade`; the timed forms give up with the hold
// they started with (none, or the upgradable one), and a racing grant wins.
unsafe impl lock_api::RawRwLockUpgradeTimed for RawRwSem {
    fn try_lock_upgradable_for(&self, timeout: Duration) -> Option<Self::UpgradableGuard> {
        self.upgradable_read_timeout(timeout)
            .ok()
            .map(|()| lock_api::GuardSend::new())
    }

    fn try_lock_upgradable_until(&self, deadline: Instant) -> Option<Self::UpgradableGuard> {
        self.try_lock_upgradable_for(deadline.saturating_duration_since(Instant::now()))
    }

    unsafe fn try_upgrade_for(
        &self,
        guard: Self::UpgradableGuard,
        timeout: Duration,
    ) -> Result<Self::ExclusiveGuard, Self::UpgradableGuard> {
        // SAFETY: the guard proves the upgradable hold of this lock; on
        // timeout it is still held and handed back.
        match unsafe { self.upgrade_timeout(timeout) } {
            Ok(()) => Ok(lock_api::GuardSend::new()),
            Err(TimedOut) => Err(guard),
        }
    }

    unsafe fn try_upgrade_until(
        &self,
        guard: Self::UpgradableGuard,
        deadline: Instant,
    ) -> Result<Self::ExclusiveGuard, Self::UpgradableGuard> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        // SAFETY: as in `try_upgrade_for`.
        unsafe { self.try_upgrade_for(guard, timeout) }
    }
}

/// What [`RwSem`] adds to `lock_api::RwLock`: construction with a
/// configuration, timed acquisition with a typed error, and the counters.
///
/// # Examples
/// ```
/// use std::time::Duration;
/// use herdless::rwsem::{RwSem, RwSemExt};
/// use herdless::variants::{RwSemConfig, Counting, WakeTiming};
///
/// let sem = RwSem::with_config(
///     RwSemConfig::new(Counting::Generic, WakeTiming::WakeAfterUnlock),
///     vec![1, 2],
/// );
/// let r = sem.read_timeout(Duration::ZERO).unwrap();
/// assert_eq!(r.len(), 2);
/// assert!(sem.write_timeout(Duration::ZERO).is_err(), "a reader holds it");
/// drop(r);
/// sem.write_timeout(Duration::MAX).unwrap().push(3);
/// assert_eq!(sem.config(), RwSemConfig::new(Counting::Generic, WakeTiming::WakeAfterUnlock));
/// ```
pub trait RwSemExt<T> {
    /// A semaphore around `value` with the given counting and wake timing.
    ///
    /// # Examples
    /// ```
    /// use herdless::variants::{Counting, RwSemConfig, WakeTiming};
    /// use herdless::{RwSem, RwSemExt};
    ///
    /// let before = RwSemConfig::new(Counting::Generic, WakeTiming::WakeUnderLock);
    /// let sem = RwSem::with_config(before, 5);
    /// assert_eq!(*sem.read() + *sem.read(), 10, "the same lock, the seed's algorithm");
    /// ```
    fn with_config(config: RwSemConfig, value: T) -> Self;

    /// Read access, giving up after `timeout` (`Duration::ZERO`: one try
    /// without queueing; `Duration::MAX`: no limit). A grant that races the
    /// timeout wins.
    ///
    /// # Errors
    /// [`TimedOut`] if the lock could not be taken shared within `timeout`.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use herdless::{wait_queue::TimedOut, RwSem, RwSemExt};
    ///
    /// let sem = RwSem::new(1);
    /// let writer = sem.write();
    /// assert_eq!(sem.read_timeout(Duration::from_millis(1)).unwrap_err(), TimedOut);
    /// drop(writer);
    /// assert_eq!(*sem.read_timeout(Duration::ZERO).unwrap(), 1);
    /// ```
    fn read_timeout(&self, timeout: Duration) -> Result<RwSemReadGuard<'_, T>, TimedOut>;

    /// Write access, giving up after `timeout` (as `read_timeout`).
    ///
    /// # Errors
    /// [`TimedOut`] if the lock could not be taken exclusive within
    /// `timeout`.
    ///
    /// # Examples
    /// A writer thread gives up while a reader holds the lock:
    /// ```
    /// use std::time::Duration;
    /// use herdless::{RwSem, RwSemExt};
    ///
    /// let sem = RwSem::new(0);
    /// let reader = sem.read();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| assert!(sem.write_timeout(Duration::from_millis(1)).is_err()));
    /// });
    /// drop(reader);
    /// *sem.write_timeout(Duration::MAX).unwrap() += 1;
    /// assert_eq!(*sem.read(), 1);
    /// ```
    fn write_timeout(&self, timeout: Duration) -> Result<RwSemWriteGuard<'_, T>, TimedOut>;

    /// Upgradable read access, giving up after `timeout` (as
    /// `read_timeout`).
    ///
    /// # Errors
    /// [`TimedOut`] if the upgradable hold could not be taken within
    /// `timeout`.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use herdless::{RwSem, RwSemExt};
    ///
    /// let sem = RwSem::new(0);
    /// let first = sem.upgradable_read_timeout(Duration::ZERO).unwrap();
    /// assert!(sem.upgradable_read_timeout(Duration::from_millis(1)).is_err());
    /// drop(first);
    /// assert!(sem.upgradable_read_timeout(Duration::ZERO).is_ok());
    /// ```
    fn upgradable_read_timeout(
        &self,
        timeout: Duration,
    ) -> Result<RwSemUpgradableReadGuard<'_, T>, TimedOut>;

    /// The configuration chosen at construction.
    ///
    /// # Examples
    /// ```
    /// use herdless::{variants::RwSemConfig, RwSem, RwSemExt};
    ///
    /// assert_eq!(RwSem::new(()).config(), RwSemConfig::DEFAULT);
    /// ```
    fn config(&self) -> RwSemConfig;

    /// The semaphore's event counts (zero without the `stats` feature).
    ///
    /// # Examples
    /// ```
    /// use herdless::{RwSem, RwSemExt};
    ///
    /// let sem = RwSem::new(0);
    /// *sem.write() += 1; // nobody waits: nothing to count
    /// let stats = sem.stats();
    /// assert_eq!((stats.waits, stats.wakeups, stats.timeouts), (0, 0, 0));
    /// ```
    /// See [`RwSemStats`] for counts of a waiter.
    fn stats(&self) -> RwSemStats;

    /// Threads queued asleep, an upgrade waiting for readers included (a
    /// snapshot).
    ///
    /// # Examples
    /// ```
    /// use herdless::{RwSem, RwSemExt};
    ///
    /// let sem = RwSem::new(0);
    /// let reader = sem.read();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| *sem.write() += 1); // sleeps behind the reader
    ///     while sem.waiters() == 0 {
    ///         std::thread::yield_now();
    ///     }
    ///     drop(reader);
    /// });
    /// assert_eq!((sem.waiters(), *sem.read()), (0, 1));
    /// ```
    fn waiters(&self) -> usize;

    /// Whether a waiter (or a fair unlock) has asked for strict hand-off
    /// (a snapshot): from then until the next grant, no running thread
    /// takes the lock ahead of the queue
    /// ([`RawRwSem::handoff_requested`]).
    ///
    /// # Examples
    /// ```
    /// use herdless::{RwSem, RwSemExt};
    ///
    /// let sem = RwSem::new(0);
    /// let reader = sem.read();
    /// assert!(!sem.handoff_requested(), "nobody waits");
    /// drop(reader);
    /// ```
    fn handoff_requested(&self) -> bool;
}

impl<T> RwSemExt<T> for RwSem<T> {
    fn with_config(config: RwSemConfig, value: T) -> Self {
        RwSem::from_raw(RawRwSem::with_config(config), value)
    }

    fn read_timeout(&self, timeout: Duration) -> Result<RwSemReadGuard<'_, T>, TimedOut> {
        self.try_read_for(timeout).ok_or(TimedOut)
    }

    fn write_timeout(&self, timeout: Duration) -> Result<RwSemWriteGuard<'_, T>, TimedOut> {
        self.try_write_for(timeout).ok_or(TimedOut)
    }

    fn upgradable_read_timeout(
        &self,
        timeout: Duration,
    ) -> Result<RwSemUpgradableReadGuard<'_, T>, TimedOut> {
        self.try_upgradable_read_for(timeout).ok_or(TimedOut)
    }

    fn config(&self) -> RwSemConfig {
        raw(self).config()
    }

    fn stats(&self) -> RwSemStats {
        raw(self).stats()
    }

    fn handoff_requested(&self) -> bool {
        raw(self).handoff_requested()
    }

    fn waiters(&self) -> usize {
        raw(self).waiters()
    }
}

fn raw<T>(sem: &RwSem<T>) -> &RawRwSem {
    // SAFETY: `raw` is unsafe only because the raw lock could be unlocked
    // behind the guards' back; we call nothing but read-only queries.
    unsafe { sem.raw() }
}
