//! Taking a [`RawMutex`] from a task: [`RawLock`], the future under
//! [`MutexAsyncExt::lock_async`](super::MutexAsyncExt::lock_async).
//!
//! A task waits in the futex table's bucket list beside the threads, with
//! its waiter record pinned inside this future (`futex::TaskPark`), and
//! keeps the protocol of `raw.rs` ("Why no sleeper is left behind") with
//! the thread's steps mapped onto `poll` and `Drop`:
//!
//! | thread (`acquire_slow`) | task (`RawLock`) |
//! |---|---|
//! | `fetch_or(LOCKED)`, then spin | the same `fetch_or`, no spin: no spinning in `poll` |
//! | set PARKED, park with `validate_park` | the same, at the first poll that finds the lock held |
//! | woken (it owns WAKING): spin for the lock, ask (ASKING), park again at the head | woken (granted `GRANTED`: it owns WAKING): try once, with a CAS that clears WAKING; if the lock is held, park again at the head, clearing WAKING in the validation, and asking the next waking unlock for the lock itself (below) |
//! | granted `HANDOFF`: holds the lock | the same |
//! | timeout: leave under the bucket lock, clear PARKED if last (a grant that won is kept) | drop: the same leave; a grant that won is given up below |
//!
//! # Cancellation
//! Dropped while queued, the future leaves the bucket list in O(1) under
//! the lock of the bucket its record is on, clearing PARKED if it was the
//! last sleeper (contract 12). Dropped after a grant it did not see (or
//! one that won the race with the drop):
//! - `GRANTED`: it owns WAKING, which holds every other sleeper asleep. It
//!   gives WAKING up and passes the wake on
//!   ([`RawMutex::give_up_waking`]): the next sleeper is woken if the lock
//!   is free, or by the holder's unlock.
//! - `HANDOFF`: it holds the lock (a fair unlock, or the bucket's
//!   eventual-fairness period): it releases it with the ordinary unlock,
//!   which wakes the next sleeper.
//!
//! A future never owns WAKING outside those two cases: a poll that sees
//! `GRANTED` either takes the lock or parks again (giving WAKING back)
//! before it returns.
//!
//! # A future that is neither polled nor dropped (async-lock #91)
//! It takes its place at its first poll that finds the lock held. From
//! then on it holds up exactly what FIFO hand-off puts behind it, as a
//! thread asleep in `lock` would:
//! - queued, not chosen: nothing (unlocks wake the sleepers ahead of it,
//!   and it is woken in its turn);
//! - chosen by a waking unlock (`GRANTED`, not yet polled): it owns WAKING,
//!   so the sleepers queued *behind* it stay asleep until it is polled or
//!   dropped; the lock itself stays free, and running threads and tasks
//!   take it as ever;
//! - handed the lock (`HANDOFF`): the lock stays held until the future is
//!   polled (it then returns the guard) or dropped (the lock passes on).
//!
//! # Fairness: a task woken in vain asks for the lock
//! A thread woken in vain spins and asks (ASKING), and the next unlock
//! gives it the lock while it spins. A task cannot spin in `poll`, so it
//! asks when it parks again: its record says so (`Sleeper::Task`'s flag),
//! and the waking unlock that dequeues it hands it the lock itself if the
//! lock is still free (token `HANDOFF`, the same path as the bucket's
//! eventual fairness: `Unparked::be_fair`), as tokio's mutex does at every
//! unlock. Without it a task that holds the lock across an `.await` took
//! it back at once after each unlock, and the task it had woken woke in
//! vain every time (1.8–2.0 wakeups per lock in the lab's `async` held
//! rows). Only a task woken once asks: the first wake stays a plain wake,
//! so a lock rarely contended never idles for a task's poll. The bucket's
//! 0.5 ms eventual-fairness clock is the threads' (a waking unlock that
//! dequeues a thread hands it the lock when the period is over); a task's
//! wake never reads it: asking already bounds the task's wait to one wake
//! in vain, and the clock read at every plain wake was 15% of a lock held
//! across an `.await` (the lab's `async` held rows, issue 25).
//! `unlock_fair` always hands the lock over, to a task or a thread.
//!
//! How many wakes in vain a task takes before it asks is a knob for
//! experiments (`HERDLESS_MUTEX_TUNING=taskask=N`; 0: never, a task then
//! has no bound on its wait while tasks barge). Stop 38 measured it on 2
//! cores (the lab's smol table, held rows, five interleaved runs each,
//! herdless's M locks/s at 4, 16 and 64 held): asking after 1 wake (the
//! default) 1.66, 1.59, 1.57; after 4 wakes 2.05, 1.98, 1.77; never 2.51,
//! 2.35, 2.49, against async-lock's 1.44–2.10 (its wake-in-vain bound is
//! 0.5 ms of starving). The runs swing between regimes (all three locks
//! at 4.0–4.5 in two of the fifteen), so the default stays until the
//! 16-core machine measures it (issue 25). Stop 41, three more pairs on 2
//! cores, all in the regime where smol moves a task between its workers
//! at 0.6–0.75 polls per lock: never 1.74–1.83 M locks/s at 4–64 held,
//! the default 1.55–1.66, async-lock 1.99–2.03 at 4–16 and 1.26–1.30 at
//! 64 (and `RwSem::write_async`, whose queue is the rwsem's, 1.77–1.81).
//!
//! Asking after a time instead of a count, as async-lock's starvation
//! mode does (0.5 ms) and the rwsem's writers do (`HANDOFF_AFTER`), was
//! measured and removed (stop 45): a task asking only once its first wake
//! in vain was 500 µs past. On 2 cores, four interleaved runs of both
//! async mutex tables, smol's held rows went to 0.93–1.72× async-lock at
//! 4–16 held (against 0.75–0.80) but tokio's runtime's to 0.79–1.02×
//! tokio (against 0.93–1.14); on 16 cores, two pairs, tokio's runtime
//! 0.89–1.14× against 0.95–1.17× and smol unchanged. tokio's runtime runs
//! a woken task next on the waking worker (its LIFO slot), so handing it
//! the lock costs little there; smol queues it, and the lock handed to it
//! idles meanwhile. The lock cannot see which a runtime does.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use super::raw::{RawMutex, HANDOFF, LOCKED, PARKED, WAKING};
use super::spin::SpinBudget;
use crate::futex::{address, FutexTable, TaskPark};
use crate::sync::Ordering;

/// Where a [`RawLock`] stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not polled yet.
    Idle,
    /// Queued in the futex table, or granted and the grant not yet seen.
    Queued,
    /// Returned `Ready`: the caller holds the lock.
    Done,
}

/// A task's acquisition of a [`RawMutex`] (from
/// [`RawMutex::lock_async`]): `Ready(())` once the lock is held, which the
/// caller then releases with [`RawMutex::release`]. Dropped before that,
/// it leaves the queue, or passes on the wake or the lock a grant gave it
/// (module docs of `lock_async.rs`). [`MutexAsyncExt`](super::MutexAsyncExt)
/// wraps it into a future of a [`MutexGuard`](crate::MutexGuard).
///
/// ```
/// use herdless::RawMutex;
///
/// let m = RawMutex::new();
/// futures::executor::block_on(m.lock_async());
/// assert!(m.is_held());
/// // SAFETY: the future returned: the lock is ours.
/// unsafe { m.release() };
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct RawLock<'a> {
    mutex: &'a RawMutex,
    state: State,
    /// The task's record, built at the first park; pinned (the future is
    /// never moved once polled, and the record is dropped in place).
    park: TaskPark,
    /// Wakes that found the lock held (the task parked again).
    vain: u32,
}

impl RawMutex {
    /// Takes the lock, as a task: the async form of
    /// [`acquire`](Self::acquire), waiting in the same FIFO queue as the
    /// threads (release with [`release`](Self::release)). [`RawLock`] has
    /// an example.
    #[inline]
    pub fn lock_async(&self) -> RawLock<'_> {
        RawLock {
            mutex: self,
            state: State::Idle,
            park: TaskPark::new(FutexTable::global()),
            vain: 0,
        }
    }

    /// The fast path of a task's first poll: the threads' one `fetch_or`.
    #[inline]
    fn lock_fast(&self) -> bool {
        // Acquire pairs with the Release of the unlock that freed it.
        self.word().fetch_or(LOCKED, Ordering::Acquire) & LOCKED == 0
    }
}

impl RawLock<'_> {
    #[inline]
    fn ready(&mut self) -> Poll<()> {
        self.state = State::Done;
        Poll::Ready(())
    }

    /// The lock was found held (`woken`: false), or a waking unlock chose
    /// this task (`woken`: it owns WAKING): take the lock if it is free,
    /// else park (again, at the head, if woken). Loops only when the word
    /// changed under a CAS or a validation (somebody else made progress),
    /// never to wait.
    #[cold]
    fn contend(&mut self, waker: &Waker, woken: bool) -> Poll<()> {
        let mutex = self.mutex;
        let word = mutex.word();
        let budget = SpinBudget::get();
        let front = woken && budget.front;
        // Asking once woken in vain `task_ask_after` times (module doc).
        let vain = self.vain + u32::from(woken);
        let asks = woken && budget.task_ask_after != 0 && vain >= budget.task_ask_after;
        let mut state = word.load(Ordering::Relaxed);
        loop {
            // A spinning thread may be asking (ASKING), or have been given
            // the lock (HANDED, with LOCKED): a task never asks that way
            // and leaves both alone; HANDED means the lock is held.
            if state & LOCKED == 0 {
                // Free: take it; the woken task gives WAKING up in the same
                // CAS (the new holder's unlock is the one that wakes).
                // Acquire as in `lock_fast`.
                let new = if woken {
                    (state | LOCKED) & !WAKING
                } else {
                    state | LOCKED
                };
                match word.compare_exchange_weak(state, new, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => return self.ready(),
                    Err(now) => state = now,
                }
                continue;
            }
            // Held: announce that we are about to sleep, as a thread does
            // (Relaxed: the park validates under the bucket lock).
            if state & PARKED == 0 {
                if let Err(now) = word.compare_exchange_weak(
                    state,
                    state | PARKED,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    state = now;
                    continue;
                }
            }
            // Under the bucket lock: still held with PARKED set; the woken
            // task hands WAKING back in the same CAS, and the holder's
            // unlock, which comes after it, wakes the head of the queue,
            // which we are about to become (`raw.rs`).
            // SAFETY: `self` is pinned (`poll`'s receiver) and the record
            // is not queued (a grant took it out, or it never was).
            let queued = unsafe {
                self.park.park(
                    address(word),
                    || mutex.validate_park(woken),
                    front,
                    asks,
                    waker,
                )
            };
            if queued {
                self.vain = vain;
                self.state = State::Queued;
                return Poll::Pending;
            }
            // Not queued: the word changed; WAKING (if ours) is still ours.
            state = word.load(Ordering::Relaxed);
        }
    }

    /// Dropped while queued: leave, or pass on what a grant gave us.
    #[cold]
    fn cancel(&mut self) {
        let word = self.mutex.word();
        let granted = self.park.cancel(|_, was_last| {
            if was_last {
                // Under the bucket lock: PARKED is exact.
                RawMutex::clear_parked(word);
            }
        });
        match granted {
            None => {}
            // SAFETY: a hand-off gave us the lock, and no guard was made
            // for it (the future never returned `Ready`).
            Some(token) if token == HANDOFF => unsafe { self.mutex.release() },
            // A waking unlock chose us: we own WAKING.
            Some(_) => self.mutex.give_up_waking(),
        }
    }
}

impl Future for RawLock<'_> {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: the record inside `park` is never moved out of the future
        // (only shared references to it are taken; `Drop` runs in place).
        let this = unsafe { self.get_unchecked_mut() };
        match this.state {
            State::Idle => {
                if this.mutex.lock_fast() {
                    return this.ready();
                }
                this.contend(cx.waker(), false)
            }
            State::Queued => match this.park.poll(cx.waker()) {
                None => Poll::Pending,
                // The lock was handed to us, still held; the grant's
                // Release/Acquire orders the giver's critical section
                // before ours.
                Some(token) if token == HANDOFF => this.ready(),
                // A waking unlock chose us: we own WAKING. Try once.
                Some(_) => this.contend(cx.waker(), true),
            },
            State::Done => panic!("a lock future polled after it completed"),
        }
    }
}

impl Drop for RawLock<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.park.is_queued() {
            self.cancel();
        }
    }
}

impl std::fmt::Debug for RawLock<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawLock")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}
