//! Working-set prefetch (REAP, ASPLOS '21): the pages a recorded restore
//! faulted on, installed in the background from the moment the userfaultfd
//! arrives, in trace order, in runs of up to [`CHUNK_PAGES`] pages per
//! `UFFDIO_COPY`; and copying everything (`--copy-all`, what Firecracker's
//! `fault_all_handler` does before it answers a fault), the same fill over
//! every page, beside the handlers.
//!
//! # Demand faults first
//! The prefetcher and the handlers share the per-page claims: a page is
//! filled once, by whoever claims it first. A fault on a page the
//! prefetcher has claimed is dropped as a duplicate and woken by the
//! prefetcher's copy (invariant W, ARCHITECTURE contract 10), so it waits
//! at most one chunk. A handler with messages to read takes the fence's
//! write lock, which waits for the chunk in flight and keeps the next one
//! out until the messages are read and their `REMOVE`s applied (`std`'s
//! lock lets a waiting writer in before new readers,
//! `handler/discard.rs`); the handlers' own fills take the read lock and
//! run alongside the prefetcher's. So a demand fault never queues behind
//! more than the one chunk in flight. The prefetcher does not otherwise
//! give way (a yield hands the CPU to whatever else the host runs, not to
//! the handlers).
//!
//! # Ready first
//! The plan is followed in order where the source has the bytes at once
//! (a file). An object store's chunks arrive in any order: a range whose
//! bytes are not here yet ([`PageSource::ready`](crate::PageSource::ready))
//! is left for later, and the ranges after it that are ready are filled
//! meanwhile; the next sweep over those left fills the ones that have
//! arrived, and one that finds none waits for the source's next arrival
//! ([`PageSource::wait_arrival`](crate::PageSource::wait_arrival)),
//! whichever range it brings. So the copies keep pace with the fetches
//! instead of waiting behind the slowest.
//!
//! # EEXIST and partial EAGAIN
//! A copy that meets a present page stops there: the pages before it are
//! published (partial `EAGAIN`), the present one is skipped (`EEXIST`: it
//! is there already), and the copy goes on with the rest
//! (`handler/fill.rs`, `copy_run`).
//!
//! # A discarded page is never prefetched back (ARCHITECTURE contract 9)
//! The ordering argument is `handler/discard.rs`'s, for every fill:
//! a prefetch chunk claims and copies under the fence's fill guard, and
//! every read of the userfaultfd, with the `REMOVE` events it brought
//! applied (pages swapped to `DISCARDED`), holds it exclusively. So for a
//! page `P` and a `REMOVE` covering it: either the chunk's copy returned
//! before that read began (before the kernel zapped `P`, which removes the
//! copy), or the chunk claims after the read ended and finds `P`
//! `DISCARDED`, which is never claimed again. A `REMOVE` queued while the
//! copy runs makes it fail with zero progress (`EAGAIN`): its pages go back
//! to `MISSING`, and the copier reads the pending messages itself (the
//! `REMOVE`s applied under the read guard like any handler's, the faults
//! served) and tries the run again, skipping what was discarded
//! (`handler/background.rs`): a balloon inflating during `--copy-all` or a
//! prefetch, even before a handler thread runs, neither stops it nor makes
//! it give up (issue 22).

use std::ops::Range;

use super::trace::Trace;
use crate::handler::{Ask, Buffers, Shared};
use crate::space::Space;

/// Host pages per prefetch `UFFDIO_COPY` (256 KiB with 4 KiB pages):
/// large enough that the ioctl's cost is spread, small enough that a
/// demand fault waiting on the chunk in flight waits little. A region of
/// 2 MiB pages is copied one page per `UFFDIO_COPY`.
///
/// # Examples
/// ```
/// use herdless_pager::restore::CHUNK_PAGES;
/// // A demand fault waits for at most one chunk in flight: 256 KiB of 4 KiB pages.
/// assert_eq!(CHUNK_PAGES * 4096, 256 << 10);
/// ```
pub const CHUNK_PAGES: usize = 64;

/// How long a prefetch that found nothing ready waits for the source's
/// next arrival before it waits for the first range it has left (module
/// doc): long enough to span a GET's round trip, short enough that a
/// fault-served stall costs little.
const ARRIVAL_PATIENCE: std::time::Duration = std::time::Duration::from_millis(50);

/// Passes over the plan at most: the first, then again while pages of it
/// are still missing (the source failed on them, or a deferral outlasted
/// [`STALLS`]: a fault will ask again).
const PASSES: usize = 8;

/// Deferrals in a row, with nothing left to read, before a run is left
/// for a later pass. After a `REMOVE` is read the kernel lets copies in
/// again only once the discarding thread has run on (it lowers
/// `mmap_changing` after it is woken), which nothing here can wait on:
/// the copier yields and tries again, a bounded number of times.
const STALLS: usize = 100_000;

/// The pages of `trace` in `space`, in trace order and in each region's
/// own pages (a run crossing regions split at their edges; a run of 4 KiB
/// pages in a region of 2 MiB pages is the 2 MiB pages holding it), and
/// the trace's pages no region maps.
pub(crate) fn plan_of(space: &Space, trace: &Trace) -> (Vec<Range<usize>>, u64) {
    let mut ranges = Vec::with_capacity(trace.runs.len());
    let mut unmapped = 0;
    for run in &trace.runs {
        let found = space.pages_of_source(run.offset, run.bytes());
        let mapped: u64 = found
            .iter()
            .map(|r| (r.len() * space.page_size(r.start)) as u64)
            .sum();
        // In the trace's pages (a run may land on larger pages, whose
        // bytes then count whole).
        unmapped += run.bytes().saturating_sub(mapped) / run.page_size;
        ranges.extend(found);
    }
    (ranges, unmapped)
}

/// Every page of `space` holding source bytes, by address.
pub(crate) fn everything(space: &Space) -> Vec<Range<usize>> {
    space
        .regions()
        .iter()
        .map(|r| r.first_page..r.first_page + r.source_pages)
        .filter(|r| !r.is_empty())
        .collect()
}

/// Fills the missing pages of `plan`, in order, as prefetched pages, in
/// runs of at most `chunk` host pages' worth (at least one page of the
/// region's; module doc): this thread takes the
/// plan's ranges `lane`, `lane + lanes`, ..., so that `lanes` threads go
/// down the plan side by side. Stops early when the handlers are told to
/// stop. Goes over its ranges again while pages of them are still
/// missing, at most [`PASSES`] times.
pub(crate) fn run(sh: &Shared, plan: &[Range<usize>], chunk: usize, lane: usize, lanes: usize) {
    let chunk_bytes = chunk * sh.page;
    let mut scratch = vec![0u8; chunk_bytes.max(sh.space.largest_page())];
    // To serve a batch it reads itself (module doc); without it, deferred
    // runs are left to the handlers and the next pass.
    let mut bufs = Buffers::new(sh.scratch_bytes()).ok();
    let c = &sh.counters;
    for _pass in 0..PASSES {
        c.add(&c.prefetch_passes, 1);
        let mut fill = |range: Range<usize>| {
            let run_max = (chunk_bytes / sh.page_size(range.start)).max(1);
            let mut stalls = 0;
            let on_deferred = || {
                let Some(bufs) = bufs.as_mut().filter(|_| !sh.stopping()) else {
                    return false;
                };
                if sh.serve_pending(bufs) > 0 {
                    stalls = 0;
                } else {
                    stalls += 1;
                    std::thread::yield_now();
                }
                stalls < STALLS
            };
            sh.fill_pages(range, Ask::Prefetch, run_max, &mut scratch, on_deferred);
        };
        // Ready first (module doc): each sweep fills, in order, the ranges
        // whose bytes are here and leaves the others for the next. A sweep
        // that finds none waits for the source's next arrival (any range's
        // bytes), and only where none comes within ARRIVAL_PATIENCE (or
        // the source counts none) for the first range left. The count is
        // read before the sweep looks: an arrival during the sweep is seen.
        let ready = |r: &Range<usize>| {
            let bytes = (r.end - r.start) * sh.page_size(r.start);
            sh.source.ready(sh.space.source_offset(r.start), bytes)
        };
        let mut left: Vec<Range<usize>> = plan
            .iter()
            .skip(lane)
            .step_by(lanes.max(1))
            .cloned()
            .collect();
        while !left.is_empty() {
            let before = left.len();
            let seen = sh.source.arrivals();
            let mut stopped = false;
            left.retain(|r| {
                if stopped || sh.stopping() {
                    stopped = true;
                    return true;
                }
                let wait = !ready(r);
                if !wait {
                    fill(r.clone());
                }
                wait
            });
            if stopped {
                return;
            }
            if left.len() == before && sh.source.wait_arrival(seen, ARRIVAL_PATIENCE) == seen {
                fill(left.remove(0));
            }
        }
        // Only this thread's ranges: the other lanes' threads see to theirs.
        let missing = plan
            .iter()
            .skip(lane)
            .step_by(lanes.max(1))
            .flat_map(Clone::clone)
            .any(|p| sh.states.is_missing(p));
        if !missing {
            return;
        }
        std::thread::yield_now();
    }
}
