//! The pager's one error type: every bad input and every failure the pager
//! can report is a variant here, with a message that says what to do.

use std::io;
use std::path::PathBuf;

use thiserror::Error;

/// What can go wrong building or running a [`Pager`](crate::Pager).
///
/// Each message is one line that says what to do; a bad option is refused
/// by [`PagerBuilder::build`](crate::PagerBuilder::build) before anything
/// is mapped, and errors met while serving are collected for
/// [`Pager::take_errors`](crate::Pager::take_errors).
///
/// # Examples
/// ```
/// use herdless_pager::{Pager, PagerError};
/// match Pager::builder(1 << 20).handlers(0).build() {
///     Err(PagerError::NoHandlers) => {}
///     other => panic!("expected NoHandlers, got {:?}", other.err()),
/// }
/// let e = Pager::builder(1 << 20).fault_around(1 << 30).build().err().unwrap();
/// assert_eq!(e.to_string(), "the fault-around window 1073741824 is larger than the 2097152-byte maximum");
/// ```
#[derive(Debug, Error)]
pub enum PagerError {
    /// The region length is zero.
    #[error("the region length is zero; a pager serves at least one page")]
    ZeroLength,
    /// The region length is not a multiple of the page size.
    #[error("the region length {len} is not a multiple of the page size {page}")]
    LengthNotPageMultiple {
        /// The length asked for.
        len: usize,
        /// The system page size.
        page: usize,
    },
    /// The fault-around window is not a power of two.
    #[error("the fault-around window {window} is not a power of two")]
    WindowNotPowerOfTwo {
        /// The window asked for, in bytes.
        window: usize,
    },
    /// The fault-around window is smaller than a page.
    #[error(
        "the fault-around window {window} is smaller than a page ({page}); one page means off"
    )]
    WindowTooSmall {
        /// The window asked for, in bytes.
        window: usize,
        /// The system page size.
        page: usize,
    },
    /// The fault-around window is larger than the pager serves
    /// ([`MAX_FAULT_AROUND`](crate::MAX_FAULT_AROUND), the kernel's own cap
    /// on `fault_around_bytes`: one page table of pages).
    #[error("the fault-around window {window} is larger than the {max}-byte maximum")]
    WindowTooLarge {
        /// The window asked for, in bytes.
        window: usize,
        /// The largest window accepted.
        max: usize,
    },
    /// Zero handler threads were asked for.
    #[error("a pager needs at least one handler thread")]
    NoHandlers,
    /// More handler threads were asked for than a pager starts
    /// ([`MAX_HANDLERS`](crate::MAX_HANDLERS)).
    #[error("{asked} handler threads asked for; a pager starts at most {max}")]
    TooManyHandlers {
        /// The count asked for.
        asked: usize,
        /// The largest count accepted.
        max: usize,
    },
    /// The system refused a thread the pager needs (thread or memory
    /// limits). Everything already started was stopped and released.
    #[error("could not start {what} ({started} of the pager's threads were running): {source}")]
    ThreadSpawn {
        /// Which thread.
        what: &'static str,
        /// Threads already started (then stopped again).
        started: usize,
        /// The error from the system.
        source: io::Error,
    },
    /// The source is shorter than the region and the builder was told to
    /// refuse that ([`PagerBuilder::require_full_source`](crate::PagerBuilder::require_full_source)).
    #[error("the source holds {source_len} bytes, shorter than the {region_len}-byte region")]
    SourceShorterThanRegion {
        /// Bytes in the source.
        source_len: u64,
        /// Bytes in the region.
        region_len: usize,
    },
    /// A source file could not be opened or inspected (missing, unreadable,
    /// not a regular file).
    #[error("cannot open the source file {}: {source}", path.display())]
    SourceOpen {
        /// The file.
        path: PathBuf,
        /// The error from the system.
        source: io::Error,
    },
    /// Reading the source failed while serving a fault. The faulting access
    /// was answered with a poisoned page (`SIGBUS`, as a failed read of an
    /// `mmap`ed file) where the kernel supports `UFFDIO_POISON`, or with
    /// zeros where it does not.
    #[error("reading the source at offset {offset} failed: {source}")]
    SourceRead {
        /// Byte offset in the source.
        offset: u64,
        /// The error.
        source: io::Error,
    },
    /// A [`PageSource`](crate::PageSource) method panicked. While serving a
    /// fault this is handled as a failed read: the faulting access is
    /// answered as [`PagerError::SourceRead`] says, never left waiting.
    #[error("the page source panicked in {method} (offset {offset}): {message}")]
    SourcePanicked {
        /// The method (`read_at`, `read_nowait`, `len`...).
        method: &'static str,
        /// Byte offset asked for (0 for methods without one).
        offset: u64,
        /// The panic's message.
        message: String,
    },
    /// The kernel refused to create a userfaultfd.
    #[error(
        "userfaultfd is unavailable ({source}). Choices: run as root or with CAP_SYS_PTRACE; \
         or let unprivileged users in with `sysctl vm.unprivileged_userfaultfd=1`; \
         or build the pager with `.user_mode_only(true)` (UFFD_USER_MODE_ONLY, Linux 5.11+: \
         then system calls that write into a missing page fail with EFAULT instead of faulting); \
         or grant access to /dev/userfaultfd"
    )]
    UserfaultfdUnavailable {
        /// The error from `userfaultfd(2)`.
        source: io::Error,
    },
    /// The kernel lacks a userfaultfd feature this configuration needs.
    #[error("this kernel's userfaultfd lacks {feature}, which {needed_for} needs")]
    FeatureUnsupported {
        /// The feature (e.g. `UFFD_FEATURE_MINOR_SHMEM`).
        feature: &'static str,
        /// What asked for it.
        needed_for: &'static str,
    },
    /// Minor-fault mode was asked for with a source that does not live in
    /// shared memory.
    #[error("minor-fault mode needs a source in shared memory (a memfd or a tmpfs file)")]
    MinorNeedsSharedMemory,
    /// A system call the pager depends on failed.
    #[error("{op}: {source}")]
    Syscall {
        /// What the pager was doing.
        op: &'static str,
        /// The error.
        source: io::Error,
    },
    /// A handler thread touched the region it serves (for instance a
    /// `PageSource` reading from it). Another handler served the fault; with
    /// a single handler this would have been a deadlock.
    #[error("handler thread {handler} touched the region it serves, at offset {offset:#x}")]
    HandlerTouchedRegion {
        /// Index of the handler.
        handler: usize,
        /// Offset of the access in the region.
        offset: usize,
    },
    /// A thread faulted at an address the userfaultfd covers but no region
    /// served does (a VMM registered more memory than it described). The
    /// fault was answered with a poisoned page (zeros without
    /// `UFFDIO_POISON`), so the thread gets `SIGBUS` rather than waiting
    /// forever.
    #[error("a fault at {address:#x}, outside every region served: answered with a poisoned page")]
    FaultOutsideRegions {
        /// The faulting address.
        address: usize,
    },
    /// A range given to [`Pager::discard`](crate::Pager::discard) or
    /// [`Pager::populate`](crate::Pager::populate) is out of the region or
    /// not page-aligned.
    #[error("range {offset:#x}+{len:#x} is not a page-aligned range inside the {region_len:#x}-byte region")]
    BadRange {
        /// Start offset.
        offset: usize,
        /// Length.
        len: usize,
        /// The region's length.
        region_len: usize,
    },
    /// A handler thread panicked outside a `PageSource` call (a bug in the
    /// pager). The fault it was serving was answered with a poisoned page
    /// (zeros without `UFFDIO_POISON`), its claims given back, and the
    /// handler went on serving.
    #[error("handler thread {0} panicked")]
    HandlerPanicked(usize),
}

impl PagerError {
    pub(crate) fn syscall(op: &'static str, e: impl Into<io::Error>) -> Self {
        PagerError::Syscall {
            op,
            source: e.into(),
        }
    }
}
