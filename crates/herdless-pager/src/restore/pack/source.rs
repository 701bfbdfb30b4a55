//! The memory as the handlers read it when a pack is in use: the pages
//! the pack holds from the pack, every other page from the memory.
//!
//! # Which bytes come from where
//! The trace's runs, laid out back to back in the pack, become an index
//! of non-overlapping segments (memory offset, length, pack offset),
//! sorted by memory offset (a page the trace holds twice is read from
//! one of its places: both hold its bytes). A read is cut at the segments' edges: a piece
//! inside a segment is read from the pack, a piece outside every segment
//! from the memory.
//!
//! # Checked before served
//! A piece of the pack is served only from parts whose checksum matched:
//! the first reader of a part (a demand fault or a prefetch thread, in
//! [`wait_ready`](PageSource::wait_ready), before the fill's locks, or in
//! `read_at`) reads the whole part, computes its CRC-64 and records
//! `GOOD` or `BAD`. A part that is `BAD` (corrupt, or its fetch failed
//! for good) is never read again: its pages are read from the memory, as
//! if there were no pack, and a warning says so. So a wrong byte in the
//! pack is never installed, and a pack that cannot be fetched costs time,
//! not a page.
//!
//! # Demand faults
//! A fault on a page the pack holds waits for the pack's part, whose
//! fetch (the object source's single flight per chunk) starts at once if
//! the prefetch has not started it: it goes ahead of the prefetch's queue
//! as a memory chunk would. Its wait is bounded as a chunk's is (request
//! timeout, retries), and a part that fails falls back to the memory's
//! chunk: never a hang.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use super::format::{crc64, PackHeader};
use crate::restore::Trace;
use crate::PageSource;

/// A part not checked yet.
const UNCHECKED: u8 = 0;
/// A part whose checksum matched.
const GOOD: u8 = 1;
/// A part that failed its check or could not be read.
const BAD: u8 = 2;

thread_local! {
    /// The part a thread is checking (`PackedSource::part_good`).
    static CHECKED_PART: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Bytes `[mem, mem + len)` of the memory are at `pack` in the pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segment {
    pub(crate) mem: u64,
    pub(crate) len: u64,
    pub(crate) pack: u64,
}

/// The index of `trace`'s runs in a pack whose data starts at `data_at`
/// (module doc): sorted by memory offset, non-overlapping.
pub(crate) fn index(trace: &Trace, data_at: u64) -> Vec<Segment> {
    let mut segs = Vec::with_capacity(trace.runs.len());
    let mut pack = data_at;
    for r in &trace.runs {
        segs.push(Segment {
            mem: r.offset,
            len: r.bytes(),
            pack,
        });
        pack += r.bytes();
    }
    // By memory offset; a run overlapping the ones before it keeps only
    // what it adds.
    segs.sort_by_key(|s| s.mem);
    let mut out: Vec<Segment> = Vec::with_capacity(segs.len());
    let mut covered = 0u64;
    for s in segs {
        let end = s.mem + s.len;
        let start = s.mem.max(covered);
        if start < end {
            out.push(Segment {
                mem: start,
                len: end - start,
                pack: s.pack + (start - s.mem),
            });
            covered = end;
        }
    }
    out
}

/// What the pack did (shared with the restore's summary).
#[derive(Default)]
pub(crate) struct PackCounters {
    /// Bytes served from the pack.
    pub(crate) served: AtomicU64,
    /// Bytes the pack holds that were read from the memory instead (their
    /// part failed).
    pub(crate) fell_back: AtomicU64,
    /// Parts that passed their check.
    pub(crate) parts_good: AtomicU64,
    /// Parts that failed it (or their fetch).
    pub(crate) parts_bad: AtomicU64,
    /// Why parts failed (the first few).
    pub(crate) warnings: Mutex<Vec<String>>,
}

/// The memory with a pack in front of it (module doc).
pub(crate) struct PackedSource {
    pub(crate) memory: Arc<dyn PageSource>,
    pub(crate) pack: Arc<dyn PageSource>,
    pub(crate) header: PackHeader,
    pub(crate) index: Vec<Segment>,
    /// `UNCHECKED`, `GOOD` or `BAD`, per part. `Relaxed` is enough: a
    /// state is a cached verdict on bytes that never change (a reader that
    /// sees `GOOD` reads the part through the pack source, which hands
    /// over its bytes with its own locks), and two readers that both check
    /// a part reach the same verdict.
    parts: Box<[AtomicU8]>,
    /// Held by the one reader checking a part: another that wants it
    /// waits for its verdict instead of reading and checking it too.
    checking: Box<[Mutex<()>]>,
    pub(crate) counters: Arc<PackCounters>,
    /// The pack's name in messages.
    shown: String,
}

/// One piece of a read: `len` bytes from memory offset `mem`, at `pack`
/// in the pack if it holds them.
struct Piece {
    mem: u64,
    len: usize,
    pack: Option<u64>,
}

impl PackedSource {
    pub(crate) fn new(
        memory: Arc<dyn PageSource>,
        pack: Arc<dyn PageSource>,
        header: PackHeader,
        index: Vec<Segment>,
        counters: Arc<PackCounters>,
        shown: String,
    ) -> Self {
        let n = header.part_crcs.len();
        let parts = (0..n).map(|_| AtomicU8::new(UNCHECKED)).collect();
        let checking = (0..n).map(|_| Mutex::new(())).collect();
        PackedSource {
            memory,
            pack,
            header,
            index,
            parts,
            checking,
            counters,
            shown,
        }
    }

    /// `[offset, offset + len)` cut at the segments' edges, in order
    /// (an iterator: no allocation on the fault path).
    fn pieces(&self, offset: u64, len: usize) -> impl Iterator<Item = Piece> + '_ {
        let end = offset + len as u64;
        let mut i = self.index.partition_point(|s| s.mem + s.len <= offset);
        let mut at = offset;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let piece = match self.index.get(i) {
                Some(s) if s.mem <= at => {
                    i += 1;
                    let stop = end.min(s.mem + s.len);
                    Piece {
                        mem: at,
                        len: (stop - at) as usize,
                        pack: Some(s.pack + (at - s.mem)),
                    }
                }
                next => {
                    let stop = next.map_or(end, |s| end.min(s.mem));
                    Piece {
                        mem: at,
                        len: (stop - at) as usize,
                        pack: None,
                    }
                }
            };
            at += piece.len as u64;
            Some(piece)
        })
    }

    /// The parts holding pack bytes `[at, at + len)`.
    fn parts_of(&self, at: u64, len: usize) -> std::ops::RangeInclusive<usize> {
        let ps = self.header.part_size;
        (at / ps) as usize..=((at + len as u64 - 1) / ps) as usize
    }

    fn warn(&self, msg: String) {
        let mut w = self
            .counters
            .warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if w.len() < 16 {
            w.push(msg);
        }
    }

    /// Whether part `n` passed its check, checking it now (reading it
    /// whole: this waits for its fetch) if nobody has, or waiting for
    /// whoever is checking it.
    fn part_good(&self, n: usize) -> bool {
        match self.parts[n].load(Relaxed) {
            GOOD => return true,
            BAD => return false,
            _ => {}
        }
        // The state is set before the lock is released, so a reader that
        // waited here finds the verdict (the lock orders the two).
        let _checking = self.checking[n]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        match self.parts[n].load(Relaxed) {
            GOOD => return true,
            BAD => return false,
            _ => {}
        }
        let r = self.header.part(n);
        // In place where the pack holds the part in memory (an object's
        // chunks, once fetched: `wait_ready` fetches them); else read
        // into a buffer of this thread's, kept: a fresh one per part would
        // cost a page fault per page of it.
        let len = (r.end - r.start) as usize;
        self.pack.wait_ready(r.start, len);
        let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc64Nvme);
        let crc = if self
            .pack
            .with_bytes(r.start, len, &mut |b| digest.update(b))
        {
            Ok(digest.finalize())
        } else {
            CHECKED_PART.with_borrow_mut(|buf| {
                buf.resize(len, 0);
                self.pack.read_at(r.start, buf).map(|()| crc64(buf))
            })
        };
        let verdict = match crc {
            Ok(c) if c == self.header.part_crcs[n] => Ok(()),
            Ok(_) => Err("its checksum does not match (a corrupt pack)".to_string()),
            Err(e) => Err(format!("it could not be read ({e})")),
        };
        let state = if verdict.is_ok() { GOOD } else { BAD };
        // `failed` may have marked it meanwhile: whoever stores first
        // counts it.
        if self.parts[n]
            .compare_exchange(UNCHECKED, state, Relaxed, Relaxed)
            .is_ok()
        {
            let c = &self.counters;
            match verdict {
                Ok(()) => c.parts_good.fetch_add(1, Relaxed),
                Err(why) => {
                    self.warn(format!(
                        "{}: part {n} not used: {why}; its pages are read from the memory",
                        self.shown
                    ));
                    c.parts_bad.fetch_add(1, Relaxed)
                }
            };
        }
        state == GOOD
    }

    /// Whether the pack's bytes `[at, at + len)` may be served (every part
    /// holding them checked and good).
    fn servable(&self, at: u64, len: usize) -> bool {
        self.parts_of(at, len).all(|n| self.part_good(n))
    }

    /// Marks the parts of `[at, at + len)` bad after a failed read.
    fn failed(&self, at: u64, len: usize, e: &io::Error) {
        for n in self.parts_of(at, len) {
            if self.parts[n].swap(BAD, Relaxed) != BAD {
                self.counters.parts_bad.fetch_add(1, Relaxed);
                self.warn(format!(
                    "{}: part {n} could not be read ({e}); its pages are read from the memory",
                    self.shown
                ));
            }
        }
    }
}

/// How long [`PackedSource::wait_arrival`] waits on the pack before it
/// looks at the memory's arrivals again.
const ARRIVAL_SLICE: std::time::Duration = std::time::Duration::from_millis(2);

impl PageSource for PackedSource {
    fn len(&self) -> u64 {
        self.memory.len()
    }

    /// The pack's arrivals and the memory's.
    fn arrivals(&self) -> u64 {
        self.pack.arrivals().wrapping_add(self.memory.arrivals())
    }

    /// Waits on the pack's arrivals (where a prefetch's bytes come from),
    /// [`ARRIVAL_SLICE`] at a time, looking at the memory's in between
    /// (pieces outside the pack, or parts found bad, come from there).
    fn wait_arrival(&self, seen: u64, patience: std::time::Duration) -> u64 {
        let deadline = std::time::Instant::now() + patience;
        loop {
            let (p, m) = (self.pack.arrivals(), self.memory.arrivals());
            let now = p.wrapping_add(m);
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if now != seen || left.is_zero() {
                return now;
            }
            self.pack.wait_arrival(p, left.min(ARRIVAL_SLICE));
        }
    }

    fn may_touch_region(&self) -> bool {
        self.memory.may_touch_region() || self.pack.may_touch_region()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let mut done = 0;
        for p in self.pieces(offset, buf.len()) {
            let out = &mut buf[done..done + p.len];
            done += p.len;
            if let Some(at) = p.pack.filter(|&at| self.servable(at, p.len)) {
                match self.pack.read_at(at, out) {
                    Ok(()) => {
                        self.counters.served.fetch_add(p.len as u64, Relaxed);
                        continue;
                    }
                    Err(e) => self.failed(at, p.len, &e),
                }
            }
            if p.pack.is_some() {
                self.counters.fell_back.fetch_add(p.len as u64, Relaxed);
            }
            self.memory.read_at(p.mem, out)?;
        }
        Ok(())
    }

    /// The pack's parts are fetched and checked here, outside the fill's
    /// locks; the memory's chunks for the rest.
    fn wait_ready(&self, offset: u64, len: usize) {
        let len = len.min(self.len().saturating_sub(offset) as usize);
        for p in self.pieces(offset, len) {
            match p.pack {
                Some(at) if self.servable(at, p.len) => {}
                _ => self.memory.wait_ready(p.mem, p.len),
            }
        }
    }

    /// Pack pieces whose parts are checked, or can be checked without
    /// waiting (their bytes fetched); memory pieces the memory has ready.
    fn ready(&self, offset: u64, len: usize) -> bool {
        let len = len.min(self.len().saturating_sub(offset) as usize);
        self.pieces(offset, len).all(|p| match p.pack {
            Some(at) => self
                .parts_of(at, p.len)
                .all(|n| match self.parts[n].load(Relaxed) {
                    GOOD => true,
                    BAD => self.memory.ready(p.mem, p.len),
                    _ => {
                        let r = self.header.part(n);
                        self.pack.ready(r.start, (r.end - r.start) as usize)
                    }
                }),
            None => self.memory.ready(p.mem, p.len),
        })
    }

    /// A range inside one segment of the pack whose parts are checked
    /// good (`wait_ready` checked them), where the pack holds it in memory;
    /// a range outside every segment where the memory does.
    fn memory_at(&self, offset: u64, len: usize) -> Option<*const u8> {
        let mut pieces = self.pieces(offset, len);
        let p = pieces.next()?;
        if pieces.next().is_some() {
            return None;
        }
        match p.pack {
            Some(at) => {
                let good = self
                    .parts_of(at, len)
                    .all(|n| self.parts[n].load(Relaxed) == GOOD);
                let m = self.pack.memory_at(at, len).filter(|_| good)?;
                self.counters.served.fetch_add(len as u64, Relaxed);
                Some(m)
            }
            None => self.memory.memory_at(p.mem, len),
        }
    }

    /// The prefix available without waiting: pack pieces of parts already
    /// checked good, memory pieces as the memory has them.
    fn read_nowait(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut done = 0;
        for p in self.pieces(offset, buf.len()) {
            let out = &mut buf[done..done + p.len];
            let got = match p.pack {
                Some(at) => {
                    let state = |n: usize| self.parts[n].load(Relaxed);
                    if self.parts_of(at, p.len).all(|n| state(n) == GOOD) {
                        let n = self.pack.read_nowait(at, out)?;
                        self.counters.served.fetch_add(n as u64, Relaxed);
                        n
                    } else if self.parts_of(at, p.len).any(|n| state(n) == BAD) {
                        // Served from the memory instead, as `read_at` counts it.
                        let n = self.memory.read_nowait(p.mem, out)?;
                        self.counters.fell_back.fetch_add(n as u64, Relaxed);
                        n
                    } else {
                        0
                    }
                }
                None => self.memory.read_nowait(p.mem, out)?,
            };
            done += got;
            if got < p.len {
                break;
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::restore::pack::build;
    use crate::MemSource;

    fn memory(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i / 4096 * 7 + i % 251) as u8).collect()
    }

    fn packed(mem: &[u8], trace: &Trace, corrupt: Option<usize>) -> PackedSource {
        let mut pack = build(trace, None, |off, buf| {
            buf.copy_from_slice(&mem[off as usize..off as usize + buf.len()]);
            Ok(())
        })
        .unwrap();
        let header = PackHeader::parse(&pack).unwrap();
        if let Some(at) = corrupt {
            pack[at] ^= 0xff;
        }
        PackedSource::new(
            Arc::new(MemSource::new(mem.to_vec())),
            Arc::new(MemSource::new(pack)),
            header.clone(),
            index(trace, header.header_len),
            Arc::default(),
            "test.pages".into(),
        )
    }

    #[test]
    fn overlapping_runs_index_each_byte_once() {
        // Runs 0x3000 (2 pages, first in the pack) and 0x1000 (3 pages).
        let t = Trace::from_offsets(4096, 1 << 20, [0x3000, 0x4000, 0x1000, 0x2000, 0x3000]);
        let idx = index(&t, 4096);
        assert_eq!(
            idx,
            vec![
                Segment {
                    mem: 0x1000,
                    len: 0x3000,
                    pack: 4096 + 0x2000
                },
                Segment {
                    mem: 0x4000,
                    len: 0x1000,
                    pack: 4096 + 0x1000
                },
            ]
        );
    }

    #[test]
    fn every_byte_reads_as_the_memory_through_the_pack() {
        let mem = memory(1 << 20);
        let t = Trace::from_offsets(4096, mem.len() as u64, [0x9000, 0xa000, 0x2000, 0x40000]);
        let src = packed(&mem, &t, None);
        let mut buf = vec![0u8; mem.len()];
        src.wait_ready(0, buf.len());
        src.read_at(0, &mut buf).unwrap();
        assert!(buf == mem);
        assert_eq!(src.counters.served.load(Relaxed), 4 * 4096);
        assert_eq!(src.read_nowait(0x9000, &mut buf[..8192]).unwrap(), 8192);
        assert_eq!(src.counters.parts_good.load(Relaxed), 1);
    }

    #[test]
    fn a_range_of_one_checked_segment_is_copied_from_the_packs_own_bytes() {
        let mem = memory(1 << 20);
        let t = Trace::from_offsets(4096, mem.len() as u64, [0x9000, 0xa000, 0x2000]);
        let src = packed(&mem, &t, None);
        // Not checked yet: no address, though the bytes are there to check.
        assert!(src.memory_at(0x9000, 8192).is_none());
        assert!(src.ready(0x9000, 8192));
        src.wait_ready(0x9000, 8192);
        let at = src.memory_at(0x9000, 8192).expect("a checked part's bytes");
        let pack_at = src.pack.memory().unwrap().wrapping_add(4096);
        assert_eq!(at, pack_at, "the run's bytes where the pack holds them");
        assert_eq!(src.counters.served.load(Relaxed), 8192);
        // A range over a segment's edge, or partly outside the pack, is read.
        assert!(src.memory_at(0x8000, 8192).is_none());
        assert!(src.memory_at(0xa000, 8192).is_none());
        // Outside every segment: the memory's own bytes.
        let m = src.memory_at(0x40000, 4096).expect("the memory's bytes");
        assert_eq!(m, src.memory.memory().unwrap().wrapping_add(0x40000));
    }

    #[test]
    fn a_corrupt_part_is_served_from_the_memory_and_said() {
        let mem = memory(1 << 20);
        let t = Trace::from_offsets(4096, mem.len() as u64, [0x9000, 0x2000]);
        let src = packed(&mem, &t, Some(4096 + 100));
        let mut page = vec![0u8; 4096];
        src.read_at(0x9000, &mut page).unwrap();
        assert!(
            page[..] == mem[0x9000..0xa000],
            "the memory's bytes, not the corrupt ones"
        );
        assert_eq!(src.counters.parts_bad.load(Relaxed), 1);
        assert_eq!(src.counters.fell_back.load(Relaxed), 4096);
        let w = src.counters.warnings.lock().unwrap();
        assert!(w[0].contains("checksum does not match"), "{w:?}");
    }
}
