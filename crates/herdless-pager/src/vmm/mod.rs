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
//!
//! Files: this one sets the memory up; `handoff.rs` sends it to the
//! handler; `access.rs` is the guest touching it (reads, the kernel's
//! reads, balloon discards, a check of every byte).

mod access;
mod handoff;
mod hugepages;

pub use handoff::send_with_fds;
pub use hugepages::Hugepages;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use linux_raw_sys::general as uapi;
use rustix::mm::{MapFlags, ProtFlags};

use crate::uffd::Uffd;

/// One guest memory region: where it is, and where its bytes are in the
/// memory file.
///
/// # Examples
/// ```
/// use herdless_pager::vmm::GuestMemory;
/// let Ok(guest) = GuestMemory::new(&[1 << 20, 1 << 19]) else { return Ok(()) }; // no userfaultfd: skip
/// let r = guest.regions()[1];
/// assert_eq!((r.size, r.offset), (1 << 19, 1 << 20)); // back to back in the file
/// assert_eq!(r.page_size, rustix::param::page_size());
/// # Ok::<(), std::io::Error>(())
/// ```
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
///
/// # Examples
/// The page sizes a region may have: the host's, and this one (from the
/// hugepage pool: [`Hugepages`]' example); no other:
/// ```
/// use herdless_pager::vmm::{GuestMemory, HUGE_PAGE};
/// assert_eq!(HUGE_PAGE, herdless_pager::restore::mappings::HUGE_PAGE); // the handler's
/// assert!(GuestMemory::with_page_sizes(&[(HUGE_PAGE, 8192)]).is_err());
/// ```
pub const HUGE_PAGE: usize = crate::space::HUGE_PAGE;

/// A VMM's guest memory, registered with a userfaultfd, as Firecracker
/// sets it up for a restore. Dropping it unmaps the memory (a handler
/// still holding the userfaultfd then sees `ESRCH`/`ENOENT` on its fills,
/// or the connection's end).
///
/// # Examples
/// Firecracker's part of a restore, against `herdless-uffd`'s library
/// serving a memory file:
/// ```
/// use herdless_pager::vmm::GuestMemory;
/// let Ok(guest) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
/// # use herdless_pager::restore::{Restore, RestoreOptions};
/// # let dir = std::env::temp_dir().join(format!("herdless-vmm-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let file: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
/// # std::fs::write(dir.join("vm.mem"), &file)?;
/// # let mut opts = RestoreOptions::new(dir.join("uffd.sock"), dir.join("vm.mem"));
/// # opts.quiet = true;
/// # let restore = Restore::bind(opts)?;
/// # let handler = std::thread::spawn(move || restore.run());
/// # let socket = dir.join("uffd.sock");
/// // herdless-uffd listens on `socket`, serving `file` (a 1 MiB memory file).
/// let conn = guest.handoff(&socket)?; // the mappings and the userfaultfd
/// guest.check_against(&file, 4, &|_| false)?; // every byte, from 4 threads
/// drop(conn); // the VM exits
/// let summary = handler.join().unwrap()?;
/// assert_eq!(summary.pages_copied(), ((1 << 20) / rustix::param::page_size()) as u64);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
    /// a missing page would get `EFAULT` instead.
    ///
    /// # Errors
    /// `EPERM` where neither userfaultfd can be opened; `Unsupported` if
    /// the kernel's lacks `UFFD_FEATURE_EVENT_REMOVE`; `InvalidInput` for
    /// a size the kernel refuses to map or register (zero, not a page
    /// multiple: `EINVAL`); `ENOMEM` if it cannot be mapped.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::vmm::GuestMemory;
    /// match GuestMemory::new(&[1 << 20]) {
    ///     Ok(guest) => assert_eq!(guest.regions().len(), 1),
    ///     Err(e) => eprintln!("no guest memory here: {e}"), // no userfaultfd for this process
    /// }
    /// ```
    pub fn new(sizes: &[usize]) -> io::Result<Self> {
        let page = rustix::param::page_size();
        let regions: Vec<(usize, usize)> = sizes.iter().map(|&s| (s, page)).collect();
        Self::with_page_sizes(&regions)
    }

    /// As [`new`](Self::new), one region per `(size, page size)`: a page
    /// size of [`HUGE_PAGE`] maps the region from the 2 MiB hugepage pool
    /// (`MAP_HUGETLB | MAP_HUGE_2MB`, as Firecracker with `"huge_pages":
    /// "2M"`), which must hold enough free pages ([`Hugepages::reserve`]).
    ///
    /// # Errors
    /// As [`new`](Self::new); `InvalidInput` for a page size other than
    /// the host's and [`HUGE_PAGE`]; `ENOMEM` if the hugepage pool lacks
    /// the pages.
    ///
    /// # Examples
    /// Two regions of host pages around a gap, as Firecracker lays out an
    /// x86 guest (a region of hugepages: [`Hugepages`]' example):
    /// ```
    /// use herdless_pager::vmm::GuestMemory;
    /// let page = rustix::param::page_size();
    /// let Ok(guest) = GuestMemory::with_page_sizes(&[(16 * page, page), (8 * page, page)]) else {
    ///     return Ok(()); // no userfaultfd: skip
    /// };
    /// assert_eq!(guest.regions()[1].offset, 16 * page as u64);
    /// assert!(GuestMemory::with_page_sizes(&[(3 << 20, 3 << 20)]).is_err()); // no such page size
    /// # Ok::<(), std::io::Error>(())
    /// ```
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
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::vmm::GuestMemory;
    /// let Ok(guest) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
    /// if guest.is_user_mode_only() {
    ///     println!("an ordinary user: the kernel's own reads of missing pages fail");
    /// }
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_user_mode_only(&self) -> bool {
        self.user_mode_only
    }

    /// The regions, in the order given.
    ///
    /// # Examples
    /// ```
    /// use herdless_pager::vmm::GuestMemory;
    /// let Ok(guest) = GuestMemory::new(&[1 << 20, 2 << 20]) else { return Ok(()) }; // no userfaultfd: skip
    /// let sizes: Vec<usize> = guest.regions().iter().map(|r| r.size).collect();
    /// assert_eq!(sizes, [1 << 20, 2 << 20]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn regions(&self) -> &[GuestRegion] {
        &self.regions
    }

    /// The userfaultfd (what [`handoff`](Self::handoff) sends).
    ///
    /// # Examples
    /// ```
    /// use std::os::fd::AsRawFd;
    /// use herdless_pager::vmm::GuestMemory;
    /// let Ok(guest) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
    /// let link = std::fs::read_link(format!("/proc/self/fd/{}", guest.uffd().as_raw_fd()))?;
    /// assert_eq!(link.to_str(), Some("anon_inode:[userfaultfd]"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn uffd(&self) -> BorrowedFd<'_> {
        self.uffd.as_fd()
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
