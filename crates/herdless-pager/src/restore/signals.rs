//! `SIGINT` and `SIGTERM` for `herdless-uffd`: blocked and read from a
//! `signalfd`, so that a signal at any stage (reading the memory file
//! ahead, waiting for the VMM or its handoff, copying everything, serving)
//! ends the restore through its ordinary exits: the socket it created
//! removed, no output written, the figures so far and exit status 128 + N,
//! instead of the default action killing the process mid-way.

use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};

use super::RestoreError;

/// `SIGINT` and `SIGTERM` as a readable fd (`signalfd`), blocked in this
/// thread and every thread it starts from now on. They stay blocked when
/// this is dropped: one arriving after the restore has decided how it
/// ends is left pending, not acted on (the binary exits right after).
pub(super) struct Signals {
    fd: OwnedFd,
}

impl Signals {
    /// Blocks `SIGINT` and `SIGTERM` in the calling thread and opens a
    /// non-blocking `signalfd` for them.
    pub(super) fn block() -> Result<Self, RestoreError> {
        // SAFETY: `set` is a local sigset_t, initialised by sigemptyset
        // before use; pthread_sigmask and signalfd only read it.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if r != 0 {
                return Err(RestoreError::io(
                    "pthread_sigmask",
                    std::io::Error::from_raw_os_error(r),
                ));
            }
            let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
            if fd < 0 {
                return Err(RestoreError::io(
                    "signalfd",
                    std::io::Error::last_os_error(),
                ));
            }
            Ok(Signals {
                fd: OwnedFd::from_raw_fd(fd),
            })
        }
    }

    /// The signal that arrived, taken off the queue; `None` if none is
    /// pending (never waits: the fd is non-blocking).
    pub(super) fn take(&self) -> Option<i32> {
        let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
        match rustix::io::read(&self.fd, &mut info) {
            Ok(n) if n == info.len() => {
                // `ssi_signo`, the struct's first field.
                let mut signo = [0u8; 4];
                signo.copy_from_slice(&info[..4]);
                Some(u32::from_ne_bytes(signo) as i32)
            }
            _ => None,
        }
    }
}

impl AsFd for Signals {
    /// Readable (`poll`) while a signal is pending.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
