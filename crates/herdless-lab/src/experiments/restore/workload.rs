//! The guest-like workload of `restore`: a working set of W pages of the
//! snapshot, in a repeatable scattered order with some sequential runs,
//! touched (every word of every page summed) from T threads; and the
//! snapshot file it restores, with the sum of each of its pages, so that a
//! page served wrong fails the measurement.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use crate::harness::scratch::{self, PerSize};
use crate::harness::LabError;

/// Bytes per page.
pub(crate) const PAGE: usize = 4096;

/// A snapshot's memory file: an unlinked tmpfs file, reachable by path
/// through `/proc/self/fd` while the lab runs, and the sum of each page's
/// little-endian words.
pub(crate) struct Snapshot {
    _file: File,
    /// A path `herdless-uffd` can open.
    pub(crate) path: PathBuf,
    /// Bytes.
    pub(crate) len: usize,
    /// Wrapping sum of the words of page `i`.
    pub(crate) page_sums: Vec<u64>,
}

/// The snapshot of `len` bytes, written once per size (in tmpfs, unlinked:
/// [`scratch`]).
pub(crate) fn snapshot(len: usize) -> Result<Arc<Snapshot>, LabError> {
    static FILES: PerSize<Arc<Snapshot>> = PerSize::new();
    FILES.get(len, || {
        let mut file = scratch::tmpfs_file()?;
        let mut page_sums = Vec::with_capacity(len / PAGE);
        let mut chunk = vec![0u8; 1 << 20];
        let mut word = 0x9E37_79B9_7F4A_7C15u64;
        let mut at = 0;
        while at < len {
            let n = chunk.len().min(len - at);
            for page in chunk[..n].chunks_exact_mut(PAGE) {
                let mut sum = 0u64;
                for w in page.chunks_exact_mut(8) {
                    word ^= word << 13;
                    word ^= word >> 7;
                    word ^= word << 17;
                    w.copy_from_slice(&word.to_le_bytes());
                    sum = sum.wrapping_add(word);
                }
                page_sums.push(sum);
            }
            file.write_all(&chunk[..n]).map_err(|e| LabError::os("writing the snapshot", e))?;
            at += n;
        }
        file.flush().map_err(|e| LabError::os("flushing the snapshot", e))?;
        Ok(Arc::new(Snapshot { path: scratch::fd_path(&file), _file: file, len, page_sums }))
    })
}

/// The working set: `pages_wanted` distinct pages of a `pages`-page
/// snapshot as runs (first page, length), in touch order. Runs start at
/// scattered pages; half are one page, a third 2 to 8 pages, the rest 16
/// to 64 (the sequential stretches of a guest's heap or page cache).
/// Repeatable: the same arguments give the same runs.
pub(crate) fn working_set(pages: usize, pages_wanted: usize) -> Vec<(usize, usize)> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut taken = vec![false; pages];
    let mut runs = Vec::new();
    let mut count = 0;
    while count < pages_wanted.min(pages) {
        let roll = next() % 6;
        let len = match roll {
            0..=2 => 1,
            3 | 4 => 2 + (next() % 7) as usize,
            _ => 16 + (next() % 49) as usize,
        };
        let start = (next() % pages as u64) as usize;
        let mut p = start;
        while p < pages && p < start + len && count < pages_wanted {
            if taken[p] {
                break;
            }
            taken[p] = true;
            count += 1;
            p += 1;
        }
        if p > start {
            runs.push((start, p - start));
        }
    }
    runs
}

/// The runs thread `t` of `threads` touches: every `threads`-th run.
pub(crate) fn share(runs: &[(usize, usize)], t: usize, threads: usize) -> Vec<(usize, usize)> {
    runs.iter().skip(t).step_by(threads).copied().collect()
}

/// Touches `runs` of the guest memory at `base`: sums every word of every
/// page (reads fault pages in); the wrapping sum.
pub(crate) fn touch(base: usize, runs: &[(usize, usize)]) -> u64 {
    let mut sum = 0u64;
    for &(first, len) in runs {
        for p in first..first + len {
            let page = (base + p * PAGE) as *const u64;
            for w in 0..PAGE / 8 {
                // SAFETY: the page lies in the guest memory, mapped until the
                // measurement ends; reads fault pages in through the handler.
                sum =
                    sum.wrapping_add(u64::from_le(unsafe { std::ptr::read_volatile(page.add(w)) }));
            }
        }
    }
    sum
}

/// The sum `touch` must find for `runs`.
pub(crate) fn expected(snapshot: &Snapshot, runs: &[(usize, usize)]) -> u64 {
    runs.iter()
        .flat_map(|&(first, len)| first..first + len)
        .fold(0u64, |a, p| a.wrapping_add(snapshot.page_sums[p]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_working_set_is_repeatable_distinct_and_of_the_size_asked() {
        let a = working_set(10_000, 1_000);
        assert_eq!(a, working_set(10_000, 1_000));
        let mut seen = vec![false; 10_000];
        let mut n = 0;
        for &(s, l) in &a {
            for (p, seen) in seen.iter_mut().enumerate().skip(s).take(l) {
                assert!(!*seen, "page {p} twice");
                *seen = true;
                n += 1;
            }
        }
        assert_eq!(n, 1_000);
        assert!(a.iter().any(|r| r.1 >= 16), "some sequential runs");
        assert!(a.iter().filter(|r| r.1 == 1).count() > a.len() / 4, "mostly scattered");
    }
}
