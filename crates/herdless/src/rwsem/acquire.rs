//! Acquiring a [`RawRwSem`] from a thread: the lock-free fast paths
//! (`AtomicCount`), the bounded spin, and the slow path that queues a
//! thread's record and sleeps until it is granted, nudged or timed out.

use std::pin::pin;
use std::ptr::NonNull;
use std::time::Duration;

use crossbeam_utils::Backoff;

use super::count::{
    HANDOFF, NUDGED, READER, READ_BLOCKERS, UPGRADABLE, UPGRADABLE_BLOCKERS, WAITERS, WRITER,
    WRITE_BLOCKERS,
};
use super::raw::RawRwSem;
use super::tuning::RwSemTuning;
use super::wait_list::WaitList;
use super::waiter::{Kind, Waiter};
use crate::deadline::Deadline;
use crate::parker;
use crate::sync::Ordering;
use crate::util::sleeper::Sleeper;
use crate::util::waiter::Slept;
use crate::util::wake_list::WakeList;
use crate::variants::Counting;

impl RawRwSem {
    #[inline]
    pub(super) fn acquire(&self, kind: Kind, timeout: Option<Duration>) -> bool {
        if self.config.counting == Counting::AtomicCount && self.try_fast(kind) {
            return true;
        }
        self.acquire_slow(kind, timeout)
    }

    pub(super) fn try_acquire(&self, kind: Kind) -> bool {
        match self.config.counting {
            Counting::AtomicCount => self.try_fast(kind),
            Counting::Generic => {
                let mut q = self.lock_wait();
                self.take_locked(&mut q, kind)
            }
        }
    }

    /// `AtomicCount`'s lock-free attempt: takes the lock if the holders
    /// allow it, even ahead of sleepers, unless one of them asked for
    /// hand-off (see the module docs, "Stealing and hand-off").
    #[inline]
    pub(super) fn try_fast(&self, kind: Kind) -> bool {
        match kind {
            Kind::Read => {
                if self.count.load(Ordering::Relaxed) & READ_BLOCKERS != 0 {
                    return false;
                }
                // The kernel's xadd: one atomic add, checked afterwards.
                // Acquire pairs with the Release of the last writer's
                // `write_unlock` (or `downgrade`): its critical section
                // happens-before ours.
                let prev = self.count.fetch_add(READER, Ordering::Acquire);
                if prev & READ_BLOCKERS == 0 {
                    return true;
                }
                // A writer, a hand-off or an upgrade got in first: back out
                // exactly as a reader leaving would, since our transient
                // count may have kept a release from granting (it then saw
                // a reader).
                self.release_read_count();
                false
            }
            Kind::Write | Kind::Upgradable => self.try_cas(kind),
            Kind::Upgrade => unreachable!("an upgrade is not an acquisition"),
        }
    }

    /// Takes the lock with a CAS if the count allows `kind` now (no
    /// hand-off pending; for a writer, no holder; for an upgradable reader,
    /// no writer and no other upgradable reader). Never backs out, so it
    /// may run under the wait lock.
    #[inline]
    pub(super) fn try_cas(&self, kind: Kind) -> bool {
        let mut c = self.count.load(Ordering::Relaxed);
        loop {
            let new = match kind {
                Kind::Read if c & READ_BLOCKERS == 0 => c + READER,
                Kind::Write if c & WRITE_BLOCKERS == 0 => c | WRITER,
                Kind::Upgradable if c & UPGRADABLE_BLOCKERS == 0 => c | UPGRADABLE,
                _ => return false,
            };
            // Acquire pairs with the Release of every holder that left
            // (`write_unlock`, `release_read_count`, `upgradable_unlock`,
            // the downgrades): their RMWs form one release sequence on the
            // word, which we read.
            match self
                .count
                .compare_exchange_weak(c, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => c = now,
            }
        }
    }

    /// Takes the lock for `kind` under the wait lock, before queueing, if
    /// the strategy lets a newcomer have it now: `Generic` only when nobody
    /// waits (strict FIFO, as rwsem-spinlock; the upgrade slot counts as
    /// waiting); `AtomicCount` as its fast path would (no fetch_add here:
    /// backing out would run a release's wake path, which needs the wait
    /// lock we hold).
    pub(super) fn take_locked(&self, q: &mut WaitList, kind: Kind) -> bool {
        match self.config.counting {
            Counting::Generic if !q.is_empty() => false,
            Counting::Generic => match kind {
                Kind::Read if q.activity >= 0 => {
                    q.activity += 1;
                    true
                }
                Kind::Write if q.activity == 0 && !q.upgradable => {
                    q.activity = -1;
                    true
                }
                Kind::Upgradable if q.activity >= 0 && !q.upgradable => {
                    q.upgradable = true;
                    true
                }
                _ => false,
            },
            Counting::AtomicCount => self.try_cas(kind),
        }
    }

    #[cold]
    pub(super) fn acquire_slow(&self, kind: Kind, timeout: Option<Duration>) -> bool {
        if self.config.counting == Counting::AtomicCount && self.spin(kind) {
            return true;
        }
        // Recognised from the Duration itself: under loom every finite
        // deadline reads as passed, so `Deadline` cannot tell zero apart.
        let try_only = timeout == Some(Duration::ZERO);
        let deadline = Deadline::after(timeout);
        parker::with_current(|parker| {
            let waiter = pin!(Waiter::new(Sleeper::Thread(parker.unparker()), kind));
            let node = NonNull::from(&*waiter);
            let mut wakes = WakeList::new();

            let mut q = self.lock_wait();
            if self.take_locked(&mut q, kind) {
                return true;
            }
            if try_only {
                return false;
            }
            // SAFETY: the record is pinned on this stack frame and in no
            // list; it leaves the list before the frame ends: a granter
            // dequeues it (we then see GRANTED), or we remove it ourselves
            // under the wait lock below. Nothing in between can unwind.
            unsafe { q.list.push_back(node) };
            q.tallies.waits.add(1);
            if self.config.counting == Counting::AtomicCount {
                // Tells releases to take the wait lock. The RMW orders us
                // against every release's RMW on the word (one modification
                // order): a release after this sees WAITERS and comes to
                // grant; a release before it is seen by the load in
                // `grant_locked` below (coherence after our own RMW), which
                // then grants. See the module docs, "No lost grant".
                self.count.fetch_or(WAITERS, Ordering::Relaxed);
            }
            self.grant_locked(&mut q, &mut wakes);
            self.finish(q, &mut wakes);

            // `AtomicCount` lets running threads steal the lock ahead of us
            // until we have waited `HANDOFF_AFTER`; then we ask for strict
            // hand-off (again every `HANDOFF_AFTER`, as a grant to someone
            // ahead of us clears the request). A writer is nudged rather
            // than granted while no hand-off is pending, and takes the lock
            // itself when woken.
            let steals = self.config.counting == Counting::AtomicCount;
            let mut handoff_at =
                steals.then(|| Deadline::after(Some(RwSemTuning::get().handoff_after)));
            loop {
                // After every unpark without a grant (a nudge, a spurious
                // wakeup), a queued writer tries to take the lock itself,
                // as a stealer would.
                let slept = waiter.sleep(parker, earliest(deadline, handoff_at), || {
                    (steals && kind == Kind::Write && self.queued_writer_try(&waiter)).then_some(())
                });
                match slept {
                    Slept::Granted(_) => return true,
                    Slept::Stopped(()) => {
                        // The writer took the lock: leave the queue.
                        let mut q = self.lock_wait();
                        self.leave_locked(&mut q, node);
                        return true;
                    }
                    Slept::DeadlinePassed => {}
                }
                if handoff_at.is_some_and(Deadline::has_passed) {
                    // Re-armed, except under loom, where every finite
                    // deadline has passed: the waiter would never block.
                    // Loom checks the first request; later ones run the
                    // same code.
                    handoff_at = (!cfg!(loom))
                        .then(|| Deadline::after(Some(RwSemTuning::get().handoff_after)));
                    let mut q = self.lock_wait();
                    if waiter.is_granted() {
                        return true;
                    }
                    self.request_handoff_locked();
                    // The lock may be free already, its releaser having
                    // nudged a writer at the head that HANDOFF now keeps
                    // from taking it: grant here, or nobody would (a
                    // holder's release grants otherwise).
                    self.grant_locked(&mut q, &mut wakes);
                    self.finish(q, &mut wakes);
                    continue;
                }
                if deadline.has_passed() {
                    let mut q = self.lock_wait();
                    // Under the wait lock a grant is final: one that beat
                    // the timeout wins (ARCHITECTURE contract 4).
                    let kept =
                        waiter.cancel_locked(|| self.cancel_locked(&mut q, node, &mut wakes));
                    self.finish(q, &mut wakes);
                    return kept.is_some();
                }
            }
        })
    }

    /// A queued writer woken without a grant tries to take the lock,
    /// spinning as a newcomer would: readers keep stealing a reader-owned
    /// lock, and a writer that parked again at its first miss would be
    /// nudged (a wake syscall) at every moment the readers drain. Stops if
    /// a grant arrives meanwhile (then the lock is ours already).
    pub(super) fn queued_writer_try(&self, waiter: &Waiter) -> bool {
        self.queued_writer_try_once() || self.spin_write(|| waiter.is_granted())
    }

    /// A queued writer's try without spinning (a task's poll after a nudge
    /// does only this): take the lock if it is free, else clear NUDGED and
    /// try once more.
    pub(super) fn queued_writer_try_once(&self) -> bool {
        if self.try_cas(Kind::Write) {
            return true;
        }
        // About to sleep again (or return `Pending`): from now on a release
        // must come and nudge us. The RMW orders this against every
        // release's RMW: a release before it is seen by the try below (and
        // the thread's spin after it) by coherence, a release after it sees
        // NUDGED clear and nudges.
        self.count.fetch_and(!NUDGED, Ordering::Relaxed);
        self.try_cas(Kind::Write)
    }

    /// Bounded optimistic spinning before queueing (`AtomicCount` only):
    /// the holder is usually running and about to release. Stops once a
    /// sleeper has asked for hand-off. A writer spins in `spin_write`
    /// (`claim.rs`), which may claim a reader-held lock.
    pub(super) fn spin(&self, kind: Kind) -> bool {
        if kind == Kind::Write {
            return self.spin_write(|| false);
        }
        let backoff = Backoff::new();
        for _ in 0..self.spin_rounds(kind) {
            backoff.spin();
            let c = self.count.load(Ordering::Relaxed);
            if c & HANDOFF != 0 {
                return false;
            }
            let free = match kind {
                Kind::Read => c & READ_BLOCKERS == 0,
                Kind::Upgradable => c & UPGRADABLE_BLOCKERS == 0,
                Kind::Write | Kind::Upgrade => unreachable!("a writer spins in `spin_write`"),
            };
            if free && self.try_fast(kind) {
                return true;
            }
        }
        false
    }
}

/// The earlier of the caller's deadline and the hand-off time.
fn earliest(deadline: Deadline, handoff_at: Option<Deadline>) -> Deadline {
    match (deadline, handoff_at) {
        (d, None) => d,
        (Deadline::Never, Some(h)) => h,
        (Deadline::At(d), Some(Deadline::At(h))) => Deadline::At(d.min(h)),
        (d, Some(Deadline::Never)) => d,
    }
}
