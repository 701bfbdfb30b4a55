//! The two choices seed 001 compares, fixed when a semaphore is built.

/// How the semaphore counts its holders (the two kernel implementations
/// the seed measured).
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

/// When the threads a release grants the lock to are woken.
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
