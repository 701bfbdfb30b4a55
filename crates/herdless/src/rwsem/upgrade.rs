//! Upgradable reads on [`RawRwSem`]: the upgradable hold, `upgrade` (which
//! waits in the upgrade slot for the readers to drain), and the two
//! downgrades that involve it. The module docs hold the state table and the
//! "No lost grant" argument; the ordering of each step is commented next to
//! its atomics here.

use std::convert::Infallible;
use std::pin::pin;
use std::ptr::NonNull;
use std::time::Duration;

use super::count::{
    HANDOFF, NUDGED, READER, READERS, UPGRADABLE, UPGRADING, WAITERS, WRITER, WRITE_INTENT,
};
use super::raw::RawRwSem;
use super::wait_list::WaitList;
use super::waiter::{Kind, Waiter, Wakes};
use crate::deadline::Deadline;
use crate::parker;
use crate::sync::Ordering;
use crate::util::sleeper::Sleeper;
use crate::util::waiter::Slept;
use crate::util::wake_list::WakeList;
use crate::variants::Counting;
use crate::wait_queue::TimedOut;

impl RawRwSem {
    /// Takes the upgradable hold: shared with readers, exclusive of writers
    /// and of other upgradable readers; it can later be upgraded to the
    /// exclusive hold without letting a writer in between. Sleeps (FIFO, as
    /// [`read`](Self::read)) while a writer or another upgradable reader
    /// holds the lock. Release the hold with
    /// [`upgradable_unlock`](Self::upgradable_unlock), or turn it into
    /// another with [`upgrade`](Self::upgrade) or
    /// [`downgrade_upgradable`](Self::downgrade_upgradable).
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// sem.upgradable_read();
    /// assert!(sem.try_read(), "shared with readers");
    /// assert!(!sem.try_write() && !sem.try_upgradable_read());
    /// // SAFETY: this thread holds the shared and the upgradable hold.
    /// unsafe {
    ///     sem.read_unlock();
    ///     sem.upgradable_unlock();
    /// }
    /// ```
    #[inline]
    pub fn upgradable_read(&self) {
        let acquired = self.acquire(Kind::Upgradable, None);
        debug_assert!(acquired, "an untimed acquire cannot time out");
    }

    /// Takes the upgradable hold if that is possible without waiting;
    /// returns whether it did.
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// assert!(sem.try_upgradable_read());
    /// assert!(!sem.try_upgradable_read(), "one upgradable holder at a time");
    /// // SAFETY: this thread holds the lock upgradable.
    /// unsafe { sem.upgradable_unlock() };
    /// ```
    #[inline]
    pub fn try_upgradable_read(&self) -> bool {
        self.try_acquire(Kind::Upgradable)
    }

    /// [`upgradable_read`](Self::upgradable_read) giving up after `timeout`
    /// (as [`read_timeout`](Self::read_timeout)).
    ///
    /// # Errors
    /// [`TimedOut`] if the upgradable hold could not be taken within
    /// `timeout`; nothing is held then.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use herdless::{wait_queue::TimedOut, RawRwSem};
    ///
    /// let sem = RawRwSem::new();
    /// sem.upgradable_read();
    /// let wait = Duration::from_millis(1);
    /// assert_eq!(sem.upgradable_read_timeout(wait), Err(TimedOut), "taken");
    /// // SAFETY: this thread holds the lock upgradable.
    /// unsafe { sem.upgradable_unlock() };
    /// assert_eq!(sem.upgradable_read_timeout(wait), Ok(()));
    /// // SAFETY: the upgradable hold just taken.
    /// unsafe { sem.upgradable_unlock() };
    /// ```
    pub fn upgradable_read_timeout(&self, timeout: Duration) -> Result<(), TimedOut> {
        self.acquire(Kind::Upgradable, Some(timeout))
            .then_some(())
            .ok_or(TimedOut)
    }

    /// Releases the upgradable hold.
    ///
    /// # Safety
    /// The caller holds the lock upgradable (from `upgradable_read`,
    /// `try_upgradable_read`, `upgradable_read_timeout` or
    /// `downgrade_to_upgradable`, or kept by a failed `try_upgrade` /
    /// `upgrade_timeout`) and gives up that hold.
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held upgradable (the
    /// Safety contract broken).
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// sem.upgradable_read();
    /// // SAFETY: this thread holds the lock upgradable.
    /// unsafe { sem.upgradable_unlock() };
    /// assert!(!sem.is_locked() && sem.try_write());
    /// // SAFETY: the exclusive hold just taken.
    /// unsafe { sem.write_unlock() };
    /// ```
    #[inline]
    pub unsafe fn upgradable_unlock(&self) {
        match self.config.counting {
            Counting::AtomicCount => {
                // Release pairs with the Acquire of the next holder that
                // excludes us (a writer's or an upgradable reader's CAS, or
                // `grant_locked`'s). Our hold may have kept the head (a
                // writer or an upgradable waiter) waiting: go and grant if
                // anyone waits and nobody is awake to take it (NUDGED). A
                // waiter that queued after this RMW sees the hold gone in
                // its own grant check (see "No lost grant").
                let prev = self.count.fetch_sub(UPGRADABLE, Ordering::Release);
                debug_assert!(
                    prev & (UPGRADABLE | UPGRADING) == UPGRADABLE,
                    "upgradable_unlock without an upgradable hold, or while upgrading"
                );
                if prev & (WAITERS | NUDGED) == WAITERS {
                    self.wake_waiters();
                }
            }
            Counting::Generic => {
                let mut wakes = WakeList::new();
                let mut q = self.lock_wait();
                debug_assert!(q.upgradable, "upgradable_unlock without an upgradable hold");
                q.upgradable = false;
                self.grant_locked(&mut q, &mut wakes);
                self.finish(q, &mut wakes);
            }
        }
    }

    /// Releases the upgradable hold and, if anyone waits, hands the lock to
    /// the queue in order (see
    /// [`write_unlock_fair`](Self::write_unlock_fair)).
    ///
    /// # Safety
    /// As [`upgradable_unlock`](Self::upgradable_unlock).
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held upgradable (the
    /// Safety contract broken).
    ///
    /// # Examples
    /// A writer asleep on the lock gets it before the releasing thread can
    /// take it again:
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use herdless::RawRwSem;
    ///
    /// let (sem, wrote) = (RawRwSem::new(), AtomicBool::new(false));
    /// sem.upgradable_read();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         sem.write();
    ///         wrote.store(true, Ordering::Relaxed);
    ///         // SAFETY: this thread holds the lock exclusive.
    ///         unsafe { sem.write_unlock() };
    ///     });
    ///     while sem.waiters() == 0 {
    ///         std::thread::yield_now(); // until the writer sleeps
    ///     }
    ///     // SAFETY: this thread holds the lock upgradable.
    ///     unsafe { sem.upgradable_unlock_fair() }; // the writer holds it now
    ///     sem.read(); // so this waits for the writer to leave
    ///     assert!(wrote.load(Ordering::Relaxed));
    ///     // SAFETY: the shared hold just taken.
    ///     unsafe { sem.read_unlock() };
    /// });
    /// ```
    pub unsafe fn upgradable_unlock_fair(&self) {
        match self.config.counting {
            // SAFETY: the caller's contract (the upgradable hold).
            Counting::AtomicCount => unsafe { self.release_fair(UPGRADABLE) },
            // SAFETY: the caller's contract; `Generic` is always fair.
            Counting::Generic => unsafe { self.upgradable_unlock() },
        }
    }

    /// Turns the upgradable hold into the exclusive one, waiting for the
    /// readers to leave. New readers are kept out meanwhile (the upgrade is
    /// not starved), and the upgrade goes before every queued waiter: the
    /// lock is held all along.
    ///
    /// # Safety
    /// The caller holds the lock upgradable; afterwards it holds it
    /// exclusive.
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held upgradable (the
    /// Safety contract broken).
    ///
    /// # Examples
    /// The upgrade waits for the last reader, here released by another
    /// thread once the upgrade waits:
    /// ```
    /// use herdless::RawRwSem;
    ///
    /// let sem = RawRwSem::new();
    /// sem.upgradable_read();
    /// sem.read(); // a reader shares the lock
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         while sem.waiters() == 0 {
    ///             std::thread::yield_now(); // until the upgrade waits
    ///         }
    ///         // SAFETY: the main thread's shared hold (holds belong to no
    ///         // thread); it is not used after this.
    ///         unsafe { sem.read_unlock() };
    ///     });
    ///     // SAFETY: this thread holds the lock upgradable.
    ///     unsafe { sem.upgrade() };
    ///     assert!(sem.is_locked_exclusive());
    ///     // SAFETY: the upgrade made the hold exclusive.
    ///     unsafe { sem.write_unlock() };
    /// });
    /// ```
    #[inline]
    pub unsafe fn upgrade(&self) {
        let upgraded = self.config.counting == Counting::AtomicCount && self.try_upgrade_count()
            || self.upgrade_slow(None);
        debug_assert!(upgraded, "an untimed upgrade cannot time out");
    }

    /// Turns the upgradable hold into the exclusive one if no reader holds
    /// the lock; otherwise keeps the upgradable hold and returns `false`.
    ///
    /// # Safety
    /// The caller holds the lock upgradable; afterwards it holds it
    /// exclusive if `true` was returned, upgradable otherwise.
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held upgradable (the
    /// Safety contract broken).
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// sem.upgradable_read();
    /// sem.read();
    /// // SAFETY: this thread holds the lock upgradable, and shared.
    /// unsafe {
    ///     assert!(!sem.try_upgrade(), "a reader holds the lock");
    ///     sem.read_unlock();
    ///     assert!(sem.try_upgrade());
    ///     sem.write_unlock();
    /// }
    /// ```
    pub unsafe fn try_upgrade(&self) -> bool {
        match self.config.counting {
            Counting::AtomicCount => self.try_upgrade_count(),
            Counting::Generic => self.upgrade_locked(&mut self.lock_wait()),
        }
    }

    /// [`upgrade`](Self::upgrade) giving up after `timeout` (`Duration::ZERO`:
    /// [`try_upgrade`](Self::try_upgrade); `Duration::MAX`: no limit). On
    /// `Err` the upgradable hold is still held, and readers queued behind
    /// the upgrade are let in. A grant that races the timeout wins.
    ///
    /// # Safety
    /// The caller holds the lock upgradable; afterwards it holds it
    /// exclusive on `Ok`, upgradable on `Err`.
    ///
    /// # Errors
    /// [`TimedOut`] if readers still held the lock after `timeout`; the
    /// caller then still holds it upgradable.
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held upgradable (the
    /// Safety contract broken).
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use herdless::{wait_queue::TimedOut, RawRwSem};
    ///
    /// let sem = RawRwSem::new();
    /// sem.upgradable_read();
    /// sem.read();
    /// // SAFETY: this thread holds the lock upgradable, and shared.
    /// unsafe {
    ///     assert_eq!(sem.upgrade_timeout(Duration::from_millis(1)), Err(TimedOut));
    ///     assert!(!sem.try_upgradable_read(), "the upgradable hold is kept");
    ///     sem.read_unlock();
    ///     assert_eq!(sem.upgrade_timeout(Duration::from_millis(1)), Ok(()));
    ///     sem.write_unlock();
    /// }
    /// ```
    pub unsafe fn upgrade_timeout(&self, timeout: Duration) -> Result<(), TimedOut> {
        let upgraded = self.config.counting == Counting::AtomicCount && self.try_upgrade_count()
            || self.upgrade_slow(Some(timeout));
        upgraded.then_some(()).ok_or(TimedOut)
    }

    /// Turns the upgradable hold into a shared one, and grants the waiters
    /// at the head the lock alongside if they can have it now (an
    /// upgradable waiter, and the readers around it).
    ///
    /// # Safety
    /// The caller holds the lock upgradable; afterwards it holds it shared.
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held upgradable (the
    /// Safety contract broken).
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// sem.upgradable_read();
    /// // SAFETY: this thread holds the lock upgradable.
    /// unsafe { sem.downgrade_upgradable() };
    /// assert!(sem.try_upgradable_read(), "the upgradable hold is free again");
    /// // SAFETY: this thread holds the lock shared, and upgradable.
    /// unsafe {
    ///     sem.read_unlock();
    ///     sem.upgradable_unlock();
    /// }
    /// assert!(!sem.is_locked());
    /// ```
    pub unsafe fn downgrade_upgradable(&self) {
        match self.config.counting {
            Counting::AtomicCount => {
                // UPGRADABLE -> one READER in one atomic add: bit 6 is set,
                // so adding READER - UPGRADABLE (= UPGRADABLE) clears it and
                // carries one into the reader count; the bits below are
                // untouched. Release: the upgradable waiter granted next
                // reads this RMW with its grant's Acquire CAS.
                let prev = self.count.fetch_add(READER - UPGRADABLE, Ordering::Release);
                debug_assert!(
                    prev & (UPGRADABLE | UPGRADING) == UPGRADABLE,
                    "downgrade_upgradable without an upgradable hold, or while upgrading"
                );
                if prev & WAITERS != 0 {
                    self.wake_waiters();
                }
            }
            Counting::Generic => {
                let mut wakes = WakeList::new();
                let mut q = self.lock_wait();
                debug_assert!(
                    q.upgradable,
                    "downgrade_upgradable without an upgradable hold"
                );
                q.upgradable = false;
                q.activity += 1;
                self.grant_locked(&mut q, &mut wakes);
                self.finish(q, &mut wakes);
            }
        }
    }

    /// Turns the exclusive hold into the upgradable one without letting a
    /// writer in between, and grants the readers queued at the head the
    /// lock alongside (no upgradable waiter: the hold is ours).
    ///
    /// # Safety
    /// The caller holds the lock exclusive; afterwards it holds it
    /// upgradable.
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held exclusive (the
    /// Safety contract broken).
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// sem.write();
    /// // SAFETY: this thread holds the lock exclusive.
    /// unsafe { sem.downgrade_to_upgradable() };
    /// assert!(sem.try_read(), "readers share the lock again");
    /// // SAFETY: this thread holds the lock shared, and upgradable.
    /// unsafe {
    ///     sem.read_unlock();
    ///     assert!(sem.try_upgrade(), "and it can be upgraded back");
    ///     sem.write_unlock();
    /// }
    /// ```
    pub unsafe fn downgrade_to_upgradable(&self) {
        match self.config.counting {
            Counting::AtomicCount => {
                // WRITER -> UPGRADABLE in one atomic add: the low bits are
                // WRITER plus flags in bits 1-3 (UPGRADING, WRITE_INTENT and
                // UPGRADABLE are clear while a writer holds), at most 15,
                // so adding UPGRADABLE - WRITER clears bit 0 and sets bit
                // 6, leaving the flags as they were. Release: readers
                // granted next see our writes (`grant_locked`'s AcqRel CAS
                // reads this RMW).
                let prev = self.count.fetch_add(UPGRADABLE - WRITER, Ordering::Release);
                debug_assert!(
                    prev & (WRITER | UPGRADABLE | UPGRADING | WRITE_INTENT) == WRITER,
                    "downgrade_to_upgradable without a write hold"
                );
                if prev & WAITERS != 0 {
                    self.wake_waiters();
                }
            }
            Counting::Generic => {
                let mut wakes = WakeList::new();
                let mut q = self.lock_wait();
                debug_assert_eq!(
                    q.activity, -1,
                    "downgrade_to_upgradable without a write hold"
                );
                q.activity = 0;
                q.upgradable = true;
                self.grant_locked(&mut q, &mut wakes);
                self.finish(q, &mut wakes);
            }
        }
    }

    /// `AtomicCount`: UPGRADABLE -> WRITER with a CAS if no reader holds.
    /// Ignores HANDOFF: the upgrader holds the lock already and overtakes
    /// nobody.
    pub(super) fn try_upgrade_count(&self) -> bool {
        let mut c = self.count.load(Ordering::Relaxed);
        loop {
            debug_assert!(c & UPGRADABLE != 0, "upgrade without an upgradable hold");
            if c & READERS != 0 {
                return false;
            }
            // Acquire pairs with the Release of every reader that left
            // (`release_read_count`): their critical sections happen-before
            // ours as the writer.
            match self.count.compare_exchange_weak(
                c,
                (c & !(UPGRADABLE | UPGRADING)) | WRITER,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => c = now,
            }
        }
    }

    /// Takes a waiting upgrade that was not granted out of the slot,
    /// holding the wait lock (a timeout, a dropped future): the upgradable
    /// hold stays, and readers queued behind the upgrade share the lock
    /// with it again (ARCHITECTURE contract 11), granted now.
    pub(super) fn leave_upgrade_slot_locked(&self, q: &mut WaitList, wakes: &mut Wakes) {
        q.upgrader = None;
        q.tallies.timeouts.add(1);
        if self.config.counting == Counting::AtomicCount {
            // Readers may come in again; if nobody else waits, releases
            // need not come to grant. Relaxed: routes only (the wait lock
            // is held).
            let clear = if q.list.is_empty() {
                WAITERS | UPGRADING | HANDOFF | NUDGED
            } else {
                UPGRADING
            };
            self.count.fetch_and(!clear, Ordering::Relaxed);
        }
        self.grant_locked(q, wakes);
    }

    /// Takes the upgrade slot, holding the wait lock, and runs the grant
    /// check (which may grant the upgrade at once). The record must be
    /// pinned and stay live until it leaves the slot (granted, or taken out
    /// by `leave_upgrade_slot_locked`).
    pub(super) fn enter_upgrade_slot_locked(
        &self,
        q: &mut WaitList,
        node: NonNull<Waiter>,
        wakes: &mut Wakes,
    ) {
        debug_assert!(q.upgrader.is_none(), "one upgradable holder, one upgrade");
        q.upgrader = Some(node);
        q.tallies.waits.add(1);
        if self.config.counting == Counting::AtomicCount {
            // Keeps new readers out (their fast paths back out on
            // UPGRADING) and tells the last reader to come and grant. The
            // RMW orders us against every reader's release RMW: a release
            // after it sees UPGRADING and comes to grant; a release before
            // it is seen by the load in `grant_locked` below (coherence
            // after our own RMW), which then grants us at once. See the
            // module docs, "No lost grant".
            self.count.fetch_or(WAITERS | UPGRADING, Ordering::Relaxed);
            // A writer nudged at the head is no longer first: releases must
            // not skip the wait lock for it (or the upgrade would wait for
            // that writer's hand-off timer, which has no reason to grant us
            // sooner; loom model
            // `upgrade_overtaking_a_nudged_writer_is_still_granted`). A
            // release between the two RMWs that skipped is seen by
            // `grant_locked`'s load, which comes after both.
            self.count.fetch_and(!NUDGED, Ordering::Relaxed);
        }
        self.grant_locked(q, wakes);
    }

    /// The upgrade, holding the wait lock, if no reader holds.
    pub(super) fn upgrade_locked(&self, q: &mut WaitList) -> bool {
        match self.config.counting {
            Counting::AtomicCount => self.try_upgrade_count(),
            Counting::Generic => {
                debug_assert!(q.upgradable, "upgrade without an upgradable hold");
                if q.activity != 0 {
                    return false;
                }
                q.activity = -1;
                q.upgradable = false;
                true
            }
        }
    }

    /// Waits in the upgrade slot until the last reader grants the upgrade,
    /// or until `timeout` (then leaves the slot, still holding the lock
    /// upgradable). Returns whether the upgrade happened.
    #[cold]
    fn upgrade_slow(&self, timeout: Option<Duration>) -> bool {
        // As in `acquire_slow`: zero is recognised from the Duration.
        let try_only = timeout == Some(Duration::ZERO);
        let deadline = Deadline::after(timeout);
        parker::with_current(|parker| {
            let waiter = pin!(Waiter::new(
                Sleeper::Thread(parker.unparker()),
                Kind::Upgrade
            ));
            let node = NonNull::from(&*waiter);
            let mut wakes = WakeList::new();

            let mut q = self.lock_wait();
            if self.upgrade_locked(&mut q) {
                return true;
            }
            if try_only {
                return false;
            }
            // The record is pinned on this stack frame; it leaves the slot
            // before the frame ends: a granter takes it out (we then see
            // GRANTED), or we take it out ourselves under the wait lock.
            self.enter_upgrade_slot_locked(&mut q, node, &mut wakes);
            self.finish(q, &mut wakes);

            match waiter.sleep(parker, deadline, || None::<Infallible>) {
                Slept::Granted(_) => true,
                Slept::Stopped(never) => match never {},
                Slept::DeadlinePassed => {
                    let mut q = self.lock_wait();
                    // Under the wait lock a grant is final: one that beat
                    // the timeout wins (ARCHITECTURE contract 4).
                    let kept =
                        waiter.cancel_locked(|| self.leave_upgrade_slot_locked(&mut q, &mut wakes));
                    self.finish(q, &mut wakes);
                    kept.is_some()
                }
            }
        })
    }
}
