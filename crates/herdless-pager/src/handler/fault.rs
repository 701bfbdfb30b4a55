//! One fault (seed 002's `do_fault_around`): the faulting page and the
//! window's pages after it as one run, then the rest of the window; zeros
//! for pages that need no source bytes.
//!
//! # Missing faults on pages we filled
//! A page we filled can only go missing again through a discard
//! (`MADV_DONTNEED`: anonymous memory that is swapped out does not raise
//! missing faults). So a fault on a `PRESENT` or `DISCARDED` page is
//! answered with zeros (`UFFDIO_ZEROPAGE`; `EEXIST` if it was a duplicate
//! message and the page is there after all, then just a wake), without
//! waiting for the handler that read the `REMOVE` to mark the pages.
//!
//! # Re-reading ballooned memory: zeros by the run
//! A balloon discards megabytes at a time, and a guest that gets them back
//! reads them page after page. One `UFFDIO_ZEROPAGE` per fault made that
//! a round trip per 4 KiB (issue 22: 16 MiB re-read in 155–215 ms, where
//! Firecracker's handler, which unregisters removed ranges so that the
//! kernel serves them, took 31.5 ms). A fault on a `DISCARDED` page now
//! maps zeros over the whole run of `DISCARDED` pages around it within
//! its aligned [`ZERO_AROUND`] window: the faulting page and the run after
//! it in one ioctl (which wakes the faulting thread), then the run before
//! it. `DISCARDED` pages can only ever read zeros, and `UFFDIO_ZEROPAGE`
//! maps the kernel's shared zero page (no memory; a write later takes the
//! kernel's ordinary copy-on-write fault, not a userfault) and never
//! replaces a present page (`EEXIST`: one the guest wrote since, or
//! another handler's zeros), so mapping them ahead changes nothing a
//! guest can see. (Unregistering the range, as Firecracker's handler does,
//! would cost the same once, but split the VMM's mapping at every balloon
//! range, toward `vm.max_map_count`, and hide later faults and discards
//! there from the counters and the working-set record.) Hugetlbfs pages
//! are zeroed one per fault: zeros there are copied, real memory.

use super::fill::Ask;
use super::ZERO_AROUND;
use super::{ClaimGuard, Shared};
use crate::page_state::{self, DISCARDED, INSTALLING, MISSING, PRESENT};
use crate::uffd::Fill;
use crate::PagerError;

impl Shared {
    /// Serves one fault message on region page `page`.
    pub(super) fn on_fault(&self, page: usize, scratch: &mut [u8]) {
        loop {
            let w = self.states.load(page);
            match page_state::kind(w) {
                // The owner fills or wakes it (W).
                INSTALLING => {
                    self.counters.add(&self.counters.duplicate_faults, 1);
                    return;
                }
                DISCARDED if !self.minor => return self.zero_discarded(page),
                PRESENT if !self.minor => return self.zero_fill(page),
                _ if !self.space.has_source(page) => return self.zero_fill(page),
                MISSING => {
                    if self.states.claim(page) {
                        // The faulting page and the window's pages after it
                        // that we can claim, in one run: one copy fills them
                        // all and wakes the faulting thread.
                        let end = self.space.window(page, self.window_of(page)).end;
                        let mut q = page + 1;
                        while q < end && self.states.claim(q) {
                            q += 1;
                        }
                        let _guard = ClaimGuard::new(self, page, q - page);
                        // Deferred by a pending event: its thread, woken,
                        // faults again after the event (W).
                        self.fill_run(page, q - page, Ask::Demand, scratch);
                        return;
                    }
                    // Lost the claim to another installer: look again.
                }
                // Minor mode: mapped once, unmapped by a discard whose event
                // is not applied yet; the page cache still has it.
                _ => return self.continue_run_unclaimed(page),
            }
        }
    }

    /// Fault-around: fills the window's other missing pages that the
    /// source has without blocking, in contiguous claimed runs.
    pub(super) fn fault_around(&self, page: usize, scratch: &mut [u8]) {
        let window = self.space.window(page, self.window_of(page));
        let (mut i, end) = (window.start, window.end);
        while i < end {
            if i == page || !self.states.claim(i) {
                i += 1;
                continue;
            }
            let first = i;
            i += 1;
            while i < end && i != page && self.states.claim(i) {
                i += 1;
            }
            // `i` is unclaimed (or the end): the next loop turn skips or
            // retries it.
            let _guard = ClaimGuard::new(self, first, i - first);
            self.fill_run(first, i - first, Ask::NoWait, scratch);
        }
    }

    /// Answers a fault on a page that needs no source bytes with a zero
    /// page (a hugetlbfs page: copied from [`Shared::zeros`]).
    pub(super) fn zero_fill(&self, page: usize) {
        self.zero_run(page, 1);
    }

    /// Answers a fault on a `DISCARDED` page with zeros over the run of
    /// `DISCARDED` pages around it in its [`ZERO_AROUND`] window (module
    /// doc), the faulting page first.
    fn zero_discarded(&self, page: usize) {
        let size = self.page_size(page);
        let window = self.space.aligned(page, (ZERO_AROUND / size).max(1));
        let discarded = |p: usize| page_state::kind(self.states.load(p)) == DISCARDED;
        let mut end = page + 1;
        while end < window.end && discarded(end) {
            end += 1;
        }
        if self.zero_run(page, end - page) {
            let mut start = page;
            while start > window.start && discarded(start - 1) {
                start -= 1;
            }
            if start < page {
                self.zero_run(start, page - start);
            }
        }
    }

    /// Maps zeros over pages `[first, first + n)`, page `first` first;
    /// counts what it mapped, wakes page `first` if it did not map it (W).
    /// Stops at a page present already past the first (another handler's
    /// zeros, or one the program wrote: left as it is). True if page
    /// `first` is answered by a zero page mapped here.
    fn zero_run(&self, first: usize, n: usize) -> bool {
        let c = &self.counters;
        let size = self.page_size(first);
        let mut done = 0;
        while done < n {
            let at = self.page_addr(first + done);
            match self.zero_range(at, (n - done) * size, size) {
                Ok(Fill::Done) => {
                    c.add(&c.zero_pages, (n - done) as u64);
                    return true;
                }
                Ok(Fill::Partial(b)) => {
                    c.add(&c.zero_pages, (b / size) as u64);
                    done += b / size;
                }
                outcome => {
                    match outcome {
                        Ok(Fill::Exists) => c.add(&c.eexist, 1),
                        Ok(_) => c.add(&c.eagain_retry, 1),
                        Err(e) => self.ioctl_failed("UFFDIO_ZEROPAGE", e),
                    }
                    if done == 0 {
                        self.wake(first, 1);
                    }
                    return done > 0;
                }
            }
        }
        true
    }

    /// Answers the fault on `page` after a panic while serving it: poison
    /// if it is still missing, else a wake (its owner, if it is being
    /// filled, answers it: W).
    pub(super) fn answer_after_panic(&self, page: usize) {
        match page_state::kind(self.states.load(page)) {
            MISSING => {
                if self.states.claim(page) {
                    self.answer_unserved(page, 1);
                }
            }
            INSTALLING => {}
            _ => self.wake(page, 1),
        }
    }

    /// Minor mode, a page our state calls `PRESENT`: map it again.
    pub(super) fn continue_run_unclaimed(&self, page: usize) {
        let c = &self.counters;
        match self
            .uffd
            .continue_(self.page_addr(page), self.page_size(page))
        {
            Ok(Fill::Done | Fill::Partial(_)) => c.add(&c.pages_on_demand, 1),
            Ok(_) | Err(_) => {
                c.add(&c.eexist, 1);
                self.wake(page, 1);
            }
        }
    }

    /// Answers a fault at `address`, in a range registered with the
    /// userfaultfd but in none of the regions served (a VMM that registered
    /// more than it described): with poison (zeros without
    /// `UFFDIO_POISON`), so the thread is not left waiting and does not
    /// fault forever, and reports it. Nothing is read from the source. Its
    /// page size is unknown: a host page is tried first, then a 2 MiB one
    /// (hugetlbfs refuses anything smaller with `EINVAL`).
    pub(super) fn on_unmapped_fault(&self, address: usize) {
        use rustix::io::Errno;
        let c = &self.counters;
        c.add(&c.unmapped_faults, 1);
        self.report(PagerError::FaultOutsideRegions { address });
        let sizes = [self.page, crate::space::HUGE_PAGE];
        let try_each = |fill: &dyn Fn(usize, usize) -> std::io::Result<Fill>| {
            for size in sizes {
                match fill(address & !(size - 1), size) {
                    Err(e) if Errno::from_io_error(&e) == Some(Errno::INVAL) => continue,
                    other => return Some(other),
                }
            }
            None
        };
        let poisoned = if self.can_poison.load(std::sync::atomic::Ordering::Relaxed) {
            try_each(&|a, l| self.uffd.poison(a, l))
        } else {
            None
        };
        let answered = match poisoned {
            Some(Ok(Fill::Done)) => true,
            _ => matches!(
                try_each(&|a, l| self.zero_range(a, l, l)),
                Some(Ok(Fill::Done))
            ),
        };
        if !answered {
            let addr = address & !(self.page - 1);
            if let Err(e) = self.uffd.wake(addr, self.page) {
                self.ioctl_failed("UFFDIO_WAKE", e);
            }
        }
    }
}
