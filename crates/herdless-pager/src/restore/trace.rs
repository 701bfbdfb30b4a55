//! Working-set traces: the pages a restored VM faulted on, in first-touch
//! order, written by `herdless-uffd --record` and read by `--prefetch` and
//! `--populate=TRACE`.
//!
//! # Format, version 2
//! A text file (so it can be read, diffed and cut by hand):
//! ```text
//! herdless-uffd trace 2
//! file-length 268435456
//! pages 3
//! # runs in first-touch order: memory-file offset (hex), pages, page size
//! 0x1a000 2 4096
//! 0x8000000 1 2097152
//! ```
//! The first line names the format and its version. Header lines
//! (`key value`) follow: `file-length` (the memory file's length: a trace
//! recorded on another snapshot is refused) and `pages` (the sum of the
//! runs' pages, a check). Then one line per run: the offset in the memory
//! file of its first page (hex, aligned to its page size), its page count,
//! and its page size in bytes (4096, or 2097152 for a region of 2 MiB
//! hugetlbfs pages: each region's faults are recorded in its own pages,
//! and one restore may have both); consecutive faults on consecutive
//! pages of one size form one run. Offsets are in the memory file, not in
//! the VMM's address space, which changes with every restore. Blank lines
//! and lines starting with `#` are ignored. A reader refuses a version it
//! does not know, an unknown header key, and any run outside the file.
//!
//! A trace is served by bytes: its runs are mapped onto whatever pages the
//! restore's regions have (a run of 4 KiB pages in a region of 2 MiB pages
//! prefetches the 2 MiB pages holding it), so a trace recorded with one
//! page size serves a restore with another.
//!
//! # Version 1 (still read)
//! One page size for the whole trace, as a header (`page-size 4096`), and
//! two words per run (offset, pages).

use std::fmt::Write as _;
use std::path::Path;

use super::RestoreError;

/// The first line of every trace.
const MAGIC: &str = "herdless-uffd trace";
/// The version this code writes (it reads this one and 1).
///
/// # Examples
/// ```
/// use herdless_pager::restore::{trace::VERSION, Trace};
/// let text = Trace::from_offsets(4096, 1 << 20, [0]).to_text();
/// assert_eq!(text.lines().next(), Some(format!("herdless-uffd trace {VERSION}").as_str()));
/// ```
pub const VERSION: u32 = 2;

/// A run of consecutive pages of one size, in the memory file.
///
/// # Examples
/// ```
/// use herdless_pager::restore::{Run, Trace};
/// let t = Trace::from_offsets(4096, 1 << 20, [0x3000, 0x4000, 0x5000]);
/// assert_eq!(t.runs, [Run { offset: 0x3000, pages: 3, page_size: 4096 }]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// Offset of its first page in the memory file.
    pub offset: u64,
    /// Pages in the run.
    pub pages: u64,
    /// Their size in bytes.
    pub page_size: u64,
}

impl Run {
    /// Its length in bytes (saturating).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::Run;
    /// assert_eq!(Run { offset: 0, pages: 3, page_size: 2 << 20 }.bytes(), 6 << 20);
    /// assert_eq!(Run { offset: 0, pages: u64::MAX, page_size: 4096 }.bytes(), u64::MAX);
    /// ```
    pub fn bytes(&self) -> u64 {
        self.pages.saturating_mul(self.page_size)
    }
}

/// A working set: runs of pages of the memory file, in first-touch order.
///
/// ```
/// use herdless_pager::restore::{Run, Trace};
/// // Two 4 KiB pages, then a 2 MiB page, of a 16 MiB memory file.
/// let t = Trace::from_pages(16 << 20, [(0x1000, 4096), (0x2000, 4096), (0x40_0000, 2 << 20)]);
/// assert_eq!(t.runs[0], Run { offset: 0x1000, pages: 2, page_size: 4096 });
/// assert_eq!((t.pages(), t.bytes()), (3, 8192 + (2 << 20)));
/// let again = Trace::parse(&t.to_text(), "ws.trace".as_ref())?;
/// assert_eq!(again, t);
/// # Ok::<(), herdless_pager::restore::RestoreError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The memory file's length in bytes.
    pub file_len: u64,
    /// The runs, in first-touch order.
    pub runs: Vec<Run>,
}

impl Trace {
    /// A trace of the pages of `page_size` bytes at `offsets` (aligned, in
    /// first-touch order), consecutive ones joined into runs.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::{Run, Trace};
    /// let t = Trace::from_offsets(4096, 1 << 20, [0x1000, 0x2000, 0x8000]);
    /// assert_eq!(t.runs, [
    ///     Run { offset: 0x1000, pages: 2, page_size: 4096 },
    ///     Run { offset: 0x8000, pages: 1, page_size: 4096 },
    /// ]);
    /// ```
    pub fn from_offsets(
        page_size: u64,
        file_len: u64,
        offsets: impl IntoIterator<Item = u64>,
    ) -> Self {
        Self::from_pages(file_len, offsets.into_iter().map(|o| (o, page_size)))
    }

    /// A trace of the pages `(offset, page size)` (aligned, in first-touch
    /// order), consecutive ones of one size joined into runs.
    ///
    /// # Examples
    /// A 4 KiB page right before a 2 MiB one starts another run:
    /// ```
    /// use herdless_pager::restore::Trace;
    /// let huge = 2u64 << 20;
    /// let t = Trace::from_pages(4 * huge, [(huge - 4096, 4096), (huge, huge), (2 * huge, huge)]);
    /// assert_eq!(t.runs.len(), 2);
    /// assert_eq!((t.runs[1].pages, t.runs[1].page_size), (2, huge));
    /// ```
    pub fn from_pages(file_len: u64, pages: impl IntoIterator<Item = (u64, u64)>) -> Self {
        let mut runs: Vec<Run> = Vec::new();
        for (offset, page_size) in pages {
            match runs.last_mut() {
                Some(r)
                    if r.page_size == page_size
                        && r.offset.checked_add(r.bytes()) == Some(offset) =>
                {
                    r.pages += 1;
                }
                _ => runs.push(Run {
                    offset,
                    pages: 1,
                    page_size,
                }),
            }
        }
        Trace { file_len, runs }
    }

    /// Pages in all runs (of whatever size; saturating).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::Trace;
    /// let t = Trace::from_pages(4 << 20, [(0, 4096), (2 << 20, 2 << 20)]);
    /// assert_eq!(t.pages(), 2);
    /// ```
    pub fn pages(&self) -> u64 {
        // Saturating: a crafted trace's counts may sum past u64.
        self.runs.iter().fold(0, |n, r| n.saturating_add(r.pages))
    }

    /// Bytes in all runs (saturating).
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::Trace;
    /// let t = Trace::from_pages(4 << 20, [(0, 4096), (2 << 20, 2 << 20)]);
    /// assert_eq!(t.bytes(), 4096 + (2 << 20));
    /// ```
    pub fn bytes(&self) -> u64 {
        self.runs.iter().fold(0, |n, r| n.saturating_add(r.bytes()))
    }

    /// The trace as text (module doc), in the current version.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::Trace;
    /// let t = Trace::from_offsets(4096, 65536, [0x1000, 0x2000, 0x8000]);
    /// let text = t.to_text();
    /// let lines: Vec<&str> = text.lines().collect();
    /// assert_eq!(lines[..3], ["herdless-uffd trace 2", "file-length 65536", "pages 3"]);
    /// assert!(lines[3].starts_with('#')); // a comment naming the columns
    /// assert_eq!(lines[4..], ["0x1000 2 4096", "0x8000 1 4096"]);
    /// ```
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{MAGIC} {VERSION}\nfile-length {}\npages {}\n\
             # runs in first-touch order: memory-file offset (hex), pages, page size\n",
            self.file_len,
            self.pages()
        );
        for r in &self.runs {
            let _ = writeln!(s, "{:#x} {} {}", r.offset, r.pages, r.page_size);
        }
        s
    }

    /// Parses `text` (module doc; versions 1 and 2); `path` names the file
    /// in errors.
    ///
    /// # Errors
    /// [`RestoreError::Trace`], with the line and what is wrong with it.
    ///
    /// # Examples
    /// ```
    /// use std::path::Path;
    /// use herdless_pager::restore::{Run, Trace};
    /// let text = "herdless-uffd trace 2\nfile-length 65536\n0x1000 2 4096\n";
    /// let t = Trace::parse(text, Path::new("vm.trace"))?;
    /// assert_eq!(t.runs, [Run { offset: 0x1000, pages: 2, page_size: 4096 }]);
    /// let past_the_end = "herdless-uffd trace 2\nfile-length 65536\n0xf000 2 4096\n";
    /// let e = Trace::parse(past_the_end, Path::new("vm.trace")).err().unwrap();
    /// assert_eq!(e.to_string(), "trace vm.trace: line 3: run 0xf000 2 4096 ends past the file's 65536 bytes");
    /// # Ok::<(), herdless_pager::restore::RestoreError>(())
    /// ```
    pub fn parse(text: &str, path: &Path) -> Result<Self, RestoreError> {
        let bad = |line: usize, reason: String| RestoreError::Trace {
            path: path.to_path_buf(),
            reason: format!("line {line}: {reason}"),
        };
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim()));
        let (_, first) = lines.next().unwrap_or((1, ""));
        let version = first.strip_prefix(MAGIC).map(str::trim).ok_or_else(|| {
            bad(
                1,
                format!("not a herdless-uffd trace (expected \"{MAGIC} {VERSION}\")"),
            )
        })?;
        let version: u32 = match version {
            "1" => 1,
            "2" => 2,
            other => {
                return Err(bad(
                    1,
                    format!(
                        "trace version {other:?}; this herdless-uffd reads versions 1 and \
                         {VERSION}"
                    ),
                ))
            }
        };
        let mut t = Trace::default();
        // Version 1's one page size.
        let mut v1_page = 0u64;
        let mut declared_pages = None;
        for (n, line) in lines {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let num = |v: &str| -> Result<u64, RestoreError> {
                v.parse()
                    .map_err(|_| bad(n, format!("{v:?} is not a number")))
            };
            let page_size_ok = |size: u64, v: &str| {
                if size >= 4096 && size.is_power_of_two() {
                    Ok(size)
                } else {
                    Err(bad(n, format!("page size {v} is not a page size")))
                }
            };
            if let Some(hex) = words[0].strip_prefix("0x") {
                let want = if version == 1 { 2 } else { 3 };
                if words.len() != want {
                    return Err(bad(
                        n,
                        format!("expected {want} words in a run, found {line:?}"),
                    ));
                }
                let offset = u64::from_str_radix(hex, 16)
                    .map_err(|_| bad(n, format!("{:?} is not a hex offset", words[0])))?;
                let pages = num(words[1])?;
                let page_size = if version == 1 {
                    v1_page
                } else {
                    page_size_ok(num(words[2])?, words[2])?
                };
                if page_size == 0 || t.file_len == 0 {
                    let headers = if version == 1 {
                        "page-size and file-length headers"
                    } else {
                        "file-length header"
                    };
                    return Err(bad(n, format!("a run before the {headers}")));
                }
                let run = Run {
                    offset,
                    pages,
                    page_size,
                };
                if pages == 0 || offset % page_size != 0 {
                    return Err(bad(n, format!("run {line}: not page-aligned or empty")));
                }
                let end = pages
                    .checked_mul(page_size)
                    .and_then(|len| offset.checked_add(len));
                if end.is_none_or(|e| e > t.file_len) {
                    return Err(bad(
                        n,
                        format!("run {line} ends past the file's {} bytes", t.file_len),
                    ));
                }
                t.runs.push(run);
                continue;
            }
            let [key, value] = words[..] else {
                return Err(bad(n, format!("expected two words, found {line:?}")));
            };
            if !t.runs.is_empty() {
                return Err(bad(n, format!("header {key:?} after the first run")));
            }
            match key {
                "page-size" if version == 1 => v1_page = page_size_ok(num(value)?, value)?,
                "file-length" => t.file_len = num(value)?,
                "pages" => declared_pages = Some(num(value)?),
                _ => return Err(bad(n, format!("unknown header {key:?}"))),
            }
        }
        if t.file_len == 0 || (version == 1 && v1_page == 0) {
            return Err(RestoreError::Trace {
                path: path.to_path_buf(),
                reason: "missing the page-size or file-length header".into(),
            });
        }
        if let Some(p) = declared_pages
            && p != t.pages()
        {
            return Err(RestoreError::Trace {
                path: path.to_path_buf(),
                reason: format!("says {p} pages, its runs hold {}", t.pages()),
            });
        }
        Ok(t)
    }

    /// Reads and parses the trace at `path`.
    ///
    /// # Errors
    /// [`RestoreError::Trace`]: the file cannot be read, or
    /// [`parse`](Self::parse) refuses it.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::restore::{RestoreError, Trace};
    /// let path = std::env::temp_dir().join(format!("vm-{}.trace", std::process::id()));
    /// let t = Trace::from_offsets(4096, 1 << 20, [0, 0x5000]);
    /// std::fs::write(&path, t.to_text())?;
    /// assert_eq!(Trace::read(&path)?, t);
    /// std::fs::remove_file(&path)?;
    /// assert!(matches!(Trace::read(&path), Err(RestoreError::Trace { .. }))); // gone
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read(path: &Path) -> Result<Self, RestoreError> {
        let text = std::fs::read_to_string(path).map_err(|e| RestoreError::Trace {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Self::parse(&text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(offset: u64, pages: u64, page_size: u64) -> Run {
        Run {
            offset,
            pages,
            page_size,
        }
    }

    #[test]
    fn a_trace_round_trips_and_joins_consecutive_pages_of_one_size() {
        let t = Trace::from_offsets(4096, 1 << 20, [0x1000, 0x2000, 0x8000, 0x3000, 0x4000]);
        assert_eq!(
            t.runs,
            vec![
                run(0x1000, 2, 4096),
                run(0x8000, 1, 4096),
                run(0x3000, 2, 4096)
            ]
        );
        let text = t.to_text();
        assert!(text.starts_with("herdless-uffd trace 2\n"), "{text}");
        assert_eq!(Trace::parse(&text, Path::new("t")).unwrap(), t);
        // Mixed sizes: a 4 KiB page right before a 2 MiB one is another run.
        let h = 2u64 << 20;
        let m = Trace::from_pages(8 * h, [(h - 4096, 4096), (h, h), (2 * h, h), (0, 4096)]);
        assert_eq!(
            m.runs,
            vec![run(h - 4096, 1, 4096), run(h, 2, h), run(0, 1, 4096)]
        );
        assert_eq!(Trace::parse(&m.to_text(), Path::new("t")).unwrap(), m);
    }

    #[test]
    fn a_version_1_trace_is_still_read() {
        let v1 = "herdless-uffd trace 1\npage-size 4096\nfile-length 65536\npages 3\n\
                  0x1000 2\n0x8000 1\n";
        let t = Trace::parse(v1, Path::new("t")).unwrap();
        assert_eq!(t.file_len, 65536);
        assert_eq!(t.runs, vec![run(0x1000, 2, 4096), run(0x8000, 1, 4096)]);
    }

    #[test]
    fn page_counts_summing_past_u64_saturate_instead_of_panicking() {
        // Each run fits the (claimed) file; together they count more pages
        // than a u64 holds.
        let mut text = String::from("herdless-uffd trace 2\nfile-length 9223372036854775808\n");
        for _ in 0..10_000 {
            text.push_str("0x0 2251799813685248 4096\n");
        }
        let t = Trace::parse(&text, Path::new("t")).unwrap();
        assert_eq!((t.pages(), t.bytes()), (u64::MAX, u64::MAX));
        let declared = text.replacen("\n0x0", "\npages 1\n0x0", 1);
        let e = Trace::parse(&declared, Path::new("t")).unwrap_err();
        assert!(e.to_string().contains("says 1 pages"), "{e}");
    }

    #[test]
    fn malformed_traces_are_refused_with_the_line() {
        let p = Path::new("t");
        let head = "herdless-uffd trace 2\nfile-length 65536\n";
        let e = |body: &str| Trace::parse(body, p).unwrap_err().to_string();
        assert!(e("hello\n").contains("not a herdless-uffd trace"));
        assert!(e("herdless-uffd trace 3\n").contains("version \"3\""));
        assert!(e(&format!("{head}0x1001 1 4096\n")).contains("line 3"));
        assert!(e(&format!("{head}0xf000 2 4096\n")).contains("past the file"));
        assert!(e(&format!("{head}0x0 0 4096\n")).contains("empty"));
        assert!(e(&format!("{head}0x1000 1 2097152\n")).contains("not page-aligned"));
        assert!(e(&format!("{head}0x0 1 3000\n")).contains("not a page size"));
        assert!(e(&format!("{head}0x0 1\n")).contains("expected 3 words"));
        assert!(e(&format!("{head}colour blue\n")).contains("unknown header"));
        assert!(e(&format!("{head}page-size 4096\n")).contains("unknown header"));
        assert!(e(&format!("{head}pages 3\n0x0 1 4096\n")).contains("says 3 pages"));
        assert!(e("herdless-uffd trace 2\n0x0 1 4096\n").contains("before the file-length"));
        assert!(e("herdless-uffd trace 1\n0x0 1\n").contains("before the page-size"));
        assert!(e(&format!(
            "{head}0xffffffffffff0000 18446744073709551615 4096\n"
        ))
        .contains("past the file"));
        let v1 = "herdless-uffd trace 1\npage-size 4096\nfile-length 65536\n";
        assert!(e(&format!("{v1}0x0 1 4096\n")).contains("expected 2 words"));
    }
}
