//! [`RawRwSem`]: the count, the fast paths, and the slow paths that queue,
//! grant and cancel. The module docs hold the state table and the ordering
//! argument this file relies on.

use std::pin::pin;
use std::ptr::NonNull;
use std::time::Duration;

use crossbeam_utils::Backoff;

use super::count::{
    HANDOFF, HOLDERS, NUDGED, READER, READERS, READ_BLOCKERS, UPGRADABLE, UPGRADABLE_BLOCKERS,
    UPGRADING, WAITERS, WRITER, WRITE_BLOCKERS,
};
use super::stats::RwSemStats;
use super::wait_list::{HeadBatch, WaitGuard, WaitList};
use super::waiter::{nudge, Kind, Waiter};
use crate::deadline::Deadline;
use crate::lock::SpinParkLock;
use crate::parker;
use crate::sync::{AtomicUsize, Ordering};
use crate::util::waiter::{Slept, GRANTED};
use crate::util::wake_list::WakeList;
use crate::variants::{Counting, RwSemConfig, WakeTiming};
use crate::wait_queue::TimedOut;

/// Rounds of exponential spinning before an `AtomicCount` acquirer queues.
const SPIN_ROUNDS: u32 = 9;

/// How long an `AtomicCount` waiter lets running threads take the lock
/// ahead of it before it asks for strict hand-off (the kernel's
/// `RWSEM_WAIT_TIMEOUT`, 4 ms).
pub const HANDOFF_AFTER: Duration = Duration::from_millis(4);

/// The raw reader-writer semaphore. Use it through [`RwSem`](super::RwSem),
/// or directly with its `unsafe` unlock methods.
pub struct RawRwSem {
    /// `AtomicCount`'s state word (see the module docs); always 0 with
    /// `Generic`.
    pub(super) count: AtomicUsize,
    /// The wait lock and what it guards: the FIFO of sleepers, the upgrade
    /// slot, `Generic`'s `activity` and upgradable hold, the tallies.
    pub(super) wait: SpinParkLock<WaitList>,
    pub(super) config: RwSemConfig,
}

// Unwinding never leaves the semaphore's own state half-updated: its
// wait-lock critical sections run no user code, and panic only on a broken
// internal invariant or a violated `unsafe` contract (debug assertions); a
// panic in user code while the lock is held unwinds through the guard,
// which releases the hold. So a `&RawRwSem` may cross `catch_unwind`, as
// parking_lot's raw lock (a bare atomic) may; the interior `UnsafeCell` of
// the wait lock would otherwise deny it. (`lock_api::RwLock` stays
// `!RefUnwindSafe` because of its own `UnsafeCell<T>`.)
impl std::panic::UnwindSafe for RawRwSem {}
impl std::panic::RefUnwindSafe for RawRwSem {}

impl Default for RawRwSem {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for RawRwSem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawRwSem")
            .field("config", &self.config)
            .field("count", &self.count.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl RawRwSem {
    /// An unlocked semaphore with the default configuration
    /// ([`RwSemConfig::DEFAULT`]).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::with_config(RwSemConfig::DEFAULT)
    }

    /// An unlocked semaphore with the given counting and wake timing.
    #[cfg(not(loom))]
    pub const fn with_config(config: RwSemConfig) -> Self {
        RawRwSem {
            count: AtomicUsize::new(0),
            wait: SpinParkLock::new(WaitList::new()),
            config,
        }
    }

    /// An unlocked semaphore with the default configuration.
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::with_config(RwSemConfig::DEFAULT)
    }

    /// An unlocked semaphore with the given counting and wake timing.
    #[cfg(loom)]
    pub fn with_config(config: RwSemConfig) -> Self {
        RawRwSem {
            count: AtomicUsize::new(0),
            wait: SpinParkLock::new(WaitList::new()),
            config,
        }
    }

    /// The configuration chosen at construction.
    pub fn config(&self) -> RwSemConfig {
        self.config
    }

    // ----- acquiring -------------------------------------------------------

    /// Takes the lock shared, sleeping while a writer holds it or anyone
    /// waits ahead (FIFO).
    #[inline]
    pub fn read(&self) {
        let acquired = self.acquire(Kind::Read, None);
        debug_assert!(acquired, "an untimed acquire cannot time out");
    }

    /// Takes the lock shared if that is possible without waiting.
    #[inline]
    pub fn try_read(&self) -> bool {
        self.try_acquire(Kind::Read)
    }

    /// [`read`](Self::read) giving up after `timeout`: `Duration::ZERO`
    /// tries once without queueing, `Duration::MAX` waits forever. A grant
    /// that races the timeout wins: the lock is then held and `Ok` returned.
    pub fn read_timeout(&self, timeout: Duration) -> Result<(), TimedOut> {
        self.acquire(Kind::Read, Some(timeout))
            .then_some(())
            .ok_or(TimedOut)
    }

    /// Takes the lock exclusive, sleeping while anyone holds it or waits
    /// ahead (FIFO).
    #[inline]
    pub fn write(&self) {
        let acquired = self.acquire(Kind::Write, None);
        debug_assert!(acquired, "an untimed acquire cannot time out");
    }

    /// Takes the lock exclusive if that is possible without waiting.
    #[inline]
    pub fn try_write(&self) -> bool {
        self.try_acquire(Kind::Write)
    }

    /// [`write`](Self::write) giving up after `timeout` (as
    /// [`read_timeout`](Self::read_timeout)).
    pub fn write_timeout(&self, timeout: Duration) -> Result<(), TimedOut> {
        self.acquire(Kind::Write, Some(timeout))
            .then_some(())
            .ok_or(TimedOut)
    }

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
    fn try_fast(&self, kind: Kind) -> bool {
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
    fn try_cas(&self, kind: Kind) -> bool {
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
    fn take_locked(&self, q: &mut WaitList, kind: Kind) -> bool {
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
    fn acquire_slow(&self, kind: Kind, timeout: Option<Duration>) -> bool {
        if self.config.counting == Counting::AtomicCount && !cfg!(loom) && self.spin(kind) {
            return true;
        }
        // Recognised from the Duration itself: under loom every finite
        // deadline reads as passed, so `Deadline` cannot tell zero apart.
        let try_only = timeout == Some(Duration::ZERO);
        let deadline = Deadline::after(timeout);
        parker::with_current(|parker| {
            let waiter = pin!(Waiter::new(parker.unparker(), kind));
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
            let mut handoff_at = steals.then(|| Deadline::after(Some(HANDOFF_AFTER)));
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
                    handoff_at = (!cfg!(loom)).then(|| Deadline::after(Some(HANDOFF_AFTER)));
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
    fn queued_writer_try(&self, waiter: &Waiter) -> bool {
        if self.try_cas(Kind::Write) {
            return true;
        }
        // About to sleep again unless the spin below wins: from now on a
        // release must come and nudge us. The RMW orders this against every
        // release's RMW: a release before it is seen by the tries below
        // (coherence), a release after it sees NUDGED clear and nudges.
        self.count.fetch_and(!NUDGED, Ordering::Relaxed);
        if self.try_cas(Kind::Write) {
            return true;
        }
        if cfg!(loom) {
            return false;
        }
        let backoff = Backoff::new();
        for _ in 0..SPIN_ROUNDS {
            backoff.spin();
            if waiter.is_granted() {
                return false;
            }
            let c = self.count.load(Ordering::Relaxed);
            if c & WRITE_BLOCKERS == 0 && self.try_cas(Kind::Write) {
                return true;
            }
        }
        false
    }

    /// Bounded optimistic spinning before queueing (`AtomicCount` only):
    /// the holder is usually running and about to release. Stops once a
    /// sleeper has asked for hand-off.
    fn spin(&self, kind: Kind) -> bool {
        let backoff = Backoff::new();
        for _ in 0..SPIN_ROUNDS {
            backoff.spin();
            let c = self.count.load(Ordering::Relaxed);
            if c & HANDOFF != 0 {
                return false;
            }
            let free = match kind {
                Kind::Read => c & READ_BLOCKERS == 0,
                Kind::Write => c & WRITE_BLOCKERS == 0,
                Kind::Upgradable => c & UPGRADABLE_BLOCKERS == 0,
                Kind::Upgrade => unreachable!("an upgrade does not spin here"),
            };
            if free && self.try_fast(kind) {
                return true;
            }
        }
        false
    }

    /// Takes a waiter that was not granted off the list, holding the wait
    /// lock; returns whether it was the head.
    fn leave_locked(&self, q: &mut WaitList, node: NonNull<Waiter>) -> bool {
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
    fn cancel_locked(&self, q: &mut WaitList, node: NonNull<Waiter>, wakes: &mut WakeList) {
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

    // ----- releasing -------------------------------------------------------

    /// Releases a shared hold.
    ///
    /// # Safety
    /// The caller holds the lock shared (from `read`, `try_read`,
    /// `read_timeout`, `downgrade` or `downgrade_upgradable`) and gives up
    /// that hold.
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
    fn release_read_count(&self) {
        // Release pairs with the Acquire of the next holder (a writer's CAS,
        // an upgrade's CAS or `grant_locked`'s CAS): our reads
        // happen-before its writes.
        let prev = self.count.fetch_sub(READER, Ordering::Release);
        debug_assert!(prev & READERS != 0, "read_unlock without a read hold");
        let holders_left = (prev - READER) & HOLDERS;
        // Go to grant if someone waits and nobody is awake to take the lock
        // itself (NUDGED), and we were the last holder, or the last reader
        // an upgrade waits for (UPGRADING: the slot's upgrader holds the
        // lock upgradable, nothing else). The upgrader set UPGRADING with
        // an RMW before its own check; see the module docs, "No lost grant".
        if prev & (WAITERS | NUDGED) == WAITERS
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
    pub unsafe fn downgrade(&self) {
        match self.config.counting {
            Counting::AtomicCount => {
                // WRITER -> one READER in one atomic add: below READER the
                // word holds WRITER and the flags (UPGRADING and UPGRADABLE
                // are clear while a writer holds), so those bits sum to at
                // most 15, and adding READER - WRITER (63) clears bit 0 and
                // carries exactly one into the reader count, leaving the
                // flags as they were. Release: queued readers granted next
                // see our writes (`grant_locked`'s CAS reads this).
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
    fn request_handoff_locked(&self) {
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
    pub(super) fn grant_locked(&self, q: &mut WaitList, wakes: &mut WakeList) {
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
            // A free lock and a writer at the head that has not asked for
            // hand-off: wake it to take the lock itself, and leave the lock
            // free meanwhile for whoever runs first (the kernel's writer
            // wakeup since 4.x). Granting it instead would keep the lock
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
                    let (records, new) = match batch {
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
    fn grant_upgrade_count(&self, q: &mut WaitList) -> bool {
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
    pub(super) fn finish(&self, q: WaitGuard<'_>, wakes: &mut WakeList) {
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

    // ----- queries ---------------------------------------------------------

    /// Whether anyone holds the lock (a snapshot).
    pub fn is_locked(&self) -> bool {
        match self.config.counting {
            Counting::AtomicCount => self.count.load(Ordering::Relaxed) & HOLDERS != 0,
            Counting::Generic => {
                let q = self.wait.lock();
                q.activity != 0 || q.upgradable
            }
        }
    }

    /// Whether a writer holds the lock (a snapshot).
    pub fn is_locked_exclusive(&self) -> bool {
        match self.config.counting {
            Counting::AtomicCount => self.count.load(Ordering::Relaxed) & WRITER != 0,
            Counting::Generic => self.wait.lock().activity < 0,
        }
    }

    /// Whether a sleeper (or a fair unlock) has asked for strict hand-off
    /// (`AtomicCount`; always `false` with `Generic`). For loom models:
    /// under loom a waiter's hand-off timer fires once, at its first sleep,
    /// and its request grants whatever can be granted, which would hide a
    /// release that forgot to grant; a model waits for this first.
    #[cfg(loom)]
    pub fn handoff_requested(&self) -> bool {
        self.count.load(Ordering::Relaxed) & HANDOFF != 0
    }

    /// Threads queued asleep, an upgrader waiting for readers included (a
    /// snapshot).
    pub fn waiters(&self) -> usize {
        self.wait.lock().len()
    }

    /// Event counts so far (zero without the `stats` feature). Reading them
    /// takes the wait lock but is not counted.
    pub fn stats(&self) -> RwSemStats {
        let q = self.wait.lock();
        RwSemStats {
            wait_lock_acquisitions: q.tallies.acquisitions.get(),
            contended_wait_lock_acquisitions: self.wait.contended_acquisitions(),
            wait_lock_hold_ns: q.tallies.hold_ns.get(),
            wakeups: q.tallies.wakeups.get(),
            waits: q.tallies.waits.get(),
            timeouts: q.tallies.timeouts.get(),
        }
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
