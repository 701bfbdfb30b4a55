//! `SIGINT` and `SIGTERM` for `herdless-uffd`: blocked and read from a
//! `signalfd`, so the serving loop stops with its summary instead of dying.

use std::os::fd::{FromRawFd, OwnedFd};

use super::RestoreError;

/// `SIGINT` and `SIGTERM` as a readable fd (`signalfd`), blocked in this
/// thread and every thread it starts from now on.
pub(super) struct Signals {
    pub(super) fd: OwnedFd,
}

impl Signals {
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

    /// The signal that arrived (0 if none could be read).
    pub(super) fn read(&self) -> i32 {
        let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
        match rustix::io::read(&self.fd, &mut info) {
            Ok(n) if n == info.len() => {
                let mut signo = [0u8; 4];
                signo.copy_from_slice(&info[..4]);
                u32::from_ne_bytes(signo) as i32
            }
            _ => 0,
        }
    }
}
