//! One fault path, two owners (issue 26 §5): a [`Pager`](super::Pager)
//! serving a region of its own process and `herdless-uffd` serving a VMM's
//! guest memory both build their handler threads here: the window and
//! handler count checked (`config.rs`), the state the handlers share set
//! up (`handler/mod.rs`), then the threads started. What differs between
//! the two is passed in, not rebuilt: the userfaultfd and the regions
//! (registered by [`PagerBuilder`](super::PagerBuilder), handed over by the
//! VMM), how handlers wait ([`HandlerMode`]), how fills are kept from
//! resurrecting discarded pages ([`DiscardFence`]: a re-zap in one's own
//! memory, reads exclusive of fills in another process's), and what a
//! restore adds (the working-set record, a prefetch plan).
//!
//! Building is two steps because both owners act in between: the pager
//! makes the [`Pager`](super::Pager) that will stop whatever was started,
//! and starts its zapper; `herdless-uffd` copies everything first where
//! asked (before any fault is served) and starts its prefetch threads.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::{config, HandlerMode};
use crate::handler::{self, Buffers, DiscardFence, Plan, Shared, SharedParts};
use crate::source::GuardedSource;
use crate::space::Space;
use crate::uffd::Uffd;
use crate::PagerError;

/// The options of a fault path; [`prepare`](Self::prepare) sets it up.
pub(crate) struct FaultPath {
    uffd: Uffd,
    space: Space,
    source: GuardedSource,
    fence: DiscardFence,
    window: usize,
    handlers: usize,
    mode: HandlerMode,
    minor: bool,
    can_poison: bool,
    doorbell: (usize, usize),
    record: bool,
    plan: Option<Plan>,
}

impl FaultPath {
    /// Serving `space` through `uffd` from `source`, fenced by `fence`;
    /// defaults: fault-around off (one page), one handler, blocking reads,
    /// missing-fault mode, poison tried, no doorbell, no record, no plan.
    pub(crate) fn new(
        uffd: Uffd,
        space: Space,
        source: GuardedSource,
        fence: DiscardFence,
    ) -> Self {
        FaultPath {
            uffd,
            space,
            source,
            fence,
            window: rustix::param::page_size(),
            handlers: 1,
            mode: HandlerMode::BlockingRead,
            minor: false,
            can_poison: true,
            doorbell: (0, 0),
            record: false,
            plan: None,
        }
    }

    /// The fault-around window in bytes.
    pub(crate) fn window(mut self, bytes: usize) -> Self {
        self.window = bytes;
        self
    }

    /// Handler threads.
    pub(crate) fn handlers(mut self, n: usize) -> Self {
        self.handlers = n;
        self
    }

    /// How handlers wait.
    pub(crate) fn mode(mut self, mode: HandlerMode) -> Self {
        self.mode = mode;
        self
    }

    /// Minor-fault mode (`UFFDIO_CONTINUE`).
    pub(crate) fn minor(mut self, on: bool) -> Self {
        self.minor = on;
        self
    }

    /// Whether `UFFDIO_POISON` is worth trying (turned off if refused).
    pub(crate) fn can_poison(mut self, on: bool) -> Self {
        self.can_poison = on;
        self
    }

    /// The doorbell pages a `BlockingRead` shutdown touches.
    pub(crate) fn doorbell(mut self, start: usize, len: usize) -> Self {
        self.doorbell = (start, len);
        self
    }

    /// Keep the working-set record (the pages faulted on, in order).
    pub(crate) fn record(mut self, on: bool) -> Self {
        self.record = on;
        self
    }

    /// The working set to prefetch (and to fill ahead along).
    pub(crate) fn plan(mut self, plan: Option<Plan>) -> Self {
        self.plan = plan;
        self
    }

    /// Checks the window and handler count and sets up the state the
    /// handlers will share; no thread is started yet.
    ///
    /// # Errors
    /// A window or handler count out of range, or no eventfd.
    pub(crate) fn prepare(self) -> Result<Prepared, PagerError> {
        let page = rustix::param::page_size();
        config::check_window(self.window, page)?;
        config::check_handlers(self.handlers)?;
        let window_pages = config::window_pages(self.window, page, self.space.pages());
        let shared = Arc::new(Shared::new(SharedParts {
            uffd: self.uffd,
            space: self.space,
            window_pages,
            source: self.source,
            minor: self.minor,
            can_poison: self.can_poison,
            fence: self.fence,
            handlers: self.handlers,
            doorbell: self.doorbell,
            record: self.record,
            plan: self.plan,
        })?);
        Ok(Prepared {
            shared,
            mode: self.mode,
        })
    }
}

/// A fault path set up, its handlers not started yet.
pub(crate) struct Prepared {
    /// The state the handlers (and the owner, and any copier) share.
    pub(crate) shared: Arc<Shared>,
    mode: HandlerMode,
}

impl Prepared {
    /// Starts one handler thread per handler, pushing each onto
    /// `handles`. Buffers are allocated first, so that a lack of memory is
    /// an error here and not an abort in a thread. On failure the handlers
    /// never started are counted out of `shared.alive`; those started are
    /// in `handles`, for the owner's shutdown to stop and join. `already`
    /// counts threads the owner started before (for the message).
    ///
    /// # Errors
    /// [`PagerError::ThreadSpawn`], or no memory for the buffers.
    pub(crate) fn start(
        &self,
        handles: &mut Vec<JoinHandle<()>>,
        already: usize,
    ) -> Result<(), PagerError> {
        use std::sync::atomic::Ordering;
        let shared = &self.shared;
        let n = shared.per_handler.len();
        let mut buffers = Vec::with_capacity(n);
        for _ in 0..n {
            match Buffers::new(shared.scratch_bytes()) {
                Ok(b) => buffers.push(b),
                Err(e) => {
                    shared.alive.fetch_sub(n, Ordering::AcqRel);
                    return Err(e);
                }
            }
        }
        for (i, bufs) in buffers.into_iter().enumerate() {
            let sh = Arc::clone(shared);
            let mode = self.mode;
            let spawned = std::thread::Builder::new()
                .name(format!("pager-handler-{i}"))
                .spawn(move || handler::run(&sh, i, mode, bufs));
            match spawned {
                Ok(h) => handles.push(h),
                Err(source) => {
                    // Those never started will not count themselves down.
                    shared.alive.fetch_sub(n - i, Ordering::AcqRel);
                    return Err(PagerError::ThreadSpawn {
                        what: "a handler thread",
                        started: already + i,
                        source,
                    });
                }
            }
        }
        Ok(())
    }
}
