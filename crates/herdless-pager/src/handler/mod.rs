//! The fault path: handler threads (seed 000) serving faults with
//! fault-around (seed 002).
//!
//! # One fault
//! A handler reads every pending message in one `read` (the kernel hands
//! over up to a buffer's worth), applies the `REMOVE` events first, then
//! serves each fault:
//! 1. the faulting page first, with the pages after it in its aligned
//!    window (like the kernel's `do_fault_around`, clipped to the source)
//!    that this thread could claim (`MISSING → INSTALLING`) and the source
//!    has without blocking: one run, one `UFFDIO_COPY`, which fills the
//!    faulting page first and wakes the faulting thread when the run is in
//!    (the faulting thread never faults again on the next page while its
//!    neighbours are still being copied);
//! 2. then the rest of the window (the pages before the faulting one, and
//!    any after a page it could not claim), in contiguous claimed runs the
//!    source has without blocking, one `UFFDIO_COPY` per run.
//!
//! Each run is copied straight from the source's own memory where it has
//! some ([`PageSource::memory`](crate::PageSource::memory): a `MemSource`'s
//! bytes, a `FileSource`'s read-only mapping of the page cache, residency
//! asked with `mincore`), else read into the handler's buffer in one read
//! and copied from there.
//!
//! Files, one job each: `thread.rs` (the handler threads: wait, read a
//! batch, serve it, stop), `fault.rs` (one fault and its window), `fill.rs`
//! (filling a claimed run; invariant W, ARCHITECTURE contract 10),
//! `discard.rs` (`REMOVE` events and the fills racing them, ARCHITECTURE
//! contract 9). This file: the state they share.

mod discard;
mod fault;
mod fill;
mod thread;

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};
use std::sync::{mpsc, Mutex};

use crate::page_state::PageStates;
use crate::source::GuardedSource;
use crate::stats::Counters;
use crate::uffd::Uffd;
use crate::PagerError;

pub(crate) use fill::Ask;
pub(crate) use thread::{run, wanted_features, Buffers};

/// Pages `[first, first + n)` claimed by the current thread: if a panic
/// unwinds past their fill, the guard gives them back and wakes them, so a
/// thread faulting on one is never left asleep (invariant W). A fill that
/// returns normally has answered every page itself, and the guard does
/// nothing.
pub(crate) struct ClaimGuard<'a> {
    sh: &'a Shared,
    first: usize,
    n: usize,
}

impl<'a> ClaimGuard<'a> {
    /// Guards the claims `[first, first + n)`, just made by the caller.
    pub(crate) fn new(sh: &'a Shared, first: usize, n: usize) -> Self {
        ClaimGuard { sh, first, n }
    }
}

impl Drop for ClaimGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() && self.n > 0 {
            self.sh.release_and_wake(self.first, self.n);
        }
    }
}

/// Everything the handler threads share with the [`Pager`](crate::Pager).
pub(crate) struct Shared {
    pub(crate) uffd: Uffd,
    /// Region start address and length.
    pub(crate) base: usize,
    pub(crate) len: usize,
    pub(crate) page: usize,
    /// Fault-around window in pages (1: off).
    pub(crate) window_pages: usize,
    pub(crate) source: GuardedSource,
    pub(crate) source_len: u64,
    /// Pages holding at least one source byte (clipped to the region):
    /// nothing at or past this page is ever filled from the source.
    pub(crate) source_pages: usize,
    pub(crate) states: PageStates,
    /// Minor-fault mode (`UFFDIO_CONTINUE` over a shared-memory source).
    pub(crate) minor: bool,
    /// `UFFDIO_POISON` is available.
    pub(crate) can_poison: bool,
    pub(crate) counters: Counters,
    pub(crate) per_handler: Box<[AtomicU64]>,
    /// Read tickets (T) and fill stamps (S): see `discard.rs`.
    pub(crate) reads: AtomicU64,
    /// Ranges (offset, len) to discard again; `None` once the pager stops.
    pub(crate) rezap: Mutex<Option<mpsc::Sender<(usize, usize)>>>,
    pub(crate) errors: Mutex<Vec<PagerError>>,
    /// Each handler's thread id (0 until it started).
    pub(crate) handler_tids: Box<[AtomicU32]>,
    /// Handler threads still running.
    pub(crate) alive: AtomicUsize,
    /// Handlers between a `read` that returned and the end of its batch.
    pub(crate) busy: AtomicUsize,
    /// Doorbell pages (`BlockingRead` shutdown): start and length.
    pub(crate) doorbell: (usize, usize),
    /// Written once to stop `Poll` handlers.
    pub(crate) stop: std::os::fd::OwnedFd,
}

impl Shared {
    pub(super) fn report(&self, e: PagerError) {
        if let Ok(mut errors) = self.errors.lock() {
            errors.push(e);
        }
    }

    pub(super) fn page_addr(&self, page: usize) -> usize {
        self.base + page * self.page
    }

    /// Wakes `n` pages from `first` (invariant W).
    pub(super) fn wake(&self, first: usize, n: usize) {
        if let Err(e) = self.uffd.wake(self.page_addr(first), n * self.page) {
            self.report(PagerError::syscall("UFFDIO_WAKE", e));
        }
    }

    /// Gives back `n` claimed, unfilled pages from `first` and wakes them.
    pub(super) fn release_and_wake(&self, first: usize, n: usize) {
        for p in first..first + n {
            self.states.release(p);
        }
        self.wake(first, n);
    }
}
