//! Granting a [`RawRwSem`] to its queue (ARCHITECTURE contract 11): the
//! grant of the head batch or the upgrade slot, the nudge of a writer at
//! the head, the hand-off request, and a waiter leaving the queue (which
//! lets whoever it held back proceed, contract 12).

use std::ptr::NonNull;

use super::count::{
    HANDOFF, HOLDERS, NUDGED, READER, READERS, UPGRADABLE, UPGRADING, WAITERS, WRITER,
    WRITE_BLOCKERS, WRITE_INTENT,
};
use super::raw::RawRwSem;
use super::wait_list::{HeadBatch, WaitGuard, WaitList};
use super::waiter::{nudge, Waiter, Wakes};
use crate::sync::Ordering;
use crate::util::waiter::GRANTED;
use crate::util::wake_list::WakeList;
use crate::variants::{Counting, WakeTiming};

impl RawRwSem {
    /// Takes a waiter that was not granted off the list, holding the wait
    /// lock; returns whether it was the head.
    pub(super) fn leave_locked(&self, q: &mut WaitList, node: NonNull<Waiter>) -> bool {
        let was_head = q.list.front() == Some(node);
        // SAFETY: not granted (the caller checked under this same lock hold,
        // or holds the lock as a writer, which no grant can give it now), so
        // still in the list, where its owner (the caller) queued it.
        unsafe { q.list.remove(node) };
        if self.config.counting == Counting::AtomicCount {
            if q.is_empty() {
                // Nobody waits: releases need not come to grant, and nobody
                // asks for hand-off. Relaxed: the bits only route; the data
                // is ordered by the holder counts. (UPGRADING is clear: the
                // upgrade slot is empty.)
                self.count
                    .fetch_and(!(WAITERS | HANDOFF | NUDGED), Ordering::Relaxed);
            } else if was_head {
                // A nudge was for us: the new head is asleep.
                self.count.fetch_and(!NUDGED, Ordering::Relaxed);
            }
        }
        was_head
    }

    /// Removes a waiter that timed out, holding the wait lock, and lets
    /// whoever it was holding back proceed (ARCHITECTURE contract 11).
    pub(super) fn cancel_locked(&self, q: &mut WaitList, node: NonNull<Waiter>, wakes: &mut Wakes) {
        q.tallies.timeouts.add(1);
        if self.leave_locked(q, node) {
            // A writer at the head held back readers queued behind it while
            // readers hold the lock, an upgradable waiter at the head held
            // back readers while another upgradable reader holds it, or the
            // lock was free with a grant to us about to happen: the new
            // head may proceed now.
            self.grant_locked(q, wakes);
        }
    }

    /// Asks for strict hand-off, holding the wait lock: no fast path takes
    /// the lock any more (every kind checks HANDOFF), and the next grant,
    /// which clears the bit, gives the lock to the head even if it is a
    /// writer. The caller then runs `grant_locked`.
    ///
    /// Also clears NUDGED: a nudged writer at the head can no longer take
    /// the lock itself, so releases must come to grant again. Without this,
    /// a release that skipped the wait lock because NUDGED was set (before
    /// the writer cleared it) would leave a free lock that HANDOFF keeps
    /// from the writer, which would then sleep until its own hand-off timer
    /// (up to `HANDOFF_AFTER`; under loom, where that timer fires once, a
    /// deadlock: `nudged_writer_kept_out_by_handoff_is_still_granted`).
    /// Both RMWs precede the
    /// caller's `grant_locked` load: a release before them is seen by that
    /// load (coherence), a release after them finds NUDGED clear and
    /// routes. Relaxed: the bits only route; the wait lock is held.
    pub(super) fn request_handoff_locked(&self) {
        self.count.fetch_or(HANDOFF, Ordering::Relaxed);
        self.count.fetch_and(!NUDGED, Ordering::Relaxed);
    }

    #[cold]
    pub(super) fn wake_waiters(&self) {
        let mut wakes = WakeList::new();
        let mut q = self.lock_wait();
        self.grant_locked(&mut q, &mut wakes);
        self.finish(q, &mut wakes);
    }

    /// Grants the lock to whoever waits first if it can have it now: the
    /// upgrader in the upgrade slot (once no reader holds), else the head of
    /// the list: the leading batch of shared waiters (unless a writer
    /// holds; its upgradable waiter only if no upgradable reader holds), or
    /// one writer (if nobody holds). Dequeues them and puts them on
    /// `wakes`; the caller must wake them, after releasing the wait lock
    /// (or, for `WakeUnderLock`, before). Does nothing when the holders
    /// exclude the head: the release that lifts the exclusion calls this
    /// again.
    pub(super) fn grant_locked(&self, q: &mut WaitList, wakes: &mut Wakes) {
        if let Some(upgrader) = q.upgrader {
            // The upgradable holder goes first (it holds the lock already);
            // while it waits nothing else is granted.
            if self.grant_upgrade_count(q) {
                q.upgrader = None;
                // SAFETY: just taken out of the slot under the wait lock we
                // hold; a record in the slot has never been granted.
                unsafe { Waiter::grant(upgrader, GRANTED, wakes) };
                q.tallies.wakeups.add(1);
            }
            return;
        }
        let Some(batch) = q.head_batch() else {
            return;
        };
        if self.config.counting == Counting::AtomicCount
            && batch == HeadBatch::Write
            && self.count.load(Ordering::Relaxed) & WRITE_BLOCKERS == 0
        {
            // A free lock (and no writer's claim on it) and a writer at
            // the head that has not asked for hand-off: wake it to take
            // the lock itself, and leave the lock free meanwhile for
            // whoever runs first (the kernel's writer wakeup since 4.x).
            // Granting it instead would keep the lock
            // idle for a whole wakeup latency while running threads pile up
            // behind it: a convoy. The load may be stale: a holder that got
            // in since will find WAITERS on release and come back here.
            let head = q.list.front().expect("head_batch found a head");
            // SAFETY: the head is in the list, under the wait lock we hold.
            unsafe { nudge(head, wakes) };
            // Relaxed: routes releases only (see NUDGED); under the lock.
            self.count.fetch_or(NUDGED, Ordering::Relaxed);
            q.tallies.wakeups.add(1);
            return;
        }
        let records = match self.config.counting {
            Counting::Generic => match batch {
                HeadBatch::Write if q.activity == 0 && !q.upgradable => {
                    q.activity = -1;
                    1
                }
                HeadBatch::Write => 0,
                HeadBatch::Shared { .. } if q.activity < 0 => 0,
                HeadBatch::Shared { .. } => {
                    let (readers, upgradable, records) = batch.take(!q.upgradable);
                    q.activity += readers as isize;
                    q.upgradable |= upgradable;
                    records
                }
            },
            Counting::AtomicCount => {
                let mut c = self.count.load(Ordering::Relaxed);
                loop {
                    // What the holders in `c` allow, and the count after.
                    // Nothing while a spinning writer claims the lock: it
                    // takes the lock itself, or grants when it gives the
                    // claim up (`claim.rs`).
                    let (records, new) = match batch {
                        _ if c & WRITE_INTENT != 0 => (0, 0),
                        HeadBatch::Write if c & HOLDERS == 0 => (1, WRITER),
                        HeadBatch::Shared { .. } if c & WRITER == 0 => {
                            let (readers, upgradable, records) = batch.take(c & UPGRADABLE == 0);
                            let up = if upgradable { UPGRADABLE } else { 0 };
                            (records, (c & HOLDERS) + readers * READER + up)
                        }
                        _ => (0, 0),
                    };
                    if records == 0 {
                        break 0;
                    }
                    // The grant serves the oldest waiter: HANDOFF and
                    // NUDGED are cleared (a later waiter that waits too long
                    // sets HANDOFF again; no writer at the head is awake).
                    // UPGRADING is clear: the upgrade slot is empty.
                    let waiters = if q.list.len() > records { WAITERS } else { 0 };
                    // Acquire pairs with the Release of every holder that
                    // left (their RMWs form one release sequence on the
                    // word): their critical sections happen-before the
                    // grant, which `grant` then publishes with Release.
                    match self.count.compare_exchange_weak(
                        c,
                        new | waiters,
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => break records,
                        Err(now) => c = now,
                    }
                }
            }
        };
        for _ in 0..records {
            let node = q
                .list
                .pop_front()
                .expect("the batch was counted in the list");
            // SAFETY: just dequeued under the wait lock we hold; a queued
            // waiter has never been granted.
            unsafe { Waiter::grant(node, GRANTED, wakes) };
        }
        q.tallies.wakeups.add(records as u64);
    }

    /// Makes the upgrader in the slot the writer if no reader holds the lock
    /// any more (for `AtomicCount`: clears `UPGRADABLE`, `UPGRADING` and the
    /// hand-off flags, sets `WRITER`); returns whether it did. The caller
    /// holds the wait lock and publishes the grant.
    pub(super) fn grant_upgrade_count(&self, q: &mut WaitList) -> bool {
        match self.config.counting {
            Counting::Generic => {
                debug_assert!(q.upgradable && q.activity >= 0);
                if q.activity != 0 {
                    return false;
                }
                q.activity = -1;
                q.upgradable = false;
                true
            }
            Counting::AtomicCount => {
                let waiters = if q.list.is_empty() { 0 } else { WAITERS };
                let mut c = self.count.load(Ordering::Relaxed);
                loop {
                    debug_assert_eq!(
                        c & (WRITER | UPGRADABLE | UPGRADING),
                        UPGRADABLE | UPGRADING
                    );
                    if c & READERS != 0 {
                        // Readers still hold (or a reader's fast path is
                        // backing out): the last of them finds UPGRADING
                        // and comes back here.
                        return false;
                    }
                    // AcqRel as in `grant_locked`: the readers' critical
                    // sections happen-before the upgraded writer's.
                    match self.count.compare_exchange_weak(
                        c,
                        WRITER | waiters,
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return true,
                        Err(now) => c = now,
                    }
                }
            }
        }
    }

    /// Drops the wait lock and issues the collected wakeups, in the order
    /// the configuration asks for.
    pub(super) fn finish(&self, q: WaitGuard<'_>, wakes: &mut Wakes) {
        match self.config.wake {
            WakeTiming::WakeUnderLock => {
                wakes.wake_all();
                drop(q);
            }
            WakeTiming::WakeAfterUnlock => {
                drop(q);
                wakes.wake_all();
            }
        }
    }

    pub(super) fn lock_wait(&self) -> WaitGuard<'_> {
        WaitGuard::new(self.wait.lock())
    }
}
