//! The short lock that guards every wait list (internal).
//!
//! Kernel counterpart: `spinlock_t`. User space runs preemptible, so a holder
//! can be descheduled while others spin; this lock therefore spins only
//! briefly (a bounded exponential backoff, about a hundred pause
//! instructions) and then sleeps in the kernel on its own word. It is the
//! classic three-state futex mutex:
//!
//! ```text
//!   0  unlocked
//!   1  locked, nobody sleeps                  (fast path CAS 0 -> 1)
//!   2  locked, sleepers may exist             (set by a thread about to sleep)
//! ```
//! `unlock` swaps in 0 and makes a wake syscall only if it saw 2. A thread
//! that slept relocks with a swap to 2 (it cannot know whether others still
//! sleep), which costs at most one spare wake.
//!
//! The lock counts its contended acquisitions when the `stats` feature is
//! on, and the time they waited (Linux's lockstat `waittime-total`: the
//! kernel's measure of the time spent waiting for a contended lock, which
//! a spinlock spends spinning: the profile ticks of the seed's
//! `.text.lock.rwsem`), timing one contended acquisition in
//! [`WAIT_SAMPLE`] per thread.

use std::ops::{Deref, DerefMut};

use crossbeam_utils::Backoff;

use crate::deadline::Deadline;
use crate::stats::{HeldCounter, SampledClock};
use crate::sync::{AtomicU32, Ordering, UnsafeCell};
use crate::sys;

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// Rounds of exponential spinning before sleeping (1 + 2 + ... + 64 pauses).
const SPIN_ROUNDS: u32 = 7;

/// One contended acquisition in this many, per thread, is timed and counts
/// for this many (two clock reads, one of them under the lock).
const WAIT_SAMPLE: u64 = 16;

#[cfg(feature = "stats")]
std::thread_local! {
    /// This thread's contended acquisitions of any `SpinParkLock`, which
    /// number them for the sampled clock.
    static CONTENDED_HERE: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Starts the clock of a contended acquisition, if it is this thread's
/// sampled one.
#[inline(always)]
fn wait_clock() -> SampledClock<WAIT_SAMPLE> {
    #[cfg(feature = "stats")]
    let number = CONTENDED_HERE.with(|n| {
        let number = n.get();
        n.set(number.wrapping_add(1));
        number
    });
    #[cfg(not(feature = "stats"))]
    let number = 0;
    SampledClock::start(number)
}

/// A lock around `T` for wait lists: spin briefly, then park.
pub(crate) struct SpinParkLock<T> {
    state: AtomicU32,
    /// Contended acquisitions, counted by the thread that then holds the
    /// lock (no locked add on the lock's line by a thread still waiting).
    contended: HeldCounter,
    /// The time contended acquisitions waited, in nanoseconds (sampled:
    /// [`WAIT_SAMPLE`]), counted by the new holder.
    waited_ns: HeldCounter,
    data: UnsafeCell<T>,
}

// SAFETY: the lock gives exclusive access to `T` to one thread at a time, as
// std's Mutex does, so `T: Send` is enough for both.
unsafe impl<T: Send> Send for SpinParkLock<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SpinParkLock<T> {}

/// Proof that the lock is held; unlocks on drop.
pub(crate) struct LockGuard<'a, T> {
    lock: &'a SpinParkLock<T>,
}

impl<T> SpinParkLock<T> {
    /// An unlocked lock around `data`.
    #[cfg(not(loom))]
    pub(crate) const fn new(data: T) -> Self {
        SpinParkLock {
            state: AtomicU32::new(UNLOCKED),
            contended: HeldCounter::new(),
            waited_ns: HeldCounter::new(),
            data: UnsafeCell::new(data),
        }
    }

    /// An unlocked lock around `data` (loom atomics are not `const`).
    #[cfg(loom)]
    pub(crate) fn new(data: T) -> Self {
        SpinParkLock {
            state: AtomicU32::new(UNLOCKED),
            contended: HeldCounter::new(),
            waited_ns: HeldCounter::new(),
            data: UnsafeCell::new(data),
        }
    }

    /// Acquires the lock.
    #[inline]
    pub(crate) fn lock(&self) -> LockGuard<'_, T> {
        // Acquire pairs with the Release in `unlock`: the previous holder's
        // writes to `data` are visible to us.
        if self
            .state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        LockGuard { lock: self }
    }

    #[cold]
    fn lock_contended(&self) {
        let clock = wait_clock();
        self.acquire_contended();
        // Held now: count under the lock.
        self.contended.add_held(1);
        self.waited_ns.add_held(clock.elapsed_ns());
    }

    fn acquire_contended(&self) {
        if !cfg!(loom) {
            let backoff = Backoff::new();
            for _ in 0..SPIN_ROUNDS {
                backoff.spin();
                if self.state.load(Ordering::Relaxed) == UNLOCKED
                    && self
                        .state
                        .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    return;
                }
            }
        }
        // Sleep. Swapping in CONTENDED (not LOCKED) tells the holder to wake
        // someone on unlock; Acquire as in `lock`.
        while self.state.swap(CONTENDED, Ordering::Acquire) != UNLOCKED {
            sys::wait(&self.state, CONTENDED, Deadline::Never);
        }
    }

    fn unlock(&self) {
        // Release pairs with the Acquire of the next locker.
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            sys::wake_one(&self.state);
        }
    }

    /// Contended acquisitions so far (0 without the `stats` feature).
    pub(crate) fn contended_acquisitions(&self) -> u64 {
        self.contended.sum()
    }

    /// The time contended acquisitions waited so far, in nanoseconds,
    /// estimated from one in [`WAIT_SAMPLE`] per thread (0 without the
    /// `stats` feature).
    pub(crate) fn waited_ns(&self) -> u64 {
        self.waited_ns.sum()
    }
}

impl<T> Deref for LockGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard proves exclusive access until it is dropped, and
        // the returned reference cannot outlive the guard.
        self.lock.data.with(|p| unsafe { &*p })
    }
}

impl<T> DerefMut for LockGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes the borrow unique.
        self.lock.data.with_mut(|p| unsafe { &mut *p })
    }
}

impl<T> Drop for LockGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

#[cfg(all(test, feature = "stats", not(loom)))]
mod tests {
    use super::*;

    /// A contended acquisition is counted, and its wait is timed: a
    /// thread's first contended acquisition is a sampled one, and it
    /// waits at least until the holder has seen it asleep.
    #[test]
    fn a_contended_acquisition_counts_and_its_wait_is_timed() {
        let lock = SpinParkLock::new(0u32);
        let held = lock.lock();
        std::thread::scope(|s| {
            // A fresh thread: its first contended acquisition is timed.
            let waiter = s.spawn(|| *lock.lock() += 1);
            // It is asleep once it has swapped in CONTENDED.
            while lock.state.load(Ordering::Relaxed) != CONTENDED {
                std::thread::yield_now();
            }
            drop(held);
            waiter.join().unwrap();
        });
        assert_eq!(*lock.lock(), 1);
        assert_eq!(lock.contended_acquisitions(), 1);
        assert!(lock.waited_ns() >= WAIT_SAMPLE, "one timed wait, scaled");
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::Arc;
    use loom::thread;

    /// Mutual exclusion, and a sleeper is always woken by the unlock.
    #[test]
    fn lock_excludes_and_never_strands_a_sleeper() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let lock = Arc::new(SpinParkLock::new(0u32));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let lock = lock.clone();
                    thread::spawn(move || {
                        let mut g = lock.lock();
                        *g += 1;
                    })
                })
                .collect();
            {
                let mut g = lock.lock();
                *g += 1;
            }
            for t in threads {
                t.join().unwrap();
            }
            assert_eq!(*lock.lock(), 3);
        });
    }
}
