//! Scratch files for experiments: what the measured code reads from a file
//! (the pager's backing file, a snapshot's memory) kept in tmpfs, so that
//! no disk read is timed, and unlinked from the start (`tempfile`), so that
//! nothing is left behind however the lab ends; each made once per size
//! and shared by every variant and repetition ([`Memo`], which keeps
//! traces and snapshots the same way, per case). Private
//! folders (sockets, logs, a host cache) come from [`scratch_dir`],
//! removed when dropped.

use std::collections::HashMap;
use std::fs::File;
use std::hash::Hash;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use tempfile::TempDir;

use super::LabError;

/// `/dev/shm` (tmpfs) where there is one, else the temp folder.
pub fn tmpfs_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// An unlinked file in [`tmpfs_dir`].
pub fn tmpfs_file() -> Result<File, LabError> {
    let dir = tmpfs_dir();
    tempfile::tempfile_in(&dir)
        .map_err(|e| LabError::os(format!("creating a scratch file in {}", dir.display()), e))
}

/// A fresh private folder (mode 0700) in the temp folder, named after
/// `what`, removed with everything in it when dropped.
pub fn scratch_dir(what: &str) -> Result<TempDir, LabError> {
    tempfile::Builder::new()
        .prefix(&format!("herdless-lab-{what}-"))
        .tempdir()
        .map_err(|e| LabError::os(format!("creating a scratch folder for {what}"), e))
}

/// A path another program can open `file` by while this process holds it
/// open (`/proc/<lab>/fd/N`: the file has no name of its own).
pub fn fd_path(file: &File) -> PathBuf {
    use std::os::fd::AsRawFd;
    PathBuf::from(format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        file.as_raw_fd()
    ))
}

/// Values made once per key (a size, a case) and shared afterwards for the
/// lab's lifetime: `static FILES: Memo<usize, Arc<…>> = Memo::new();`.
pub struct Memo<K, V>(OnceLock<Mutex<HashMap<K, V>>>);

impl<K: Eq + Hash, V: Clone> Memo<K, V> {
    /// Nothing made yet.
    pub const fn new() -> Self {
        Memo(OnceLock::new())
    }

    /// The value for `key`, made by `make` the first time it is asked
    /// for (under the lock: one maker per key); a failed make is not kept.
    pub fn get(&self, key: K, make: impl FnOnce() -> Result<V, LabError>) -> Result<V, LabError> {
        let mut made = self
            .0
            .get_or_init(Default::default)
            .lock()
            .map_err(|_| LabError::Panicked("a scratch file's maker".into()))?;
        if let Some(v) = made.get(&key) {
            return Ok(v.clone());
        }
        let v = make()?;
        made.insert(key, v.clone());
        Ok(v)
    }
}

impl<K: Eq + Hash, V: Clone> Default for Memo<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

/// Bytes per page.
pub const PAGE: usize = 4096;

/// One step of Marsaglia's xorshift64 (13, 7, 17): the repeatable
/// pseudo-random sequence of the pattern files and of the workloads' random
/// orders and work rounds, each seeded by its user. Never 0 from a non-zero
/// seed.
#[inline]
pub fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// A scratch file of pseudo-random words (a snapshot's memory, a pager's
/// backing file), in tmpfs and unlinked, reachable by path through
/// `/proc/self/fd` while the lab runs, with the sum of each page's
/// little-endian words.
pub struct PatternFile {
    /// The file.
    pub file: File,
    /// A path another process can open.
    pub path: PathBuf,
    /// Bytes.
    pub len: usize,
    /// Wrapping sum of the words of page `i`.
    pub page_sums: Vec<u64>,
}

impl PatternFile {
    /// The sum [`sum_pages`] must find for `runs` (first page, length).
    pub fn sum(&self, runs: &[(usize, usize)]) -> u64 {
        runs.iter()
            .flat_map(|&(first, len)| first..first + len)
            .fold(0u64, |a, p| a.wrapping_add(self.page_sums[p]))
    }
}

/// The pattern file of `len` bytes (a multiple of [`PAGE`]), written once
/// per size.
pub fn pattern_file(len: usize) -> Result<Arc<PatternFile>, LabError> {
    static FILES: Memo<usize, Arc<PatternFile>> = Memo::new();
    FILES.get(len, || {
        let mut file = tmpfs_file()?;
        let mut page_sums = Vec::with_capacity(len / PAGE);
        let mut chunk = vec![0u8; 1 << 20];
        let mut word = 0x9E37_79B9_7F4A_7C15u64;
        let mut at = 0;
        while at < len {
            let n = chunk.len().min(len - at);
            for page in chunk[..n].chunks_exact_mut(PAGE) {
                let mut sum = 0u64;
                for w in page.chunks_exact_mut(8) {
                    xorshift(&mut word);
                    w.copy_from_slice(&word.to_le_bytes());
                    sum = sum.wrapping_add(word);
                }
                page_sums.push(sum);
            }
            file.write_all(&chunk[..n])
                .map_err(|e| LabError::os("writing a pattern file", e))?;
            at += n;
        }
        file.flush()
            .map_err(|e| LabError::os("flushing a pattern file", e))?;
        Ok(Arc::new(PatternFile {
            path: fd_path(&file),
            file,
            len,
            page_sums,
        }))
    })
}

/// Sums every little-endian word of the pages of `runs` (first page,
/// length) of the memory at `base`, reading each word once (reads fault
/// missing pages in); the wrapping sum.
pub fn sum_pages(base: usize, runs: &[(usize, usize)]) -> u64 {
    let mut sum = 0u64;
    for &(first, len) in runs {
        for p in first..first + len {
            let page = (base + p * PAGE) as *const u64;
            for w in 0..PAGE / 8 {
                // SAFETY: the caller's memory, mapped while it sums; reads
                // fault pages in through the pager or the kernel.
                sum = sum.wrapping_add(u64::from_le(unsafe {
                    std::ptr::read_volatile(page.add(w))
                }));
            }
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_scratch_file_has_no_name_and_reads_back() {
        let mut file = tmpfs_file().unwrap();
        file.write_all(b"page").unwrap();
        let mut again = File::open(fd_path(&file)).unwrap();
        let mut text = String::new();
        again.read_to_string(&mut text).unwrap();
        assert_eq!(text, "page");
        let target = std::fs::read_link(fd_path(&file)).unwrap();
        assert!(
            target.to_string_lossy().ends_with("(deleted)"),
            "{target:?}"
        );
    }

    #[test]
    fn each_size_is_made_once() {
        static MADE: Memo<usize, usize> = Memo::new();
        let mut calls = 0;
        for _ in 0..3 {
            let v = MADE.get(7, || {
                calls += 1;
                Ok(49)
            });
            assert_eq!(v.unwrap(), 49);
        }
        assert_eq!(MADE.get(2, || Ok(4)).unwrap(), 4);
        assert_eq!(calls, 1);
        assert!(MADE.get(3, || Err(LabError::Sample("no".into()))).is_err());
        assert_eq!(
            MADE.get(3, || Ok(9)).unwrap(),
            9,
            "a failed make is not kept"
        );
    }
}
