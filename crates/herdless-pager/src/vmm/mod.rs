//! Firecracker's side of the UFFD handoff, played in-process for the tests
//! and the lab: the guest memory a VMM restores into and the message it
//! sends the page-fault handler. Not a stable API (hidden from the docs).
//!
//! What Firecracker does (`src/vmm/src/persist.rs`,
//! `guest_memory_from_uffd` and `send_uffd_handshake`), and
//! [`GuestMemory`] likewise: create a userfaultfd (close-on-exec,
//! non-blocking, `UFFD_FEATURE_EVENT_REMOVE` required); map one anonymous
//! private region per guest memory region, laid out back to back in the
//! memory file (`offset` = sum of the sizes before); register each for
//! missing faults; connect to the handler's socket; send the JSON list of
//! `GuestRegionUffdMapping` (`page_size` and its deprecated twin
//! `page_size_kib`, both in bytes) with the userfaultfd as `SCM_RIGHTS`;
//! keep the connection open (Firecracker leaks it, so the handler sees its
//! end only when the VMM exits).
//!
//! With `"huge_pages": "2M"` in its machine configuration, Firecracker maps
//! each region with `MAP_HUGETLB | MAP_HUGE_2MB` instead, and says
//! `"page_size": 2097152` for it; [`GuestMemory::with_page_sizes`] does the
//! same, per region, from the hugepage pool (`hugepages.rs` reserves one for
//! a test or a measurement).

mod hugepages;

pub use hugepages::Hugepages;

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;

use linux_raw_sys::general as uapi;
use rustix::mm::{MapFlags, ProtFlags};
use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

use crate::uffd::Uffd;

/// One guest memory region: where it is, and where its bytes are in the
/// memory file.
#[derive(Clone, Copy, Debug)]
pub struct GuestRegion {
    /// Its first byte's address in this process.
    pub base: usize,
    /// Length in bytes.
    pub size: usize,
    /// Offset of its bytes in the memory file.
    pub offset: u64,
    /// Its page size: the host's, or 2 MiB (hugetlbfs).
    pub page_size: usize,
}

/// 2 MiB: a hugetlbfs page, as Firecracker's `"huge_pages": "2M"`.
pub const HUGE_PAGE: usize = crate::space::HUGE_PAGE;

/// A VMM's guest memory, registered with a userfaultfd, as Firecracker
/// sets it up for a restore.
pub struct GuestMemory {
    uffd: OwnedFd,
    regions: Vec<GuestRegion>,
    user_mode_only: bool,
}

impl GuestMemory {
    /// A userfaultfd and one registered anonymous region per size (each a
    /// page multiple), as Firecracker creates them (module doc). A process
    /// that may not open a full userfaultfd (not root) gets a
    /// user-mode-only one (Linux 5.11+): the guest's accesses from user
    /// space still fault to the handler; only system calls that write into
    /// a missing page would get `EFAULT` instead. Fails with `EPERM` where
    /// neither can be opened.
    pub fn new(sizes: &[usize]) -> io::Result<Self> {
        let page = rustix::param::page_size();
        let regions: Vec<(usize, usize)> = sizes.iter().map(|&s| (s, page)).collect();
        Self::with_page_sizes(&regions)
    }

    /// As [`new`](Self::new), one region per `(size, page size)`: a page
    /// size of [`HUGE_PAGE`] maps the region from the 2 MiB hugepage pool
    /// (`MAP_HUGETLB | MAP_HUGE_2MB`, as Firecracker with `"huge_pages":
    /// "2M"`), which must hold enough free pages ([`Hugepages::reserve`]);
    /// else `ENOMEM`.
    pub fn with_page_sizes(regions: &[(usize, usize)]) -> io::Result<Self> {
        let wanted = u64::from(uapi::UFFD_FEATURE_EVENT_REMOVE);
        let (uffd, user_mode_only) = match Uffd::open(true, false, wanted) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                (Uffd::open(true, true, wanted)?, true)
            }
            other => (other?, false),
        };
        if uffd.features & u64::from(uapi::UFFD_FEATURE_EVENT_REMOVE) == 0 {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel's userfaultfd lacks UFFD_FEATURE_EVENT_REMOVE",
            ));
        }
        let mut mem = GuestMemory {
            uffd: rustix::io::dup(uffd.as_fd())?,
            regions: Vec::with_capacity(regions.len()),
            user_mode_only,
        };
        let host = rustix::param::page_size();
        let mut offset = 0u64;
        for &(size, page_size) in regions {
            let flags = if page_size == host {
                MapFlags::PRIVATE | MapFlags::NORESERVE
            } else if page_size == HUGE_PAGE {
                // Reserved at mmap (no NORESERVE): an empty pool fails here
                // with ENOMEM, not later with SIGBUS.
                MapFlags::PRIVATE | MapFlags::HUGETLB | MapFlags::HUGE_2MB
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("page size {page_size}: only {host} and {HUGE_PAGE}"),
                ));
            };
            // SAFETY: a fresh anonymous mapping at an address of the
            // kernel's choosing aliases nothing; unmapped in Drop.
            let ptr = unsafe {
                rustix::mm::mmap_anonymous(
                    std::ptr::null_mut(),
                    size,
                    ProtFlags::READ | ProtFlags::WRITE,
                    flags,
                )
            }?;
            mem.regions.push(GuestRegion {
                base: ptr as usize,
                size,
                offset,
                page_size,
            });
            uffd.register(
                ptr as usize,
                size,
                u64::from(uapi::UFFDIO_REGISTER_MODE_MISSING),
            )?;
            offset += size as u64;
        }
        Ok(mem)
    }

    /// Whether the userfaultfd is user-mode-only (this process may not open
    /// a full one): [`kernel_read`](Self::kernel_read) of a missing page
    /// then fails with `EFAULT` instead of faulting to the handler.
    pub fn is_user_mode_only(&self) -> bool {
        self.user_mode_only
    }

    /// The regions, in the order given.
    pub fn regions(&self) -> &[GuestRegion] {
        &self.regions
    }

    /// The userfaultfd.
    pub fn uffd(&self) -> BorrowedFd<'_> {
        self.uffd.as_fd()
    }

    /// The mapping list exactly as Firecracker serialises it.
    pub fn mappings_json(&self) -> String {
        let items: Vec<String> = self
            .regions
            .iter()
            .map(|r| {
                format!(
                    "{{\"base_host_virt_addr\":{},\"size\":{},\"offset\":{},\"page_size\":{p},\"page_size_kib\":{p}}}",
                    r.base,
                    r.size,
                    r.offset,
                    p = r.page_size
                )
            })
            .collect();
        format!("[{}]", items.join(","))
    }

    /// Connects to the handler at `socket` and sends the mapping list with
    /// the userfaultfd. Keep the connection open while the memory is in
    /// use: dropping it tells the handler the VMM is gone.
    pub fn handoff(&self, socket: &Path) -> io::Result<UnixStream> {
        let stream = UnixStream::connect(socket)?;
        send_with_fds(&stream, self.mappings_json().as_bytes(), &[self.uffd()])?;
        Ok(stream)
    }

    /// Reads `len` bytes at `addr` the way the kernel does (`pwrite` from
    /// guest memory into a memfd): a poisoned page fails with `EFAULT`
    /// instead of raising `SIGBUS`.
    pub fn kernel_read(&self, addr: usize, len: usize) -> io::Result<Vec<u8>> {
        self.check(addr, len)?;
        let fd = rustix::fs::memfd_create("herdless-vmm-read", rustix::fs::MemfdFlags::CLOEXEC)?;
        // SAFETY: the range lies in one of our regions (checked), mapped
        // while `self` lives; only the kernel reads it.
        let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
        let n = rustix::io::pwrite(&fd, bytes, 0)?;
        let mut out = vec![0u8; n];
        rustix::io::pread(&fd, &mut out, 0)?;
        Ok(out)
    }

    /// Reads `len` bytes at `addr` from user space (a poisoned page raises
    /// `SIGBUS`): how a guest touches its memory.
    pub fn read(&self, addr: usize, buf: &mut [u8]) -> io::Result<()> {
        self.check(addr, buf.len())?;
        // SAFETY: the range lies in one of our regions (checked); it is
        // never handed out as a Rust reference, so copying from it aliases
        // nothing; missing pages fault and are served by the handler.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    /// `MADV_DONTNEED` on `[addr, addr + len)`, as Firecracker does for the
    /// balloon: the handler receives a `REMOVE` event and the range reads
    /// zeros afterwards.
    pub fn discard(&self, addr: usize, len: usize) -> io::Result<()> {
        self.check(addr, len)?;
        // SAFETY: the range lies in one of our regions (checked); no Rust
        // reference into guest memory exists.
        unsafe { rustix::mm::madvise(addr as *mut _, len, rustix::mm::Advice::LinuxDontNeed) }?;
        Ok(())
    }

    /// Reads every byte of every region from `threads` threads (each a
    /// share of the pages, interleaved, so that the faults overlap) and
    /// compares them with `file`, the memory file's bytes; `expect_zero`
    /// says which addresses must read zeros instead (discarded ranges).
    /// The first mismatch, as a message.
    pub fn check_against(
        &self,
        file: &[u8],
        threads: usize,
        expect_zero: &(dyn Fn(usize) -> bool + Sync),
    ) -> Result<(), String> {
        let page = rustix::param::page_size();
        let pages: Vec<(usize, u64)> = self
            .regions
            .iter()
            .flat_map(|r| {
                (0..r.size / page).map(move |k| (r.base + k * page, r.offset + (k * page) as u64))
            })
            .collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads.max(1))
                .map(|t| {
                    let pages = &pages;
                    s.spawn(move || -> Result<(), String> {
                        let mut buf = vec![0u8; page];
                        for &(addr, off) in pages.iter().skip(t).step_by(threads.max(1)) {
                            self.read(addr, &mut buf).map_err(|e| e.to_string())?;
                            let zero = expect_zero(addr);
                            for (k, &got) in buf.iter().enumerate() {
                                let want = if zero { 0 } else { file[off as usize + k] };
                                if got != want {
                                    return Err(format!(
                                        "byte {:#x} (file offset {:#x}) is {got:#x}, expected {want:#x}",
                                        addr + k,
                                        off as usize + k
                                    ));
                                }
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .try_for_each(|h| h.join().map_err(|_| "a reader panicked".to_string())?)
        })
    }

    fn check(&self, addr: usize, len: usize) -> io::Result<()> {
        let inside = self
            .regions
            .iter()
            .any(|r| addr >= r.base && addr.checked_add(len).is_some_and(|e| e <= r.base + r.size));
        if inside {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{addr:#x}+{len:#x} is not inside one guest region"),
            ))
        }
    }
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        for r in &self.regions {
            // SAFETY: our mapping, unmapped once; nothing reads it after.
            let _ = unsafe { rustix::mm::munmap(r.base as *mut _, r.size) };
        }
    }
}

/// Sends `bytes` on `stream` with `fds` attached (`SCM_RIGHTS`, none if
/// empty), as one `sendmsg`.
pub fn send_with_fds(stream: &UnixStream, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len().max(1)))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("ancillary buffer too small"));
    }
    let mut sent = 0;
    while sent < bytes.len() {
        let n = if sent == 0 {
            rustix::net::sendmsg(
                stream,
                &[IoSlice::new(bytes)],
                &mut control,
                SendFlags::NOSIGNAL,
            )?
        } else {
            rustix::net::send(stream, &bytes[sent..], SendFlags::NOSIGNAL)?
        };
        sent += n;
    }
    if bytes.is_empty() {
        rustix::net::sendmsg(
            stream,
            &[IoSlice::new(bytes)],
            &mut control,
            SendFlags::NOSIGNAL,
        )?;
    }
    Ok(())
}
