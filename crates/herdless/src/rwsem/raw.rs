//! [`RawRwSem`]: the state (the count word and the wait lock), its
//! construction, the public acquire calls and the queries. The module docs
//! hold the state table and the ordering argument; the work is done in
//! `acquire.rs` (fast paths, the threads' slow path), `acquire_async.rs`
//! (the tasks' futures), `grant.rs` (grants, nudges, leaving the queue) and
//! `release.rs` (the unlocks).

use std::time::Duration;

use super::count::{HANDOFF, HOLDERS, WRITER};
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
///
/// The raw calls take and release *holds* (shared, upgradable,
/// exclusive) without guards: every hold taken is given back once, with
/// the unlock of its mode, by any thread (holds belong to no thread).
///
/// # Examples
/// ```
/// use herdless::RawRwSem;
///
/// let sem = RawRwSem::new();
/// sem.read();
/// assert!(sem.try_read(), "readers share");
/// assert!(!sem.try_write(), "a writer excludes readers");
/// // SAFETY: this thread took the two shared holds it gives back.
/// unsafe {
///     sem.read_unlock();
///     sem.read_unlock();
/// }
/// sem.write();
/// assert!(sem.is_locked_exclusive());
/// // SAFETY: this thread holds the lock exclusive.
/// unsafe { sem.downgrade() }; // exclusive -> shared, nobody in between
/// assert!(sem.is_locked() && !sem.is_locked_exclusive());
/// // SAFETY: the shared hold the downgrade left.
/// unsafe { sem.read_unlock() };
/// assert!(!sem.is_locked());
/// ```
pub struct RawRwSem {
    /// `AtomicCount`'s state word (see the module docs); always 0 with
    /// `Generic`.
    pub(super) count: AtomicUsize,
    /// The wait lock and what it guards: the FIFO of sleepers, the upgrade
    /// slot, `Generic`'s `activity` and upgradable hold, the tallies.
    pub(super) wait: SpinParkLock<WaitList>,
    pub(super) config: RwSemConfig,
    /// Whether spinning writers claim a reader-held lock: a loom model's
    /// choice ([`RawRwSem::with_writer_claims`]); outside loom the process's
    /// `HERDLESS_RWSEM_TUNING` decides.
    #[cfg(loom)]
    pub(super) claims: bool,
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
    /// ([`RwSemConfig::DEFAULT`]); `const`, so it can be a `static`.
    ///
    /// # Examples
    /// ```
    /// use herdless::{variants::RwSemConfig, RawRwSem};
    ///
    /// static SEM: RawRwSem = RawRwSem::new();
    /// assert!(!SEM.is_locked());
    /// assert_eq!(SEM.config(), RwSemConfig::DEFAULT);
    /// ```
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::with_config(RwSemConfig::DEFAULT)
    }

    /// An unlocked semaphore with the given counting and wake timing.
    ///
    /// # Examples
    /// The seed's "before" (the 2006 spinlock rwsem, waking under the wait
    /// lock) behaves as the default one:
    /// ```
    /// use herdless::variants::{Counting, RwSemConfig, WakeTiming};
    /// use herdless::RawRwSem;
    ///
    /// let before = RwSemConfig::new(Counting::Generic, WakeTiming::WakeUnderLock);
    /// let sem = RawRwSem::with_config(before);
    /// sem.write();
    /// assert!(!sem.try_read());
    /// // SAFETY: this thread holds the lock exclusive.
    /// unsafe { sem.write_unlock() };
    /// assert!(sem.try_read());
    /// // SAFETY: the shared hold just taken.
    /// unsafe { sem.read_unlock() };
    /// ```
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
            claims: false,
        }
    }

    /// [`with_config`](Self::with_config) whose spinning writers claim a
    /// reader-held lock (the default outside loom, `tuning.rs`),
    /// for the models of the claim.
    #[cfg(loom)]
    pub fn with_writer_claims(config: RwSemConfig) -> Self {
        RawRwSem {
            claims: true,
            ..Self::with_config(config)
        }
    }

    /// The configuration chosen at construction.
    ///
    /// # Examples
    /// ```
    /// use herdless::variants::{Counting, RwSemConfig, WakeTiming};
    /// use herdless::RawRwSem;
    ///
    /// let config = RwSemConfig::new(Counting::Generic, WakeTiming::WakeAfterUnlock);
    /// assert_eq!(RawRwSem::with_config(config).config(), config);
    /// assert_eq!(RawRwSem::new().config().counting, Counting::AtomicCount);
    /// ```
    pub fn config(&self) -> RwSemConfig {
        self.config
    }

    // ----- acquiring -------------------------------------------------------

    /// Takes the lock shared, sleeping while a writer holds it or anyone
    /// waits ahead (FIFO). Release the hold with
    /// [`read_unlock`](Self::read_unlock).
    ///
    /// # Examples
    /// A reader sleeps while a writer holds the lock, and the writer's
    /// release grants it:
    /// ```
    /// use herdless::RawRwSem;
    ///
    /// let sem = RawRwSem::new();
    /// sem.write();
    /// std::thread::scope(|s| {
    ///     let reader = s.spawn(|| {
    ///         sem.read(); // sleeps until the writer leaves
    ///         let writer_left = !sem.is_locked_exclusive();
    ///         // SAFETY: this thread holds the lock shared.
    ///         unsafe { sem.read_unlock() };
    ///         writer_left
    ///     });
    ///     while sem.waiters() == 0 {
    ///         std::thread::yield_now(); // until the reader sleeps
    ///     }
    ///     // SAFETY: this thread holds the lock exclusive.
    ///     unsafe { sem.write_unlock() }; // grants the reader
    ///     assert!(reader.join().unwrap());
    /// });
    /// ```
    #[inline]
    pub fn read(&self) {
        let acquired = self.acquire(Kind::Read, None);
        debug_assert!(acquired, "an untimed acquire cannot time out");
    }

    /// Takes the lock shared if that is possible without waiting; returns
    /// whether it did.
    ///
    /// # Examples
    /// ```
    /// use herdless::RawRwSem;
    ///
    /// let sem = RawRwSem::new();
    /// sem.write();
    /// assert!(!sem.try_read(), "a writer holds it");
    /// // SAFETY: this thread holds the lock exclusive.
    /// unsafe { sem.write_unlock() };
    /// assert!(sem.try_read());
    /// // SAFETY: the shared hold just taken.
    /// unsafe { sem.read_unlock() };
    /// ```
    #[inline]
    pub fn try_read(&self) -> bool {
        self.try_acquire(Kind::Read)
    }

    /// [`read`](Self::read) giving up after `timeout`: `Duration::ZERO`
    /// tries once without queueing, `Duration::MAX` waits forever. A grant
    /// that races the timeout wins: the lock is then held and `Ok` returned.
    ///
    /// # Errors
    /// [`TimedOut`] if the lock could not be taken shared within `timeout`;
    /// nothing is held then.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use herdless::{wait_queue::TimedOut, RawRwSem};
    ///
    /// let sem = RawRwSem::new();
    /// sem.write();
    /// assert_eq!(sem.read_timeout(Duration::from_millis(1)), Err(TimedOut));
    /// // SAFETY: this thread holds the lock exclusive.
    /// unsafe { sem.write_unlock() };
    /// assert_eq!(sem.read_timeout(Duration::ZERO), Ok(()));
    /// // SAFETY: the shared hold just taken.
    /// unsafe { sem.read_unlock() };
    /// ```
    pub fn read_timeout(&self, timeout: Duration) -> Result<(), TimedOut> {
        self.acquire(Kind::Read, Some(timeout))
            .then_some(())
            .ok_or(TimedOut)
    }

    /// Takes the lock exclusive, sleeping while anyone holds it or waits
    /// ahead (FIFO). Release the hold with
    /// [`write_unlock`](Self::write_unlock).
    ///
    /// # Examples
    /// A writer sleeps until the last reader leaves:
    /// ```
    /// use herdless::RawRwSem;
    ///
    /// let sem = RawRwSem::new();
    /// sem.read();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| {
    ///         sem.write(); // sleeps until the reader leaves
    ///         assert!(sem.is_locked_exclusive());
    ///         // SAFETY: this thread holds the lock exclusive.
    ///         unsafe { sem.write_unlock() };
    ///     });
    ///     while sem.waiters() == 0 {
    ///         std::thread::yield_now(); // until the writer sleeps
    ///     }
    ///     // SAFETY: this thread holds the lock shared.
    ///     unsafe { sem.read_unlock() }; // grants (or wakes) the writer
    /// });
    /// assert!(!sem.is_locked());
    /// ```
    #[inline]
    pub fn write(&self) {
        let acquired = self.acquire(Kind::Write, None);
        debug_assert!(acquired, "an untimed acquire cannot time out");
    }

    /// Takes the lock exclusive if that is possible without waiting;
    /// returns whether it did.
    ///
    /// # Examples
    /// ```
    /// use herdless::RawRwSem;
    ///
    /// let sem = RawRwSem::new();
    /// assert!(sem.try_write());
    /// assert!(!sem.try_write() && !sem.try_read());
    /// // SAFETY: this thread holds the lock exclusive.
    /// unsafe { sem.write_unlock() };
    /// ```
    #[inline]
    pub fn try_write(&self) -> bool {
        self.try_acquire(Kind::Write)
    }

    /// [`write`](Self::write) giving up after `timeout` (as
    /// [`read_timeout`](Self::read_timeout)).
    ///
    /// # Errors
    /// [`TimedOut`] if the lock could not be taken exclusive within
    /// `timeout`; nothing is held then.
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use herdless::{wait_queue::TimedOut, RawRwSem};
    ///
    /// let sem = RawRwSem::new();
    /// sem.read();
    /// assert_eq!(sem.write_timeout(Duration::from_millis(1)), Err(TimedOut));
    /// // SAFETY: this thread holds the lock shared.
    /// unsafe { sem.read_unlock() };
    /// assert_eq!(sem.write_timeout(Duration::MAX), Ok(()));
    /// // SAFETY: the exclusive hold just taken.
    /// unsafe { sem.write_unlock() };
    /// ```
    pub fn write_timeout(&self, timeout: Duration) -> Result<(), TimedOut> {
        self.acquire(Kind::Write, Some(timeout))
            .then_some(())
            .ok_or(TimedOut)
    }

    // ----- queries ---------------------------------------------------------

    /// Whether anyone holds the lock (a snapshot).
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// assert!(!sem.is_locked());
    /// sem.upgradable_read();
    /// assert!(sem.is_locked());
    /// // SAFETY: this thread holds the lock upgradable.
    /// unsafe { sem.upgradable_unlock() };
    /// ```
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
    ///
    /// # Examples
    /// ```
    /// let sem = herdless::RawRwSem::new();
    /// sem.read();
    /// assert!(!sem.is_locked_exclusive());
    /// // SAFETY: this thread holds the lock shared.
    /// unsafe { sem.read_unlock() };
    /// sem.write();
    /// assert!(sem.is_locked_exclusive());
    /// // SAFETY: this thread holds the lock exclusive.
    /// unsafe { sem.write_unlock() };
    /// ```
    pub fn is_locked_exclusive(&self) -> bool {
        match self.config.counting {
            Counting::AtomicCount => self.count.load(Ordering::Relaxed) & WRITER != 0,
            Counting::Generic => self.wait.lock().activity < 0,
        }
    }

    /// Whether a sleeper (or a fair unlock) has asked for strict hand-off
    /// (a snapshot; always `false` with `Generic`, which is strict FIFO
    /// throughout): from then until the next grant no running thread takes
    /// the lock ahead of the queue. A failed `try_read` does not tell this
    /// apart from a writer holding the lock, or a spinning writer's brief
    /// claim.
    ///
    /// Under loom a waiter's hand-off timer fires once, at its first sleep,
    /// and its request grants whatever can be granted, which would hide a
    /// release that forgot to grant; a model waits for this first.
    ///
    /// # Examples
    /// A fair unlock that finds a waiter asks for hand-off; the grant to
    /// the waiter, once the last holder leaves, clears the request:
    /// ```
    /// use herdless::RawRwSem;
    ///
    /// let sem = RawRwSem::new();
    /// sem.read();
    /// sem.read();
    /// assert!(!sem.handoff_requested());
    /// std::thread::scope(|s| {
    ///     // SAFETY: the spawned thread gives back the hold it takes.
    ///     s.spawn(|| unsafe {
    ///         sem.write();
    ///         sem.write_unlock();
    ///     });
    ///     while sem.waiters() == 0 {
    ///         std::thread::yield_now();
    ///     }
    ///     // SAFETY: this thread took two shared holds above.
    ///     unsafe { sem.read_unlock_fair() };
    ///     assert!(sem.handoff_requested(), "one read hold left: the writer waits for it");
    ///     assert!(!sem.try_read(), "no reader passes the writer now");
    ///     // SAFETY: the second shared hold.
    ///     unsafe { sem.read_unlock() }; // grants the writer
    /// });
    /// assert!(!sem.handoff_requested());
    /// ```
    pub fn handoff_requested(&self) -> bool {
        self.count.load(Ordering::Relaxed) & HANDOFF != 0
    }

    /// Threads queued asleep, an upgrader waiting for readers included (a
    /// snapshot).
    ///
    /// # Examples
    /// ```
    /// use herdless::RawRwSem;
    ///
    /// let sem = RawRwSem::new();
    /// sem.write();
    /// assert_eq!(sem.waiters(), 0, "a holder is not a waiter");
    /// std::thread::scope(|s| {
    ///     for _ in 0..2 {
    ///         // SAFETY: each thread gives back the hold it took.
    ///         s.spawn(|| unsafe {
    ///             sem.read();
    ///             sem.read_unlock();
    ///         });
    ///     }
    ///     while sem.waiters() < 2 {
    ///         std::thread::yield_now();
    ///     }
    ///     // SAFETY: this thread holds the lock exclusive.
    ///     unsafe { sem.write_unlock() }; // grants both readers at once
    /// });
    /// assert_eq!(sem.waiters(), 0);
    /// ```
    pub fn waiters(&self) -> usize {
        self.wait.lock().len()
    }

    /// Event counts so far (zero without the `stats` feature). Reading them
    /// takes the wait lock but is not counted.
    ///
    /// # Examples
    /// The default counting takes no wait lock while nobody waits; the
    /// seed's "before" takes it on every acquire and release:
    /// ```
    /// use herdless::rwsem::{RawRwSem, RwSemStats};
    /// use herdless::variants::{Counting, RwSemConfig, WakeTiming};
    ///
    /// let atomic = RawRwSem::new();
    /// let generic = RawRwSem::with_config(RwSemConfig::new(Counting::Generic, WakeTiming::WakeAfterUnlock));
    /// for sem in [&atomic, &generic] {
    ///     sem.write();
    ///     // SAFETY: this thread holds the lock exclusive.
    ///     unsafe { sem.write_unlock() };
    /// }
    /// if herdless::stats::ENABLED {
    ///     assert_eq!(atomic.stats().wait_lock_acquisitions, 0);
    ///     assert_eq!(generic.stats().wait_lock_acquisitions, 2);
    /// } else {
    ///     assert_eq!(generic.stats(), RwSemStats::default());
    /// }
    /// ```
    pub fn stats(&self) -> RwSemStats {
        let q = self.wait.lock();
        RwSemStats {
            wait_lock_acquisitions: q.tallies.acquisitions.get(),
            contended_wait_lock_acquisitions: self.wait.contended_acquisitions(),
            wait_lock_waited_ns: self.wait.waited_ns(),
            wait_lock_hold_ns: q.tallies.hold_ns.get(),
            wakeups: q.tallies.wakeups.get(),
            waits: q.tallies.waits.get(),
            timeouts: q.tallies.timeouts.get(),
        }
    }
}
