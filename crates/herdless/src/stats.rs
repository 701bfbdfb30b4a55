//! Software event counters, compiled to nothing without the `stats` feature.
//!
//! # Reading them
//! Build with the `stats` feature (`features = ["stats"]` on the
//! `herdless` dependency) and each primitive counts what it did: wakeups, wakes
//! that found nobody, waiters that woke for nothing, wait-lock
//! acquisitions. Each returns a plain snapshot struct:
//! [`FutexTable::stats`](crate::FutexTable::stats)
//! ([`FutexStats`](crate::futex::FutexStats)),
//! [`RwSemExt::stats`](crate::RwSemExt::stats)
//! ([`RwSemStats`](crate::rwsem::RwSemStats)),
//! [`WaitQueue::stats`](crate::WaitQueue::stats)
//! ([`WaitQueueStats`](crate::wait_queue::WaitQueueStats)),
//! [`Channel::stats`](crate::Channel::stats)
//! ([`ChannelStats`](crate::channel::ChannelStats)) and
//! [`EventPoll::stats`](crate::EventPoll::stats)
//! ([`EventPollStats`](crate::poll::EventPollStats)). Without the feature
//! every count reads 0 and counting costs nothing; [`ENABLED`] says which
//! build this is. A snapshot is exact once the threads that counted have
//! been joined, approximate while they run.
//!
//! ```
//! use herdless::{stats, Channel};
//!
//! let jobs = Channel::new();
//! std::thread::scope(|s| {
//!     s.spawn(|| jobs.send(1).unwrap());
//!     assert_eq!(jobs.recv(), Ok(1));
//! });
//! let counted = jobs.stats();
//! let expected = if stats::ENABLED { 1 } else { 0 };
//! assert_eq!((counted.sent, counted.received), (expected, expected));
//! ```
//!
//! # How they count
//! Kernel counterpart: `lockevent_inc` and per-CPU counters. Counting must not
//! change what it measures: a no-waiter futex wake is one fence and one load
//! (about 10 ns here), and a single locked add on a shared line would double
//! it. So there are two kinds of counter:
//!
//! - `Counter`, for hot paths. Each thread leases one of `OWNED_SLOTS`
//!   cache-padded slots for its lifetime and counts into it with a plain
//!   load and store: no locked instruction, no shared cache line. Threads
//!   beyond the owned slots share one extra slot with atomic adds. A slot is
//!   returned when its thread exits; the next lessee keeps counting on top.
//!   128 slots cover the lab's 64-thread rows: on 16 cores at 32 threads
//!   the former 16 slots left half the threads adding into one shared line,
//!   a contended line of its own (issue 23).
//! - `CounterSet<N>`, for a component that counts several hot-path events:
//!   the same leased slots, each holding all `N` counts side by side, so a
//!   path that counts three events touches one line, not three. The futex
//!   table's eight counters were eight lines per thread: on 16 cores a
//!   `notify_all` to 64 waiters, whose threads move between CPUs and find
//!   those lines in another CPU's cache, took 1.24–1.63× as long with
//!   counters on as off (stop 44, four runs).
//! - `SlowCounter`, for events that only happen on slow paths: the same
//!   per-thread slots (it used to be one shared atomic, a contended line of
//!   its own on 16 cores).
//! - `HeldCounter`, for events counted while holding a lock (a contended
//!   acquisition of the wait-list lock, counted by the thread that then
//!   holds it): a plain load and store on a line the holder owns anyway.
//!
//! `sum` is exact once the counting threads have finished (joined) and
//! approximate while they run. These are plain `std` atomics even under loom:
//! they are measurements, not part of any ordering argument.

#[cfg(feature = "stats")]
mod imp {
    use std::sync::atomic::{AtomicU64, Ordering};

    use crossbeam_utils::CachePadded;

    /// Slots that a thread owns exclusively (one bit each in `LEASED`):
    /// enough for the lab's 64-thread rows and their helpers, so that no
    /// two running threads share a slot on the machines it measures.
    pub const OWNED_SLOTS: usize = 128;
    /// Index of the slot shared, with atomic adds, by threads without one.
    const SHARED_SLOT: usize = OWNED_SLOTS;
    /// Bits of one lease word.
    const WORD_BITS: usize = 64;

    /// Bit i of word w set: slot 64w + i is leased to a live thread.
    static LEASED: [AtomicU64; OWNED_SLOTS / WORD_BITS] =
        [const { AtomicU64::new(0) }; OWNED_SLOTS / WORD_BITS];

    struct Lease(usize);

    impl Lease {
        fn take() -> Lease {
            for (w, word) in LEASED.iter().enumerate() {
                // Acquire pairs with the Release in `drop`: the previous
                // lessee's plain stores to the slot happen-before ours.
                let mut leased = word.load(Ordering::Relaxed);
                while leased != u64::MAX {
                    let free = (!leased).trailing_zeros() as usize;
                    match word.compare_exchange_weak(
                        leased,
                        leased | (1 << free),
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return Lease(w * WORD_BITS + free),
                        Err(now) => leased = now,
                    }
                }
            }
            Lease(SHARED_SLOT)
        }
    }

    impl Drop for Lease {
        fn drop(&mut self) {
            if self.0 < OWNED_SLOTS {
                // Release: see `take`.
                LEASED[self.0 / WORD_BITS]
                    .fetch_and(!(1 << (self.0 % WORD_BITS)), Ordering::Release);
            }
        }
    }

    std::thread_local! {
        static SLOT: Lease = Lease::take();
    }

    #[inline]
    fn slot() -> usize {
        // During thread teardown the lease may be gone: count shared.
        SLOT.try_with(|l| l.0).unwrap_or(SHARED_SLOT)
    }

    /// `N` hot-path event counters that a thread counts into side by side
    /// (see the module docs): one cache-padded slot per thread holds all
    /// `N`, so a path that counts several events touches one line of its
    /// own, not one line per counter.
    #[derive(Debug)]
    pub struct CounterSet<const N: usize> {
        slots: Box<[CachePadded<[AtomicU64; N]>]>,
    }

    impl<const N: usize> Default for CounterSet<N> {
        fn default() -> Self {
            CounterSet {
                slots: (0..=OWNED_SLOTS)
                    .map(|_| CachePadded::new([const { AtomicU64::new(0) }; N]))
                    .collect(),
            }
        }
    }

    impl<const N: usize> CounterSet<N> {
        /// Counts `n` events of kind `event` (an index below `N`).
        #[inline]
        pub fn add(&self, event: usize, n: u64) {
            let slot = slot();
            let cell = &self.slots[slot][event];
            if slot == SHARED_SLOT {
                cell.fetch_add(n, Ordering::Relaxed);
            } else {
                // Only this thread writes an owned slot: a plain
                // read-modify-write cannot lose a count.
                cell.store(cell.load(Ordering::Relaxed) + n, Ordering::Relaxed);
            }
        }

        /// The events of kind `event` counted so far.
        pub fn sum(&self, event: usize) -> u64 {
            self.slots
                .iter()
                .map(|s| s[event].load(Ordering::Relaxed))
                .sum()
        }
    }

    /// A hot-path event counter (see the module docs): a set of one.
    #[derive(Debug, Default)]
    pub struct Counter(CounterSet<1>);

    impl Counter {
        #[allow(dead_code)] // most components build counters with `Default`
        pub fn new() -> Self {
            Self::default()
        }

        #[inline]
        pub fn add(&self, n: u64) {
            self.0.add(0, n);
        }

        pub fn sum(&self) -> u64 {
            self.0.sum(0)
        }
    }

    /// A slow-path event counter: the same per-thread slots as
    /// [`Counter`] (a shared atomic here was one more contended line on 16
    /// cores, issue 23).
    pub type SlowCounter = Counter;

    /// A count kept by a lock's holder, in the lock's own data: written
    /// only under the lock (a plain load and store, no locked instruction,
    /// on a line the holder owns anyway), read by anyone.
    #[derive(Debug, Default)]
    pub struct HeldCounter(AtomicU64);

    impl HeldCounter {
        pub const fn new() -> Self {
            HeldCounter(AtomicU64::new(0))
        }

        /// Counts `n`; the caller holds the lock that guards this count.
        #[inline]
        pub fn add_held(&self, n: u64) {
            self.0
                .store(self.0.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        }

        pub fn sum(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }
}

#[cfg(not(feature = "stats"))]
mod imp {
    /// No slots without the `stats` feature.
    #[allow(dead_code)]
    pub const OWNED_SLOTS: usize = 0;

    /// A counter that counts nothing (the `stats` feature is off).
    #[derive(Debug, Default)]
    pub struct Counter;

    impl Counter {
        #[allow(dead_code)] // most components build counters with `Default`
        pub fn new() -> Self {
            Counter
        }

        #[inline(always)]
        pub fn add(&self, _n: u64) {}

        pub fn sum(&self) -> u64 {
            0
        }
    }

    /// A counter that counts nothing (the `stats` feature is off).
    #[derive(Debug, Default)]
    pub struct HeldCounter;

    impl HeldCounter {
        pub const fn new() -> Self {
            HeldCounter
        }

        #[inline(always)]
        pub fn add_held(&self, _n: u64) {}

        pub fn sum(&self) -> u64 {
            0
        }
    }

    /// A counter that counts nothing (the `stats` feature is off).
    pub type SlowCounter = Counter;

    /// Counters that count nothing (the `stats` feature is off).
    #[derive(Debug, Default)]
    pub struct CounterSet<const N: usize>;

    impl<const N: usize> CounterSet<N> {
        #[inline(always)]
        pub fn add(&self, _event: usize, _n: u64) {}

        pub fn sum(&self, _event: usize) -> u64 {
            0
        }
    }
}

#[allow(unused_imports)]
pub(crate) use imp::{Counter, CounterSet, HeldCounter, SlowCounter, OWNED_SLOTS};

/// Times one event in `EVERY` (the caller numbers them) and counts it for
/// `EVERY`: two clock reads per event cost too much on a lock's path (the
/// rwsem's wait-lock hold, the wait for a contended wait lock). Nothing
/// without the `stats` feature.
#[derive(Clone, Copy)]
pub(crate) struct SampledClock<const EVERY: u64>(
    #[cfg(feature = "stats")] Option<std::time::Instant>,
);

impl<const EVERY: u64> SampledClock<EVERY> {
    /// Starts timing if event `number` is a sampled one (a multiple of
    /// `EVERY`).
    #[inline(always)]
    pub(crate) fn start(_number: u64) -> Self {
        SampledClock(
            #[cfg(feature = "stats")]
            _number.is_multiple_of(EVERY).then(std::time::Instant::now),
        )
    }

    /// The time this event stands for, in nanoseconds: its own times
    /// `EVERY` if it was timed, 0 otherwise (and without the `stats`
    /// feature).
    #[inline(always)]
    pub(crate) fn elapsed_ns(self) -> u64 {
        #[cfg(feature = "stats")]
        return self.0.map_or(0, |t| {
            u64::try_from(t.elapsed().as_nanos())
                .unwrap_or(u64::MAX)
                .saturating_mul(EVERY)
        });
        #[cfg(not(feature = "stats"))]
        0
    }
}

/// Whether the crate was built with the `stats` feature (counters read 0
/// otherwise).
///
/// # Examples
/// ```
/// let queue = herdless::WaitQueue::new();
/// let _poller = queue.register(|| {});
/// queue.wake_up(0);
/// assert_eq!(queue.stats().wakeups, u64::from(herdless::stats::ENABLED));
/// ```
pub const ENABLED: bool = cfg!(feature = "stats");

#[cfg(all(test, feature = "stats", not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// More threads than owned slots, all counting at once: no count is lost,
    /// neither in owned slots nor in the shared one.
    #[test]
    fn counts_are_exact_with_more_threads_than_slots() {
        let counter = Arc::new(Counter::new());
        let threads: Vec<_> = (0..OWNED_SLOTS * 2 + 3)
            .map(|_| {
                let counter = counter.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        counter.add(1);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(counter.sum(), (OWNED_SLOTS as u64 * 2 + 3) * 10_000);
    }

    /// A set's counts stay apart: each thread counts event i, i + 1 times
    /// per round, in owned slots and the shared one alike.
    #[test]
    fn a_set_keeps_each_events_count_apart() {
        let set = Arc::new(CounterSet::<3>::default());
        let threads: Vec<_> = (0..OWNED_SLOTS + 5)
            .map(|_| {
                let set = set.clone();
                std::thread::spawn(move || {
                    for _ in 0..1_000 {
                        for event in 0..3 {
                            set.add(event, event as u64 + 1);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let rounds = (OWNED_SLOTS as u64 + 5) * 1_000;
        assert_eq!(
            [set.sum(0), set.sum(1), set.sum(2)],
            [rounds, 2 * rounds, 3 * rounds]
        );
    }
}
