//! The seeds' "before" behaviours and their "after" defaults, set apart
//! from the everyday API: use this module to reproduce a seed's comparison
//! (the lab does), not to build an application.
//!
//! Every herdless type defaults to the seed's "after"
//! (`FutexTable::new()`, `WaitQueue::new()`, `Channel::new()`,
//! `EventPoll::new()`, `RwSem::new()`). Each keeps the seed's "before"
//! selectable at construction, so both run in one process:
//!
//! | switch | before (the seed's problem) | after (default) | constructor |
//! |---|---|---|---|
//! | [`WakePolicy`] | `AlwaysLock`: every wake takes the bucket lock (seed 004) | `WaiterCount` | [`FutexTable::with_policy`](crate::FutexTable::with_policy) |
//! | [`WakeMode`] | `WakeAll`: every wake wakes every waiter (seed 000) | `Exclusive` | [`WaitQueue::with_mode`](crate::WaitQueue::with_mode), [`Channel::with_mode`](crate::Channel::with_mode) |
//! | [`ReadyListKind`] | `Spinlock` (before seed 003), `RwLockSwap` (seed 003) | `LockFree` | [`EventPoll::with_kind`](crate::EventPoll::with_kind) |
//! | [`Counting`] | `Generic`: the wait lock around every acquire (seed 001) | `AtomicCount` | [`RwSemExt::with_config`](crate::rwsem::RwSemExt::with_config) |
//! | [`WakeTiming`] | `WakeUnderLock`: wake while holding the wait lock (seed 001) | `WakeAfterUnlock` | the same, through [`RwSemConfig`] |
//!
//! `docs/ARCHITECTURE.md` maps each seed to its kernel patch.

/// How [`FutexTable::wake`](crate::FutexTable::wake) decides whether to
/// take the bucket lock (seed 004).
///
/// ```
/// use std::sync::atomic::AtomicU32;
/// use herdless::variants::WakePolicy;
/// use herdless::FutexTable;
///
/// let word = AtomicU32::new(0);
/// for policy in [WakePolicy::AlwaysLock, WakePolicy::WaiterCount] {
///     let table = FutexTable::with_policy(policy);
///     assert_eq!(table.wake(&word, 1), 0); // the same result, at another cost
/// }
/// assert_eq!(WakePolicy::default(), WakePolicy::WaiterCount);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WakePolicy {
    /// Always take the bucket lock and scan (seed 004's "before").
    AlwaysLock,
    /// Return at once when the bucket's waiter count is zero: one full fence
    /// and one load, no lock (seed 004's "after"; the default).
    #[default]
    WaiterCount,
}

/// How a [`WaitQueue`](crate::WaitQueue) treats exclusive waiters (seed
/// 000's before and after).
///
/// ```
/// use herdless::variants::WakeMode;
/// use herdless::{Channel, WaitQueue};
///
/// let herd = WaitQueue::with_mode(WakeMode::WakeAll);
/// assert_eq!(herd.mode(), WakeMode::WakeAll);
/// let jobs: Channel<u32> = Channel::with_mode(WakeMode::WakeAll);
/// assert_eq!(jobs.mode(), WakeMode::WakeAll);
/// assert_eq!(WakeMode::default(), WakeMode::Exclusive);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WakeMode {
    /// Every waiter is treated as non-exclusive, so every wake wakes
    /// everybody: the thundering herd of seed 000's "before".
    WakeAll,
    /// Exclusive waiters are woken at most `nr_exclusive` at a time, oldest
    /// first (seed 000's "after"; the default).
    #[default]
    Exclusive,
}

/// Which ready list an [`EventPoll`](crate::EventPoll) uses (the seed's
/// before, the seed, and beyond it; seed 003).
///
/// ```
/// use herdless::variants::ReadyListKind;
/// use herdless::EventPoll;
///
/// for kind in ReadyListKind::ALL {
///     assert_eq!(EventPoll::with_kind(kind).kind(), kind);
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReadyListKind {
    /// One lock for callbacks and the harvester: every callback takes it
    /// (the kernel before seed 003: `ep->wq.lock`).
    Spinlock,
    /// Seed 003: callbacks take a read lock and append at the tail with an
    /// atomic exchange, so many append at once; the harvester takes the
    /// write lock to splice the list out; events that arrive during the
    /// harvest go to an overflow list.
    RwLockSwap,
    /// Beyond the seed: a lock-free multi-producer single-consumer list and
    /// a per-item "queued" flag. No reader-writer lock, so no reader can
    /// hold up the harvester (the priority-inversion risk that made the
    /// kernel drop the rwlock in 2025). Its pollers also latch their entry
    /// on a source while the item is queued, so writes to a source whose
    /// event is pending skip the callback (module docs of `poll`). The
    /// default.
    #[default]
    LockFree,
}

impl ReadyListKind {
    /// Every variant, before first.
    pub const ALL: [ReadyListKind; 3] = [
        ReadyListKind::Spinlock,
        ReadyListKind::RwLockSwap,
        ReadyListKind::LockFree,
    ];
}

// ----- RwSem: the two choices seed 001 compares ---------------------------

/// How the semaphore counts its holders (the two kernel implementations
/// the seed measured); see [`RwSemConfig`] for an example.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Counting {
    /// An `activity` count guarded by the wait lock, as in the kernel's
    /// `lib/rwsem-spinlock.c`: every acquire and release takes the wait
    /// lock, even uncontended.
    Generic,
    /// An atomic count word with lock-free fast paths, as in the kernel's
    /// xadd `lib/rwsem.c`: the wait lock is taken only when a thread must
    /// queue or a release finds waiters (the default).
    #[default]
    AtomicCount,
}

/// When the threads a release grants the lock to are woken; see
/// [`RwSemConfig`] for an example.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WakeTiming {
    /// Each granted thread is unparked while the wait lock is still held
    /// (the seed's "before"): the wait lock's hold time includes the wake
    /// syscalls, and woken threads that need the wait lock run straight
    /// into it.
    WakeUnderLock,
    /// Granted threads are collected on a wake list under the wait lock and
    /// unparked after it is dropped (the seed's "after"; the default).
    #[default]
    WakeAfterUnlock,
}

/// A semaphore's configuration: one of four variants.
///
/// ```
/// use herdless::rwsem::RwSemExt;
/// use herdless::variants::{Counting, RwSemConfig, WakeTiming};
/// use herdless::RwLock;
///
/// let before = RwSemConfig::new(Counting::Generic, WakeTiming::WakeUnderLock);
/// assert_eq!(before.name(), "generic/under-lock");
/// assert_eq!(RwSemConfig::ALL[0], before);
/// assert_eq!(RwSemConfig::default(), RwSemConfig::DEFAULT);
/// let lock = RwLock::with_config(before, 0);
/// *lock.write() += 1;
/// assert_eq!(*lock.read(), 1);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RwSemConfig {
    /// How holders are counted.
    pub counting: Counting,
    /// When granted waiters are woken.
    pub wake: WakeTiming,
}

impl RwSemConfig {
    /// The default: [`Counting::AtomicCount`] and
    /// [`WakeTiming::WakeAfterUnlock`].
    pub const DEFAULT: RwSemConfig = RwSemConfig {
        counting: Counting::AtomicCount,
        wake: WakeTiming::WakeAfterUnlock,
    };

    /// All four combinations, "before" variants first.
    pub const ALL: [RwSemConfig; 4] = [
        RwSemConfig::new(Counting::Generic, WakeTiming::WakeUnderLock),
        RwSemConfig::new(Counting::Generic, WakeTiming::WakeAfterUnlock),
        RwSemConfig::new(Counting::AtomicCount, WakeTiming::WakeUnderLock),
        RwSemConfig::new(Counting::AtomicCount, WakeTiming::WakeAfterUnlock),
    ];

    /// The configuration with these two choices.
    pub const fn new(counting: Counting, wake: WakeTiming) -> Self {
        RwSemConfig { counting, wake }
    }

    /// A short name, e.g. `atomic/after-unlock`, for tables and messages.
    pub fn name(&self) -> &'static str {
        match (self.counting, self.wake) {
            (Counting::Generic, WakeTiming::WakeUnderLock) => "generic/under-lock",
            (Counting::Generic, WakeTiming::WakeAfterUnlock) => "generic/after-unlock",
            (Counting::AtomicCount, WakeTiming::WakeUnderLock) => "atomic/under-lock",
            (Counting::AtomicCount, WakeTiming::WakeAfterUnlock) => "atomic/after-unlock",
        }
    }
}

impl std::fmt::Display for RwSemConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
