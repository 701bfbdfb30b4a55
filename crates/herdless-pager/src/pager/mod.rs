//! [`Pager`] and its builder: the region, its userfaultfd registration, the
//! handler threads and the zapper, and an orderly shutdown.
//!
//! # Drop while threads are faulting: refused
//! Every access to the region goes through a borrow of the `Pager`
//! ([`Pager::read`], [`Pager::as_ptr`] whose pointer must not outlive the
//! borrow, or an `Arc<Pager>`), so in safe code the pager cannot be dropped
//! while a thread is faulting on it: the last owner drops it after its own
//! accesses. `Drop` then stops the zapper (which may still need the
//! handlers to read its `REMOVE` events), then the handlers: `Poll`
//! handlers through the eventfd (they serve what is still queued first),
//! `BlockingRead` handlers, whose blocked `read` nothing can cancel, by
//! touching one *doorbell* page per handler (a separate registered mapping):
//! each touch raises one fault, which wakes one reader, which answers it and
//! leaves. Then the userfaultfd is closed and the memory unmapped.
//!
//! Files, one job each: `builder.rs` (the options and `build`),
//! `config.rs` (checks), `register.rs` (userfaultfd, region, doorbell),
//! `fault_path.rs` (the handler threads and what they share: also what
//! `herdless-uffd` builds), `threads.rs` (the zapper), `mapping.rs`; this file: the
//! [`Pager`] a user holds, and its shutdown.

mod builder;
pub(crate) mod config;
pub(crate) mod fault_path;
mod mapping;
mod register;
mod threads;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use rustix::mm::Advice;

pub use builder::PagerBuilder;
use mapping::Mapping;

use crate::handler::{Ask, Shared};
use crate::stats::PagerStats;
use crate::PagerError;

/// Default fault-around window of a [`Pager`]: 64 KiB, the kernel's
/// `fault_around_bytes`, so that a region served from a file behaves like
/// the file's own mapping would (the neighbours the page cache holds come
/// with the faulting page).
///
/// `herdless-uffd` defaults to one page instead (fault-around off,
/// `restore::RestoreOptions::new`), deliberately: it replaces Firecracker's
/// `on_demand_handler`, which serves one page per fault; a recording
/// restore must fault on every page of the working set to record it; and
/// every neighbour it copies into a VM is guest memory the host must back
/// and a balloon reclaim even if the guest never reads it (the lab's
/// `restore`: a 64 KiB window copies 71.4 MiB for a 25.6 MiB working set).
///
/// ```
/// assert_eq!(herdless_pager::DEFAULT_FAULT_AROUND, 64 << 10);
/// ```
pub const DEFAULT_FAULT_AROUND: usize = 64 << 10;

/// The largest fault-around window: 2 MiB, one page table of 4 KiB pages,
/// the kernel's own cap on `fault_around_bytes`. A window larger than the
/// region is served as the region (rounded up to a power of two).
///
/// # Examples
/// A larger window is refused before anything is mapped:
/// ```
/// use herdless_pager::{Pager, PagerError, MAX_FAULT_AROUND};
/// let e = Pager::builder(1 << 20).fault_around(2 * MAX_FAULT_AROUND).build();
/// assert!(matches!(e, Err(PagerError::WindowTooLarge { max: MAX_FAULT_AROUND, .. })));
/// ```
pub const MAX_FAULT_AROUND: usize = 2 << 20;

/// The most handler threads a pager starts. They all wait on one
/// userfaultfd; past a few per CPU they only contend.
///
/// # Examples
/// More are refused before anything is mapped:
/// ```
/// use herdless_pager::{Pager, PagerError, MAX_HANDLERS};
/// let e = Pager::builder(1 << 20).handlers(MAX_HANDLERS + 1).build();
/// assert!(matches!(e, Err(PagerError::TooManyHandlers { max: MAX_HANDLERS, .. })));
/// ```
pub const MAX_HANDLERS: usize = 1024;

/// How handler threads wait for faults (seed 000).
///
/// # Examples
/// ```
/// use herdless_pager::{HandlerMode, Pager, PagerError};
/// let pager = match Pager::builder(1 << 20).mode(HandlerMode::Poll).handlers(2).build() {
///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
///     built => built?,
/// };
/// let mut byte = [1u8];
/// pager.read(4096, &mut byte)?; // a fault, served by one of the two pollers
/// assert_eq!(byte, [0]);
/// # Ok::<(), PagerError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HandlerMode {
    /// Block in `read()`: the kernel wakes one reader per message
    /// (exclusive wakeups, the seed's "after").
    #[default]
    BlockingRead,
    /// `poll()` on the userfaultfd and the stop eventfd, then a
    /// non-blocking `read()`: every poller is woken (the seed's "poll"
    /// bounces).
    Poll,
}

/// A region of memory filled on demand from a [`PageSource`](crate::PageSource) by handler
/// threads, with fault-around. See the crate documentation.
///
/// Built with [`Pager::builder`]; read through [`read`](Self::read) or the
/// pointer [`as_ptr`](Self::as_ptr); dropped once nothing touches it
/// (module doc of `pager/mod.rs`: the handlers are stopped and joined, the
/// region unmapped).
///
/// # Examples
/// A megabyte served from bytes in memory, with a 64 KiB fault-around
/// window; where this process may not use userfaultfd (not root,
/// `vm.unprivileged_userfaultfd=0`) building says so, and the example
/// stops there:
/// ```
/// use herdless_pager::{MemSource, Pager, PagerError};
/// let bytes: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
/// let built = Pager::builder(1 << 20)
///     .source(MemSource::new(bytes.clone()))
///     .fault_around(64 << 10)
///     .build();
/// let pager = match built {
///     Err(e @ PagerError::UserfaultfdUnavailable { .. }) => {
///         eprintln!("skipped: {e}");
///         return Ok(());
///     }
///     built => built?,
/// };
/// let mut buf = [0u8; 100];
/// pager.read(70_000, &mut buf)?; // one fault fills the window holding it
/// assert_eq!(buf[..], bytes[70_000..70_100]);
/// assert_eq!(pager.stats().faults, 1);
/// # Ok::<(), PagerError>(())
/// ```
pub struct Pager {
    shared: Arc<Shared>,
    handlers: Vec<JoinHandle<()>>,
    zapper: Option<JoinHandle<()>>,
    mode: HandlerMode,
    // Dropped after `shared` would be fine too: the handlers are joined
    // first. Field order: region last.
    doorbell: Option<Mapping>,
    region: Mapping,
}

impl Pager {
    /// A builder for a region of `len` bytes (a multiple of the page size;
    /// checked by [`build`](PagerBuilder::build)): zeros, a 64 KiB
    /// fault-around window, one blocking handler, until its options say
    /// otherwise.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{HandlerMode, Pager, PagerError, ZeroSource};
    /// let built = Pager::builder(1 << 20)
    ///     .source(ZeroSource::new(1 << 20))
    ///     .fault_around(4096) // one page: fault-around off
    ///     .handlers(2)
    ///     .mode(HandlerMode::BlockingRead)
    ///     .build();
    /// let pager = match built {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// assert_eq!(pager.fault_around_bytes(), 4096);
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn builder(len: usize) -> PagerBuilder {
        PagerBuilder {
            len,
            source: None,
            window: DEFAULT_FAULT_AROUND,
            handlers: 1,
            mode: HandlerMode::default(),
            user_mode_only: false,
            minor: false,
            require_full_source: false,
        }
    }

    /// The region's first byte. Reads and writes through it are served by
    /// the pager; the pointer must not be used after the pager is dropped.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{MemSource, Pager, PagerError};
    /// let pager = match Pager::builder(1 << 20).source(MemSource::new(vec![7u8; 1 << 20])).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// let p = pager.as_ptr();
    /// // SAFETY: inside the region, which `pager` keeps mapped; no Rust
    /// // reference to it exists.
    /// let first = unsafe { p.read_volatile() }; // faults; served from the source
    /// unsafe { p.add(1).write_volatile(9) }; // a write faults the same way
    /// assert_eq!((first, unsafe { p.add(1).read_volatile() }), (7, 9));
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn as_ptr(&self) -> *mut u8 {
        self.region.ptr
    }

    /// The region's length in bytes.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{Pager, PagerError};
    /// let pager = match Pager::builder(1 << 20).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// assert_eq!(pager.len(), 1 << 20);
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn len(&self) -> usize {
        self.region.len
    }

    /// Always false: a pager serves at least one page.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{Pager, PagerError};
    /// let pager = match Pager::builder(1 << 20).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// assert!(!pager.is_empty());
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The page size.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{Pager, PagerError};
    /// let pager = match Pager::builder(1 << 20).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// assert_eq!(pager.page_size(), rustix::param::page_size());
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn page_size(&self) -> usize {
        self.shared.page
    }

    /// The fault-around window in bytes.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{Pager, PagerError};
    /// let pager = match Pager::builder(1 << 20).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// assert_eq!(pager.fault_around_bytes(), herdless_pager::DEFAULT_FAULT_AROUND);
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn fault_around_bytes(&self) -> usize {
        self.shared.window_pages * self.shared.page
    }

    /// Whether the pager runs in minor-fault mode.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{Pager, PagerError};
    /// let pager = match Pager::builder(1 << 20).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// assert!(!pager.is_minor()); // not asked for (PagerBuilder::minor_faults)
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn is_minor(&self) -> bool {
        self.shared.minor
    }

    fn check_range(&self, offset: usize, len: usize, aligned: bool) -> Result<(), PagerError> {
        let page = self.shared.page;
        let inside = offset
            .checked_add(len)
            .is_some_and(|end| end <= self.region.len);
        if !inside || (aligned && (!offset.is_multiple_of(page) || !len.is_multiple_of(page))) {
            return Err(PagerError::BadRange {
                offset,
                len,
                region_len: self.region.len,
            });
        }
        Ok(())
    }

    /// Copies `buf.len()` bytes of the region from `offset` into `buf`,
    /// faulting pages in as needed. Must not be called from a `PageSource`.
    ///
    /// # Errors
    /// [`PagerError::BadRange`] if `offset..offset + buf.len()` is not
    /// inside the region. (A page the source failed to read is poisoned:
    /// the copy then raises `SIGBUS`, as reading a failed `mmap`ed file
    /// would.)
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{MemSource, Pager, PagerError};
    /// let src = MemSource::new(b"hello, pager".to_vec()); // shorter than the region
    /// let pager = match Pager::builder(1 << 20).source(src).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// let mut buf = [0xffu8; 14];
    /// pager.read(0, &mut buf)?;
    /// assert_eq!(&buf, b"hello, pager\0\0"); // zeros past the source's end
    /// assert!(matches!(pager.read(1 << 20, &mut buf), Err(PagerError::BadRange { .. })));
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> Result<(), PagerError> {
        self.check_range(offset, buf.len(), false)?;
        // SAFETY: the range is inside the mapping, which lives as long as
        // `self`; the region is never handed out as a Rust reference, so
        // copying from it aliases nothing (missing pages fault and are
        // served by the handlers).
        unsafe {
            std::ptr::copy_nonoverlapping(self.region.ptr.add(offset), buf.as_mut_ptr(), buf.len())
        };
        Ok(())
    }

    /// Discards `[offset, offset + len)` (page-aligned) with
    /// `MADV_DONTNEED`: it reads as zeros afterwards (in minor mode, as the
    /// file's current bytes) and fault-around never brings it back.
    ///
    /// # Errors
    /// [`PagerError::BadRange`] if the range is not page-aligned inside the
    /// region; [`PagerError::Syscall`] if `madvise` fails.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{MemSource, Pager, PagerError};
    /// let pager = match Pager::builder(1 << 20).source(MemSource::new(vec![5u8; 1 << 20])).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// let page = pager.page_size();
    /// let mut b = [0u8];
    /// pager.read(0, &mut b)?;
    /// assert_eq!(b, [5]);
    /// pager.discard(0, page)?;
    /// pager.settle();
    /// pager.read(0, &mut b)?;
    /// assert_eq!(b, [0]); // discarded: zeros, never the source again
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn discard(&self, offset: usize, len: usize) -> Result<(), PagerError> {
        self.check_range(offset, len, true)?;
        if len == 0 {
            return Ok(()); // no event would be raised
        }
        // SAFETY: the range is inside our mapping; no Rust reference to the
        // region exists, so dropping its pages invalidates nothing.
        unsafe {
            rustix::mm::madvise(
                self.region.ptr.add(offset).cast(),
                len,
                Advice::LinuxDontNeed,
            )
        }
        .map_err(|e| PagerError::syscall("madvise(MADV_DONTNEED)", e))?;
        // madvise returned: a handler has read the event (see `settle`).
        self.shared
            .counters
            .discards_requested
            .fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Fills the missing pages of `[offset, offset + len)` (page-aligned)
    /// from the calling thread, as a background copier would (post-copy
    /// migration), racing the handlers safely; returns the pages it filled.
    /// Pages a fault or an earlier call filled, or a discard took, are
    /// skipped.
    ///
    /// # Errors
    /// [`PagerError::BadRange`] if the range is not page-aligned inside the
    /// region. (A page the source fails to read is poisoned, as its fault
    /// would have it, and the error reported to
    /// [`take_errors`](Self::take_errors).)
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{MemSource, Pager, PagerError};
    /// let pager = match Pager::builder(1 << 20).source(MemSource::new(vec![3u8; 1 << 20])).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// let pages = (pager.len() / pager.page_size()) as u64;
    /// assert_eq!(pager.populate(0, pager.len())?, pages);
    /// let mut b = [0u8];
    /// pager.read(12345, &mut b)?; // there already: no fault
    /// assert_eq!((b[0], pager.stats().faults), (3, 0));
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn populate(&self, offset: usize, len: usize) -> Result<u64, PagerError> {
        self.check_range(offset, len, true)?;
        let sh = &*self.shared;
        let run_max = sh.window_pages.max(16);
        let mut scratch = vec![0u8; run_max * sh.page];
        let before = sh.counters.snapshot(&[]).pages_populated;
        let p0 = offset / sh.page;
        let p1 = ((offset + len) / sh.page).min(sh.space.source_end(0));
        if p0 < p1 {
            // A pending event defers a run: its pages are left to the
            // faults (the handlers read the event).
            sh.fill_pages(p0..p1, Ask::Blocking, run_max, &mut scratch, || false);
        }
        let after = sh.counters.snapshot(&[]).pages_populated;
        Ok(after.saturating_sub(before))
    }

    /// Waits until every discard made through [`Pager::discard`] so far has
    /// been fully applied by the handlers, including the re-zaps of pages a
    /// racing fill may have resurrected (see `handler/discard.rs`). Call it once the
    /// threads that fault and discard are done: every discarded page then
    /// reads as zeros. It only waits on handlers, which never wait on it.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{Pager, PagerError};
    /// let pager = match Pager::builder(1 << 20).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// let mut b = [0u8];
    /// pager.read(0, &mut b)?;
    /// pager.discard(0, pager.page_size())?;
    /// pager.settle(); // the discard applied: the figures are final
    /// assert_eq!(pager.stats().pages_discarded, 1);
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn settle(&self) {
        let c = &self.shared.counters;
        loop {
            // Each counter is raised after the work it counts (Release), so
            // reading it with Acquire sees that work done.
            let done = c.rezap_ranges_done.load(Ordering::Acquire);
            let sent = c.rezap_ranges_sent.load(Ordering::Acquire);
            let applied = c.removes_applied.load(Ordering::Acquire);
            let asked = c.discards_requested.load(Ordering::Acquire);
            let idle = self.shared.busy.load(Ordering::Acquire) == 0;
            // Every discard and every re-zap raised one REMOVE event.
            if sent == done && applied >= asked + done && idle {
                // A batch that was still running may have queued a re-zap
                // after `sent` was read: look again once more.
                if c.rezap_ranges_sent.load(Ordering::Acquire) == sent {
                    return;
                }
            }
            std::thread::yield_now();
        }
    }

    /// The counters so far. A handler counts a fill after the ioctl that
    /// woke the faulting thread, so while handlers run this is a little
    /// behind; after [`Pager::settle`], once the faulting threads are done,
    /// it is exact.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{Pager, PagerError};
    /// let pager = match Pager::builder(1 << 20).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// let mut b = [0u8; 10];
    /// pager.read(0, &mut b)?;
    /// pager.settle();
    /// let s = pager.stats();
    /// assert_eq!(s.faults, 1);
    /// assert!(s.pages_installed() + s.zero_pages >= 1); // the window's pages
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn stats(&self) -> PagerStats {
        self.shared.counters.snapshot(&self.shared.per_handler)
    }

    /// Takes the errors handlers have reported so far (source read
    /// failures, a handler touching the region, failed system calls).
    ///
    /// # Examples
    /// A source that fails past its first page: filling the second page
    /// poisons it (an access there would raise `SIGBUS`, as reading a
    /// failed `mmap`ed file does) and reports the error here.
    /// ```
    /// use herdless_pager::{PageSource, Pager, PagerError};
    /// struct Flaky;
    /// impl PageSource for Flaky {
    ///     fn len(&self) -> u64 { 1 << 20 }
    ///     fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    ///         if offset < 4096 { buf.fill(1); Ok(()) } else { Err(std::io::Error::other("disk gone")) }
    ///     }
    /// }
    /// let pager = match Pager::builder(1 << 20).source(Flaky).fault_around(4096).build() {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// let mut b = [0u8];
    /// pager.read(0, &mut b)?; // page 0 reads fine
    /// assert_eq!(b, [1]);
    /// assert!(pager.take_errors().is_empty());
    /// let page = pager.page_size();
    /// assert_eq!(pager.populate(page, page)?, 0);
    /// let errors = pager.take_errors();
    /// assert!(matches!(errors[..], [PagerError::SourceRead { .. }]), "{errors:?}");
    /// assert!(pager.take_errors().is_empty()); // taken
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn take_errors(&self) -> Vec<PagerError> {
        self.shared
            .errors
            .lock()
            .map(|mut e| std::mem::take(&mut *e))
            .unwrap_or_default()
    }
}

impl Drop for Pager {
    fn drop(&mut self) {
        // 1. The zapper: its madvise calls need live handlers.
        self.shared.fence.close();
        if let Some(z) = self.zapper.take() {
            let _ = z.join();
        }
        // 2. The handlers.
        match self.mode {
            HandlerMode::Poll => {
                self.shared.stop_all(false);
            }
            HandlerMode::BlockingRead => {
                if let Some(d) = &self.doorbell {
                    let page = self.shared.page;
                    let mut k = 0;
                    // Each touch is answered by one handler, which counted
                    // itself out of `alive` before answering (Acquire pairs
                    // with its AcqRel decrement, ordered by the kernel wake).
                    while self.shared.alive.load(Ordering::Acquire) > 0 && k * page < d.len {
                        // SAFETY: page `k` of the doorbell mapping, alive
                        // until this Drop returns; a volatile read so the
                        // access (and its fault) happens.
                        unsafe { std::ptr::read_volatile(d.ptr.add(k * page)) };
                        k += 1;
                    }
                }
            }
        }
        for h in self.handlers.drain(..) {
            let _ = h.join();
        }
        // 3. Fields drop next: the userfaultfd closes with the last `Arc`
        // (handlers and zapper are joined), then the mappings unmap.
    }
}
