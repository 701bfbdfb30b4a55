//! A condition variable for [`Mutex`](crate::Mutex) guards: no spurious
//! wakeups, truthful notify counts, and `notify_all` that requeues instead
//! of waking a herd.
//!
//! Use it as `parking_lot::Condvar` or `std::sync::Condvar`: wait with a
//! guard, loop on your condition, notify after changing it. `notify_one`
//! returns whether it woke (or requeued) a waiter and `notify_all` how
//! many, and a wait returns only when notified or timed out: loops like
//! `while !cv.notify_one() {}` work. Seed lineage: 004 (the futex table
//! it sleeps in) and 001 (no herd: waiters are moved to the mutex, not all
//! woken to fight over it).
//!
//! # How it works (parking_lot's condvar on the futex table)
//! A waiter parks on the condvar's own address in the
//! [`FutexTable`]. Under the bucket lock it records in
//! `state` which mutex it uses, queues itself, and only *then* releases
//! the mutex (`before_sleep`). So a notifier that changed the condition
//! under the mutex always finds it queued: no sequence counter, and no
//! wakeup that was not a notification.
//! - `notify_one` wakes the oldest waiter; if the waiter's mutex is held
//!   (typically by the notifier) it is *moved* onto the mutex instead
//!   ("wait morphing"), to be woken by the unlock it would otherwise sleep
//!   on right after waking.
//! - `notify_all` wakes every waiter once. With the mutex free: all with
//!   one system call (`broadcast.rs`), or where that is off (no
//!   `futex_waitv`, `HERDLESS_CONDVAR_BROADCAST=0`) in a cascade, each
//!   woken waiter waking the next few (`cascade.rs`). With it held: the
//!   cascade on many CPUs; on two, it moves them all onto the mutex, whose
//!   unlocks wake them one by one, each when the mutex is free for it.
//!
//! `state` holds the address of the mutex word the queued waiters use,
//! `NO_WAITERS` when none is queued, or `MIXED`. It is written only
//! under the condvar's bucket lock (by a queueing waiter, a timed-out last
//! waiter, and the notifies), so every decision made under that lock sees
//! the waiters as they are: a waiter using a second mutex for the first
//! time turns `state` to `MIXED` before it is queued, and a `notify_all`
//! that finds `MIXED` under the lock wakes everybody rather than moving
//! anyone onto the wrong mutex (`parking_lot` panics instead). The loom
//! model `a_waiter_on_a_second_mutex_is_never_requeued_onto_the_first`
//! checks it.
//!
//! # Why nobody stalls on the mutex word (ARCHITECTURE contract 5)
//! Waiters moved onto the mutex word are sleepers of the mutex like any
//! other, and its PARKED bit is exact: an unlock that sees PARKED wakes
//! the oldest sleeper and keeps PARKED while more remain. A notify that
//! moves waiters onto a *held* mutex sets PARKED first (under the bucket
//! locks), so the holder's unlock wakes the first of them; onto a *free*
//! mutex it wakes one waiter and moves the rest, then sets PARKED, so the
//! woken waiter's unlock (or whoever takes the mutex first) wakes the next.
//!
//! # Why a notifier that skips the lock misses nobody it must see
//! `notify_*` first reads `state` without a lock and returns at once if it
//! is `NO_WAITERS`. A waiter stores its mutex into `state` under the bucket
//! lock *before* it releases the mutex; a notifier that changed the
//! condition holding that mutex acquired it after the waiter's release, so
//! it reads the waiter's store (or a later one, which is `NO_WAITERS` only
//! once that waiter has left). A notify that does not hold the mutex races
//! the wait, and may be ordered before it.

mod broadcast;
mod cascade;

use std::time::Duration;
#[cfg(not(loom))]
use std::time::Instant;

use crate::deadline::Deadline;
use crate::futex::{address, FutexTable, ParkHow, Parked, RequeueOp};
use crate::mutex::{RawMutex, HANDOFF};
use crate::sync::{AtomicU32, AtomicUsize, Ordering};
use crate::util::waiter::GRANTED;

/// `state`: no waiter is queued.
const NO_WAITERS: usize = 0;
/// `state`: the queued waiters use more than one mutex: `notify_all` wakes
/// them all instead of requeueing.
const MIXED: usize = usize::MAX;

/// The raw condvar. Use it through [`Condvar`].
///
/// Use it directly to pair a condition variable with a bare [`RawMutex`]
/// (no data inside, no guard): the waiter holds the mutex, and the wait
/// releases it and takes it back.
///
/// # Examples
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use herdless::{RawCondvar, RawMutex};
///
/// let (mutex, cv, ready) = (RawMutex::new(), RawCondvar::new(), AtomicBool::new(false));
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         mutex.acquire();
///         ready.store(true, Ordering::Relaxed); // the condition, under the mutex
///         cv.notify_one_raw();
///         // SAFETY: this thread holds the mutex.
///         unsafe { mutex.release() };
///     });
///     mutex.acquire();
///     while !ready.load(Ordering::Relaxed) {
///         // SAFETY: this thread holds the mutex; the wait gives it back.
///         let timed_out = unsafe { cv.wait_raw(&mutex, None) };
///         assert!(!timed_out);
///     }
///     // SAFETY: held again after the wait.
///     unsafe { mutex.release() };
/// });
/// ```
#[derive(Debug)]
pub struct RawCondvar {
    state: AtomicUsize,
    /// Bumped by a broadcast `notify_all`, which then wakes its sleepers
    /// (`broadcast.rs`); unused where the broadcast is off.
    epoch: AtomicU32,
    /// Whether this condvar broadcasts: a loom model's choice
    /// ([`RawCondvar::with_broadcast`]).
    #[cfg(loom)]
    broadcast: bool,
}

/// A condition variable for [`Mutex`](crate::Mutex) guards.
///
/// The methods are `lock_api::Condvar`'s (`wait`, `wait_while`,
/// `wait_for`, `wait_until`, `notify_one`, `notify_all`). A wait returns
/// only when notified or timed out (no spurious wakeups), `notify_one`
/// returns whether it reached a waiter and `notify_all` how many. One
/// condvar may serve waiters that use different mutexes: where
/// parking_lot's panics, this one wakes them instead of moving them onto a
/// mutex.
///
/// # Examples
/// A flag set under the mutex, waited for in a loop:
/// ```
/// use std::sync::Arc;
/// let pair = Arc::new((herdless::Mutex::new(false), herdless::Condvar::new()));
/// let pair2 = pair.clone();
/// let t = std::thread::spawn(move || {
///     *pair2.0.lock() = true;
///     pair2.1.notify_all();
/// });
/// let mut ready = pair.0.lock();
/// while !*ready {
///     pair.1.wait(&mut ready);
/// }
/// t.join().unwrap();
/// ```
///
/// The results say whom a notify reached, and a timed wait says whether it
/// timed out:
/// ```
/// use std::time::Duration;
/// use herdless::{Condvar, Mutex};
///
/// let (mutex, cv) = (Mutex::new(()), Condvar::new());
/// assert!(!cv.notify_one(), "nobody waits");
/// let mut guard = mutex.lock();
/// assert!(cv.wait_for(&mut guard, Duration::from_millis(1)).timed_out());
/// drop(guard);
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         // One wait each, no loop: only a notification ends it.
///         s.spawn(|| cv.wait(&mut mutex.lock()));
///     }
///     let mut woken = 0;
///     while woken < 2 {
///         woken += cv.notify_all(); // 0 until a waiter has queued
///         std::thread::yield_now();
///     }
/// });
/// ```
#[cfg(not(loom))]
pub type Condvar = lock_api::Condvar<RawCondvar>;

impl Default for RawCondvar {
    fn default() -> Self {
        Self::new()
    }
}

impl RawCondvar {
    /// A condvar nobody waits on (`const`: usable in a `static`).
    ///
    /// # Examples
    /// ```
    /// static READY: herdless::RawCondvar = herdless::RawCondvar::new();
    /// assert!(!READY.notify_one_raw());
    /// assert_eq!(READY.notify_all_raw(), 0);
    /// ```
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        RawCondvar {
            state: AtomicUsize::new(NO_WAITERS),
            epoch: AtomicU32::new(0),
        }
    }

    /// A condvar nobody waits on.
    #[cfg(loom)]
    pub fn new() -> Self {
        RawCondvar {
            state: AtomicUsize::new(NO_WAITERS),
            epoch: AtomicU32::new(0),
            broadcast: false,
        }
    }

    /// A condvar whose `notify_all` to a free mutex broadcasts (outside
    /// loom, the default where the kernel can), for the models.
    #[cfg(loom)]
    pub fn with_broadcast() -> Self {
        RawCondvar {
            broadcast: true,
            ..Self::new()
        }
    }

    /// The key the waiters park on: the condvar's own address.
    fn key(&self) -> usize {
        &self.state as *const AtomicUsize as usize
    }

    /// Unlocks `mutex`, waits for a notification or the timeout, relocks.
    /// Returns `true` if the wait timed out: no notification came before
    /// the deadline (a waiter already moved onto the mutex by a notify
    /// counts as notified, even if its deadline passes before it gets the
    /// mutex back). `None` and `Duration::MAX` wait forever; a zero
    /// timeout still releases and retakes the mutex.
    ///
    /// # Safety
    /// The caller holds `mutex`.
    ///
    /// # Examples
    /// A wait nobody notifies times out, and holds the mutex again:
    /// ```
    /// use std::time::Duration;
    /// use herdless::{RawCondvar, RawMutex};
    ///
    /// let (mutex, cv) = (RawMutex::new(), RawCondvar::new());
    /// mutex.acquire();
    /// // SAFETY: this thread holds the mutex.
    /// let timed_out = unsafe { cv.wait_raw(&mutex, Some(Duration::from_millis(1))) };
    /// assert!(timed_out && mutex.is_held());
    /// // SAFETY: held again after the wait.
    /// unsafe { mutex.release() };
    /// ```
    /// See [`RawCondvar`] for a notified wait.
    pub unsafe fn wait_raw(&self, mutex: &RawMutex, timeout: Option<Duration>) -> bool {
        // The caller holds it (the spin policy's hint, `mutex/spin.rs`).
        mutex.mark_monitor();
        let key = self.key();
        let mutex_key = address(mutex.word());
        let mut requeued = false;
        let parked = FutexTable::global().park(
            key,
            || {
                // Under the condvar's bucket lock (see the module docs).
                // Relaxed: every access to `state` but the notifiers'
                // first look is made under this lock.
                match self.state.load(Ordering::Relaxed) {
                    NO_WAITERS => self.state.store(mutex_key, Ordering::Relaxed),
                    seen if seen == mutex_key || seen == MIXED => {}
                    _ => self.state.store(MIXED, Ordering::Relaxed),
                }
                true
            },
            // SAFETY: the caller holds the mutex; it is released once we
            // are queued, which is what makes the wait atomic with respect
            // to notifications.
            || unsafe { mutex.release() },
            |key_now, was_last| {
                // Timed out on the mutex word or in a notify_all's batch: a
                // notify had already moved us there, so we were notified.
                requeued = key_now != key;
                if was_last && !cascade::is_batch(key_now) {
                    if requeued {
                        // The mutex's last sleeper left: PARKED is exact
                        // (under the mutex word's bucket lock, held here).
                        RawMutex::clear_parked(mutex.word());
                    } else {
                        // Relaxed: under the condvar's bucket lock.
                        self.state.store(NO_WAITERS, Ordering::Relaxed);
                    }
                }
            },
            ParkHow {
                broadcast: self.broadcast_word(),
                ..ParkHow::until(Deadline::after(timeout))
            },
        );
        match parked {
            Parked::Unparked {
                token,
                key: woken_on,
            } => {
                // Woken off the condvar, or off our own mutex after a notify
                // moved us there; never off another mutex (module docs).
                if cfg!(any(loom, debug_assertions)) {
                    assert!(
                        woken_on == key || woken_on == mutex_key || cascade::is_batch(woken_on),
                        "a condvar waiter was moved onto a mutex it does not use"
                    );
                }
                if cascade::is_batch(woken_on) {
                    // Woken off a notify_all's batch: wake the next ones
                    // before anything else (see `cascade`).
                    FutexTable::global().unpark(woken_on, cascade::fan_out().width);
                }
                // Moved onto the mutex, then handed it by its unlock: it
                // is ours already. Woken off the mutex word without it: the
                // waking unlock made us its one awake contender (WAKING).
                match token {
                    HANDOFF => {}
                    _ if woken_on == mutex_key => mutex.acquire_woken(),
                    _ => mutex.acquire(),
                }
                false
            }
            Parked::TimedOut => {
                mutex.acquire();
                !requeued
            }
            Parked::Invalid => unreachable!("the condvar's validate always queues"),
        }
    }

    /// Wakes the oldest waiter, or moves it onto its mutex if that mutex is
    /// held. Returns whether there was a waiter.
    ///
    /// # Examples
    /// No spurious wakeups and an exact result, so a thread may wait once,
    /// without a condition, and the notifier may retry until it reached it:
    /// ```
    /// use herdless::{RawCondvar, RawMutex};
    ///
    /// let (mutex, cv) = (RawMutex::new(), RawCondvar::new());
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         mutex.acquire();
    ///         // SAFETY: this thread holds the mutex (again, after the wait).
    ///         unsafe {
    ///             assert!(!cv.wait_raw(&mutex, None), "no timeout given");
    ///             mutex.release();
    ///         }
    ///     });
    ///     while !cv.notify_one_raw() {
    ///         std::thread::yield_now(); // the waiter has not queued yet
    ///     }
    /// });
    /// assert!(!cv.notify_one_raw(), "the one waiter was woken");
    /// ```
    #[inline]
    pub fn notify_one_raw(&self) -> bool {
        // Relaxed: see the module docs, "Why a notifier that skips the lock
        // misses nobody it must see".
        if self.state.load(Ordering::Relaxed) == NO_WAITERS {
            return false;
        }
        self.notify(1) != 0
    }

    /// Wakes every waiter: moves them all onto their mutex if it is held,
    /// otherwise wakes one and moves the rest. Returns how many waiters
    /// were woken or moved.
    ///
    /// # Examples
    /// ```
    /// use herdless::{RawCondvar, RawMutex};
    ///
    /// let (mutex, cv) = (RawMutex::new(), RawCondvar::new());
    /// std::thread::scope(|s| {
    ///     for _ in 0..3 {
    ///         s.spawn(|| {
    ///             mutex.acquire();
    ///             // SAFETY: this thread holds the mutex (again, after the wait).
    ///             unsafe {
    ///                 cv.wait_raw(&mutex, None);
    ///                 mutex.release();
    ///             }
    ///         });
    ///     }
    ///     let mut woken = 0;
    ///     while woken < 3 {
    ///         woken += cv.notify_all_raw(); // those queued so far
    ///         std::thread::yield_now();
    ///     }
    ///     assert_eq!(woken, 3);
    /// });
    /// ```
    #[inline]
    pub fn notify_all_raw(&self) -> usize {
        // Relaxed: as in `notify_one_raw`.
        if self.state.load(Ordering::Relaxed) == NO_WAITERS {
            return 0;
        }
        self.notify(usize::MAX)
    }

    /// Notifies up to `n` waiters (1 or all).
    #[cold]
    fn notify(&self, n: usize) -> usize {
        let fan_out = cascade::fan_out();
        let all = n == usize::MAX && fan_out.width > 0;
        let broadcast = all && self.broadcasts();
        if all && fan_out.when_held && !broadcast {
            return self.notify_all_cascade();
        }
        let table = FutexTable::global();
        let key = self.key();
        loop {
            // Set when a `notify_all` finds the mutex free and cascades
            // (`cascade`) or broadcasts (`broadcast`) instead, or finds it
            // held and cascades on many CPUs; the requeue below then moves
            // nobody.
            let mut cascade_instead = false;
            let mut broadcast_instead = false;
            // Relaxed: a guess at the target bucket, validated under the
            // locks below.
            let mutex = match self.state.load(Ordering::Relaxed) {
                NO_WAITERS => return 0,
                MIXED => return self.wake_mixed(n),
                mutex => mutex,
            };
            let done = table.unpark_requeue(
                key,
                mutex,
                || {
                    // Under both bucket locks; `state` is guarded by the
                    // condvar's. Changed since the guess: all the waiters of
                    // that mutex left, or one of another mutex came; look
                    // again.
                    if self.state.load(Ordering::Relaxed) != mutex {
                        return None;
                    }
                    // SAFETY: `state` names this mutex under the condvar's
                    // bucket lock, so a waiter using it is queued (the last
                    // waiter to leave resets `state` under this lock), and a
                    // queued waiter borrows its mutex for the whole wait:
                    // the word is live while we hold the lock.
                    let word = unsafe { &*(mutex as *const AtomicU32) };
                    if broadcast {
                        // Free: everyone at once (`broadcast`). Held: the
                        // cascade where it is the rule (many CPUs), else
                        // the chain below.
                        let locked = RawMutex::is_locked(word);
                        if !locked || fan_out.when_held {
                            broadcast_instead = !locked;
                            cascade_instead = locked;
                            return Some(RequeueOp {
                                wake: 0,
                                requeue: 0,
                            });
                        }
                    }
                    let held = RawMutex::mark_parked_if_locked(word);
                    if all && !held {
                        // Free: a cascade gets them running sooner than a
                        // chain (`cascade`). Nothing is marked: a free
                        // mutex's word was left as it was.
                        cascade_instead = true;
                        return Some(RequeueOp {
                            wake: 0,
                            requeue: 0,
                        });
                    }
                    // A held mutex: move them all; its holder's unlock wakes
                    // the first. A free one: wake one, it starts the chain.
                    let wake = usize::from(!held);
                    Some(RequeueOp {
                        wake: wake.min(n),
                        requeue: n - wake.min(n),
                    })
                },
                |done, have_more| {
                    if !have_more {
                        // Relaxed: under the condvar's bucket lock.
                        self.state.store(NO_WAITERS, Ordering::Relaxed);
                    }
                    if done.requeued > 0 {
                        // Moved onto a mutex that may be free: whoever
                        // takes it next must wake them when it unlocks.
                        // SAFETY: as in `validate`: still under the locks.
                        RawMutex::mark_parked(unsafe { &*(mutex as *const AtomicU32) });
                    }
                },
            );
            if broadcast_instead {
                return self.notify_all_broadcast();
            }
            if cascade_instead {
                return self.notify_all_cascade();
            }
            if let Some(done) = done {
                return done.woken + done.requeued;
            }
        }
    }

    /// `notify_all` by a wake cascade (see `cascade`): every waiter queued
    /// now moves to a fresh batch key, and the first `fan_out` of them are
    /// woken; each woken one wakes on. Returns how many were moved.
    fn notify_all_cascade(&self) -> usize {
        let table = FutexTable::global();
        let batch = cascade::batch_key();
        let done = table.unpark_requeue(
            self.key(),
            batch,
            || {
                // Under both bucket locks. Every waiter, whatever its mutex:
                // each takes its own back when woken.
                // Relaxed: `state` is guarded by the condvar's bucket lock.
                (self.state.load(Ordering::Relaxed) != NO_WAITERS).then_some(RequeueOp {
                    wake: 0,
                    requeue: usize::MAX,
                })
            },
            |_, have_more| {
                if !have_more {
                    // Relaxed: under the condvar's bucket lock.
                    self.state.store(NO_WAITERS, Ordering::Relaxed);
                }
            },
        );
        let moved = done.map_or(0, |done| done.requeued);
        if moved > 0 {
            table.unpark(batch, cascade::fan_out().width);
        }
        moved
    }

    /// Wakes up to `n` waiters of a condvar used with several mutexes: they
    /// cannot all be moved onto one mutex, so they are woken.
    fn wake_mixed(&self, n: usize) -> usize {
        let table = FutexTable::global();
        let reset = || {
            // Relaxed: under the condvar's bucket lock.
            self.state.store(NO_WAITERS, Ordering::Relaxed);
        };
        if n == 1 {
            let found = table.unpark_one(self.key(), |found| {
                if !found.have_more {
                    reset();
                }
                GRANTED
            });
            found.unparked
        } else {
            table.unpark_all(self.key(), reset)
        }
    }
}

// SAFETY: `wait` queues on the condvar's key under the bucket lock *before*
// it releases the mutex, so it is atomic with respect to notifications, and
// relocks before returning (or holds the mutex already, handed over by a
// fair unlock). It cannot panic between unlock and relock.
#[cfg(not(loom))]
unsafe impl lock_api::RawCondvar for RawCondvar {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = RawCondvar::new();
    type RawMutex = RawMutex;

    unsafe fn wait(&self, mutex: &RawMutex, _guard: &mut lock_api::GuardSend) {
        // SAFETY: the caller holds the mutex (trait contract).
        unsafe { self.wait_raw(mutex, None) };
    }

    /// No spurious wakeups: the result is exact (a waiter moved onto the
    /// mutex counts; one whose wait ended by timeout does not).
    #[inline]
    fn notify_one(&self) -> bool {
        self.notify_one_raw()
    }

    /// No spurious wakeups: the result is exact.
    #[inline]
    fn notify_all(&self) -> usize {
        self.notify_all_raw()
    }
}

// SAFETY: as for `RawCondvar`; a timed-out wait returns only after its
// deadline (the table reports TimedOut only then).
#[cfg(not(loom))]
unsafe impl lock_api::RawCondvarTimed for RawCondvar {
    fn checked_duration_to_instant(timeout: &Duration) -> Option<Instant> {
        Instant::now().checked_add(*timeout)
    }

    unsafe fn wait_until(
        &self,
        mutex: &RawMutex,
        _guard: &mut lock_api::GuardSend,
        deadline: &Instant,
    ) -> bool {
        let timeout = deadline.saturating_duration_since(Instant::now());
        // SAFETY: the caller holds the mutex (trait contract).
        unsafe { self.wait_raw(mutex, Some(timeout)) }
    }
}
