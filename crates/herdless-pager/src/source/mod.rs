//! Where the pager's pages come from.
//!
//! A [`PageSource`] answers two questions, as the page cache does for the
//! kernel's fault path in seed 002: *read this range, blocking if you must*
//! (the faulting page) and *give me this range only if you have it without
//! blocking* (`fault_nonblock`, for the neighbours fault-around maps).

mod file;
mod file_map;
mod guarded;
mod mem;
#[cfg(feature = "object-store")]
pub mod object;
mod zero;

use std::io;
use std::os::fd::BorrowedFd;

pub use file::FileSource;
pub(crate) use guarded::{GuardedSource, SourceFailure};
pub use mem::MemSource;
pub use zero::ZeroSource;

/// The bytes behind a pager's region. Byte `i` of the region is byte `i` of
/// the source; past [`len`](PageSource::len) the region reads zeros.
pub trait PageSource: Send + Sync + 'static {
    /// Bytes in the source.
    fn len(&self) -> u64;

    /// Whether the source is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` from `offset`, blocking if need be. The pager only asks
    /// for ranges inside `0..len()`. A short read is an error.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// Fills a prefix of `buf` from `offset` with what is available without
    /// blocking and returns its length (0: nothing is). The default says
    /// everything is (memory-like sources).
    fn read_nowait(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.read_at(offset, buf)?;
        Ok(buf.len())
    }

    /// The shared-memory file (memfd or tmpfs) holding the bytes at offset 0,
    /// if any: what minor-fault mode maps.
    fn shared_memory(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// The address of byte 0 of the source in this process's memory, if the
    /// source lives there ([`MemSource`]'s bytes, a [`FileSource`]'s
    /// read-only mapping): the pager then hands the kernel the source's own
    /// bytes (`UFFDIO_COPY` from here), one copy instead of a read into a
    /// buffer and a copy out of it. The address must stay valid for
    /// [`len`](PageSource::len) bytes while the source lives.
    ///
    /// The pager never reads through this address itself, so it is not an
    /// `unsafe` promise: the kernel checks it (`EFAULT`, upon which the
    /// pager falls back to [`read_at`](PageSource::read_at), which reports
    /// the real error, e.g. a file truncated under the pager).
    fn memory(&self) -> Option<*const u8> {
        None
    }

    /// Whether reading this source (or copying from its
    /// [`memory`](PageSource::memory)) may touch the pager's own region.
    /// A handler that touches the region faults on it and waits for a
    /// handler to serve that fault: with a single handler, nobody would.
    /// For a source that may, the pager therefore runs at least two
    /// handlers, so the touch is served by the other one and reported
    /// ([`PagerError::HandlerTouchedRegion`](crate::PagerError)) instead of
    /// deadlocking. The default is the cautious `true`; the built-in
    /// sources, which read a file or their own bytes, say `false`.
    fn may_touch_region(&self) -> bool {
        true
    }

    /// Blocks until `[offset, offset + len)` can be read without waiting
    /// (or reading it would fail at once). The pager calls it before it
    /// takes the locks a fill holds (a fill of another process's memory
    /// keeps the handlers from reading the userfaultfd while it runs), so
    /// that a source that may wait long, such as an object store, holds up
    /// only the fault that waits for it. The default does nothing: a
    /// file's or memory's reads are short.
    fn wait_ready(&self, offset: u64, len: usize) {
        let _ = (offset, len);
    }

    /// With [`memory`](PageSource::memory): how many bytes from `offset`
    /// (page-aligned, at most `len`) can be copied from it without blocking
    /// (a file's pages in the page cache). The default says all of them.
    fn resident(&self, offset: u64, len: usize) -> usize {
        let _ = offset;
        len
    }
}

/// A shared source is a source: one [`Arc`](std::sync::Arc) for the pager
/// and clones for whoever else reads it (every method is the inner
/// source's own, [`memory`](PageSource::memory) included).
///
/// ```
/// use std::sync::Arc;
/// use herdless_pager::{MemSource, PageSource};
/// let shared: Arc<dyn PageSource> = Arc::new(MemSource::new(vec![5u8; 8192]));
/// let for_the_pager: Box<dyn PageSource> = Box::new(Arc::clone(&shared));
/// let mut b = [0u8; 2];
/// for_the_pager.read_at(100, &mut b)?;
/// assert_eq!((b, shared.len()), ([5, 5], 8192));
/// # Ok::<(), std::io::Error>(())
/// ```
impl<S: PageSource + ?Sized> PageSource for std::sync::Arc<S> {
    fn len(&self) -> u64 {
        (**self).len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        (**self).read_at(offset, buf)
    }
    fn read_nowait(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        (**self).read_nowait(offset, buf)
    }
    fn shared_memory(&self) -> Option<BorrowedFd<'_>> {
        (**self).shared_memory()
    }
    fn memory(&self) -> Option<*const u8> {
        (**self).memory()
    }
    fn may_touch_region(&self) -> bool {
        (**self).may_touch_region()
    }
    fn wait_ready(&self, offset: u64, len: usize) {
        (**self).wait_ready(offset, len);
    }
    fn resident(&self, offset: u64, len: usize) -> usize {
        (**self).resident(offset, len)
    }
}
