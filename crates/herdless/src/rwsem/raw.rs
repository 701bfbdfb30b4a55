//! [`RawRwSem`]: the state (the count word and the wait lock), its
//! construction, the public acquire calls and the queries. The module docs
//! hold the state table and the ordering argument; the work is done in
//! `acquire.rs` (fast paths, the threads' slow path), `acquire_async.rs`
//! (the tasks' futures), `grant.rs` (grants, nudges, leaving the queue) and
//! `release.rs` (the unlocks).

use std::time::Duration;

#[cfg(loom)]
use super::count::HANDOFF;
use super::count::{HOLDERS, WRITER};
use super::stats::RwSemStats;
use super::wait_list::WaitList;
use super::waiter::Kind;
use crate::lock::SpinParkLock;
use crate::sync::{AtomicUsize, Ordering};
use crate::variants::{Counting, RwSemConfig};
use crate::wait_queue::TimedOut;

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
