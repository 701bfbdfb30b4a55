//! [`FileSource`]: a file, copied into the region straight from a read-only
//! mapping of it (`file_map.rs`), neighbours only if `mincore` says the page
//! cache holds them (seed 002's `fault_nonblock`); where the file cannot be
//! mapped, read with `pread` and `preadv2(RWF_NOWAIT)`.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use rustix::io::{Errno, ReadWriteFlags};

use super::file_map::FileMap;
use super::PageSource;
use crate::PagerError;

/// A regular file. Its length is taken when it is opened; if it later
/// shrinks, the region reads as a mapping of the file would: the page
/// holding the new end reads the file's bytes then zeros, and a page wholly
/// past it fails (the pager reports the error and poisons the page:
/// `SIGBUS`, as a mapped file gives).
///
/// ```
/// use herdless_pager::{FileSource, PageSource};
///
/// let path = std::env::temp_dir().join(format!("filesource-doc-{}", std::process::id()));
/// std::fs::write(&path, vec![3u8; 3 * 4096])?;
/// let src = FileSource::open(&path)?;
/// assert_eq!(src.len(), 3 * 4096);
/// src.populate(0, 8192)?; // warm what will be served first (optional)
/// let mut page = vec![0u8; 4096];
/// src.read_at(4096, &mut page)?;
/// assert!(page.iter().all(|&b| b == 3));
/// // A directory is refused when opened, not when a fault reads it.
/// assert!(FileSource::open(std::env::temp_dir()).is_err());
/// std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct FileSource {
    file: File,
    len: u64,
    path: PathBuf,
    shared: bool,
    map: Option<FileMap>,
}

impl FileSource {
    /// Opens `path` read-only.
    ///
    /// # Errors
    /// [`PagerError::SourceOpen`] if the file cannot be opened or its
    /// metadata read, or it is not a regular file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, PagerError> {
        let path = path.as_ref();
        let err = |source| PagerError::SourceOpen {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(err)?;
        Self::from_file(file, path)
    }

    /// Wraps an open file (e.g. a memfd); `name` is used in messages.
    ///
    /// # Errors
    /// [`PagerError::SourceOpen`] if its metadata cannot be read or it is
    /// not a regular file.
    pub fn from_file(file: File, name: impl AsRef<Path>) -> Result<Self, PagerError> {
        let path = name.as_ref().to_path_buf();
        let meta = file.metadata().map_err(|source| PagerError::SourceOpen {
            path: path.clone(),
            source,
        })?;
        if !meta.is_file() {
            return Err(PagerError::SourceOpen {
                path,
                source: io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
            });
        }
        let shared = is_shared_memory(&file);
        let map = FileMap::new(&file, meta.len());
        Ok(FileSource {
            len: meta.len(),
            file,
            path,
            shared,
            map,
        })
    }

    /// The file's path (or name).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Prepares `[offset, offset + len)` of the file for copying: reads it
    /// into the page cache if it is not there, and maps it into the
    /// source's read-only mapping, so that a fill from it later takes no
    /// fault. What Firecracker's example handlers do for the whole memory
    /// file (`MAP_POPULATE`) before the VMM connects; `herdless-uffd` does
    /// it for the working set it will prefetch. Does nothing for a file
    /// that could not be mapped.
    ///
    /// # Errors
    /// [`PagerError::SourceRead`] if the range cannot be read in (an I/O
    /// error, or the file shrank below it).
    pub fn populate(&self, offset: u64, len: u64) -> Result<(), PagerError> {
        match &self.map {
            Some(m) => m
                .populate(offset, len)
                .map_err(|source| PagerError::SourceRead { offset, source }),
            None => Ok(()),
        }
    }
}

/// Whether `file` lives in shmem (tmpfs, memfd), which minor mode can map.
fn is_shared_memory(file: &File) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    rustix::fs::fstatfs(file).is_ok_and(|s| s.f_type == TMPFS_MAGIC)
}

impl PageSource for FileSource {
    fn may_touch_region(&self) -> bool {
        false
    }

    fn len(&self) -> u64 {
        self.len
    }

    /// Reads with `pread`. Where the file ends inside the last page asked
    /// for (it shrank since it was opened, or its length is not a page
    /// multiple), the rest of that page reads zeros, as through `mmap`; a
    /// page wholly past the end is an `UnexpectedEof` error.
    fn read_at(&self, offset: u64, mut buf: &mut [u8]) -> io::Result<()> {
        let mut at = offset;
        while !buf.is_empty() {
            match rustix::io::pread(&self.file, &mut *buf, at) {
                Ok(0) => {
                    // End of file at `at`: zeros up to its page's end are
                    // what a mapping shows; anything past that page is not.
                    let page = rustix::param::page_size() as u64;
                    let page_end = at.div_ceil(page) * page;
                    if at + buf.len() as u64 <= page_end && !at.is_multiple_of(page) {
                        buf.fill(0);
                        return Ok(());
                    }
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                Ok(n) => {
                    buf = &mut buf[n..];
                    at += n as u64;
                }
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    fn read_nowait(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut slices = [io::IoSliceMut::new(buf)];
        match rustix::io::preadv2(&self.file, &mut slices, offset, ReadWriteFlags::NOWAIT) {
            Ok(n) => Ok(n),
            // tmpfs (as of 6.18) refuses RWF_NOWAIT, but its page cache is
            // the file: a read blocks only to swap a page back in. Read it.
            Err(Errno::OPNOTSUPP) if self.shared => {
                self.read_at(offset, buf)?;
                Ok(buf.len())
            }
            // Not in the page cache (or the file system cannot say without
            // blocking): nothing is available.
            Err(Errno::AGAIN | Errno::OPNOTSUPP | Errno::INTR) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    fn shared_memory(&self) -> Option<BorrowedFd<'_>> {
        self.shared.then(|| self.file.as_fd())
    }

    fn memory(&self) -> Option<*const u8> {
        self.map.as_ref().map(FileMap::addr)
    }

    fn resident(&self, offset: u64, len: usize) -> usize {
        self.map.as_ref().map_or(0, |m| m.resident(offset, len))
    }
}
