//! [`Mapping`]: a memory mapping the pager owns (the region, in anonymous
//! or shared-memory form, and the doorbell pages), unmapped on drop.

use std::os::fd::AsFd;

use rustix::mm::{MapFlags, ProtFlags};

use crate::PagerError;

/// A memory mapping owned by the pager.
pub(crate) struct Mapping {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

// SAFETY: a `Mapping` is an address range; the pager synchronises every
// access to the memory itself (through the kernel), and unmapping happens
// once, in Drop.
unsafe impl Send for Mapping {}
// SAFETY: as for Send: `&Mapping` only hands out the address.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub(crate) fn anonymous(len: usize) -> Result<Self, PagerError> {
        // SAFETY: a fresh anonymous mapping at an address of the kernel's
        // choosing aliases nothing.
        let ptr = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        }
        .map_err(|e| PagerError::syscall("mmap (region)", e))?;
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    pub(crate) fn shared(fd: std::os::fd::BorrowedFd<'_>, len: usize) -> Result<Self, PagerError> {
        // SAFETY: a fresh shared mapping of the source file at an address of
        // the kernel's choosing aliases no Rust object.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd.as_fd(),
                0,
            )
        }
        .map_err(|e| PagerError::syscall("mmap (shared source)", e))?;
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    pub(crate) fn addr(&self) -> usize {
        self.ptr as usize
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr..ptr + len` is our mapping, unmapped once, after
        // every thread that used it has been joined (Pager's Drop).
        let _ = unsafe { rustix::mm::munmap(self.ptr.cast(), self.len) };
    }
}
