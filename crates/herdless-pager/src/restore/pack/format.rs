//! The pages file's header: what binds a pack to its snapshot and trace,
//! and the checksums of its parts.
//!
//! # Format, version 1
//! A header block of `header-length` bytes (a multiple of 4096), text
//! lines then NUL bytes up to its end, followed by the data: the bytes of
//! the trace's runs, in trace order, back to back.
//! ```text
//! herdless-uffd pages 1
//! header-length 4096
//! memory-length 268435456
//! memory-etag "5d41402abc4b2a76b9719d911017c592"
//! trace-crc64 0x4b9d3a0c1e2f5a67
//! pages 6554
//! data-length 26845184
//! part-size 2097152
//! part 0 0x0123456789abcdef
//! part 1 0x...
//! ```
//! - `memory-length`: the memory's length (a pack of another snapshot
//!   size is refused);
//! - `memory-etag`: the memory object's ETag when the pack was written
//!   from an object store, `-` when from a local file;
//! - `trace-crc64`: the CRC-64/NVME of the trace as version 2 text
//!   ([`Trace::to_text`]): the pack holds exactly that trace's runs;
//! - `pages` and `data-length`: the trace's pages and bytes;
//! - `part N CRC`: the CRC-64/NVME of part N, where part N is the bytes
//!   `[max(N × part-size, header-length), min((N + 1) × part-size,
//!   header-length + data-length))` of the file: parts are aligned to the
//!   file's own offsets, so that with a fetch chunk of `part-size` (the
//!   default 2 MiB both) each part is one range GET. `part-size` is larger
//!   than the header (part 0 holds the data's first bytes).
//!
//! Every line must be there, once, in this order (a reader refuses a
//! version it does not know, an unknown key, a missing or repeated one).

use std::fmt::Write as _;

use crate::restore::Trace;

/// The first word of the header.
const MAGIC: &str = "herdless-uffd pages";

/// The version this code writes and reads.
///
/// # Examples
/// ```
/// use herdless_pager::restore::pack::{PackHeader, VERSION};
/// let h = PackHeader::for_data(&herdless_pager::restore::Trace::default(), None, 0);
/// assert!(h.to_text().starts_with(&format!("herdless-uffd pages {VERSION}\n")));
/// ```
pub const VERSION: u32 = 1;

/// The header's length is a multiple of this, and it is read first.
pub const HEADER_BLOCK: u64 = 4096;

/// The part size a pack is written with (the object source's default
/// chunk size), doubled while the header does not fit in it.
pub const DEFAULT_PART_SIZE: u64 = 2 << 20;

/// The CRC-64/NVME of `bytes`: the pack's checksum (SIMD-accelerated by
/// `crc-fast`, which `object_store` uses for S3's own checksums).
///
/// # Examples
/// ```
/// use herdless_pager::restore::pack::crc64;
/// assert_eq!(crc64(b"123456789"), 0xae8b_1486_0a79_9888); // the CRC's check value
/// ```
pub fn crc64(bytes: &[u8]) -> u64 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Nvme, bytes)
}

/// The header of a pages file (module doc): what it was packed from and
/// the checksum of each part.
///
/// ```
/// use herdless_pager::restore::pack::PackHeader;
/// use herdless_pager::restore::Trace;
/// let trace = Trace::from_offsets(4096, 1 << 20, [0x3000, 0x4000, 0x10000]);
/// let h = PackHeader::for_data(&trace, Some("\"etag-1\""), 0);
/// assert_eq!((h.data_len, h.pages, h.memory_len), (3 * 4096, 3, 1 << 20));
/// assert!(h.to_text().contains("memory-etag \"etag-1\"\n"));
/// let again = PackHeader::parse(&h.to_bytes())?;
/// assert_eq!(again, h);
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackHeader {
    /// Bytes of the header block (a multiple of [`HEADER_BLOCK`]): the data
    /// starts there.
    pub header_len: u64,
    /// The memory's length.
    pub memory_len: u64,
    /// The memory object's ETag, when packed from an object store.
    pub memory_etag: Option<String>,
    /// The CRC-64/NVME of the trace's text.
    pub trace_crc: u64,
    /// Pages in the trace.
    pub pages: u64,
    /// Bytes of data (the trace's bytes).
    pub data_len: u64,
    /// Bytes per part.
    pub part_size: u64,
    /// The CRC-64/NVME of each part.
    pub part_crcs: Vec<u64>,
}

impl PackHeader {
    /// The header of a pack of `trace`'s pages, packed from a memory with
    /// `memory_etag`; the parts' checksums all `crc` (filled in by the
    /// writer once the data is there). Its length and part size are fixed
    /// here.
    pub fn for_data(trace: &Trace, memory_etag: Option<&str>, crc: u64) -> Self {
        let mut h = PackHeader {
            header_len: HEADER_BLOCK,
            memory_len: trace.file_len,
            memory_etag: memory_etag.map(str::to_string),
            trace_crc: crc64(trace.to_text().as_bytes()),
            pages: trace.pages(),
            data_len: trace.bytes(),
            part_size: DEFAULT_PART_SIZE,
            part_crcs: Vec::new(),
        };
        // The part count depends on the header's length, which depends on
        // the part count: grow both until they agree (a few rounds).
        loop {
            let parts = (h.header_len + h.data_len).div_ceil(h.part_size) as usize;
            h.part_crcs = vec![crc; parts];
            let len = (h.to_text().len() as u64).div_ceil(HEADER_BLOCK) * HEADER_BLOCK;
            if len <= h.header_len && h.header_len < h.part_size {
                return h;
            }
            h.header_len = len.max(h.header_len);
            while h.header_len >= h.part_size {
                h.part_size *= 2;
            }
        }
    }

    /// The file's length: header and data.
    pub fn file_len(&self) -> u64 {
        self.header_len + self.data_len
    }

    /// The file's bytes of part `n` (module doc).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::pack::PackHeader;
    /// let h = PackHeader { header_len: 4096, data_len: 10_000, part_size: 8192, ..Default::default() };
    /// assert_eq!(h.part(0), 4096..8192);
    /// assert_eq!(h.part(1), 8192..14096);
    /// ```
    pub fn part(&self, n: usize) -> std::ops::Range<u64> {
        let start = (n as u64 * self.part_size).max(self.header_len);
        let end = ((n as u64 + 1) * self.part_size).min(self.file_len());
        start..end.max(start)
    }

    /// The header block: its text, NUL bytes up to its length.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::pack::{PackHeader, HEADER_BLOCK};
    /// let h = PackHeader::for_data(&herdless_pager::restore::Trace::default(), None, 0);
    /// assert_eq!(h.to_bytes().len() as u64, HEADER_BLOCK);
    /// assert_eq!(PackHeader::parse(&h.to_bytes()), Ok(h));
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = self.to_text().into_bytes();
        b.resize(self.header_len as usize, 0);
        b
    }

    /// The header as text (module doc), without the NUL padding.
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{MAGIC} {VERSION}\nheader-length {}\nmemory-length {}\nmemory-etag {}\n\
             trace-crc64 {:#018x}\npages {}\ndata-length {}\npart-size {}\n",
            self.header_len,
            self.memory_len,
            self.memory_etag.as_deref().unwrap_or("-"),
            self.trace_crc,
            self.pages,
            self.data_len,
            self.part_size
        );
        for (n, crc) in self.part_crcs.iter().enumerate() {
            let _ = writeln!(s, "part {n} {crc:#018x}");
        }
        s
    }

    /// The header's length, from its first [`HEADER_BLOCK`] bytes (or all
    /// of a shorter file): how much to read before [`parse`](Self::parse).
    ///
    /// # Errors
    /// Not a pages file, another version, or no valid `header-length`.
    pub fn header_len_of(first: &[u8]) -> Result<u64, String> {
        let text = text_of(first)?;
        let mut lines = text.lines();
        check_magic(lines.next().unwrap_or(""))?;
        let len = lines
            .next()
            .and_then(|l| l.strip_prefix("header-length "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .ok_or("the second line is not \"header-length N\"")?;
        if len == 0 || !len.is_multiple_of(HEADER_BLOCK) {
            return Err(format!(
                "header-length {len} is not a multiple of {HEADER_BLOCK}"
            ));
        }
        Ok(len)
    }

    /// Parses a header from the file's first bytes (at least its
    /// `header-length`).
    ///
    /// # Errors
    /// What is wrong, in words: not a pages file, another version, a
    /// missing, repeated, unknown or malformed line, parts that do not add
    /// up, fewer bytes than the header's length.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::pack::PackHeader;
    /// let e = PackHeader::parse(b"herdless-uffd pages 7\nheader-length 4096\n").unwrap_err();
    /// assert!(e.contains("version 7"), "{e}");
    /// ```
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let header_len = Self::header_len_of(&bytes[..bytes.len().min(HEADER_BLOCK as usize)])?;
        if (bytes.len() as u64) < header_len {
            return Err(format!(
                "the header says it is {header_len} bytes, only {} are there",
                bytes.len()
            ));
        }
        let text = text_of(&bytes[..header_len as usize])?;
        let mut lines = text.lines().skip(2);
        let mut next = |key: &str| -> Result<String, String> {
            let line = lines.next().ok_or(format!("no {key} line"))?;
            match line.split_once(' ') {
                Some((k, v)) if k == key => Ok(v.trim().to_string()),
                _ => Err(format!("expected a {key} line, found {line:?}")),
            }
        };
        let num = |key: &str, v: String| -> Result<u64, String> {
            v.parse()
                .map_err(|_| format!("{key} {v:?} is not a number"))
        };
        let hex = |key: &str, v: String| -> Result<u64, String> {
            v.strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .ok_or(format!("{key} {v:?} is not a hex number"))
        };
        let memory_len = num("memory-length", next("memory-length")?)?;
        let etag = next("memory-etag")?;
        let trace_crc = hex("trace-crc64", next("trace-crc64")?)?;
        let pages = num("pages", next("pages")?)?;
        let data_len = num("data-length", next("data-length")?)?;
        let part_size = num("part-size", next("part-size")?)?;
        if part_size <= header_len || !part_size.is_power_of_two() {
            return Err(format!(
                "part-size {part_size} is not a power of two larger than the header's {header_len} \
                 bytes"
            ));
        }
        let file_len = header_len
            .checked_add(data_len)
            .ok_or("data-length overflows")?;
        let parts = file_len.div_ceil(part_size);
        let mut part_crcs = Vec::new();
        for n in 0..parts {
            let v = next("part")?;
            let (index, crc) = v.split_once(' ').ok_or(format!("part {v:?}: two words"))?;
            if index.parse::<u64>() != Ok(n) {
                return Err(format!("part {index} where part {n} was expected"));
            }
            part_crcs.push(hex("part", crc.to_string())?);
        }
        if let Some(extra) = lines.next() {
            return Err(format!("unexpected line {extra:?} after the parts"));
        }
        Ok(PackHeader {
            header_len,
            memory_len,
            memory_etag: (etag != "-").then_some(etag),
            trace_crc,
            pages,
            data_len,
            part_size,
            part_crcs,
        })
    }

    /// Whether this pack holds exactly `trace`'s pages: an error in words
    /// if not.
    ///
    /// # Errors
    /// Another memory length, another trace (its checksum), or pages and
    /// bytes that are not the trace's.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::pack::PackHeader;
    /// use herdless_pager::restore::Trace;
    /// let t = Trace::from_offsets(4096, 1 << 20, [0, 0x1000]);
    /// let h = PackHeader::for_data(&t, None, 0);
    /// assert!(h.matches(&t).is_ok());
    /// let other = Trace::from_offsets(4096, 1 << 20, [0, 0x2000]);
    /// assert!(h.matches(&other).unwrap_err().contains("another trace"));
    /// ```
    pub fn matches(&self, trace: &Trace) -> Result<(), String> {
        if self.memory_len != trace.file_len {
            return Err(format!(
                "packed from a {}-byte memory, this one has {}: another snapshot",
                self.memory_len, trace.file_len
            ));
        }
        if self.trace_crc != crc64(trace.to_text().as_bytes()) {
            return Err("packed from another trace (its checksum differs)".into());
        }
        if self.pages != trace.pages() || self.data_len != trace.bytes() {
            return Err(format!(
                "holds {} pages in {} bytes, the trace {} in {}",
                self.pages,
                self.data_len,
                trace.pages(),
                trace.bytes()
            ));
        }
        Ok(())
    }
}

/// The text before the first NUL, as UTF-8.
fn text_of(bytes: &[u8]) -> Result<&str, String> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    std::str::from_utf8(&bytes[..end]).map_err(|_| "the header is not text".to_string())
}

fn check_magic(first: &str) -> Result<(), String> {
    let version = first.strip_prefix(MAGIC).map(str::trim).ok_or(format!(
        "not a herdless-uffd pages file (expected \"{MAGIC} {VERSION}\")"
    ))?;
    if version != VERSION.to_string() {
        return Err(format!(
            "pages file version {version}; this herdless-uffd reads version {VERSION}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> PackHeader {
        let t = Trace::from_offsets(4096, 64 << 20, (0..3000).map(|i| i * 8192));
        PackHeader::for_data(&t, Some("\"e\""), 0xdead_beef)
    }

    #[test]
    fn a_header_round_trips_and_its_parts_cover_the_data_once() {
        let h = header();
        assert_eq!(PackHeader::parse(&h.to_bytes()).unwrap(), h);
        // Without the padding: shorter than it says.
        let e = PackHeader::parse(h.to_text().as_bytes()).unwrap_err();
        assert!(e.contains("only"), "{e}");
        let covered: u64 = (0..h.part_crcs.len())
            .map(|n| h.part(n))
            .map(|r| r.end - r.start)
            .sum();
        assert_eq!(covered, h.data_len);
        assert_eq!(h.part(0).start, h.header_len);
        assert!(h.part_size > h.header_len);
    }

    #[test]
    fn a_header_too_large_for_a_block_grows_in_blocks_and_parts_grow_past_it() {
        // 200 000 parts' lines do not fit in 2 MiB: the part size doubles.
        let t = Trace::from_offsets(4096, 1 << 42, [0]);
        let mut t = t;
        t.runs[0].pages = (200_000u64 * DEFAULT_PART_SIZE) / 4096;
        let h = PackHeader::for_data(&t, None, 1);
        assert!(h.header_len.is_multiple_of(HEADER_BLOCK) && h.header_len > HEADER_BLOCK);
        assert!(
            h.part_size > h.header_len,
            "{} {}",
            h.part_size,
            h.header_len
        );
        assert!(h.to_text().len() as u64 <= h.header_len);
        assert_eq!(PackHeader::parse(&h.to_bytes()).unwrap(), h);
    }

    #[test]
    fn bad_headers_are_refused_with_what_is_wrong() {
        let good = header().to_text();
        let e = |text: &str| {
            let mut b = text.as_bytes().to_vec();
            b.resize(b.len().max(4096), 0);
            PackHeader::parse(&b).unwrap_err()
        };
        assert!(e("hello\n").contains("not a herdless-uffd pages file"));
        assert!(e(&good.replacen("pages 1", "pages 2", 1)).contains("version 2"));
        assert!(
            e(&good.replacen("header-length 4096", "header-length 100", 1))
                .contains("not a multiple")
        );
        assert!(
            e(&good.replacen("header-length 4096", "header-length 8192", 1)).contains("only 4096")
        );
        assert!(e(&good.replacen("memory-length", "memory-size", 1)).contains("memory-length"));
        assert!(e(&good.replacen("pages 3000", "pages x", 1)).contains("not a number"));
        assert!(e(&good.replacen("trace-crc64 0x", "trace-crc64 ", 1)).contains("hex"));
        assert!(e(&good.replacen("part-size 2097152", "part-size 4096", 1)).contains("part-size"));
        // Data that needs more parts than are listed, or fewer.
        assert!(
            e(&good.replacen("data-length 12288000", "data-length 99999999", 1))
                .contains("no part line")
        );
        assert!(
            e(&good.replacen("data-length 12288000", "data-length 1", 1))
                .contains("unexpected line")
        );
        assert!(e(&good.replacen("part 1 ", "part 7 ", 1)).contains("part 7 where part 1"));
        assert!(e("herdless-uffd pages 1\n\u{0}").contains("header-length"));
        assert!(PackHeader::parse(&[0xff; 4096])
            .unwrap_err()
            .contains("not text"));
    }

    #[test]
    fn a_header_matches_its_trace_only() {
        let t = Trace::from_offsets(4096, 1 << 20, [0x1000, 0x5000]);
        let h = PackHeader::for_data(&t, None, 0);
        assert!(h.matches(&t).is_ok());
        let longer = Trace {
            file_len: 2 << 20,
            ..t.clone()
        };
        assert!(h.matches(&longer).unwrap_err().contains("another snapshot"));
        let mut counted = h.clone();
        counted.pages = 3;
        assert!(counted.matches(&t).unwrap_err().contains("holds 3 pages"));
    }
}
