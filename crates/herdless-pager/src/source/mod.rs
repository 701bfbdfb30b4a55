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
///
/// The built-in sources are [`FileSource`], [`MemSource`], [`ZeroSource`]
/// and, with the `object-store` feature, `object::ObjectSource`. A source of
/// your own needs only `len` and `read_at`; say `may_touch_region() ==
/// false` when reading it cannot touch the pager's region (it then runs
/// with a single handler if asked to).
///
/// ```
/// use std::io;
/// use herdless_pager::PageSource;
///
/// /// Every byte is its offset's low byte: a pattern tests can check.
/// struct Pattern(u64);
///
/// impl PageSource for Pattern {
///     fn len(&self) -> u64 {
///         self.0
///     }
///     fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
///         for (i, b) in buf.iter_mut().enumerate() {
///             *b = (offset + i as u64) as u8;
///         }
///         Ok(())
///     }
///     fn may_touch_region(&self) -> bool {
///         false
///     }
/// }
///
/// let src = Pattern(1 << 20);
/// let mut page = [0u8; 4];
/// src.read_at(0x1ff, &mut page)?;
/// assert_eq!(page, [0xff, 0x00, 0x01, 0x02]);
/// // Memory-like: everything is available without blocking.
/// assert_eq!(src.read_nowait(0, &mut page)?, 4);
/// # Ok::<(), io::Error>(())
/// ```
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

    /// The address of bytes `[offset, offset + len)` if the source holds
    /// them, contiguous and ready, in this process's memory, where they
    /// stay while the source lives (an object store's chunk once fetched, a
    /// pack's part once checked): the pager then copies them to the guest
    /// from there (`UFFDIO_COPY`), without reading them into a buffer
    /// first. `None` (the default, unless [`memory`](PageSource::memory)
    /// gives an address and the bytes are [`resident`](PageSource::resident))
    /// makes the pager [`read`](PageSource::read_at) them. Asked without
    /// blocking, after [`wait_ready`](PageSource::wait_ready); as for
    /// `memory`, only the kernel reads through the address.
    ///
    /// ```
    /// use herdless_pager::{MemSource, PageSource};
    /// let src = MemSource::new(vec![7u8; 8192]);
    /// let at = src.memory_at(4096, 4096).expect("a memory source's bytes are in memory");
    /// assert_eq!(at, src.memory().unwrap().wrapping_add(4096));
    /// ```
    fn memory_at(&self, offset: u64, len: usize) -> Option<*const u8> {
        let base = self.memory()?;
        (self.resident(offset, len) >= len).then(|| base.wrapping_add(offset as usize))
    }

    /// Calls `f` with bytes `[offset, offset + len)`, in consecutive pieces
    /// that together are the range, where the source holds all of them,
    /// ready, in its own memory (not a mapped file, which may shrink under
    /// a read); returns false without calling `f` otherwise (the default).
    /// Lets a reader look at bytes without copying them: a pack checks its
    /// parts' checksums with it.
    ///
    /// ```
    /// use herdless_pager::{MemSource, PageSource};
    /// let src = MemSource::new(vec![1u8; 8192]);
    /// let mut sum = 0u64;
    /// assert!(src.with_bytes(4096, 100, &mut |b| sum += b.iter().map(|&x| u64::from(x)).sum::<u64>()));
    /// assert_eq!(sum, 100);
    /// ```
    fn with_bytes(&self, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        let _ = (offset, len, f);
        false
    }

    /// Whether `[offset, offset + len)` can be read now without waiting
    /// (or reading it would fail at once). A prefetch goes first to the
    /// ranges that are ready, and waits only when none is: an object's
    /// chunks arrive in any order. The default says yes (a file's or
    /// memory's reads are short).
    ///
    /// ```
    /// use herdless_pager::{MemSource, PageSource};
    /// assert!(MemSource::new(vec![0u8; 4096]).ready(0, 4096));
    /// ```
    fn ready(&self, offset: u64, len: usize) -> bool {
        let _ = (offset, len);
        true
    }

    /// How many of the source's fetches have ended so far (a count that
    /// only grows): a prefetch that found no range [`ready`](PageSource::ready)
    /// waits for the next with [`wait_arrival`](PageSource::wait_arrival)
    /// instead of waiting behind one range whose bytes may come last. The
    /// default, for sources whose reads are short, never changes.
    ///
    /// ```
    /// use herdless_pager::{MemSource, PageSource};
    /// assert_eq!(MemSource::new(vec![0u8; 4096]).arrivals(), 0);
    /// ```
    fn arrivals(&self) -> u64 {
        0
    }

    /// Waits until [`arrivals`](PageSource::arrivals) is past `seen`, or
    /// `patience` has passed; returns the count then. The default returns
    /// at once (nothing ever arrives: the caller reads what it wants).
    ///
    /// ```
    /// use std::time::Duration;
    /// use herdless_pager::{MemSource, PageSource};
    /// let src = MemSource::new(vec![0u8; 4096]);
    /// assert_eq!(src.wait_arrival(0, Duration::from_secs(60)), 0); // at once
    /// ```
    fn wait_arrival(&self, seen: u64, patience: std::time::Duration) -> u64 {
        let _ = (seen, patience);
        self.arrivals()
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
    fn memory_at(&self, offset: u64, len: usize) -> Option<*const u8> {
        (**self).memory_at(offset, len)
    }
    fn with_bytes(&self, offset: u64, len: usize, f: &mut dyn FnMut(&[u8])) -> bool {
        (**self).with_bytes(offset, len, f)
    }
    fn ready(&self, offset: u64, len: usize) -> bool {
        (**self).ready(offset, len)
    }
    fn arrivals(&self) -> u64 {
        (**self).arrivals()
    }
    fn wait_arrival(&self, seen: u64, patience: std::time::Duration) -> u64 {
        (**self).wait_arrival(seen, patience)
    }
}
