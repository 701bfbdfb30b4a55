//! What a semaphore counts (behind the `stats` feature).
//!
//! Every count is a plain integer inside the data the wait lock guards, so
//! counting costs no atomic operation and the semaphore stays
//! `const`-constructible. Only the wait lock's contended acquisitions are
//! counted by the lock itself (a slow-path atomic).

use crate::stats::SampledClock;

/// A semaphore's event counts (all zero without the `stats` feature).
///
/// # Examples
/// A reader that slept behind a writer: one wait, one wakeup (the grant):
/// ```
/// use herdless::{rwsem::RwSemStats, RwSem, RwSemExt};
///
/// let sem = RwSem::new(0);
/// let writer = sem.write();
/// std::thread::scope(|s| {
///     s.spawn(|| *sem.read());
///     while sem.waiters() == 0 {
///         std::thread::yield_now(); // until the reader sleeps
///     }
///     drop(writer); // grants the reader
/// });
/// let stats = sem.stats();
/// if herdless::stats::ENABLED {
///     assert_eq!((stats.waits, stats.wakeups, stats.timeouts), (1, 1, 0));
/// } else {
///     assert_eq!(stats, RwSemStats::default());
/// }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RwSemStats {
    /// Times the wait lock was taken.
    pub wait_lock_acquisitions: u64,
    /// Wait-lock acquisitions that found it held (spun or slept for it).
    pub contended_wait_lock_acquisitions: u64,
    /// Total time the wait lock was held, in nanoseconds, estimated from
    /// one hold in every 16 (each timed hold counts 16 times).
    pub wait_lock_hold_ns: u64,
    /// Total time threads waited for the wait lock, in nanoseconds
    /// (lockstat's `waittime-total`: spinning, then asleep), estimated
    /// from one contended acquisition in every 16 per thread.
    pub wait_lock_waited_ns: u64,
    /// Threads unparked: granted the lock by a release, downgrade or
    /// cancel (an upgrade waiting for readers included), or (with
    /// `AtomicCount`) a writer at the head of a free lock
    /// nudged to take it itself, which may be nudged again if a running
    /// thread gets the lock first. So this may exceed `waits`.
    pub wakeups: u64,
    /// Threads that queued to sleep (an upgrade that waited for readers
    /// included).
    pub waits: u64,
    /// Queued threads that gave up at their timeout.
    pub timeouts: u64,
}

/// One count under the wait lock: a `u64`, or nothing.
#[derive(Debug, Default)]
pub(super) struct Tally(#[cfg(feature = "stats")] u64);

impl Tally {
    pub(super) const fn new() -> Self {
        Tally(
            #[cfg(feature = "stats")]
            0,
        )
    }

    #[inline(always)]
    pub(super) fn add(&mut self, _n: u64) {
        #[cfg(feature = "stats")]
        {
            self.0 += _n;
        }
    }

    pub(super) fn get(&self) -> u64 {
        #[cfg(feature = "stats")]
        return self.0;
        #[cfg(not(feature = "stats"))]
        0
    }
}

/// The counts kept under the wait lock.
#[derive(Debug, Default)]
pub(super) struct Tallies {
    pub(super) acquisitions: Tally,
    pub(super) hold_ns: Tally,
    pub(super) wakeups: Tally,
    pub(super) waits: Tally,
    pub(super) timeouts: Tally,
}

impl Tallies {
    pub(super) const fn new() -> Self {
        Tallies {
            acquisitions: Tally::new(),
            hold_ns: Tally::new(),
            wakeups: Tally::new(),
            waits: Tally::new(),
            timeouts: Tally::new(),
        }
    }
}

/// One wait-lock hold in this many is timed, and counts for this many: two
/// clock reads under the wait lock on every acquisition cost the `stats`
/// build 14% of its throughput at 32 threads on 16 cores (issue 23).
pub(super) const HOLD_SAMPLE: u64 = 16;

/// When the wait lock was taken, if this hold is one that is timed.
pub(super) type HoldClock = SampledClock<HOLD_SAMPLE>;
