//! Raw userfaultfd: the `userfaultfd(2)` system call and its ioctls through
//! `rustix` and `linux-raw-sys` (no bindgen), with the partial-copy results
//! decoded the way this kernel reports them (see `TOOLING.md`):
//!
//! - a multi-page `UFFDIO_COPY` that meets a present page stops there:
//!   `EAGAIN` with `copy` = bytes done ([`Fill::Partial`]);
//! - a copy that starts on a present page: `EEXIST` ([`Fill::Exists`]);
//! - a pending non-cooperative event (a `REMOVE` not read yet) makes every
//!   copy fail with zero progress, `copy` being 0 or `-EAGAIN` depending on
//!   the kernel version ([`Fill::Retry`]).
//!
//! The ioctls that fill pages (`COPY`, `ZEROPAGE`, `CONTINUE`, `POISON`)
//! wake the faulting threads of the range they filled, and only on success:
//! after `EEXIST` the caller must [`Uffd::wake`] the page itself.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use linux_raw_sys::general as uapi;
use rustix::ioctl::{ioctl, opcode, Opcode, Updater};

/// `UFFDIO` ioctl type byte.
const UFFDIO: u8 = 0xAA;
pub(crate) const OP_API: Opcode = opcode::read_write::<uapi::uffdio_api>(UFFDIO, 0x3F);
pub(crate) const OP_REGISTER: Opcode =
    opcode::read_write::<uapi::uffdio_register>(UFFDIO, uapi::_UFFDIO_REGISTER as u8);
pub(crate) const OP_WAKE: Opcode =
    opcode::read::<uapi::uffdio_range>(UFFDIO, uapi::_UFFDIO_WAKE as u8);
pub(crate) const OP_COPY: Opcode =
    opcode::read_write::<uapi::uffdio_copy>(UFFDIO, uapi::_UFFDIO_COPY as u8);
pub(crate) const OP_ZEROPAGE: Opcode =
    opcode::read_write::<uapi::uffdio_zeropage>(UFFDIO, uapi::_UFFDIO_ZEROPAGE as u8);
pub(crate) const OP_CONTINUE: Opcode =
    opcode::read_write::<uapi::uffdio_continue>(UFFDIO, uapi::_UFFDIO_CONTINUE as u8);
pub(crate) const OP_POISON: Opcode =
    opcode::read_write::<uapi::uffdio_poison>(UFFDIO, uapi::_UFFDIO_POISON as u8);

/// Size of one `uffd_msg`.
pub(crate) const MSG_SIZE: usize = 32;

/// The outcome of a page-filling ioctl (`COPY`, `ZEROPAGE`, `CONTINUE`,
/// `POISON`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fill {
    /// The whole range was filled (and its faulting threads woken).
    Done,
    /// The first `n` bytes (a positive multiple of the page size) were
    /// filled and woken; the next page is already present.
    Partial(usize),
    /// The first page is already present; nothing was filled or woken.
    Exists,
    /// Zero progress because a non-cooperative event (e.g. `REMOVE`) is
    /// pending: nothing was filled; retry after the events are read.
    Retry,
}

/// A userfaultfd.
#[derive(Debug)]
pub(crate) struct Uffd {
    fd: OwnedFd,
    /// Features the `UFFDIO_API` handshake granted.
    pub(crate) features: u64,
}

/// Whether `userfaultfd(2)` refused us for lack of privilege.
pub(crate) fn is_refusal(e: &io::Error) -> bool {
    use rustix::io::Errno;
    matches!(
        Errno::from_io_error(e),
        Some(Errno::PERM | Errno::ACCESS | Errno::NOSYS)
    )
}

impl Uffd {
    /// Opens a userfaultfd and completes the API handshake, asking for the
    /// `wanted` features that the kernel supports (probed on a first fd,
    /// since `UFFDIO_API` may be called once per fd).
    pub(crate) fn open(nonblocking: bool, user_mode_only: bool, wanted: u64) -> io::Result<Uffd> {
        let supported = {
            let probe = Self::raw_open(false, user_mode_only)?;
            let mut api = uapi::uffdio_api {
                api: uapi::UFFD_API as u64,
                features: 0,
                ioctls: 0,
            };
            // SAFETY: OP_API takes a `uffdio_api`, which `api` is.
            unsafe { ioctl(&probe, Updater::<OP_API, _>::new(&mut api)) }?;
            api.features
        };
        let fd = Self::raw_open(nonblocking, user_mode_only)?;
        let mut api = uapi::uffdio_api {
            api: uapi::UFFD_API as u64,
            features: wanted & supported,
            ioctls: 0,
        };
        // SAFETY: OP_API takes a `uffdio_api`, which `api` is.
        unsafe { ioctl(&fd, Updater::<OP_API, _>::new(&mut api)) }?;
        Ok(Uffd {
            fd,
            features: wanted & supported,
        })
    }

    /// A userfaultfd another process opened and initialised (`UFFDIO_API`
    /// done, ranges registered in its memory), received over a socket;
    /// `features` as that handshake granted them.
    pub(crate) fn adopt(fd: OwnedFd, features: u64) -> Uffd {
        Uffd { fd, features }
    }

    fn raw_open(nonblocking: bool, user_mode_only: bool) -> io::Result<OwnedFd> {
        use rustix::mm::UserfaultfdFlags as F;
        let mut flags = F::CLOEXEC;
        if nonblocking {
            flags |= F::NONBLOCK;
        }
        if user_mode_only {
            flags |= F::from_bits_retain(uapi::UFFD_USER_MODE_ONLY);
        }
        // SAFETY: creating a userfaultfd has no memory-safety precondition;
        // rustix marks it unsafe because a registered range changes how
        // faults in this process behave, which the pager manages.
        Ok(unsafe { rustix::mm::userfaultfd(flags) }?)
    }

    /// Registers `[start, start + len)` in `mode`
    /// (`UFFDIO_REGISTER_MODE_MISSING` or `_MINOR`); returns the ioctls
    /// the range supports (a bit mask of `1 << _UFFDIO_*`).
    pub(crate) fn register(&self, start: usize, len: usize, mode: u64) -> io::Result<u64> {
        let mut reg = uapi::uffdio_register {
            range: range(start, len),
            mode,
            ioctls: 0,
        };
        // SAFETY: OP_REGISTER takes a `uffdio_register`, which `reg` is.
        unsafe { ioctl(&self.fd, Updater::<OP_REGISTER, _>::new(&mut reg)) }?;
        Ok(reg.ioctls)
    }

    /// Copies `len` bytes from `src` to the missing pages at `dst` and wakes
    /// their faulting threads.
    ///
    /// # Safety
    /// `src..src + len` must be readable memory of this process.
    pub(crate) unsafe fn copy(&self, dst: usize, src: *const u8, len: usize) -> io::Result<Fill> {
        let mut c = uapi::uffdio_copy {
            dst: dst as u64,
            src: src as u64,
            len: len as u64,
            mode: 0,
            copy: 0,
        };
        // SAFETY: OP_COPY takes a `uffdio_copy`; the caller guarantees the
        // source bytes are readable; `dst` is checked by the kernel against
        // the registered ranges.
        let r = unsafe { ioctl(&self.fd, Updater::<OP_COPY, _>::new(&mut c)) };
        decode(r, c.copy, len)
    }

    /// Maps zero pages at `[dst, dst + len)` and wakes their faulting threads.
    pub(crate) fn zeropage(&self, dst: usize, len: usize) -> io::Result<Fill> {
        let mut z = uapi::uffdio_zeropage {
            range: range(dst, len),
            mode: 0,
            zeropage: 0,
        };
        // SAFETY: OP_ZEROPAGE takes a `uffdio_zeropage`, which `z` is.
        let r = unsafe { ioctl(&self.fd, Updater::<OP_ZEROPAGE, _>::new(&mut z)) };
        decode(r, z.zeropage, len)
    }

    /// Maps the page-cache pages behind `[dst, dst + len)` (minor mode) and
    /// wakes their faulting threads.
    pub(crate) fn continue_(&self, dst: usize, len: usize) -> io::Result<Fill> {
        let mut c = uapi::uffdio_continue {
            range: range(dst, len),
            mode: 0,
            mapped: 0,
        };
        // SAFETY: OP_CONTINUE takes a `uffdio_continue`, which `c` is.
        let r = unsafe { ioctl(&self.fd, Updater::<OP_CONTINUE, _>::new(&mut c)) };
        decode(r, c.mapped, len)
    }

    /// Marks `[dst, dst + len)` poisoned (an access gets `SIGBUS`) and wakes
    /// its faulting threads.
    pub(crate) fn poison(&self, dst: usize, len: usize) -> io::Result<Fill> {
        let mut p = uapi::uffdio_poison {
            range: range(dst, len),
            mode: 0,
            updated: 0,
        };
        // SAFETY: OP_POISON takes a `uffdio_poison`, which `p` is.
        let r = unsafe { ioctl(&self.fd, Updater::<OP_POISON, _>::new(&mut p)) };
        decode(r, p.updated, len)
    }

    /// Wakes the threads faulting in `[start, start + len)` without filling
    /// anything: they retry the access (and fault again if still missing).
    pub(crate) fn wake(&self, start: usize, len: usize) -> io::Result<()> {
        let mut r = range(start, len);
        // SAFETY: OP_WAKE takes a `uffdio_range`, which `r` is.
        unsafe { ioctl(&self.fd, Updater::<OP_WAKE, _>::new(&mut r)) }?;
        Ok(())
    }

    /// Reads as many messages as fit into `buf` (whose length is a multiple
    /// of [`MSG_SIZE`]); returns the bytes read. Blocks for the first one
    /// unless the fd is non-blocking.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(rustix::io::read(&self.fd, buf)?)
    }
}

impl AsFd for Uffd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn range(start: usize, len: usize) -> uapi::uffdio_range {
    uapi::uffdio_range {
        start: start as u64,
        len: len as u64,
    }
}

/// Decodes a fill ioctl: its return and the count field the kernel wrote
/// (bytes done, or a negative errno).
fn decode(r: rustix::io::Result<()>, count: i64, len: usize) -> io::Result<Fill> {
    use rustix::io::Errno;
    match r {
        Ok(()) => Ok(Fill::Done),
        Err(Errno::AGAIN) if count > 0 && (count as usize) < len => {
            Ok(Fill::Partial(count as usize))
        }
        // Zero progress: `count` is 0 or -EAGAIN depending on the kernel.
        Err(Errno::AGAIN) => Ok(Fill::Retry),
        Err(Errno::EXIST) => Ok(Fill::Exists),
        Err(e) => Err(e.into()),
    }
}

/// One message read from the uffd.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Msg {
    /// A thread faulted at `address`.
    PageFault {
        /// The faulting address (page-aligned unless EXACT_ADDRESS).
        address: usize,
        /// `UFFD_PAGEFAULT_FLAG_*`.
        flags: u64,
        /// The faulting thread's id (with `UFFD_FEATURE_THREAD_ID`), else 0.
        tid: u32,
    },
    /// `MADV_DONTNEED`/`MADV_REMOVE` dropped `[start, end)`.
    Remove {
        /// First byte.
        start: usize,
        /// One past the last byte.
        end: usize,
    },
    /// Any other event (fork, remap, unmap), which the pager does not ask for.
    Other(u8),
}

impl Msg {
    /// Decodes one 32-byte `uffd_msg`.
    pub(crate) fn parse(b: &[u8]) -> Msg {
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_ne_bytes(a)
        };
        let event = b[0];
        match u32::from(event) {
            uapi::UFFD_EVENT_PAGEFAULT => {
                let mut t = [0u8; 4];
                t.copy_from_slice(&b[24..28]);
                Msg::PageFault {
                    flags: u64_at(8),
                    address: u64_at(16) as usize,
                    tid: u32::from_ne_bytes(t),
                }
            }
            uapi::UFFD_EVENT_REMOVE => Msg::Remove {
                start: u64_at(8) as usize,
                end: u64_at(16) as usize,
            },
            _ => Msg::Other(event),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linux_raw_sys::ioctl as nr;

    #[test]
    fn computed_opcodes_match_the_kernel_headers() {
        assert_eq!(u64::from(OP_API), u64::from(nr::UFFDIO_API));
        assert_eq!(u64::from(OP_REGISTER), u64::from(nr::UFFDIO_REGISTER));
        assert_eq!(u64::from(OP_WAKE), u64::from(nr::UFFDIO_WAKE));
        assert_eq!(u64::from(OP_COPY), u64::from(nr::UFFDIO_COPY));
        assert_eq!(u64::from(OP_ZEROPAGE), u64::from(nr::UFFDIO_ZEROPAGE));
        assert_eq!(u64::from(OP_CONTINUE), u64::from(nr::UFFDIO_CONTINUE));
        assert_eq!(std::mem::size_of::<uapi::uffd_msg>(), MSG_SIZE);
    }

    #[test]
    fn a_zero_progress_eagain_is_a_retry_whatever_the_count_field_says() {
        use rustix::io::Errno;
        let page = 4096;
        assert_eq!(decode(Err(Errno::AGAIN), 0, page).unwrap(), Fill::Retry);
        assert_eq!(
            decode(
                Err(Errno::AGAIN),
                -(Errno::AGAIN.raw_os_error() as i64),
                page
            )
            .unwrap(),
            Fill::Retry
        );
        assert_eq!(
            decode(Err(Errno::AGAIN), page as i64, 4 * page).unwrap(),
            Fill::Partial(page)
        );
        assert_eq!(
            decode(
                Err(Errno::EXIST),
                -(Errno::EXIST.raw_os_error() as i64),
                page
            )
            .unwrap(),
            Fill::Exists
        );
        assert!(decode(Err(Errno::FAULT), 0, page).is_err());
    }
}
