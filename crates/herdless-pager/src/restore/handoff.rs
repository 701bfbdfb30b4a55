//! Firecracker's UFFD handoff, the handler's side: the listening socket
//! (created with a chosen mode), the VMM's connection (its credentials
//! logged, strangers turned away), and the one message the VMM sends: the
//! JSON mapping list with the userfaultfd attached as `SCM_RIGHTS`.
//!
//! Firecracker connects, sends that one message and keeps the connection
//! open for as long as it runs (it leaks the socket on purpose, so that the
//! handler never sees the close before the message); nothing else is ever
//! sent. The handler therefore waits a bounded time for the message, reads
//! it whole (a long list may arrive in pieces; the descriptor comes with
//! the first), and from then on takes the connection's end as the VMM's.

use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use linux_raw_sys::general as uapi;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags};

use super::signals::Signals;
use super::socket_file::SocketFile;
use super::{Log, RestoreError, StoppedDuring};
use crate::uffd::Uffd;

/// The largest handoff message read (a mapping list is a few hundred bytes
/// per region); a longer one is refused
/// ([`RestoreError::MessageTooLarge`]).
///
/// # Examples
/// ```
/// use herdless_pager::restore::{RestoreError, MAX_MESSAGE};
/// let e = RestoreError::MessageTooLarge { max: MAX_MESSAGE };
/// assert_eq!(e.to_string(), "the handoff message exceeds 1048576 bytes");
/// ```
pub const MAX_MESSAGE: usize = 1 << 20;

/// Descriptors a message may carry before the handler calls it too many
/// (it only needs to see that there is more than one).
const FDS_SEEN: usize = 4;

/// Who is on the other end of a connection (`SO_PEERCRED`: as of its
/// `connect`), as the log lines name it.
///
/// # Examples
/// ```
/// use herdless_pager::restore::Peer;
/// let p = Peer { pid: 4242, uid: 123, gid: 123 };
/// assert_eq!(format!("connection from {p}"), "connection from pid 4242 uid 123 gid 123");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Process id.
    pub pid: i32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} uid {} gid {}", self.pid, self.uid, self.gid)
    }
}

/// Creates the socket at `path` with permission bits `mode` (never
/// broader for an instant: the process umask is narrowed around `bind`),
/// and listens on it. Refuses a path that exists. The umask is the
/// process's: a file another thread creates during the `bind` gets the
/// narrow one too (the binary binds before it starts any thread). The
/// socket file is removed when the returned [`SocketFile`] is dropped, a
/// failure after the `bind` included.
pub(crate) fn listen(path: &Path, mode: u32) -> Result<(UnixListener, SocketFile), RestoreError> {
    let sock = |what, source| RestoreError::Socket {
        path: path.to_path_buf(),
        what,
        source,
    };
    if path.symlink_metadata().is_ok() {
        return Err(RestoreError::SocketExists {
            path: path.to_path_buf(),
        });
    }
    let mode = mode & 0o777;
    // Narrowed for the `bind` only, restored right after.
    let old = rustix::process::umask(rustix::fs::Mode::from_bits_truncate(!mode & 0o777));
    let bound = UnixListener::bind(path);
    rustix::process::umask(old);
    let listener = bound.map_err(|e| sock("bind", e))?;
    let file = SocketFile::created(path);
    rustix::fs::chmod(path, rustix::fs::Mode::from_bits_truncate(mode))
        .map_err(|e| sock("chmod", e.into()))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| sock("set non-blocking", e))?;
    Ok((listener, file))
}

/// The credentials of `stream`'s peer.
pub(crate) fn peer_of(stream: &UnixStream) -> io::Result<Peer> {
    let c = rustix::net::sockopt::socket_peercred(stream)?;
    Ok(Peer {
        pid: c.pid.as_raw_nonzero().get(),
        uid: c.uid.as_raw(),
        gid: c.gid.as_raw(),
    })
}

/// What [`wait_readable`] saw.
enum Wait {
    Readable,
    TimedOut,
    /// A signal arrived (taken off the queue).
    Signal(i32),
}

/// Waits for `fd` to be readable until `deadline` (`None`: forever), or
/// for one of `signals`; a pending signal wins over a readable `fd`.
fn wait_readable(
    fd: impl AsFd,
    deadline: Option<Instant>,
    signals: Option<&Signals>,
) -> io::Result<Wait> {
    loop {
        let timeout = deadline.map(|d| {
            let left = d.saturating_duration_since(Instant::now());
            Timespec {
                tv_sec: left.as_secs() as i64,
                tv_nsec: i64::from(left.subsec_nanos()),
            }
        });
        let mut fds = vec![PollFd::new(&fd, PollFlags::IN)];
        if let Some(s) = signals {
            fds.push(PollFd::new(s, PollFlags::IN));
        }
        match poll(&mut fds, timeout.as_ref()) {
            Ok(0) => return Ok(Wait::TimedOut),
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        let signalled = fds.get(1).is_some_and(|f| !f.revents().is_empty());
        if let Some(signal) = signals.filter(|_| signalled).and_then(Signals::take) {
            return Ok(Wait::Signal(signal));
        }
        if !fds[0].revents().is_empty() {
            return Ok(Wait::Readable);
        }
    }
}

/// Accepts the VMM's connection, waiting at most `timeout` (`None`:
/// forever). Each peer's credentials are logged; with `allow_uid`, a peer
/// of another user is turned away before anything is read from it, and the
/// wait goes on. A signal of `signals` ends the wait
/// ([`RestoreError::Stopped`]).
pub(crate) fn accept(
    listener: &UnixListener,
    timeout: Option<Duration>,
    allow_uid: Option<u32>,
    log: &Log,
    signals: Option<&Signals>,
) -> Result<(UnixStream, Peer), RestoreError> {
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        match wait_readable(listener, deadline, signals)
            .map_err(|e| RestoreError::io("poll(socket)", e))?
        {
            Wait::Readable => {}
            Wait::TimedOut => return Err(RestoreError::AcceptTimeout(timeout.unwrap_or_default())),
            Wait::Signal(signal) => {
                return Err(RestoreError::Stopped {
                    signal,
                    during: StoppedDuring::WaitingForTheVmm,
                })
            }
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // The peer gave up between connect and accept: wait on.
            Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
            Err(e) => return Err(RestoreError::io("accept", e)),
        };
        let peer = peer_of(&stream).map_err(|e| RestoreError::io("SO_PEERCRED", e))?;
        match allow_uid {
            Some(uid) if uid != peer.uid => {
                log.line(&format!(
                    "refused a connection from {peer}: only uid {uid} may connect (--allow-uid)"
                ));
                drop(stream);
            }
            _ => {
                log.line(&format!("connection from {peer}"));
                return Ok((stream, peer));
            }
        }
    }
}

/// Receives the handoff message on `stream`: its body (the mapping list)
/// and the one userfaultfd it carries, within `timeout`. A signal of
/// `signals` ends the wait ([`RestoreError::Stopped`]).
pub(crate) fn receive(
    stream: &UnixStream,
    timeout: Duration,
    signals: Option<&Signals>,
) -> Result<(Vec<u8>, OwnedFd), RestoreError> {
    let deadline = Instant::now() + timeout;
    stream
        .set_nonblocking(true)
        .map_err(|e| RestoreError::io("set non-blocking", e))?;
    let mut body = Vec::new();
    let mut fds: Vec<OwnedFd> = Vec::new();
    let mut truncated_fds = false;
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        match wait_readable(stream, Some(deadline), signals)
            .map_err(|e| RestoreError::io("poll", e))?
        {
            Wait::Readable => {}
            Wait::TimedOut => return Err(RestoreError::HandoffTimeout(timeout)),
            Wait::Signal(signal) => {
                return Err(RestoreError::Stopped {
                    signal,
                    during: StoppedDuring::WaitingForTheHandoff,
                })
            }
        }
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(FDS_SEEN))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let msg = match rustix::net::recvmsg(
            stream,
            &mut [IoSliceMut::new(&mut chunk)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(m) => m,
            Err(Errno::AGAIN | Errno::INTR) => continue,
            Err(e) => return Err(RestoreError::io("recvmsg", e)),
        };
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = m {
                fds.extend(received);
            }
        }
        truncated_fds |= msg.flags.contains(ReturnFlags::CTRUNC);
        if msg.bytes == 0 {
            return Err(RestoreError::ClosedBeforeHandoff);
        }
        body.extend_from_slice(&chunk[..msg.bytes]);
        if body.len() > MAX_MESSAGE {
            return Err(RestoreError::MessageTooLarge { max: MAX_MESSAGE });
        }
        // Whole once it parses, or fails to for another reason than its
        // end (which the mapping parser then reports). An array can only
        // be whole once it ends in `]`: no parse before that.
        let text = body.trim_ascii();
        if text.first() == Some(&b'[') && text.last() != Some(&b']') {
            continue;
        }
        match serde_json::from_slice::<serde::de::IgnoredAny>(&body) {
            Err(e) if e.is_eof() => continue,
            _ => break,
        }
    }
    if truncated_fds || fds.len() > 1 {
        return Err(RestoreError::TooManyFileDescriptors {
            count: if truncated_fds {
                FDS_SEEN + 1
            } else {
                fds.len()
            },
        });
    }
    let fd = fds.pop().ok_or(RestoreError::NoFileDescriptor)?;
    Ok((body, fd))
}

/// Takes `fd` as the VMM's userfaultfd: refuses anything else, and one the
/// VMM never initialised (`UFFDIO_API`); reads the features its handshake
/// granted; makes it non-blocking (the handlers poll, then read), which
/// Firecracker's already is.
pub(crate) fn adopt_uffd(fd: OwnedFd, log: &Log) -> Result<Uffd, RestoreError> {
    let link = rustix::fs::readlink(format!("/proc/self/fd/{}", fd.as_raw_fd()), Vec::new())
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|e| format!("unknown ({e})"));
    if link != "anon_inode:[userfaultfd]" {
        return Err(RestoreError::NotUserfaultfd { what: link });
    }
    // An uninitialised userfaultfd polls as an error (fs/userfaultfd.c).
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    poll(&mut fds, Some(&zero)).map_err(|e| RestoreError::io("poll(userfaultfd)", e))?;
    if fds[0].revents().contains(PollFlags::ERR) {
        return Err(RestoreError::UserfaultfdNotInitialised);
    }
    let features = fdinfo_features(&fd).unwrap_or(0);
    if features & u64::from(uapi::UFFD_FEATURE_EVENT_REMOVE) == 0 {
        log.line(
            "warning: the userfaultfd lacks UFFD_FEATURE_EVENT_REMOVE: memory the VMM discards \
             (balloon) will be served from the memory file again instead of reading zeros",
        );
    }
    let flags = rustix::fs::fcntl_getfl(&fd).map_err(|e| RestoreError::io("F_GETFL", e))?;
    if !flags.contains(rustix::fs::OFlags::NONBLOCK) {
        rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK)
            .map_err(|e| RestoreError::io("F_SETFL", e))?;
    }
    Ok(Uffd::adopt(fd, features))
}

/// The features of a userfaultfd, from `/proc/self/fdinfo` (its line
/// `API:\t<api>:<features>:<ioctls>`, in hex).
fn fdinfo_features(fd: &OwnedFd) -> Option<u64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    let api = info.lines().find_map(|l| l.strip_prefix("API:"))?;
    let features = api.trim().split(':').nth(1)?;
    u64::from_str_radix(features, 16).ok()
}
