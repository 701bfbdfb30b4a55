//! Filling a run of claimed pages from the source (seed 002's
//! `filemap_map_pages`): one `UFFDIO_COPY` per run, straight from the
//! source's memory where it has some, else through the handler's buffer;
//! and what happens to every page the run does not fill.
//!
//! # Invariant W: nobody is left asleep (ARCHITECTURE contract 10)
//! A fault message for a page in state `INSTALLING` is dropped as a
//! duplicate, so the claim's owner must wake the page whatever happens: a
//! successful fill wakes it (the ioctl does); every other outcome (`EEXIST`,
//! zero-progress `EAGAIN`, source not ready, error) ends with an explicit
//! `UFFDIO_WAKE` of every claimed page the owner did not fill, or a poison
//! that wakes. A woken thread whose page is still missing faults again: a
//! zero-progress `EAGAIN` (a `REMOVE` pending) thus *defers* the fault to
//! the next message, read after the pending event; it is never counted done.
//! A panic unwinding past a fill gives its claims back and wakes them
//! ([`ClaimGuard`](super::ClaimGuard)).

use rustix::io::Errno;

use super::Shared;
use crate::source::SourceFailure;
use crate::uffd::Fill;

/// How the source is asked for a run of claimed pages (and how the filled
/// pages are counted).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// Every page, blocking if need be (`populate`); a page the source
    /// fails on is poisoned, as for a fault.
    Blocking,
    /// Every page, blocking if need be, counted as prefetched (a working
    /// set installed in the background); a page the source fails on is
    /// left missing, for a fault to ask again and answer.
    Prefetch,
    /// The first page is the faulting one: blocking if need be, counted on
    /// demand; the others are its window's neighbours, taken only if the
    /// source has them without blocking, counted as fault-around.
    Demand,
    /// Only what the source has without blocking (fault-around).
    NoWait,
    /// Only what the source has without blocking, counted as prefetched:
    /// a handler filling ahead along the working set (`plan.rs`), which
    /// must not wait for a disk while faults queue.
    AheadNoWait,
}

/// How pages the source could not give were answered.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Unserved {
    /// Poisoned: an access gets `SIGBUS`.
    Poisoned,
    /// Mapped as zeros (no `UFFDIO_POISON`).
    Zeroed,
    /// Not filled (present already, an event pending, an error): the
    /// caller wakes them (W).
    NotAnswered,
}

/// How a run's `UFFDIO_COPY` ended.
pub(super) enum Copied {
    /// Every page filled, or skipped and woken (present already).
    Done,
    /// Stopped: the pages not filled were released and woken.
    Stopped,
    /// Stopped with zero progress by a pending event (a `REMOVE` not read
    /// yet): the pages not filled were released and woken; the run can be
    /// tried again once the events are read and applied.
    Deferred,
    /// The kernel could not read the source memory (`EFAULT`: a mapped file
    /// that shrank) from page `at` on: those pages are still claimed.
    SourceFault { at: usize },
}

impl Shared {
    /// Pages of a request for `len` bytes that an answer of `got` bytes
    /// covers: whole pages of `page` bytes, and the last partial one if
    /// `got` reached the end of the request (the source's end).
    pub(super) fn pages_of(got: usize, len: usize, page: usize) -> usize {
        if got >= len {
            len.div_ceil(page)
        } else {
            got / page
        }
    }

    /// Fills the claimed pages `[first, first + n)` (in one region, all
    /// holding source bytes) from the source, asking it as `ask`, with one `UFFDIO_COPY`
    /// for the pages it has (page `first` first: with [`Ask::Demand`] the
    /// faulting thread is woken by that one copy); wakes whatever it does
    /// not fill (W). `scratch` holds at least `n` pages.
    ///
    /// A source that lives in memory ([`PageSource::memory`](crate::PageSource::memory)) is copied
    /// from directly: one copy per page, none through `scratch`. Others, and
    /// a run holding the source's partial last page, are read into
    /// `scratch` in one read and copied from there.
    ///
    /// True if a pending event deferred part of the run (zero-progress
    /// `EAGAIN`: its unfilled pages are released, to be tried again once the
    /// events are read).
    pub(crate) fn fill_run(&self, first: usize, n: usize, ask: Ask, scratch: &mut [u8]) -> bool {
        if self.minor {
            self.continue_run(first, n, ask);
            return false;
        }
        let page = self.page_size(first);
        let off = self.space.source_offset(first);
        let bytes = n * page;
        let avail = self.available(off, bytes);
        let partial_end = avail < bytes || !avail.is_multiple_of(page);
        let Some(mem) = self.source.memory().filter(|_| !partial_end) else {
            // Bytes the source holds in memory for this run alone (an
            // object's chunk, a pack's part): copied from there, whole.
            return match self.source.memory_at(off, bytes).filter(|_| !partial_end) {
                Some(src) => self.copy_from(first, n, ask, src, scratch),
                None => self.fill_from_reads(first, n, ask, scratch),
            };
        };
        let ready = match ask {
            Ask::Blocking | Ask::Prefetch => n,
            Ask::Demand => 1 + self.source.resident(off + page as u64, bytes - page) / page,
            Ask::NoWait | Ask::AheadNoWait => self.source.resident(off, bytes) / page,
        };
        if ready < n {
            self.release_and_wake(first + ready, n - ready);
        }
        if ready == 0 {
            return false;
        }
        // The source's own bytes, handed to the kernel (never read here).
        self.copy_from(first, ready, ask, mem.wrapping_add(off as usize), scratch)
    }

    /// Copies the claimed pages `[first, first + n)` from the source's
    /// bytes at `src` (never read here); where the kernel cannot read them
    /// (`EFAULT`: a mapped file that shrank), reads the rest instead. True
    /// if a pending event deferred part of the run, as for `fill_run`.
    fn copy_from(
        &self,
        first: usize,
        n: usize,
        ask: Ask,
        src: *const u8,
        scratch: &mut [u8],
    ) -> bool {
        match self.copy_run(first, n, first, ask, src) {
            Copied::Done | Copied::Stopped => false,
            Copied::Deferred => true,
            Copied::SourceFault { at } => {
                // The mapping could not be read (a file that shrank): read
                // the rest instead, which reports the real error; the
                // faulting page, if still unfilled, is asked for blocking.
                let rest = if at == first {
                    ask
                } else if ask == Ask::Demand {
                    Ask::NoWait
                } else {
                    ask
                };
                self.fill_from_reads(at, first + n - at, rest, scratch)
            }
        }
    }

    /// [`fill_run`](Self::fill_run) through `scratch`: one read of the run
    /// (blocking for the pages that must be served, `read_nowait` for the
    /// rest), then one copy of the prefix the source gave. Where the source
    /// fails part-way (a file that shrank), the pages it gave are copied,
    /// the first page it could not give is poisoned if it must be served
    /// (the faulting page, or any page of a `populate`), and the rest are
    /// given back: never a page filled with anything but the source's
    /// bytes, and zeros only past the source's end in its last page. True
    /// if a pending event deferred part of the run, as for `fill_run`.
    pub(super) fn fill_from_reads(
        &self,
        first: usize,
        n: usize,
        ask: Ask,
        scratch: &mut [u8],
    ) -> bool {
        let page = self.page_size(first);
        let off = self.space.source_offset(first);
        let bytes = n * page;
        let avail = self.available(off, bytes);
        let buf = &mut scratch[..bytes];
        let (got, failure) = match ask {
            Ask::Blocking => self.read_prefix(off, &mut buf[..avail]),
            // A prefetch leaves what the source cannot give to the faults.
            Ask::Prefetch => (self.read_prefix(off, &mut buf[..avail]).0, None),
            // A neighbour the source cannot give is simply not taken; the
            // demand path reports errors.
            Ask::NoWait | Ask::AheadNoWait => (self.read_nowait(off, &mut buf[..avail]), None),
            Ask::Demand => {
                // One read for the whole run if the source has the faulting
                // page without blocking; else a blocking read of that page
                // and a non-blocking one of the rest.
                let head = avail.min(page);
                let got = self.read_nowait(off, &mut buf[..avail]);
                if got >= head {
                    (got, None)
                } else {
                    match self.read_prefix(off, &mut buf[..head]) {
                        (_, Some(f)) => (0, Some(f)),
                        (_, None) => {
                            let rest = self.read_nowait(off + head as u64, &mut buf[head..avail]);
                            (head + rest, None)
                        }
                    }
                }
            }
        };
        let ready = Self::pages_of(got, avail, page);
        if ready < n {
            // The page the source failed on, if it must be answered now.
            let failed = failure.map(|f| (first + ready, f));
            match failed {
                Some((p, f)) => {
                    if p + 1 < first + n {
                        self.release_and_wake(p + 1, first + n - p - 1);
                    }
                    self.source_failed(p, 1, self.space.source_offset(p), f);
                }
                None => self.release_and_wake(first + ready, n - ready),
            }
        }
        if ready == 0 {
            return false;
        }
        // The part of the last page past the source's end reads zeros.
        buf[avail.min(ready * page)..ready * page].fill(0);
        match self.copy_run(first, ready, first, ask, buf.as_ptr()) {
            Copied::Done | Copied::Stopped => false,
            Copied::Deferred => true,
            // Our own buffer is readable: an EFAULT here means the kernel
            // refused something else; nothing was filled from `at` on.
            Copied::SourceFault { at } => {
                self.ioctl_failed(
                    "UFFDIO_COPY",
                    std::io::Error::from_raw_os_error(Errno::FAULT.raw_os_error()),
                );
                self.release_and_wake(at, first + ready - at);
                false
            }
        }
    }

    /// Bytes of a `bytes`-long run from source offset `off` that the
    /// source holds (less than `bytes` in its last page).
    fn available(&self, off: u64, bytes: usize) -> usize {
        usize::try_from(self.source.len().saturating_sub(off)).map_or(bytes, |a| a.min(bytes))
    }

    /// A blocking read of `buf` from `offset`: the bytes read from the
    /// start, and why the source stopped short, if it did. A run that fails
    /// as a whole is read again page by page, so a failure past its first
    /// page keeps the pages before it.
    pub(super) fn read_prefix(
        &self,
        offset: u64,
        buf: &mut [u8],
    ) -> (usize, Option<SourceFailure>) {
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
    pub(super) fn read_nowait(&self, offset: u64, buf: &mut [u8]) -> usize {
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
    pub(super) fn copy_run(
        &self,
        at: usize,
        n: usize,
        first: usize,
        ask: Ask,
        src: *const u8,
    ) -> Copied {
        let c = &self.counters;
        let page = self.page_size(at);
        let mut done = 0;
        while done < n {
            let len = (n - done) * page;
            // SAFETY (of the call): `src` is either our scratch buffer or
            // the source's memory; the kernel reads it with copy_from_user,
            // which fails with EFAULT (handled below) rather than touching
            // anything it may not, and nothing in Rust aliases it mutably.
            let r = unsafe {
                self.uffd.copy(
                    self.page_addr(at + done),
                    src.wrapping_add(done * page),
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
                    let k = b / page;
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
                    return Copied::Deferred;
                }
                Err(e) if e.raw_os_error() == Some(Errno::FAULT.raw_os_error()) => {
                    return Copied::SourceFault { at: at + done };
                }
                Err(e) => {
                    self.ioctl_failed("UFFDIO_COPY", e);
                    self.release_and_wake(at + done, n - done);
                    return Copied::Stopped;
                }
            }
        }
        Copied::Done
    }

    /// Minor mode: map the page-cache pages of the run (`UFFDIO_CONTINUE`),
    /// page `first` first.
    pub(super) fn continue_run(&self, first: usize, n: usize, ask: Ask) {
        let c = &self.counters;
        let page = self.page_size(first);
        let mut done = 0;
        while done < n {
            let len = (n - done) * page;
            match self.uffd.continue_(self.page_addr(first + done), len) {
                Ok(Fill::Done) => {
                    self.publish(first + done, n - done, first, ask);
                    done = n;
                }
                Ok(Fill::Partial(b)) => {
                    c.add(&c.eagain_partial, 1);
                    let k = b / page;
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
                        Ask::NoWait | Ask::Prefetch | Ask::AheadNoWait => false,
                    };
                    if must {
                        self.ioctl_failed("UFFDIO_CONTINUE", e);
                    }
                    return self.release_and_wake(first + done, n - done);
                }
            }
        }
    }

    /// The source could not give the faulting page: poison it (the access
    /// gets `SIGBUS`, as a failed read of a mapped file does) or, without
    /// `UFFDIO_POISON`, map zeros; report the error either way.
    pub(super) fn source_failed(&self, first: usize, n: usize, offset: u64, f: SourceFailure) {
        let c = &self.counters;
        c.add(&c.source_errors, 1);
        self.report(f.into_error("read_at", offset));
        self.answer_unserved(first, n);
    }

    /// Answers the claimed pages `[first, first + n)`, which could not be
    /// filled from the source, with poison (zeros without `UFFDIO_POISON`),
    /// gives the claims back and wakes whatever was not filled (W).
    pub(super) fn answer_unserved(&self, first: usize, n: usize) {
        let c = &self.counters;
        let page = self.page_size(first);
        let answered = self.poison_or_zero(self.page_addr(first), n * page, page);
        if answered == Unserved::Poisoned {
            c.add(&c.poisoned_pages, n as u64);
        }
        // Claims go back (a later fault after a discard retries the
        // source); whatever was not filled is woken (W).
        for p in first..first + n {
            self.states.release(p);
        }
        if answered == Unserved::NotAnswered {
            self.wake(first, n);
        }
    }

    /// Poisons `[addr, addr + len)`, in pages of `page` bytes (an access
    /// gets `SIGBUS`), or maps zeros where the kernel has no
    /// `UFFDIO_POISON` (or refuses it on this userfaultfd: then it is never
    /// asked again).
    pub(super) fn poison_or_zero(&self, addr: usize, len: usize, page: usize) -> Unserved {
        use std::sync::atomic::Ordering::Relaxed;
        if self.can_poison.load(Relaxed) {
            match self.uffd.poison(addr, len) {
                Ok(Fill::Done) => return Unserved::Poisoned,
                Ok(_) => return Unserved::NotAnswered,
                Err(e) if Errno::from_io_error(&e) == Some(Errno::INVAL) => {
                    self.can_poison.store(false, Relaxed);
                }
                Err(e) => {
                    self.ioctl_failed("UFFDIO_POISON", e);
                    return Unserved::NotAnswered;
                }
            }
        }
        match self.zero_range(addr, len, page) {
            Ok(Fill::Done) => Unserved::Zeroed,
            Ok(_) => Unserved::NotAnswered,
            Err(e) => {
                self.ioctl_failed("UFFDIO_ZEROPAGE", e);
                Unserved::NotAnswered
            }
        }
    }

    /// Maps zeros at `[addr, addr + len)`, in pages of `page` bytes:
    /// `UFFDIO_ZEROPAGE` for host pages; for larger (hugetlbfs) pages,
    /// which it does not serve, a `UFFDIO_COPY` of [`Shared::zeros`] per
    /// page. `Done` only if every page was mapped; else the first page's
    /// outcome (the caller wakes what is left).
    pub(super) fn zero_range(&self, addr: usize, len: usize, page: usize) -> std::io::Result<Fill> {
        if page == self.page || self.zeros.len() < page {
            return self.uffd.zeropage(addr, len);
        }
        for at in (addr..addr + len).step_by(page) {
            // SAFETY: `zeros` is our own readable buffer of at least `page`
            // bytes, alive as long as `self`.
            match unsafe { self.uffd.copy(at, self.zeros.as_ptr(), page) }? {
                Fill::Done => {}
                other => return Ok(other),
            }
        }
        Ok(Fill::Done)
    }
}
