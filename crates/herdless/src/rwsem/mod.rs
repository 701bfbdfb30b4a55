//! A FIFO reader-writer semaphore whose releases wake after unlocking (seed
//! 001, "Move wakeups out from under the rwsem's wait_lock spinlock").
//!
//! READ this before changing anything here.
//!
//! # Contract
//! [`RwSem<T>`] is a `lock_api::RwLock` on [`RawRwSem`]: `read`, `write`,
//! `try_*`, timed `try_*_for` / `try_*_until`, and `downgrade` on the write
//! guard; [`RwSemExt`] adds construction with a [`RwSemConfig`], timed
//! acquisition with a typed [`TimedOut`] error, and the counters.
//! - **FIFO among sleepers.** Sleepers are served in arrival order.
//!   [`Counting::Generic`] is strictly FIFO: once anyone sleeps, newcomers
//!   queue behind. [`Counting::AtomicCount`] lets a *running* thread take a
//!   lock that is free for it ahead of the sleepers ("stealing"), until a
//!   sleeper has waited [`HANDOFF_AFTER`] and
//!   asks for hand-off; from then on strict FIFO until the next grant. No
//!   waiter starves.
//! - **Grants.** A release that leaves the lock free for the head of the
//!   queue *grants* it: it makes the whole leading batch of readers (up to
//!   the first queued writer), or the one writer at the head, holders, then
//!   wakes them. A granted thread never competes: it already holds the
//!   lock. `downgrade` grants the readers at the head alongside. (One
//!   exception, below: `AtomicCount` wakes a writer at the head without a
//!   grant while no hand-off is pending.)
//! - **Timeouts cancel cleanly.** A waiter whose timeout fires either was
//!   granted first (the grant wins, DESIGN contract 5: it returns holding
//!   the lock) or leaves the queue with nothing held, and if it was the
//!   head, whoever it held back is granted now (contract 4).
//! - Guards belong to no thread (`lock_api::GuardSend`): a hold may be
//!   released on another thread, as the kernel's `up_read_non_owner`.
//!   Releasing a hold of *another* lock is impossible through the guards:
//!   a guard unlocks the lock it borrows, and nothing else.
//!
//! Two seed choices are fixed per semaphore ([`RwSemConfig`]), so the lab
//! runs all four combinations in one process:
//! - [`Counting::Generic`] (kernel `rwsem-spinlock.c`): `activity` under the
//!   wait lock; every acquire and release takes the wait lock.
//!   [`Counting::AtomicCount`] (kernel xadd `rwsem.c`, default): an atomic
//!   count word with lock-free fast paths; the wait lock is taken only to
//!   queue, and by a release that finds waiters.
//! - [`WakeTiming::WakeUnderLock`] (the seed's "before"): granted threads
//!   are unparked while the wait lock is held. [`WakeTiming::WakeAfterUnlock`]
//!   (the "after", default): they go on a wake list (`util::wake_list`) and are unparked once
//!   the wait lock is dropped, so neither the wake syscalls nor the woken
//!   threads' own trips to the wait lock pile up behind it.
//!
//! # The count word (`AtomicCount`)
//! ```text
//!   bit 0      WRITER    a writer holds the lock
//!   bit 1      WAITERS   the wait list is not empty
//!   bit 2      HANDOFF   a sleeper asked for strict hand-off: no stealing
//!   bit 3      NUDGED    the writer at the head was woken and is awake
//!   bits 4..   readers   shared holders (READER = 1 << 4 each)
//! ```
//! | field | set by | cleared by | under the wait lock? |
//! |---|---|---|---|
//! | WRITER | writer fast path (CAS, no holder, no HANDOFF); a grant | `write_unlock`, `downgrade` | grant: yes; others: no |
//! | WAITERS | a thread queueing (`fetch_or`) | a grant or a leaving waiter that empties the list | always |
//! | HANDOFF | a sleeper that waited `HANDOFF_AFTER` | any grant; a leaving waiter that empties the list | always |
//! | NUDGED | a nudge of the head writer | that writer before its last try ahead of sleeping; its leaving; any grant | set: yes; cleared by the writer: no |
//! | readers | reader fast path (`fetch_add`, backed out if WRITER or HANDOFF); a grant | `read_unlock` (`fetch_sub`) | grant: yes; others: no |
//!
//! # Stealing and hand-off
//! Seed 001's xadd rwsem granted strictly in order. On a machine with
//! fewer CPUs than threads that builds a convoy: each grant hands the lock
//! to a thread that is not running, the lock sits idle for a wakeup
//! latency, and every running thread that wants it meanwhile queues and
//! sleeps too. Measured in the lab (`rwsem`, 8–32 threads on 2 CPUs), the
//! strict version ran 3–7× slower than `std` and `parking_lot`, with about
//! 650–1,200 context switches per 1,000 operations against their 2–150.
//! So `AtomicCount` does what the kernel's rwsem does since 4.x/5.x:
//! - the fast paths take a lock that is free for them even while others
//!   sleep (readers: no WRITER; writers: no holder), unless HANDOFF is set;
//! - a release that frees the lock for a *writer* at the head does not
//!   grant it: it wakes it ("nudge"), leaving the lock free for whoever
//!   runs first; the writer, still queued, takes it itself when it runs
//!   (or spins, then sleeps again, to be nudged by the next release);
//!   while it is awake (NUDGED) releases do not come to nudge it again:
//!   without that bit, every moment the stealing readers drained cost a
//!   wait-lock acquisition, about 0.6 per operation at 8–32 threads;
//! - readers at the head are still granted as a batch (they share with any
//!   reader that steals);
//! - a sleeper that has waited [`HANDOFF_AFTER`] sets HANDOFF, which stops
//!   stealing and makes the next release grant the head, writer included.
//!   Every grant clears it; a sleeper still waiting re-arms its timer.
//!
//! `Generic` stays the seed's strict FIFO, so the seed's comparison of the
//! two wake timings is made on the 2006 algorithm.

//!
//! # No lost grant (why a sleeper is always woken)
//! The danger is a waiter queueing just as the last holder leaves: the
//! holder sees no waiter, the waiter sees a holder, and nobody grants.
//! Both sides do one read-modify-write on the count word, and RMWs on one
//! word have a single modification order:
//! ```text
//!   waiter (wait lock held)                 last holder
//!   queue itself                            prev = fetch_sub(me)      (R)
//!   fetch_or(WAITERS)                 (Q)   if prev had WAITERS and no
//!   grant_locked: load; grant if free        other holder: take the wait
//!                                            lock, grant_locked
//! ```
//! If (R) precedes (Q), the waiter's load after its own RMW sees (R)'s
//! result (coherence) and it grants (possibly to itself) or nudges. If (Q) precedes
//! (R), the holder's `prev` has WAITERS set and it comes to grant under the
//! wait lock, which the waiter's queueing happened-before. A reader that
//! backed out of its fast path leaves through the same release code, so its
//! transient count can delay a grant but never swallow one. A stealer
//! that takes the lock between a release and its grant is itself a holder
//! whose release will find WAITERS and come to grant. A sleeper that sets
//! HANDOFF while the lock is free (its releaser nudged a writer that
//! HANDOFF now keeps from taking it) grants on the spot. With `Generic`
//! everything happens under the wait lock, which orders it.
//!
//! # Publishing a grant (DESIGN contract 3)
//! The granter, holding the wait lock: updates the count (CAS, AcqRel: it
//! reads from every leaving holder's Release), dequeues the waiter, clones
//! its `Unparker` onto the wake list, then stores `GRANTED` (Release) as its
//! last access. The waiter may see `GRANTED` (Acquire), return and free its
//! record at any moment after that store, before being unparked; the
//! unpark then goes to an `Arc`'d parker that outlives the record and is at
//! worst a spurious wakeup of a later wait (every wait loop re-checks its
//! condition). A thread that is on another lock's wake list can be granted
//! this one at the same time: the two unparks are independent.
//!
//! [`TimedOut`]: crate::wait_queue::TimedOut

mod config;
mod count;
#[cfg(not(loom))]
mod lock_api_impl;
mod raw;
mod stats;
mod upgrade;
mod wait_list;
mod waiter;

pub use config::{Counting, RwSemConfig, WakeTiming};
#[cfg(not(loom))]
pub use lock_api_impl::RwSemExt;
pub use raw::{RawRwSem, HANDOFF_AFTER};
pub use stats::RwSemStats;

/// A reader-writer semaphore around a `T`, with `lock_api` guards.
///
/// ```
/// use herdless::rwsem::RwSem;
///
/// let sem = RwSem::new(0);
/// {
///     let a = sem.read();
///     let b = sem.read();
///     assert_eq!(*a + *b, 0);
/// }
/// let mut w = sem.write();
/// *w += 1;
/// let r = herdless::rwsem::RwSemWriteGuard::downgrade(w);
/// assert_eq!(*r, 1);
/// ```
///
/// A guard borrows its own lock, so it cannot release another:
/// ```compile_fail
/// use herdless::rwsem::RwSem;
/// let a = RwSem::new(1);
/// let guard = a.write();
/// drop(a); // error: `a` is borrowed by `guard`
/// drop(guard);
/// ```
#[cfg(not(loom))]
pub type RwSem<T> = lock_api::RwLock<RawRwSem, T>;
/// The read guard of [`RwSem`].
#[cfg(not(loom))]
pub type RwSemReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawRwSem, T>;
/// The write guard of [`RwSem`].
#[cfg(not(loom))]
pub type RwSemWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawRwSem, T>;
/// The upgradable read guard of [`RwSem`].
#[cfg(not(loom))]
pub type RwSemUpgradableReadGuard<'a, T> = lock_api::RwLockUpgradableReadGuard<'a, RawRwSem, T>;
