//! Counters every handler updates as it goes, and the snapshot
//! [`Pager::stats`](crate::Pager::stats) returns.
//!
//! Counters are `Relaxed`: each is a tally, nothing is published through
//! it. A handler counts a fill after the ioctl that woke the faulting
//! thread, so a snapshot is exact only once the handlers are idle
//! ([`Pager::settle`](crate::Pager::settle) waits for that; its Acquire on
//! the handlers' `busy` count, released after each batch, orders the tallies).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Buckets of a latency histogram: bucket `i` counts services that took
/// `[2^i, 2^(i+1))` ns.
const BUCKETS: usize = 40;

/// A latency histogram: power-of-two buckets of nanoseconds, their total
/// and the longest. The pager's fault service time and an object source's
/// GET and chunk-wait times.
pub(crate) struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    total_ns: AtomicU64,
    max_ns: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            total_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
        }
    }
}

impl Histogram {
    /// Counts one service that took `d`.
    pub(crate) fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.total_ns.fetch_add(ns, Relaxed);
        self.max_ns.fetch_max(ns, Relaxed);
        let b = (63 - ns.leading_zeros() as usize).min(BUCKETS - 1);
        self.buckets[b].fetch_add(1, Relaxed);
    }

    /// Count, mean, p50 and p99 (each its bucket's upper edge: a bound,
    /// never an underestimate, which may exceed the longest) and max.
    pub(crate) fn latency(&self) -> Latency {
        let hist: Vec<u64> = self.buckets.iter().map(|b| b.load(Relaxed)).collect();
        let count: u64 = hist.iter().sum();
        let quantile = |q: f64| -> Duration {
            if count == 0 {
                return Duration::ZERO;
            }
            let rank = ((count as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, n) in hist.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return Duration::from_nanos(1u64 << (i + 1).min(63));
                }
            }
            Duration::from_nanos(self.max_ns.load(Relaxed))
        };
        Latency {
            count,
            mean: Duration::from_nanos(self.total_ns.load(Relaxed).checked_div(count).unwrap_or(0)),
            p50: quantile(0.5),
            p99: quantile(0.99),
            max: Duration::from_nanos(self.max_ns.load(Relaxed)),
        }
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) faults: AtomicU64,
    pub(crate) duplicate_faults: AtomicU64,
    pub(crate) pages_on_demand: AtomicU64,
    pub(crate) pages_fault_around: AtomicU64,
    pub(crate) pages_populated: AtomicU64,
    pub(crate) pages_prefetched: AtomicU64,
    pub(crate) bytes_installed: AtomicU64,
    pub(crate) zero_pages: AtomicU64,
    pub(crate) eexist: AtomicU64,
    pub(crate) eagain_partial: AtomicU64,
    pub(crate) eagain_retry: AtomicU64,
    pub(crate) discard_events: AtomicU64,
    pub(crate) pages_discarded: AtomicU64,
    pub(crate) rezaps: AtomicU64,
    /// Settling (`Pager::settle`): re-zap ranges queued and applied,
    /// `REMOVE` events fully applied, discards made through the pager.
    pub(crate) rezap_ranges_sent: AtomicU64,
    pub(crate) rezap_ranges_done: AtomicU64,
    pub(crate) removes_applied: AtomicU64,
    pub(crate) discards_requested: AtomicU64,
    pub(crate) source_errors: AtomicU64,
    pub(crate) poisoned_pages: AtomicU64,
    pub(crate) handler_self_faults: AtomicU64,
    pub(crate) unmapped_faults: AtomicU64,
    pub(crate) fills_unmapped: AtomicU64,
    pub(crate) copier_reads: AtomicU64,
    pub(crate) prefetch_passes: AtomicU64,
    latency: Histogram,
}

impl Counters {
    pub(crate) fn add(&self, c: &AtomicU64, n: u64) {
        let _ = self;
        c.fetch_add(n, Relaxed);
    }

    pub(crate) fn record_latency(&self, d: Duration) {
        self.latency.record(d);
    }

    pub(crate) fn snapshot(&self, per_handler: &[AtomicU64]) -> PagerStats {
        PagerStats {
            faults: self.faults.load(Relaxed),
            duplicate_faults: self.duplicate_faults.load(Relaxed),
            pages_on_demand: self.pages_on_demand.load(Relaxed),
            pages_fault_around: self.pages_fault_around.load(Relaxed),
            pages_populated: self.pages_populated.load(Relaxed),
            pages_prefetched: self.pages_prefetched.load(Relaxed),
            bytes_installed: self.bytes_installed.load(Relaxed),
            zero_pages: self.zero_pages.load(Relaxed),
            eexist: self.eexist.load(Relaxed),
            eagain_partial: self.eagain_partial.load(Relaxed),
            eagain_retry: self.eagain_retry.load(Relaxed),
            discard_events: self.discard_events.load(Relaxed),
            pages_discarded: self.pages_discarded.load(Relaxed),
            rezaps: self.rezaps.load(Relaxed),
            source_errors: self.source_errors.load(Relaxed),
            poisoned_pages: self.poisoned_pages.load(Relaxed),
            handler_self_faults: self.handler_self_faults.load(Relaxed),
            unmapped_faults: self.unmapped_faults.load(Relaxed),
            fills_unmapped: self.fills_unmapped.load(Relaxed),
            copier_reads: self.copier_reads.load(Relaxed),
            prefetch_passes: self.prefetch_passes.load(Relaxed),
            per_handler_faults: per_handler.iter().map(|c| c.load(Relaxed)).collect(),
            latency: self.latency.latency(),
        }
    }
}

/// Fault service latency: from the handler's read of the fault message to
/// the faulting page filled and its thread woken (fault-around after that is
/// not included). Quantiles are upper bounds (power-of-two buckets).
///
/// # Examples
/// ```
/// use herdless_pager::{Pager, PagerError};
/// let pager = match Pager::builder(1 << 20).build() {
///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
///     built => built?,
/// };
/// let mut b = [0u8];
/// pager.read(0, &mut b)?;
/// pager.settle();
/// let l = pager.stats().latency;
/// assert_eq!(l.count, 1);
/// assert!(l.p50 <= l.p99 && l.max <= l.p99, "{l:?}"); // p99 is a bucket's upper bound
/// # Ok::<(), PagerError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Latency {
    /// Faults measured.
    pub count: u64,
    /// Mean service time.
    pub mean: Duration,
    /// Median (bucket upper bound).
    pub p50: Duration,
    /// 99th percentile (bucket upper bound).
    pub p99: Duration,
    /// Longest.
    pub max: Duration,
}

/// What a pager has done so far ([`Pager::stats`](crate::Pager::stats);
/// `herdless-uffd`'s summary holds one too).
///
/// # Examples
/// ```
/// use herdless_pager::{MemSource, Pager, PagerError};
/// let pager = match Pager::builder(1 << 20).source(MemSource::new(vec![1u8; 4096])).build() {
///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
///     built => built?,
/// };
/// let mut b = [0u8];
/// pager.read(0, &mut b)?; // the source's one page
/// pager.read(512 << 10, &mut b)?; // far past the source's end: zeros
/// pager.settle();
/// let s = pager.stats();
/// assert_eq!((s.faults, s.pages_on_demand, s.source_errors), (2, 1, 0));
/// assert!(s.zero_pages >= 1);
/// # Ok::<(), PagerError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PagerStats {
    /// Fault messages read (`UFFD_EVENT_PAGEFAULT`), duplicates included.
    pub faults: u64,
    /// Of those, messages for a page another thread was already filling.
    pub duplicate_faults: u64,
    /// Pages filled from the source because a thread faulted on them.
    pub pages_on_demand: u64,
    /// Pages filled from the source by fault-around (neighbours).
    pub pages_fault_around: u64,
    /// Pages filled from the source by [`Pager::populate`](crate::Pager::populate).
    pub pages_populated: u64,
    /// Pages filled from the source by a working-set prefetch
    /// (`herdless-uffd --prefetch`, or copying everything up front).
    pub pages_prefetched: u64,
    /// Bytes filled from the source, all causes: the pages above times
    /// their size (`herdless-uffd` may serve 4 KiB and 2 MiB pages in one
    /// restore).
    pub bytes_installed: u64,
    /// Zero pages mapped (past the source's end, or after a discard).
    pub zero_pages: u64,
    /// Fills that met an already present page (`EEXIST`).
    pub eexist: u64,
    /// Multi-page fills that stopped early at a present page (`EAGAIN` with progress).
    pub eagain_partial: u64,
    /// Fills refused with zero progress because an event was pending
    /// (`EAGAIN`): the fault was deferred (its thread woken to fault again).
    pub eagain_retry: u64,
    /// `UFFD_EVENT_REMOVE` events (discards) read.
    pub discard_events: u64,
    /// Pages those events covered.
    pub pages_discarded: u64,
    /// Pages discarded again because a fill raced a discard (see `handler/discard.rs`).
    pub rezaps: u64,
    /// Source reads that failed while serving a fault.
    pub source_errors: u64,
    /// Pages poisoned after a failed source read.
    pub poisoned_pages: u64,
    /// Faults raised by a handler thread on its own region.
    pub handler_self_faults: u64,
    /// Faults at addresses in no region served (answered with poison).
    pub unmapped_faults: u64,
    /// Fills or wakes that found their range no longer registered
    /// (`ENOENT`: the served process unmapped it, e.g. while exiting).
    pub fills_unmapped: u64,
    /// Reads of the userfaultfd made by a copier (`herdless-uffd`'s
    /// prefetch or copy of everything) that a pending event deferred: it
    /// read and applied the event itself, and went on.
    pub copier_reads: u64,
    /// Passes of the prefetch threads (or the copy of everything) over
    /// their ranges: one each, more where pages were left missing.
    pub prefetch_passes: u64,
    /// Fault messages served by each handler thread.
    pub per_handler_faults: Vec<u64>,
    /// Fault service latency.
    pub latency: Latency,
}

impl PagerStats {
    /// Pages filled from the source, all causes.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::PagerStats;
    /// let s = PagerStats { pages_on_demand: 3, pages_fault_around: 45, pages_prefetched: 2, zero_pages: 9, ..Default::default() };
    /// assert_eq!(s.pages_installed(), 50); // zero pages are not from the source
    /// ```
    pub fn pages_installed(&self) -> u64 {
        self.pages_on_demand
            + self.pages_fault_around
            + self.pages_populated
            + self.pages_prefetched
    }

    /// Pages filled (from the source or with zeros) per fault message: 1 with
    /// fault-around off, up to the window's page count with it on (0 before
    /// the first fault).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::PagerStats;
    /// let s = PagerStats { faults: 4, pages_on_demand: 4, pages_fault_around: 60, ..Default::default() };
    /// assert_eq!(s.pages_per_fault(), 16.0);
    /// assert_eq!(PagerStats::default().pages_per_fault(), 0.0);
    /// ```
    pub fn pages_per_fault(&self) -> f64 {
        if self.faults == 0 {
            return 0.0;
        }
        (self.pages_on_demand + self.pages_fault_around + self.zero_pages) as f64
            / self.faults as f64
    }
}
