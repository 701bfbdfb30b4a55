//! Acquiring a [`RawRwSem`] from a task: [`RawAcquire`], the future under
//! `read_async`, `write_async` and `upgradable_read_async`.
//!
//! A task's record is the threads' record (`waiter.rs`) with a waker slot
//! for its wake handle (`util::sleeper`), pinned inside the future, queued
//! in the same FIFO list and granted by the same `grant_locked`. The
//! thread's slow path (`acquire.rs`) maps onto `poll` and `Drop`:
//!
//! | thread (`acquire_slow`) | task (`RawAcquire`) |
//! |---|---|
//! | fast path, then a bounded spin | fast path only: no spinning in `poll` |
//! | queue, set WAITERS, `grant_locked` | the same, at the first poll that misses |
//! | sleep until granted | `Pending` until a poll sees the grant |
//! | woken without a grant (a nudge): a writer tries the lock, spinning | a writer tries the lock once (`queued_writer_try_once`) |
//! | hand-off request after `HANDOFF_AFTER` asleep | the same, checked at each poll |
//! | — | a writer that finds readers holding asks for hand-off at once (below) |
//! | timeout: cancel under the wait lock (the grant wins) | drop: cancel under the wait lock; a grant that won (or that came before the drop) is released with the fair unlock, which hands the lock to the next waiter |
//!
//! # Why a waiting writer task asks for hand-off at once when readers hold
//! `AtomicCount` readers take a reader-held lock ahead of queued waiters
//! ("stealing"). A thread writer behind a stream of overlapping readers is
//! saved by its hand-off timer, which wakes it after `HANDOFF_AFTER`. A task
//! has no timer of its own (herdless depends on no runtime), and nothing
//! polls it while the readers never drain (no release comes to nudge it),
//! so it would wait forever: async-std #705's writer starvation. So a
//! writer task that queues (or is polled) while readers hold and no
//! hand-off is pending sets HANDOFF itself: new readers queue behind it,
//! and the last reader's release grants it.
//!
//! # A future that is neither polled nor dropped (async-lock #91)
//! A future takes its place in the queue at its first poll that misses,
//! not at creation. From then on it holds its place; once granted it holds
//! the lock, whether or not it is polled again, until it is polled to
//! completion (the guard then holds it) or dropped (the hold passes on).
//! So a future polled once and then set aside holds up exactly the waiters
//! its place and its hold exclude under FIFO hand-off, as a thread blocked
//! in `read`/`write` would: a granted reader holds up writers, not other
//! readers; a queued writer holds up those queued behind it. A nudged
//! writer that is not polled holds nothing: the lock stays free for
//! whoever takes it (and a hand-off request grants it to the writer).

use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

use super::count::{HANDOFF, READERS, UPGRADABLE, WAITERS};
use super::raw::RawRwSem;
use super::tuning::RwSemTuning;
use super::waiter::{Kind, Waiter};
use crate::deadline::Deadline;
use crate::sync::Ordering;
use crate::util::sleeper::Sleeper;
use crate::util::wake_list::WakeList;
use crate::variants::Counting;

/// Where a [`RawAcquire`] stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not polled yet, or polled and not queued (never: a miss queues).
    Idle,
    /// The record is in the wait list, or was granted and the grant not
    /// yet seen by a poll.
    Queued,
    /// The future returned `Ready`: the caller holds the lock.
    Done,
}

/// A task's acquisition of a [`RawRwSem`] (from
/// [`RawRwSem::read_async`], [`write_async`](RawRwSem::write_async) or
/// [`upgradable_read_async`](RawRwSem::upgradable_read_async)): `Ready(())`
/// once the lock is held in that mode, which the caller then releases with
/// the matching unlock. Dropped before that, it leaves the queue, or gives
/// back (fairly) a hold a grant gave it. [`RwSemAsyncExt`](super::RwSemAsyncExt)
/// wraps it into guard-returning futures.
///
/// # Panics
/// If polled again after it returned `Ready`.
///
/// # Examples
/// A future polled once waits in the queue; dropped, it leaves it:
/// ```
/// use std::future::Future;
/// use std::task::{Context, Waker};
/// use herdless::RawRwSem;
///
/// let sem = RawRwSem::new();
/// sem.write();
/// let mut read = Box::pin(sem.read_async());
/// let mut cx = Context::from_waker(Waker::noop());
/// assert!(read.as_mut().poll(&mut cx).is_pending(), "a writer holds the lock");
/// assert_eq!(sem.waiters(), 1);
/// drop(read);
/// assert_eq!(sem.waiters(), 0);
/// // SAFETY: this thread holds the lock exclusive.
/// unsafe { sem.write_unlock() };
/// assert!(!sem.is_locked(), "the dropped future holds nothing");
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct RawAcquire<'a> {
    sem: &'a RawRwSem,
    kind: Kind,
    state: State,
    /// When this waiter asks for hand-off (`AtomicCount` only).
    handoff_at: Option<Deadline>,
    /// The record, built at the first poll that queues (a future that
    /// takes the lock at once never builds one). Pinned: never moved out
    /// of the future, dropped in place.
    waiter: Option<Waiter>,
}

impl<'a> RawAcquire<'a> {
    #[inline]
    pub(super) fn new(sem: &'a RawRwSem, kind: Kind) -> Self {
        debug_assert!(kind != Kind::Upgrade, "an upgrade is not an acquisition");
        RawAcquire {
            sem,
            kind,
            state: State::Idle,
            handoff_at: None,
            waiter: None,
        }
    }

    /// The record of a future that queued (state `Queued`).
    fn record(&self) -> &Waiter {
        self.waiter
            .as_ref()
            .expect("a queued future has its record")
    }

    #[inline]
    fn steals(&self) -> bool {
        self.sem.config.counting == Counting::AtomicCount
    }

    /// First poll that did not take the lock at once: queue (with this
    /// task's waker) and run the grant check, as a thread does.
    #[cold]
    fn queue(&mut self, cx: &Context<'_>) -> Poll<()> {
        let sem = self.sem;
        // Built in place: the future is pinned, and the record is in no
        // list before the push below.
        let waiter = self.waiter.insert(Waiter::new(Sleeper::task(), self.kind));
        let slot = waiter.wake_handle().slot().expect("a task's record");
        // SAFETY: we own the record and it is in no list yet.
        unsafe { slot.set(cx.waker()) };
        let node = NonNull::from(&*waiter);
        let mut wakes = WakeList::new();
        let mut q = sem.lock_wait();
        if sem.take_locked(&mut q, self.kind) {
            drop(q);
            return self.ready();
        }
        // SAFETY: the record is pinned in this future and in no list; it
        // leaves the list before the future is gone: a granter dequeues it
        // (we then see GRANTED), or `Drop` removes it under the wait lock.
        unsafe { q.list.push_back(node) };
        q.tallies.waits.add(1);
        if self.steals() {
            // As the thread's slow path: "No lost grant" (module docs).
            sem.count.fetch_or(WAITERS, Ordering::Relaxed);
            if self.kind == Kind::Write && readers_hold_without_handoff(sem) {
                // Module docs: a writer task cannot wait for its timer.
                sem.request_handoff_locked();
            }
        }
        sem.grant_locked(&mut q, &mut wakes);
        sem.finish(q, &mut wakes);
        self.state = State::Queued;
        self.handoff_at = self
            .steals()
            .then(|| Deadline::after(Some(RwSemTuning::get().handoff_after)));
        if self.record().is_granted() {
            // Our own grant check granted us (the wake it issued to our
            // waker is a spare poll at worst).
            return self.ready();
        }
        Poll::Pending
    }

    /// A poll of a queued record that was not granted when we looked.
    #[cold]
    fn poll_queued(&mut self, cx: &Context<'_>) -> Poll<()> {
        let sem = self.sem;
        if self.steals() && self.kind == Kind::Write {
            // Maybe nudged: try the lock as a running thread would, once.
            if sem.queued_writer_try_once() {
                let mut q = sem.lock_wait();
                // SAFETY: the lock is ours as a writer, so no grant can
                // come to us now; the record is still queued.
                sem.leave_locked(&mut q, NonNull::from(self.record()));
                drop(q);
                return self.ready();
            }
        }
        let timer = self.handoff_at.is_some_and(Deadline::has_passed);
        let writer_starved =
            self.kind == Kind::Write && self.steals() && readers_hold_without_handoff(sem);
        if timer || writer_starved {
            if timer {
                // Re-armed, except under loom, where every finite deadline
                // has passed (as the thread's loop does).
                self.handoff_at =
                    (!cfg!(loom)).then(|| Deadline::after(Some(RwSemTuning::get().handoff_after)));
            }
            let mut wakes = WakeList::new();
            let mut q = sem.lock_wait();
            if !self.record().is_granted() {
                sem.request_handoff_locked();
                // The lock may be free already (a nudged writer at the head
                // that HANDOFF now keeps out): grant here, or nobody would.
                sem.grant_locked(&mut q, &mut wakes);
            }
            sem.finish(q, &mut wakes);
            if self.record().is_granted() {
                return self.ready();
            }
        }
        let slot = self.record().wake_handle().slot().expect("a task's record");
        if slot.will_wake(cx.waker()) {
            // A grant after our look wakes this very waker.
            return Poll::Pending;
        }
        let q = sem.lock_wait();
        // Under the wait lock a grant is final.
        if self.record().is_granted() {
            drop(q);
            return self.ready();
        }
        // SAFETY: we own the record and hold the lock of the list it is in.
        unsafe { slot.set(cx.waker()) };
        drop(q);
        Poll::Pending
    }

    #[inline]
    fn ready(&mut self) -> Poll<()> {
        self.state = State::Done;
        Poll::Ready(())
    }

    /// Gives back a hold a grant gave to a future that is being dropped:
    /// with the fair unlock, so the lock goes to the next waiter in order.
    fn release_granted_hold(&self) {
        // SAFETY: the grant gave us this hold, and nobody else holds it for
        // us (the future never returned `Ready`, so no guard was made).
        unsafe {
            match self.kind {
                Kind::Read => self.sem.read_unlock_fair(),
                Kind::Write => self.sem.write_unlock_fair(),
                Kind::Upgradable => self.sem.upgradable_unlock_fair(),
                Kind::Upgrade => unreachable!("an upgrade is not an acquisition"),
            }
        }
    }
}

impl RawRwSem {
    /// Takes the lock shared, as a task (the async form of
    /// [`read`](Self::read); release with [`read_unlock`](Self::read_unlock)).
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// futures::executor::block_on(async {
    ///     sem.read_async().await;
    ///     sem.read_async().await; // readers share
    /// });
    /// assert!(sem.is_locked() && !sem.try_write());
    /// // SAFETY: the two shared holds the futures took.
    /// unsafe {
    ///     sem.read_unlock();
    ///     sem.read_unlock();
    /// }
    /// ```
    #[inline]
    pub fn read_async(&self) -> RawAcquire<'_> {
        RawAcquire::new(self, Kind::Read)
    }

    /// Takes the lock exclusive, as a task (the async form of
    /// [`write`](Self::write); release with
    /// [`write_unlock`](Self::write_unlock)).
    ///
    /// # Examples
    /// A task queues behind a thread's hold and is granted by its release:
    /// ```
    /// use herdless::RawRwSem;
    ///
    /// let sem = RawRwSem::new();
    /// sem.read();
    /// std::thread::scope(|s| {
    ///     let task = s.spawn(|| {
    ///         futures::executor::block_on(async {
    ///             sem.write_async().await; // queued behind the reader
    ///             let exclusive = sem.is_locked_exclusive();
    ///             // SAFETY: the exclusive hold the future took.
    ///             unsafe { sem.write_unlock() };
    ///             exclusive
    ///         })
    ///     });
    ///     while sem.waiters() == 0 {
    ///         std::thread::yield_now(); // until the task waits
    ///     }
    ///     // SAFETY: this thread holds the lock shared.
    ///     unsafe { sem.read_unlock() };
    ///     assert!(task.join().unwrap());
    /// });
    /// ```
    #[inline]
    pub fn write_async(&self) -> RawAcquire<'_> {
        RawAcquire::new(self, Kind::Write)
    }

    /// Takes the upgradable hold, as a task (the async form of
    /// [`upgradable_read`](Self::upgradable_read); release with
    /// [`upgradable_unlock`](Self::upgradable_unlock)).
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// futures::executor::block_on(async {
    ///     sem.upgradable_read_async().await;
    ///     sem.read_async().await; // shares with readers
    /// });
    /// assert!(!sem.try_upgradable_read(), "one upgradable holder");
    /// // SAFETY: the holds the futures took.
    /// unsafe {
    ///     sem.read_unlock();
    ///     sem.upgradable_unlock();
    /// }
    /// ```
    #[inline]
    pub fn upgradable_read_async(&self) -> RawAcquire<'_> {
        RawAcquire::new(self, Kind::Upgradable)
    }
}

impl std::fmt::Debug for RawAcquire<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawAcquire")
            .field("kind", &self.kind)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// Whether readers (or the upgradable reader) hold the lock and no
/// hand-off is pending: the state in which a waiting writer task would
/// starve without asking for one (module docs).
fn readers_hold_without_handoff(sem: &RawRwSem) -> bool {
    let c = sem.count.load(Ordering::Relaxed);
    c & (READERS | UPGRADABLE) != 0 && c & HANDOFF == 0
}

impl Future for RawAcquire<'_> {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: the record is never moved out of the future (only shared
        // references to it are taken; `Drop` runs in place).
        let this = unsafe { self.get_unchecked_mut() };
        match this.state {
            State::Idle => {
                // No spinning in a poll: one try, then queue.
                if this.steals() && this.sem.try_fast(this.kind) {
                    return this.ready();
                }
                this.queue(cx)
            }
            State::Queued if this.record().is_granted() => this.ready(),
            State::Queued => this.poll_queued(cx),
            State::Done => panic!("a lock future polled after it completed"),
        }
    }
}

impl Drop for RawAcquire<'_> {
    #[inline]
    fn drop(&mut self) {
        if self.state == State::Queued {
            self.cancel();
        }
    }
}

impl RawAcquire<'_> {
    /// Dropped while queued: leave, or give back a grant that won.
    #[cold]
    fn cancel(&mut self) {
        let granted = self.record().is_granted() || {
            let node = NonNull::from(self.record());
            let mut wakes = WakeList::new();
            let mut q = self.sem.lock_wait();
            // Under the wait lock a grant is final: one that came first
            // wins, and we give it back below (ARCHITECTURE contract 4);
            // otherwise we leave in O(1), granting whoever we held back
            // (contract 12).
            let kept = self
                .record()
                .cancel_locked(|| self.sem.cancel_locked(&mut q, node, &mut wakes));
            self.sem.finish(q, &mut wakes);
            kept.is_some()
        };
        if granted {
            self.release_granted_hold();
        }
    }
}
