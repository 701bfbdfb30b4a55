//! The four lock families `locks` compares, behind one small trait: a
//! mutex around a value with two condition variables (a monitor), from
//! herdless, parking_lot, std and glibc's pthreads.
//!
//! Each workload is written once, generic over [`Monitor`], and
//! monomorphised per family, so the families run the same machine code
//! around their own lock calls. A monitor is cache-line aligned, so the
//! lock shares its lines only with its own value and condvars, as in
//! parking_lot's benchmark (which pads the lock with 300 bytes each side).

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::{self as std_sync, PoisonError};

use herdless::futex::FutexStats;

use crate::harness::LabError;

/// Which of a monitor's two condition variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cv {
    /// The first (a queue's "not empty", a broadcast's "go").
    First,
    /// The second (a queue's "not full").
    Second,
}

impl Cv {
    fn index(self) -> usize {
        match self {
            Cv::First => 0,
            Cv::Second => 1,
        }
    }
}

/// A mutex around a `T` with two condition variables.
pub trait Monitor<T: Send>: Sync + Sized {
    /// A monitor around `value`, on the heap, where it stays until
    /// dropped (a pthread mutex must not move once initialised).
    fn boxed(value: T) -> Result<Box<Self>, LabError>;

    /// Runs `f` under the lock.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;

    /// Takes the lock, waits on `cv` while `blocked(value)` holds, then runs
    /// `f`, all in one hold of the lock. Returns `f`'s result and how many
    /// times the thread waited on `cv`.
    fn wait_then<R>(
        &self,
        cv: Cv,
        blocked: impl FnMut(&T) -> bool,
        f: impl FnOnce(&mut T) -> R,
    ) -> (R, u64);

    /// Wakes one waiter of `cv`.
    fn notify_one(&self, cv: Cv);

    /// Wakes every waiter of `cv`.
    fn notify_all(&self, cv: Cv);

    /// herdless's futex-table counters (the global table its Mutex and
    /// Condvar sleep in); `None` for the peers, which count nothing.
    fn table_stats() -> Option<FutexStats> {
        None
    }
}

/// A monitor on a mutex and condvar from `$krate` (herdless, parking_lot,
/// std): one body for all, so they run exactly the same code around their
/// own lock calls; `lock` takes the mutex `m`, `wait` waits on `cv` with
/// the guard `g` and gives the guard back.
macro_rules! monitor {
    (
        $(#[$doc:meta])* $name:ident, $krate:ident,
        lock: |$m:ident| $lock:expr,
        wait: |$cv:ident, $g:ident| $wait:expr
        $(, table_stats: $stats:expr)?
    ) => {
        $(#[$doc])*
        #[repr(align(128))]
        pub struct $name<T> {
            mutex: $krate::Mutex<T>,
            cvs: [$krate::Condvar; 2],
        }

        impl<T: Send> Monitor<T> for $name<T> {
            fn boxed(value: T) -> Result<Box<Self>, LabError> {
                Ok(Box::new($name {
                    mutex: $krate::Mutex::new(value),
                    cvs: [$krate::Condvar::new(), $krate::Condvar::new()],
                }))
            }

            #[inline]
            fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
                let $m = &self.mutex;
                f(&mut $lock)
            }

            fn wait_then<R>(
                &self,
                cv: Cv,
                mut blocked: impl FnMut(&T) -> bool,
                f: impl FnOnce(&mut T) -> R,
            ) -> (R, u64) {
                let $m = &self.mutex;
                let mut guard = $lock;
                let mut waits = 0;
                while blocked(&guard) {
                    let ($cv, $g) = (&self.cvs[cv.index()], guard);
                    guard = $wait;
                    waits += 1;
                }
                (f(&mut guard), waits)
            }

            fn notify_one(&self, cv: Cv) {
                self.cvs[cv.index()].notify_one();
            }

            fn notify_all(&self, cv: Cv) {
                self.cvs[cv.index()].notify_all();
            }

            $(
                fn table_stats() -> Option<FutexStats> {
                    $stats
                }
            )?
        }
    };
}

monitor!(
    /// `herdless::Mutex` with two `herdless::Condvar`s.
    Herdless,
    herdless,
    lock: |m| m.lock(),
    wait: |cv, g| { let mut g = g; cv.wait(&mut g); g },
    table_stats: herdless::stats::ENABLED.then(|| herdless::FutexTable::global().stats())
);

monitor!(
    /// `parking_lot::Mutex` with two `parking_lot::Condvar`s.
    ParkingLot,
    parking_lot,
    lock: |m| m.lock(),
    wait: |cv, g| { let mut g = g; cv.wait(&mut g); g }
);

monitor!(
    /// `std::sync::Mutex` with two `std::sync::Condvar`s (futex-based on
    /// Linux). Poisoning is ignored: a panicking workload fails its sample
    /// anyway.
    Std,
    std_sync,
    lock: |m| m.lock().unwrap_or_else(PoisonError::into_inner),
    wait: |cv, g| cv.wait(g).unwrap_or_else(PoisonError::into_inner)
);

/// glibc's `pthread_mutex_t` (default attributes: a plain futex mutex that
/// does not spin) with two `pthread_cond_t`.
///
/// The primitives start uninitialised inside the monitor's heap allocation,
/// are initialised there once by `pthread_*_init` (default attributes), and
/// never move afterwards.
#[repr(align(128))]
pub struct Pthread<T> {
    mutex: UnsafeCell<MaybeUninit<libc::pthread_mutex_t>>,
    cvs: [UnsafeCell<MaybeUninit<libc::pthread_cond_t>>; 2],
    /// Set once every primitive is initialised: `Drop` destroys them only
    /// then.
    initialised: bool,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is only accessed under `mutex`, and pthread mutexes and
// condvars are made to be shared between threads.
unsafe impl<T: Send> Sync for Pthread<T> {}
// SAFETY: as above; a monitor nobody holds may move between threads (its
// box does not move its contents).
unsafe impl<T: Send> Send for Pthread<T> {}

/// Panics on a non-zero pthread return code: the only possible ones here
/// (EINVAL, EDEADLK, EPERM) are programming errors in the lab.
fn check(rc: libc::c_int, what: &str) {
    assert_eq!(rc, 0, "{what}: {}", std::io::Error::from_raw_os_error(rc));
}

impl<T> Pthread<T> {
    fn mutex(&self) -> *mut libc::pthread_mutex_t {
        self.mutex.get().cast()
    }

    fn cv(&self, cv: Cv) -> *mut libc::pthread_cond_t {
        self.cvs[cv.index()].get().cast()
    }

    fn lock(&self) {
        // SAFETY: the mutex is initialised (a `Pthread` is only handed out
        // by `boxed`, after initialisation) and has not moved.
        check(unsafe { libc::pthread_mutex_lock(self.mutex()) }, "lock");
    }

    fn unlock(&self) {
        // SAFETY: as in `lock`; called only by the thread holding it.
        check(
            unsafe { libc::pthread_mutex_unlock(self.mutex()) },
            "unlock",
        );
    }
}

impl<T: Send> Monitor<T> for Pthread<T> {
    fn boxed(value: T) -> Result<Box<Self>, LabError> {
        let mut monitor = Box::new(Pthread {
            mutex: UnsafeCell::new(MaybeUninit::uninit()),
            cvs: [
                UnsafeCell::new(MaybeUninit::uninit()),
                UnsafeCell::new(MaybeUninit::uninit()),
            ],
            initialised: false,
            value: UnsafeCell::new(value),
        });
        let fail = |what: &str, rc| LabError::os(what, std::io::Error::from_raw_os_error(rc));
        // SAFETY: the mutex is uninitialised, unshared, and at its final
        // address (the box's contents never move).
        let rc = unsafe { libc::pthread_mutex_init(monitor.mutex(), std::ptr::null()) };
        if rc != 0 {
            return Err(fail("pthread_mutex_init", rc));
        }
        for cv in [Cv::First, Cv::Second] {
            // SAFETY: as for the mutex.
            let rc = unsafe { libc::pthread_cond_init(monitor.cv(cv), std::ptr::null()) };
            if rc != 0 {
                // The mutex (and a condvar) stay undestroyed: with default
                // attributes glibc's destroy only checks for waiters, and
                // its init never fails anyway.
                return Err(fail("pthread_cond_init", rc));
            }
        }
        monitor.initialised = true;
        Ok(monitor)
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.lock();
        // SAFETY: exclusive access under the lock.
        let r = f(unsafe { &mut *self.value.get() });
        self.unlock();
        r
    }

    fn wait_then<R>(
        &self,
        cv: Cv,
        mut blocked: impl FnMut(&T) -> bool,
        f: impl FnOnce(&mut T) -> R,
    ) -> (R, u64) {
        self.lock();
        let mut waits = 0;
        // SAFETY: we hold the lock; the shared borrow ends before
        // `pthread_cond_wait` releases it.
        while blocked(unsafe { &*self.value.get() }) {
            // SAFETY: the condvar and mutex are initialised, have not
            // moved, and we hold the mutex.
            check(
                unsafe { libc::pthread_cond_wait(self.cv(cv), self.mutex()) },
                "pthread_cond_wait",
            );
            waits += 1;
        }
        // SAFETY: exclusive access under the lock.
        let r = f(unsafe { &mut *self.value.get() });
        self.unlock();
        (r, waits)
    }

    fn notify_one(&self, cv: Cv) {
        // SAFETY: the condvar is initialised and has not moved.
        check(
            unsafe { libc::pthread_cond_signal(self.cv(cv)) },
            "pthread_cond_signal",
        );
    }

    fn notify_all(&self, cv: Cv) {
        // SAFETY: the condvar is initialised and has not moved.
        check(
            unsafe { libc::pthread_cond_broadcast(self.cv(cv)) },
            "pthread_cond_broadcast",
        );
    }
}

impl<T> Drop for Pthread<T> {
    fn drop(&mut self) {
        if !self.initialised {
            return;
        }
        // SAFETY: we own the monitor, so nobody holds or waits on it; each
        // primitive was initialised and is destroyed once.
        unsafe {
            libc::pthread_mutex_destroy(self.mutex());
            libc::pthread_cond_destroy(self.cv(Cv::First));
            libc::pthread_cond_destroy(self.cv(Cv::Second));
        }
    }
}
