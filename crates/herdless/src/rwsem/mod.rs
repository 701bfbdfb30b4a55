//! A FIFO reader-writer semaphore whose releases wake after unlocking (seed
//! 001, "Move wakeups out from under the rwsem's wait_lock spinlock").
//!
//! READ this before changing anything here.
//!
//! # Contract
//! [`RwSem<T>`] is a `lock_api::RwLock` on [`RawRwSem`]: `read`, `write`,
//! `upgradable_read`, their `try_*` and timed `try_*_for` / `try_*_until`
//! forms, `downgrade` and `downgrade_to_upgradable` on the write guard,
//! `upgrade`, `try_upgrade`, `try_upgrade_for` / `_until`, `downgrade` and
//! `with_upgraded` on the upgradable guard, and the fair unlocks
//! (`unlock_fair`, `unlocked_fair`, `bump`) on all three; [`RwSemExt`]
//! adds construction with a [`RwSemConfig`](crate::variants::RwSemConfig), timed acquisition with a typed
//! [`TimedOut`] error, and the counters.
//! - **Three holds.** Readers share; the one *upgradable* reader shares
//!   with readers but excludes writers and other upgradable readers; a
//!   writer excludes everybody. The upgradable holder can turn its hold
//!   into the exclusive one (`upgrade`) without letting a writer in
//!   between: it waits, ahead of every queued waiter, for the readers to
//!   leave, and new readers are kept out meanwhile, so the upgrade is not
//!   starved. A timed upgrade that gives up keeps the upgradable hold.
//! - **FIFO among sleepers.** Sleepers are served in arrival order.
//!   [`Counting::Generic`](crate::variants::Counting::Generic) is strictly FIFO: once anyone sleeps, newcomers
//!   queue behind. [`Counting::AtomicCount`](crate::variants::Counting::AtomicCount) lets a *running* thread take a
//!   lock that is free for it ahead of the sleepers ("stealing"), until a
//!   sleeper has waited [`HANDOFF_AFTER`] and
//!   asks for hand-off; from then on strict FIFO until the next grant. No
//!   waiter starves.
//! - **Grants.** A release that leaves the lock free for the head of the
//!   queue *grants* it: it makes the whole leading batch of shared waiters
//!   (readers up to the first queued writer, with at most one upgradable
//!   waiter among them, if the upgradable hold is free), or the one writer
//!   at the head, holders, then wakes them. A granted thread never
//!   competes: it already holds the lock. The downgrades grant the shared
//!   waiters at the head alongside. An upgrade waiting in the upgrade slot
//!   goes first: while it waits, nothing else is granted. (One exception,
//!   below: `AtomicCount` wakes a writer at the head without a grant while
//!   no hand-off is pending.)
//! - **Fair unlock.** `unlock_fair` hands the lock to the head of the queue
//!   directly: no running thread can take it in between (no barging), and
//!   a writer at the head is granted, not nudged. It asks for hand-off
//!   before giving up its hold; the granted threads are still woken after
//!   the wait lock is dropped (`WakeAfterUnlock`). `Generic` is fair
//!   already: its unlocks are the plain ones.
//! - **Timeouts cancel cleanly.** A waiter whose timeout fires either was
//!   granted first (the grant wins, as the wake does in ARCHITECTURE
//!   contract 4: it returns holding the lock) or leaves the queue with nothing held (a timed upgrade: with
//!   the upgradable hold it had), and if it was the head (or the upgrade),
//!   whoever it held back is granted now (ARCHITECTURE contract 11).
//! - Guards belong to no thread (`lock_api::GuardSend`): a hold may be
//!   released on another thread, as the kernel's `up_read_non_owner`.
//!   Releasing a hold of *another* lock is impossible through the guards:
//!   a guard unlocks the lock it borrows, and nothing else.
//! - Not recursive: a thread that holds the lock shared and reads again may
//!   queue behind a waiting writer (always with `Generic`, after a hand-off
//!   request with `AtomicCount`) and deadlock, as with `std`'s `RwLock`.
//!   There is no `read_recursive`, and no poisoning.
//!
//! Two seed choices are fixed per semaphore ([`RwSemConfig`](crate::variants::RwSemConfig)), so the lab
//! runs all four combinations in one process:
//! - [`Counting::Generic`](crate::variants::Counting::Generic) (kernel `rwsem-spinlock.c`): `activity` under the
//!   wait lock; every acquire and release takes the wait lock.
//!   [`Counting::AtomicCount`](crate::variants::Counting::AtomicCount) (kernel xadd `rwsem.c`, default): an atomic
//!   count word with lock-free fast paths; the wait lock is taken only to
//!   queue, and by a release that finds waiters.
//! - [`WakeTiming::WakeUnderLock`](crate::variants::WakeTiming::WakeUnderLock) (the seed's "before"): granted threads
//!   are unparked while the wait lock is held. [`WakeTiming::WakeAfterUnlock`](crate::variants::WakeTiming::WakeAfterUnlock)
//!   (the "after", default): they go on a wake list (`util::wake_list`) and are unparked once
//!   the wait lock is dropped, so neither the wake syscalls nor the woken
//!   threads' own trips to the wait lock pile up behind it.
//!
//! # The count word (`AtomicCount`)
//! ```text
//!   bit 0      WRITER      a writer holds the lock
//!   bit 1      WAITERS     someone waits (the wait list or the upgrade slot)
//!   bit 2      HANDOFF     strict hand-off asked for: no stealing
//!   bit 3      NUDGED      the writer at the head was woken and is awake
//!   bit 4      UPGRADING   the upgradable holder waits in the upgrade slot
//!   bit 5      WRITE_INTENT a spinning writer claims a reader-held lock
//!   bit 6      UPGRADABLE  the upgradable reader holds the lock
//!   bits 7..   readers     shared holders (READER = 1 << 7 each)
//! ```
//! | field | set by | cleared by | under the wait lock? |
//! |---|---|---|---|
//! | WRITER | writer fast path (CAS, no holder, no HANDOFF); a grant; an upgrade (CAS, no reader, or the slot's grant) | `write_unlock`, `downgrade`, `downgrade_to_upgradable` | grants: yes; others: no |
//! | WAITERS | a thread queueing or taking the upgrade slot (`fetch_or`) | a grant or a leaving waiter (or cancelled upgrade) that leaves nobody waiting | always |
//! | HANDOFF | a sleeper that waited `HANDOFF_AFTER`; a fair unlock that finds waiters | any grant; a leaving waiter that leaves nobody waiting | always |
//! | NUDGED | a nudge of the head writer | that writer before its last try ahead of sleeping; its leaving; any grant; a hand-off request; an upgrader taking the slot | set: yes; cleared by the writer: no |
//! | UPGRADING | an upgrader taking the slot | the slot's grant; the upgrader's timeout | always |
//! | WRITE_INTENT | a spinning writer (CAS, readers alone hold, no HANDOFF, UPGRADING or claim), unless `intent=0` | that writer: in the CAS that makes it the writer, or when it stops spinning | no |
//! | UPGRADABLE | upgradable fast path (CAS, no WRITER, UPGRADABLE or HANDOFF); a grant; `downgrade_to_upgradable` | `upgradable_unlock`, `downgrade_upgradable`, an upgrade | grants: yes; others: no |
//! | readers | reader fast path (`fetch_add`, backed out if WRITER, HANDOFF, UPGRADING or WRITE_INTENT); a grant; `downgrade`, `downgrade_upgradable` | `read_unlock` (`fetch_sub`) | grant: yes; others: no |
//!
//! The holds and what each waiter needs:
//!
//! | waiter | needs | its grant |
//! |---|---|---|
//! | reader | no WRITER | readers + 1 (a batch: + n) |
//! | upgradable | no WRITER, no UPGRADABLE | UPGRADABLE (granted within a reader batch) |
//! | writer | no holder | WRITER (or a nudge, see below) |
//! | upgrade (the slot) | no reader (UPGRADABLE is its own) | UPGRADABLE, UPGRADING -> WRITER |
//!
//! `Generic` keeps the same holds under the wait lock: `activity` (readers,
//! or -1 for a writer), `upgradable`, and the same upgrade slot.
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
//!   sleep (readers: no WRITER and no upgrade waiting; upgradable readers:
//!   no WRITER and no other upgradable reader; writers: no holder), unless
//!   HANDOFF is set;
//! - a release that frees the lock for a *writer* at the head does not
//!   grant it: it wakes it ("nudge"), leaving the lock free for whoever
//!   runs first; the writer, still queued, takes it itself when it runs
//!   (or spins, then sleeps again, to be nudged by the next release);
//!   while it is awake (NUDGED) releases do not come to nudge it again:
//!   without that bit, every moment the stealing readers drained cost a
//!   wait-lock acquisition, about 0.6 per operation at 8–32 threads;
//! - readers at the head are still granted as a batch (they share with any
//!   reader that steals), and so is an upgradable waiter among them;
//! - a sleeper that has waited [`HANDOFF_AFTER`] sets HANDOFF, which stops
//!   stealing and makes the next release grant the head, writer included.
//!   Every grant clears it; a sleeper still waiting re-arms its timer. A
//!   fair unlock sets it too, for the same effect at once;
//! - an upgrade does not steal or queue: its holder is already in, and it
//!   waits in the upgrade slot only for the readers to drain (UPGRADING
//!   keeps new readers out);
//! - before queueing, an acquirer spins a bounded while (the kernel's
//!   optimistic spinning, without its owner tracking): 9 rounds of
//!   exponential backoff on two CPUs, 14 on more (`tuning.rs`, which says
//!   what was measured; `HERDLESS_RWSEM_TUNING=spin=ROUNDS,handoff=MICROSECONDS`
//!   overrides both for experiments); a spinning writer claims a
//!   reader-held lock ("A writer's claim", below; `intent=0` turns that
//!   off).
//!
//! `Generic` stays the seed's strict FIFO, so the seed's comparison of the
//! two wake timings is made on the 2006 algorithm.
//!
//! # A writer's claim (`AtomicCount`; `HERDLESS_RWSEM_TUNING=intent=0` turns it off)
//! Stealing readers can keep a reader-held lock from a writer for the
//! whole hand-off time: some reader always holds it (on 16 cores that kept
//! `RwSem` at 0.79–0.87× parking_lot's `RwLock` at 8–16 threads with 10%
//! writes; with claims, 1.03–1.17×, stop 40: `tuning.rs`). So a
//! writer that spins (a newcomer, or the nudged writer at the head) and
//! finds only readers holding sets WRITE_INTENT with a CAS (`claim.rs`):
//! - new readers and upgradable readers stay out (their fast paths and
//!   grants check it), and so do other writers; the readers inside drain;
//! - the claimant alone may take the lock: once no reader holds, it sets
//!   WRITER and clears the claim in one CAS;
//! - nothing is granted under a claim (`grant_locked` grants nothing, and
//!   never nudges), and a reader leaving with WAITERS set does not come to
//!   the wait lock: the claimant's own RMW, after theirs, decides;
//! - the claim lasts at most the writer's spin: when its rounds run out,
//!   or a sleeper asks for hand-off, the claimant clears it with
//!   `fetch_and` and, if `prev` shows WAITERS, grants (`drop_claim`).
//!
//! No lost grant: every waiter that queued under the claim found nothing
//! to grant, and did its `fetch_or(WAITERS)` RMW; the claimant's clear (or
//! its CAS to WRITER, whose release then finds WAITERS) is an RMW on the
//! same word. If the waiter's came first, the claimant sees WAITERS and
//! grants; if the claimant's came first, the waiter's grant check after
//! its own RMW sees no claim. Loom runs every model of this file's
//! `AtomicCount` with claims on and off (a claimant spins two rounds
//! there).

//!
//! # No lost grant (why a sleeper is always woken)
//! The danger is a waiter queueing just as the last holder it waits for
//! leaves: the holder sees no waiter, the waiter sees a holder, and nobody
//! grants. Both sides do one read-modify-write on the count word, and RMWs
//! on one word have a single modification order:
//! ```text
//!   waiter (wait lock held)                 last holder
//!   queue itself (or take the slot)         prev = fetch_sub(me)      (R)
//!   fetch_or(WAITERS [| UPGRADING]) (Q)     if prev had WAITERS (and no
//!   grant_locked: load; grant if free        NUDGED) and the head may now
//!                                            be free: take the wait lock,
//!                                            grant_locked
//! ```
//! If (R) precedes (Q), the waiter's load after its own RMW sees (R)'s
//! result (coherence) and it grants (possibly to itself) or nudges. If (Q) precedes
//! (R), the holder's `prev` has WAITERS set and it comes to grant under the
//! wait lock, which the waiter's queueing happened-before. "The head may
//! now be free" is, per release: a writer's or the upgradable reader's
//! release, always; a reader's, when it was the last holder, or the last
//! reader while UPGRADING is set (the slot's upgrader waits for exactly
//! that); the downgrades, always. A reader that
//! backed out of its fast path leaves through the same release code, so its
//! transient count can delay a grant but never swallow one. A stealer
//! that takes the lock between a release and its grant is itself a holder
//! whose release will find WAITERS and come to grant.
//!
//! NUDGED lets releases skip the wait lock while the writer at the head is
//! awake and will try the lock itself. Whatever stops that writer from
//! taking a free lock clears NUDGED first, with an RMW, and then runs the
//! grant check (the same litmus test as above, with NUDGED for WAITERS): the
//! writer itself before its last try; a hand-off request (HANDOFF keeps
//! the writer out; a sleeper's request or a fair unlock); an upgrader
//! taking the slot ahead of it. Without the clear, the lock would sit free
//! (or the upgrade would wait) until the writer's own hand-off timer, up to
//! [`HANDOFF_AFTER`] later. With `Generic` everything happens under the
//! wait lock, which orders it.
//!
//! # Publishing a grant (ARCHITECTURE contract 3)
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

mod acquire;
mod acquire_async;
#[cfg(not(loom))]
mod async_ext;
mod claim;
mod count;
mod grant;
#[cfg(not(loom))]
mod lock_api_impl;
mod raw;
mod release;
mod stats;
mod tuning;
mod upgrade;
mod upgrade_async;
mod wait_list;
mod waiter;

pub use acquire_async::RawAcquire;
#[cfg(not(loom))]
pub use async_ext::{RwSemAsyncExt, RwSemReadFuture, RwSemUpgradableReadFuture, RwSemWriteFuture};
#[cfg(not(loom))]
pub use lock_api_impl::RwSemExt;
pub use raw::{RawRwSem, HANDOFF_AFTER};
pub use stats::RwSemStats;
pub use upgrade_async::RawUpgrade;

/// A reader-writer semaphore around a `T`, with `lock_api` guards.
///
/// The methods are `lock_api::RwLock`'s (see the [module docs](self)),
/// plus [`RwSemExt`] (configuration, typed timeouts, counters) and
/// [`RwSemAsyncExt`] (waiting from tasks). None of them panics; a thread
/// that reads again while it holds the lock may deadlock behind a queued
/// writer (not recursive). No poisoning.
///
/// # Examples
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
/// An upgradable read shares the lock with readers and can become the
/// write lock without letting another writer in between:
/// ```
/// use herdless::rwsem::{RwSem, RwSemUpgradableReadGuard};
///
/// let cache = RwSem::new(Vec::new());
/// let seen = cache.upgradable_read();
/// let reader = cache.read(); // readers still share the lock
/// assert!(seen.is_empty());
/// drop(reader); // `upgrade` waits for the readers to leave
/// let mut w = RwSemUpgradableReadGuard::upgrade(seen);
/// w.push(1); // nobody wrote in between: the check above still holds
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
///
/// # Examples
/// ```
/// use herdless::rwsem::{RwSem, RwSemReadGuard};
///
/// let sem = RwSem::new(vec![1, 2]);
/// let a: RwSemReadGuard<'_, Vec<i32>> = sem.read();
/// let b = sem.read(); // readers share the lock
/// assert!(sem.try_write().is_none());
/// assert_eq!(a.len() + b.len(), 4);
/// ```
#[cfg(not(loom))]
pub type RwSemReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawRwSem, T>;
/// The write guard of [`RwSem`]. It is `Send`: a hold belongs to no
/// thread, and may be released on another.
///
/// # Examples
/// ```
/// use herdless::rwsem::{RwSem, RwSemWriteGuard};
///
/// let sem = RwSem::new(0);
/// let mut guard: RwSemWriteGuard<'_, i32> = sem.write();
/// *guard = 1;
/// std::thread::scope(|s| {
///     s.spawn(move || drop(guard)); // released on another thread
/// });
/// assert_eq!(*sem.read(), 1);
/// ```
#[cfg(not(loom))]
pub type RwSemWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawRwSem, T>;
/// The upgradable read guard of [`RwSem`].
///
/// # Examples
/// ```
/// use herdless::rwsem::{RwSem, RwSemUpgradableReadGuard};
///
/// let sem = RwSem::new(0);
/// let reader = sem.read();
/// let seen: RwSemUpgradableReadGuard<'_, i32> = sem.upgradable_read();
/// // A reader holds the lock: the try fails and hands the guard back.
/// let seen = RwSemUpgradableReadGuard::try_upgrade(seen).unwrap_err();
/// drop(reader);
/// let mut w = RwSemUpgradableReadGuard::try_upgrade(seen).ok().unwrap();
/// *w += 1;
/// ```
#[cfg(not(loom))]
pub type RwSemUpgradableReadGuard<'a, T> = lock_api::RwLockUpgradableReadGuard<'a, RawRwSem, T>;
/// A read guard of [`RwSem`] narrowed to a part of the data by
/// `RwSemReadGuard::map`.
///
/// # Examples
/// ```
/// use herdless::rwsem::{RwSem, RwSemMappedReadGuard, RwSemReadGuard};
///
/// let sem = RwSem::new((1, "one"));
/// let name: RwSemMappedReadGuard<'_, &str> = RwSemReadGuard::map(sem.read(), |p| &p.1);
/// assert_eq!(*name, "one");
/// assert!(sem.try_write().is_none(), "still a read hold");
/// ```
#[cfg(not(loom))]
pub type RwSemMappedReadGuard<'a, T> = lock_api::MappedRwLockReadGuard<'a, RawRwSem, T>;
/// A write guard of [`RwSem`] narrowed to a part of the data by
/// `RwSemWriteGuard::map`.
///
/// # Examples
/// ```
/// use herdless::rwsem::{RwSem, RwSemMappedWriteGuard, RwSemWriteGuard};
///
/// let sem = RwSem::new((1, String::new()));
/// let mut name: RwSemMappedWriteGuard<'_, String> = RwSemWriteGuard::map(sem.write(), |p| &mut p.1);
/// name.push_str("one");
/// assert!(sem.try_read().is_none(), "still the write hold");
/// drop(name);
/// assert_eq!(sem.read().1, "one");
/// ```
#[cfg(not(loom))]
pub type RwSemMappedWriteGuard<'a, T> = lock_api::MappedRwLockWriteGuard<'a, RawRwSem, T>;

/// [`RwSem`] under the name `std::sync::RwLock` and `parking_lot::RwLock`
/// users look for: the same type, with the same guards.
///
/// # Examples
/// ```
/// use herdless::{RwLock, RwLockReadGuard, RwLockUpgradableReadGuard, RwLockWriteGuard};
///
/// let lock = RwLock::new(vec![1]);
/// {
///     let a: RwLockReadGuard<'_, Vec<i32>> = lock.read();
///     let b = lock.read(); // readers share the lock
///     assert_eq!(a.len() + b.len(), 2);
/// }
/// let seen: RwLockUpgradableReadGuard<'_, Vec<i32>> = lock.upgradable_read();
/// let mut w: RwLockWriteGuard<'_, Vec<i32>> = RwLockUpgradableReadGuard::upgrade(seen);
/// w.push(2);
/// let r = RwLockWriteGuard::downgrade(w);
/// assert_eq!(*r, [1, 2]);
/// ```
#[cfg(not(loom))]
pub type RwLock<T> = RwSem<T>;
/// The read guard of [`RwLock`] (std's name for [`RwSemReadGuard`]).
///
/// # Examples
/// ```
/// use herdless::{RwLock, RwLockReadGuard};
///
/// fn total(lock: &RwLock<Vec<u32>>) -> u32 {
///     let rows: RwLockReadGuard<'_, Vec<u32>> = lock.read();
///     rows.iter().sum()
/// }
/// assert_eq!(total(&RwLock::new(vec![1, 2])), 3);
/// ```
#[cfg(not(loom))]
pub type RwLockReadGuard<'a, T> = RwSemReadGuard<'a, T>;
/// The write guard of [`RwLock`] (std's name for [`RwSemWriteGuard`]).
///
/// # Examples
/// ```
/// use herdless::{RwLock, RwLockUpgradableReadGuard, RwLockWriteGuard};
///
/// let lock = RwLock::new(0);
/// let mut w: RwLockWriteGuard<'_, i32> = lock.write();
/// *w = 1;
/// // Back to an upgradable read, with no writer in between:
/// let u = RwLockWriteGuard::downgrade_to_upgradable(w);
/// assert_eq!(*lock.read(), 1, "readers share it again");
/// drop(RwLockUpgradableReadGuard::upgrade(u));
/// ```
#[cfg(not(loom))]
pub type RwLockWriteGuard<'a, T> = RwSemWriteGuard<'a, T>;
/// The upgradable read guard of [`RwLock`] (parking_lot's name for
/// [`RwSemUpgradableReadGuard`]).
///
/// # Examples
/// ```
/// use herdless::{RwLock, RwLockUpgradableReadGuard};
///
/// let lock = RwLock::new(vec![1]);
/// let u: RwLockUpgradableReadGuard<'_, Vec<i32>> = lock.upgradable_read();
/// assert!(lock.try_upgradable_read().is_none(), "one upgradable reader");
/// let r = RwLockUpgradableReadGuard::downgrade(u); // now a plain read guard
/// assert!(lock.try_upgradable_read().is_some());
/// assert_eq!(*r, [1]);
/// ```
#[cfg(not(loom))]
pub type RwLockUpgradableReadGuard<'a, T> = RwSemUpgradableReadGuard<'a, T>;
/// A read guard of [`RwLock`] narrowed to a part of the data by
/// `RwLockReadGuard::map` (parking_lot's name for [`RwSemMappedReadGuard`]).
///
/// # Examples
/// ```
/// use herdless::{MappedRwLockReadGuard, MappedRwLockWriteGuard, RwLock};
/// use herdless::{RwLockReadGuard, RwLockWriteGuard};
///
/// let lock = RwLock::new((0, String::from("a")));
/// let mut name: MappedRwLockWriteGuard<'_, String> = RwLockWriteGuard::map(lock.write(), |p| &mut p.1);
/// name.push('b');
/// drop(name);
/// let count: MappedRwLockReadGuard<'_, i32> = RwLockReadGuard::map(lock.read(), |p| &p.0);
/// let other = lock.read(); // a mapped read guard still shares the lock
/// assert_eq!((*count, other.1.as_str()), (0, "ab"));
/// ```
#[cfg(not(loom))]
pub type MappedRwLockReadGuard<'a, T> = RwSemMappedReadGuard<'a, T>;
/// A write guard of [`RwLock`] narrowed to a part of the data by
/// `RwLockWriteGuard::map` (parking_lot's name for [`RwSemMappedWriteGuard`]).
///
/// # Examples
/// ```
/// use herdless::{MappedRwLockWriteGuard, RwLock, RwLockWriteGuard};
///
/// let lock = RwLock::new([0, 0]);
/// let mut second: MappedRwLockWriteGuard<'_, i32> = RwLockWriteGuard::map(lock.write(), |a| &mut a[1]);
/// *second = 2;
/// drop(second);
/// assert_eq!(*lock.read(), [0, 2]);
/// ```
#[cfg(not(loom))]
pub type MappedRwLockWriteGuard<'a, T> = RwSemMappedWriteGuard<'a, T>;
