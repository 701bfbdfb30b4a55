//! Software event counters, compiled to nothing without the `stats` feature.
//!
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
//! - `SlowCounter`, for events that only happen on slow paths (a contended
//!   lock acquisition): one atomic, one locked add, negligible there.
//!
//! `sum` is exact once the counting threads have finished (joined) and
//! approximate while they run. These are plain `std` atomics even under loom:
//! they are measurements, not part of any ordering argument.

#[cfg(feature = "stats")]
mod imp {
    use std::sync::atomic::{AtomicU64, Ordering};

    use crossbeam_utils::CachePadded;

    /// Slots that a thread owns exclusively (one bit each in `LEASED`).
    pub const OWNED_SLOTS: usize = 16;
    /// Index of the slot shared, with atomic adds, by threads without one.
    const SHARED_SLOT: usize = OWNED_SLOTS;

    /// Bit i set: slot i is leased to a live thread.
    static LEASED: AtomicU64 = AtomicU64::new(0);

    struct Lease(usize);

    impl Lease {
        fn take() -> Lease {
            // Acquire pairs with the Release in `drop`: the previous
            // lessee's plain stores to the slot happen-before ours.
            let mut leased = LEASED.load(Ordering::Relaxed);
            loop {
                let free = (!leased).trailing_zeros() as usize;
                if free >= OWNED_SLOTS {
                    return Lease(SHARED_SLOT);
                }
                match LEASED.compare_exchange_weak(
                    leased,
                    leased | (1 << free),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Lease(free),
                    Err(now) => leased = now,
                }
            }
        }
    }

    impl Drop for Lease {
        fn drop(&mut self) {
            if self.0 < OWNED_SLOTS {
                // Release: see `take`.
                LEASED.fetch_and(!(1 << self.0), Ordering::Release);
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

    /// A hot-path event counter (see the module docs).
    #[derive(Debug)]
    pub struct Counter {
        slots: Box<[CachePadded<AtomicU64>]>,
    }

    impl Default for Counter {
        fn default() -> Self {
            Counter {
                slots: (0..=OWNED_SLOTS)
                    .map(|_| CachePadded::new(AtomicU64::new(0)))
                    .collect(),
            }
        }
    }

    impl Counter {
        #[allow(dead_code)] // most components build counters with `Default`
        pub fn new() -> Self {
            Self::default()
        }

        #[inline]
        pub fn add(&self, n: u64) {
            let slot = slot();
            let cell = &self.slots[slot];
            if slot == SHARED_SLOT {
                cell.fetch_add(n, Ordering::Relaxed);
            } else {
                // Only this thread writes an owned slot: a plain
                // read-modify-write cannot lose a count.
                cell.store(cell.load(Ordering::Relaxed) + n, Ordering::Relaxed);
            }
        }

        pub fn sum(&self) -> u64 {
            self.slots.iter().map(|s| s.load(Ordering::Relaxed)).sum()
        }
    }

    /// A slow-path event counter: one shared atomic.
    #[derive(Debug, Default)]
    pub struct SlowCounter(AtomicU64);

    impl SlowCounter {
        pub const fn new() -> Self {
            SlowCounter(AtomicU64::new(0))
        }

        #[inline]
        pub fn add(&self, n: u64) {
            self.0.fetch_add(n, Ordering::Relaxed);
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
    pub struct SlowCounter;

    impl SlowCounter {
        pub const fn new() -> Self {
            SlowCounter
        }

        #[inline(always)]
        pub fn add(&self, _n: u64) {}

        pub fn sum(&self) -> u64 {
            0
        }
    }
}

#[allow(unused_imports)]
pub(crate) use imp::{Counter, SlowCounter, OWNED_SLOTS};

/// Whether the crate was built with the `stats` feature (counters read 0
/// otherwise).
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
}
