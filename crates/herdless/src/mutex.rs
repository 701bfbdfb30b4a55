//! A mutual-exclusion lock with `lock_api` guards, sleeping in the
//! [`FutexTable`]: use it as `parking_lot::Mutex` (same API, plus
//! `unlock_fair`/`bump` and timed locks).
//!
//! Seed lineage: 004 (its sleepers park in the futex table, whose
//! waiter-count check keeps wakes that find nobody lock-free) and 001 (its
//! unlock wakes after the table's bucket lock is dropped).
//!
//! # The state word (parking_lot's raw mutex)
//! ```text
//!   bit 0  LOCKED   a thread holds the lock
//!   bit 1  PARKED   threads sleep in the table on this word (exact)
//! ```
//! | bit | set by | cleared by | under the bucket lock? |
//! |---|---|---|---|
//! | LOCKED | the fast path (CAS 0 -> 1), a slow-path CAS | `unlock` (CAS 1 -> 0, or the slow unlock's store) | slow unlock: yes |
//! | PARKED | a thread about to park (CAS); a condvar moving waiters onto the word | the unlock that wakes the last sleeper; the last sleeper leaving on timeout | clear: yes; set: the condvar's yes, the parker's no (its park validates under the lock) |
//!
//! PARKED is exact, not a "sleepers may exist" hint: it is cleared under
//! the bucket lock by whoever removes the last sleeper, and a thread sets
//! it before it parks and then validates under that lock that the word
//! still reads LOCKED | PARKED. So an unlock takes the slow path only when
//! somebody really sleeps, and a spinning thread stops spinning exactly
//! when somebody sleeps (so it does not barge past sleepers forever).
//! The 3-state word this replaces ("2: sleepers may exist", relocked as 2
//! after every wake) stayed 2 after the last sleeper left; the lab's
//! `locks` experiment counted its cost at 2–32 threads on 2 CPUs: 11–30
//! futex-table parks and 19 wakes that found nobody per 1,000 operations,
//! and 0.3–0.7× parking_lot's throughput.
//!
//! # Why no sleeper is left behind
//! A parker validates `state == LOCKED | PARKED` under the bucket lock, so
//! an unlock (which, seeing PARKED, takes that lock to wake) either ran
//! before (the word changed: the parker does not sleep and retries) or runs
//! after the parker is queued (and finds it). The unlock stores the new
//! word under the same lock: PARKED stays set exactly when sleepers remain
//! (`have_more`). Loom models in `tests/loom_futex.rs`.
//!
//! # Spinning, fairness
//! A thread that finds the lock held spins briefly (2, 4, 8 spin-loop
//! hints) then yields the CPU up to 7 times (parking_lot's `SpinWait`),
//! but only while nobody sleeps; then it parks. Unlocks are unfair (a
//! running thread may take the lock ahead of a woken one: no convoy), but
//! every 0.5 ms per table bucket an unlock that wakes a sleeper hands it
//! the lock directly (eventual fairness, as parking_lot), and
//! [`unlock_fair`](lock_api::MutexGuard::unlock_fair) always does.

use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

use std::num::NonZeroU32;

use crate::deadline::Deadline;
use crate::futex::{address, FutexTable, Parked, Unparked};
use crate::sync::{AtomicU32, Ordering};
use crate::util::waiter::GRANTED;

/// A thread holds the lock.
const LOCKED: u32 = 1;
/// Threads sleep on the word (exact; see the module docs).
const PARKED: u32 = 2;

/// The grant token of a hand-off: "the lock is yours, still held".
pub(crate) const HANDOFF: NonZeroU32 = match NonZeroU32::new(2) {
    Some(token) => token,
    None => unreachable!(),
};

/// Spin, then yield, then give up: four rounds of exponential spinning (1,
/// 2, 4, 8 spin-loop hints), then up to ten `yield_now`. parking_lot_core's
/// `SpinWait` is the model (2, 4, 8, then seven yields). On 2 CPUs with
/// 8–32 threads, yielding lets the holder run instead of burning its CPU
/// (the lab's `locks` experiment: with std's 100 spinning loads instead,
/// 1.4× the CPU per operation at 32 threads, and convoys). The longer
/// budget was measured against parking_lot's exact one (lab README,
/// `locks`, three interleaved runs each): 1/0 rows 0.79–0.95× parking_lot
/// against 0.85–0.97×, but 5/50 rows 1.16–1.46× against 1.0–1.24× and
/// 0.92–1.42× std against 0.65–1.05×.
struct SpinWait {
    rounds: u32,
}

impl SpinWait {
    const fn new() -> Self {
        SpinWait { rounds: 0 }
    }

    /// Spins or yields once; `false` once the budget is spent (time to
    /// park). Under loom never spins: loom explores the parking paths.
    fn spin(&mut self) -> bool {
        if cfg!(loom) || self.rounds >= 14 {
            return false;
        }
        if self.rounds < 4 {
            for _ in 0..1u32 << self.rounds {
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
        self.rounds += 1;
        true
    }
}

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
/// A [`MutexGuard`] narrowed to a part of the data by `MutexGuard::map`.
///
/// ```
/// use herdless::{MappedMutexGuard, Mutex, MutexGuard};
///
/// let pair = Mutex::new((1, String::from("one")));
/// let mut name: MappedMutexGuard<'_, String> = MutexGuard::map(pair.lock(), |p| &mut p.1);
/// name.push('!');
/// drop(name); // the whole mutex is released
/// assert_eq!(pair.lock().1, "one!");
/// ```
#[cfg(not(loom))]
pub type MappedMutexGuard<'a, T> = lock_api::MappedMutexGuard<'a, RawMutex, T>;

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
            state: AtomicU32::new(0),
        }
    }

    /// An unlocked mutex.
    #[cfg(loom)]
    pub fn new() -> Self {
        RawMutex {
            state: AtomicU32::new(0),
        }
    }

    /// The futex word; the condvar moves its waiters onto it.
    pub(crate) fn word(&self) -> &AtomicU32 {
        &self.state
    }

    /// Tries once to take the lock (it may be free with sleepers queued:
    /// then they stay queued and PARKED stays set).
    #[inline]
    pub fn try_acquire(&self) -> bool {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & LOCKED != 0 {
                return false;
            }
            // Acquire pairs with the Release of the unlock that freed it.
            match self.state.compare_exchange_weak(
                state,
                state | LOCKED,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    /// Takes the lock, sleeping if needed.
    #[inline]
    pub fn acquire(&self) {
        // Acquire as in `try_acquire`.
        if self
            .state
            .compare_exchange_weak(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.acquire_slow(Deadline::Never);
        }
    }

    /// Takes the lock unless `timeout` elapses first. `None` and
    /// `Duration::MAX` wait forever; zero tries once (no spin, no sleep).
    pub fn acquire_timeout(&self, timeout: Option<Duration>) -> bool {
        if self.try_acquire() {
            return true;
        }
        if timeout == Some(Duration::ZERO) {
            return false;
        }
        self.acquire_slow(Deadline::after(timeout))
    }

    /// Spins, then parks until the lock is taken or `deadline` passes.
    #[cold]
    fn acquire_slow(&self, deadline: Deadline) -> bool {
        let key = address(&self.state);
        let mut spin = SpinWait::new();
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & LOCKED == 0 {
                // Free (sleepers may be queued: PARKED stays as it is).
                // Acquire as in `try_acquire`.
                match self.state.compare_exchange_weak(
                    state,
                    state | LOCKED,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => state = now,
                }
                continue;
            }
            // Spin only while nobody sleeps: past a sleeper, a spinner
            // would take the lock ahead of it at every unlock.
            if state & PARKED == 0 && spin.spin() {
                state = self.state.load(Ordering::Relaxed);
                continue;
            }
            // Announce that we are about to sleep: the holder's unlock must
            // take the slow path. Relaxed: the park validates under the
            // bucket lock, which orders it against that unlock.
            if state & PARKED == 0 {
                if let Err(now) = self.state.compare_exchange_weak(
                    state,
                    state | PARKED,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    state = now;
                    continue;
                }
            }
            let parked = FutexTable::global().park(
                key,
                // Under the bucket lock: still held with PARKED set (an
                // unlock that ran since changed the word: look again).
                || self.state.load(Ordering::Relaxed) == LOCKED | PARKED,
                || {},
                |_, was_last| {
                    if was_last {
                        // The last sleeper gave up: PARKED is exact.
                        Self::clear_parked(&self.state);
                    }
                },
                deadline,
                false,
            );
            match parked {
                // The unlocker handed us the lock (fair unlock, or the
                // bucket's fairness period was over): held, and the grant's
                // Release/Acquire orders its critical section before ours.
                Parked::Unparked { token, .. } if token == HANDOFF => return true,
                Parked::Unparked { .. } | Parked::Invalid => {}
                Parked::TimedOut => return false,
            }
            spin = SpinWait::new();
            state = self.state.load(Ordering::Relaxed);
        }
    }

    /// Releases the lock.
    ///
    /// # Safety
    /// The caller holds the lock.
    #[inline]
    pub unsafe fn release(&self) {
        // SAFETY: the caller holds the lock.
        unsafe { self.release_as(false) }
    }

    /// Releases the lock *fairly*: if a thread sleeps on it, the lock is
    /// handed to the oldest sleeper directly and stays held, so no running
    /// thread can barge in ahead of it (the sleeper is woken after the
    /// table's bucket lock is dropped, as every wake is).
    ///
    /// # Safety
    /// The caller holds the lock.
    pub unsafe fn release_fair(&self) {
        // SAFETY: the caller holds the lock.
        unsafe { self.release_as(true) }
    }

    /// Nobody sleeps: one CAS; otherwise the slow path, `fair` or not.
    ///
    /// # Safety
    /// The caller holds the lock.
    #[inline]
    unsafe fn release_as(&self, fair: bool) {
        // Release pairs with the next owner's Acquire.
        if self
            .state
            .compare_exchange(LOCKED, 0, Ordering::Release, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
        self.release_slow(fair);
    }

    /// The unlock with PARKED set: under the bucket lock, wake the oldest
    /// sleeper and store the new word (PARKED kept exactly when sleepers
    /// remain). With `fair`, or when the bucket's fairness period is over,
    /// the lock passes to the woken thread still held.
    #[cold]
    fn release_slow(&self, fair: bool) {
        FutexTable::global().unpark_one(address(&self.state), |found: Unparked| {
            // Under the bucket lock of the word: a parker validates the word
            // under this same lock, so it sees what we store here.
            let parked = if found.have_more { PARKED } else { 0 };
            if found.unparked != 0 && (fair || found.be_fair) {
                // Still LOCKED: the woken thread owns it (token HANDOFF).
                // Relaxed: the grant (Release) publishes our critical
                // section to the new owner.
                self.state.store(LOCKED | parked, Ordering::Relaxed);
                return HANDOFF;
            }
            // Release pairs with the next owner's Acquire.
            self.state.store(parked, Ordering::Release);
            GRANTED
        });
    }

    /// If the mutex with futex word `word` is held, marks it PARKED so that
    /// its holder's unlock takes the slow path and wakes a sleeper; returns
    /// whether it is held. The condvar calls it under the bucket locks of a
    /// requeue, before it moves waiters onto the word (ARCHITECTURE
    /// contract 5).
    pub(crate) fn mark_parked_if_locked(word: &AtomicU32) -> bool {
        // Relaxed: the holder's unlock is a CAS LOCKED -> 0 that fails once
        // PARKED is set, and its slow path takes the word's bucket lock,
        // which we hold: it runs after our requeue and finds the waiters.
        // If the unlock's CAS came first, we read the lock free and the
        // requeue wakes a waiter instead.
        let mut state = word.load(Ordering::Relaxed);
        loop {
            if state & LOCKED == 0 {
                return false;
            }
            if state & PARKED != 0 {
                return true;
            }
            match word.compare_exchange_weak(
                state,
                state | PARKED,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    /// Marks the word PARKED after a condvar moved waiters onto a free
    /// mutex: whoever takes it next unlocks through the slow path and
    /// wakes them. Called under the word's bucket lock.
    pub(crate) fn mark_parked(word: &AtomicU32) {
        // Relaxed: as in `mark_parked_if_locked`.
        word.fetch_or(PARKED, Ordering::Relaxed);
    }

    /// Clears PARKED when the word's last sleeper left on a timeout; the
    /// caller holds the word's bucket lock.
    pub(crate) fn clear_parked(word: &AtomicU32) {
        // Relaxed: under the bucket lock, as every clear.
        word.fetch_and(!PARKED, Ordering::Relaxed);
    }

    /// Threads asleep on this mutex right now (a snapshot, for diagnostics
    /// and tests; it takes the futex table's bucket lock).
    pub fn waiters(&self) -> usize {
        FutexTable::global().queued(&self.state)
    }

    /// Whether the lock is held by someone.
    pub fn is_held(&self) -> bool {
        self.state.load(Ordering::Relaxed) & LOCKED != 0
    }
}

// SAFETY: `lock`/`try_lock` grant exclusive ownership (a CAS setting LOCKED
// with Acquire, or a hand-off grant) until `unlock` releases it with
// Release (or hands it over with a grant).
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
        if self.state.load(Ordering::Relaxed) & PARKED != 0 {
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
