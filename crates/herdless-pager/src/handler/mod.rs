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
//! contract 9), `background.rs` (filling pages nobody faulted on:
//! `populate`, prefetch), `plan.rs` (the working set to prefetch, and
//! filling ahead along it after a fault). This file: the state they share.

mod background;
mod discard;
mod fault;
mod fill;
mod plan;
mod thread;

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use rustix::io::Errno;

use crate::page_state::PageStates;
use crate::source::GuardedSource;
use crate::space::Space;
use crate::stats::Counters;
use crate::uffd::Uffd;
use crate::PagerError;

pub(crate) use discard::DiscardFence;
pub(crate) use fill::Ask;
pub(crate) use plan::Plan;
pub(crate) use thread::{run, wanted_features, Buffers};

/// The window a fault on a discarded page maps zeros over, aligned, in
/// bytes (`fault.rs`): 2 MiB, a page table's worth of 4 KiB pages.
pub(crate) const ZERO_AROUND: usize = 2 << 20;

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

/// Everything the handler threads share with their owner (the
/// [`Pager`](crate::Pager), or `herdless-uffd`'s server) and with
/// `populate` and prefetch callers.
pub(crate) struct Shared {
    pub(crate) uffd: Uffd,
    /// The regions served, and the source bytes behind each.
    pub(crate) space: Space,
    /// The host's page size (a region may be served in larger pages:
    /// [`Space::page_size`]).
    pub(crate) page: usize,
    /// Fault-around window in host pages (1: off); regions of larger pages
    /// are served one page per fault ([`Shared::window_of`]).
    pub(crate) window_pages: usize,
    /// Zeros, one page of the largest page size served, if larger than the
    /// host's (empty otherwise): what a hugetlbfs page is filled with where
    /// it must read zeros, since `UFFDIO_ZEROPAGE` does not serve
    /// hugetlbfs. Allocated zeroed and never written, so it costs no
    /// memory (the kernel maps its zero page for every read).
    pub(crate) zeros: Box<[u8]>,
    pub(crate) source: GuardedSource,
    pub(crate) states: PageStates,
    /// Minor-fault mode (`UFFDIO_CONTINUE` over a shared-memory source).
    pub(crate) minor: bool,
    /// `UFFDIO_POISON` works (turned off if the kernel refuses it).
    pub(crate) can_poison: AtomicBool,
    /// How fills are kept from resurrecting discarded pages.
    pub(crate) fence: DiscardFence,
    pub(crate) counters: Counters,
    pub(crate) per_handler: Box<[AtomicU64]>,
    pub(crate) errors: Mutex<Vec<PagerError>>,
    /// Each handler's thread id (0 until it started).
    pub(crate) handler_tids: Box<[AtomicU32]>,
    /// Handler threads still running.
    pub(crate) alive: AtomicUsize,
    /// Handlers between a `read` that returned and the end of its batch.
    pub(crate) busy: AtomicUsize,
    /// Doorbell pages (`BlockingRead` shutdown): start and length.
    pub(crate) doorbell: (usize, usize),
    /// Written once to stop `Poll` handlers (an eventfd; nobody reads it,
    /// so it stays readable: the owner may poll it too).
    pub(crate) stop: OwnedFd,
    /// The process whose memory is served went away (`ESRCH`, or `ENOSPC`
    /// on kernels before 4.18, from a fill): everything stops.
    pub(crate) gone: AtomicBool,
    /// Set (Release) before `stop` is written: what a prefetcher checks
    /// between runs without a system call.
    pub(crate) stopped: AtomicBool,
    /// The pages faulted on and filled from the source, in the order they
    /// were (the working set), if asked for.
    pub(crate) record: Option<Mutex<Vec<usize>>>,
    /// The working set to prefetch, if any (`plan.rs`).
    pub(crate) plan: Option<Plan>,
}

/// What [`Shared::new`] needs besides defaults.
pub(crate) struct SharedParts {
    pub(crate) uffd: Uffd,
    pub(crate) space: Space,
    pub(crate) window_pages: usize,
    pub(crate) source: GuardedSource,
    pub(crate) minor: bool,
    pub(crate) can_poison: bool,
    pub(crate) fence: DiscardFence,
    pub(crate) handlers: usize,
    pub(crate) doorbell: (usize, usize),
    pub(crate) record: bool,
    pub(crate) plan: Option<Plan>,
}

impl Shared {
    /// The state for `parts.handlers` handlers, none started yet (each
    /// counts itself out of `alive` when it stops).
    pub(crate) fn new(parts: SharedParts) -> Result<Self, PagerError> {
        let stop = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .map_err(|e| PagerError::syscall("eventfd", e))?;
        let page = rustix::param::page_size();
        let largest = parts.space.largest_page();
        let zeros = if largest > page {
            let mut v = Vec::new();
            v.try_reserve_exact(largest).map_err(|_| {
                PagerError::syscall(
                    "allocating a zero page",
                    std::io::Error::from(std::io::ErrorKind::OutOfMemory),
                )
            })?;
            v.resize(largest, 0u8);
            v.into_boxed_slice()
        } else {
            Box::default()
        };
        Ok(Shared {
            uffd: parts.uffd,
            zeros,
            states: PageStates::new(parts.space.pages()),
            space: parts.space,
            page,
            window_pages: parts.window_pages,
            source: parts.source,
            minor: parts.minor,
            can_poison: AtomicBool::new(parts.can_poison),
            fence: parts.fence,
            counters: Counters::default(),
            per_handler: (0..parts.handlers).map(|_| AtomicU64::new(0)).collect(),
            errors: Mutex::new(Vec::new()),
            handler_tids: (0..parts.handlers).map(|_| AtomicU32::new(0)).collect(),
            alive: AtomicUsize::new(parts.handlers),
            busy: AtomicUsize::new(0),
            doorbell: parts.doorbell,
            stop,
            gone: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            record: parts.record.then(|| Mutex::new(Vec::new())),
            plan: parts.plan,
        })
    }

    pub(crate) fn report(&self, e: PagerError) {
        if let Ok(mut errors) = self.errors.lock() {
            errors.push(e);
        }
    }

    /// Reports a failed ioctl, unless it failed because the process whose
    /// memory is served went away (`ESRCH`; `ENOSPC` before Linux 4.18):
    /// that stops every handler instead; or because the range is no longer
    /// registered memory (`ENOENT`: the VMM unmapped it, typically while
    /// exiting, with a fill still under way): that is counted
    /// (`fills_unmapped`), the pages' claims go back as for any unfilled
    /// page, and nothing is left to answer there.
    pub(crate) fn ioctl_failed(&self, op: &'static str, e: std::io::Error) {
        match Errno::from_io_error(&e) {
            Some(Errno::SRCH | Errno::NOSPC) => self.stop_all(true),
            Some(Errno::NOENT) => self.counters.add(&self.counters.fills_unmapped, 1),
            _ => self.report(PagerError::syscall(op, e)),
        }
    }

    /// Tells every `Poll` handler (and whoever polls `stop`) to stop;
    /// `gone`: because the served process went away.
    pub(crate) fn stop_all(&self, gone: bool) {
        if gone {
            self.gone.store(true, Ordering::Release);
        }
        self.stopped.store(true, Ordering::Release);
        let _ = rustix::io::write(&self.stop, &1u64.to_ne_bytes());
    }

    /// Whether [`stop_all`](Self::stop_all) was called (Acquire pairs
    /// with its Release: a `gone` set before is seen).
    pub(crate) fn stopping(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Notes page `p` in the working-set record, if one is kept.
    fn record(&self, p: usize) {
        if let Some(Ok(mut pages)) = self.record.as_ref().map(|r| r.lock()) {
            pages.push(p);
        }
    }

    pub(super) fn page_addr(&self, page: usize) -> usize {
        self.space.addr(page)
    }

    /// Page `p`'s size in bytes: the host's, or its region's larger one.
    pub(crate) fn page_size(&self, p: usize) -> usize {
        self.space.page_size(p)
    }

    /// The fault-around window of page `p`'s region, in its pages: the
    /// configured window for host-sized pages, one page (off) for larger
    /// ones, whose one page is already a whole window's worth.
    pub(super) fn window_of(&self, p: usize) -> usize {
        if self.page_size(p) == self.page {
            self.window_pages
        } else {
            1
        }
    }

    /// Wakes `n` pages from `first` (invariant W).
    pub(super) fn wake(&self, first: usize, n: usize) {
        if let Err(e) = self
            .uffd
            .wake(self.page_addr(first), n * self.page_size(first))
        {
            self.ioctl_failed("UFFDIO_WAKE", e);
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
