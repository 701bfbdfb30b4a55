//! The handler threads (seed 000) and the fault path with fault-around
//! (seed 002).
//!
//! # One fault
//! A handler reads every pending message in one `read` (the kernel hands
//! over up to a buffer's worth), applies the `REMOVE` events first, then
//! serves each fault:
//! 1. the faulting page first: claimed `MISSING → INSTALLING`, read from the
//!    source (blocking), filled with one `UFFDIO_COPY` that wakes the
//!    faulting thread;
//! 2. then fault-around: the aligned window around it (like the kernel's
//!    `do_fault_around`), clipped to the source, in contiguous runs of pages
//!    this thread could claim and the source has without blocking
//!    (`read_nowait`), one `UFFDIO_COPY` per run.
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
use crate::source::PageSource;
use crate::stats::Counters;
use crate::uffd::{Fill, Msg, Uffd, MSG_SIZE};
use crate::{HandlerMode, PagerError};

/// Messages read per `read` call.
const BATCH: usize = 64;

/// Why pages are filled (for the statistics).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    Demand,
    FaultAround,
    Populate,
}

/// How the source is asked.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// Block if need be (the faulting page, `populate`).
    Blocking,
    /// Only what is available without blocking (fault-around).
    NoWait,
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
    pub(crate) source: Box<dyn PageSource>,
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

    /// Marks `n` filled pages from `first` `PRESENT`, stamped (S).
    fn publish(&self, first: usize, n: usize, cause: Cause) {
        let c = &self.counters;
        c.add(
            match cause {
                Cause::Demand => &c.pages_on_demand,
                Cause::FaultAround => &c.pages_fault_around,
                Cause::Populate => &c.pages_populated,
            },
            n as u64,
        );
        // (S): pairs with the ticket (T) of every handler's next read.
        let stamp = self.reads.fetch_add(0, Ordering::AcqRel);
        let mut lost: Option<(usize, usize)> = None;
        for p in first..first + n {
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

    /// Fills the claimed pages `[first, first + n)` from the source (all
    /// below `source_pages`), asking it as `ask`; wakes whatever it does not
    /// fill. `scratch` holds at least `n` pages.
    pub(crate) fn fill_run(
        &self,
        first: usize,
        n: usize,
        ask: Ask,
        cause: Cause,
        scratch: &mut [u8],
    ) {
        if self.minor {
            return self.continue_run(first, n, cause);
        }
        let off = first * self.page;
        let bytes = n * self.page;
        let avail = usize::try_from(self.source_len - off as u64).map_or(bytes, |a| a.min(bytes));
        let buf = &mut scratch[..bytes];
        let got = match ask {
            Ask::Blocking => match self.source.read_at(off as u64, &mut buf[..avail]) {
                Ok(()) => avail,
                Err(e) => return self.source_failed(first, n, off as u64, e),
            },
            // A neighbour the source cannot give is simply not taken; the
            // demand path reports errors.
            Ask::NoWait => self
                .source
                .read_nowait(off as u64, &mut buf[..avail])
                .unwrap_or(0),
        };
        let ready = if got >= avail { n } else { got / self.page };
        if ready < n {
            self.release_and_wake(first + ready, n - ready);
        }
        if ready == 0 {
            return;
        }
        // The part of the last page past the source's end reads zeros.
        buf[avail.min(ready * self.page)..ready * self.page].fill(0);
        self.copy_run(first, ready, cause, buf);
    }

    /// One `UFFDIO_COPY` per run, advancing over partial copies.
    fn copy_run(&self, first: usize, n: usize, cause: Cause, buf: &[u8]) {
        let c = &self.counters;
        let mut done = 0;
        while done < n {
            let src = &buf[done * self.page..n * self.page];
            // SAFETY: `src` is our own scratch memory, readable for its length.
            let r = unsafe {
                self.uffd
                    .copy(self.page_addr(first + done), src.as_ptr(), src.len())
            };
            match r {
                Ok(Fill::Done) => {
                    self.publish(first + done, n - done, cause);
                    done = n;
                }
                Ok(Fill::Partial(b)) => {
                    c.add(&c.eagain_partial, 1);
                    let k = b / self.page;
                    self.publish(first + done, k, cause);
                    done += k;
                }
                Ok(Fill::Exists) => {
                    // Present already (e.g. a poisoned page): skip and wake it.
                    c.add(&c.eexist, 1);
                    self.release_and_wake(first + done, 1);
                    done += 1;
                }
                Ok(Fill::Retry) => {
                    // A discard event is pending: defer (W).
                    c.add(&c.eagain_retry, 1);
                    return self.release_and_wake(first + done, n - done);
                }
                Err(e) => {
                    self.report(PagerError::syscall("UFFDIO_COPY", e));
                    return self.release_and_wake(first + done, n - done);
                }
            }
        }
    }

    /// Minor mode: map the page-cache pages of the run (`UFFDIO_CONTINUE`).
    fn continue_run(&self, first: usize, n: usize, cause: Cause) {
        let c = &self.counters;
        let mut done = 0;
        while done < n {
            let len = (n - done) * self.page;
            match self.uffd.continue_(self.page_addr(first + done), len) {
                Ok(Fill::Done) => {
                    self.publish(first + done, n - done, cause);
                    done = n;
                }
                Ok(Fill::Partial(b)) => {
                    c.add(&c.eagain_partial, 1);
                    let k = b / self.page;
                    self.publish(first + done, k, cause);
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
                    if cause == Cause::Demand {
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
    fn source_failed(&self, first: usize, n: usize, offset: u64, e: std::io::Error) {
        let c = &self.counters;
        c.add(&c.source_errors, 1);
        self.report(PagerError::SourceRead { offset, source: e });
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
                        return self.fill_run(page, 1, Ask::Blocking, Cause::Demand, scratch);
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
            self.fill_run(first, i - first, Ask::NoWait, Cause::FaultAround, scratch);
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
            self.on_fault(page, scratch);
            c.record_latency(t0.elapsed());
            if self.window_pages > 1 && page < self.source_pages {
                self.fault_around(page, scratch);
            }
        }
        exit
    }
}

/// A handler thread's body: serve until stopped.
pub(crate) fn run(sh: &Shared, idx: usize, mode: HandlerMode) {
    let result = catch_unwind(AssertUnwindSafe(|| serve_loop(sh, idx, mode)));
    if result.is_err() {
        sh.report(PagerError::HandlerPanicked(idx));
        sh.alive.fetch_sub(1, Ordering::AcqRel);
    }
}

fn serve_loop(sh: &Shared, idx: usize, mode: HandlerMode) {
    let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
    sh.handler_tids[idx].store(tid, Ordering::Release);
    let mut msgs = vec![0u8; MSG_SIZE * BATCH];
    let mut scratch = vec![0u8; sh.window_pages * sh.page];
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
