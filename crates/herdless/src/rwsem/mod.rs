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
//! - **FIFO.** Once anyone sleeps in the wait list, newcomers queue behind
//!   them (no reader overtakes a queued writer; no writer starves).
//! - **Grants.** A release that leaves the lock free for the head of the
//!   queue *grants* it: it makes the whole leading batch of readers (up to
//!   the first queued writer), or the one writer at the head, holders, then
//!   wakes them. A woken thread never competes again: it already holds the
//!   lock. `downgrade` grants the readers at the head alongside.
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
//!   (the "after", default): they go on a [`WakeList`] and are unparked once
//!   the wait lock is dropped, so neither the wake syscalls nor the woken
//!   threads' own trips to the wait lock pile up behind it.
//!
//! # The count word (`AtomicCount`)
//! ```text
//!   bit 0      WRITER    a writer holds the lock
//!   bit 1      WAITERS   the wait list is not empty
//!   bits 2..   readers   shared holders (READER = 1 << 2 each)
//! ```
//! | field | set by | cleared by | under the wait lock? |
//! |---|---|---|---|
//! | WRITER | writer fast path (CAS 0 → WRITER); a grant | `write_unlock`, `downgrade` | grant: yes; others: no |
//! | WAITERS | a thread queueing (`fetch_or`) | a grant that empties the list; a timeout that does | always |
//! | readers | reader fast path (`fetch_add`, backed out on failure); a grant | `read_unlock` (`fetch_sub`) | grant: yes; others: no |
//!
//! Fast paths run only while WAITERS is clear: readers need no WRITER,
//! writers need the word to be 0. With WAITERS set, every acquirer queues,
//! and only grants (under the wait lock) make new holders.
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
//! result (coherence) and it grants (possibly to itself). If (Q) precedes
//! (R), the holder's `prev` has WAITERS set and it comes to grant under the
//! wait lock, which the waiter's queueing happened-before. A reader that
//! backed out of its fast path leaves through the same release code, so its
//! transient count can delay a grant but never swallow one. With `Generic`
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
//! [`WakeList`]: crate::util::wake_list
//! [`TimedOut`]: crate::wait_queue::TimedOut

mod config;
#[cfg(not(loom))]
mod lock_api_impl;
mod raw;
mod stats;
mod wait_list;
mod waiter;

pub use config::{Counting, RwSemConfig, WakeTiming};
#[cfg(not(loom))]
pub use lock_api_impl::RwSemExt;
pub use raw::RawRwSem;
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
