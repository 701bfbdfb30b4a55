//! Software event counters, compiled to nothing without the `stats` feature.
//!
//! Kernel counterpart: `lockevent_inc` and per-CPU counters. A counter is
//! striped over a few cache-padded cells, each thread adding to its own
//! stripe, so counting never adds a shared cache line to a hot path it
//! measures (a no-waiter wake must stay a fence and a load). `sum` adds the
//! stripes; it is exact once the counting threads have been joined and
//! approximate while they run.
//!
//! These are plain `std` atomics even under loom: they are measurements, not
//! part of any ordering argument.

#[cfg(feature = "stats")]
mod imp {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    use crossbeam_utils::CachePadded;

    const STRIPES: usize = 8;

    std::thread_local! {
        static STRIPE: usize = {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES
        };
    }

    /// A striped event counter.
    #[derive(Debug, Default)]
    pub struct Counter {
        stripes: [CachePadded<AtomicU64>; STRIPES],
    }

    impl Counter {
        pub fn new() -> Self {
            Self::default()
        }

        #[inline]
        pub fn add(&self, n: u64) {
            let i = STRIPE.with(|s| *s);
            self.stripes[i].fetch_add(n, Ordering::Relaxed);
        }

        pub fn sum(&self) -> u64 {
            self.stripes.iter().map(|s| s.load(Ordering::Relaxed)).sum()
        }
    }
}

#[cfg(not(feature = "stats"))]
mod imp {
    /// A counter that counts nothing (the `stats` feature is off).
    #[derive(Debug, Default)]
    pub struct Counter;

    impl Counter {
        pub fn new() -> Self {
            Counter
        }

        #[inline(always)]
        pub fn add(&self, _n: u64) {}

        pub fn sum(&self) -> u64 {
            0
        }
    }
}

pub(crate) use imp::Counter;

/// Whether the crate was built with the `stats` feature (counters read 0
/// otherwise).
pub const ENABLED: bool = cfg!(feature = "stats");
