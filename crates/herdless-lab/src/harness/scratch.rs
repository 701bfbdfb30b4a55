//! Scratch files for experiments: what the measured code reads from a file
//! (the pager's backing file, a snapshot's memory) kept in tmpfs, so that
//! no disk read is timed, and unlinked from the start (`tempfile`), so that
//! nothing is left behind however the lab ends; each made once per size
//! and shared by every variant and repetition ([`PerSize`]). Private
//! folders (sockets, logs, a host cache) come from [`scratch_dir`],
//! removed when dropped.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

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

/// Values made once per size and shared afterwards: `static FILES:
/// PerSize<Arc<…>> = PerSize::new();`.
pub struct PerSize<V>(OnceLock<Mutex<HashMap<usize, V>>>);

impl<V: Clone> PerSize<V> {
    /// Nothing made yet.
    pub const fn new() -> Self {
        PerSize(OnceLock::new())
    }

    /// The value for `size`, made by `make` the first time it is asked
    /// for (under the lock: one maker per size).
    pub fn get(
        &self,
        size: usize,
        make: impl FnOnce() -> Result<V, LabError>,
    ) -> Result<V, LabError> {
        let mut made = self
            .0
            .get_or_init(Default::default)
            .lock()
            .map_err(|_| LabError::Panicked("a scratch file's maker".into()))?;
        if let Some(v) = made.get(&size) {
            return Ok(v.clone());
        }
        let v = make()?;
        made.insert(size, v.clone());
        Ok(v)
    }
}

impl<V: Clone> Default for PerSize<V> {
    fn default() -> Self {
        Self::new()
    }
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
        static MADE: PerSize<usize> = PerSize::new();
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
