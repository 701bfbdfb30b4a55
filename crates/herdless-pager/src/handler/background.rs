//! Filling pages nobody faulted on: [`Pager::populate`](crate::Pager::populate)
//! (a background copier, as in post-copy migration) and `herdless-uffd`'s
//! working-set prefetch. They race the handlers through the same per-page
//! claims, so a page is filled once; a discarded page is never claimed
//! (ARCHITECTURE contract 9); each run is claimed and filled under the
//! fence's fill guard.

use std::ops::Range;

use super::fill::Ask;
use super::{ClaimGuard, Shared};

impl Shared {
    /// Fills the missing pages of `pages` (in one region, all holding
    /// source bytes), in runs of at most `run_max` pages (`scratch` holds
    /// that many), asked as `ask` ([`Ask::Blocking`] or [`Ask::Prefetch`]).
    /// `before_run` is called before each run is claimed: a prefetch waits
    /// there while demand faults are pending. Pages another thread claimed
    /// or filled, or a discard took, are skipped.
    pub(crate) fn fill_pages(
        &self,
        pages: Range<usize>,
        ask: Ask,
        run_max: usize,
        scratch: &mut [u8],
        mut before_run: impl FnMut(),
    ) {
        let mut i = pages.start;
        while i < pages.end {
            before_run();
            let _fill = self.fence.before_fill();
            if !self.states.claim(i) {
                i += 1;
                continue;
            }
            let first = i;
            i += 1;
            while i < pages.end && i - first < run_max && self.states.claim(i) {
                i += 1;
            }
            let _guard = ClaimGuard::new(self, first, i - first);
            self.fill_run(first, i - first, ask, scratch);
        }
    }
}
