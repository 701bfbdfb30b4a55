//! The guest touching its memory, as a VM does and as the kernel does on
//! its behalf: reads from user space (faults served by the handler, or
//! `SIGBUS` for a poisoned page), reads through a system call (`EFAULT`
//! instead), balloon discards, and a check of every byte from several
//! threads.

use std::io;

use super::GuestMemory;

impl GuestMemory {
    /// Reads `len` bytes at `addr` the way the kernel does (`pwrite` from
    /// guest memory into a memfd): a poisoned page fails with `EFAULT`
    /// instead of raising `SIGBUS`.
    ///
    /// # Errors
    /// `InvalidInput` if the range is not inside one region; from
    /// `memfd_create`, `pwrite` (`EFAULT` for a poisoned page, or any
    /// missing page with a user-mode-only userfaultfd) and `pread`.
    ///
    /// # Examples
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
    /// let conn = guest.handoff(&socket)?;
    /// let base = guest.regions()[0].base;
    /// match guest.kernel_read(base + 4096, 8) {
    ///     Ok(bytes) => assert_eq!(bytes[..], file[4096..4104]), // the kernel's read faulted, and was served
    ///     Err(e) => assert!(guest.is_user_mode_only(), "{e}"), // EFAULT: only user space faults
    /// }
    /// # drop(conn);
    /// # handler.join().unwrap()?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    ///
    /// # Errors
    /// `InvalidInput` if the range is not inside one region.
    ///
    /// # Examples
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
    /// let conn = guest.handoff(&socket)?;
    /// let base = guest.regions()[0].base;
    /// let mut page = vec![0u8; 4096];
    /// guest.read(base + 8192, &mut page)?;
    /// assert_eq!(page[..], file[8192..8192 + 4096]);
    /// assert!(guest.read(base + (1 << 20), &mut page).is_err()); // past the region
    /// # drop(conn);
    /// # handler.join().unwrap()?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    ///
    /// # Errors
    /// `InvalidInput` if the range is not inside one region; from
    /// `madvise` (`EINVAL` for a range not page-aligned).
    ///
    /// # Examples
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
    /// let conn = guest.handoff(&socket)?;
    /// let base = guest.regions()[0].base;
    /// let mut b = [0u8];
    /// guest.read(base, &mut b)?;
    /// assert_eq!(b[0], file[0]);
    /// guest.discard(base, 4096)?; // returns once the handler read the REMOVE
    /// guest.read(base, &mut b)?;
    /// assert_eq!(b[0], 0); // the balloon took it: zeros, not the file
    /// # drop(conn);
    /// # handler.join().unwrap()?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    ///
    /// # Errors
    /// The first mismatch, as a message; or that `file` is shorter than
    /// the regions need, or that a region could not be read, or that a
    /// reader panicked.
    ///
    /// # Examples
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
    /// let conn = guest.handoff(&socket)?;
    /// let base = guest.regions()[0].base;
    /// guest.discard(base + 4096, 2 * 4096)?;
    /// let discarded = |a: usize| (base + 4096..base + 3 * 4096).contains(&a);
    /// guest.check_against(&file, 2, &discarded)?;
    /// assert!(guest.check_against(&file[..1000], 1, &discarded).is_err()); // too short
    /// # drop(conn);
    /// # handler.join().unwrap()?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_against(
        &self,
        file: &[u8],
        threads: usize,
        expect_zero: &(dyn Fn(usize) -> bool + Sync),
    ) -> Result<(), String> {
        let page = rustix::param::page_size();
        let needed = self
            .regions
            .iter()
            .map(|r| r.offset + r.size as u64)
            .max()
            .unwrap_or(0);
        if (file.len() as u64) < needed {
            return Err(format!(
                "the file holds {} bytes; the regions need {needed}",
                file.len()
            ));
        }
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
