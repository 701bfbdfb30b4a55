//! Discards (`UFFD_EVENT_REMOVE`) and the fills that race them
//! (ARCHITECTURE contract 9): a discarded page reads zeros and is never
//! filled from the source again.
//!
//! # Discards racing fills: tickets and stamps
//! The kernel zaps a `MADV_DONTNEED` range only after a handler has read its
//! `REMOVE` event (copies fail while it is pending), so a fill issued before
//! the read can land after the zap and resurrect source data. Every handler
//! takes a ticket before each read (`reads.fetch_add(1, AcqRel)`, (T)); a
//! fill stamps its pages with `reads.fetch_add(0, AcqRel)` (S) after its
//! copy returned. Both are read-modify-writes of one atomic, so they are
//! totally ordered: if (S) precedes (T), (T) reads a value in (S)'s release
//! sequence, hence the copy happened before the read, hence before the zap,
//! and the zap removed it: `stamp < ticket` is safe. Otherwise the handler
//! applying the `REMOVE` cannot tell and has the page discarded again
//! ("re-zap", by the pager's zapper thread, since a handler cannot wait for
//! its own event). A fill that loses its page to the discard before it
//! publishes (`INSTALLING` swapped to `DISCARDED`) re-zaps the pages it
//! filled for the same reason. Re-zapped pages are `DISCARDED` already, so
//! a re-zap's own `REMOVE` triggers nothing more. The window in which such a
//! page shows stale data before its re-zap is the one no user-space pager
//! can close: the kernel drops `mmap_changing` before it zaps.

use std::sync::atomic::Ordering;

use super::fill::Ask;
use super::Shared;
use crate::page_state::{self, DISCARDED, MISSING, PRESENT};

impl Shared {
    /// Queues pages for a re-zap (see the module doc).
    pub(super) fn rezap(&self, first: usize, n: usize) {
        let c = &self.counters;
        c.add(&c.rezaps, n as u64);
        if let Ok(tx) = self.rezap.lock() {
            if let Some(tx) = tx.as_ref() {
                // Counted before it is queued, so `settle` never sees it done
                // before it was sent (Release pairs with settle's Acquire).
                c.rezap_ranges_sent.fetch_add(1, Ordering::Release);
                if tx.send((first * self.page, n * self.page)).is_err() {
                    c.rezap_ranges_done.fetch_add(1, Ordering::Release);
                }
            }
        }
    }

    /// Marks `n` filled pages from `at` `PRESENT`, stamped (S); they belong
    /// to a run that started at `first`, asked as `ask` (for the counts).
    pub(super) fn publish(&self, at: usize, n: usize, first: usize, ask: Ask) {
        let c = &self.counters;
        match ask {
            Ask::Blocking => c.add(&c.pages_populated, n as u64),
            Ask::NoWait => c.add(&c.pages_fault_around, n as u64),
            Ask::Demand => {
                let demand = u64::from(at == first && n > 0);
                c.add(&c.pages_on_demand, demand);
                c.add(&c.pages_fault_around, n as u64 - demand);
            }
        }
        // (S): pairs with the ticket (T) of every handler's next read.
        let stamp = self.reads.fetch_add(0, Ordering::AcqRel);
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

    /// Applies a `REMOVE` event read with ticket `ticket`.
    pub(super) fn on_remove(&self, start: usize, end: usize, ticket: u64) {
        let lo = start.max(self.base);
        let hi = end.min(self.base + self.len);
        if lo >= hi {
            return; // the doorbell, or outside the region
        }
        let c = &self.counters;
        c.add(&c.discard_events, 1);
        let (p0, p1) = (
            (lo - self.base) / self.page,
            (hi - self.base).div_ceil(self.page),
        );
        c.add(&c.pages_discarded, (p1 - p0) as u64);
        let to = if self.minor { MISSING } else { DISCARDED };
        let mut run: Option<(usize, usize)> = None;
        for p in p0..p1 {
            let old = self.states.discard(p, to);
            let stale =
                !self.minor && page_state::kind(old) == PRESENT && page_state::stamp(old) >= ticket;
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
        // Last: the event's marks and re-zaps are all out (pairs with
        // `Pager::settle`).
        c.removes_applied.fetch_add(1, Ordering::Release);
    }
}
