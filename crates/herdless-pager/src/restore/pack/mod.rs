//! Working-set pages files ("packs"): the bytes of a trace's pages, in
//! trace order, in one file beside the trace (`TRACE.pages`), so that a
//! prefetch reads the working set in a few large sequential reads or range
//! GETs instead of the memory's chunks that hold it (REAP, ASPLOS '21,
//! writes the working set's pages to a file of their own for the same
//! reason).
//!
//! A working set is a tenth of a snapshot but scattered over all of it: a
//! prefetch from an object store that fetches the memory's chunks holding
//! it fetches the whole snapshot (every 2 MiB chunk holds some of it). The
//! pack holds only those pages: `herdless-uffd --record TRACE` writes
//! `TRACE.pages` beside the trace (a local file, or an object in the same
//! bucket and prefix), and `--prefetch TRACE` uses it when it is there:
//! its parts are fetched in order, `--fetch-concurrency` at a time, and the
//! pages it holds are never fetched from the memory. `--no-pack` does
//! neither.
//!
//! # Never a page of another snapshot (what binds a pack)
//! A trace is a hint: a wrong one costs time. A pack carries bytes: a
//! wrong one would hand the guest another snapshot's pages. So a pack is
//! used only when all of these hold, checked before the handler listens:
//! 1. its header parses and its length is the header's plus the data's
//!    (a truncated or padded file is refused);
//! 2. it was packed from this trace (the trace's CRC-64, its pages and
//!    bytes) and a memory of this length;
//! 3. it was packed from this memory: either the memory object's ETag is
//!    the one the header records (an object store's ETag changes with the
//!    object's content: S3's is the MD5 of a plain upload, and any
//!    re-upload gets another), or, where that cannot tell (a pack written
//!    from a local file, a memory object uploaded again), every page the
//!    pack holds from one sampled stretch of the memory (the chunk holding
//!    most of the working set: one GET) is compared with the memory's
//!    bytes. The sample catches a pack of another snapshot of the same
//!    size unless the two snapshots agree on every working-set page of that
//!    chunk; a pack recorded from the object itself is bound exactly;
//! 4. while serving, each part's CRC-64 is checked before any of its bytes
//!    are installed (`source.rs`): a corrupt part (or one whose fetch
//!    fails) is served from the memory instead.
//!
//! A pack that fails 1–3 is not used: the reason is logged, the summary
//! says it, and the prefetch reads the memory as without a pack (the
//! restore is as correct as ever, only slower). The checksums guard
//! against accidents (a truncated upload, another trace's pack, bit rot),
//! not against someone who may write the bucket: they could replace the
//! memory object as well.
//!
//! The header's format: `format.rs`; writing: `write.rs`.

mod format;
mod report;
mod source;
mod write;

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use format::{crc64, PackHeader, DEFAULT_PART_SIZE, HEADER_BLOCK, VERSION};
pub(crate) use report::PackFigures;
pub use report::PackSummary;
pub use write::build;

pub(crate) use source::{PackCounters, PackedSource};

use super::memory::{open_failure, MemorySource};
use super::{RestoreOptions, Trace};
use crate::PageSource;

/// The pages file of the trace at `trace`: its name with `.pages` added
/// (a path or an object URL alike).
///
/// # Examples
/// ```
/// use std::path::Path;
/// use herdless_pager::restore::pack::path_for;
/// assert_eq!(path_for(Path::new("/snap/vm.trace")), Path::new("/snap/vm.trace.pages"));
/// assert_eq!(path_for(Path::new("s3://b/vm.trace")), Path::new("s3://b/vm.trace.pages"));
/// ```
pub fn path_for(trace: &Path) -> PathBuf {
    let mut s = trace.as_os_str().to_os_string();
    s.push(".pages");
    PathBuf::from(s)
}

/// Why a pack is not used.
pub(crate) enum NotUsed {
    /// There is none beside the trace.
    Absent(String),
    /// There is one, refused (module doc).
    Refused(String),
}

/// A pack checked and ready to serve (its parts queued for fetching).
pub(crate) struct OpenPack {
    bytes: MemorySource,
    header: PackHeader,
    trace: Trace,
    pub(crate) counters: Arc<PackCounters>,
    pub(crate) shown: String,
    /// How it is bound to the memory (for the log).
    pub(crate) bound_by: &'static str,
}

/// A pack whose header is read and checked against its own length
/// (module doc, 1), not yet against the trace: what can be done before
/// the trace is read, at the same time as reading it (an object store's
/// round trips overlap). An object's data chunks are already being
/// fetched; nothing of them is served before every check has passed.
pub(crate) struct StartedPack {
    bytes: MemorySource,
    header: PackHeader,
    shown: String,
}

impl StartedPack {
    /// Opens the pack beside `trace_path` and reads its header (an
    /// object: one GET of its first block, which tells its size and ETag
    /// as a `HEAD` would), and, from an object, starts fetching its data
    /// in order.
    pub(crate) fn start(trace_path: &Path, opts: &RestoreOptions) -> Result<StartedPack, NotUsed> {
        let path = path_for(trace_path);
        // Its first chunks too, in the same round trip (a pack is read
        // whole, from its start).
        let ahead = opts.object.fetch_ahead.min(opts.object.fetch_concurrency);
        let opened = MemorySource::open_reading_first(&path, opts, HEADER_BLOCK, ahead);
        let (bytes, start) = opened.map_err(|e| {
            let (absent, why) = open_failure(&e);
            if absent {
                NotUsed::Absent(format!("no pack {} beside the trace", path.display()))
            } else {
                NotUsed::Refused(format!("the pack {}: {why}", path.display()))
            }
        })?;
        let shown = bytes.shown(&path);
        let refuse = |why: String| NotUsed::Refused(format!("the pack {shown}: {why}"));
        let len = bytes.len();
        let want = len.min(HEADER_BLOCK) as usize;
        let mut first = start;
        if first.len() != want {
            first = vec![0u8; want];
            bytes
                .read_at(0, &mut first)
                .map_err(|e| refuse(format!("cannot read its header: {e}")))?;
        }
        let header_len = PackHeader::header_len_of(&first).map_err(&refuse)?;
        let mut block = first;
        if header_len > block.len() as u64 && header_len <= len {
            block = vec![0u8; header_len as usize];
            bytes
                .read_at(0, &mut block)
                .map_err(|e| refuse(format!("cannot read its header: {e}")))?;
        }
        let header = PackHeader::parse(&block).map_err(&refuse)?;
        if len != header.file_len() {
            let what = if len < header.file_len() {
                "truncated"
            } else {
                "longer than it says"
            };
            return Err(refuse(format!(
                "{len} bytes, its header says {} + {} ({what})",
                header.header_len, header.data_len
            )));
        }
        // An object's parts start coming now, while the trace is read
        // (queueing returns at once; a file is read ahead later, where a
        // signal can stop it).
        #[cfg(feature = "object-store")]
        if let Some(o) = bytes.object() {
            o.prefetch([(header.header_len, header.data_len)]);
        }
        Ok(StartedPack {
            bytes,
            header,
            shown,
        })
    }

    /// Check 2 of the module doc: the pack was packed from `trace`.
    pub(crate) fn for_trace(self, trace: &Trace) -> Result<OpenPack, NotUsed> {
        let shown = &self.shown;
        self.header
            .matches(trace)
            .map_err(|why| NotUsed::Refused(format!("the pack {shown}: {why}")))?;
        Ok(OpenPack {
            bytes: self.bytes,
            header: self.header,
            trace: trace.clone(),
            counters: Arc::default(),
            shown: self.shown,
            bound_by: "",
        })
    }
}

impl OpenPack {
    /// The pack's bytes (to read ahead).
    /// The pack's bytes (to read ahead).
    pub(crate) fn bytes(&self) -> &MemorySource {
        &self.bytes
    }

    /// Where its data is: (offset, length), everything a prefetch reads.
    pub(crate) fn data_range(&self) -> (u64, u64) {
        (self.header.header_len, self.header.data_len)
    }

    /// Check 3 of the module doc: binds the pack to `memory`, or says
    /// why it does not belong to it.
    pub(crate) fn bind_to(&mut self, memory: &MemorySource) -> Result<(), String> {
        if self.header.memory_etag.is_some() && self.header.memory_etag.as_deref() == memory.etag()
        {
            self.bound_by = "the memory object's ETag";
            return Ok(());
        }
        let window = memory.chunk_size().unwrap_or(DEFAULT_PART_SIZE);
        let index = source::index(&self.trace, self.header.header_len);
        // The window holding most of the working set.
        let mut per_window = std::collections::HashMap::<u64, u64>::new();
        for s in &index {
            let mut at = s.mem;
            while at < s.mem + s.len {
                let w = at / window;
                let stop = ((w + 1) * window).min(s.mem + s.len);
                *per_window.entry(w).or_default() += stop - at;
                at = stop;
            }
        }
        let best = per_window
            .iter()
            .max_by_key(|&(w, n)| (*n, std::cmp::Reverse(*w)));
        let (lo, hi) = best.map_or((0, 0), |(&w, _)| (w * window, (w + 1) * window));
        for s in &index {
            let (start, end) = (s.mem.max(lo), (s.mem + s.len).min(hi));
            if start >= end {
                continue;
            }
            let n = (end - start) as usize;
            let (mut theirs, mut ours) = (vec![0u8; n], vec![0u8; n]);
            memory
                .read_at(start, &mut theirs)
                .map_err(|e| format!("cannot read the memory to check it: {e}"))?;
            self.bytes
                .read_at(s.pack + (start - s.mem), &mut ours)
                .map_err(|e| format!("cannot read it: {e}"))?;
            if let Some(i) = theirs.iter().zip(&ours).position(|(a, b)| a != b) {
                return Err(format!(
                    "its byte for memory offset {:#x} differs from the memory's: packed from \
                     another snapshot (or corrupt)",
                    start + i as u64
                ));
            }
        }
        self.bound_by = "sampled pages compared with the memory";
        Ok(())
    }

    /// What the summary will say of it (its counters, live).
    pub(crate) fn figures(&self) -> PackFigures {
        PackFigures {
            summary: PackSummary {
                path: self.shown.clone(),
                bytes: self.header.data_len,
                bound_by: self.bound_by.to_string(),
                ..PackSummary::default()
            },
            counters: Some(Arc::clone(&self.counters)),
            #[cfg(feature = "object-store")]
            object: self.bytes.object().cloned(),
        }
    }

    /// The source the handlers read: `memory` with this pack in front.
    pub(crate) fn into_source(self, memory: Arc<dyn PageSource>) -> PackedSource {
        let index = source::index(&self.trace, self.header.header_len);
        PackedSource::new(
            memory,
            Arc::from(self.bytes.boxed()),
            self.header,
            index,
            self.counters,
            self.shown,
        )
    }
}
