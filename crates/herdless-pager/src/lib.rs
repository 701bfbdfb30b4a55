//! # herdless-pager: serve memory lazily with userfaultfd
//!
//! Two ways in, one fault path:
//! - a [`Pager`] maps a region of `len` bytes in this process and fills
//!   each page on first access from a [`PageSource`] ([`FileSource`],
//!   [`MemSource`], [`ZeroSource`], or your own): lazy loading, post-copy
//!   migration, restoring a process snapshot;
//! - `herdless-uffd` (the binary; its library is [`restore`]) is a
//!   page-fault handler for Firecracker snapshot restores, a drop-in for
//!   Firecracker's example handlers, with fault-around, several handler
//!   threads, working-set record and prefetch, and the refusals a handler
//!   between a VMM and a snapshot file needs. See the README's "Restoring a
//!   Firecracker snapshot".
//!
//! Seed 002 ("mm: map few pages around fault address if they are in page
//! cache", Shutemov 2014) cut page faults by mapping, on one fault, the
//! neighbouring pages of an aligned window that the page cache has without
//! blocking. User-space pagers mostly serve one page per fault; this one
//! serves the window: the faulting page and the neighbours after it in one
//! `UFFDIO_COPY`, copied straight from the source's memory (a `MemSource`'s
//! bytes, a read-only mapping of a `FileSource`'s file) where it has some.
//! Its handler threads are seed 000's (blocking readers, woken one per
//! message, or pollers).
//!
//! Needs userfaultfd (root, or see [`PagerError::UserfaultfdUnavailable`]);
//! `examples/lazy_file.rs` is a complete program.
//!
//! ```
//! use herdless_pager::{FileSource, HandlerMode, Pager, PagerError};
//! # let snapshot = std::env::temp_dir().join(format!("snapshot-{}", std::process::id()));
//! # std::fs::write(&snapshot, vec![42u8; 1 << 20])?;
//! let built = Pager::builder(1 << 20)
//!     .source(FileSource::open(&snapshot)?)
//!     .fault_around(64 << 10)
//!     .handlers(2)
//!     .mode(HandlerMode::BlockingRead)
//!     .build();
//! # std::fs::remove_file(&snapshot)?;
//! let pager = match built {
//!     // This process may not use userfaultfd; the message says how to allow it.
//!     Err(e @ PagerError::UserfaultfdUnavailable { .. }) => {
//!         eprintln!("{e}");
//!         return Ok(());
//!     }
//!     built => built?,
//! };
//! let mut first = [0u8; 16];
//! pager.read(0, &mut first)?; // faults: page 0, and the neighbours cached
//! assert_eq!(first, [42; 16]);
//! pager.settle();
//! let stats = pager.stats();
//! assert!(stats.faults >= 1 && stats.pages_installed() >= 1);
//! println!("{stats:?}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Contract (ARCHITECTURE contracts 9 and 10)
//! Fault-around never changes what the faulting access sees, never maps
//! past the end of the source (past it the region reads zeros), never
//! overwrites a page already present (`UFFDIO_COPY` refuses, and the
//! per-page state of `page_state.rs` keeps two threads from filling one
//! page), and never resurrects discarded data: a `MADV_DONTNEED`d page
//! reads as zeros (see `handler/discard.rs` for the race with an in-flight
//! fill). A failed source read, or a `PageSource` method that panics,
//! poisons the faulting page (`SIGBUS` on access, where the kernel has
//! `UFFDIO_POISON`) and is reported, never left hanging; a file that shrank
//! reads as a mapping of it would (its last page's bytes then zeros,
//! `SIGBUS` past it), whatever the window. See `pager/mod.rs` for shutdown
//! and why a pager cannot be dropped while threads fault on it.
//!
//! Files: `uffd.rs` (system calls), `page_state.rs` (per-page states),
//! `space.rs` (the regions served), `handler/` (the fault path: threads,
//! one fault, fills, discards, background fills, the prefetch plan),
//! `pager/` (builder, checks, registration, threads, lifecycle), `source/`
//! (sources; `file_map.rs` the mapping a file is copied from, `guarded.rs`
//! the calls into a source with its panics caught), `restore/`
//! (`herdless-uffd`), `vmm/` (Firecracker's side of the handoff, for
//! tests and the lab), `stats.rs`, `error.rs`.
//!
//! # Features
//! By default this is the pager alone (no clap, no serde, no async
//! runtime). `restore`: the [`restore`] module, `herdless-uffd`'s library
//! (serde, serde_json). `object-store`: pages read from object stores.
//! `cli`: the `herdless-uffd` binary (clap), with both.
//! `test-vmm`: the hidden `vmm` module, Firecracker's side of the handoff
//! played in process, for tests and the lab.

#![warn(missing_docs)]
// The crate docs link the feature-gated modules; without the feature
// (the default) the links have nothing to point at.
#![cfg_attr(not(feature = "restore"), allow(rustdoc::broken_intra_doc_links))]
// The parts of the fault path only `restore` uses (another process's
// memory, prefetch plans, a copier reading events) are compiled, unused,
// without that feature: one fault path for both owners.
#![cfg_attr(not(feature = "restore"), allow(dead_code))]

mod error;
mod handler;
mod page_state;
mod pager;
#[cfg(feature = "restore")]
pub mod restore;
mod source;
mod space;
mod stats;
mod uffd;
#[cfg(feature = "test-vmm")]
#[doc(hidden)]
pub mod vmm;

pub use error::PagerError;
pub use pager::{
    HandlerMode, Pager, PagerBuilder, DEFAULT_FAULT_AROUND, MAX_FAULT_AROUND, MAX_HANDLERS,
};
#[cfg(feature = "object-store")]
pub use source::object;
pub use source::{FileSource, MemSource, PageSource, ZeroSource};
pub use stats::{Latency, PagerStats};
