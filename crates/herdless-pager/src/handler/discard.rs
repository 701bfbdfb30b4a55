//! Discards (`UFFD_EVENT_REMOVE`) and the fills that race them
//! (ARCHITECTURE contract 9): a discarded page reads zeros and is never
//! filled from the source again, by a fault, fault-around, `populate` or a
//! prefetch.
//!
//! A `REMOVE` event swaps its pages to `DISCARDED` (any state; see
//! `page_state.rs`); nobody claims a `DISCARDED` page, so nothing fills it
//! from the source after the swap. What remains is a fill already under
//! way: the kernel zaps a `MADV_DONTNEED` range only after a handler has
//! read its `REMOVE` event (copies fail with `EAGAIN` while it is pending),
//! so a copy issued before that read can land after the zap and resurrect
//! source data. Two ways to close that window, one per [`DiscardFence`]:
//!
//! # Own region: tickets and stamps, then a re-zap ([`DiscardFence::Rezap`])
//! Every handler takes a ticket before each read (`reads.fetch_add(1,
//! AcqRel)`, (T)); a fill stamps its pages with `reads.fetch_add(0,
//! AcqRel)` (S) after its copy returned. Both are read-modify-writes of one
//! atomic, so they are totally ordered: if (S) precedes (T), (T) reads a
//! value in (S)'s release sequence, hence the copy happened before the
//! read, hence before the zap, and the zap removed it: `stamp < ticket` is
//! safe. Otherwise the handler applying the `REMOVE` cannot tell and has
//! the page discarded again ("re-zap", by the pager's zapper thread, since
//! a handler cannot wait for its own event). A fill that loses its page to
//! the discard before it publishes (`INSTALLING` swapped to `DISCARDED`)
//! re-zaps the pages it filled for the same reason. Re-zapped pages are
//! `DISCARDED` already, so a re-zap's own `REMOVE` triggers nothing more.
//! The window in which such a page shows stale data before its re-zap is
//! the one no user-space pager can close this way: the kernel drops
//! `mmap_changing` before it zaps.
//!
//! # Another process's memory: reads exclusive of fills ([`DiscardFence::ReadsExclusive`])
//! `herdless-uffd` serves a VMM's memory, which it cannot `madvise`, so it
//! cannot re-zap. Instead no fill is ever under way while a handler reads:
//! every read (and the application of the `REMOVE` events it brought)
//! holds the fence's write lock, every claim-and-fill its read lock. Take a
//! page `P` and a `REMOVE` covering it, consumed by read `R`:
//! - a fill of `P` that returned before `R` began installed `P` before the
//!   event was consumed, hence before the zap, which removes it;
//! - a fill that begins after `R` ended finds `P` `DISCARDED` (swapped
//!   while `R` still held the lock) and never claims it;
//! - no fill is between the two: its claim and copy sit under one read
//!   lock, which excludes `R`.
//!
//! So a fill either lands before the zap or never happens: no stale page,
//! no re-zap needed. A `REMOVE` queued while a fill is under way makes that
//! copy fail with zero progress (`EAGAIN`): the fill gives its pages back
//! and wakes them (invariant W), and the faulting thread faults again after
//! the event. The lock is `std`'s, which lets a waiting writer (a handler
//! with messages to read) in before new readers (fills, prefetch chunks):
//! demand faults are read before the next prefetch chunk starts. Reads
//! never block (these handlers poll, then read a non-blocking fd), so a
//! held write lock never waits on the kernel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::fill::Ask;
use super::Shared;
use crate::page_state::{self, DISCARDED, MISSING, PRESENT};
use crate::PagerError;

/// How fills are kept from resurrecting discarded pages (module doc).
pub(crate) enum DiscardFence {
    /// Tickets and stamps, and a re-zap of what may be stale.
    Rezap {
        /// Read tickets (T) and fill stamps (S).
        reads: AtomicU64,
        /// Ranges (address, len) to discard again; `None` once the pager
        /// stops.
        tx: Mutex<Option<mpsc::Sender<(usize, usize)>>>,
    },
    /// Reads (write lock) exclusive of claims-and-fills (read lock).
    ReadsExclusive(RwLock<()>),
}

/// Held across a read and the `REMOVE` events it brought.
pub(crate) struct ReadGuard<'a> {
    /// (T), for [`DiscardFence::Rezap`].
    pub(crate) ticket: u64,
    _exclusive: Option<RwLockWriteGuard<'a, ()>>,
}

/// Held across a claim and the fill of the claimed pages.
pub(crate) struct FillGuard<'a> {
    _shared: Option<RwLockReadGuard<'a, ()>>,
}

impl DiscardFence {
    /// The fence of a pager serving its own region.
    pub(crate) fn rezap(tx: mpsc::Sender<(usize, usize)>) -> Self {
        DiscardFence::Rezap {
            reads: AtomicU64::new(0),
            tx: Mutex::new(Some(tx)),
        }
    }

    /// The fence of handlers serving another process's memory.
    pub(crate) fn reads_exclusive() -> Self {
        DiscardFence::ReadsExclusive(RwLock::new(()))
    }

    /// Taken before each read of the userfaultfd; dropped once the
    /// `REMOVE` events it brought are applied.
    pub(crate) fn before_read(&self) -> ReadGuard<'_> {
        match self {
            // (T): pairs with the stamps (S) of `publish`.
            DiscardFence::Rezap { reads, .. } => ReadGuard {
                ticket: reads.fetch_add(1, Ordering::AcqRel) + 1,
                _exclusive: None,
            },
            DiscardFence::ReadsExclusive(lock) => ReadGuard {
                ticket: 0,
                // A poisoned lock guards no data: go on.
                _exclusive: Some(lock.write().unwrap_or_else(|p| p.into_inner())),
            },
        }
    }

    /// Taken before claiming pages to fill; dropped after the fill.
    pub(crate) fn before_fill(&self) -> FillGuard<'_> {
        match self {
            DiscardFence::Rezap { .. } => FillGuard { _shared: None },
            DiscardFence::ReadsExclusive(lock) => FillGuard {
                _shared: Some(lock.read().unwrap_or_else(|p| p.into_inner())),
            },
        }
    }

    /// Stops re-zaps (the pager is stopping).
    pub(crate) fn close(&self) {
        if let DiscardFence::Rezap { tx, .. } = self
            && let Ok(mut tx) = tx.lock()
        {
            tx.take();
        }
    }
}

impl Shared {
    /// Queues pages for a re-zap (see the module doc).
    pub(super) fn rezap(&self, first: usize, n: usize) {
        let c = &self.counters;
        c.add(&c.rezaps, n as u64);
        let DiscardFence::Rezap { tx, .. } = &self.fence else {
            // Cannot happen: reads exclude fills (module doc). Say so
            // rather than stay silent if it ever does.
            self.report(PagerError::syscall(
                "re-zap of a page in another process's memory",
                std::io::Error::from(std::io::ErrorKind::Unsupported),
            ));
            return;
        };
        if let Ok(tx) = tx.lock()
            && let Some(tx) = tx.as_ref()
        {
            // Counted before it is queued, so `settle` never sees it done
            // before it was sent (Release pairs with settle's Acquire).
            c.rezap_ranges_sent.fetch_add(1, Ordering::Release);
            let len = n * self.page_size(first);
            if tx.send((self.space.addr(first), len)).is_err() {
                c.rezap_ranges_done.fetch_add(1, Ordering::Release);
            }
        }
    }

    /// Marks `n` filled pages from `at` `PRESENT`, stamped (S); they belong
    /// to a run that started at `first`, asked as `ask` (for the counts and
    /// the working-set record).
    pub(super) fn publish(&self, at: usize, n: usize, first: usize, ask: Ask) {
        let c = &self.counters;
        c.add(&c.bytes_installed, (n * self.page_size(at)) as u64);
        match ask {
            Ask::Blocking => c.add(&c.pages_populated, n as u64),
            Ask::Prefetch | Ask::AheadNoWait => c.add(&c.pages_prefetched, n as u64),
            Ask::NoWait => c.add(&c.pages_fault_around, n as u64),
            Ask::Demand => {
                let demand = u64::from(at == first && n > 0);
                c.add(&c.pages_on_demand, demand);
                c.add(&c.pages_fault_around, n as u64 - demand);
                if demand == 1 {
                    self.record(at);
                }
            }
        }
        let stamp = match &self.fence {
            // (S): pairs with the ticket (T) of every handler's next read.
            DiscardFence::Rezap { reads, .. } => reads.fetch_add(0, Ordering::AcqRel),
            DiscardFence::ReadsExclusive(_) => 0,
        };
        let mut lost: Option<(usize, usize)> = None;
        for p in at..at + n {
            if self.states.publish(p, stamp) || self.minor {
                continue;
            }
            // A discard took the page after we claimed it: our copy may
            // have landed after the zap.
            lost = match lost {
                Some((s, k)) if s + k == p => Some((s, k + 1)),
                Some((s, k)) => {
                    self.rezap(s, k);
                    Some((p, 1))
                }
                None => Some((p, 1)),
            };
        }
        if let Some((s, k)) = lost {
            self.rezap(s, k);
        }
    }

    /// Applies a `REMOVE` event of `[start, end)` read with ticket
    /// `ticket`, under the read's [`ReadGuard`].
    pub(super) fn on_remove(&self, start: usize, end: usize, ticket: u64) {
        let ranges = self.space.pages_in(start, end);
        if ranges.is_empty() {
            return; // the doorbell, or outside every region
        }
        let c = &self.counters;
        c.add(&c.discard_events, 1);
        let to = if self.minor { MISSING } else { DISCARDED };
        let rezapping = matches!(self.fence, DiscardFence::Rezap { .. }) && !self.minor;
        for pages in ranges {
            c.add(&c.pages_discarded, pages.len() as u64);
            let mut run: Option<(usize, usize)> = None;
            for p in pages {
                let old = self.states.discard(p, to);
                let stale = rezapping
                    && page_state::kind(old) == PRESENT
                    && page_state::stamp(old) >= ticket;
                if !stale {
                    continue;
                }
                run = match run {
                    Some((s, k)) if s + k == p => Some((s, k + 1)),
                    Some((s, k)) => {
                        self.rezap(s, k);
                        Some((p, 1))
                    }
                    None => Some((p, 1)),
                };
            }
            if let Some((s, k)) = run {
                self.rezap(s, k);
            }
        }
        // Last: the event's marks and re-zaps are all out (pairs with
        // `Pager::settle`).
        c.removes_applied.fetch_add(1, Ordering::Release);
    }
}
