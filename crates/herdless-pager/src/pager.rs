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

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

use linux_raw_sys::general as uapi;
use rustix::mm::{Advice, MapFlags, ProtFlags};

use crate::handler::{self, Ask, Buffers, ClaimGuard, Shared};
use crate::page_state::PageStates;
use crate::source::{GuardedSource, PageSource, ZeroSource};
use crate::stats::{Counters, PagerStats};
use crate::uffd::{self, Uffd};
use crate::PagerError;

/// Default fault-around window: 64 KiB, the kernel's `fault_around_bytes`.
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

/// Builds a [`Pager`]; see [`Pager::builder`].
pub struct PagerBuilder {
    len: usize,
    source: Option<Box<dyn PageSource>>,
    window: usize,
    handlers: usize,
    mode: HandlerMode,
    user_mode_only: bool,
    minor: bool,
    require_full_source: bool,
}

impl PagerBuilder {
    /// The bytes to serve (default: zeros).
    pub fn source(mut self, source: impl PageSource) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The fault-around window in bytes: a power of two, at least a page
    /// (one page turns fault-around off), at most [`MAX_FAULT_AROUND`].
    /// Default [`DEFAULT_FAULT_AROUND`].
    pub fn fault_around(mut self, bytes: usize) -> Self {
        self.window = bytes;
        self
    }

    /// Handler threads (default 1, at most [`MAX_HANDLERS`]). A source that may touch the region
    /// ([`PageSource::may_touch_region`], true for sources other than the
    /// built-in ones) gets at least two, so that a handler touching the
    /// region is served by the other and reported rather than deadlocked.
    pub fn handlers(mut self, n: usize) -> Self {
        self.handlers = n;
        self
    }

    /// How handlers wait (default [`HandlerMode::BlockingRead`]).
    pub fn mode(mut self, mode: HandlerMode) -> Self {
        self.mode = mode;
        self
    }

    /// Open the userfaultfd with `UFFD_USER_MODE_ONLY`, which unprivileged
    /// processes may do (Linux 5.11+). Only user-space accesses fault then:
    /// a system call that writes into a missing page gets `EFAULT`.
    pub fn user_mode_only(mut self, on: bool) -> Self {
        self.user_mode_only = on;
        self
    }

    /// Minor-fault mode: map the source's shared memory (memfd or tmpfs
    /// file) and answer faults with `UFFDIO_CONTINUE` over the window
    /// (zero-copy). A discard there re-reads the file, as for any shared
    /// mapping.
    pub fn minor_faults(mut self, on: bool) -> Self {
        self.minor = on;
        self
    }

    /// Refuse a source shorter than the region
    /// ([`PagerError::SourceShorterThanRegion`]) instead of reading zeros
    /// past its end.
    pub fn require_full_source(mut self, on: bool) -> Self {
        self.require_full_source = on;
        self
    }

    /// Validates, maps and registers the region and starts the handlers.
    pub fn build(mut self) -> Result<Pager, PagerError> {
        let page = rustix::param::page_size();
        let len = self.len;
        if len == 0 {
            return Err(PagerError::ZeroLength);
        }
        if len % page != 0 {
            return Err(PagerError::LengthNotPageMultiple { len, page });
        }
        if !self.window.is_power_of_two() {
            return Err(PagerError::WindowNotPowerOfTwo {
                window: self.window,
            });
        }
        if self.window < page {
            return Err(PagerError::WindowTooSmall {
                window: self.window,
                page,
            });
        }
        if self.window > MAX_FAULT_AROUND {
            return Err(PagerError::WindowTooLarge {
                window: self.window,
                max: MAX_FAULT_AROUND,
            });
        }
        if self.handlers == 0 {
            return Err(PagerError::NoHandlers);
        }
        if self.handlers > MAX_HANDLERS {
            return Err(PagerError::TooManyHandlers {
                asked: self.handlers,
                max: MAX_HANDLERS,
            });
        }
        let source = GuardedSource::new(
            self.source
                .unwrap_or_else(|| Box::new(ZeroSource::new(len as u64))),
        )?;
        if self.handlers == 1 && source.may_touch_region() {
            self.handlers = 2;
        }
        let source_len = source.len();
        if (self.require_full_source || self.minor) && source_len < len as u64 {
            return Err(PagerError::SourceShorterThanRegion {
                source_len,
                region_len: len,
            });
        }
        if self.minor && source.shared_memory().is_none() {
            return Err(PagerError::MinorNeedsSharedMemory);
        }

        let uffd = Uffd::open(
            self.mode == HandlerMode::Poll,
            self.user_mode_only,
            handler::wanted_features(self.minor),
        )
        .map_err(|e| {
            if uffd::is_refusal(&e) {
                PagerError::UserfaultfdUnavailable { source: e }
            } else {
                PagerError::syscall("userfaultfd API handshake", e)
            }
        })?;
        let need = |bit: u32, feature, needed_for| {
            if uffd.features & u64::from(bit) == 0 {
                Err(PagerError::FeatureUnsupported {
                    feature,
                    needed_for,
                })
            } else {
                Ok(())
            }
        };
        need(
            uapi::UFFD_FEATURE_EVENT_REMOVE,
            "UFFD_FEATURE_EVENT_REMOVE",
            "discard handling",
        )?;
        if self.minor {
            need(
                uapi::UFFD_FEATURE_MINOR_SHMEM,
                "UFFD_FEATURE_MINOR_SHMEM",
                "minor-fault mode",
            )?;
        }

        let region = if self.minor {
            let fd = source
                .shared_memory()
                .ok_or(PagerError::MinorNeedsSharedMemory)?;
            Mapping::shared(fd, len)?
        } else {
            Mapping::anonymous(len)?
        };
        let mode = if self.minor {
            uapi::UFFDIO_REGISTER_MODE_MINOR
        } else {
            uapi::UFFDIO_REGISTER_MODE_MISSING
        };
        let ioctls = uffd
            .register(region.addr(), len, u64::from(mode))
            .map_err(|e| PagerError::syscall("UFFDIO_REGISTER", e))?;
        let has = |nr: u32| ioctls & (1u64 << nr) != 0;
        if self.minor && !has(uapi::_UFFDIO_CONTINUE) {
            return Err(PagerError::FeatureUnsupported {
                feature: "UFFDIO_CONTINUE",
                needed_for: "minor-fault mode",
            });
        }
        let can_poison = !self.minor
            && uffd.features & u64::from(uapi::UFFD_FEATURE_POISON) != 0
            && has(uapi::_UFFDIO_POISON);

        let doorbell = if self.mode == HandlerMode::BlockingRead {
            let d = Mapping::anonymous(self.handlers * page)?;
            uffd.register(
                d.addr(),
                d.len,
                u64::from(uapi::UFFDIO_REGISTER_MODE_MISSING),
            )
            .map_err(|e| PagerError::syscall("UFFDIO_REGISTER (doorbell)", e))?;
            Some(d)
        } else {
            None
        };
        let stop = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .map_err(|e| PagerError::syscall("eventfd", e))?;

        let pages = len / page;
        let source_pages = usize::try_from(source_len.div_ceil(page as u64))
            .unwrap_or(usize::MAX)
            .min(pages);
        let (tx, rx) = mpsc::channel::<(usize, usize)>();
        let shared = Arc::new(Shared {
            uffd,
            base: region.addr(),
            len,
            page,
            // A window past the region would only size buffers.
            window_pages: (self.window / page).min(pages.next_power_of_two()),
            source,
            source_len,
            source_pages,
            states: PageStates::new(pages),
            minor: self.minor,
            can_poison,
            counters: Counters::default(),
            per_handler: (0..self.handlers).map(|_| AtomicU64::new(0)).collect(),
            reads: AtomicU64::new(0),
            rezap: Mutex::new(Some(tx)),
            errors: Mutex::new(Vec::new()),
            handler_tids: (0..self.handlers).map(|_| AtomicU32::new(0)).collect(),
            alive: AtomicUsize::new(self.handlers),
            busy: AtomicUsize::new(0),
            doorbell: doorbell.as_ref().map_or((0, 0), |d| (d.addr(), d.len)),
            stop,
        });

        // From here on, `Pager`'s Drop cleans up whatever was started.
        let mut pager = Pager {
            shared,
            handlers: Vec::with_capacity(self.handlers),
            zapper: None,
            mode: self.mode,
            region,
            doorbell,
        };
        let base = pager.region.addr();
        let zsh = Arc::clone(&pager.shared);
        pager.zapper = Some(
            std::thread::Builder::new()
                .name("pager-zapper".into())
                .spawn(move || {
                    for (off, len) in rx {
                        // SAFETY: `off..off + len` lies in the region, which
                        // stays mapped until this thread is joined (Drop).
                        let r = unsafe {
                            rustix::mm::madvise((base + off) as *mut _, len, Advice::LinuxDontNeed)
                        };
                        // After the madvise (which returned once a handler
                        // read its REMOVE): pairs with `settle`'s Acquire.
                        zsh.counters
                            .rezap_ranges_done
                            .fetch_add(1, Ordering::Release);
                        if let Err(e) = r {
                            zsh.errors
                                .lock()
                                .map(|mut v| v.push(PagerError::syscall("madvise (re-zap)", e)))
                                .ok();
                        }
                    }
                })
                .map_err(|source| PagerError::ThreadSpawn {
                    what: "the zapper thread",
                    started: 0,
                    source,
                })?,
        );
        let window_pages = pager.shared.window_pages;
        let mut buffers = Vec::with_capacity(self.handlers);
        for _ in 0..self.handlers {
            match Buffers::new(window_pages, page) {
                Ok(b) => buffers.push(b),
                Err(e) => {
                    pager.shared.alive.store(0, Ordering::Release);
                    return Err(e);
                }
            }
        }
        for (i, bufs) in buffers.into_iter().enumerate() {
            let sh = Arc::clone(&pager.shared);
            let mode = self.mode;
            let spawned = std::thread::Builder::new()
                .name(format!("pager-handler-{i}"))
                .spawn(move || handler::run(&sh, i, mode, bufs));
            match spawned {
                Ok(h) => pager.handlers.push(h),
                Err(source) => {
                    // Those never started will not count themselves down;
                    // dropping `pager` stops the zapper and the `i` handlers
                    // started, and unmaps everything.
                    pager
                        .shared
                        .alive
                        .fetch_sub(self.handlers - i, Ordering::AcqRel);
                    return Err(PagerError::ThreadSpawn {
                        what: "a handler thread",
                        started: i + 1, // the zapper and `i` handlers
                        source,
                    });
                }
            }
        }
        Ok(pager)
    }
}

/// A memory mapping owned by the pager.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a `Mapping` is an address range; the pager synchronises every
// access to the memory itself (through the kernel), and unmapping happens
// once, in Drop.
unsafe impl Send for Mapping {}
// SAFETY: as for Send: `&Mapping` only hands out the address.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn anonymous(len: usize) -> Result<Self, PagerError> {
        // SAFETY: a fresh anonymous mapping at an address of the kernel's
        // choosing aliases nothing.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        }
        .map_err(|e| PagerError::syscall("mmap (region)", e))?;
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    fn shared(fd: std::os::fd::BorrowedFd<'_>, len: usize) -> Result<Self, PagerError> {
        // SAFETY: a fresh shared mapping of the source file at an address of
        // the kernel's choosing aliases no Rust object.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd.as_fd(),
                0,
            )
        }
        .map_err(|e| PagerError::syscall("mmap (shared source)", e))?;
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    fn addr(&self) -> usize {
        self.ptr as usize
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr..ptr + len` is our mapping, unmapped once, after
        // every thread that used it has been joined (Pager's Drop).
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}

/// A region of memory filled on demand from a [`PageSource`] by handler
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
        if !inside || (aligned && (offset % page != 0 || len % page != 0)) {
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
        let before = self.shared.counters.snapshot(&[]).pages_populated;
        let (p0, p1) = (
            offset / sh.page,
            ((offset + len) / sh.page).min(sh.source_pages),
        );
        let mut i = p0;
        while i < p1 {
            if !sh.states.claim(i) {
                i += 1;
                continue;
            }
            let first = i;
            i += 1;
            while i < p1 && i - first < run_max && sh.states.claim(i) {
                i += 1;
            }
            let _guard = ClaimGuard::new(sh, first, i - first);
            sh.fill_run(first, i - first, Ask::Blocking, &mut scratch);
        }
        let after = self.shared.counters.snapshot(&[]).pages_populated;
        Ok(after.saturating_sub(before))
    }

    /// Waits until every discard made through [`Pager::discard`] so far has
    /// been fully applied by the handlers, including the re-zaps of pages a
    /// racing fill may have resurrected (see `handler.rs`). Call it once the
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
        if let Ok(mut tx) = self.shared.rezap.lock() {
            tx.take();
        }
        if let Some(z) = self.zapper.take() {
            let _ = z.join();
        }
        // 2. The handlers.
        match self.mode {
            HandlerMode::Poll => {
                let _ = rustix::io::write(&self.shared.stop, &1u64.to_ne_bytes());
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
