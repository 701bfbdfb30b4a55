//! The working-set plan of a prefetch (`herdless-uffd --prefetch`): the
//! pages a recorded restore faulted on, in first-touch order, and each
//! page's place in that order.
//!
//! The prefetcher thread walks the plan from the start. The handlers use it
//! too: after answering a demand fault on a page of the plan, a handler
//! fills the next [`AHEAD`] missing pages of the plan (REAP's observation:
//! the recorded order predicts the next touches), so that a guest that has
//! caught up with the prefetcher finds a stretch of its working set
//! present instead of faulting again at once. The faulting page is filled
//! and its thread woken first, as with fault-around; the pages ahead are
//! claimed like any others (filled once, never a discarded one), taken
//! only if the memory file has them without blocking (as fault-around's
//! neighbours: `herdless-uffd` maps the trace's pages before the VMM
//! connects, so they are), and counted as prefetched.

use std::ops::Range;

use super::fill::Ask;
use super::{ClaimGuard, Shared};

/// Host pages' worth of the plan a handler fills after a demand fault on
/// one of its pages (in a region of 2 MiB pages: the next page).
pub(crate) const AHEAD: usize = 32;

/// Pages in first-touch order and where each one is in it.
pub(crate) struct Plan {
    /// Runs of pages, in order (none crosses a region).
    ranges: Vec<Range<usize>>,
    /// Every page of `ranges`, in order.
    order: Vec<usize>,
    /// For each page of the space: 1 + its first index in `order`, or 0.
    pos: Vec<u32>,
}

impl Plan {
    /// The plan of `ranges`, over a space of `pages` pages.
    pub(crate) fn new(ranges: Vec<Range<usize>>, pages: usize) -> Self {
        let mut order = Vec::new();
        let mut pos = vec![0u32; pages];
        for r in &ranges {
            for p in r.clone() {
                if p < pages && pos[p] == 0 {
                    order.push(p);
                    pos[p] = u32::try_from(order.len()).unwrap_or(u32::MAX);
                }
            }
        }
        Plan { ranges, order, pos }
    }

    /// The runs, in order.
    pub(crate) fn ranges(&self) -> &[Range<usize>] {
        &self.ranges
    }

    /// The pages after `page` in the plan (empty if it is not in it).
    fn after(&self, page: usize) -> &[usize] {
        match self.pos.get(page).copied().unwrap_or(0) {
            0 => &[],
            i => self.order.get(i as usize..).unwrap_or(&[]),
        }
    }
}

impl Shared {
    /// After a demand fault on `page`: fills the next pages of the plan
    /// that are still missing, [`AHEAD`] host pages' worth (at least one
    /// page), in runs of consecutive pages (at most `scratch`'s), under the
    /// caller's fill guard.
    pub(super) fn fill_ahead(&self, page: usize, scratch: &mut [u8]) {
        let Some(plan) = &self.plan else {
            return;
        };
        let next = plan.after(page);
        let ahead = (AHEAD * self.page / self.page_size(page)).max(1);
        let next = &next[..next.len().min(ahead)];
        let mut i = 0;
        while i < next.len() {
            let first = next[i];
            i += 1;
            if !self.states.claim(first) {
                continue;
            }
            let run_max = (scratch.len() / self.page_size(first)).max(1);
            let end = self.space.source_end(first);
            let mut n = 1;
            while i < next.len()
                && next[i] == first + n
                && first + n < end
                && n < run_max
                && self.states.claim(next[i])
            {
                n += 1;
                i += 1;
            }
            let _guard = ClaimGuard::new(self, first, n);
            self.fill_run(first, n, Ask::AheadNoWait, scratch);
        }
    }

    /// Bytes of scratch buffer a handler needs: a fault-around window, a
    /// run ahead along the plan, or one page of the largest size served.
    pub(crate) fn scratch_bytes(&self) -> usize {
        let host_pages = if self.plan.is_some() {
            self.window_pages.max(AHEAD)
        } else {
            self.window_pages
        };
        (host_pages * self.page).max(self.space.largest_page())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_knows_what_comes_after_each_of_its_pages() {
        let plan = Plan::new(vec![5..8, 1..3, 6..7, 20..21], 32);
        assert_eq!(plan.order, vec![5, 6, 7, 1, 2, 20]);
        assert_eq!(plan.after(7), &[1, 2, 20]);
        assert_eq!(plan.after(20), &[] as &[usize]);
        assert_eq!(plan.after(9), &[] as &[usize], "not in the plan");
        assert_eq!(plan.after(99), &[] as &[usize], "not in the space");
    }
}
