//! The handoff, Firecracker's side: the mapping list as it serialises it,
//! sent with the userfaultfd attached over the handler's socket.

use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

use super::GuestMemory;

impl GuestMemory {
    /// The mapping list exactly as Firecracker serialises it.
    ///
    /// # Examples
    /// What `herdless-uffd` makes of it:
    /// ```
    /// use herdless_pager::restore::mappings;
    /// use herdless_pager::vmm::GuestMemory;
    /// let Ok(guest) = GuestMemory::new(&[1 << 20]) else { return Ok(()) }; // no userfaultfd: skip
    /// let page = rustix::param::page_size();
    /// let m = mappings::parse(guest.mappings_json().as_bytes(), 1 << 20, page)?;
    /// assert_eq!((m[0].base, m[0].size), (guest.regions()[0].base, 1 << 20));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    ///
    /// # Errors
    /// From `connect` (no socket there, nobody listening, no permission)
    /// and `sendmsg`.
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
    /// let mut b = [0u8];
    /// guest.read(guest.regions()[0].base + 1000, &mut b)?; // a fault, served
    /// assert_eq!(b[0], file[1000]);
    /// # drop(conn);
    /// # handler.join().unwrap()?;
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn handoff(&self, socket: &Path) -> io::Result<UnixStream> {
        let stream = UnixStream::connect(socket)?;
        send_with_fds(&stream, self.mappings_json().as_bytes(), &[self.uffd()])?;
        Ok(stream)
    }
}

/// Sends `bytes` on `stream` with `fds` attached (`SCM_RIGHTS`, none if
/// empty), the descriptors with the first `sendmsg` and the rest of a long
/// message after them.
///
/// # Errors
/// From `sendmsg` and `send` (`EPIPE`: the peer has gone); `Other` if the
/// descriptors do not fit the ancillary buffer.
///
/// # Examples
/// A handoff by hand, as [`GuestMemory::handoff`] does it:
/// ```
/// use std::os::unix::net::UnixStream;
/// use herdless_pager::vmm::{self, GuestMemory};
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
/// let conn = UnixStream::connect(&socket)?;
/// vmm::send_with_fds(&conn, guest.mappings_json().as_bytes(), &[guest.uffd()])?;
/// let mut b = [0u8];
/// guest.read(guest.regions()[0].base + 7, &mut b)?;
/// assert_eq!(b[0], file[7]);
/// # drop(conn);
/// # handler.join().unwrap()?;
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
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
