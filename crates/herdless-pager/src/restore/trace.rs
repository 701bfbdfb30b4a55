//! Working-set traces: the pages a restored VM faulted on, in first-touch
//! order, written by `herdless-uffd --record` and read by `--prefetch`.
//!
//! # Format, version 1
//! A text file (so it can be read, diffed and cut by hand):
//! ```text
//! herdless-uffd trace 1
//! page-size 4096
//! file-length 268435456
//! pages 3
//! # memory-file offset (hex), pages: runs in first-touch order
//! 0x1a000 2
//! 0x80000 1
//! ```
//! The first line names the format and its version. Header lines
//! (`key value`) follow: `page-size` (bytes), `file-length` (the memory
//! file's length: a trace recorded on another snapshot is refused) and
//! `pages` (the sum of the runs, a check). Then one line per run: the
//! offset in the memory file of its first page (hex, page-aligned) and its
//! page count; consecutive faults on consecutive pages form one run.
//! Offsets are in the memory file, not in the VMM's address space, which
//! changes with every restore. Blank lines and lines starting with `#` are
//! ignored. A reader refuses a version it does not know, an unknown header
//! key, and any run outside the file.

use std::fmt::Write as _;
use std::path::Path;

use super::RestoreError;

/// The first line of every trace.
const MAGIC: &str = "herdless-uffd trace";
/// The version this code writes and reads.
pub const VERSION: u32 = 1;

/// A working set: runs of pages of the memory file, in first-touch order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// Page size in bytes.
    pub page_size: u64,
    /// The memory file's length in bytes.
    pub file_len: u64,
    /// `(offset of the first page, pages)`, in first-touch order.
    pub runs: Vec<(u64, u64)>,
}

impl Trace {
    /// A trace of the pages at `offsets` (page-aligned, in first-touch
    /// order), consecutive ones joined into runs.
    pub fn from_offsets(
        page_size: u64,
        file_len: u64,
        offsets: impl IntoIterator<Item = u64>,
    ) -> Self {
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for off in offsets {
            match runs.last_mut() {
                Some((start, n)) if *start + *n * page_size == off => *n += 1,
                _ => runs.push((off, 1)),
            }
        }
        Trace {
            page_size,
            file_len,
            runs,
        }
    }

    /// Pages in all runs.
    pub fn pages(&self) -> u64 {
        self.runs.iter().map(|r| r.1).sum()
    }

    /// The trace as text (module doc).
    pub fn to_text(&self) -> String {
        let mut s = format!(
            "{MAGIC} {VERSION}\npage-size {}\nfile-length {}\npages {}\n\
             # memory-file offset (hex), pages: runs in first-touch order\n",
            self.page_size,
            self.file_len,
            self.pages()
        );
        for (off, n) in &self.runs {
            let _ = writeln!(s, "{off:#x} {n}");
        }
        s
    }

    /// Parses `text` (module doc); `path` names the file in errors.
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
        if version != VERSION.to_string() {
            return Err(bad(
                1,
                format!("trace version {version:?}; this herdless-uffd reads version {VERSION}"),
            ));
        }
        let mut t = Trace::default();
        let mut declared_pages = None;
        for (n, line) in lines {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut words = line.split_whitespace();
            let (Some(a), Some(b), None) = (words.next(), words.next(), words.next()) else {
                return Err(bad(n, format!("expected two words, found {line:?}")));
            };
            let num = |v: &str| -> Result<u64, RestoreError> {
                v.parse()
                    .map_err(|_| bad(n, format!("{v:?} is not a number")))
            };
            if let Some(hex) = a.strip_prefix("0x") {
                let off = u64::from_str_radix(hex, 16)
                    .map_err(|_| bad(n, format!("{a:?} is not a hex offset")))?;
                let pages = num(b)?;
                if t.page_size == 0 || t.file_len == 0 {
                    return Err(bad(
                        n,
                        "a run before the page-size and file-length headers".into(),
                    ));
                }
                if pages == 0 || off % t.page_size != 0 {
                    return Err(bad(n, format!("run {a} {b}: not page-aligned or empty")));
                }
                let end = pages
                    .checked_mul(t.page_size)
                    .and_then(|len| off.checked_add(len));
                if end.is_none_or(|e| e > t.file_len) {
                    return Err(bad(
                        n,
                        format!("run {a} {b} ends past the file's {} bytes", t.file_len),
                    ));
                }
                t.runs.push((off, pages));
                continue;
            }
            if !t.runs.is_empty() {
                return Err(bad(n, format!("header {a:?} after the first run")));
            }
            match a {
                "page-size" => t.page_size = num(b)?,
                "file-length" => t.file_len = num(b)?,
                "pages" => declared_pages = Some(num(b)?),
                _ => return Err(bad(n, format!("unknown header {a:?}"))),
            }
            if a == "page-size" && !(t.page_size >= 4096 && t.page_size.is_power_of_two()) {
                return Err(bad(n, format!("page size {b} is not a page size")));
            }
        }
        if t.page_size == 0 || t.file_len == 0 {
            return Err(RestoreError::Trace {
                path: path.to_path_buf(),
                reason: "missing the page-size or file-length header".into(),
            });
        }
        if let Some(p) = declared_pages {
            if p != t.pages() {
                return Err(RestoreError::Trace {
                    path: path.to_path_buf(),
                    reason: format!("says {p} pages, its runs hold {}", t.pages()),
                });
            }
        }
        Ok(t)
    }

    /// Reads and parses the trace at `path`.
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

    #[test]
    fn a_trace_round_trips_and_joins_consecutive_pages() {
        let t = Trace::from_offsets(4096, 1 << 20, [0x1000, 0x2000, 0x8000, 0x3000, 0x4000]);
        assert_eq!(t.runs, vec![(0x1000, 2), (0x8000, 1), (0x3000, 2)]);
        let text = t.to_text();
        assert!(text.starts_with("herdless-uffd trace 1\n"), "{text}");
        assert_eq!(Trace::parse(&text, Path::new("t")).unwrap(), t);
    }

    #[test]
    fn malformed_traces_are_refused_with_the_line() {
        let p = Path::new("t");
        let head = "herdless-uffd trace 1\npage-size 4096\nfile-length 65536\n";
        let e = |body: &str| Trace::parse(body, p).unwrap_err().to_string();
        assert!(e("hello\n").contains("not a herdless-uffd trace"));
        assert!(e("herdless-uffd trace 2\n").contains("version \"2\""));
        assert!(e(&format!("{head}0x1001 1\n")).contains("line 4"));
        assert!(e(&format!("{head}0xf000 2\n")).contains("past the file"));
        assert!(e(&format!("{head}0x0 0\n")).contains("empty"));
        assert!(e(&format!("{head}colour blue\n")).contains("unknown header"));
        assert!(e(&format!("{head}pages 3\n0x0 1\n")).contains("says 3 pages"));
        assert!(e("herdless-uffd trace 1\n0x0 1\n").contains("before the page-size"));
        assert!(
            e(&format!("{head}0xffffffffffff0000 18446744073709551615\n"))
                .contains("past the file")
        );
    }
}
