//! The reader-writer locks the `rwsem` experiment compares, behind one
//! small trait: herdless's four configurations and the three peers.

use std::cell::UnsafeCell;
use std::sync::PoisonError;

use herdless::rwsem::{RwSem, RwSemExt, RwSemStats};

use crate::harness::LabError;

/// The data every lock protects: a writer bumps every word, a reader checks
/// they are all equal (a torn read means a broken lock).
pub type Data = [u64; 8];

/// A reader-writer lock around [`Data`].
pub trait RwData: Sync {
    /// Runs `f` under the read lock.
    fn read<R>(&self, f: impl FnOnce(&Data) -> R) -> R;
    /// Runs `f` under the write lock.
    fn write(&self, f: impl FnOnce(&mut Data));
    /// herdless's counters; `None` for the peers, which count nothing.
    fn stats(&self) -> Option<RwSemStats> {
        None
    }
}

/// herdless, in one configuration.
impl RwData for RwSem<Data> {
    fn read<R>(&self, f: impl FnOnce(&Data) -> R) -> R {
        f(&self.read())
    }
    fn write(&self, f: impl FnOnce(&mut Data)) {
        f(&mut self.write())
    }
    fn stats(&self) -> Option<RwSemStats> {
        Some(RwSemExt::stats(self))
    }
}

/// `std::sync::RwLock` (futex-based, writer-preferring on Linux).
impl RwData for std::sync::RwLock<Data> {
    fn read<R>(&self, f: impl FnOnce(&Data) -> R) -> R {
        f(&self.read().unwrap_or_else(PoisonError::into_inner))
    }
    fn write(&self, f: impl FnOnce(&mut Data)) {
        f(&mut self.write().unwrap_or_else(PoisonError::into_inner))
    }
}

/// `parking_lot::RwLock` (task-fair, eventually fair unlocks).
impl RwData for parking_lot::RwLock<Data> {
    fn read<R>(&self, f: impl FnOnce(&Data) -> R) -> R {
        f(&self.read())
    }
    fn write(&self, f: impl FnOnce(&mut Data)) {
        f(&mut self.write())
    }
}

/// glibc's `pthread_rwlock_t` with default attributes (prefers readers).
pub struct Pthread {
    /// Boxed: a pthread lock must not move once initialised.
    lock: Box<UnsafeCell<libc::pthread_rwlock_t>>,
    data: UnsafeCell<Data>,
}

// SAFETY: `data` is only accessed under `lock`, which is made for sharing
// between threads.
unsafe impl Sync for Pthread {}
// SAFETY: as above; the lock is heap-allocated and never moves.
unsafe impl Send for Pthread {}

impl Pthread {
    pub fn new() -> Result<Self, LabError> {
        let lock = Box::new(UnsafeCell::new(libc::PTHREAD_RWLOCK_INITIALIZER));
        // SAFETY: a freshly allocated lock, initialised once with default
        // attributes before any use.
        let rc = unsafe { libc::pthread_rwlock_init(lock.get(), std::ptr::null()) };
        if rc != 0 {
            return Err(LabError::os(
                "pthread_rwlock_init",
                std::io::Error::from_raw_os_error(rc),
            ));
        }
        Ok(Pthread {
            lock,
            data: UnsafeCell::new([0; 8]),
        })
    }

    fn check(rc: i32, what: &str) {
        // Only EDEADLK/EINVAL are possible, both programming errors here.
        assert_eq!(rc, 0, "{what}: {}", std::io::Error::from_raw_os_error(rc));
    }
}

impl RwData for Pthread {
    fn read<R>(&self, f: impl FnOnce(&Data) -> R) -> R {
        // SAFETY: the lock is initialised and outlives the call.
        Self::check(
            unsafe { libc::pthread_rwlock_rdlock(self.lock.get()) },
            "rdlock",
        );
        // SAFETY: shared access under the read lock.
        let r = f(unsafe { &*self.data.get() });
        // SAFETY: we hold the read lock taken above.
        Self::check(
            unsafe { libc::pthread_rwlock_unlock(self.lock.get()) },
            "unlock",
        );
        r
    }
    fn write(&self, f: impl FnOnce(&mut Data)) {
        // SAFETY: the lock is initialised and outlives the call.
        Self::check(
            unsafe { libc::pthread_rwlock_wrlock(self.lock.get()) },
            "wrlock",
        );
        // SAFETY: exclusive access under the write lock.
        f(unsafe { &mut *self.data.get() });
        // SAFETY: we hold the write lock taken above.
        Self::check(
            unsafe { libc::pthread_rwlock_unlock(self.lock.get()) },
            "unlock",
        );
    }
}

impl Drop for Pthread {
    fn drop(&mut self) {
        // SAFETY: nobody holds the lock any more (we own it), and it is
        // destroyed once.
        unsafe { libc::pthread_rwlock_destroy(self.lock.get()) };
    }
}
