//! Packing a trace's pages: the header, then the bytes of each run read
//! from the memory, in trace order, each part's checksum filled in once
//! its bytes are there. The whole pack is built in memory (a tenth of a
//! snapshot, for a 10 % working set) and written by the caller beside its
//! target, or with one PUT.

use std::io;

use super::format::{crc64, PackHeader};
use crate::restore::Trace;

/// The pages file of `trace` (its header and data, module doc of
/// [`pack`](super)): `read(offset, buf)` fills `buf` with the memory's
/// bytes at `offset`; `memory_etag` is the memory object's ETag, if it is
/// one (what binds the pack to it most cheaply).
///
/// # Errors
/// What `read` returned, or a trace too large to pack in memory.
///
/// # Examples
/// ```
/// use herdless_pager::restore::pack::{build, PackHeader};
/// use herdless_pager::restore::Trace;
/// let memory: Vec<u8> = (0..1 << 20).map(|i| (i / 4096) as u8).collect();
/// let trace = Trace::from_offsets(4096, memory.len() as u64, [0x5000, 0x1000, 0x2000]);
/// let pack = build(&trace, None, |off, buf| {
///     buf.copy_from_slice(&memory[off as usize..off as usize + buf.len()]);
///     Ok(())
/// })?;
/// let h = PackHeader::parse(&pack)?;
/// let data = &pack[h.header_len as usize..];
/// assert_eq!((data[0], data[4096], data[8192]), (5, 1, 2)); // trace order
/// assert!(h.matches(&trace).is_ok());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn build(
    trace: &Trace,
    memory_etag: Option<&str>,
    mut read: impl FnMut(u64, &mut [u8]) -> io::Result<()>,
) -> io::Result<Vec<u8>> {
    let mut header = PackHeader::for_data(trace, memory_etag, 0);
    let len = usize::try_from(header.file_len())
        .map_err(|_| io::Error::other("the trace is too large to pack"))?;
    let mut pack = Vec::new();
    pack.try_reserve_exact(len)
        .map_err(|_| io::Error::other(format!("cannot hold a {len}-byte pack in memory")))?;
    pack.resize(len, 0);
    let mut at = header.header_len as usize;
    for run in &trace.runs {
        let n = run.bytes() as usize;
        read(run.offset, &mut pack[at..at + n])?;
        at += n;
    }
    for n in 0..header.part_crcs.len() {
        let part = header.part(n);
        header.part_crcs[n] = crc64(&pack[part.start as usize..part.end as usize]);
    }
    let block = header.to_bytes();
    pack[..block.len()].copy_from_slice(&block);
    Ok(pack)
}
