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
pub const MAX_FAULT_AROUND: usize = 2 << 20;

/// The most handler threads a pager starts. They all wait on one
/// userfaultfd; past a few per CPU they only contend.
pub const MAX_HANDLERS: usize = 1024;

/// How handler threads wait for faults (seed 000).
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
    /// A builder for a region of `len` bytes (a multiple of the page size).
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
    pub fn as_ptr(&self) -> *mut u8 {
        self.region.ptr
    }

    /// The region's length in bytes.
    pub fn len(&self) -> usize {
        self.region.len
    }

    /// Always false: a pager serves at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The page size.
    pub fn page_size(&self) -> usize {
        self.shared.page
    }

    /// The fault-around window in bytes.
    pub fn fault_around_bytes(&self) -> usize {
        self.shared.window_pages * self.shared.page
    }

    /// Whether the pager runs in minor-fault mode.
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
    pub fn stats(&self) -> PagerStats {
        self.shared.counters.snapshot(&self.shared.per_handler)
    }

    /// Takes the errors handlers have reported so far (source read
    /// failures, a handler touching the region, failed system calls).
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
