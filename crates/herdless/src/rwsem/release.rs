//! Releasing a [`RawRwSem`]: the plain unlocks (which come to grant only
//! when someone waits), `downgrade`, and the fair unlocks that hand the
//! lock to the queue in order.

use super::count::{
    HOLDERS, NUDGED, READER, READERS, UPGRADABLE, UPGRADING, WAITERS, WRITER, WRITE_INTENT,
};
use super::raw::RawRwSem;
use crate::sync::Ordering;
use crate::util::wake_list::WakeList;
use crate::variants::Counting;

impl RawRwSem {
    // ----- releasing -------------------------------------------------------

    /// Releases a shared hold.
    ///
    /// # Safety
    /// The caller holds the lock shared (from `read`, `try_read`,
    /// `read_timeout`, `downgrade` or `downgrade_upgradable`) and gives up
    /// that hold. Any thread may release it: holds belong to no thread.
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held in that mode (the
    /// Safety contract broken).
    ///
    /// # Examples
    /// A shared hold taken on one thread and released on another:
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// sem.read();
    /// std::thread::scope(|s| {
    ///     // SAFETY: the main thread's shared hold, given up there.
    ///     s.spawn(|| unsafe { sem.read_unlock() });
    /// });
    /// assert!(!sem.is_locked());
    /// ```
    #[inline]
    pub unsafe fn read_unlock(&self) {
        match self.config.counting {
            Counting::AtomicCount => self.release_read_count(),
            Counting::Generic => {
                let mut wakes = WakeList::new();
                let mut q = self.lock_wait();
                debug_assert!(q.activity > 0, "read_unlock without a read hold");
                q.activity -= 1;
                if q.activity == 0 {
                    self.grant_locked(&mut q, &mut wakes);
                }
                self.finish(q, &mut wakes);
            }
        }
    }

    #[inline]
    pub(super) fn release_read_count(&self) {
        // Release pairs with the Acquire of the next holder (a writer's CAS,
        // an upgrade's CAS or `grant_locked`'s CAS): our reads
        // happen-before its writes.
        let prev = self.count.fetch_sub(READER, Ordering::Release);
        debug_assert!(prev & READERS != 0, "read_unlock without a read hold");
        let holders_left = (prev - READER) & HOLDERS;
        // Go to grant if someone waits and nobody is awake to take the lock
        // itself (NUDGED, or a spinning writer's claim: its claimant takes
        // the lock or grants when it lets the claim go, with an RMW after
        // ours), and we were the last holder, or the last reader an upgrade
        // waits for (UPGRADING: the slot's upgrader holds the lock
        // upgradable, nothing else). The upgrader set UPGRADING with an RMW
        // before its own check; see the module docs, "No lost grant".
        if prev & (WAITERS | NUDGED | WRITE_INTENT) == WAITERS
            && (holders_left == 0 || (holders_left == UPGRADABLE && prev & UPGRADING != 0))
        {
            self.wake_waiters();
        }
    }

    /// Releases an exclusive hold.
    ///
    /// # Safety
    /// The caller holds the lock exclusive (from `write`, `try_write`,
    /// `write_timeout`, `upgrade`, `try_upgrade` or `upgrade_timeout`) and
    /// gives up that hold.
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held in that mode (the
    /// Safety contract broken).
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// sem.write();
    /// // SAFETY: this thread holds the lock exclusive.
    /// unsafe { sem.write_unlock() };
    /// assert!(!sem.is_locked());
    /// ```
    #[inline]
    pub unsafe fn write_unlock(&self) {
        match self.config.counting {
            Counting::AtomicCount => {
                // Release as in `release_read_count`.
                let prev = self.count.fetch_sub(WRITER, Ordering::Release);
                debug_assert!(prev & WRITER != 0, "write_unlock without a write hold");
                if prev & (WAITERS | NUDGED) == WAITERS {
                    self.wake_waiters();
                }
            }
            Counting::Generic => {
                let mut wakes = WakeList::new();
                let mut q = self.lock_wait();
                debug_assert_eq!(q.activity, -1, "write_unlock without a write hold");
                q.activity = 0;
                self.grant_locked(&mut q, &mut wakes);
                self.finish(q, &mut wakes);
            }
        }
    }

    /// Turns an exclusive hold into a shared one without letting a writer
    /// in between, and grants the shared waiters queued at the head (up to
    /// the first queued writer, with at most one upgradable waiter) the
    /// lock alongside.
    ///
    /// # Safety
    /// The caller holds the lock exclusive; afterwards it holds it shared.
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held in that mode (the
    /// Safety contract broken).
    ///
    /// # Examples
    /// A reader asleep behind the writer shares the lock with it at once:
    /// ```
    /// use herdless::RawRwSem;
    ///
    /// let sem = RawRwSem::new();
    /// sem.write();
    /// std::thread::scope(|s| {
    ///     let reader = s.spawn(|| {
    ///         sem.read();
    ///         // SAFETY: this thread holds the lock shared.
    ///         unsafe { sem.read_unlock() };
    ///     });
    ///     while sem.waiters() == 0 {
    ///         std::thread::yield_now(); // until the reader sleeps
    ///     }
    ///     // SAFETY: this thread holds the lock exclusive.
    ///     unsafe { sem.downgrade() };
    ///     reader.join().unwrap(); // it was granted alongside our shared hold
    ///     assert!(sem.is_locked() && !sem.is_locked_exclusive());
    ///     // SAFETY: the shared hold the downgrade left.
    ///     unsafe { sem.read_unlock() };
    /// });
    /// ```
    pub unsafe fn downgrade(&self) {
        match self.config.counting {
            Counting::AtomicCount => {
                // WRITER -> one READER in one atomic add: below READER the
                // word holds WRITER and the flags (UPGRADING, WRITE_INTENT
                // and UPGRADABLE are clear while a writer holds), so those
                // bits sum to at most 15, and adding READER - WRITER (127)
                // clears bit 0 and carries exactly one into the reader
                // count, leaving the flags as they were. Release: queued
                // readers granted next see our writes (`grant_locked`'s
                // CAS reads this).
                let prev = self
                    .count
                    .fetch_add(READER.wrapping_sub(WRITER), Ordering::Release);
                debug_assert!(prev & WRITER != 0, "downgrade without a write hold");
                if prev & WAITERS != 0 {
                    self.wake_waiters();
                }
            }
            Counting::Generic => {
                let mut wakes = WakeList::new();
                let mut q = self.lock_wait();
                debug_assert_eq!(q.activity, -1, "downgrade without a write hold");
                q.activity = 1;
                self.grant_locked(&mut q, &mut wakes);
                self.finish(q, &mut wakes);
            }
        }
    }

    /// Releases a shared hold and, if anyone waits, hands the lock to the
    /// queue in order: no running thread can take it ahead of the head
    /// (see [`write_unlock_fair`](Self::write_unlock_fair)).
    ///
    /// # Safety
    /// As [`read_unlock`](Self::read_unlock).
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held in that mode (the
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
    /// sem.read();
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
    ///     // SAFETY: this thread holds the lock shared.
    ///     unsafe { sem.read_unlock_fair() }; // the writer holds it now
    ///     sem.read(); // so this waits for the writer to leave
    ///     assert!(wrote.load(Ordering::Relaxed));
    ///     // SAFETY: the shared hold just taken.
    ///     unsafe { sem.read_unlock() };
    /// });
    /// ```
    pub unsafe fn read_unlock_fair(&self) {
        match self.config.counting {
            // SAFETY: the caller's contract (a shared hold).
            Counting::AtomicCount => unsafe { self.release_fair(READER) },
            // SAFETY: the caller's contract. `Generic` is always fair: a
            // release grants the head directly, and newcomers queue while
            // anyone waits.
            Counting::Generic => unsafe { self.read_unlock() },
        }
    }

    /// Releases an exclusive hold and, if anyone waits, hands the lock to
    /// the queue in order: the writer at the head is granted rather than
    /// nudged, and no running thread can take the lock ahead of it (no
    /// barging). The granted threads are still woken after the wait lock is
    /// dropped (`WakeAfterUnlock`), as for any grant.
    ///
    /// # Safety
    /// As [`write_unlock`](Self::write_unlock).
    ///
    /// # Panics
    /// In debug builds, if the lock is visibly not held in that mode (the
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
    /// sem.write();
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
    ///     // SAFETY: this thread holds the lock exclusive.
    ///     unsafe { sem.write_unlock_fair() }; // the writer holds it now
    ///     sem.read(); // so this waits for the writer to leave
    ///     assert!(wrote.load(Ordering::Relaxed));
    ///     // SAFETY: the shared hold just taken.
    ///     unsafe { sem.read_unlock() };
    /// });
    /// ```
    pub unsafe fn write_unlock_fair(&self) {
        match self.config.counting {
            // SAFETY: the caller's contract (the exclusive hold).
            Counting::AtomicCount => unsafe { self.release_fair(WRITER) },
            // SAFETY: the caller's contract; `Generic` is always fair.
            Counting::Generic => unsafe { self.write_unlock() },
        }
    }

    /// `AtomicCount`'s fair release of `hold` (`READER`, `WRITER` or
    /// `UPGRADABLE`).
    ///
    /// # Safety
    /// The caller holds the lock in the mode `hold` names and gives up that
    /// hold.
    pub(super) unsafe fn release_fair(&self, hold: usize) {
        if self.count.load(Ordering::Relaxed) & WAITERS == 0 {
            // Nobody to be fair to. A waiter queueing meanwhile is ordered
            // against our release's RMW as for any release.
            match hold {
                READER => self.release_read_count(),
                // SAFETY: the caller holds the lock exclusive (contract).
                WRITER => unsafe { self.write_unlock() },
                // SAFETY: the caller holds it upgradable (contract).
                _ => unsafe { self.upgradable_unlock() },
            }
            return;
        }
        let mut wakes = WakeList::new();
        let mut q = self.lock_wait();
        if !q.is_empty() {
            // Before our hold goes: from here no fast path takes the lock,
            // and `grant_locked` grants the writer at the head instead of
            // nudging it. If other holders remain, the grant is made by the
            // last of them to leave; HANDOFF keeps the lock for the head
            // until then.
            self.request_handoff_locked();
        }
        // Release pairs with the Acquire of the next holder, here
        // `grant_locked`'s CAS (or, if holders remain, the one the last of
        // them makes). We hold the wait lock, so we cannot take the normal
        // release paths (they may need it): we grant below ourselves.
        let prev = self.count.fetch_sub(hold, Ordering::Release);
        debug_assert!(
            if hold == READER {
                prev & READERS != 0
            } else {
                prev & hold != 0
            },
            "a fair unlock without the hold"
        );
        self.grant_locked(&mut q, &mut wakes);
        self.finish(q, &mut wakes);
    }
}
