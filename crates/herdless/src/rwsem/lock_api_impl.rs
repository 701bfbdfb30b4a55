//! `lock_api` 0.5 integration: [`RawRwSem`] behind `lock_api::RwLock`
//! guards, and the typed-error timed forms on [`RwSem`].

use std::time::{Duration, Instant};

use super::raw::RawRwSem;
use super::stats::RwSemStats;
use super::{RwSem, RwSemConfig, RwSemReadGuard, RwSemWriteGuard};
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

/// What [`RwSem`] adds to `lock_api::RwLock`: construction with a
/// configuration, timed acquisition with a typed error, and the counters.
///
/// ```
/// use std::time::Duration;
/// use herdless::rwsem::{RwSem, RwSemExt, RwSemConfig, Counting, WakeTiming};
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
    fn with_config(config: RwSemConfig, value: T) -> Self;

    /// Read access, giving up after `timeout` (`Duration::ZERO`: one try
    /// without queueing; `Duration::MAX`: no limit). A grant that races the
    /// timeout wins.
    fn read_timeout(&self, timeout: Duration) -> Result<RwSemReadGuard<'_, T>, TimedOut>;

    /// Write access, giving up after `timeout` (as `read_timeout`).
    fn write_timeout(&self, timeout: Duration) -> Result<RwSemWriteGuard<'_, T>, TimedOut>;

    /// The configuration chosen at construction.
    fn config(&self) -> RwSemConfig;

    /// The semaphore's event counts (zero without the `stats` feature).
    fn stats(&self) -> RwSemStats;

    /// Threads queued asleep (a snapshot).
    fn waiters(&self) -> usize;
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

    fn config(&self) -> RwSemConfig {
        raw(self).config()
    }

    fn stats(&self) -> RwSemStats {
        raw(self).stats()
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
