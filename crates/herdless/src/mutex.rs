//! A futex mutex on the [`FutexTable`], plugged into `lock_api` 0.5.
//!
//! The state word has three values (Drepper's "mutex3", as in glibc and musl):
//! ```text
//!   0  unlocked
//!   1  locked, nobody sleeps         fast path: CAS 0 -> 1, unlock: no syscall
//!   2  locked, sleepers may exist    set by a thread about to sleep; unlock wakes one
//! ```
//! A thread that wakes from the table relocks with a swap to 2, because it
//! cannot know whether others still sleep. That rule is also what makes
//! [`Condvar::notify_all`](crate::Condvar)'s requeue safe: every thread woken
//! off the mutex word holds the lock in state 2, so its unlock wakes the next
//! requeued thread, and the chain never stalls.
//!
//! Sleeping and waking go through [`FutexTable::global`], so an unlock with
//! nobody asleep costs no lock and no syscall (seed 004).

use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

use std::num::NonZeroU32;

use crate::deadline::Deadline;
use crate::futex::{address, FutexTable, Parked};
use crate::sync::{AtomicU32, Ordering};
use crate::util::waiter::GRANTED;

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// Loads (each followed by a spin-loop hint, about 27 ns here) that a
/// thread spends waiting for a running holder before it sleeps: std's
/// futex mutex uses the same 100.
const SPIN_LIMIT: u32 = 100;

/// The grant token of a fair unlock: "the lock is yours, still held".
pub(crate) const HANDOFF: NonZeroU32 = match NonZeroU32::new(2) {
    Some(token) => token,
    None => unreachable!(),
};

/// The raw mutex. Use it through [`Mutex`].
#[derive(Debug)]
pub struct RawMutex {
    state: AtomicU32,
}

/// A mutual-exclusion lock with `lock_api` guards.
///
/// ```
/// let m = herdless::Mutex::new(1);
/// *m.lock() += 1;
/// assert_eq!(*m.lock(), 2);
/// assert!(m.try_lock_for(std::time::Duration::ZERO).is_some());
/// ```
#[cfg(not(loom))]
pub type Mutex<T> = lock_api::Mutex<RawMutex, T>;
/// The guard of [`Mutex`].
#[cfg(not(loom))]
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;

impl Default for RawMutex {
    fn default() -> Self {
        Self::new()
    }
}

impl RawMutex {
    /// An unlocked mutex.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        RawMutex {
            state: AtomicU32::new(UNLOCKED),
        }
    }

    /// An unlocked mutex.
    #[cfg(loom)]
    pub fn new() -> Self {
        RawMutex {
            state: AtomicU32::new(UNLOCKED),
        }
    }

    /// The futex word; the condvar requeues its waiters onto it.
    pub(crate) fn word(&self) -> &AtomicU32 {
        &self.state
    }

    /// Tries once to take the lock.
    #[inline]
    pub fn try_acquire(&self) -> bool {
        // Acquire pairs with the Release in `release`.
        self.state
            .compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Takes the lock, sleeping if needed.
    #[inline]
    pub fn acquire(&self) {
        if !self.try_acquire() {
            self.acquire_slow(Deadline::Never);
        }
    }

    /// Takes the lock unless `timeout` elapses first. `None` and
    /// `Duration::MAX` wait forever; zero tries once.
    pub fn acquire_timeout(&self, timeout: Option<Duration>) -> bool {
        if self.try_acquire() {
            return true;
        }
        if timeout == Some(Duration::ZERO) {
            // Nothing to wait for: no spin, no sleep, no mark on the word.
            return false;
        }
        self.acquire_slow(Deadline::after(timeout))
    }

    /// Spins while another thread holds the lock and nobody sleeps on it
    /// (state 1), for at most [`SPIN_LIMIT`] rounds; returns the state seen
    /// last. It stops at once on 2: once a thread sleeps, a newcomer that
    /// keeps spinning would barge past it at every unlock and send it back
    /// to sleep (measured in the lab's `locks` experiment: convoys at 8–32
    /// threads on 2 CPUs, 1.4–14 sleeps per 1k operations against
    /// std's and parking_lot's < 0.3, with a spin that ignored sleepers).
    /// It only loads, so the word's cache line is shared while it spins.
    fn spin(&self) -> u32 {
        let mut left = if cfg!(loom) { 0 } else { SPIN_LIMIT };
        loop {
            // Relaxed: a hint; the swap or CAS that acts on it orders.
            let state = self.state.load(Ordering::Relaxed);
            if state != LOCKED || left == 0 {
                return state;
            }
            std::hint::spin_loop();
            left -= 1;
        }
    }

    #[cold]
    fn acquire_slow(&self, deadline: Deadline) -> bool {
        let mut state = self.spin();
        if state == UNLOCKED {
            // Free and nobody asleep: take it as the fast path would.
            // Acquire as in `try_acquire`.
            match self.state.compare_exchange(
                UNLOCKED,
                LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
        self.acquire_contended_from(state, deadline)
    }

    /// Takes the lock marking it contended: the path of a thread that has
    /// slept (here or on a condvar) and may not be the last sleeper.
    pub(crate) fn acquire_contended(&self, deadline: Deadline) -> bool {
        self.acquire_contended_from(self.spin(), deadline)
    }

    /// The sleeping loop, from the state last seen: mark the lock
    /// contended (2) and take it if that finds it free, else sleep on the
    /// word while it reads 2, and after each wake spin again before trying
    /// (std's futex mutex does the same).
    fn acquire_contended_from(&self, mut state: u32, deadline: Deadline) -> bool {
        let key = address(&self.state);
        loop {
            // Skip the write if the word reads 2 already: the park below
            // checks it again under the bucket lock. Acquire as in
            // `try_acquire`.
            if state != CONTENDED && self.state.swap(CONTENDED, Ordering::Acquire) == UNLOCKED {
                return true;
            }
            // Relaxed: the futex rule (ARCHITECTURE contract 1); a release
            // that stored UNLOCKED before our check is seen here or wakes
            // us.
            let parked = FutexTable::global().park(
                key,
                || self.state.load(Ordering::Relaxed) == CONTENDED,
                || {},
                |_, _| {},
                deadline,
                false,
            );
            match parked {
                // A fair unlock handed the lock to us: it stayed held, and
                // the grant's Release/Acquire orders the previous holder's
                // critical section before ours.
                Parked::Unparked { token, .. } if token == HANDOFF => return true,
                Parked::Unparked { .. } | Parked::Invalid => state = self.spin(),
                // Our swap may have left the word at 2 with nobody asleep:
                // that costs the holder one spare wake, nothing more.
                Parked::TimedOut => return false,
            }
        }
    }

    /// Releases the lock.
    ///
    /// # Safety
    /// The caller holds the lock.
    #[inline]
    pub unsafe fn release(&self) {
        // Release pairs with the Acquire of the next owner.
        if self.state.swap(UNLOCKED, Ordering::Release) == CONTENDED {
            FutexTable::global().wake(&self.state, 1);
        }
    }

    /// Releases the lock *fairly*: if a thread sleeps on it, the lock is
    /// handed to the oldest sleeper directly and stays held, so no running
    /// thread can barge in ahead of it (the sleeper is woken after the
    /// table's bucket lock is dropped, as every wake is).
    ///
    /// # Safety
    /// The caller holds the lock.
    pub unsafe fn release_fair(&self) {
        // Nobody sleeps (state 1): a plain release is fair. Release as in
        // `release`.
        if self
            .state
            .compare_exchange(LOCKED, UNLOCKED, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
        FutexTable::global().unpark_one(address(&self.state), |found| {
            // Under the bucket lock of the mutex word: a thread about to
            // sleep on it validates the word under this same lock, so it
            // sees what we store here.
            if found.unparked == 0 {
                // Nobody was asleep after all: release. Release as above.
                self.state.store(UNLOCKED, Ordering::Release);
                return GRANTED;
            }
            if !found.have_more {
                // The new owner is the last sleeper: its release need not
                // wake anyone (a thread that sleeps later swaps in 2).
                // Relaxed: the lock stays held; the hand-off's grant
                // (Release) orders our critical section before the next.
                self.state.store(LOCKED, Ordering::Relaxed);
            }
            HANDOFF
        });
    }

    /// If the mutex with futex word `word` is held, marks it contended so
    /// that its holder's unlock wakes a sleeper; returns whether it is held.
    /// The condvar calls it, under the bucket locks of a requeue, before it
    /// moves waiters onto the word (ARCHITECTURE contract 5).
    pub(crate) fn mark_contended_if_held(word: &AtomicU32) -> bool {
        // Relaxed: the word's RMWs have one modification order. If our CAS
        // comes before the holder's release swap, the swap reads CONTENDED
        // and wakes; that wake's fence (B) comes after our requeue's
        // announce and fence (the swap reads from our CAS), so it sees the
        // target bucket counted and serialises with the requeue on the
        // bucket lock. If the swap comes first, we read UNLOCKED and the
        // requeue wakes a waiter instead.
        let mut seen = word.load(Ordering::Relaxed);
        loop {
            match seen {
                UNLOCKED => return false,
                CONTENDED => return true,
                _ => match word.compare_exchange_weak(
                    seen,
                    CONTENDED,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => seen = now,
                },
            }
        }
    }

    /// Threads asleep on this mutex right now (a snapshot, for diagnostics
    /// and tests; it takes the futex table's bucket lock).
    pub fn waiters(&self) -> usize {
        FutexTable::global().queued(&self.state)
    }

    /// Whether the lock is held by someone.
    pub fn is_held(&self) -> bool {
        self.state.load(Ordering::Relaxed) != UNLOCKED
    }
}

// SAFETY: `lock`/`try_lock` grant exclusive ownership (CAS or swap from 0
// with Acquire) until `unlock` releases it with Release.
#[cfg(not(loom))]
unsafe impl lock_api::RawMutex for RawMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = RawMutex::new();
    type Guard = lock_api::GuardNoSend;

    #[inline]
    fn lock(&self) -> Self::Guard {
        self.acquire();
        lock_api::GuardNoSend::new()
    }

    #[inline]
    fn try_lock(&self) -> Option<Self::Guard> {
        self.try_acquire().then(lock_api::GuardNoSend::new)
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
        // Yield only to a sleeper; with nobody asleep there is nobody to be
        // fair to. Relaxed: a hint; a sleeper that arrives just after we
        // looked will get the lock at our next unlock.
        if self.state.load(Ordering::Relaxed) == CONTENDED {
            // SAFETY: the guard proves the lock is held; we take it back
            // before returning, as the trait requires.
            unsafe { self.release_fair() };
            self.acquire();
        }
    }
}

// SAFETY: as for `RawMutex`; the timed forms only add a way to give up.
#[cfg(not(loom))]
unsafe impl lock_api::RawMutexTimed for RawMutex {
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_for(&self, timeout: Duration) -> Option<Self::Guard> {
        self.acquire_timeout(Some(timeout))
            .then(lock_api::GuardNoSend::new)
    }

    fn try_lock_until(&self, deadline: Instant) -> Option<Self::Guard> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        self.acquire_timeout(Some(timeout))
            .then(lock_api::GuardNoSend::new)
    }
}
