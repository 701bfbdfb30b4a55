//! [`PagerBuilder`]: the pager's options, and `build`, which checks them
//! (`config.rs`), registers the region (`register.rs`), builds the fault
//! path over it (`fault_path.rs`, as `herdless-uffd` does over a VMM's
//! regions) and starts the zapper (`threads.rs`).

use std::sync::{mpsc, Arc};

use super::fault_path::FaultPath;
use super::{config, register, threads, HandlerMode, Pager};
use crate::handler::DiscardFence;
use crate::source::{GuardedSource, PageSource, ZeroSource};
use crate::space::{Space, Span};
use crate::PagerError;

/// Builds a [`Pager`]; see [`Pager::builder`]. Each option is checked by
/// [`build`](Self::build), which refuses a bad one before anything is
/// mapped.
///
/// # Examples
/// ```
/// use herdless_pager::{HandlerMode, MemSource, Pager, PagerError};
/// let built = Pager::builder(2 << 20)
///     .source(MemSource::new(vec![1u8; 2 << 20]))
///     .fault_around(256 << 10)
///     .handlers(4)
///     .mode(HandlerMode::Poll)
///     .require_full_source(true)
///     .build();
/// let pager = match built {
///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
///     built => built?,
/// };
/// assert_eq!(pager.fault_around_bytes(), 256 << 10);
/// # Ok::<(), PagerError>(())
/// ```
pub struct PagerBuilder {
    pub(super) len: usize,
    pub(super) source: Option<Box<dyn PageSource>>,
    pub(super) window: usize,
    pub(super) handlers: usize,
    pub(super) mode: HandlerMode,
    pub(super) user_mode_only: bool,
    pub(super) minor: bool,
    pub(super) require_full_source: bool,
}

impl PagerBuilder {
    /// The bytes to serve (default: zeros). A source shorter than the
    /// region reads zeros past its end (unless
    /// [`require_full_source`](Self::require_full_source)).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{FileSource, Pager, PagerError};
    /// let path = std::env::temp_dir().join(format!("pager-source-{}", std::process::id()));
    /// std::fs::write(&path, b"from the file")?;
    /// let built = Pager::builder(1 << 20).source(FileSource::open(&path)?).build();
    /// std::fs::remove_file(&path)?; // the source keeps it open
    /// let pager = match built {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// let mut buf = [0u8; 13];
    /// pager.read(0, &mut buf)?;
    /// assert_eq!(&buf, b"from the file");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn source(mut self, source: impl PageSource) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The fault-around window in bytes: a power of two, at least a page
    /// (one page turns fault-around off), at most [`MAX_FAULT_AROUND`](crate::MAX_FAULT_AROUND).
    /// Default [`DEFAULT_FAULT_AROUND`](crate::DEFAULT_FAULT_AROUND).
    ///
    /// # Examples
    /// A fault fills the aligned window holding it, where the source has
    /// the bytes without blocking (here: all of them, in memory):
    /// ```
    /// use herdless_pager::{MemSource, Pager, PagerError};
    /// let built = Pager::builder(1 << 20)
    ///     .source(MemSource::new(vec![2u8; 1 << 20]))
    ///     .fault_around(128 << 10)
    ///     .build();
    /// let pager = match built {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// let mut b = [0u8];
    /// pager.read(0, &mut b)?;
    /// pager.settle();
    /// let s = pager.stats();
    /// assert_eq!(s.faults, 1);
    /// assert_eq!(s.pages_on_demand + s.pages_fault_around, ((128 << 10) / pager.page_size()) as u64);
    /// // Not a power of two: refused.
    /// let e = Pager::builder(1 << 20).fault_around(3000).build();
    /// assert!(matches!(e, Err(PagerError::WindowNotPowerOfTwo { window: 3000 })));
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn fault_around(mut self, bytes: usize) -> Self {
        self.window = bytes;
        self
    }

    /// Handler threads (default 1, at most [`MAX_HANDLERS`](crate::MAX_HANDLERS)). A source that may touch the region
    /// ([`PageSource::may_touch_region`], true for sources other than the
    /// built-in ones) gets at least two, so that a handler touching the
    /// region is served by the other and reported rather than deadlocked.
    ///
    /// # Examples
    /// Eight threads faulting on one region, served by four handlers:
    /// ```
    /// use herdless_pager::{MemSource, Pager, PagerError};
    /// let built = Pager::builder(1 << 20)
    ///     .source(MemSource::new(vec![4u8; 1 << 20]))
    ///     .fault_around(4096)
    ///     .handlers(4)
    ///     .build();
    /// let pager = match built {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// std::thread::scope(|s| {
    ///     for t in 0..8 {
    ///         let pager = &pager;
    ///         s.spawn(move || {
    ///             let mut b = [0u8];
    ///             pager.read(t * (64 << 10), &mut b).unwrap();
    ///             assert_eq!(b, [4]);
    ///         });
    ///     }
    /// });
    /// pager.settle();
    /// let per_handler = pager.stats().per_handler_faults;
    /// assert_eq!((per_handler.len(), per_handler.iter().sum::<u64>()), (4, 8));
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn handlers(mut self, n: usize) -> Self {
        self.handlers = n;
        self
    }

    /// How handlers wait (default [`HandlerMode::BlockingRead`]).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{HandlerMode, Pager, PagerError};
    /// let built = Pager::builder(1 << 20).mode(HandlerMode::Poll).build();
    /// let pager = match built {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// let mut b = [9u8];
    /// pager.read(0, &mut b)?;
    /// assert_eq!(b, [0]);
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn mode(mut self, mode: HandlerMode) -> Self {
        self.mode = mode;
        self
    }

    /// Open the userfaultfd with `UFFD_USER_MODE_ONLY`, which unprivileged
    /// processes may do (Linux 5.11+). Only user-space accesses fault then:
    /// a system call that writes into a missing page gets `EFAULT`.
    ///
    /// # Examples
    /// What an ordinary user can build where `vm.unprivileged_userfaultfd`
    /// is 0 (a kernel before 5.11 refuses it too: then skip):
    /// ```
    /// use herdless_pager::{MemSource, Pager, PagerError};
    /// let built = Pager::builder(1 << 20)
    ///     .source(MemSource::new(vec![6u8; 1 << 20]))
    ///     .user_mode_only(true)
    ///     .build();
    /// let pager = match built {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// let mut b = [0u8];
    /// pager.read(100, &mut b)?; // a copy in user space: it faults
    /// assert_eq!(b, [6]);
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn user_mode_only(mut self, on: bool) -> Self {
        self.user_mode_only = on;
        self
    }

    /// Minor-fault mode: map the source's shared memory (memfd or tmpfs
    /// file) and answer faults with `UFFDIO_CONTINUE` over the window
    /// (zero-copy). A discard there re-reads the file, as for any shared
    /// mapping.
    ///
    /// # Examples
    /// The source must live in shared memory (a memfd here, or a tmpfs
    /// file opened for writing); a kernel without minor faults on shmem
    /// (before 5.14) says so, and the example skips:
    /// ```
    /// use std::io::Write;
    /// use herdless_pager::{FileSource, MemSource, Pager, PagerError};
    /// let page = rustix::param::page_size();
    /// let fd = rustix::fs::memfd_create("guest", rustix::fs::MemfdFlags::CLOEXEC)?;
    /// let mut file = std::fs::File::from(fd);
    /// file.write_all(&vec![8u8; 16 * page])?;
    /// let built = Pager::builder(16 * page)
    ///     .source(FileSource::from_file(file, "memfd")?)
    ///     .minor_faults(true)
    ///     .build();
    /// let pager = match built {
    ///     Err(PagerError::UserfaultfdUnavailable { .. } | PagerError::FeatureUnsupported { .. }) => {
    ///         return Ok(()) // not here: skip
    ///     }
    ///     built => built?,
    /// };
    /// assert!(pager.is_minor());
    /// let mut b = [0u8];
    /// pager.read(3 * page, &mut b)?; // the file's page, mapped, not copied
    /// assert_eq!(b, [8]);
    /// // Bytes in this process's memory cannot be mapped: refused.
    /// let e = Pager::builder(16 * page).source(MemSource::new(vec![0u8; 16 * page])).minor_faults(true).build();
    /// assert!(matches!(e, Err(PagerError::MinorNeedsSharedMemory)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn minor_faults(mut self, on: bool) -> Self {
        self.minor = on;
        self
    }

    /// Refuse a source shorter than the region
    /// ([`PagerError::SourceShorterThanRegion`]) instead of reading zeros
    /// past its end.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{MemSource, Pager, PagerError};
    /// let short = MemSource::new(vec![1u8; 1000]);
    /// let e = Pager::builder(1 << 20).source(short).require_full_source(true).build();
    /// assert!(matches!(e, Err(PagerError::SourceShorterThanRegion { source_len: 1000, .. })));
    /// ```
    pub fn require_full_source(mut self, on: bool) -> Self {
        self.require_full_source = on;
        self
    }

    /// Validates, maps and registers the region and starts the handlers.
    ///
    /// # Errors
    /// Each option is checked before anything is mapped:
    /// [`PagerError::ZeroLength`], [`PagerError::LengthNotPageMultiple`],
    /// the window's ([`PagerError::WindowNotPowerOfTwo`],
    /// [`PagerError::WindowTooSmall`], [`PagerError::WindowTooLarge`]), the
    /// handlers' ([`PagerError::NoHandlers`],
    /// [`PagerError::TooManyHandlers`]), the source's
    /// ([`PagerError::SourceShorterThanRegion`],
    /// [`PagerError::MinorNeedsSharedMemory`], or
    /// [`PagerError::SourcePanicked`] if its `len` panics). Then the
    /// system's: [`PagerError::UserfaultfdUnavailable`] (this process may
    /// not use userfaultfd: the message lists the ways to allow it),
    /// [`PagerError::FeatureUnsupported`] (the kernel lacks what minor
    /// faults or the handler mode need), [`PagerError::Syscall`] (mapping
    /// or registering failed), [`PagerError::ThreadSpawn`] (a thread was
    /// refused; whatever had started is stopped again).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::{Pager, PagerError};
    /// assert!(matches!(Pager::builder(0).build(), Err(PagerError::ZeroLength)));
    /// assert!(matches!(
    ///     Pager::builder(1000).build(),
    ///     Err(PagerError::LengthNotPageMultiple { len: 1000, .. })
    /// ));
    /// let built = Pager::builder(1 << 20).build();
    /// let pager = match built {
    ///     Err(PagerError::UserfaultfdUnavailable { .. }) => return Ok(()), // not here: skip
    ///     built => built?,
    /// };
    /// assert_eq!(pager.len(), 1 << 20);
    /// # Ok::<(), PagerError>(())
    /// ```
    pub fn build(mut self) -> Result<Pager, PagerError> {
        let page = rustix::param::page_size();
        let len = self.len;
        config::check_length(len, page)?;
        config::check_window(self.window, page)?;
        config::check_handlers(self.handlers)?;
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

        let uffd = register::open(self.mode, self.user_mode_only, self.minor)?;
        let reg =
            register::map_and_register(uffd, len, &source, self.minor, self.mode, self.handlers)?;
        let (tx, rx) = mpsc::channel::<(usize, usize)>();
        let space = Space::new(
            vec![Span {
                base: reg.region.addr(),
                len,
                source_offset: 0,
                page,
            }],
            source.len(),
        );
        let (bell, bell_len) = reg.doorbell.as_ref().map_or((0, 0), |d| (d.addr(), d.len));
        let path = FaultPath::new(reg.uffd, space, source, DiscardFence::rezap(tx))
            .window(self.window)
            .handlers(self.handlers)
            .mode(self.mode)
            .minor(self.minor)
            .can_poison(reg.can_poison)
            .doorbell(bell, bell_len)
            .prepare()?;

        // From here on, `Pager`'s Drop cleans up whatever was started.
        let mut pager = Pager {
            shared: Arc::clone(&path.shared),
            handlers: Vec::with_capacity(self.handlers),
            zapper: None,
            mode: self.mode,
            region: reg.region,
            doorbell: reg.doorbell,
        };
        pager.zapper = Some(threads::spawn_zapper(Arc::clone(&pager.shared), rx)?);
        path.start(&mut pager.handlers, 1)?;
        Ok(pager)
    }
}
