//! The handler threads (seed 000) and the fault path with fault-around
//! (seed 002).
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
//! some ([`PageSource::memory`]: a `MemSource`'s bytes, a `FileSource`'s
//! read-only mapping of the page cache, residency asked with `mincore`),
//! else read into the handler's buffer in one read and copied from there.
//!
//! # Invariant W: nobody is left asleep
//! A fault message for a page in state `INSTALLING` is dropped as a
//! duplicate, so the claim's owner must wake the page whatever happens: a
//! successful fill wakes it (the ioctl does); every other outcome (`EEXIST`,
//! zero-progress `EAGAIN`, source not ready, error) ends with an explicit
//! `UFFDIO_WAKE` of every claimed page the owner did not fill, or a poison
//! that wakes. A woken thread whose page is still missing faults again: a
//! zero-progress `EAGAIN` (a `REMOVE` pending) thus *defers* the fault to
//! the next message, read after the pending event; it is never counted done.
//!
//! # Missing faults on pages we filled
//! A page we filled can only go missing again through a discard
//! (`MADV_DONTNEED`: anonymous memory that is swapped out does not raise
//! missing faults). So a fault on a `PRESENT` or `DISCARDED` page is
//! answered with zeros (`UFFDIO_ZEROPAGE`; `EEXIST` if it was a duplicate
//! message and the page is there after all, then just a wake), without
//! waiting for the handler that read the `REMOVE` to mark the pages.
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

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::Instant;

use linux_raw_sys::general as uapi;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;

use crate::page_state::{self, PageStates, DISCARDED, INSTALLING, MISSING, PRESENT};
use crate::source::{GuardedSource, SourceFailure};
use crate::stats::Counters;
use crate::uffd::{Fill, Msg, Uffd, MSG_SIZE};
use crate::{HandlerMode, PagerError};

/// Messages read per `read` call.
const BATCH: usize = 64;

/// How the source is asked for a run of claimed pages (and how the filled
/// pages are counted).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// Every page, blocking if need be (`populate`).
    Blocking,
    /// The first page is the faulting one: blocking if need be, counted on
    /// demand; the others are its window's neighbours, taken only if the
    /// source has them without blocking, counted as fault-around.
    Demand,
    /// Only what the source has without blocking (fault-around).
    NoWait,
}

/// How a run's `UFFDIO_COPY` ended.
enum Copied {
    /// Every page filled, or skipped and woken (present already).
    Done,
    /// Stopped: the pages not filled were released and woken.
    Stopped,
    /// The kernel could not read the source memory (`EFAULT`: a mapped file
    /// that shrank) from page `at` on: those pages are still claimed.
    SourceFault { at: usize },
}

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
    /// Read tickets (T) and fill stamps (S): see the module doc.
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
    fn report(&self, e: PagerError) {
        if let Ok(mut errors) = self.errors.lock() {
            errors.push(e);
        }
    }

    fn page_addr(&self, page: usize) -> usize {
        self.base + page * self.page
    }

    /// Wakes `n` pages from `first` (invariant W).
    fn wake(&self, first: usize, n: usize) {
        if let Err(e) = self.uffd.wake(self.page_addr(first), n * self.page) {
            self.report(PagerError::syscall("UFFDIO_WAKE", e));
        }
    }

    /// Gives back `n` claimed, unfilled pages from `first` and wakes them.
    fn release_and_wake(&self, first: usize, n: usize) {
        for p in first..first + n {
            self.states.release(p);
        }
        self.wake(first, n);
    }

    /// Queues pages for a re-zap (see the module doc).
    fn rezap(&self, first: usize, n: usize) {
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
    fn publish(&self, at: usize, n: usize, first: usize, ask: Ask) {
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

    /// Pages of a request for `len` bytes that an answer of `got` bytes
    /// covers: whole pages, and the last partial one if `got` reached the
    /// end of the request (the source's end).
    fn pages_of(&self, got: usize, len: usize) -> usize {
        if got >= len {
            len.div_ceil(self.page)
        } else {
            got / self.page
        }
    }

    /// Fills the claimed pages `[first, first + n)` from the source (all
    /// below `source_pages`), asking it as `ask`, with one `UFFDIO_COPY`
    /// for the pages it has (page `first` first: with [`Ask::Demand`] the
    /// faulting thread is woken by that one copy); wakes whatever it does
    /// not fill (W). `scratch` holds at least `n` pages.
    ///
    /// A source that lives in memory ([`PageSource::memory`]) is copied
    /// from directly: one copy per page, none through `scratch`. Others, and
    /// a run holding the source's partial last page, are read into
    /// `scratch` in one read and copied from there.
    pub(crate) fn fill_run(&self, first: usize, n: usize, ask: Ask, scratch: &mut [u8]) {
        if self.minor {
            return self.continue_run(first, n, ask);
        }
        let off = first * self.page;
        let bytes = n * self.page;
        let avail = usize::try_from(self.source_len - off as u64).map_or(bytes, |a| a.min(bytes));
        let partial_end = avail < bytes || avail % self.page != 0;
        let Some(mem) = self.source.memory().filter(|_| !partial_end) else {
            return self.fill_from_reads(first, n, ask, scratch);
        };
        let ready = match ask {
            Ask::Blocking => n,
            Ask::Demand => {
                1 + self
                    .source
                    .resident((off + self.page) as u64, bytes - self.page)
                    / self.page
            }
            Ask::NoWait => self.source.resident(off as u64, bytes) / self.page,
        };
        if ready < n {
            self.release_and_wake(first + ready, n - ready);
        }
        if ready == 0 {
            return;
        }
        // The source's own bytes, handed to the kernel (never read here).
        let src = mem.wrapping_add(off);
        if let Copied::SourceFault { at } = self.copy_run(first, ready, first, ask, src) {
            // The mapping could not be read (a file that shrank): read the
            // rest instead, which reports the real error; the faulting
            // page, if still unfilled, is asked for blocking.
            let rest = if at == first {
                ask
            } else if ask == Ask::Demand {
                Ask::NoWait
            } else {
                ask
            };
            self.fill_from_reads(at, first + ready - at, rest, scratch);
        }
    }

    /// [`fill_run`](Self::fill_run) through `scratch`: one read of the run
    /// (blocking for the pages that must be served, `read_nowait` for the
    /// rest), then one copy of the prefix the source gave. Where the source
    /// fails part-way (a file that shrank), the pages it gave are copied,
    /// the first page it could not give is poisoned if it must be served
    /// (the faulting page, or any page of a `populate`), and the rest are
    /// given back: never a page filled with anything but the source's
    /// bytes, and zeros only past the source's end in its last page.
    fn fill_from_reads(&self, first: usize, n: usize, ask: Ask, scratch: &mut [u8]) {
        let off = first * self.page;
        let bytes = n * self.page;
        let avail = usize::try_from(self.source_len - off as u64).map_or(bytes, |a| a.min(bytes));
        let buf = &mut scratch[..bytes];
        let (got, failure) = match ask {
            Ask::Blocking => self.read_prefix(off as u64, &mut buf[..avail]),
            // A neighbour the source cannot give is simply not taken; the
            // demand path reports errors.
            Ask::NoWait => (self.read_nowait(off as u64, &mut buf[..avail]), None),
            Ask::Demand => {
                // One read for the whole run if the source has the faulting
                // page without blocking; else a blocking read of that page
                // and a non-blocking one of the rest.
                let head = avail.min(self.page);
                let got = self.read_nowait(off as u64, &mut buf[..avail]);
                if got >= head {
                    (got, None)
                } else {
                    match self.read_prefix(off as u64, &mut buf[..head]) {
                        (_, Some(f)) => (0, Some(f)),
                        (_, None) => {
                            let rest = self.read_nowait((off + head) as u64, &mut buf[head..avail]);
                            (head + rest, None)
                        }
                    }
                }
            }
        };
        let ready = self.pages_of(got, avail);
        if ready < n {
            // The page the source failed on, if it must be answered now.
            let failed = failure.map(|f| (first + ready, f));
            match failed {
                Some((p, f)) => {
                    if p + 1 < first + n {
                        self.release_and_wake(p + 1, first + n - p - 1);
                    }
                    self.source_failed(p, 1, (p * self.page) as u64, f);
                }
                None => self.release_and_wake(first + ready, n - ready),
            }
        }
        if ready == 0 {
            return;
        }
        // The part of the last page past the source's end reads zeros.
        buf[avail.min(ready * self.page)..ready * self.page].fill(0);
        match self.copy_run(first, ready, first, ask, buf.as_ptr()) {
            Copied::Done | Copied::Stopped => {}
            // Our own buffer is readable: an EFAULT here means the kernel
            // refused something else; nothing was filled from `at` on.
            Copied::SourceFault { at } => {
                self.report(PagerError::syscall(
                    "UFFDIO_COPY",
                    std::io::Error::from_raw_os_error(Errno::FAULT.raw_os_error()),
                ));
                self.release_and_wake(at, first + ready - at);
            }
        }
    }

    /// A blocking read of `buf` from `offset`: the bytes read from the
    /// start, and why the source stopped short, if it did. A run that fails
    /// as a whole is read again page by page, so a failure past its first
    /// page keeps the pages before it.
    fn read_prefix(&self, offset: u64, buf: &mut [u8]) -> (usize, Option<SourceFailure>) {
        let first = match self.source.read_at(offset, buf) {
            Ok(()) => return (buf.len(), None),
            Err(f) => f,
        };
        if buf.len() <= self.page || matches!(first, SourceFailure::Panicked(_)) {
            return (0, Some(first));
        }
        let mut done = 0;
        for chunk in buf.chunks_mut(self.page) {
            if let Err(f) = self.source.read_at(offset + done as u64, chunk) {
                return (done, Some(f));
            }
            done += chunk.len();
        }
        (done, None)
    }

    /// `read_nowait`: the prefix the source has without blocking; an error
    /// means none (a panic is also reported).
    fn read_nowait(&self, offset: u64, buf: &mut [u8]) -> usize {
        match self.source.read_nowait(offset, buf) {
            Ok(n) => n,
            Err(f @ SourceFailure::Panicked(_)) => {
                self.report(f.into_error("read_nowait", offset));
                0
            }
            Err(SourceFailure::Io(_)) => 0,
        }
    }

    /// One `UFFDIO_COPY` of the claimed pages `[at, at + n)` from `src`
    /// (the bytes of page `at`), advancing over partial copies; the run
    /// started at `first` and was asked as `ask` (for the counts).
    fn copy_run(&self, at: usize, n: usize, first: usize, ask: Ask, src: *const u8) -> Copied {
        let c = &self.counters;
        let mut done = 0;
        while done < n {
            let len = (n - done) * self.page;
            // SAFETY (of the call): `src` is either our scratch buffer or
            // the source's memory; the kernel reads it with copy_from_user,
            // which fails with EFAULT (handled below) rather than touching
            // anything it may not, and nothing in Rust aliases it mutably.
            let r = unsafe {
                self.uffd.copy(
                    self.page_addr(at + done),
                    src.wrapping_add(done * self.page),
                    len,
                )
            };
            match r {
                Ok(Fill::Done) => {
                    self.publish(at + done, n - done, first, ask);
                    done = n;
                }
                Ok(Fill::Partial(b)) => {
                    c.add(&c.eagain_partial, 1);
                    let k = b / self.page;
                    self.publish(at + done, k, first, ask);
                    done += k;
                }
                Ok(Fill::Exists) => {
                    // Present already (e.g. a poisoned page): skip and wake it.
                    c.add(&c.eexist, 1);
                    self.release_and_wake(at + done, 1);
                    done += 1;
                }
                Ok(Fill::Retry) => {
                    // A discard event is pending: defer (W).
                    c.add(&c.eagain_retry, 1);
                    self.release_and_wake(at + done, n - done);
                    return Copied::Stopped;
                }
                Err(e) if e.raw_os_error() == Some(Errno::FAULT.raw_os_error()) => {
                    return Copied::SourceFault { at: at + done };
                }
                Err(e) => {
                    self.report(PagerError::syscall("UFFDIO_COPY", e));
                    self.release_and_wake(at + done, n - done);
                    return Copied::Stopped;
                }
            }
        }
        Copied::Done
    }

    /// Minor mode: map the page-cache pages of the run (`UFFDIO_CONTINUE`),
    /// page `first` first.
    fn continue_run(&self, first: usize, n: usize, ask: Ask) {
        let c = &self.counters;
        let mut done = 0;
        while done < n {
            let len = (n - done) * self.page;
            match self.uffd.continue_(self.page_addr(first + done), len) {
                Ok(Fill::Done) => {
                    self.publish(first + done, n - done, first, ask);
                    done = n;
                }
                Ok(Fill::Partial(b)) => {
                    c.add(&c.eagain_partial, 1);
                    let k = b / self.page;
                    self.publish(first + done, k, first, ask);
                    done += k;
                }
                Ok(Fill::Exists) => {
                    c.add(&c.eexist, 1);
                    self.release_and_wake(first + done, 1);
                    done += 1;
                }
                Ok(Fill::Retry) => {
                    c.add(&c.eagain_retry, 1);
                    return self.release_and_wake(first + done, n - done);
                }
                Err(e) => {
                    // Only the faulting page must be there; a neighbour the
                    // page cache lacks is simply not mapped.
                    let must = match ask {
                        Ask::Blocking => true,
                        Ask::Demand => done == 0,
                        Ask::NoWait => false,
                    };
                    if must {
                        self.report(PagerError::syscall("UFFDIO_CONTINUE", e));
                    }
                    return self.release_and_wake(first + done, n - done);
                }
            }
        }
    }

    /// The source could not give the faulting page: poison it (the access
    /// gets `SIGBUS`, as a failed read of a mapped file does) or, without
    /// `UFFDIO_POISON`, map zeros; report the error either way.
    fn source_failed(&self, first: usize, n: usize, offset: u64, f: SourceFailure) {
        let c = &self.counters;
        c.add(&c.source_errors, 1);
        self.report(f.into_error("read_at", offset));
        self.answer_unserved(first, n);
    }

    /// Answers the claimed pages `[first, first + n)`, which could not be
    /// filled from the source, with poison (zeros without `UFFDIO_POISON`),
    /// gives the claims back and wakes whatever was not filled (W).
    fn answer_unserved(&self, first: usize, n: usize) {
        let c = &self.counters;
        let (addr, len) = (self.page_addr(first), n * self.page);
        let filled = if self.can_poison {
            let r = self.uffd.poison(addr, len);
            if r.as_ref().is_ok_and(|f| *f == Fill::Done) {
                c.add(&c.poisoned_pages, n as u64);
            }
            r
        } else {
            self.uffd.zeropage(addr, len)
        };
        // Claims go back (a later fault after a discard retries the
        // source); whatever was not filled is woken (W).
        for p in first..first + n {
            self.states.release(p);
        }
        if !matches!(filled, Ok(Fill::Done)) {
            self.wake(first, n);
        }
    }

    /// Answers the fault on `page` after a panic while serving it: poison
    /// if it is still missing, else a wake (its owner, if it is being
    /// filled, answers it: W).
    fn answer_after_panic(&self, page: usize) {
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

    /// Answers a fault on a page that needs no source bytes with a zero page.
    fn zero_fill(&self, page: usize) {
        let c = &self.counters;
        match self.uffd.zeropage(self.page_addr(page), self.page) {
            Ok(Fill::Done | Fill::Partial(_)) => c.add(&c.zero_pages, 1),
            Ok(Fill::Exists) => {
                c.add(&c.eexist, 1);
                self.wake(page, 1);
            }
            Ok(Fill::Retry) => {
                c.add(&c.eagain_retry, 1);
                self.wake(page, 1);
            }
            Err(e) => {
                self.report(PagerError::syscall("UFFDIO_ZEROPAGE", e));
                self.wake(page, 1);
            }
        }
    }

    /// Serves one fault message on region page `page`.
    fn on_fault(&self, page: usize, scratch: &mut [u8]) {
        loop {
            let w = self.states.load(page);
            match page_state::kind(w) {
                // The owner fills or wakes it (W).
                INSTALLING => {
                    self.counters.add(&self.counters.duplicate_faults, 1);
                    return;
                }
                PRESENT | DISCARDED if !self.minor => return self.zero_fill(page),
                _ if page >= self.source_pages => return self.zero_fill(page),
                MISSING => {
                    if self.states.claim(page) {
                        // The faulting page and the window's pages after it
                        // that we can claim, in one run: one copy fills them
                        // all and wakes the faulting thread.
                        let window_end = (page & !(self.window_pages - 1)) + self.window_pages;
                        let end = window_end.min(self.source_pages);
                        let mut q = page + 1;
                        while q < end && self.states.claim(q) {
                            q += 1;
                        }
                        let _guard = ClaimGuard::new(self, page, q - page);
                        return self.fill_run(page, q - page, Ask::Demand, scratch);
                    }
                    // Lost the claim to another installer: look again.
                }
                // Minor mode: mapped once, unmapped by a discard whose event
                // is not applied yet; the page cache still has it.
                _ => return self.continue_run_unclaimed(page),
            }
        }
    }

    /// Minor mode, a page our state calls `PRESENT`: map it again.
    fn continue_run_unclaimed(&self, page: usize) {
        let c = &self.counters;
        match self.uffd.continue_(self.page_addr(page), self.page) {
            Ok(Fill::Done | Fill::Partial(_)) => c.add(&c.pages_on_demand, 1),
            Ok(_) | Err(_) => {
                c.add(&c.eexist, 1);
                self.wake(page, 1);
            }
        }
    }

    /// Fault-around: fills the window's other missing pages that the
    /// source has without blocking, in contiguous claimed runs.
    fn fault_around(&self, page: usize, scratch: &mut [u8]) {
        let start = page & !(self.window_pages - 1);
        let end = (start + self.window_pages).min(self.source_pages);
        let mut i = start;
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

    /// Applies a `REMOVE` event read with ticket `ticket`.
    fn on_remove(&self, start: usize, end: usize, ticket: u64) {
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

    /// Serves a batch of messages read with `ticket`; true if it held a
    /// doorbell (this handler then exits).
    fn serve(&self, idx: usize, ticket: u64, bytes: &[u8], scratch: &mut [u8]) -> bool {
        let msgs: Vec<Msg> = bytes.chunks_exact(MSG_SIZE).map(Msg::parse).collect();
        for m in &msgs {
            if let Msg::Remove { start, end } = *m {
                self.on_remove(start, end, ticket);
            }
        }
        let mut exit = false;
        for m in &msgs {
            let Msg::PageFault { address, tid, .. } = *m else {
                continue;
            };
            let (db, db_len) = self.doorbell;
            if address >= db && address < db + db_len {
                // Shutdown (BlockingRead): leave the count before the wake
                // below, which the toucher waits for and then reads `alive`
                // (the kernel's wake orders the two).
                self.alive.fetch_sub(1, Ordering::AcqRel);
                let _ = self.uffd.zeropage(address & !(self.page - 1), self.page);
                exit = true;
                continue;
            }
            if address < self.base || address >= self.base + self.len {
                continue;
            }
            let t0 = Instant::now();
            let c = &self.counters;
            c.add(&c.faults, 1);
            self.per_handler[idx].fetch_add(1, Ordering::Relaxed);
            let page = (address - self.base) / self.page;
            if tid != 0 {
                if let Some(h) = self
                    .handler_tids
                    .iter()
                    .position(|t| t.load(Ordering::Acquire) == tid)
                {
                    c.add(&c.handler_self_faults, 1);
                    self.report(PagerError::HandlerTouchedRegion {
                        handler: h,
                        offset: address - self.base,
                    });
                }
            }
            // A panic here is a bug in the pager (a source's panics are
            // caught where it is called): the fault is still answered, the
            // claims were given back by their guards, and the handler goes
            // on serving.
            let served = catch_unwind(AssertUnwindSafe(|| {
                self.on_fault(page, scratch);
                c.record_latency(t0.elapsed());
                if self.window_pages > 1 && page < self.source_pages {
                    self.fault_around(page, scratch);
                }
            }));
            if served.is_err() {
                self.report(PagerError::HandlerPanicked(idx));
                self.answer_after_panic(page);
            }
        }
        exit
    }
}

/// A handler thread's buffers, allocated before it starts (so that a
/// failure is an error of the builder, not an abort in the thread).
pub(crate) struct Buffers {
    msgs: Vec<u8>,
    scratch: Vec<u8>,
}

impl Buffers {
    /// Buffers for a handler serving windows of `window_pages` pages.
    pub(crate) fn new(window_pages: usize, page: usize) -> Result<Self, PagerError> {
        let zeroed = |len: usize| -> Result<Vec<u8>, PagerError> {
            let mut v = Vec::new();
            v.try_reserve_exact(len).map_err(|_| {
                PagerError::syscall(
                    "allocating a handler's buffers",
                    std::io::Error::from(std::io::ErrorKind::OutOfMemory),
                )
            })?;
            v.resize(len, 0);
            Ok(v)
        };
        Ok(Buffers {
            msgs: zeroed(MSG_SIZE * BATCH)?,
            scratch: zeroed(window_pages * page)?,
        })
    }
}

/// A handler thread's body: serve until stopped.
pub(crate) fn run(sh: &Shared, idx: usize, mode: HandlerMode, bufs: Buffers) {
    let result = catch_unwind(AssertUnwindSafe(|| serve_loop(sh, idx, mode, bufs)));
    if result.is_err() {
        sh.report(PagerError::HandlerPanicked(idx));
        sh.alive.fetch_sub(1, Ordering::AcqRel);
    }
}

fn serve_loop(sh: &Shared, idx: usize, mode: HandlerMode, bufs: Buffers) {
    let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
    sh.handler_tids[idx].store(tid, Ordering::Release);
    let Buffers {
        mut msgs,
        mut scratch,
    } = bufs;
    let mut stopping = false;
    loop {
        if mode == HandlerMode::Poll && !stopping {
            let mut fds = [
                PollFd::new(&sh.uffd, PollFlags::IN),
                PollFd::new(&sh.stop, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => {
                    sh.report(PagerError::syscall("poll", e));
                    break;
                }
            }
            // Stop: serve what is still queued (non-blocking), then leave.
            stopping = fds[1].revents().contains(PollFlags::IN);
        }
        // (T): pairs with the stamps (S); see the module doc.
        let ticket = sh.reads.fetch_add(1, Ordering::AcqRel) + 1;
        let n = match sh.uffd.read(&mut msgs) {
            Ok(n) => {
                sh.busy.fetch_add(1, Ordering::AcqRel);
                n
            }
            Err(e) if e.raw_os_error() == Some(Errno::INTR.raw_os_error()) => continue,
            // Poll mode: another handler took the messages (or none left
            // while stopping).
            Err(e) if e.raw_os_error() == Some(Errno::AGAIN.raw_os_error()) => {
                if stopping {
                    break;
                }
                continue;
            }
            Err(e) => {
                sh.report(PagerError::syscall("read(userfaultfd)", e));
                break;
            }
        };
        let exit = sh.serve(idx, ticket, &msgs[..n], &mut scratch);
        sh.busy.fetch_sub(1, Ordering::Release);
        if exit {
            return; // `alive` already counted down at the doorbell
        }
    }
    sh.alive.fetch_sub(1, Ordering::AcqRel);
}

/// The feature bits the pager asks for.
pub(crate) fn wanted_features(minor: bool) -> u64 {
    let mut f =
        uapi::UFFD_FEATURE_EVENT_REMOVE | uapi::UFFD_FEATURE_THREAD_ID | uapi::UFFD_FEATURE_POISON;
    if minor {
        f |= uapi::UFFD_FEATURE_MINOR_SHMEM;
    }
    u64::from(f)
}
