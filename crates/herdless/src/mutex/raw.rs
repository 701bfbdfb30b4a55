//! The mutex's state word and its protocol: who sets and clears each bit,
//! and why no sleeper is ever left behind.
//!
//! # The state word
//! ```text
//!   bit 0  LOCKED   a thread (or task) holds the lock
//!   bit 1  PARKED   threads (or tasks) sleep in the futex table on this word (exact)
//!   bit 2  WAKING   one woken thread (or task) is awake and trying for the lock
//!   bit 3  ASKING   a thread spun in vain and asks for the lock (one at a time)
//!   bit 4  HANDED   an unlock gave the lock (still LOCKED) to the asker
//!   bit 5  MONITOR  a condvar has waited with this mutex (sticky; read by the spin policy only)
//! ```
//! | bit | set by | cleared by | under the bucket lock? |
//! |---|---|---|---|
//! | LOCKED | `acquire` (`fetch_or`), a slow-path CAS, a hand-off on a sleeper's or the asker's behalf | `release` (`fetch_sub`); the fair release of a word nobody sleeps on | hand-offs to sleepers: yes; others: no |
//! | PARKED | a thread or task about to park (CAS); a condvar moving waiters onto the word | whoever removes the last sleeper (the waking unlock, a fair unlock, the last sleeper leaving on timeout or a dropped task future), and a waking unlock that finds nobody | clear: yes; set: the condvar's yes, the parker's no (its park validates under the lock) |
//! | WAKING | the unlock that decides to wake a sleeper (CAS; it hands the bit to the woken thread or task) | the owner: when it takes the lock (same CAS), when it parks again (its validation), when its task future is dropped (`give_up_waking`); the waking unlock that found nobody | clear on park and on nobody found: yes; others: no |
//! | ASKING | a thread whose spin budget is spent, if ASKING and HANDED are clear (CAS): the WAKING owner, and rare threads (`SpinAsk`, `spin_ask.rs`: which others ask) | the asker (taking the lock, or withdrawing before it parks); the unlock that gives it the lock | no |
//! | HANDED | the unlock that finds ASKING: it takes the lock back for the asker (CAS) | the asker, taking it over | no |
//! | MONITOR | a condvar's first wait with the mutex, by its holder (`fetch_or`) | never | no |
//!
//! # One wake per hand-off, not one per unlock (issue 23)
//! An unlock that finds PARKED set wakes one sleeper only if no thread is
//! already awake for it (WAKING clear) and nobody took the lock in the
//! meantime (LOCKED clear): otherwise the unlock is one `fetch_sub` and
//! nothing else. The woken thread spins for the lock, and either takes it
//! (clearing WAKING in the same CAS) or, if running threads keep taking it
//! first, goes back to sleep at the *head* of the queue (clearing WAKING
//! under the bucket lock, with the lock held by someone whose unlock will
//! then wake it again). This is Go's `sync.Mutex` (`mutexWoken`) and the
//! kernel's `RWSEM_FLAG_HANDOFF`-free fast path, and the reason std's
//! futex mutex holds up at 8–32 threads: there the unlock that finds the
//! contended state wakes one thread, and relocking on the fast path drops
//! the "contended" mark until a sleeper sets it again. The design this
//! replaces woke a sleeper at *every* unlock while anyone slept: on 16
//! cores at 32 threads it slept 1,028 times and took the table's bucket
//! lock 1,451 times per 1,000 acquisitions, against std's 14 sleeps
//! (issue 23), and ran at 0.17× std.
//!
//! PARKED is exact, not a hint: it is cleared under the bucket lock by
//! whoever removes the last sleeper, and a thread sets it before it parks
//! and then validates under that lock that the word still reads LOCKED |
//! PARKED. So an unlock leaves the fast path only when somebody really
//! sleeps, and a spinning newcomer stops spinning exactly when somebody
//! sleeps (so it does not barge past sleepers forever).
//!
//! # Why no sleeper is left behind
//! The invariant: whenever PARKED is set and LOCKED is clear, WAKING is set
//! (its owner is awake and will take the lock, or park again, which it
//! only does with the lock held), or an unlock is between its `fetch_sub`
//! and its look at the word (it will set WAKING and wake, unless somebody
//! took the lock, whose unlock then does).
//! - An unlock clears LOCKED; if it saw PARKED without WAKING it looks
//!   again, and sets WAKING with a CAS while the lock is still free, or
//!   stops because someone holds it or is awake.
//! - The WAKING owner takes the lock with a CAS that clears WAKING: the
//!   new holder's unlock then sees PARKED.
//! - The WAKING owner parks again with a validation, under the bucket lock,
//!   that the word reads LOCKED | PARKED, clearing WAKING in the same CAS.
//!   The holder's unlock comes after that CAS (it read LOCKED), sees PARKED
//!   without WAKING, and takes the bucket lock to wake: after our queueing,
//!   since we hold that lock until we are queued.
//! - A parker validates `LOCKED | PARKED` under the bucket lock, so an
//!   unlock that wakes (and takes that lock) either ran before (the word
//!   changed: the parker does not sleep and retries) or runs after the
//!   parker is queued (and finds it).
//! - The waking unlock dequeues under the bucket lock and clears PARKED
//!   there if it took the last sleeper; if it found nobody (the last
//!   sleeper timed out), it clears WAKING and PARKED there. A parker that
//!   set PARKED and has not validated yet then fails its validation and
//!   tries again.
//!
//! - Tasks (`lock_async.rs`) take the same steps without spinning: a woken
//!   task tries once and otherwise parks again at the head with the same
//!   validation (it never sets ASKING: its record asks the next waking
//!   unlock for the lock instead, which hands it over only if the lock is
//!   still free, the eventual-fairness path below); a task future dropped while it
//!   owns WAKING gives it up and passes the wake on (`give_up_waking`: the
//!   holder's unlock wakes, or it wakes if the lock is free), and one
//!   dropped after a hand-off releases the lock.
//!
//! The loom models in `tests/loom_futex.rs` check these interleavings
//! (`woken_thread_that_loses_the_race_is_woken_again`,
//! `parked_bit_never_strands_a_sleeper`, and the timeout and condvar ones),
//! and those in `tests/loom_async_mutex.rs` the tasks' steps.
//!
//! # Fairness: a thread that spun in vain asks, the next unlock gives
//! Unlocks are unfair: a running thread may take the lock ahead of the
//! woken one, which keeps the lock on one CPU while it is busy (the
//! throughput std and glibc get on many cores, and parking_lot loses). But
//! a woken thread that spins its whole budget without getting the lock
//! sets ASKING and keeps spinning; the next unlock then does not free the
//! lock but gives it to the asker (LOCKED stays set, HANDED says whose it
//! is), which is spinning and takes it at once. This is the Linux mutex's
//! `MUTEX_FLAG_HANDOFF`, set by the first waiter after one failed attempt:
//! the queue moves on at least once per wake, so no sleeper waits behind
//! running threads forever, and the lock is never handed to a thread that
//! is asleep (which would keep it idle for a whole wake-up: a convoy). A
//! strict hand-off to a *sleeper* after it had waited 0.5 ms was tried
//! first: on 16 cores at 64 threads it ran at 0.1× std (issue 23).
//! A woken thread that still fails (its second budget spent too) withdraws
//! the request and goes back to sleep at the head of the queue.
//!
//! Other threads may ask too, once their budget is spent and if nobody
//! else is asking (`spin_ask.rs`, `SpinAsk`: rare threads only, the default;
//! every thread; or none; under loom every thread asks, so
//! the models cover it): the asker gets the lock at the next unlock instead of
//! sleeping, or withdraws after a second budget and sleeps. Only one
//! thread asks at a time (a request needs ASKING and HANDED clear), so
//! HANDED always belongs to the one thread that asked; and an asker
//! withdraws before it parks, so no thread sleeps owning ASKING or HANDED.
//! It is for the occasional locker's tail (on 16 cores, stop 45: its p99
//! beside 15 and 32 busy threads 5.3–5.7 µs with rare threads asking,
//! 19–371 without, std 55–123) and was tried for the slowest busy
//! thread's share (stop 44: the slowest of 16–32 busy threads took
//! 0.34–0.51 of the mean against std's 0.65–0.72, with a CPU of its own
//! and the others' CPU time); what each form cost and bought is in
//! `spin_ask.rs`.
//!
//! A thread that rarely finds a mutex taken (`rare_parker.rs`) sleeps at
//! the head of the queue, and asks first (`SpinAsk::Rare`): one that
//! takes the lock once in a while is handed it at the next unlock, or
//! waits for one wake, not behind every busy thread asleep in the queue.
//! [`unlock_fair`](lock_api::MutexGuard::unlock_fair) hands the lock to the
//! oldest sleeper, still held; and every 0.5 ms per table bucket the unlock
//! that wakes a sleeping thread does the same if the lock is still free
//! (eventual fairness, as parking_lot; a task asks instead, `lock_async.rs`).

use std::num::NonZeroU32;
use std::time::Duration;

use super::rare_parker::RareQuestion;
use super::spin::{SpinBudget, SpinWait};
use crate::deadline::Deadline;
use crate::futex::{address, FutexTable, Parked, Unparked};
use crate::sync::{AtomicU32, Ordering};
use crate::util::waiter::GRANTED;

/// A thread (or a task) holds the lock.
pub(super) const LOCKED: u32 = 1;
/// Threads (or tasks) sleep on the word (exact; see the module docs).
pub(super) const PARKED: u32 = 2;
/// A woken thread (or task) is awake and trying for the lock.
pub(super) const WAKING: u32 = 4;
/// A thread spun its budget in vain and asks for the lock (one at a time).
const ASKING: u32 = 8;
/// An unlock gave the lock, still held, to the asking thread.
const HANDED: u32 = 16;
/// A condvar has waited with this mutex (sticky; `spin.rs`).
pub(super) const MONITOR: u32 = 32;

/// The grant token of a hand-off: "the lock is yours, still held".
pub(crate) const HANDOFF: NonZeroU32 = match NonZeroU32::new(2) {
    Some(token) => token,
    None => unreachable!(),
};

/// The raw mutex. Use it through [`Mutex`](crate::Mutex).
///
/// # Examples
/// Every method (a timed acquire timing out, a fair release to a sleeper):
/// ```
/// let m = herdless::RawMutex::new();
/// // SAFETY (every release below): the releasing thread holds the lock.
/// m.acquire();
/// assert!(m.is_held() && !m.try_acquire());
/// assert!(!m.acquire_timeout(Some(std::time::Duration::from_millis(1))));
/// std::thread::scope(|s| {
///     s.spawn(|| unsafe { m.acquire(); m.release() });
///     while m.waiters() == 0 {
///         std::thread::yield_now(); // until the thread sleeps on the lock
///     }
///     unsafe { m.release_fair() }; // hands it to the sleeper, still held
/// });
/// assert!(m.try_acquire());
/// unsafe { m.release() };
/// ```
#[derive(Debug)]
pub struct RawMutex {
    state: AtomicU32,
}

impl Default for RawMutex {
    fn default() -> Self {
        Self::new()
    }
}

impl RawMutex {
    /// An unlocked mutex. Examples: [`RawMutex`].
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

    /// Tries once to take the lock, without spinning or sleeping; returns
    /// whether it did. It may be free with sleepers queued: then they stay
    /// queued and PARKED stays set. Examples: [`RawMutex`].
    #[inline]
    pub fn try_acquire(&self) -> bool {
        // Look first: a try-lock loop on a held lock then only reads the
        // line. Acquire (of the fetch_or) pairs with the Release of the
        // unlock that freed it.
        self.state.load(Ordering::Relaxed) & LOCKED == 0
            && self.state.fetch_or(LOCKED, Ordering::Acquire) & LOCKED == 0
    }

    /// Takes the lock, spinning briefly, then sleeping if it is held. Examples: [`RawMutex`].
    #[inline]
    pub fn acquire(&self) {
        // One `lock bts` whether or not others sleep (PARKED, WAKING stay);
        // Acquire as in `try_acquire`. std's `cmpxchg` from 0 first: 0.31–
        // 0.49× at 8–32 threads on 16 cores (stop 41; fails if any sleep).
        if self.state.fetch_or(LOCKED, Ordering::Acquire) & LOCKED != 0 {
            self.acquire_slow(Deadline::Never, false);
        }
    }

    /// Takes the lock for a thread that a waking unlock woke off this
    /// word (a condvar waiter moved onto it): that thread owns WAKING.
    pub(crate) fn acquire_woken(&self) {
        self.acquire_slow(Deadline::Never, true);
    }

    /// Takes the lock unless `timeout` elapses first; returns whether it
    /// did. `None` and `Duration::MAX` wait forever; zero tries once (no
    /// spin, no sleep). Examples: [`RawMutex`].
    pub fn acquire_timeout(&self, timeout: Option<Duration>) -> bool {
        if self.try_acquire() {
            return true;
        }
        if timeout == Some(Duration::ZERO) {
            return false;
        }
        self.acquire_slow(Deadline::after(timeout), false)
    }

    /// Spins, then parks until the lock is taken or `deadline` passes.
    /// `woken`: the caller owns WAKING (a waking unlock woke it).
    #[cold]
    fn acquire_slow(&self, deadline: Deadline, mut woken: bool) -> bool {
        let key = address(&self.state);
        let budget = SpinBudget::get();
        let mut spin = SpinWait::new();
        // `asked`: we own ASKING (or the HANDED it became); `ask_spent`:
        // we asked and withdrew since we last slept, so we park next.
        let mut asked = false;
        let mut ask_spent = false;
        let mut rare = RareQuestion::new(budget, woken);
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if asked && state & HANDED != 0 {
                // An unlock gave us the lock (module docs, "Fairness"): only
                // the asker takes HANDED, and nobody asks while it is set.
                // Acquire pairs with the giver's AcqRel CAS: its critical
                // section, and those of any thread that held the lock in
                // between, happen-before ours.
                let new = state & !(HANDED | if woken { WAKING } else { 0 });
                match self.state.compare_exchange_weak(
                    state,
                    new,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => state = now,
                }
                continue;
            }
            if state & LOCKED == 0 {
                // Free (sleepers may be queued: PARKED stays as it is). The
                // woken thread gives WAKING up, and an asker ASKING, in the
                // same CAS: from now on the holder's unlock is the one that
                // wakes. Acquire as in `try_acquire`.
                let mut new = state | LOCKED;
                if woken {
                    new &= !WAKING;
                }
                if asked {
                    new &= !ASKING;
                }
                match self.state.compare_exchange_weak(
                    state,
                    new,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return true,
                    Err(now) => state = now,
                }
                continue;
            }
            // Spin while nobody sleeps, past sleepers where the budget says
            // so (every machine's default, `spin.rs`: the askers keep it
            // fair), and always when we are the woken thread (the unlocks
            // count on it to be awake, `spin.rs`) or the asker (the unlock
            // that gives it the lock counts on it to take it).
            let alone = state & PARKED == 0;
            let may_spin = woken || asked || alone || budget.spin_past_sleepers;
            // A rare thread parks at the head of a plain mutex's queue
            // instead of yielding (`rare_parker.rs`).
            let monitor = state & MONITOR != 0;
            let may_yield = (woken || state & WAKING != 0 || !budget.waking_yield.on(monitor))
                && (woken || monitor || !spin.yields_next(budget) || !rare.peek());
            let will_ask = woken && !asked && !ask_spent && budget.ask;
            if may_spin && spin.spin(budget, may_yield, will_ask, alone) {
                state = self.state.load(Ordering::Relaxed);
                continue;
            }
            if !woken && !asked && state & (ASKING | HANDED) != 0 && rare.waits_for_turn() {
                // Another thread asks: a rare one spins for its turn
                // (`rare_parker.rs`, an experiment) rather than sleep.
                spin = SpinWait::new();
                state = self.state.load(Ordering::Relaxed);
                continue;
            }
            if !asked
                && !ask_spent
                && state & (ASKING | HANDED) == 0
                && budget.asks(woken, || rare.ask())
            {
                // Spun in vain, and nobody else asks (or has been given
                // the lock and not taken it yet): ask the next unlock for
                // the lock, and spin for it once more. Relaxed: the giver's
                // CAS and our take carry the ordering. (A rare thread's
                // question records a sleep whether or not it then sleeps.)
                match self.state.compare_exchange_weak(
                    state,
                    state | ASKING,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        asked = true;
                        spin = SpinWait::new();
                        state |= ASKING;
                    }
                    Err(now) => state = now,
                }
                continue;
            }
            if asked {
                // Spun in vain once more: withdraw the request before we
                // sleep (HANDED is not set: we looked at the top), so that
                // no unlock gives the lock to a sleeping thread. Relaxed:
                // ASKING carries no data; an unlock that read it before
                // this CAS finds it gone and unlocks as usual.
                match self.state.compare_exchange_weak(
                    state,
                    state & !ASKING,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        asked = false;
                        ask_spent = true;
                        state &= !ASKING;
                    }
                    Err(now) => state = now,
                }
                continue;
            }
            // Announce that we are about to sleep: the holder's unlock must
            // look at the word again. Relaxed: the park validates under the
            // bucket lock, which orders it against the waking unlock.
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
                // unlock that ran since changed the word: look again). The
                // woken thread hands WAKING back in the same CAS: the
                // holder's unlock, which comes after it, then wakes the
                // head of the queue, which we are about to become.
                || self.validate_park(woken),
                || {},
                |_, was_last| {
                    if was_last {
                        // The last sleeper gave up: PARKED is exact.
                        Self::clear_parked(&self.state);
                    }
                },
                budget.park_how(deadline, woken, !woken && rare.ask()),
            );
            match parked {
                // The unlocker handed us the lock (a fair unlock, or the
                // bucket's fairness period was over): held, and the grant's
                // Release/Acquire orders its critical section before ours.
                Parked::Unparked { token, .. } if token == HANDOFF => return true,
                // A waking unlock set WAKING for us and woke us.
                Parked::Unparked { .. } => woken = true,
                // Not queued: WAKING (if ours) was not given back.
                Parked::Invalid => {}
                Parked::TimedOut => return false,
            }
            if !matches!(parked, Parked::Invalid) {
                ask_spent = false;
            }
            spin = SpinWait::new();
            state = self.state.load(Ordering::Relaxed);
        }
    }

    /// A parker's validation, under the word's bucket lock: the lock is
    /// held and PARKED set; the woken thread clears WAKING in the same CAS.
    /// A parker never owns ASKING (it withdrew its request). A task parks
    /// with the same validation (`lock_async.rs`).
    pub(super) fn validate_park(&self, woken: bool) -> bool {
        // Relaxed: the bucket lock orders this against the waking unlock's
        // dequeue, and the holder's `fetch_sub` reads our CAS (coherence).
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & (LOCKED | PARKED) != LOCKED | PARKED {
                return false;
            }
            if !woken {
                return true;
            }
            match self.state.compare_exchange_weak(
                state,
                state & !WAKING,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    /// Releases the lock. Examples: [`RawMutex`].
    ///
    /// # Safety
    /// The caller holds the lock.
    #[inline]
    pub unsafe fn release(&self) {
        // Release pairs with the next owner's Acquire.
        let state = self.state.fetch_sub(LOCKED, Ordering::Release);
        if state & ASKING != 0 {
            self.give_to_asker();
        } else if state & (PARKED | WAKING) == PARKED {
            self.wake_slow();
        }
    }

    /// The unlock that found the woken thread asking: takes the lock back
    /// on its behalf (unless somebody took it since: then that holder's
    /// unlock comes here) and marks it HANDED, still LOCKED; the asker,
    /// spinning, takes it over. If the asker gave up meanwhile (it parked,
    /// or took the lock), this is an ordinary unlock.
    #[cold]
    fn give_to_asker(&self) {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & LOCKED != 0 {
                return;
            }
            if state & ASKING == 0 {
                if state & (PARKED | WAKING) == PARKED {
                    self.wake_slow();
                }
                return;
            }
            // AcqRel: Acquire for a thread that took and released the lock
            // since our unlock (its Release); Release publishes all of it,
            // and our own critical section, to the asker.
            match self.state.compare_exchange_weak(
                state,
                (state | LOCKED | HANDED) & !ASKING,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }

    /// The unlock that saw sleepers and nobody awake for them: looks again
    /// and, if the lock is still free and still nobody is awake, takes
    /// WAKING and wakes the oldest sleeper (module docs).
    #[cold]
    fn wake_slow(&self) {
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            // Taken since (its holder's unlock wakes), somebody awake, or
            // nobody asleep any more: nothing to do.
            if state & (LOCKED | WAKING) != 0 || state & PARKED == 0 {
                return;
            }
            // Relaxed: WAKING carries no data; the woken thread takes the
            // lock with an Acquire CAS.
            match self.state.compare_exchange_weak(
                state,
                state | WAKING,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => state = now,
            }
        }
        FutexTable::global().unpark_one(address(&self.state), |found: Unparked| {
            // Under the bucket lock of the word (module docs).
            if found.unparked == 0 {
                // Nobody asleep (the last sleeper timed out): PARKED is
                // exact, and WAKING has no owner. A parker that set PARKED
                // and has not validated yet fails and tries again.
                self.state.fetch_and(!(WAKING | PARKED), Ordering::Relaxed);
                return GRANTED;
            }
            if !found.have_more {
                Self::clear_parked(&self.state);
            }
            if found.be_fair {
                // Hand the lock itself over if it is still free: the woken
                // thread then owns the lock, and WAKING is nobody's.
                // Acquire: a thread that took and released the lock since
                // our unlock published its critical section with Release;
                // our grant (Release) passes it on to the woken thread.
                let mut state = self.state.load(Ordering::Relaxed);
                while state & LOCKED == 0 {
                    match self.state.compare_exchange_weak(
                        state,
                        (state | LOCKED) & !WAKING,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return HANDOFF,
                        Err(now) => state = now,
                    }
                }
            }
            // The woken thread owns WAKING now.
            GRANTED
        });
    }

    /// A woken waiter that will not try for the lock (a task's future,
    /// dropped after a waking unlock chose it) gives WAKING up and passes
    /// the wake on, keeping "Why no sleeper is left behind": with the lock
    /// held, the holder's unlock comes after this clear and wakes; with it
    /// free and sleepers left, this is the unlock in flight and does what
    /// the waking unlock does. The caller owns WAKING (a spinning thread's
    /// ASKING or HANDED, if set, is left to it: HANDED comes with LOCKED).
    #[cold]
    pub(crate) fn give_up_waking(&self) {
        // Relaxed: WAKING carries no data (as in `wake_slow`).
        let state = self.state.fetch_and(!WAKING, Ordering::Relaxed);
        debug_assert!(state & WAKING != 0, "WAKING given up by a non-owner");
        if state & (LOCKED | PARKED) == PARKED {
            self.wake_slow();
        }
    }

    /// Threads and tasks asleep on this mutex right now (a snapshot, for
    /// diagnostics and tests; it takes the futex table's bucket lock).
    /// Examples: [`RawMutex`].
    pub fn waiters(&self) -> usize {
        FutexTable::global().queued(&self.state)
    }

    /// Whether the lock is held by someone. Examples: [`RawMutex`].
    pub fn is_held(&self) -> bool {
        self.state.load(Ordering::Relaxed) & LOCKED != 0
    }
}
