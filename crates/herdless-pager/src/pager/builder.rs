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

/// Builds a [`Pager`]; see [`Pager::builder`].
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
    /// The bytes to serve (default: zeros).
    pub fn source(mut self, source: impl PageSource) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// The fault-around window in bytes: a power of two, at least a page
    /// (one page turns fault-around off), at most [`MAX_FAULT_AROUND`](crate::MAX_FAULT_AROUND).
    /// Default [`DEFAULT_FAULT_AROUND`](crate::DEFAULT_FAULT_AROUND).
    pub fn fault_around(mut self, bytes: usize) -> Self {
        self.window = bytes;
        self
    }

    /// Handler threads (default 1, at most [`MAX_HANDLERS`](crate::MAX_HANDLERS)). A source that may touch the region
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
