//! The pager's side of a [`PageSource`]: every call into the user's code
//! with its panic caught and turned into a failure the fault path answers
//! (poison or zeros, never a fault left waiting), and the source's length
//! and memory asked once, when the pager is built.

use std::any::Any;
use std::io;
use std::os::fd::BorrowedFd;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::PageSource;
use crate::PagerError;

/// Why a source could not give the bytes asked for.
#[derive(Debug)]
pub(crate) enum SourceFailure {
    /// It returned an error.
    Io(io::Error),
    /// It panicked, with this message.
    Panicked(String),
}

impl SourceFailure {
    /// The error the pager reports for a read at `offset` by `method`.
    pub(crate) fn into_error(self, method: &'static str, offset: u64) -> PagerError {
        match self {
            SourceFailure::Io(source) => PagerError::SourceRead { offset, source },
            SourceFailure::Panicked(message) => PagerError::SourcePanicked {
                method,
                offset,
                message,
            },
        }
    }
}

/// The message of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_string()
    }
}

/// Runs `f`, turning a panic into [`SourceFailure::Panicked`].
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, SourceFailure> {
    // Unwind safety: a source that panicked may be left in any state of its
    // own; the pager only takes the failure and never reads what `f` was
    // writing (the buffer is overwritten or discarded).
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| SourceFailure::Panicked(panic_message(&*p)))
}

/// A [`PageSource`] as the fault path uses it.
pub(crate) struct GuardedSource {
    inner: Box<dyn PageSource>,
    len: u64,
    /// [`PageSource::memory`], asked once (an address, kept as an integer:
    /// only the kernel reads through it).
    memory: Option<usize>,
    may_touch_region: bool,
}

impl GuardedSource {
    /// Asks `inner` for its length, memory and whether it may touch the
    /// region; a panic there is a typed error.
    pub(crate) fn new(inner: Box<dyn PageSource>) -> Result<Self, PagerError> {
        let ask = |method: &'static str, e: SourceFailure| e.into_error(method, 0);
        let len = guarded(|| inner.len()).map_err(|e| ask("len", e))?;
        let memory =
            guarded(|| inner.memory().map(|p| p as usize)).map_err(|e| ask("memory", e))?;
        let may_touch_region =
            guarded(|| inner.may_touch_region()).map_err(|e| ask("may_touch_region", e))?;
        Ok(GuardedSource {
            inner,
            len,
            memory,
            may_touch_region,
        })
    }

    /// Bytes in the source, as it said when the pager was built.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// See [`PageSource::memory`].
    pub(crate) fn memory(&self) -> Option<*const u8> {
        self.memory.map(|a| a as *const u8)
    }

    /// See [`PageSource::may_touch_region`].
    pub(crate) fn may_touch_region(&self) -> bool {
        self.may_touch_region
    }

    /// See [`PageSource::shared_memory`]; a panic means none.
    pub(crate) fn shared_memory(&self) -> Option<BorrowedFd<'_>> {
        guarded(|| self.inner.shared_memory()).ok().flatten()
    }

    /// See [`PageSource::read_at`].
    pub(crate) fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), SourceFailure> {
        guarded(|| self.inner.read_at(offset, buf))?.map_err(SourceFailure::Io)
    }

    /// See [`PageSource::read_nowait`]; the prefix length is clamped to
    /// `buf` (a source claiming more is not believed).
    pub(crate) fn read_nowait(&self, offset: u64, buf: &mut [u8]) -> Result<usize, SourceFailure> {
        let n = guarded(|| self.inner.read_nowait(offset, buf))?.map_err(SourceFailure::Io)?;
        Ok(n.min(buf.len()))
    }

    /// See [`PageSource::wait_ready`]; a panic is ignored (the read that
    /// follows reports the source's failure).
    pub(crate) fn wait_ready(&self, offset: u64, len: usize) {
        let _ = guarded(|| self.inner.wait_ready(offset, len));
    }

    /// See [`PageSource::memory_at`]; a panic means none.
    pub(crate) fn memory_at(&self, offset: u64, len: usize) -> Option<*const u8> {
        guarded(|| self.inner.memory_at(offset, len).map(|p| p as usize))
            .ok()
            .flatten()
            .map(|a| a as *const u8)
    }

    /// See [`PageSource::ready`]; a panic says yes (the read that follows
    /// reports the source's failure).
    pub(crate) fn ready(&self, offset: u64, len: usize) -> bool {
        guarded(|| self.inner.ready(offset, len)).unwrap_or(true)
    }

    /// See [`PageSource::arrivals`]; 0 on a panic.
    pub(crate) fn arrivals(&self) -> u64 {
        guarded(|| self.inner.arrivals()).unwrap_or(0)
    }

    /// See [`PageSource::wait_arrival`]; `seen` on a panic (the caller
    /// then reads what it wants, which reports the source's failure).
    pub(crate) fn wait_arrival(&self, seen: u64, patience: std::time::Duration) -> u64 {
        guarded(|| self.inner.wait_arrival(seen, patience)).unwrap_or(seen)
    }

    /// See [`PageSource::resident`]; clamped to `len`, 0 on a panic.
    pub(crate) fn resident(&self, offset: u64, len: usize) -> usize {
        guarded(|| self.inner.resident(offset, len)).map_or(0, |n| n.min(len))
    }
}
