//! Filling pages nobody faulted on: [`Pager::populate`](crate::Pager::populate)
//! (a background copier, as in post-copy migration) and `herdless-uffd`'s
//! working-set prefetch and copy of everything. They race the handlers
//! through the same per-page claims, so a page is filled once; a discarded
//! page is never claimed (ARCHITECTURE contract 9); each run is claimed and
//! filled under the fence's fill guard.
//!
//! # A copier that meets a pending event reads it itself
//! While a `REMOVE` is pending every copy fails with zero progress, and it
//! stays pending until someone reads the userfaultfd. A copier that only
//! gave its pages back and went on would fail on every chunk until a
//! handler read the event, and a copy of everything that runs before the
//! handlers start would never see it read (issue 22: a balloon inflating
//! during `--copy-all` made it give up). So a deferred run calls the
//! caller's `on_deferred`: `herdless-uffd`'s copier reads the pending
//! messages itself there (`thread.rs`, [`Shared::serve_pending`]: the
//! `REMOVE`s applied under the read guard, as any handler's read, so the
//! ordering argument of `discard.rs` holds; the faults in the batch
//! served), then tries the same run again, whose discarded pages it now
//! skips. The run's claims and fill guard are dropped first.

use std::ops::Range;

use super::fill::Ask;
use super::{ClaimGuard, Shared};

impl Shared {
    /// Fills the missing pages of `pages` (in one region, all holding
    /// source bytes), in runs of at most `run_max` pages (`scratch` holds
    /// that many), asked as `ask` ([`Ask::Blocking`] or [`Ask::Prefetch`]).
    /// Pages another thread claimed or filled, or a discard took, are
    /// skipped. A run a pending event deferred (module doc) calls
    /// `on_deferred`, with no claim or guard held, and is tried again if it
    /// returns true (else its unfilled pages are left missing).
    /// Stops before the next run once [`stop_all`](Shared::stop_all) was
    /// called (a signal stopping `herdless-uffd --copy-all` waits for one
    /// run, not for the whole region).
    pub(crate) fn fill_pages(
        &self,
        pages: Range<usize>,
        ask: Ask,
        run_max: usize,
        scratch: &mut [u8],
        mut on_deferred: impl FnMut() -> bool,
    ) {
        let mut i = pages.start;
        while i < pages.end && !self.stopping() {
            // A slow source (an object store) is waited for outside the
            // fill guard (see `thread.rs`).
            let run = (pages.end - i).min(run_max);
            self.source
                .wait_ready(self.space.source_offset(i), run * self.page);
            let first = i;
            let deferred = {
                let _fill = self.fence.before_fill();
                if !self.states.claim(i) {
                    i += 1;
                    continue;
                }
                i += 1;
                while i < pages.end && i - first < run_max && self.states.claim(i) {
                    i += 1;
                }
                let _guard = ClaimGuard::new(self, first, i - first);
                self.fill_run(first, i - first, ask, scratch)
            };
            if deferred && on_deferred() {
                i = first;
            }
        }
    }
}
