//! A read-only shared mapping of a [`FileSource`](super::FileSource)'s file
//! (seed 002): the pager copies a window straight from the page cache
//! through it, and asks `mincore` which of the window's pages the page
//! cache holds (the seed's "reachable without blocking").

use std::fs::File;
use std::os::fd::AsFd;

/// `len` bytes of a file mapped `PROT_READ`, `MAP_SHARED`, at offset 0.
///
/// Nothing in Rust ever reads through the mapping: its address only goes
/// to the kernel (`UFFDIO_COPY`'s source, `mincore`), so a file changed or
/// truncated under it cannot be observed as a torn Rust value; a copy from
/// a page past a new end of file fails with `EFAULT`.
#[derive(Debug)]
pub(crate) struct FileMap {
    ptr: *mut u8,
    len: usize,
    /// Bytes per page.
    page: usize,
}

// SAFETY: a `FileMap` is an address range no Rust code dereferences; it is
// unmapped once, in Drop, when no other thread can hold `&FileMap`.
unsafe impl Send for FileMap {}
// SAFETY: as for Send: `&FileMap` only hands out the address to syscalls.
unsafe impl Sync for FileMap {}

impl FileMap {
    /// Maps the first `len` bytes of `file`; `None` if `len` is zero or the
    /// file cannot be mapped (the pager then reads with `pread`).
    pub(crate) fn new(file: &File, len: u64) -> Option<FileMap> {
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        // SAFETY: a fresh read-only mapping at an address of the kernel's
        // choosing aliases no Rust object.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ,
                rustix::mm::MapFlags::SHARED,
                file.as_fd(),
                0,
            )
        }
        .ok()?;
        Some(FileMap {
            ptr: ptr.cast(),
            len,
            page: rustix::param::page_size(),
        })
    }

    /// The address of byte 0.
    pub(crate) fn addr(&self) -> *const u8 {
        self.ptr
    }

    /// Maps the pages of `[offset, offset + len)` now (reading them into the
    /// page cache if need be: `MADV_POPULATE_READ`, Linux 5.14; before
    /// that only `MADV_WILLNEED`'s read-ahead), so that copies from them
    /// later take no fault on this mapping.
    pub(crate) fn populate(&self, offset: u64, len: u64) -> std::io::Result<()> {
        let start =
            usize::try_from(offset).unwrap_or(usize::MAX).min(self.len) / self.page * self.page;
        let end = usize::try_from(offset.saturating_add(len))
            .unwrap_or(usize::MAX)
            .min(self.len);
        if start >= end {
            return Ok(());
        }
        // SAFETY: `start..end` lies inside our mapping (clipped above);
        // populating only maps file pages, which nothing in Rust reads.
        let addr = unsafe { self.ptr.add(start) }.cast();
        // SAFETY: as above.
        match unsafe {
            rustix::mm::madvise(addr, end - start, rustix::mm::Advice::LinuxPopulateRead)
        } {
            Err(rustix::io::Errno::INVAL) => {
                // SAFETY: as above; read-ahead only.
                unsafe { rustix::mm::madvise(addr, end - start, rustix::mm::Advice::WillNeed) }?;
                Ok(())
            }
            r => Ok(r?),
        }
    }

    /// Bytes from `offset` (page-aligned), at most `len`, whose pages the
    /// page cache holds: the resident prefix, by `mincore`. Zero on any
    /// error (nothing is known to be available without blocking).
    pub(crate) fn resident(&self, offset: u64, len: usize) -> usize {
        let Ok(off) = usize::try_from(offset) else {
            return 0;
        };
        if off % self.page != 0 || off >= self.len {
            return 0;
        }
        let len = len.min(self.len - off);
        let mut vec = [0u8; 256];
        let mut done = 0;
        while done < len {
            let pages = (len - done).div_ceil(self.page).min(vec.len());
            // SAFETY: `off + done..` plus `pages` pages lies inside our
            // mapping (mincore accepts the page holding the file's last
            // byte); `vec` holds one byte per page asked for.
            let r = unsafe {
                libc::mincore(
                    self.ptr.add(off + done).cast(),
                    pages * self.page,
                    vec.as_mut_ptr().cast(),
                )
            };
            if r != 0 {
                break;
            }
            let resident = vec[..pages].iter().take_while(|b| *b & 1 != 0).count();
            done += resident * self.page;
            if resident < pages {
                break;
            }
        }
        done.min(len)
    }
}

impl Drop for FileMap {
    fn drop(&mut self) {
        // SAFETY: our mapping, unmapped once; the source (and so every
        // pager using the address) is gone.
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}
